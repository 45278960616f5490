//! Tablet splits in the catalog: the persisted [`SplitRecord`] of each split
//! the master started, and the catalog's side of a split (see
//! docs/plans/tablet-splitting.md §4).
//!
//! A split goes through three states, each one catalog write:
//! 1. [`Catalog::request_split`] (M1) allocates the two children's ids from the
//!    catalog's one id sequence (so an id is never used twice, even when the
//!    split never happens) and records the split as [`SplitState::Requested`].
//!    From then on the children are known: [`Catalog::locate`] answers
//!    [`Located::Pending`] for them, never "does not exist", so a node's orphan
//!    check keeps a leaderless new child.
//! 2. [`Catalog::finish_split`] (M3, once the parent's leader answered that the
//!    split is applied, at some key) swaps the parent for its two children in
//!    the table's tablet list and marks the record [`SplitState::Applied`], in
//!    one batch: nobody ever sees both or neither. [`Catalog::locate`] of the
//!    parent then answers [`Located::Split`]: the table's tablets that now hold
//!    its keys.
//! 3. [`Catalog::retire_split`] (M4 done: the children have replicas on every
//!    node the catalog names and the parent's replicas were dropped) marks it
//!    [`SplitState::Retired`]; [`Catalog::forget_retired_splits`] deletes retired
//!    records after a while (resolutions of transactions that wrote to the
//!    parent look it up until then).
//!
//! Every step is idempotent: the master that takes over after a crash
//! resumes each record from its state.
//!
//! Layout: `"x/" ++ parent tablet id (u64 BE)` → blob(kind `'X'`, v1,
//! bincode([`SplitRecord`])).

use super::{decode_record, encode_record, prefixed, table_key, Catalog, CatalogError, State};
use pinax_common::{TableId, TabletId};
use pinax_engine::{Cf, KvEngine, OwnedBatch, WriteBatch};
use pinax_proto::{Partition, TableInfo, TabletInfo};

pub(super) const SPLIT_PREFIX: &[u8] = b"x/";
pub(super) const SPLIT_KIND: u8 = b'X';
pub(super) const SPLIT_VERSION: u8 = 1;

/// Where a split is.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SplitState {
    /// Recorded, children ids allocated; the parent's leader may or may not
    /// have applied it yet.
    Requested,
    /// The parent split at `at` (user key: the right child's first) and the
    /// table lists the children in its place.
    Applied { at: Vec<u8> },
    /// The children are placed everywhere and the parent's replicas were
    /// dropped; kept a while for lookups of the parent.
    Retired { at: Vec<u8> },
}

/// A split the master started: the catalog's record of it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SplitRecord {
    /// The table's own name and id (the id tells a table dropped and created
    /// again under the same name apart).
    pub table: String,
    pub table_id: TableId,
    /// The parent tablet as the catalog listed it (when requested, then when
    /// swapped: its replicas then are the ones to drop).
    pub parent: TabletInfo,
    /// The children's ids (left: keys below the split key).
    pub children: [TabletId; 2],
    /// The split key asked for (None: the parent's leader picks its middle by
    /// size).
    pub requested_at: Option<Vec<u8>>,
    pub state: SplitState,
    /// When the record entered its state (the master's clock, microseconds).
    pub since_micros: u64,
}

impl SplitRecord {
    /// The key the parent split at, once applied.
    pub fn at(&self) -> Option<&[u8]> {
        match &self.state {
            SplitState::Requested => None,
            SplitState::Applied { at } | SplitState::Retired { at } => Some(at),
        }
    }

    /// The children as the table lists them once swapped in: the parent's
    /// halves at `at`, with the parent's leader and replicas.
    pub fn child_infos(&self, at: &[u8]) -> [TabletInfo; 2] {
        let half = |id: TabletId, start: Vec<u8>, end: Option<Vec<u8>>| TabletInfo {
            id,
            partition: Partition { start, end },
            leader: self.parent.leader.clone(),
            replicas: self.parent.replicas.clone(),
        };
        let p = &self.parent.partition;
        [half(self.children[0], p.start.clone(), Some(at.to_vec())), half(self.children[1], at.to_vec(), p.end.clone())]
    }
}

/// Whether user key `at` lies strictly inside `p` (a split there leaves two
/// non-empty halves).
pub fn splits_partition(p: &Partition, at: &[u8]) -> bool {
    at > p.start.as_slice() && p.end.as_deref().is_none_or(|end| at < end)
}

/// What the catalog knows of a tablet id ([`Catalog::locate`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Located {
    /// A tablet of a table, where it is.
    Tablet(TabletInfo),
    /// A child of a split not swapped in yet (its parent's id): it exists, or
    /// is about to, but does not serve in the catalog's eyes.
    Pending(TabletId),
    /// A parent whose split was swapped: the table's tablets holding its keys
    /// now (its children, or theirs).
    Split(Vec<TabletInfo>),
    /// Unknown: never existed, or its table was dropped.
    NotFound,
}

fn split_key(parent: TabletId) -> Vec<u8> {
    prefixed(SPLIT_PREFIX, parent.0.to_be_bytes())
}

fn put_split(b: &mut OwnedBatch, r: &SplitRecord) {
    b.put(Cf::Regular, &split_key(r.parent.id), &encode_record(SPLIT_KIND, SPLIT_VERSION, r));
}

/// A split record read from the catalog's engine.
pub(super) fn decode_split(v: &[u8]) -> Result<SplitRecord, CatalogError> {
    decode_record(SPLIT_KIND, SPLIT_VERSION, v, "split record")
}

/// The table (own name) listing tablet `id`.
fn table_of(st: &State, id: TabletId) -> Option<&TableInfo> {
    st.tables.values().find(|t| t.tablets.iter().any(|ti| ti.id == id))
}

impl<E: KvEngine> Catalog<E> {
    /// M1: record a split of tablet `tablet` (at user key `at`, or where its
    /// leader finds its middle), allocating its children's ids; `now`: the
    /// master's clock. Idempotent: a tablet with a split record gets that
    /// record back (whatever `at` says). The catalog's own tables (status
    /// tablets, the master) do not split.
    pub fn request_split(&self, tablet: TabletId, at: Option<Vec<u8>>, now: u64) -> Result<SplitRecord, CatalogError> {
        let mut st = self.lock()?;
        if let Some(r) = st.splits.get(&tablet) {
            return Ok(r.clone());
        }
        let Some(t) = table_of(&st, tablet) else {
            return Err(match st.splits.values().find(|r| r.state == SplitState::Requested && r.children.contains(&tablet)) {
                Some(r) => CatalogError::Invalid(format!("tablet {} is not in the catalog yet: its parent {} is splitting", tablet.0, r.parent.id.0)),
                None => CatalogError::TabletNotFound(tablet),
            });
        };
        if t.name.starts_with(super::SYSTEM_TABLE_PREFIX) {
            return Err(CatalogError::Invalid(format!("tablet {} of the catalog's own table {} cannot split", tablet.0, t.name)));
        }
        let parent = t.tablets.iter().find(|ti| ti.id == tablet).cloned().ok_or(CatalogError::TabletNotFound(tablet))?;
        if let Some(k) = at.as_deref().filter(|k| !splits_partition(&parent.partition, k)) {
            return Err(CatalogError::Invalid(format!("split key {k:02x?} is not strictly inside tablet {}", tablet.0)));
        }
        let first = st.next_id;
        let record = SplitRecord {
            table: t.name.clone(),
            table_id: t.id,
            parent,
            children: [TabletId(first), TabletId(first + 1)],
            requested_at: at,
            state: SplitState::Requested,
            since_micros: now,
        };
        let mut b = OwnedBatch::new();
        b.put(Cf::Regular, super::NEXT_ID, &(first + 2).to_be_bytes());
        put_split(&mut b, &record);
        self.write(&mut st, b)?;
        st.next_id = first + 2;
        st.splits.insert(tablet, record.clone());
        Ok(record)
    }

    /// M3: tablet `parent` split at user key `at` into `children` (as its
    /// leader answered): swap it for them in its table's tablet list and mark
    /// its record applied, in one write. The children get the parent's
    /// partition halves and its leader and replicas as the catalog has them
    /// now. Idempotent: a split already swapped at `at` gives the table as it
    /// is. Fails if `parent` has no split record (never requested, or its
    /// table was dropped), if the children or the key differ from the
    /// record's, or if the key is not strictly inside the parent.
    pub fn finish_split(&self, parent: TabletId, at: &[u8], children: [TabletId; 2], now: u64) -> Result<TableInfo, CatalogError> {
        let mut st = self.lock()?;
        let mut r = st.splits.get(&parent).cloned().ok_or(CatalogError::TabletNotFound(parent))?;
        if r.children != children {
            return Err(CatalogError::Invalid(format!(
                "tablet {} splits into tablets {} and {}, not {} and {}",
                parent.0, r.children[0].0, r.children[1].0, children[0].0, children[1].0
            )));
        }
        let t = st.tables.get(&r.table).filter(|t| t.id == r.table_id).cloned().ok_or_else(|| CatalogError::NotFound(r.table.clone()))?;
        if let Some(done) = r.at() {
            if done != at {
                return Err(CatalogError::Invalid(format!("tablet {} split at {done:02x?} already, not at {at:02x?}", parent.0)));
            }
            return Ok(t);
        }
        let i = t
            .tablets
            .iter()
            .position(|ti| ti.id == parent)
            .ok_or_else(|| CatalogError::Corrupt(format!("split tablet {} is not in table {}", parent.0, t.name)))?;
        // The parent as listed now (replicas moved since the request count).
        r.parent = t.tablets[i].clone();
        if !splits_partition(&r.parent.partition, at) {
            return Err(CatalogError::Invalid(format!("split key {at:02x?} is not strictly inside tablet {}", parent.0)));
        }
        let mut t = t;
        let [left, right] = r.child_infos(at);
        t.tablets[i] = left;
        t.tablets.insert(i + 1, right);
        r.state = SplitState::Applied { at: at.to_vec() };
        r.since_micros = now;
        let mut b = OwnedBatch::new();
        b.put(Cf::Regular, &table_key(&t.name), &super::encode_table(&t));
        put_split(&mut b, &r);
        self.write(&mut st, b)?;
        st.tables.insert(t.name.clone(), t.clone());
        st.listed = None;
        st.splits.insert(parent, r);
        Ok(t)
    }

    /// M4 done for tablet `parent`'s split: mark its record retired (as of
    /// `now`). Idempotent; fails unless the split was swapped.
    pub fn retire_split(&self, parent: TabletId, now: u64) -> Result<SplitRecord, CatalogError> {
        let mut st = self.lock()?;
        let mut r = st.splits.get(&parent).cloned().ok_or(CatalogError::TabletNotFound(parent))?;
        let at = match &r.state {
            SplitState::Requested => return Err(CatalogError::Invalid(format!("tablet {} has not split yet", parent.0))),
            SplitState::Retired { .. } => return Ok(r),
            SplitState::Applied { at } => at.clone(),
        };
        r.state = SplitState::Retired { at };
        r.since_micros = now;
        let mut b = OwnedBatch::new();
        put_split(&mut b, &r);
        self.write(&mut st, b)?;
        st.splits.insert(parent, r.clone());
        Ok(r)
    }

    /// Give up split `parent` before it happened (its leader refused it for
    /// good): its record goes; its children's ids are never used. Fails once
    /// the split was swapped; a tablet without a record is left alone.
    pub fn cancel_split(&self, parent: TabletId) -> Result<(), CatalogError> {
        let mut st = self.lock()?;
        match st.splits.get(&parent).map(|r| &r.state) {
            None => return Ok(()),
            Some(SplitState::Requested) => {}
            Some(_) => return Err(CatalogError::Invalid(format!("tablet {} split already", parent.0))),
        }
        let mut b = OwnedBatch::new();
        b.delete(Cf::Regular, &split_key(parent));
        self.write(&mut st, b)?;
        st.splits.remove(&parent);
        Ok(())
    }

    /// Delete the records of splits retired at or before `before` (the
    /// master's clock); how many went.
    pub fn forget_retired_splits(&self, before: u64) -> Result<usize, CatalogError> {
        let mut st = self.lock()?;
        let old: Vec<TabletId> =
            st.splits.values().filter(|r| matches!(r.state, SplitState::Retired { .. }) && r.since_micros <= before).map(|r| r.parent.id).collect();
        if old.is_empty() {
            return Ok(0);
        }
        let mut b = OwnedBatch::new();
        for id in &old {
            b.delete(Cf::Regular, &split_key(*id));
        }
        self.write(&mut st, b)?;
        for id in &old {
            st.splits.remove(id);
        }
        Ok(old.len())
    }

    /// Every split record, by parent id.
    pub fn splits(&self) -> Result<Vec<SplitRecord>, CatalogError> {
        Ok(self.lock()?.splits.values().cloned().collect())
    }

    /// The split record of parent tablet `parent`, if any.
    pub fn split_of(&self, parent: TabletId) -> Result<Option<SplitRecord>, CatalogError> {
        Ok(self.lock()?.splits.get(&parent).cloned())
    }

    /// What the catalog knows of tablet `id` (`LocateTablet`): a listed
    /// tablet, a child not swapped in yet, a parent that split (its keys'
    /// tablets now), or nothing.
    pub fn locate(&self, id: TabletId) -> Result<Located, CatalogError> {
        let st = self.lock()?;
        if let Some(ti) = table_of(&st, id).and_then(|t| t.tablets.iter().find(|ti| ti.id == id)) {
            return Ok(Located::Tablet(ti.clone()));
        }
        if let Some(r) = st.splits.get(&id) {
            if r.at().is_some() {
                let Some(t) = st.tables.get(&r.table).filter(|t| t.id == r.table_id) else {
                    return Ok(Located::NotFound);
                };
                let p = &r.parent.partition;
                let overlaps = |ti: &&TabletInfo| {
                    p.end.as_deref().is_none_or(|end| ti.partition.start.as_slice() < end)
                        && ti.partition.end.as_deref().is_none_or(|end| end > p.start.as_slice())
                };
                return Ok(Located::Split(t.tablets.iter().filter(overlaps).cloned().collect()));
            }
        }
        match st.splits.values().find(|r| r.state == SplitState::Requested && r.children.contains(&id)) {
            Some(r) => Ok(Located::Pending(r.parent.id)),
            None => Ok(Located::NotFound),
        }
    }
}

/// The split records of table `t` to delete with it, and the tablets they
/// hold that the table does not list (children not swapped in yet, parents
/// not dropped yet), with the replicas to drop: (tablet, RPC addresses).
pub(super) fn drop_with_table(st: &State, t: &TableInfo, b: &mut OwnedBatch) -> (Vec<TabletId>, Vec<(TabletId, Vec<String>)>) {
    let mut records = Vec::new();
    let mut leftovers = Vec::new();
    for r in st.splits.values().filter(|r| r.table == t.name && r.table_id == t.id) {
        b.delete(Cf::Regular, &split_key(r.parent.id));
        records.push(r.parent.id);
        match r.state {
            SplitState::Requested => leftovers.extend(r.children.iter().map(|c| (*c, r.parent.replicas.clone()))),
            SplitState::Applied { .. } => leftovers.push((r.parent.id, r.parent.replicas.clone())),
            SplitState::Retired { .. } => {}
        }
    }
    (records, leftovers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{CatalogLog, Dropped, LocalLog};
    use pinax_engine_mem::MemEngine;
    use pinax_proto::Sharding;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    fn range_table(c: &Catalog<MemEngine>, name: &str, points: &[&[u8]]) -> TableInfo {
        let sharding = Sharding::Range { split_points: points.iter().map(|p| p.to_vec()).collect() };
        let mut t = c.plan_table(name, sharding, "a").unwrap();
        for ti in &mut t.tablets {
            ti.replicas = vec!["a".into(), "b".into(), "c".into()];
        }
        c.commit_table(&t).unwrap();
        t
    }

    fn ids(t: &TableInfo) -> Vec<TabletId> {
        t.tablets.iter().map(|ti| ti.id).collect()
    }

    /// The invariant the swap keeps: sorted, no gap, no overlap, whole key space.
    fn assert_covers(t: &TableInfo) {
        assert!(t.tablets[0].partition.start.is_empty());
        for w in t.tablets.windows(2) {
            assert_eq!(w[0].partition.end.as_ref(), Some(&w[1].partition.start), "{t:?}");
        }
        assert_eq!(t.tablets.last().unwrap().partition.end, None);
    }

    #[test]
    fn a_split_allocates_fresh_ids_and_swaps_the_parent_for_its_halves_once() {
        let engine = MemEngine::new();
        let c = Catalog::open(engine.clone()).unwrap();
        let t = range_table(&c, "t", &[b"m"]);
        let parent = t.tablets[1].id; // [m, ∞)
        let r = c.request_split(parent, None, 10).unwrap();
        assert_eq!(r.state, SplitState::Requested);
        assert!(r.children.iter().all(|id| id.0 > t.tablets[1].id.0), "children ids come after every id given out");
        assert_ne!(r.children[0], r.children[1]);
        // Idempotent: the same record, no new ids.
        assert_eq!(c.request_split(parent, Some(b"x".to_vec()), 11).unwrap(), r);
        // While pending the children are known, the parent still serves.
        assert_eq!(c.locate(r.children[1]).unwrap(), Located::Pending(parent));
        assert!(matches!(c.locate(parent).unwrap(), Located::Tablet(ti) if ti.id == parent));
        assert!(matches!(c.request_split(r.children[0], None, 12), Err(CatalogError::Invalid(_))), "a pending child cannot split yet");
        // Ids taken by the split are never given out again, also after a restart.
        let c = Catalog::open(engine.clone()).unwrap();
        let other = c.plan_table("u", Sharding::Hash { tablets: 1 }, "a").unwrap();
        assert!(other.id.0 > r.children[1].0 && other.tablets[0].id.0 > r.children[1].0);

        // The swap: the key must lie strictly inside the parent.
        assert!(matches!(c.finish_split(parent, b"m", r.children, 20), Err(CatalogError::Invalid(_))));
        assert!(matches!(c.finish_split(parent, b"a", r.children, 20), Err(CatalogError::Invalid(_))));
        assert!(matches!(c.finish_split(parent, b"q", [r.children[1], r.children[0]], 20), Err(CatalogError::Invalid(_))));
        assert_eq!(c.get("t").unwrap(), t, "a refused swap changes nothing");
        let swapped = c.finish_split(parent, b"q", r.children, 20).unwrap();
        assert_eq!(ids(&swapped), vec![t.tablets[0].id, r.children[0], r.children[1]]);
        assert_covers(&swapped);
        assert_eq!(swapped.tablets[1].partition, Partition { start: b"m".to_vec(), end: Some(b"q".to_vec()) });
        assert_eq!(swapped.tablets[2].partition, Partition { start: b"q".to_vec(), end: None });
        assert!(swapped.tablets[1..].iter().all(|ti| ti.replicas == t.tablets[1].replicas && ti.leader == t.tablets[1].leader));
        // Again: the same table, nothing new; at another key: refused.
        assert_eq!(c.finish_split(parent, b"q", r.children, 30).unwrap(), swapped);
        assert!(matches!(c.finish_split(parent, b"r", r.children, 30), Err(CatalogError::Invalid(_))));
        assert_eq!(c.split_of(parent).unwrap().unwrap().state, SplitState::Applied { at: b"q".to_vec() });
        // Lookups: the children serve, the parent names them.
        assert!(matches!(c.locate(r.children[0]).unwrap(), Located::Tablet(ti) if ti == swapped.tablets[1]));
        assert_eq!(c.locate(parent).unwrap(), Located::Split(swapped.tablets[1..].to_vec()));
        assert_eq!(c.locate(TabletId(9999)).unwrap(), Located::NotFound);
        assert!(matches!(c.request_split(TabletId(9999), None, 40), Err(CatalogError::TabletNotFound(_))));
        // Durable.
        let c = Catalog::open(engine).unwrap();
        assert_eq!(c.get("t").unwrap(), swapped);
        assert_eq!(c.locate(parent).unwrap(), Located::Split(swapped.tablets[1..].to_vec()));
    }

    #[test]
    fn a_parent_split_twice_over_names_its_grandchildren_and_retired_records_go() {
        let engine = MemEngine::new();
        let c = Catalog::open(engine.clone()).unwrap();
        let t = range_table(&c, "t", &[]);
        let p = t.tablets[0].id;
        let r = c.request_split(p, Some(b"m".to_vec()), 1).unwrap();
        c.finish_split(p, b"m", r.children, 2).unwrap();
        assert!(matches!(c.retire_split(TabletId(9999), 3), Err(CatalogError::TabletNotFound(_))));
        let r2 = c.request_split(r.children[1], None, 3).unwrap();
        assert!(matches!(c.retire_split(r.children[1], 3), Err(CatalogError::Invalid(_))), "not swapped yet");
        let now = c.finish_split(r.children[1], b"t", r2.children, 4).unwrap();
        assert_covers(&now);
        assert_eq!(ids(&now), vec![r.children[0], r2.children[0], r2.children[1]]);
        assert_eq!(c.locate(p).unwrap(), Located::Split(now.tablets.clone()), "the first parent's keys are in all three");
        assert_eq!(c.locate(r.children[1]).unwrap(), Located::Split(now.tablets[1..].to_vec()));

        assert_eq!(c.retire_split(p, 5).unwrap().state, SplitState::Retired { at: b"m".to_vec() });
        assert_eq!(c.retire_split(p, 50).unwrap().since_micros, 5, "idempotent");
        c.retire_split(r.children[1], 9).unwrap();
        assert_eq!(c.forget_retired_splits(6).unwrap(), 1);
        assert_eq!(c.locate(p).unwrap(), Located::NotFound, "forgotten");
        let c = Catalog::open(engine).unwrap();
        assert_eq!(c.splits().unwrap().iter().map(|r| r.parent.id).collect::<Vec<_>>(), vec![r.children[1]]);
        assert_eq!(c.forget_retired_splits(9).unwrap(), 1);
        assert!(c.splits().unwrap().is_empty());
    }

    #[test]
    fn catalog_tables_do_not_split_and_keys_outside_a_tablet_are_refused() {
        let c = Catalog::open(MemEngine::new()).unwrap();
        let status = c.plan_status_table(2, "a").unwrap();
        c.commit_table(&status).unwrap();
        assert!(matches!(c.request_split(status.tablets[0].id, None, 1), Err(CatalogError::Invalid(_))));
        let t = range_table(&c, "t", &[b"m"]);
        assert!(matches!(c.request_split(t.tablets[0].id, Some(b"m".to_vec()), 1), Err(CatalogError::Invalid(_))));
        assert!(matches!(c.request_split(t.tablets[0].id, Some(Vec::new()), 1), Err(CatalogError::Invalid(_))));
        assert!(c.splits().unwrap().is_empty(), "nothing recorded");
        let r = c.request_split(t.tablets[0].id, Some(b"c".to_vec()), 1).unwrap();
        // Cancelled (its leader refused it): gone, its ids not given out again.
        c.cancel_split(t.tablets[0].id).unwrap();
        c.cancel_split(t.tablets[0].id).unwrap();
        assert!(c.splits().unwrap().is_empty());
        assert_eq!(c.locate(r.children[0]).unwrap(), Located::NotFound);
        let again = c.request_split(t.tablets[0].id, None, 2).unwrap();
        assert!(again.children[0].0 > r.children[1].0);
        c.finish_split(t.tablets[0].id, b"c", again.children, 3).unwrap();
        assert!(matches!(c.cancel_split(t.tablets[0].id), Err(CatalogError::Invalid(_))), "swapped: too late");
    }

    #[test]
    fn dropping_a_table_takes_its_split_records_and_names_the_tablets_they_hold() {
        let c = Catalog::open(MemEngine::new()).unwrap();
        let t = range_table(&c, "t", &[b"m"]);
        let pending = c.request_split(t.tablets[0].id, None, 1).unwrap();
        let applied = c.request_split(t.tablets[1].id, None, 1).unwrap();
        c.finish_split(t.tablets[1].id, b"q", applied.children, 2).unwrap();
        let keep = range_table(&c, "u", &[]);
        let kept = c.request_split(keep.tablets[0].id, None, 3).unwrap();
        let Dropped::Table(gone, leftovers) = c.drop_table("t").unwrap() else { panic!("a table") };
        assert_eq!(ids(&gone), vec![t.tablets[0].id, applied.children[0], applied.children[1]]);
        let replicas = t.tablets[0].replicas.clone();
        assert_eq!(
            leftovers,
            vec![(pending.children[0], replicas.clone()), (pending.children[1], replicas.clone()), (t.tablets[1].id, replicas)],
            "the pending children and the parent not dropped yet"
        );
        assert_eq!(c.splits().unwrap(), vec![kept], "only the other table's record is left");
        assert_eq!(c.locate(pending.children[0]).unwrap(), Located::NotFound);
        assert_eq!(c.locate(t.tablets[1].id).unwrap(), Located::NotFound);
    }

    /// A log that fails every write after applying it or not, as told.
    struct Flaky {
        engine: Arc<MemEngine>,
        fail: AtomicBool,
        apply_anyway: AtomicBool,
    }

    impl CatalogLog for Flaky {
        fn write(&self, batch: OwnedBatch) -> Result<(), CatalogError> {
            if !self.fail.load(Ordering::SeqCst) {
                return LocalLog { engine: self.engine.clone() }.write(batch);
            }
            if self.apply_anyway.load(Ordering::SeqCst) {
                LocalLog { engine: self.engine.clone() }.write(batch)?;
            }
            Err(CatalogError::Unavailable("lost quorum".into()))
        }
        fn term(&self) -> Result<u64, CatalogError> {
            Ok(1)
        }
    }

    #[test]
    fn a_swap_whose_write_fails_leaves_all_or_nothing_and_a_retry_finishes_it() {
        let engine = Arc::new(MemEngine::new());
        let log = Arc::new(Flaky { engine: engine.clone(), fail: false.into(), apply_anyway: false.into() });
        let c = Catalog::new(engine.clone(), log.clone());
        let t = range_table(&c, "t", &[]);
        let p = t.tablets[0].id;
        let r = c.request_split(p, None, 1).unwrap();
        // Not applied: the table and the record as before, in memory and on disk.
        log.fail.store(true, Ordering::SeqCst);
        assert!(c.finish_split(p, b"k", r.children, 2).is_err());
        assert_eq!(c.get("t").unwrap(), t);
        assert_eq!(c.split_of(p).unwrap().unwrap().state, SplitState::Requested);
        // Applied although the write said it failed (a leader change): both
        // changes are there, and the retry answers as a repeat.
        log.apply_anyway.store(true, Ordering::SeqCst);
        assert!(c.finish_split(p, b"k", r.children, 2).is_err());
        log.fail.store(false, Ordering::SeqCst);
        assert_eq!(c.split_of(p).unwrap().unwrap().state, SplitState::Applied { at: b"k".to_vec() });
        assert_eq!(ids(&c.get("t").unwrap()), r.children.to_vec());
        assert_eq!(ids(&c.finish_split(p, b"k", r.children, 3).unwrap()), r.children.to_vec());
        // An id request whose write failed but applied: its ids are not reused.
        log.fail.store(true, Ordering::SeqCst);
        let lost = c.request_split(r.children[0], None, 4);
        assert!(lost.is_err());
        log.fail.store(false, Ordering::SeqCst);
        let again = c.request_split(r.children[0], None, 5).unwrap();
        assert!(again.children.iter().all(|id| !r.children.contains(id) && *id != p));
        let next = c.plan_table("u", Sharding::Hash { tablets: 1 }, "a").unwrap();
        assert!(next.id.0 > again.children[1].0);
    }

    #[test]
    fn golden_split_record() {
        let r = SplitRecord {
            table: "t".into(),
            table_id: TableId(1),
            parent: TabletInfo { id: TabletId(2), partition: Partition { start: vec![], end: None }, leader: "a".into(), replicas: vec!["a".into()] },
            children: [TabletId(3), TabletId(4)],
            requested_at: None,
            state: SplitState::Applied { at: b"k".to_vec() },
            since_micros: 5,
        };
        let b = encode_record(SPLIT_KIND, SPLIT_VERSION, &r);
        let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
        assert_eq!(
            &hex[..hex.len() - 8],
            // kind 'X', v1 | table "t" | table id 1 | parent: id 2, start "", end None,
            // leader "a", replicas ["a"] | children 3, 4 | requested_at None |
            // Applied (variant 1) at "k" | since 5
            "5801\
             000000000000000174\
             0000000000000001\
             0000000000000002\
             000000000000000000\
             000000000000000161\
             0000000000000001000000000000000161\
             00000000000000030000000000000004\
             00\
             0000000100000000000000016b\
             0000000000000005"
        );
        assert_eq!(decode_split(&b).unwrap(), r);
    }
}
