//! Paging over a storage key range at one read point.

use crate::state::{self, FlushError};
use pgrx::pg_sys;
use pinax_client::{Client, ClientError};
use pinax_proto::{AggSpec, GroupBy, ReadPoint, Row, RowFilter, ScanSpec};
use std::collections::VecDeque;

/// Rows fetched per storage round trip, at most...
pub const PAGE_ROWS: usize = 1024;
/// ...and in the first one: pages grow fourfold from here, so that a scan the
/// executor stops early (LIMIT, EXISTS, a merge join) reads little more than it uses.
const FIRST_PAGE_ROWS: usize = 16;

/// The command id a snapshot reads as of: own writes of lower commands are visible.
/// Non-MVCC snapshots (SnapshotAny, SnapshotDirty, SnapshotSelf) see every own write.
///
/// # Safety
/// `snapshot` must be null or a valid snapshot.
pub unsafe fn snapshot_cid(snapshot: pg_sys::Snapshot) -> u32 {
    // SAFETY: the caller upholds this function's contract (# Safety).
    unsafe {
        if !snapshot.is_null() && (*snapshot).snapshot_type == pg_sys::SnapshotType::SNAPSHOT_MVCC {
            (*snapshot).curcid
        } else {
            u32::MAX
        }
    }
}

/// A forward or backward walk over `[start, end)` of one storage table. The read
/// point is taken at the first page (after flushing buffered writes) and kept for
/// every later page, so the walk sees one consistent state.
pub struct Pager {
    pub storage: String,
    start: Vec<u8>,
    end: Option<Vec<u8>>,
    reverse: bool,
    curcid: u32,
    at: Option<ReadPoint>,
    rows: VecDeque<Row>,
    done: bool,
    /// Rows to ask for in the next page.
    page: usize,
    /// Conditions the tablets check before returning a row (pushed down).
    pub filter: Option<RowFilter>,
    /// The range holds at most the row `start` (a primary-key lookup by every key
    /// column): the tablet probes that row (`ScanSpec::point`).
    pub point: bool,
    /// Read the newest committed rows (a dirty snapshot's look-up), not at the
    /// statement's read time (`Backend::read_point_latest`).
    pub latest: bool,
    /// The relation (table or index OID) whose scan this walk is: its first read
    /// asks for the rows a LIMIT above needs, if one does (`limit.rs`).
    limit_relid: Option<u32>,
    /// Keep the key of the row returned last (`last`; empty: none yet, keys never
    /// are): index scans, which may change direction from there. Off for other
    /// walks, which would copy every key for nothing.
    pub remember_last: bool,
    last: Vec<u8>,
}

impl Pager {
    pub fn new(storage: String, start: Vec<u8>, end: Option<Vec<u8>>, reverse: bool, curcid: u32) -> Pager {
        Pager {
            storage,
            start,
            end,
            reverse,
            curcid,
            at: None,
            rows: VecDeque::new(),
            done: false,
            page: FIRST_PAGE_ROWS,
            filter: None,
            point: false,
            latest: false,
            limit_relid: None,
            remember_last: false,
            last: Vec::new(),
        }
    }

    /// This walk scans relation `relid` (a table's or an index's OID): a LIMIT
    /// right above the scan sets its first read's size.
    pub fn under_limit_of(&mut self, relid: u32) {
        self.limit_relid = Some(relid);
    }

    /// How many rows the walk would return, counted in the tablets (no rows are
    /// shipped): the whole range at once, then `None`. With a filter: how many
    /// certainly match it; the rows it cannot decide are queued for `next_row`.
    pub fn next_count(&mut self) -> Result<Option<u64>, FlushError> {
        if self.done {
            return Ok(None);
        }
        let ((n, undecided), read_ht, at) = self.reading(|client, storage, spec, at| client.count_at(storage, spec, at), 0)?;
        self.at = Some(ReadPoint { read_ht, ..at });
        self.done = true;
        self.rows.extend(undecided);
        Ok(Some(n))
    }

    /// `aggs` over the rows the walk would return that match its filter, computed
    /// in the tablets: once, then `None`. The rows the tablets could not decide or
    /// fold are queued for `next_row`.
    pub fn next_aggregate(&mut self, aggs: &[AggSpec], group_by: Option<GroupBy>) -> Result<Option<pinax_client::Aggregated>, FlushError> {
        if self.done {
            return Ok(None);
        }
        let op = |client: &Client, storage: &str, mut spec: ScanSpec, at| {
            spec.aggregates = aggs.to_vec();
            spec.group_by = group_by;
            client.aggregate_at(storage, spec, at)
        };
        let (mut agg, read_ht, at) = self.reading(op, 0)?;
        self.at = Some(ReadPoint { read_ht, ..at });
        self.done = true;
        self.rows.extend(std::mem::take(&mut agg.undecided));
        Ok(Some(agg))
    }

    /// The storage client and this walk's read point.
    fn client_at(&mut self) -> Result<(Client, ReadPoint), FlushError> {
        let at = self.read_point()?;
        let client = state::with(|b| b.client()).map_err(storage_err)?;
        Ok((client, at))
    }

    /// The rest of the walk's range, at most `limit` rows (0: all).
    fn spec(&self, limit: usize) -> ScanSpec {
        ScanSpec {
            start: self.start.clone(),
            end: self.end.clone(),
            reverse: self.reverse,
            limit,
            filter: self.filter.clone(),
            point: self.point,
            ..ScanSpec::default()
        }
    }

    /// The read point this walk uses: the statement's until the walk's first read
    /// succeeds, then that one for every later page.
    pub fn read_point(&mut self) -> Result<ReadPoint, FlushError> {
        if let Some(at) = self.at {
            return Ok(at);
        }
        if self.latest {
            return state::with(|b| b.read_point_latest(self.curcid));
        }
        state::with(|b| b.read_point(self.curcid))
    }

    /// Run storage read `op` (over this walk's table and `spec(limit)`) at the
    /// walk's read point. A read that meets a value in its clock-uncertainty
    /// window (`ReadRestart`) runs again at that value's time if nothing was read
    /// at the current read time yet (the statement's, or the transaction's); else
    /// the error stands (40001; a READ COMMITTED statement runs again whole).
    fn reading<T>(
        &mut self,
        op: impl Fn(&Client, &str, ScanSpec, ReadPoint) -> Result<(T, pinax_common::HybridTime), ClientError>,
        limit: usize,
    ) -> Result<(T, pinax_common::HybridTime, ReadPoint), FlushError> {
        loop {
            let (client, at) = self.client_at()?;
            match op(&client, &self.storage, self.spec(limit), at) {
                Ok((v, read_ht)) => {
                    state::with(|b| b.read_served());
                    return Ok((v, read_ht, at));
                }
                Err(e) => {
                    if let Some(ht) = e.restart_ht() {
                        if self.at.is_none() && state::with(|b| b.read_restart(ht)) {
                            continue;
                        }
                        state::with(|b| b.read_restart_failed(ht));
                    }
                    return Err(storage_err(e));
                }
            }
        }
    }

    /// Rows fetched and not yet returned.
    pub fn queued(&self) -> usize {
        self.rows.len()
    }

    pub fn next_row(&mut self) -> Result<Option<Row>, FlushError> {
        loop {
            if let Some(r) = self.rows.pop_front() {
                if self.remember_last {
                    self.last.clear();
                    self.last.extend_from_slice(&r.0);
                }
                return Ok(Some(r));
            }
            if self.done {
                return Ok(None);
            }
            self.fetch()?;
        }
    }

    fn fetch(&mut self) -> Result<(), FlushError> {
        if let Some(relid) = self.limit_relid.take() {
            if let Some(n) = crate::limit::first_page(relid) {
                self.page = n.min(PAGE_ROWS);
            }
        }
        let limit = self.page;
        if crate::guc::trace_scans() {
            pgrx::notice!("pinax: storage read of up to {limit} rows");
        }
        self.page = (self.page * 4).min(PAGE_ROWS);
        let (rows, read_ht, at) = self.reading(|client, storage, spec, at| client.scan_at(storage, spec, at), limit)?;
        self.at = Some(ReadPoint { read_ht, ..at });
        if rows.len() < limit {
            self.done = true;
        } else if let Some((last, _)) = rows.last() {
            if self.reverse {
                self.end = Some(last.clone());
            } else {
                let mut next = last.clone();
                next.push(0);
                self.start = next;
            }
        }
        self.rows.extend(rows);
        Ok(())
    }

    /// ANALYZE's sample of the whole walk in one go: every `every`-th row (all
    /// when `every <= 1`) is queued for [`Pager::next_row`], chosen in the tablets
    /// (the others are counted there, not shipped). If that yields fewer than half
    /// of `keep` rows (the walk has fewer rows than `every` assumed), it samples
    /// again, at the same read point, for about `keep`. Returns how many rows the
    /// walk has in all.
    pub fn sample(&mut self, mut every: u32, keep: u64) -> Result<u64, FlushError> {
        loop {
            let ((rows, n), read_ht, at) =
                self.reading(|client, storage, spec, at| client.sample_at(storage, spec, at, every).map(|(rows, n, ht)| ((rows, n), ht)), 0)?;
            self.at = Some(ReadPoint { read_ht, ..at });
            if every > 1 && (rows.len() as u64) < keep / 2 && (rows.len() as u64) < n {
                every = (n / keep.max(1)).max(1) as u32;
                continue;
            }
            self.rows.extend(rows);
            self.done = true;
            return Ok(n);
        }
    }

    /// The key of the row [`Pager::next_row`] returned last, if any (kept only
    /// with `remember_last`).
    pub fn last_key(&self) -> Option<&[u8]> {
        (!self.last.is_empty()).then_some(&self.last[..])
    }

    /// The read point the walk settled on (after its first read), if any.
    pub fn settled_at(&self) -> Option<ReadPoint> {
        self.at
    }

    /// Read at `at` (a read point another walk of the same scan settled on).
    pub fn settle_at(&mut self, at: Option<ReadPoint>) {
        if at.is_some() {
            self.at = at;
        }
    }

    /// Point read of `key` at this walk's read point.
    pub fn get(&mut self, storage: &str, key: &[u8]) -> Result<Option<Vec<u8>>, FlushError> {
        let (v, read_ht, at) = self.reading(|client, _, _, at| client.read_at(storage, key, at), 0)?;
        self.at = Some(ReadPoint { read_ht, ..at });
        Ok(v)
    }

    /// Point reads of `keys` at this walk's read point, one request per tablet:
    /// the values in the order of `keys`.
    pub fn get_many(&mut self, storage: &str, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, FlushError> {
        if let [key] = keys {
            return Ok(vec![self.get(storage, key)?]);
        }
        if crate::guc::trace_scans() {
            pgrx::notice!("pinax: storage read of {} rows by key", keys.len());
        }
        let (v, read_ht, at) = self.reading(|client, _, _, at| client.read_many_at(storage, keys, at), 0)?;
        self.at = Some(ReadPoint { read_ht, ..at });
        Ok(v)
    }
}

/// A storage error not tied to one table.
fn storage_err(error: ClientError) -> FlushError {
    FlushError { table: String::new(), error }
}

/// Where a [`BiWalk`] stands in one of its ranges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Bound {
    /// Before the range's first row.
    Start,
    /// On this row (the last one returned).
    Key(Vec<u8>),
    /// After the range's last row.
    End,
}

/// A walk over key ranges (in ascending order, disjoint) that may change
/// direction at any row, as PostgreSQL's scans may (`FETCH BACKWARD` and
/// `FETCH PRIOR` on a SCROLL cursor, `FETCH LAST`): a backward step returns the
/// row before the last one returned, as heap's scans do, and a walk that ran off
/// either end steps back onto the last row it passed. Each change of direction
/// starts a [`Pager`] from the current row, in the new direction, at the read
/// point of the first read (so both directions see one state); nothing is
/// buffered.
pub struct BiWalk {
    ranges: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    /// The range the walk is in and where in it; None before the first row.
    pos: Option<(usize, Bound)>,
    backward: bool,
    pager: Option<Pager>,
    at: Option<ReadPoint>,
}

impl BiWalk {
    /// A walk that carries on from where a forward walk of the same ranges
    /// stands (`pos`: range and place in it; None before its first row), at
    /// the read point it settled on.
    pub fn resume(ranges: Vec<(Vec<u8>, Option<Vec<u8>>)>, pos: Option<(usize, Bound)>, at: Option<ReadPoint>) -> BiWalk {
        BiWalk { ranges, pos, backward: false, pager: None, at }
    }

    /// The pager of the row [`BiWalk::next`] returned last (to read at its read point).
    pub fn pager(&mut self) -> Option<&mut Pager> {
        self.pager.as_mut()
    }

    /// The next row in direction `backward` (None past the last range's end, or
    /// before the first's start). `make(start, end, reverse, whole)` makes the
    /// pager of a range, or of part of it (`whole` false: what is left of it past
    /// a row returned).
    pub fn next(&mut self, backward: bool, make: &mut dyn FnMut(Vec<u8>, Option<Vec<u8>>, bool, bool) -> Pager) -> Result<Option<Row>, FlushError> {
        if backward != self.backward {
            self.backward = backward;
            self.pager = None;
        }
        let n = self.ranges.len();
        if n == 0 {
            return Ok(None);
        }
        loop {
            if self.pager.is_none() {
                let (i, b) = self.pos.clone().unwrap_or(if backward { (n - 1, Bound::End) } else { (0, Bound::Start) });
                let (start, end) = self.ranges[i].clone();
                let whole = !matches!(b, Bound::Key(_));
                let part = match (backward, b) {
                    (false, Bound::End) | (true, Bound::Start) => {
                        // Nothing left of this range this way: the next one's edge.
                        let next = if backward { i.checked_sub(1).map(|j| (j, Bound::End)) } else { (i + 1 < n).then_some((i + 1, Bound::Start)) };
                        match next {
                            Some(p) => {
                                self.pos = Some(p);
                                continue;
                            }
                            None => {
                                self.pos = Some((i, if backward { Bound::Start } else { Bound::End }));
                                return Ok(None);
                            }
                        }
                    }
                    (_, Bound::Start) | (_, Bound::End) => (start, end),
                    (false, Bound::Key(k)) => {
                        let mut after = k;
                        after.push(0);
                        (after, end)
                    }
                    (true, Bound::Key(k)) => (start, Some(k)),
                };
                self.pos = Some((i, self.pos.clone().map_or(if backward { Bound::End } else { Bound::Start }, |p| p.1)));
                let mut pager = make(part.0, part.1, backward, whole);
                pager.settle_at(self.at);
                self.pager = Some(pager);
            }
            let pager = self.pager.as_mut().expect("made above");
            let row = pager.next_row()?;
            self.at = self.at.or(pager.settled_at());
            let i = self.pos.as_ref().map_or(0, |p| p.0);
            match row {
                Some(r) => {
                    self.pos = Some((i, Bound::Key(r.0.clone())));
                    return Ok(Some(r));
                }
                None => {
                    self.pager = None;
                    self.pos = Some((i, if backward { Bound::Start } else { Bound::End }));
                }
            }
        }
    }
}
