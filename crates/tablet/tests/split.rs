//! A tablet split in two (on the in-memory engine): each half, given its share of
//! the parent's rows and what `split::half_states` says, answers as the parent
//! did, at old read times and new ones, and transactions pending across the split
//! (writes, SERIALIZABLE range locks, a deletion of every row) finish correctly
//! in the halves.

use pinax_common::{ErrorCode, HybridClock, HybridTime, ManualClock, TabletId, TxnId};
use pinax_engine::{Cf, IterOptions, KvEngine, KvIterator, Snapshot, WriteBatch, WriteOptions};
use pinax_engine_mem::MemEngine;
use pinax_mvcc::gc::HistoryCutoff;
use pinax_mvcc::{ReadContext, TxnStatus};
use pinax_pushdown::ScanSpec;
use pinax_tablet::split::{can_split_at, half_states, split_key_of_stored, HalfState};
use pinax_tablet::{Partition, StatusTablet, Tablet, TabletOptions, WriteOp};
use std::sync::Arc;

const TIMEOUT_US: u64 = 5_000_000;

struct World {
    clock: Arc<HybridClock>,
    manual: Arc<ManualClock>,
    status: StatusTablet<MemEngine>,
}

impl World {
    fn new() -> World {
        let manual = Arc::new(ManualClock::new(1_000_000));
        let clock = Arc::new(HybridClock::new(manual.clone()));
        let status = StatusTablet::open(TabletId(0), MemEngine::new(), clock.clone(), TIMEOUT_US, true).unwrap();
        World { clock, manual, status }
    }
    fn resolver(&self) -> impl Fn(TxnId, HybridTime) -> pinax_mvcc::Result<TxnStatus> + '_ {
        move |t, ht| Ok(self.status.status(t, ht).expect("status"))
    }
    fn tablet(&self, id: u64, engine: MemEngine, partition: Partition) -> Tablet<MemEngine> {
        Tablet::open(TabletId(id), engine, self.clock.clone(), partition, TabletOptions::default(), HistoryCutoff::default()).unwrap()
    }
}

fn k(i: u32) -> Vec<u8> {
    format!("k{i:03}").into_bytes()
}

fn tid(n: u8) -> TxnId {
    TxnId([n; 16])
}

fn entries<S: Snapshot>(snap: &S, cf: Cf) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = snap.iter(cf, IterOptions::default());
    it.seek_to_first();
    let mut out = Vec::new();
    while it.valid().unwrap() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    out
}

/// The engine of one half: the parent's rows of its interval (what the shared
/// store's bounded view shows it) and its own intents and metadata.
fn half_engine(parent: &MemEngine, half: &HalfState) -> MemEngine {
    let e = MemEngine::new();
    let mut b = e.new_batch();
    let snap = parent.snapshot();
    for (key, value) in entries(&snap, Cf::Regular) {
        let (esc, _) = pinax_codec::keys::split_version_key(&key).unwrap();
        let (user, _) = pinax_codec::keys::unescape_prefix(esc).unwrap();
        if half.partition.contains(&user) {
            b.put(Cf::Regular, &key, &value);
        }
    }
    for (key, value) in &half.intents {
        b.put(Cf::Intents, key, value);
    }
    for (key, value) in &half.meta {
        b.put(Cf::Meta, key, value);
    }
    e.write(b, WriteOptions { sync: true, ..Default::default() }).unwrap();
    e
}

fn read(w: &World, t: &Tablet<MemEngine>, key: &[u8], at: HybridTime) -> Option<Vec<u8>> {
    t.read(ReadContext::at(at), key, &w.resolver()).unwrap()
}

fn scan_keys(w: &World, t: &Tablet<MemEngine>, at: HybridTime) -> Vec<Vec<u8>> {
    let spec = ScanSpec { start: Vec::new(), end: None, ..Default::default() };
    t.scan(ReadContext::at(at), &spec, &w.resolver()).unwrap().rows.into_iter().map(|(key, _)| key).collect()
}

#[test]
fn halves_answer_as_the_parent_and_finish_its_transactions() {
    let w = World::new();
    let parent_engine = MemEngine::new();
    let whole = Partition { start: Vec::new(), end: None };
    let parent = w.tablet(1, parent_engine.clone(), whole.clone());
    for i in 0..100 {
        parent.write_fast(0, &[WriteOp::put(k(i), b"v1".to_vec())], None, &w.resolver()).unwrap();
    }
    w.manual.advance(10);
    let t1 = w.clock.now();
    for i in (0..100).step_by(10) {
        parent.write_fast(0, &[WriteOp::put(k(i), b"v2".to_vec())], None, &w.resolver()).unwrap();
    }
    parent.write_fast(0, &[WriteOp::delete(k(55))], None, &w.resolver()).unwrap();
    w.manual.advance(10);
    // Pending across the split: a writer on both sides, a SERIALIZABLE reader's
    // range lock, one to commit and one to abort.
    let (writer, loser, reader) = (tid(1), tid(2), tid(3));
    for t in [writer, loser, reader] {
        w.status.create(t).unwrap();
    }
    let r = w.clock.now();
    parent
        .write_intents(
            0,
            writer,
            1,
            r,
            &[WriteOp::put(k(10), b"w".to_vec()), WriteOp::put(k(70), b"w".to_vec()), WriteOp::put(k(150), b"new".to_vec())],
            &w.resolver(),
        )
        .unwrap();
    parent.write_intents(0, loser, 1, r, &[WriteOp::delete(k(20)), WriteOp::delete(k(80))], &w.resolver()).unwrap();
    parent.write_intents(0, reader, 1, r, &[WriteOp::lock_shared(Vec::new())], &w.resolver()).unwrap();
    w.manual.advance(10);
    let before = w.clock.now();
    let parent_rows = scan_keys(&w, &parent, before);
    let parent_old = scan_keys(&w, &parent, t1);

    // The split, at the engine's middle key.
    let at = split_key_of_stored(&whole, &parent_engine.approximate_middle_key().unwrap()).unwrap();
    assert!(at > k(30) && at < k(70), "{at:?}");
    let [left_state, right_state] = half_states(&parent_engine.snapshot(), &whole, &at).unwrap();
    assert_eq!(left_state.partition, Partition { start: Vec::new(), end: Some(at.clone()) });
    assert_eq!(right_state.partition, Partition { start: at.clone(), end: None });
    let (le, re) = (half_engine(&parent_engine, &left_state), half_engine(&parent_engine, &right_state));
    let left = w.tablet(2, le.clone(), left_state.partition.clone());
    let right = w.tablet(3, re.clone(), right_state.partition.clone());

    // Reads at every time answer as the parent did.
    for when in [t1, before] {
        let mut both = scan_keys(&w, &left, when);
        both.extend(scan_keys(&w, &right, when));
        assert_eq!(both, if when == t1 { parent_old.clone() } else { parent_rows.clone() });
    }
    assert_eq!(read(&w, &left, &k(10), t1), Some(b"v1".to_vec()));
    assert_eq!(read(&w, &left, &k(10), before), Some(b"v2".to_vec()));
    assert_eq!(read(&w, &right, &k(55), before), None);
    assert_eq!(read(&w, &right, &k(55), t1), Some(b"v1".to_vec()));
    // Each half knows the pending transactions of its keys.
    let mut l = left.txns_with_intents().unwrap();
    l.sort();
    assert_eq!(l, vec![writer, loser, reader]);
    let mut rt = right.txns_with_intents().unwrap();
    rt.sort();
    assert_eq!(rt, vec![writer, loser, reader], "the reader's range lock is on the right half's start too");
    // A pending write is still a conflict in the half that holds it.
    let other = tid(4);
    w.status.create(other).unwrap();
    let err = right.write_intents(0, other, 1, w.clock.now(), &[WriteOp::put(k(70), b"x".to_vec())], &w.resolver()).unwrap_err();
    assert_eq!(err.code(), ErrorCode::SerializationFailure);
    // Uniqueness is checked against the shared rows.
    let err = left.write_fast(0, &[WriteOp::insert(k(5), b"dup".to_vec())], None, &w.resolver()).unwrap_err();
    assert_eq!(err.code(), ErrorCode::DuplicateKey);

    // The writer commits, the loser aborts: each half finishes its share.
    let commit = w.status.commit(writer, vec![TabletId(1)]).unwrap();
    w.status.abort(loser, vec![TabletId(1)]).unwrap();
    assert_eq!(read(&w, &right, &k(150), commit), Some(b"new".to_vec()), "committed, read through its intent");
    assert_eq!(left.apply_intents(writer, commit).unwrap(), 1);
    assert_eq!(right.apply_intents(writer, commit).unwrap(), 2);
    assert_eq!(left.remove_intents(loser).unwrap(), 1);
    assert_eq!(right.remove_intents(loser).unwrap(), 1);
    assert_eq!(read(&w, &left, &k(10), commit), Some(b"w".to_vec()));
    assert_eq!(read(&w, &right, &k(70), commit), Some(b"w".to_vec()));
    assert_eq!(read(&w, &left, &k(20), commit), Some(b"v2".to_vec()), "the aborted delete left the row");
    assert_eq!(read(&w, &right, &k(80), commit), Some(b"v2".to_vec()));
    w.status.commit(reader, vec![TabletId(1)]).unwrap();
    assert_eq!(left.remove_intents(reader).unwrap(), 1);
    assert_eq!(right.remove_intents(reader).unwrap(), 1);
    assert!(left.txns_with_intents().unwrap().is_empty() && right.txns_with_intents().unwrap().is_empty());
    assert!(entries(&le.snapshot(), Cf::Intents).is_empty() && entries(&re.snapshot(), Cf::Intents).is_empty(), "nothing left of them");
}

#[test]
fn a_deletion_of_every_row_pending_across_the_split_applies_to_both_halves() {
    let w = World::new();
    let parent_engine = MemEngine::new();
    let whole = Partition { start: b"a".to_vec(), end: Some(b"z".to_vec()) };
    let parent = w.tablet(1, parent_engine.clone(), whole.clone());
    for i in 0..20 {
        parent.write_fast(0, &[WriteOp::put(format!("b{i:02}"), b"v".to_vec())], None, &w.resolver()).unwrap();
    }
    w.manual.advance(10);
    let txn = tid(9);
    w.status.create(txn).unwrap();
    assert_eq!(parent.delete_all(txn, 1, w.clock.now(), &w.resolver()).unwrap(), 20);
    let at = b"b10".to_vec();
    let [ls, rs] = half_states(&parent_engine.snapshot(), &whole, &at).unwrap();
    let left = w.tablet(2, half_engine(&parent_engine, &ls), ls.partition.clone());
    let right = w.tablet(3, half_engine(&parent_engine, &rs), rs.partition.clone());
    // While it is pending, another writer conflicts in either half.
    let other = tid(10);
    w.status.create(other).unwrap();
    for (t, key) in [(&left, "b03"), (&right, "b15")] {
        let err = t.write_intents(0, other, 1, w.clock.now(), &[WriteOp::put(key, b"x".to_vec())], &w.resolver()).unwrap_err();
        assert_eq!(err.code(), ErrorCode::SerializationFailure, "{key}");
    }
    let commit = w.status.commit(txn, vec![TabletId(1)]).unwrap();
    left.apply_intents(txn, commit).unwrap();
    right.apply_intents(txn, commit).unwrap();
    assert!(scan_keys(&w, &left, commit).is_empty() && scan_keys(&w, &right, commit).is_empty());
    assert_eq!(scan_keys(&w, &left, commit.decremented()).len(), 10, "history below the deletion stays");
    assert_eq!(scan_keys(&w, &right, commit.decremented()).len(), 10);
    // Applied: both halves carry it in their metadata (a restart keeps it).
    let reopened = w.tablet(3, right.engine().clone(), rs.partition.clone());
    assert!(scan_keys(&w, &reopened, commit).is_empty());
    assert_eq!(scan_keys(&w, &reopened, commit.decremented()).len(), 10);
}

#[test]
fn a_range_lock_and_a_write_of_the_right_halfs_first_row_in_one_statement_both_survive() {
    let w = World::new();
    let parent_engine = MemEngine::new();
    let whole = Partition { start: Vec::new(), end: None };
    let parent = w.tablet(1, parent_engine.clone(), whole.clone());
    let txn = tid(5);
    w.status.create(txn).unwrap();
    parent.write_intents(0, txn, 3, w.clock.now(), &[WriteOp::lock_shared(Vec::new()), WriteOp::put(k(50), b"w".to_vec())], &w.resolver()).unwrap();
    let [_, rs] = half_states(&parent_engine.snapshot(), &whole, &k(50)).unwrap();
    let right = w.tablet(3, half_engine(&parent_engine, &rs), rs.partition.clone());
    let commit = w.status.commit(txn, vec![TabletId(1)]).unwrap();
    assert_eq!(right.apply_intents(txn, commit).unwrap(), 1, "the write");
    assert_eq!(read(&w, &right, &k(50), commit), Some(b"w".to_vec()));
    let intents = rs.intents.iter().filter(|(key, _)| key[0] == b'I').count();
    assert_eq!(intents, 2, "the write and the lock, at two statement numbers");
}

#[test]
fn split_keys_must_be_strictly_inside_the_partition() {
    let p = Partition { start: b"b".to_vec(), end: Some(b"y".to_vec()) };
    assert!(!can_split_at(&p, b"b") && !can_split_at(&p, b"a") && !can_split_at(&p, b"y") && !can_split_at(&p, b"z"));
    assert!(can_split_at(&p, b"b\0") && can_split_at(&p, b"m"));
    let stored = pinax_codec::keys::version_key(b"m", HybridTime(5));
    assert_eq!(split_key_of_stored(&p, &stored), Some(b"m".to_vec()));
    let first = pinax_codec::keys::version_key(b"b", HybridTime(5));
    assert_eq!(split_key_of_stored(&p, &first), None, "a later version of the first row is no middle");
    assert_eq!(split_key_of_stored(&p, b"garbage"), None);
    assert!(half_states(&MemEngine::new().snapshot(), &p, b"b").is_err());
}

/// A split tablet retires: from the split (and after a restart, from the
/// record written with it) every read, write and resolution fails with
/// `TabletSplit`, naming the halves.
#[test]
fn a_split_tablet_refuses_everything() {
    use pinax_tablet::split::SplitRecord;
    let w = World::new();
    let engine = MemEngine::new();
    let whole = Partition { start: Vec::new(), end: None };
    let t = w.tablet(1, engine.clone(), whole.clone());
    t.write_fast(0, &[WriteOp::put(k(1), b"v".to_vec())], None, &w.resolver()).unwrap();
    let txn = tid(1);
    w.status.create(txn).unwrap();
    t.write_intents(0, txn, 1, w.clock.now(), &[WriteOp::put(k(2), b"v".to_vec())], &w.resolver()).unwrap();
    let record = SplitRecord { at: k(50), left: TabletId(2), right: TabletId(3) };
    let (key, value) = record.meta_entry();
    assert_eq!(SplitRecord::decode(&value).unwrap(), record);
    assert!(SplitRecord::decode(&value[..10]).is_err());
    let mut b = engine.new_batch();
    b.put(Cf::Meta, &key, &value);
    engine.write(b, WriteOptions::default()).unwrap();
    t.retire(record.clone());
    let reopened = w.tablet(1, engine, whole);
    for t in [&t, &reopened] {
        assert_eq!(t.split_record(), Some(&record));
        let now = w.clock.now();
        let codes = [
            t.read(ReadContext::at(now), &k(1), &w.resolver()).unwrap_err().code(),
            t.scan(ReadContext::at(now), &ScanSpec::default(), &w.resolver()).unwrap_err().code(),
            t.write_fast(0, &[WriteOp::put(k(3), b"v".to_vec())], None, &w.resolver()).unwrap_err().code(),
            t.write_intents(0, tid(2), 1, now, &[WriteOp::put(k(3), b"v".to_vec())], &w.resolver()).unwrap_err().code(),
            t.delete_all(tid(3), 1, now, &w.resolver()).unwrap_err().code(),
            t.apply_intents(txn, now).unwrap_err().code(),
            t.remove_intents(txn).unwrap_err().code(),
            t.rollback_intents(txn, 1).unwrap_err().code(),
        ];
        assert!(codes.iter().all(|c| *c == ErrorCode::TabletSplit), "{codes:?}");
        assert!(ErrorCode::TabletSplit.is_retryable());
    }
}
