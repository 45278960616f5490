//! Distributed transactions, client side.

use crate::client::Client;
use crate::error::{ClientError, Result};
use pinax_common::{ErrorCode, HybridTime, TabletId, TxnId};
use pinax_proto::{LiveWrite, ReadPoint, Request, Response, ScanSpec, TabletInfo, WriteOp};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Open,
    Committed,
    Aborted,
}

/// A transaction. Reads see the database as of its read time plus its own earlier
/// writes; writes are provisional until [`Txn::commit`]. Dropping an open transaction
/// aborts it.
pub struct Txn {
    client: Client,
    id: TxnId,
    read_ht: HybridTime,
    /// Statement number: writes are tagged with it; reads see writes of lower numbers.
    seq: u32,
    participants: Vec<TabletId>,
    /// Per participant: its location and the highest statement number
    /// written there (for rollbacks to a savepoint).
    participant_writes: Vec<(pinax_proto::TabletInfo, u32)>,
    status_addr: String,
    created: bool,
    state: State,
}

impl Txn {
    pub(crate) fn new(client: Client) -> Txn {
        // The first 8 bytes name the transaction's home node (the seed), whose
        // status tablet keeps its record: any node meeting an intent of this
        // transaction knows which status tablet to ask.
        let mut id = TxnId(rand::random());
        id.0[..8].copy_from_slice(&client.inner.seed_node_id.load(std::sync::atomic::Ordering::Relaxed).to_be_bytes());
        let read_ht = client.now();
        let status_addr = client.inner.seed.clone();
        Txn { client, id, read_ht, seq: 1, participants: Vec::new(), participant_writes: Vec::new(), status_addr, created: false, state: State::Open }
    }

    pub fn id(&self) -> TxnId {
        self.id
    }
    pub fn read_ht(&self) -> HybridTime {
        self.read_ht
    }
    /// Current statement number.
    pub fn seq(&self) -> u32 {
        self.seq
    }
    /// Set the statement number (the SQL layer numbers its statements).
    pub fn set_seq(&mut self, seq: u32) {
        self.seq = seq;
    }

    /// Move the read time (READ COMMITTED takes a new one per statement). Writes
    /// after this conflict with commits after the new read time.
    pub fn set_read_ht(&mut self, ht: HybridTime) {
        self.read_ht = ht;
    }

    /// The read point of statement `seq`: the read time plus own writes of
    /// statements numbered below `seq`.
    pub fn read_point(&self, seq: u32) -> ReadPoint {
        ReadPoint { read_ht: self.read_ht, txn: Some((self.id, seq)), uncertain_from: HybridTime::INVALID }
    }

    /// Whether the transaction has written anything (has a status record).
    pub fn has_writes(&self) -> bool {
        self.created
    }

    fn check_open(&self) -> Result<()> {
        if self.state != State::Open {
            return Err(ClientError::TxnFinished);
        }
        Ok(())
    }

    /// Write `ops` provisionally as the current statement, then move to the next
    /// statement (so later reads see these writes). A conflict with another
    /// transaction's pending intent fails at once (see [`Txn::write_waiting`]).
    pub fn write(&mut self, table: &str, ops: Vec<WriteOp>) -> Result<()> {
        self.write_waiting(table, ops, &mut |_, _| Ok(false))
    }

    /// [`Txn::write`], but a tablet write that conflicts with another transaction's
    /// pending intent calls `on_blocked(client, blocker)`: `Ok(true)` (typically
    /// after [`Client::wait_txn`] saw it end) retries that tablet's write, `Ok(false)`
    /// returns the conflict, an error is returned as is. Each tablet's write is
    /// atomic, so retrying one is safe.
    pub fn write_waiting(&mut self, table: &str, ops: Vec<WriteOp>, on_blocked: &mut dyn FnMut(&Client, TxnId) -> Result<bool>) -> Result<()> {
        self.check_open()?;
        if ops.is_empty() {
            return Ok(());
        }
        let info = self.client.table(table)?;
        let mut queue: std::collections::VecDeque<(TabletInfo, Vec<WriteOp>)> =
            Client::group_by_tablet(&info, ops).into_iter().map(|(idx, ops)| (info.tablets[idx].clone(), ops)).collect();
        while let Some((ti, ops)) = queue.pop_front() {
            let req =
                Request::Write { tablet: ti.id, ops, read_ht: Some(self.read_ht), txn: Some((self.id, self.seq)), request: crate::client::new_request_id() };
            match self.send_or_back(&ti, req, on_blocked) {
                Ok(Response::Written { .. }) => {}
                Ok(r) => return Err(ClientError::Protocol(format!("unexpected response {r:?}"))),
                Err((e, Some(Request::Write { ops, .. }))) if e.code() == ErrorCode::TabletSplit => {
                    // Split since the locations were cached: the ops go to the tablets
                    // holding their keys now, next, in key order.
                    let _ = self.client.refresh_table(table);
                    for sub in self.client.covering(ti.id)?.into_iter().rev() {
                        let mine = WriteOp::for_partition(&ops, &sub.partition);
                        if !mine.is_empty() {
                            queue.push_front((sub, mine));
                        }
                    }
                }
                Err((e, _)) => return Err(e),
            }
        }
        self.seq += 1;
        Ok(())
    }

    /// Write `op` (a blind patch or a delete of one row) as the current statement
    /// only if the row is live for the transaction (`Request::WriteIntentIfLive`:
    /// its own earlier writes, else the newest committed version), then move to the
    /// next statement. Returns what the tablet did: `NeedsRow` (a patch over a row
    /// the transaction wrote, or carrying two patches) and `Absent` wrote nothing.
    /// `on_blocked` as for [`Txn::write_waiting`].
    pub fn write_if_live(&mut self, table: &str, op: WriteOp, on_blocked: &mut dyn FnMut(&Client, TxnId) -> Result<bool>) -> Result<LiveWrite> {
        self.check_open()?;
        let info = self.client.table(table)?;
        let mut ti = info.tablets[info.tablet_index_for(&op.key)].clone();
        let mut req = Request::WriteIntentIfLive { tablet: ti.id, op, txn: self.id, seq: self.seq, request: crate::client::new_request_id() };
        let outcome = loop {
            match self.send_or_back(&ti, req, on_blocked) {
                Ok(Response::WrittenIfLive { outcome, .. }) => break outcome,
                Ok(r) => return Err(ClientError::Protocol(format!("unexpected response {r:?}"))),
                Err((e, Some(Request::WriteIntentIfLive { op, txn, seq, request, .. }))) if e.code() == ErrorCode::TabletSplit => {
                    // Split since the locations were cached: to the half holding the row.
                    let _ = self.client.refresh_table(table);
                    let Some(sub) = self.client.covering(ti.id)?.into_iter().find(|t| t.partition.contains(&op.key)) else { return Err(e) };
                    ti = sub;
                    req = Request::WriteIntentIfLive { tablet: ti.id, op, txn, seq, request };
                }
                Err((e, _)) => return Err(e),
            }
        };
        self.seq += 1;
        Ok(outcome)
    }

    /// Delete every row of `table` as the current statement, in the tablets
    /// (`Request::DeleteAll`: one intent per tablet, no row read or written one by
    /// one), then move to the next statement. Returns how many rows were deleted
    /// (those live at the read time). The transaction must have written nothing to
    /// the table before, and writes nothing to it after. `on_blocked` as for
    /// [`Txn::write_waiting`].
    pub fn delete_all(&mut self, table: &str, on_blocked: &mut dyn FnMut(&Client, TxnId) -> Result<bool>) -> Result<u64> {
        self.check_open()?;
        let info = self.client.table(table)?;
        let mut count = 0;
        let mut queue: std::collections::VecDeque<TabletInfo> = info.tablets.iter().cloned().collect();
        while let Some(ti) = queue.pop_front() {
            let req = Request::DeleteAll { tablet: ti.id, txn: self.id, seq: self.seq, read_ht: self.read_ht };
            match self.send_or_back(&ti, req, on_blocked) {
                Ok(Response::DeletedAll { count: n }) => count += n,
                Ok(r) => return Err(ClientError::Protocol(format!("unexpected response {r:?}"))),
                Err((e, _)) if e.code() == ErrorCode::TabletSplit => {
                    // Split since the locations were cached: its halves instead.
                    let _ = self.client.refresh_table(table);
                    for sub in self.client.covering(ti.id)?.into_iter().rev() {
                        queue.push_front(sub);
                    }
                }
                Err((e, _)) => return Err(e),
            }
        }
        self.seq += 1;
        Ok(count)
    }

    /// Send the current statement's write `req` to tablet `ti`: the tablet becomes
    /// a participant, the status record is created first if it is not yet (with
    /// the write when the status node leads the tablet), and a conflict with
    /// another transaction's pending intent calls `on_blocked`. Returns the write's answer.
    // (The request comes back only on errors, rare; boxing it would cost every caller a match on a box.)
    #[allow(clippy::result_large_err)]
    fn send_or_back(
        &mut self,
        ti: &pinax_proto::TabletInfo,
        mut req: Request,
        on_blocked: &mut dyn FnMut(&Client, TxnId) -> Result<bool>,
    ) -> std::result::Result<Response, (ClientError, Option<Request>)> {
        match self.participants.iter().position(|p| *p == ti.id) {
            Some(i) => self.participant_writes[i].1 = self.participant_writes[i].1.max(self.seq),
            None => {
                self.participants.push(ti.id);
                self.participant_writes.push((ti.clone(), self.seq));
            }
        }
        if !self.created {
            // The status record must exist before the first intent. When the
            // status node leads this tablet too, one request does both.
            if matches!(req, Request::Write { .. } | Request::WriteIntentIfLive { .. }) && self.client.leader_of(ti) == self.status_addr {
                match self.create_and_write(req).map_err(|e| (e, None))? {
                    Ok(r) => return Ok(r),
                    Err(back) => req = back,
                }
            } else if let Err(e) = self.create() {
                return Err((e, Some(req)));
            }
        }
        loop {
            let (res, back) = self.client.call_tablet_returning(ti, req);
            match res {
                Ok(r) => return Ok(r),
                Err(e) => match e.blocker() {
                    Some(b) if b != self.id => match on_blocked(&self.client, b) {
                        Ok(true) => req = back,
                        Ok(false) => return Err((e, Some(back))),
                        Err(e) => return Err((e, Some(back))),
                    },
                    _ => return Err((e, Some(back))),
                },
            }
        }
    }

    /// Create the status record (before the first intent).
    fn create(&mut self) -> Result<()> {
        match self.client.call_at(&self.status_addr, Request::CreateTxn { txn: self.id })? {
            Response::TxnCreated { .. } => {}
            r => return Err(ClientError::Protocol(format!("unexpected response {r:?}"))),
        }
        self.created = true;
        self.client.register_txn(self.id, self.status_addr.clone());
        Ok(())
    }

    /// Create the status record and do the first write `write` in one round trip
    /// (`CreateTxnAndWrite`, to the status node, which leads the write's tablet).
    /// `Ok(Ok(answer))`: both done; `Ok(Err(write))`: the record was created, the
    /// write failed and is handed back to be sent the ordinary way (which follows a
    /// moved leader and waits for a blocker); an error: the record was not created.
    fn create_and_write(&mut self, write: Request) -> Result<std::result::Result<Response, Request>> {
        let req = Request::CreateTxnAndWrite { txn: self.id, write: Box::new(write) };
        let (res, back) = self.client.call_at_returning(&self.status_addr, req);
        let Request::CreateTxnAndWrite { write, .. } = back else { unreachable!("the request handed back") };
        match res? {
            Response::TxnWritten { write: res } => {
                self.created = true;
                self.client.register_txn(self.id, self.status_addr.clone());
                match res {
                    Ok(r) => Ok(Ok(*r)),
                    Err(_) => Ok(Err(*write)),
                }
            }
            r => Err(ClientError::Protocol(format!("unexpected response {r:?}"))),
        }
    }

    /// Roll back to statement `from_seq` (ROLLBACK TO SAVEPOINT): every write and
    /// lock of statements numbered `from_seq` and later is dropped on every tablet
    /// written; earlier ones stay. On error the transaction is in an unknown state
    /// between the two (the caller must not commit it without retrying this).
    pub fn rollback_to(&mut self, from_seq: u32) -> Result<()> {
        self.check_open()?;
        for (ti, max_seq) in self.participant_writes.iter_mut() {
            if *max_seq < from_seq {
                continue; // nothing written there since
            }
            let mut queue = vec![ti.clone()];
            while let Some(ti) = queue.pop() {
                match self.client.call_tablet(&ti, Request::RollbackTxn { tablet: ti.id, txn: self.id, from_seq }) {
                    Ok(Response::Done) => {}
                    // A dropped table's tablet: nothing left to roll back.
                    Err(ClientError::Rpc(e)) if e.code == ErrorCode::TabletNotFound => {}
                    // It split: its intents went to its halves, which roll them back.
                    Err(ClientError::Rpc(e)) if e.code == ErrorCode::TabletSplit => queue.extend(self.client.covering(ti.id)?),
                    Ok(r) => return Err(ClientError::Protocol(format!("unexpected response {r:?}"))),
                    Err(e) => return Err(e),
                }
            }
            *max_seq = from_seq.saturating_sub(1);
        }
        Ok(())
    }

    fn at(&self) -> ReadPoint {
        self.read_point(self.seq)
    }

    pub fn get(&self, table: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.check_open()?;
        self.client.read_at(table, key, self.at()).map(|(v, _)| v)
    }

    pub fn scan(&self, table: &str, spec: ScanSpec) -> Result<Vec<pinax_proto::Row>> {
        self.check_open()?;
        self.client.scan_at(table, spec, self.at()).map(|(r, _)| r)
    }

    /// Commit. Returns the commit hybrid time, or `None` for a transaction that
    /// wrote nothing.
    pub fn commit(mut self) -> Result<Option<HybridTime>> {
        self.check_open()?;
        if !self.created {
            self.state = State::Committed;
            return Ok(None);
        }
        let res = self.client.call_at(&self.status_addr, Request::CommitTxn { txn: self.id, participants: self.participants.clone() });
        self.client.unregister_txn(self.id);
        match res {
            Ok(Response::Committed { commit_ht }) => {
                self.state = State::Committed;
                Ok(Some(commit_ht))
            }
            Ok(r) => Err(ClientError::Protocol(format!("unexpected response {r:?}"))),
            Err(e) => {
                // Aborted (e.g. expired): make sure intents go away promptly.
                let _ = self.send_abort();
                Err(e)
            }
        }
    }

    fn send_abort(&mut self) -> Result<()> {
        self.state = State::Aborted;
        self.client.unregister_txn(self.id);
        if !self.created {
            return Ok(());
        }
        match self.client.call_at(&self.status_addr, Request::AbortTxn { txn: self.id, participants: self.participants.clone() })? {
            Response::Done => Ok(()),
            r => Err(ClientError::Protocol(format!("unexpected response {r:?}"))),
        }
    }

    pub fn abort(mut self) -> Result<()> {
        self.check_open()?;
        self.send_abort()
    }
}

impl Drop for Txn {
    fn drop(&mut self) {
        if self.state == State::Open {
            let _ = self.send_abort();
        }
    }
}
