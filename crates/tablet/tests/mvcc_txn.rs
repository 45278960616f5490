//! MVCC and transaction behaviour of tablets + a status tablet on the in-memory engine.

use pinax_common::{ErrorCode, HybridClock, HybridTime, ManualClock, TabletId, TxnId};
use pinax_engine::{Cf, KvEngine};
use pinax_engine_mem::MemEngine;
use pinax_mvcc::gc::{HistoryCutoff, HistoryGcFilterFactory};
use pinax_mvcc::{ReadContext, TxnStatus};
use pinax_pushdown::ScanSpec;
use pinax_tablet::{Error, Partition, StatusTablet, Tablet, TabletOptions, WriteOp};
use std::sync::Arc;

struct World {
    clock: Arc<HybridClock>,
    manual: Arc<ManualClock>,
    status: StatusTablet<MemEngine>,
    status_engine: MemEngine,
    engines: Vec<MemEngine>,
    tablets: Vec<Tablet<MemEngine>>,
}

const TIMEOUT_US: u64 = 5_000_000;

impl World {
    /// Two tablets split at key "m", one status tablet, a manual clock.
    fn new() -> World {
        let manual = Arc::new(ManualClock::new(1_000_000));
        let clock = Arc::new(HybridClock::new(manual.clone()));
        let engines = vec![MemEngine::new(), MemEngine::new()];
        let status_engine = MemEngine::new();
        Self::open(manual, clock, engines, status_engine)
    }

    fn open(manual: Arc<ManualClock>, clock: Arc<HybridClock>, engines: Vec<MemEngine>, status_engine: MemEngine) -> World {
        let parts = [Partition { start: vec![], end: Some(b"m".to_vec()) }, Partition { start: b"m".to_vec(), end: None }];
        let tablets = engines
            .iter()
            .enumerate()
            .map(|(i, e)| {
                Tablet::open(TabletId(i as u64 + 1), e.clone(), clock.clone(), parts[i].clone(), TabletOptions::default(), HistoryCutoff::default()).unwrap()
            })
            .collect();
        let status = StatusTablet::open(TabletId(0), status_engine.clone(), clock.clone(), TIMEOUT_US, true).unwrap();
        World { clock, manual, status, status_engine, engines, tablets }
    }

    /// Simulate a crash and restart: reopen everything over the same engines.
    fn restart(self) -> World {
        let World { manual, clock, engines, status_engine, .. } = self;
        Self::open(manual, clock, engines, status_engine)
    }

    fn resolver(&self) -> impl Fn(TxnId, HybridTime) -> pinax_mvcc::Result<TxnStatus> + '_ {
        move |t, ht| Ok(self.status.status(t, ht).expect("status"))
    }

    fn tablet_for(&self, key: &[u8]) -> &Tablet<MemEngine> {
        self.tablets.iter().find(|t| t.partition().contains(key)).unwrap()
    }

    fn put(&self, key: &str, val: &str) -> HybridTime {
        self.tablet_for(key.as_bytes()).write_fast(0, &[WriteOp::put(key, val)], None, &self.resolver()).unwrap()
    }

    fn get_at(&self, key: &str, ht: HybridTime) -> Option<String> {
        self.get_ctx(key, ReadContext::at(ht))
    }

    fn get_ctx(&self, key: &str, ctx: ReadContext) -> Option<String> {
        self.tablet_for(key.as_bytes()).read(ctx, key.as_bytes(), &self.resolver()).unwrap().map(|v| String::from_utf8(v).unwrap())
    }

    fn now(&self) -> HybridTime {
        self.clock.now()
    }

    fn txn_write(&self, txn: TxnId, seq: u32, read_ht: HybridTime, ops: Vec<WriteOp>) -> Result<(), Error> {
        for t in &self.tablets {
            let mine: Vec<WriteOp> = ops.iter().filter(|o| t.partition().contains(&o.key)).cloned().collect();
            if !mine.is_empty() {
                t.write_intents(0, txn, seq, read_ht, &mine, &self.resolver())?;
            }
        }
        Ok(())
    }
}

fn tid(n: u8) -> TxnId {
    TxnId([n; 16])
}

fn all_ids(w: &World) -> Vec<TabletId> {
    w.tablets.iter().map(|t| t.id()).collect()
}

/// Every key of `engine`'s intents column family (intents, reverse-index entries, marks).
fn intents_cf_keys(engine: &MemEngine) -> Vec<Vec<u8>> {
    use pinax_engine::{KvIterator, Snapshot as _};
    let snap = engine.snapshot();
    let mut it = snap.iter(Cf::Intents, Default::default());
    it.seek_to_first();
    let mut keys = Vec::new();
    while it.valid().unwrap() {
        keys.push(it.key().to_vec());
        it.next();
    }
    keys
}

#[test]
fn versions_visible_by_read_time() {
    let w = World::new();
    let t1 = w.put("a", "1");
    w.manual.advance(10);
    let t2 = w.put("a", "2");
    assert!(t2 > t1);
    assert_eq!(w.get_at("a", t1.decremented()), None);
    assert_eq!(w.get_at("a", t1).as_deref(), Some("1"));
    assert_eq!(w.get_at("a", t2.decremented()).as_deref(), Some("1"));
    assert_eq!(w.get_at("a", t2).as_deref(), Some("2"));
    let t3 = w.tablets[0].write_fast(0, &[WriteOp::delete("a")], None, &w.resolver()).unwrap();
    assert_eq!(w.get_at("a", t3), None);
    assert_eq!(w.get_at("a", t2).as_deref(), Some("2"));
}

/// Keys with many versions (more than the reader steps over before seeking past the
/// rest): every read time sees exactly its version, and scans, forward and reverse,
/// paged or not, see each key once with the right value.
#[test]
fn many_versions_per_key_read_and_scan_correctly() {
    let w = World::new();
    let keys = ["a", "a\0", "a\0b", "b", "ba", "c"];
    let mut times = Vec::new();
    for round in 0..40 {
        for k in keys {
            w.manual.advance(1);
            w.put(k, &format!("{k}-{round}"));
        }
        times.push(w.now());
    }
    for (round, ht) in times.iter().enumerate() {
        for k in keys {
            assert_eq!(w.get_at(k, *ht).as_deref(), Some(&*format!("{k}-{round}")), "key {k:?} round {round}");
        }
        let t = &w.tablets[0];
        let want: Vec<(Vec<u8>, Vec<u8>)> = keys.iter().map(|k| (k.as_bytes().to_vec(), format!("{k}-{round}").into_bytes())).collect();
        let fwd = t.scan(ReadContext::at(*ht), &ScanSpec::default(), &w.resolver()).unwrap();
        assert_eq!(fwd.rows, want, "forward scan at round {round}");
        let rev = t.scan(ReadContext::at(*ht), &ScanSpec { reverse: true, ..Default::default() }, &w.resolver()).unwrap();
        assert_eq!(rev.rows, want.iter().rev().cloned().collect::<Vec<_>>(), "reverse scan at round {round}");
        // Paged two rows at a time.
        let mut spec = ScanSpec { limit: 2, ..Default::default() };
        let mut paged = Vec::new();
        loop {
            let page = t.scan(ReadContext::at(*ht), &spec, &w.resolver()).unwrap();
            paged.extend(page.rows);
            match page.resume {
                Some(r) => spec.start = r,
                None => break,
            }
        }
        assert_eq!(paged, want, "paged scan at round {round}");
        // A point read stops at its answer, inside the key's older versions: it
        // says so by no resume (nothing follows the key in its range).
        for k in keys {
            let spec = ScanSpec { start: k.as_bytes().to_vec(), end: Some(b"z".to_vec()), limit: 1, point: true, ..Default::default() };
            let one = t.scan(ReadContext::at(*ht), &spec, &w.resolver()).unwrap();
            assert_eq!(one.rows, [(k.as_bytes().to_vec(), format!("{k}-{round}").into_bytes())], "point read of {k:?} at round {round}");
            assert_eq!(one.resume, None, "point read of {k:?} at round {round}");
        }
    }
}

#[test]
fn own_writes_visible_to_later_statements_only() {
    let w = World::new();
    w.put("a", "old");
    let txn = tid(1);
    w.status.create(txn).unwrap();
    let read_ht = w.now();
    w.txn_write(txn, 1, read_ht, vec![WriteOp::put("a", "s1"), WriteOp::put("z", "s1")]).unwrap();
    // statement 1 does not see its own write; statement 2 does
    assert_eq!(w.get_ctx("a", ReadContext::in_txn(read_ht, txn, 1)).as_deref(), Some("old"));
    assert_eq!(w.get_ctx("a", ReadContext::in_txn(read_ht, txn, 2)).as_deref(), Some("s1"));
    assert_eq!(w.get_ctx("z", ReadContext::in_txn(read_ht, txn, 1)), None);
    assert_eq!(w.get_ctx("z", ReadContext::in_txn(read_ht, txn, 2)).as_deref(), Some("s1"));
    // statement 2 overwrites; statement 2 still sees s1, statement 3 sees s2
    w.txn_write(txn, 2, read_ht, vec![WriteOp::put("a", "s2")]).unwrap();
    assert_eq!(w.get_ctx("a", ReadContext::in_txn(read_ht, txn, 2)).as_deref(), Some("s1"));
    assert_eq!(w.get_ctx("a", ReadContext::in_txn(read_ht, txn, 3)).as_deref(), Some("s2"));
    w.txn_write(txn, 3, read_ht, vec![WriteOp::delete("a")]).unwrap();
    assert_eq!(w.get_ctx("a", ReadContext::in_txn(read_ht, txn, 4)), None);
    // others never see pending intents
    assert_eq!(w.get_at("a", w.now()).as_deref(), Some("old"));
    assert_eq!(w.get_at("z", w.now()), None);
}

#[test]
fn write_write_conflict_is_retryable() {
    let w = World::new();
    w.put("a", "0");
    let (t1, t2) = (tid(1), tid(2));
    w.status.create(t1).unwrap();
    w.status.create(t2).unwrap();
    let r1 = w.now();
    let r2 = w.now();
    w.txn_write(t1, 1, r1, vec![WriteOp::put("a", "t1")]).unwrap();
    // t2 meets t1's pending intent
    let e = w.txn_write(t2, 1, r2, vec![WriteOp::put("a", "t2")]).unwrap_err();
    assert_eq!(e.code(), ErrorCode::SerializationFailure);
    assert!(e.is_retryable());
    // a fast-path write meets it too
    let e = w.tablets[0].write_fast(0, &[WriteOp::put("a", "x")], None, &w.resolver()).unwrap_err();
    assert_eq!(e.code(), ErrorCode::SerializationFailure);
    let commit = w.status.commit(t1, all_ids(&w)).unwrap();
    // t2 read before t1 committed: snapshot-isolation conflict
    let e = w.txn_write(t2, 1, r2, vec![WriteOp::put("a", "t2")]).unwrap_err();
    assert_eq!(e.code(), ErrorCode::SerializationFailure);
    // a write reading after the commit succeeds (and applied t1's intent inline)
    let t3 = tid(3);
    w.status.create(t3).unwrap();
    let r3 = w.now();
    assert!(r3 > commit);
    w.txn_write(t3, 1, r3, vec![WriteOp::put("a", "t3")]).unwrap();
    assert_eq!(w.get_at("a", commit).as_deref(), Some("t1"));
    // fast path with a stale read time conflicts with a newer commit
    let e = w.tablets[0].write_fast(0, &[WriteOp::put("b", "x")], Some(HybridTime(1)), &w.resolver());
    assert!(e.is_ok(), "no version of b exists");
    let e = w.tablets[0].write_fast(0, &[WriteOp::put("b", "y")], Some(HybridTime(1)), &w.resolver()).unwrap_err();
    assert_eq!(e.code(), ErrorCode::SerializationFailure);
}

#[test]
fn commit_is_atomic_across_tablets() {
    let w = World::new();
    let txn = tid(7);
    w.status.create(txn).unwrap();
    let read_ht = w.now();
    w.txn_write(txn, 1, read_ht, vec![WriteOp::put("a", "A"), WriteOp::put("x", "X")]).unwrap();
    let before = w.now();
    assert_eq!((w.get_at("a", before), w.get_at("x", before)), (None, None));
    let commit = w.status.commit(txn, all_ids(&w)).unwrap();
    assert!(commit > before);
    // visible on both tablets at the commit time, through intents (not applied yet)
    assert_eq!(w.get_at("a", commit).as_deref(), Some("A"));
    assert_eq!(w.get_at("x", commit).as_deref(), Some("X"));
    assert_eq!(w.get_at("a", commit.decremented()), None);
    assert_eq!(w.get_at("x", before), None);
    // apply, and the answers do not change
    for t in &w.tablets {
        assert_eq!(t.apply_intents(txn, commit).unwrap(), 1);
        assert_eq!(t.apply_intents(txn, commit).unwrap(), 0, "idempotent");
    }
    assert_eq!(w.get_at("a", commit).as_deref(), Some("A"));
    assert_eq!(w.get_at("x", commit).as_deref(), Some("X"));
    assert_eq!(w.get_at("a", commit.decremented()), None);
    assert!(w.tablets.iter().all(|t| t.txns_with_intents().unwrap().is_empty()));
}

/// Large transactions drop their reverse index by range (chunks of 64+ keys),
/// small ones key by key: either way nothing of the resolved transaction is left
/// in the intents column family, and another transaction's intents (whose
/// reverse-index entries sort right next to it) stay.
#[test]
fn resolving_large_and_small_transactions_leaves_no_intents_and_keeps_others() {
    let w = World::new();
    let t = &w.tablets[1]; // keys from "m"
    let keys = |prefix: &str, n: u32| -> Vec<WriteOp> { (0..n).map(|i| WriteOp::put(format!("{prefix}{i:05}"), "v")).collect() };
    let (big, small, other_before, other_after) = (tid(20), tid(21), tid(19), tid(22));
    for txn in [big, small, other_before, other_after] {
        w.status.create(txn).unwrap();
    }
    let r = w.now();
    // Enough keys for several rewrite chunks (256 KiB each) of range deletions.
    let mut wide = keys("n", 3000);
    for op in &mut wide {
        op.value = vec![b'v'; 200];
    }
    t.write_intents(0, big, 1, r, &wide, &w.resolver()).unwrap();
    t.write_intents(0, small, 1, r, &keys("p", 3), &w.resolver()).unwrap();
    t.write_intents(0, other_before, 1, r, &keys("q", 100), &w.resolver()).unwrap();
    t.write_intents(0, other_after, 1, r, &keys("r", 100), &w.resolver()).unwrap();
    let c_big = w.status.commit(big, vec![t.id()]).unwrap();
    let c_small = w.status.commit(small, vec![t.id()]).unwrap();
    assert_eq!(t.apply_intents(big, c_big).unwrap(), 3000);
    assert_eq!(t.apply_intents(small, c_small).unwrap(), 3);
    assert_eq!(t.apply_intents(big, c_big).unwrap(), 0, "idempotent");
    let mut left = t.txns_with_intents().unwrap();
    left.sort();
    assert_eq!(left, vec![other_before, other_after]);
    // Only the two open transactions' intents and reverse entries remain.
    assert_eq!(intents_cf_keys(&w.engines[1]).len(), 2 * 2 * 100);
    assert_eq!(w.get_at("n02999", w.now()).as_deref().map(str::len), Some(200));
    assert_eq!(w.get_at("p00002", w.now()).as_deref(), Some("v"));
    // The open ones still resolve.
    let c = w.status.commit(other_after, vec![t.id()]).unwrap();
    assert_eq!(t.apply_intents(other_after, c).unwrap(), 100);
    assert_eq!(t.txns_with_intents().unwrap(), vec![other_before]);
}

#[test]
fn abort_removes_intents() {
    let w = World::new();
    w.put("a", "keep");
    let txn = tid(9);
    w.status.create(txn).unwrap();
    let r = w.now();
    w.txn_write(txn, 1, r, vec![WriteOp::put("a", "gone"), WriteOp::put("q", "gone")]).unwrap();
    assert_eq!(w.tablets[1].txns_with_intents().unwrap(), vec![txn]);
    w.status.abort(txn, all_ids(&w)).unwrap();
    assert_eq!(w.get_at("a", w.now()).as_deref(), Some("keep"));
    for t in &w.tablets {
        t.remove_intents(txn).unwrap();
        assert!(t.txns_with_intents().unwrap().is_empty());
    }
    assert_eq!(w.get_at("q", w.now()), None);
    // a new writer is not blocked
    w.put("a", "next");
    assert_eq!(w.get_at("a", w.now()).as_deref(), Some("next"));
    assert!(w.status.commit(txn, vec![]).is_err());
}

#[test]
fn rollback_to_statement_drops_later_intents_only() {
    let w = World::new();
    w.put("a", "old");
    w.put("b", "old");
    let txn = tid(7);
    let other = tid(8);
    w.status.create(txn).unwrap();
    w.status.create(other).unwrap();
    let r = w.now();
    // statements 1-2 before the savepoint, 3-4 inside it
    w.txn_write(txn, 1, r, vec![WriteOp::put("a", "s1"), WriteOp::lock("b")]).unwrap();
    w.txn_write(txn, 2, r, vec![WriteOp::put("z", "s2")]).unwrap();
    w.txn_write(txn, 3, r, vec![WriteOp::put("a", "s3"), WriteOp::delete("z"), WriteOp::put("n", "s3")]).unwrap();
    w.txn_write(txn, 4, r, vec![WriteOp::lock("c"), WriteOp::put("y", "s4")]).unwrap();
    assert_eq!(w.get_ctx("a", ReadContext::in_txn(r, txn, 5)).as_deref(), Some("s3"));
    let dropped: usize = w.tablets.iter().map(|t| t.rollback_intents(txn, 3).unwrap()).sum();
    assert_eq!(dropped, 5);
    assert_eq!(w.tablets.iter().map(|t| t.rollback_intents(txn, 3).unwrap()).sum::<usize>(), 0, "idempotent");
    // earlier statements' writes are visible again, later ones are gone
    let at = |k: &str| w.get_ctx(k, ReadContext::in_txn(r, txn, 6));
    assert_eq!(at("a").as_deref(), Some("s1"));
    assert_eq!(at("z").as_deref(), Some("s2"));
    assert_eq!(at("n"), None);
    assert_eq!(at("y"), None);
    // the rolled-back lock on c is released; the earlier lock on b is kept
    let r2 = w.now();
    w.txn_write(other, 1, r2, vec![WriteOp::lock("c")]).unwrap();
    let e = w.txn_write(other, 1, r2, vec![WriteOp::put("b", "x")]).unwrap_err();
    assert_eq!(e.code(), ErrorCode::SerializationFailure);
    // commit applies exactly what is left
    let commit = w.status.commit(txn, all_ids(&w)).unwrap();
    for t in &w.tablets {
        t.apply_intents(txn, commit).unwrap();
    }
    assert_eq!(w.get_at("a", commit).as_deref(), Some("s1"));
    assert_eq!(w.get_at("b", commit).as_deref(), Some("old"));
    assert_eq!(w.get_at("z", commit).as_deref(), Some("s2"));
    assert_eq!(w.get_at("n", commit), None);
    assert_eq!(w.get_at("y", commit), None);
}

#[test]
fn row_lock_strengths_follow_postgresql() {
    use pinax_proto::LockStrength::*;
    let w = World::new();
    for k in ["a", "b", "c", "d"] {
        w.put(k, "0");
    }
    let t0 = tid(20);
    w.status.create(t0).unwrap();
    w.txn_write(t0, 1, w.now(), vec![WriteOp::row_lock("d", KeyShare)]).unwrap();
    let (t1, t2) = (tid(21), tid(22));
    w.status.create(t1).unwrap();
    w.status.create(t2).unwrap();
    let r = w.now();
    // t1: a foreign-key check's KEY SHARE on a, FOR SHARE on b, FOR NO KEY UPDATE on c
    w.txn_write(t1, 1, r, vec![WriteOp::row_lock("a", KeyShare), WriteOp::row_lock("b", Share), WriteOp::row_lock("c", NoKeyUpdate)]).unwrap();
    let conflict = |ops: Vec<WriteOp>| {
        let e = w.txn_write(t2, 1, r, ops).unwrap_err();
        assert_eq!(e.code(), ErrorCode::SerializationFailure);
    };
    // KEY SHARE: a non-key update and other lockers pass; a delete or FOR UPDATE waits
    w.txn_write(t2, 1, r, vec![WriteOp::put("a", "t2"), WriteOp::row_lock("a", NoKeyUpdate)]).unwrap();
    conflict(vec![WriteOp::delete("a")]);
    conflict(vec![WriteOp::row_lock("a", Update)]);
    // a stronger op on a key the same batch already wrote is checked again
    conflict(vec![WriteOp::put("d", "x"), WriteOp::delete("d")]);
    // SHARE: shared lockers pass, a non-key update does not
    w.txn_write(t2, 1, r, vec![WriteOp::row_lock("b", KeyShare), WriteOp::row_lock("b", Share)]).unwrap();
    conflict(vec![WriteOp::put("b", "t2")]);
    // NO KEY UPDATE: only KEY SHARE passes
    w.txn_write(t2, 1, r, vec![WriteOp::row_lock("c", KeyShare)]).unwrap();
    conflict(vec![WriteOp::row_lock("c", Share)]);
    conflict(vec![WriteOp::put("c", "t2")]);
    // strengths round-trip through ops
    assert_eq!(WriteOp::lock("x").strength(), Update);
    assert_eq!(WriteOp::lock_shared("x").strength(), Share);
    assert_eq!(WriteOp::put("x", "v").strength(), NoKeyUpdate);
    assert_eq!(WriteOp::row_lock("x", KeyShare).strength(), KeyShare);
}

/// SERIALIZABLE range locks: a range read takes SHARE on the tablet's partition
/// start, a serializable writer PREDICATE WRITE there. They conflict with each other
/// only; and a range lock whose read time is older than a committed serializable
/// writer's commit conflicts too (the read may have missed its rows).
#[test]
fn serializable_range_locks() {
    use pinax_proto::LockStrength::{PredicateWrite, Share};
    let w = World::new();
    let sentinel = Vec::new(); // tablet 0 starts at the empty key
    let (reader, writer, writer2) = (tid(31), tid(32), tid(33));
    for t in [reader, writer, writer2] {
        w.status.create(t).unwrap();
    }
    // Writers share the predicate lock with each other.
    let old_read = w.now();
    w.txn_write(writer2, 1, w.now(), vec![WriteOp::row_lock(sentinel.clone(), PredicateWrite), WriteOp::put("b", "2")]).unwrap();
    w.txn_write(writer, 1, w.now(), vec![WriteOp::row_lock(sentinel.clone(), PredicateWrite), WriteOp::put("c", "3")]).unwrap();
    // A range read conflicts with a pending one (and may wait for it).
    let e = w.txn_write(reader, 1, w.now(), vec![WriteOp::row_lock(sentinel.clone(), Share)]);
    assert!(matches!(e, Err(Error::WriteConflict { other_txn: Some(o), .. }) if o == writer || o == writer2), "{e:?}");
    // ... and, once that one committed, if it read before the commit.
    w.status.abort(writer2, vec![]).unwrap();
    w.tablets[0].remove_intents(writer2).unwrap();
    w.manual.advance(10);
    let commit = w.status.commit(writer, vec![w.tablets[0].id()]).unwrap();
    w.tablets[0].apply_intents(writer, commit).unwrap();
    let e = w.txn_write(reader, 1, old_read, vec![WriteOp::row_lock(sentinel.clone(), Share)]);
    assert!(matches!(e, Err(Error::WriteConflict { other_txn: None, committed_at: Some(c), .. }) if c >= commit), "{e:?}");
    // A range read after the commit takes the lock; a writer now waits for it.
    w.txn_write(reader, 1, w.now(), vec![WriteOp::row_lock(sentinel.clone(), Share)]).unwrap();
    let late = tid(34);
    w.status.create(late).unwrap();
    let e = w.txn_write(late, 1, w.now(), vec![WriteOp::row_lock(sentinel, PredicateWrite), WriteOp::put("d", "4")]);
    assert!(matches!(e, Err(Error::WriteConflict { other_txn: Some(o), .. }) if o == reader), "{e:?}");
    // Row locks and writes of other keys are unaffected by either.
    assert_eq!(w.get_at("c", w.now()).as_deref(), Some("3"));
    // The newest SERIALIZABLE commit is stored with the data: a reopened tablet
    // (or a new leader replica) still fails range reads older than it, and only those.
    w.status.abort(reader, vec![]).unwrap();
    w.tablets[0].remove_intents(reader).unwrap();
    let w = w.restart();
    let again = tid(35);
    w.status.create(again).unwrap();
    let e = w.txn_write(again, 1, old_read, vec![WriteOp::row_lock(Vec::new(), Share)]);
    assert!(matches!(e, Err(Error::WriteConflict { other_txn: None, committed_at: Some(c), .. }) if c >= commit), "{e:?}");
    w.txn_write(again, 1, w.now(), vec![WriteOp::row_lock(Vec::new(), Share)]).unwrap();
}

#[test]
fn range_locks_of_a_fresh_tablet_do_not_conflict() {
    // Regression: a replica that became leader took "now" as the newest SERIALIZABLE
    // commit, so a range read started before its first write failed with 40001.
    let w = World::new();
    let t = tid(36);
    w.status.create(t).unwrap();
    let read = w.now();
    w.manual.advance(10);
    w.txn_write(t, 1, read, vec![WriteOp::row_lock(Vec::new(), pinax_proto::LockStrength::Share)]).unwrap();
}

#[test]
fn aborted_intent_is_cleaned_by_next_writer() {
    let w = World::new();
    let txn = tid(4);
    w.status.create(txn).unwrap();
    w.txn_write(txn, 1, w.now(), vec![WriteOp::put("a", "t")]).unwrap();
    w.status.abort(txn, vec![]).unwrap();
    w.put("a", "fast");
    assert_eq!(w.get_at("a", w.now()).as_deref(), Some("fast"));
    assert!(w.tablets[0].txns_with_intents().unwrap().is_empty());
}

#[test]
fn crash_after_commit_record_before_apply_still_commits() {
    let w = World::new();
    let txn = tid(5);
    w.status.create(txn).unwrap();
    w.txn_write(txn, 1, w.now(), vec![WriteOp::put("b", "B"), WriteOp::put("y", "Y")]).unwrap();
    let commit = w.status.commit(txn, all_ids(&w)).unwrap();
    // crash: nothing applied
    let w = w.restart();
    assert_eq!(w.status.status(txn, w.now()).unwrap(), TxnStatus::Committed { commit_ht: commit });
    assert_eq!(w.status.unresolved().len(), 1);
    assert_eq!(w.get_at("b", w.now()).as_deref(), Some("B"));
    assert_eq!(w.get_at("y", w.now()).as_deref(), Some("Y"));
    // recovery applies and resolves
    for t in &w.tablets {
        assert_eq!(t.txns_with_intents().unwrap(), vec![txn]);
        t.apply_intents(txn, commit).unwrap();
    }
    w.status.mark_resolved(txn).unwrap();
    assert!(w.status.unresolved().is_empty());
    // The mark is kept in memory only: after another restart the record is
    // resolved again, which finds nothing left to apply.
    let w = w.restart();
    assert_eq!(w.status.unresolved().len(), 1);
    for t in &w.tablets {
        assert_eq!(t.apply_intents(txn, commit).unwrap(), 0);
    }
    w.status.mark_resolved(txn).unwrap();
    assert!(w.status.unresolved().is_empty());
    assert_eq!(w.get_at("y", w.now()).as_deref(), Some("Y"));
}

#[test]
fn a_pending_record_is_persisted_at_the_first_heartbeat() {
    let w = World::new();
    let young = tid(11);
    let old = tid(12);
    for t in [young, old] {
        w.status.create(t).unwrap();
    }
    w.txn_write(young, 1, w.now(), vec![WriteOp::put("d", "young")]).unwrap();
    w.txn_write(old, 1, w.now(), vec![WriteOp::put("e", "old")]).unwrap();
    // Creating wrote nothing; the first heartbeat writes the pending record.
    assert!(w.status_engine.get(Cf::Regular, &pinax_codec::status_record::status_key(young.as_bytes())).unwrap().is_none());
    w.status.heartbeat(old).unwrap();
    // The status tablet restarts (a new leader): the record created in memory is
    // gone, so that transaction is aborted; the heartbeated one goes on.
    let w = w.restart();
    assert_eq!(w.status.status(young, w.now()).unwrap(), TxnStatus::Aborted);
    assert_eq!(w.status.status(old, w.now()).unwrap(), TxnStatus::Pending);
    assert_eq!(w.status.commit(young, all_ids(&w)).unwrap_err().code(), ErrorCode::TxnNotFound);
    assert_eq!(w.status.heartbeat(young).unwrap_err().code(), ErrorCode::TxnNotFound);
    // Its intent is no obstacle: the next writer removes it.
    w.put("d", "next");
    assert_eq!(w.get_at("d", w.now()).as_deref(), Some("next"));
    let commit = w.status.commit(old, all_ids(&w)).unwrap();
    for t in &w.tablets {
        t.apply_intents(old, commit).unwrap();
    }
    assert_eq!(w.get_at("e", w.now()).as_deref(), Some("old"));
}

#[test]
fn expired_transaction_is_aborted() {
    let w = World::new();
    let txn = tid(6);
    w.status.create(txn).unwrap();
    w.txn_write(txn, 1, w.now(), vec![WriteOp::put("c", "C")]).unwrap();
    w.manual.advance(TIMEOUT_US / 2);
    w.status.heartbeat(txn).unwrap();
    w.manual.advance(TIMEOUT_US / 2 + 1);
    assert!(w.status.expire().unwrap().is_empty(), "heartbeat kept it alive");
    w.manual.advance(TIMEOUT_US);
    let expired = w.status.expire().unwrap();
    assert_eq!(expired.len(), 1);
    assert_eq!(w.status.status(txn, w.now()).unwrap(), TxnStatus::Aborted);
    let e = w.status.commit(txn, all_ids(&w)).unwrap_err();
    assert_eq!(e.code(), ErrorCode::TxnAborted);
    assert_eq!(w.get_at("c", w.now()), None);
    // expiry survives a restart
    let w = w.restart();
    assert_eq!(w.status.status(txn, w.now()).unwrap(), TxnStatus::Aborted);
}

#[test]
fn insert_if_absent() {
    let w = World::new();
    let ins = |k: &str| w.tablet_for(k.as_bytes()).write_fast(0, &[WriteOp::insert(k, "v")], None, &w.resolver());
    ins("k").unwrap();
    let e = ins("k").unwrap_err();
    assert_eq!(e.code(), ErrorCode::DuplicateKey);
    w.tablets[0].write_fast(0, &[WriteOp::delete("k")], None, &w.resolver()).unwrap();
    ins("k").unwrap();
    // duplicate inside one batch
    let e = w.tablets[0].write_fast(0, &[WriteOp::insert("d", "1"), WriteOp::insert("d", "2")], None, &w.resolver()).unwrap_err();
    assert_eq!(e.code(), ErrorCode::DuplicateKey);
    assert_eq!(w.get_at("d", w.now()), None, "failed batch wrote nothing");
    // inside a transaction: own insert then insert again is a duplicate
    let txn = tid(8);
    w.status.create(txn).unwrap();
    let r = w.now();
    w.txn_write(txn, 1, r, vec![WriteOp::insert("e", "1")]).unwrap();
    let e = w.txn_write(txn, 2, r, vec![WriteOp::insert("e", "2")]).unwrap_err();
    assert_eq!(e.code(), ErrorCode::DuplicateKey);
    w.txn_write(txn, 2, r, vec![WriteOp::delete("e")]).unwrap();
    w.txn_write(txn, 3, r, vec![WriteOp::insert("e", "3")]).unwrap();
    // committed key is a duplicate for a transaction too
    let e = w.txn_write(txn, 4, r, vec![WriteOp::insert("k", "x")]).unwrap_err();
    assert_eq!(e.code(), ErrorCode::DuplicateKey);
}

#[test]
fn scans_merge_versions_and_intents_in_order() {
    let w = World::new();
    for k in ["a", "b", "c", "d", "e"] {
        w.put(k, &format!("{k}0"));
    }
    let txn = tid(3);
    w.status.create(txn).unwrap();
    let r = w.now();
    w.txn_write(txn, 1, r, vec![WriteOp::put("bb", "new"), WriteOp::delete("c"), WriteOp::put("d", "d1")]).unwrap();
    let t = &w.tablets[0];
    let keys_of =
        |rows: &[(Vec<u8>, Vec<u8>)]| rows.iter().map(|(k, v)| format!("{}={}", String::from_utf8_lossy(k), String::from_utf8_lossy(v))).collect::<Vec<_>>();
    let own = ReadContext::in_txn(r, txn, 2);
    let all = t.scan(own, &ScanSpec::default(), &w.resolver()).unwrap();
    assert_eq!(keys_of(&all.rows), ["a=a0", "b=b0", "bb=new", "d=d1", "e=e0"]);
    assert_eq!(all.resume, None);
    let rev = t.scan(own, &ScanSpec { reverse: true, ..Default::default() }, &w.resolver()).unwrap();
    assert_eq!(keys_of(&rev.rows), ["e=e0", "d=d1", "bb=new", "b=b0", "a=a0"]);
    // others see the committed state only
    let other = t.scan(ReadContext::at(w.now()), &ScanSpec::default(), &w.resolver()).unwrap();
    assert_eq!(keys_of(&other.rows), ["a=a0", "b=b0", "c=c0", "d=d0", "e=e0"]);
    // paging forward and backward with bounds
    let mut spec = ScanSpec { start: b"b".to_vec(), end: Some(b"e".to_vec()), limit: 2, ..Default::default() };
    let p1 = t.scan(own, &spec, &w.resolver()).unwrap();
    assert_eq!(keys_of(&p1.rows), ["b=b0", "bb=new"]);
    spec.start = p1.resume.unwrap();
    let p2 = t.scan(own, &spec, &w.resolver()).unwrap();
    assert_eq!(keys_of(&p2.rows), ["d=d1"]);
    let mut rspec = ScanSpec { start: b"a".to_vec(), end: Some(b"e".to_vec()), limit: 2, reverse: true, ..Default::default() };
    let q1 = t.scan(own, &rspec, &w.resolver()).unwrap();
    assert_eq!(keys_of(&q1.rows), ["d=d1", "bb=new"]);
    rspec.end = q1.resume;
    let q2 = t.scan(own, &rspec, &w.resolver()).unwrap();
    assert_eq!(keys_of(&q2.rows), ["b=b0", "a=a0"]);
    // a point read returns the row `start` only (own intents and versions merged),
    // though the range holds more; a reverse one reads the range
    let point = |start: &str, end: &str, reverse: bool, ctx| {
        let spec = ScanSpec { start: start.as_bytes().to_vec(), end: Some(end.as_bytes().to_vec()), point: true, reverse, ..Default::default() };
        keys_of(&t.scan(ctx, &spec, &w.resolver()).unwrap().rows)
    };
    assert_eq!(point("b", "c", false, own), ["b=b0"]);
    assert_eq!(point("d", "e", false, own), ["d=d1"]);
    assert_eq!(point("c", "d", false, own), Vec::<String>::new());
    assert_eq!(point("c", "d", false, ReadContext::at(w.now())), ["c=c0"]);
    assert_eq!(point("bb", "b", false, own), Vec::<String>::new());
    assert_eq!(point("b", "c", true, own), ["bb=new", "b=b0"]);
    // after commit + apply, everyone sees the new state; the old state stays readable
    let commit = w.status.commit(txn, all_ids(&w)).unwrap();
    t.apply_intents(txn, commit).unwrap();
    let after = t.scan(ReadContext::at(w.now()), &ScanSpec::default(), &w.resolver()).unwrap();
    assert_eq!(keys_of(&after.rows), ["a=a0", "b=b0", "bb=new", "d=d1", "e=e0"]);
    let past = t.scan(ReadContext::at(r), &ScanSpec::default(), &w.resolver()).unwrap();
    assert_eq!(keys_of(&past.rows), ["a=a0", "b=b0", "c=c0", "d=d0", "e=e0"]);
}

#[test]
fn keys_outside_partition_are_refused() {
    let w = World::new();
    let e = w.tablets[0].write_fast(0, &[WriteOp::put("zz", "v")], None, &w.resolver()).unwrap_err();
    assert_eq!(e.code(), ErrorCode::TabletNotFound);
}

/// A tablet on an engine whose compactions run history GC at `cutoff`, on a
/// manual clock.
struct GcTablet {
    cutoff: HistoryCutoff,
    engine: MemEngine,
    manual: Arc<ManualClock>,
    clock: Arc<HybridClock>,
    t: Tablet<MemEngine>,
}

impl GcTablet {
    fn new() -> GcTablet {
        let cutoff = HistoryCutoff::default();
        let engine = MemEngine::with_compaction_filter(Arc::new(HistoryGcFilterFactory { cutoff: cutoff.clone() }));
        let manual = Arc::new(ManualClock::new(1_000));
        let clock = Arc::new(HybridClock::new(manual.clone()));
        let t = Tablet::open(TabletId(1), engine.clone(), clock.clone(), Partition::default(), TabletOptions::default(), cutoff.clone()).unwrap();
        GcTablet { cutoff, engine, manual, clock, t }
    }
}

#[test]
fn history_gc_keeps_what_reads_after_cutoff_need() {
    let GcTablet { cutoff, engine, manual, t, .. } = GcTablet::new();
    let none = |_: TxnId, _: HybridTime| -> pinax_mvcc::Result<TxnStatus> { Ok(TxnStatus::Aborted) };
    let mut hts = Vec::new();
    for i in 0..5 {
        manual.advance(100);
        hts.push(t.write_fast(0, &[WriteOp::put("k", format!("v{i}"))], None, &none).unwrap());
    }
    let before = engine.version_count(Cf::Regular);
    cutoff.advance_to(hts[2]);
    engine.compact_range(Cf::Regular, None, None).unwrap();
    assert_eq!(engine.version_count(Cf::Regular), before - 2);
    // reads at or after the cutoff are unchanged
    for (i, ht) in hts.iter().enumerate().skip(2) {
        let v = t.read(ReadContext::at(*ht), b"k", &none).unwrap();
        assert_eq!(v, Some(format!("v{i}").into_bytes()));
    }
}

#[test]
fn tablets_track_which_transactions_may_have_intents() {
    let w = World::new();
    let t0 = &w.tablets[0];
    assert!(t0.txns_maybe_with_intents().is_empty());
    let txn = tid(9);
    w.status.create(txn).unwrap();
    w.txn_write(txn, 1, w.now(), vec![WriteOp::put("a", "A"), WriteOp::put("b", "B")]).unwrap();
    assert_eq!(t0.txns_maybe_with_intents(), vec![txn]);
    let commit = w.status.commit(txn, all_ids(&w)).unwrap();
    // A later writer of "a" applies that one committed intent itself; "b" still waits.
    w.manual.advance(10);
    w.put("a", "A2");
    assert_eq!(t0.txns_with_intents().unwrap(), vec![txn]);
    assert_eq!(w.get_at("b", w.now()).as_deref(), Some("B"));
    assert_eq!(w.get_at("a", commit).as_deref(), Some("A"));
    assert_eq!(w.get_at("a", w.now()).as_deref(), Some("A2"));
    t0.apply_intents(txn, commit).unwrap();
    // Resolved: the tablet knows it holds no intents and reads skip the intents CF.
    assert!(t0.txns_maybe_with_intents().is_empty());
    assert!(t0.txns_with_intents().unwrap().is_empty());
    assert_eq!(w.get_at("b", w.now()).as_deref(), Some("B"));
    assert_eq!(w.get_at("a", w.now()).as_deref(), Some("A2"));
    // Pending intents found on restart are tracked again (and read).
    let txn2 = tid(10);
    w.status.create(txn2).unwrap();
    let read_ht = w.now();
    w.txn_write(txn2, 1, read_ht, vec![WriteOp::put("c", "C")]).unwrap();
    let w = w.restart();
    assert_eq!(w.tablets[0].txns_maybe_with_intents(), vec![txn2]);
    assert_eq!(w.get_ctx("c", ReadContext::in_txn(read_ht, txn2, 2)).as_deref(), Some("C"));
    assert_eq!(w.get_at("c", w.now()), None);
}

#[test]
fn row_locks_exclude_writers_and_lockers_not_readers() {
    let w = World::new();
    w.put("a", "0");
    let (t1, t2) = (tid(21), tid(22));
    w.status.create(t1).unwrap();
    w.status.create(t2).unwrap();
    w.txn_write(t1, 1, w.now(), vec![WriteOp::lock("a")]).unwrap();
    // readers are not blocked and see no change
    assert_eq!(w.get_at("a", w.now()).as_deref(), Some("0"));
    // another locker, a transactional writer and a fast-path writer all conflict
    for op in [WriteOp::lock("a"), WriteOp::put("a", "t2")] {
        let e = w.txn_write(t2, 1, w.now(), vec![op]).unwrap_err();
        assert_eq!(e.code(), ErrorCode::SerializationFailure);
    }
    let e = w.tablets[0].write_fast(0, &[WriteOp::put("a", "x")], None, &w.resolver()).unwrap_err();
    assert_eq!(e.code(), ErrorCode::SerializationFailure);
    // the holder writes the row it locked; a later lock does not undo its write,
    // nor does a lock in the same statement (batch) as the write
    w.txn_write(t1, 2, w.now(), vec![WriteOp::put("a", "t1"), WriteOp::lock("a")]).unwrap();
    w.txn_write(t1, 3, w.now(), vec![WriteOp::lock("a")]).unwrap();
    assert_eq!(w.get_ctx("a", ReadContext::in_txn(w.now(), t1, 4)).as_deref(), Some("t1"));
    let commit = w.status.commit(t1, all_ids(&w)).unwrap();
    for t in &w.tablets {
        t.apply_intents(t1, commit).unwrap();
        assert!(t.txns_with_intents().unwrap().is_empty());
    }
    assert_eq!(w.get_at("a", w.now()).as_deref(), Some("t1"));
    // a lock-only transaction leaves no version behind and frees the row
    let t3 = tid(23);
    w.status.create(t3).unwrap();
    w.txn_write(t3, 1, w.now(), vec![WriteOp::lock("a")]).unwrap();
    let c3 = w.status.commit(t3, all_ids(&w)).unwrap();
    w.tablets[0].apply_intents(t3, c3).unwrap();
    assert_eq!(w.get_at("a", w.now()).as_deref(), Some("t1"));
    w.manual.advance(10);
    w.put("a", "free");
    assert_eq!(w.get_at("a", w.now()).as_deref(), Some("free"));
}

#[test]
fn shared_locks_are_compatible_with_each_other_only() {
    let w = World::new();
    w.put("p", "parent");
    let (t1, t2, t3) = (tid(31), tid(32), tid(33));
    for t in [t1, t2, t3] {
        w.status.create(t).unwrap();
    }
    // two foreign-key checks on the same parent row
    w.txn_write(t1, 1, w.now(), vec![WriteOp::lock_shared("p")]).unwrap();
    w.txn_write(t2, 1, w.now(), vec![WriteOp::lock_shared("p")]).unwrap();
    // a delete, an exclusive locker and a fast-path write of the parent all conflict
    for op in [WriteOp::delete("p"), WriteOp::lock("p")] {
        let e = w.txn_write(t3, 1, w.now(), vec![op]).unwrap_err();
        assert_eq!(e.code(), ErrorCode::SerializationFailure);
    }
    let e = w.tablets[1].write_fast(0, &[WriteOp::delete("p")], None, &w.resolver()).unwrap_err();
    assert_eq!(e.code(), ErrorCode::SerializationFailure);
    // a shared locker meets an exclusive lock or a pending write: conflict
    w.txn_write(t3, 1, w.now(), vec![WriteOp::put("q", "x")]).unwrap();
    let t4 = tid(34);
    w.status.create(t4).unwrap();
    let e = w.txn_write(t4, 1, w.now(), vec![WriteOp::lock_shared("q")]).unwrap_err();
    assert_eq!(e.code(), ErrorCode::SerializationFailure);
    // once both sharers end, the parent can go
    for t in [t1, t2] {
        let c = w.status.commit(t, all_ids(&w)).unwrap();
        w.tablets[1].apply_intents(t, c).unwrap();
    }
    w.manual.advance(10);
    w.tablets[1].write_fast(0, &[WriteOp::delete("p")], None, &w.resolver()).unwrap();
    assert_eq!(w.get_at("p", w.now()), None);
}

#[test]
fn a_write_sent_again_is_not_applied_twice() {
    // Regression: a client that lost the answer to an applied write (its leader
    // died after replicating it) sent it again; an insert then failed with a
    // duplicate key (found by the 3-node bank test), an update could apply twice.
    let w = World::new();
    let t = w.tablet_for(b"k");
    let first = t.write_fast(41, &[WriteOp::insert("k", "v")], None, &w.resolver()).unwrap();
    let again = t.write_fast(41, &[WriteOp::insert("k", "v")], None, &w.resolver()).unwrap();
    assert_eq!(first, again);
    // A different request is a different write: the insert now finds the row.
    let e = t.write_fast(42, &[WriteOp::insert("k", "v")], None, &w.resolver()).unwrap_err();
    assert!(matches!(e, Error::DuplicateKey { .. }), "{e:?}");
    let txn = tid(40);
    w.status.create(txn).unwrap();
    let t = w.tablet_for(b"m");
    t.write_intents(43, txn, 1, w.now(), &[WriteOp::insert("m", "1")], &w.resolver()).unwrap();
    t.write_intents(43, txn, 1, w.now(), &[WriteOp::insert("m", "1")], &w.resolver()).unwrap();
    let e = t.write_intents(44, txn, 1, w.now(), &[WriteOp::insert("m", "1")], &w.resolver()).unwrap_err();
    assert!(matches!(e, Error::DuplicateKey { .. }), "{e:?}");
}

/// Counts and sizes the log entries a tablet replicates, and the deletions of
/// intents they carry (one by one, by range).
#[derive(Default)]
struct CountingLog {
    inner: Option<pinax_tablet::DirectWrite<MemEngine>>,
    entries: parking_lot::Mutex<Vec<usize>>,
    intent_deletes: parking_lot::Mutex<(usize, usize)>,
}

impl CountingLog {
    fn new(engine: Arc<MemEngine>) -> Self {
        CountingLog { inner: Some(pinax_tablet::DirectWrite::new(engine, false)), ..Default::default() }
    }

    fn inner(&self) -> &pinax_tablet::DirectWrite<MemEngine> {
        self.inner.as_ref().expect("a log over an engine")
    }
}

impl pinax_tablet::Replicator for CountingLog {
    fn replicate(&self, ht: HybridTime, batch: pinax_engine::OwnedBatch, request: u128) -> pinax_tablet::Result<()> {
        self.entries.lock().push(batch.as_bytes().len());
        {
            let mut d = self.intent_deletes.lock();
            for op in batch.ops() {
                match op {
                    pinax_engine::BatchOp::Delete { cf: Cf::Intents, key } if key.first() == Some(&b'I') => d.0 += 1,
                    pinax_engine::BatchOp::DeleteRange { cf: Cf::Intents, start, .. } if start.first() == Some(&b'I') => d.1 += 1,
                    _ => {}
                }
            }
        }
        self.inner().replicate(ht, batch, request)
    }
    fn applied_request(&self, request: u128) -> Option<HybridTime> {
        self.inner().applied_request(request)
    }
    fn leader_term(&self) -> pinax_tablet::Result<u64> {
        self.inner().leader_term()
    }
    fn leads_now(&self) -> bool {
        self.inner().leads_now()
    }
    fn read_barrier(&self) -> pinax_tablet::Result<u64> {
        self.inner().read_barrier()
    }
}

/// Tablet 9 (every key) over its own engine, replicating through a [`CountingLog`].
fn counted_tablet(w: &World) -> (Arc<MemEngine>, Arc<CountingLog>, Tablet<MemEngine>) {
    let engine = Arc::new(MemEngine::new());
    let log = Arc::new(CountingLog::new(engine.clone()));
    let part = Partition { start: vec![], end: None };
    let t = Tablet::open_replicated(TabletId(9), engine.clone(), log.clone(), w.clock.clone(), part, HistoryCutoff::default()).unwrap();
    (engine, log, t)
}

/// A log that keeps the order batches were handed over in, records their request
/// ids in that order, and holds their application while the gate is shut (the
/// time a Raft entry takes to be durable): writes decided meanwhile show whether
/// the tablet lets the next writer in while a batch is in flight.
#[derive(Default)]
struct GatedLog {
    inner: Option<pinax_tablet::DirectWrite<MemEngine>>,
    /// (request ids in log order, batches applied so far, gate shut).
    state: parking_lot::Mutex<(Vec<u128>, usize, bool)>,
    changed: parking_lot::Condvar,
}

impl GatedLog {
    fn set_shut(&self, shut: bool) {
        self.state.lock().2 = shut;
        self.changed.notify_all();
    }
    fn handed_over(&self) -> Vec<u128> {
        self.state.lock().0.clone()
    }
    /// Wait (at most 5 s) until request `id` has been handed over.
    fn wait_handed_over(&self, id: u128) -> bool {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut st = self.state.lock();
        while !st.0.contains(&id) {
            if self.changed.wait_until(&mut st, deadline).timed_out() {
                return false;
            }
        }
        true
    }
}

impl pinax_tablet::Replicator for GatedLog {
    fn replicate(&self, ht: HybridTime, batch: pinax_engine::OwnedBatch, request: u128) -> pinax_tablet::Result<()> {
        self.replicate_then(ht, batch, request, &mut || {})
    }
    fn replicate_then(&self, ht: HybridTime, batch: pinax_engine::OwnedBatch, request: u128, queued: &mut dyn FnMut()) -> pinax_tablet::Result<()> {
        let place = {
            let mut st = self.state.lock();
            st.0.push(request);
            st.0.len() - 1
        };
        self.changed.notify_all();
        queued();
        let mut st = self.state.lock();
        while st.2 || st.1 != place {
            self.changed.wait(&mut st);
        }
        let res = self.inner.as_ref().expect("engine").replicate(ht, batch, request);
        st.1 += 1;
        drop(st);
        self.changed.notify_all();
        res
    }
    fn applied_request(&self, request: u128) -> Option<HybridTime> {
        self.inner.as_ref().expect("engine").applied_request(request)
    }
    fn leader_term(&self) -> pinax_tablet::Result<u64> {
        Ok(1)
    }
    fn leads_now(&self) -> bool {
        true
    }
    fn read_barrier(&self) -> pinax_tablet::Result<u64> {
        Ok(1)
    }
}

/// A tablet (id 9, the whole key space) on `w`'s clock whose log is a [`GatedLog`].
fn gated_tablet(w: &World) -> (Arc<GatedLog>, Tablet<MemEngine>) {
    let engine = Arc::new(MemEngine::new());
    let log = Arc::new(GatedLog { inner: Some(pinax_tablet::DirectWrite::new(engine.clone(), false)), ..Default::default() });
    let part = Partition { start: vec![], end: None };
    let t = Tablet::open_replicated(TabletId(9), engine, log.clone(), w.clock.clone(), part, HistoryCutoff::default()).unwrap();
    (log, t)
}

#[test]
fn writes_of_other_rows_are_decided_while_a_write_is_in_flight() {
    let w = World::new();
    let (log, t) = gated_tablet(&w);
    let resolver = w.resolver();
    // A transaction with an intent, to roll back while a write is in flight.
    let txn = tid(91);
    w.status.create(txn).unwrap();
    t.write_intents(10, txn, 1, w.now(), &[WriteOp::put("t", "1")], &resolver).unwrap();
    log.set_shut(true);
    let quiet = std::time::Duration::from_millis(200);
    std::thread::scope(|s| {
        let (t, resolver, log) = (&t, &resolver, &log);
        let first = s.spawn(move || t.write_fast(1, &[WriteOp::put("a", "first")], None, resolver));
        assert!(log.wait_handed_over(1));
        // Another row: decided and handed over while the first is in flight.
        let other = s.spawn(move || t.write_fast(2, &[WriteOp::put("b", "other")], None, resolver));
        assert!(log.wait_handed_over(2), "a write of another row waited for the one in flight");
        // The same row: waits until the first is applied (the engine does not show it yet).
        let again = s.spawn(move || t.write_fast(3, &[WriteOp::put("a", "second")], None, resolver));
        // A rollback reads the engine for rows it does not know in advance: it waits
        // until no write is in flight, and keyed writes wait for it.
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let rollback = s.spawn(move || {
            let n = t.rollback_intents(txn, 1);
            done_tx.send(()).unwrap();
            n
        });
        assert!(done_rx.recv_timeout(quiet).is_err(), "the rollback ran with writes in flight");
        assert_eq!(log.handed_over(), vec![10, 1, 2], "the write of the same row went ahead");
        log.set_shut(false);
        let t1 = first.join().unwrap().unwrap();
        let t2 = other.join().unwrap().unwrap();
        let t3 = again.join().unwrap().unwrap();
        assert!(t1 < t2 && t1 < t3, "times follow the decisions: {t1:?} {t2:?} {t3:?}");
        assert_eq!(rollback.join().unwrap().unwrap(), 1);
    });
    let order = log.handed_over();
    assert_eq!(order.len(), 5, "{order:?}");
    assert!(order.iter().position(|r| *r == 3) > order.iter().position(|r| *r == 1), "{order:?}");
    let read = |k: &str| t.read(ReadContext::at(w.now()), k.as_bytes(), &resolver).unwrap();
    assert_eq!(read("a").as_deref(), Some(&b"second"[..]));
    assert_eq!(read("b").as_deref(), Some(&b"other"[..]));
    assert!(t.txns_with_intents().unwrap().is_empty());
}

/// A point read waits for writes in flight on its own row only: not for the
/// tablet's safe time, which a write of another row holds back (on a busy tablet
/// every read would wait for an fsync). A scan still waits for it.
#[test]
fn a_point_read_waits_for_writes_of_its_row_only() {
    let w = World::new();
    let (log, t) = gated_tablet(&w);
    let resolver = w.resolver();
    t.write_fast(1, &[WriteOp::put("a", "a0"), WriteOp::put("b", "b0")], None, &resolver).unwrap();
    log.set_shut(true);
    let quiet = std::time::Duration::from_millis(200);
    std::thread::scope(|s| {
        let (t, resolver, log) = (&t, &resolver, &log);
        let write = s.spawn(move || t.write_fast(2, &[WriteOp::put("a", "a1")], None, resolver));
        assert!(log.wait_handed_over(2));
        let at = w.now();
        assert!(at > HybridTime::INVALID);
        // Another row: answered while the write is in flight.
        let (btx, brx) = std::sync::mpsc::channel();
        let other = s.spawn(move || {
            let v = t.read(ReadContext::at(at), b"b", resolver).unwrap();
            let point = ScanSpec { start: b"b".to_vec(), end: Some(b"c".to_vec()), point: true, limit: 1, ..Default::default() };
            btx.send((v, t.scan(ReadContext::at(at), &point, resolver).unwrap().rows.len())).unwrap();
        });
        let got = brx.recv_timeout(std::time::Duration::from_secs(5));
        if got.is_err() {
            log.set_shut(false); // let the threads end before failing
        }
        assert_eq!(got.expect("a read of another row waited for the write in flight"), (Some(b"b0".to_vec()), 1));
        other.join().unwrap();
        // Its own row, and a scan: they wait until the write is applied, and see it.
        let (tx, rx) = std::sync::mpsc::channel();
        let (tx2, rx2) = std::sync::mpsc::channel();
        let own = s.spawn(move || tx.send(t.read(ReadContext::at(at), b"a", resolver).unwrap()).unwrap());
        let scan = s.spawn(move || tx2.send(t.scan(ReadContext::at(at), &ScanSpec::default(), resolver).unwrap().rows.len()).unwrap());
        assert!(rx.recv_timeout(quiet).is_err(), "the read of the row in flight did not wait");
        assert!(rx2.recv_timeout(std::time::Duration::from_millis(10)).is_err(), "the scan did not wait");
        log.set_shut(false);
        let written = write.join().unwrap().unwrap();
        assert!(written <= at, "the write was decided before the reads' time");
        assert_eq!(rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap().as_deref(), Some(&b"a1"[..]));
        assert_eq!(rx2.recv_timeout(std::time::Duration::from_secs(10)).unwrap(), 2);
        own.join().unwrap();
        scan.join().unwrap();
    });
}

/// Applying (or removing) a small transaction's intents is a keyed write of its
/// rows: while its entry is in flight, reads and writes of other rows go on; a
/// read of one of its rows waits and sees it applied.
#[test]
fn resolving_a_small_transaction_holds_back_its_rows_only() {
    let w = World::new();
    let (log, t) = gated_tablet(&w);
    let resolver = w.resolver();
    t.write_fast(1, &[WriteOp::put("b", "b0")], None, &resolver).unwrap();
    let txn = tid(92);
    w.status.create(txn).unwrap();
    t.write_intents(2, txn, 1, w.now(), &[WriteOp::put("a", "t"), WriteOp::put("c", "t")], &resolver).unwrap();
    let commit = w.status.commit(txn, vec![TabletId(9)]).unwrap();
    log.set_shut(true);
    std::thread::scope(|s| {
        let (t, resolver, log, w) = (&t, &resolver, &log, &w);
        let apply = s.spawn(move || t.apply_intents(txn, commit));
        assert!(log.wait_handed_over(0), "the apply's entry");
        let (tx, rx) = std::sync::mpsc::channel();
        let other = s.spawn(move || {
            tx.send(t.read(ReadContext::at(w.now()), b"b", resolver).unwrap()).unwrap();
            t.write_fast(3, &[WriteOp::put("d", "d0")], None, resolver).map(|_| ())
        });
        // (The write of "d" is handed over, then waits for the gate like the apply.)
        let got = rx.recv_timeout(std::time::Duration::from_secs(5));
        let handed = log.wait_handed_over(3);
        let (rtx, rrx) = std::sync::mpsc::channel();
        let own = s.spawn(move || rtx.send(t.read(ReadContext::at(w.now()), b"a", resolver).unwrap()).unwrap());
        let early = rrx.recv_timeout(std::time::Duration::from_millis(100));
        log.set_shut(false);
        assert_eq!(got.expect("a read of another row waited for the apply"), Some(b"b0".to_vec()));
        assert!(handed, "a write of another row waited for the apply");
        assert!(early.is_err(), "a read of one of its rows did not wait for the apply");
        assert_eq!(rrx.recv_timeout(std::time::Duration::from_secs(10)).unwrap(), Some(b"t".to_vec()));
        assert_eq!(apply.join().unwrap().unwrap(), 2);
        other.join().unwrap().unwrap();
        own.join().unwrap();
    });
    assert!(t.txns_with_intents().unwrap().is_empty());
    assert_eq!(t.apply_intents(txn, commit).unwrap(), 0, "idempotent");
}

#[test]
fn a_large_transactions_intents_are_applied_in_bounded_entries() {
    // Regression: applying a 25k-row INSERT's intents on a tablet was one 4.5 MB
    // Raft entry, which followers could not take within the AppendEntries timeout.
    let w = World::new();
    let (_, log, t) = counted_tablet(&w);
    let txn = tid(90);
    w.status.create(txn).unwrap();
    let value = "v".repeat(200);
    let rows = 4000;
    for chunk in (0..rows).collect::<Vec<_>>().chunks(500) {
        let ops: Vec<WriteOp> = chunk.iter().map(|i| WriteOp::insert(format!("k{i:05}").as_str(), value.as_str())).collect();
        t.write_intents(0, txn, 1, w.now(), &ops, &w.resolver()).unwrap();
    }
    let commit = w.status.commit(txn, vec![TabletId(9)]).unwrap();
    log.entries.lock().clear();
    assert_eq!(t.apply_intents(txn, commit).unwrap(), rows);
    let entries = log.entries.lock().clone();
    assert!(entries.len() > 2, "one entry per 256 KiB: {entries:?}");
    assert!(entries.iter().all(|n| *n < 300 << 10), "{entries:?}");
    assert_eq!(t.apply_intents(txn, commit).unwrap(), 0, "idempotent");
    assert!(t.txns_with_intents().unwrap().is_empty());
    let scan = t.scan(ReadContext::at(commit), &ScanSpec::default(), &w.resolver()).unwrap();
    assert_eq!(scan.rows.len(), rows);
}

#[test]
fn a_transaction_alone_in_its_tablet_drops_its_intents_by_range() {
    // Resolving a bulk load walked its reverse index, looked each key up and left
    // a tombstone per row in the intents column family. Alone in its tablet, the
    // transaction's intents go as range deletions, one per chunk of the walk.
    let w = World::new();
    let (engine, log, t) = counted_tablet(&w);
    let value = "v".repeat(200);
    let write = |txn: TxnId, prefix: &str, rows: usize| {
        w.status.create(txn).unwrap();
        for chunk in (0..rows).collect::<Vec<_>>().chunks(500) {
            let ops: Vec<WriteOp> = chunk.iter().map(|i| WriteOp::insert(format!("{prefix}{i:05}").as_str(), value.as_str())).collect();
            t.write_intents(0, txn, 1, w.now(), &ops, &w.resolver()).unwrap();
        }
    };
    let intent_keys = || intents_cf_keys(&engine).len();
    // Commit: every row applied, no intent or reverse entry left, no tombstone per row.
    let a = tid(91);
    write(a, "a", 4000);
    let commit = w.status.commit(a, vec![TabletId(9)]).unwrap();
    *log.intent_deletes.lock() = (0, 0);
    log.entries.lock().clear();
    assert_eq!(t.apply_intents(a, commit).unwrap(), 4000);
    let (points, ranges) = *log.intent_deletes.lock();
    assert_eq!(points, 0, "no intent deleted one by one");
    assert!(ranges > 2 && ranges <= log.entries.lock().len(), "a range per chunk: {ranges}");
    assert!(log.entries.lock().iter().all(|n| *n < 300 << 10), "entries stay bounded: {:?}", log.entries.lock());
    assert_eq!(intent_keys(), 0);
    assert!(t.txns_with_intents().unwrap().is_empty());
    assert_eq!(t.scan(ReadContext::at(commit), &ScanSpec::default(), &w.resolver()).unwrap().rows.len(), 4000);
    assert_eq!(t.apply_intents(a, commit).unwrap(), 0, "idempotent");
    // Abort: the rows never appear. (Both transactions are too large for a keyed
    // resolution, one entry of at most 256 KiB and 4096 keys: they resolve drained.)
    let b = tid(92);
    write(b, "b", 5000);
    w.status.abort(b, vec![TabletId(9)]).unwrap();
    *log.intent_deletes.lock() = (0, 0);
    t.remove_intents(b).unwrap();
    assert_eq!(log.intent_deletes.lock().0, 0);
    assert_eq!(intent_keys(), 0);
    assert_eq!(t.scan(ReadContext::at(w.now()), &ScanSpec::default(), &w.resolver()).unwrap().rows.len(), 4000);
    // Not alone: another transaction's intent among its keys stays, and the
    // transaction's own go one by one.
    let c = tid(93);
    let d = tid(94);
    write(c, "c", 3000);
    w.status.create(d).unwrap();
    t.write_intents(0, d, 1, w.now(), &[WriteOp::insert("c01500x", "d")], &w.resolver()).unwrap();
    let commit_c = w.status.commit(c, vec![TabletId(9)]).unwrap();
    *log.intent_deletes.lock() = (0, 0);
    assert_eq!(t.apply_intents(c, commit_c).unwrap(), 3000);
    assert_eq!(*log.intent_deletes.lock(), (3000, 0));
    assert_eq!(t.txns_with_intents().unwrap(), vec![d]);
    let commit_d = w.status.commit(d, vec![TabletId(9)]).unwrap();
    t.apply_intents(d, commit_d).unwrap();
    assert_eq!(intent_keys(), 0);
    assert_eq!(t.scan(ReadContext::at(commit_d), &ScanSpec::default(), &w.resolver()).unwrap().rows.len(), 7001);
}

#[test]
fn writes_slow_down_then_are_refused_while_storage_is_behind() {
    use pinax_engine::WritePressure;
    use std::time::{Duration, Instant};
    let w = World::new();
    let t = &w.tablets[0];
    let engine = &w.engines[0];
    let refresh = Duration::from_millis(60);

    engine.set_write_pressure(WritePressure::Slow(Duration::from_millis(40)));
    std::thread::sleep(refresh);
    let t0 = Instant::now();
    t.write_fast(0, &[WriteOp::put("a", "1")], None, &w.resolver()).unwrap();
    assert!(t0.elapsed() >= Duration::from_millis(40), "not delayed: {:?}", t0.elapsed());
    // A large batch waits by its size (the delay per 64 KiB): 5 × 64 KiB, 200 ms.
    let big: Vec<WriteOp> = (0..5).map(|i| WriteOp::put(format!("big{i}"), vec![b'x'; 64 << 10])).collect();
    let t0 = Instant::now();
    t.write_fast(0, &big, None, &w.resolver()).unwrap();
    assert!(t0.elapsed() >= Duration::from_millis(200), "not delayed by size: {:?}", t0.elapsed());

    // An intent written now, applied while writes are refused (applying reduces work).
    let txn = tid(50);
    w.status.create(txn).unwrap();
    t.write_intents(0, txn, 1, w.now(), &[WriteOp::put("b", "2")], &w.resolver()).unwrap();
    engine.set_write_pressure(WritePressure::Full("test".into()));
    std::thread::sleep(refresh);
    let t0 = Instant::now();
    let e = t.write_fast(0, &[WriteOp::put("a", "3")], None, &w.resolver()).unwrap_err();
    assert_eq!(e.code(), ErrorCode::Unavailable, "{e:?}");
    assert!(t0.elapsed() >= Duration::from_millis(500), "refused only after waiting for storage a while: {:?}", t0.elapsed());
    assert!(e.code().is_retryable());
    let e = t.write_intents(0, tid(51), 1, w.now(), &[WriteOp::put("c", "4")], &w.resolver()).unwrap_err();
    assert_eq!(e.code(), ErrorCode::Unavailable, "{e:?}");
    let commit = w.status.commit(txn, vec![t.id()]).unwrap();
    assert_eq!(t.apply_intents(txn, commit).unwrap(), 1);

    // A stop that passes within the wait (RocksDB's, while memtables wait for a
    // flush) delays the write rather than failing it.
    let t0 = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(100));
            engine.set_write_pressure(WritePressure::None);
        });
        t.write_fast(0, &[WriteOp::put("a", "5")], None, &w.resolver()).unwrap();
    });
    assert!(t0.elapsed() >= Duration::from_millis(100), "{:?}", t0.elapsed());
    assert_eq!(w.get_at("a", w.now()).as_deref(), Some("5"));
    assert_eq!(w.get_at("b", w.now()).as_deref(), Some("2"));
}

/// Below its disk's free-space reserve a tablet refuses clients' writes at once
/// with "disk full" (53100, not retryable: space comes back only when freed),
/// while a committed transaction's intents are still applied; writes work again
/// once space is freed.
#[test]
fn writes_are_refused_with_disk_full_below_the_reserve_and_resume_when_space_is_freed() {
    use pinax_engine::WritePressure;
    use std::time::{Duration, Instant};
    let w = World::new();
    let t = &w.tablets[0];
    let engine = &w.engines[0];
    let refresh = Duration::from_millis(60);
    let txn = tid(60);
    w.status.create(txn).unwrap();
    t.write_intents(0, txn, 1, w.now(), &[WriteOp::put("b", "2")], &w.resolver()).unwrap();

    engine.set_write_pressure(WritePressure::NoSpace("the disk of /x has 10 MiB free, below the reserve of 768 MiB".into()));
    std::thread::sleep(refresh);
    let t0 = Instant::now();
    let e = t.write_fast(0, &[WriteOp::put("a", "1")], None, &w.resolver()).unwrap_err();
    assert!(t0.elapsed() < Duration::from_millis(300), "refused at once: {:?}", t0.elapsed());
    assert_eq!(e.code(), ErrorCode::DiskFull, "{e:?}");
    assert_eq!(e.code().sqlstate(), "53100");
    assert!(!e.code().is_retryable());
    assert!(e.to_string().contains("below the reserve"), "{e}");
    let e = t.write_intents(0, tid(61), 1, w.now(), &[WriteOp::put("c", "3")], &w.resolver()).unwrap_err();
    assert_eq!(e.code(), ErrorCode::DiskFull, "{e:?}");
    let commit = w.status.commit(txn, vec![t.id()]).unwrap();
    assert_eq!(t.apply_intents(txn, commit).unwrap(), 1, "a committed transaction is still resolved");
    assert_eq!(w.get_at("b", w.now()).as_deref(), Some("2"));

    engine.set_write_pressure(WritePressure::None);
    std::thread::sleep(refresh);
    t.write_fast(0, &[WriteOp::put("a", "4")], None, &w.resolver()).unwrap();
    assert_eq!(w.get_at("a", w.now()).as_deref(), Some("4"));
}

#[test]
fn a_count_only_scan_counts_what_a_scan_returns() {
    // Pushed-down count(*) reads no values; it must see exactly the rows a scan
    // sees: across versions, deletes, committed and pending intents, read times.
    let w = World::new();
    let t = &w.tablets[0];
    for i in 0..50 {
        t.write_fast(0, &[WriteOp::put(format!("a{i:02}").as_str(), "1")], None, &w.resolver()).unwrap();
    }
    let t1 = w.now();
    for i in (0..50).step_by(3) {
        t.write_fast(0, &[WriteOp::put(format!("a{i:02}").as_str(), "2")], None, &w.resolver()).unwrap();
    }
    for i in (0..50).step_by(7) {
        t.write_fast(0, &[WriteOp::delete(format!("a{i:02}").as_str())], None, &w.resolver()).unwrap();
    }
    let t2 = w.now();
    let committed = tid(60);
    w.status.create(committed).unwrap();
    t.write_intents(0, committed, 1, w.now(), &[WriteOp::put("b1", "x"), WriteOp::delete("a01")], &w.resolver()).unwrap();
    let commit = w.status.commit(committed, vec![t.id()]).unwrap();
    let pending = tid(61);
    w.status.create(pending).unwrap();
    t.write_intents(0, pending, 1, w.now(), &[WriteOp::put("b2", "y"), WriteOp::delete("a02")], &w.resolver()).unwrap();
    let own = ReadContext::in_txn(w.now(), pending, 2);
    for ctx in [ReadContext::at(t1), ReadContext::at(t2), ReadContext::at(commit), ReadContext::at(w.now()), own] {
        for reverse in [false, true] {
            let rows = t.scan(ctx, &ScanSpec { reverse, ..Default::default() }, &w.resolver()).unwrap().rows.len() as u64;
            let counted = t.scan(ctx, &ScanSpec { reverse, count_only: true, ..Default::default() }, &w.resolver()).unwrap();
            assert!(counted.rows.is_empty());
            assert_eq!(counted.count, rows, "at {ctx:?}, reverse {reverse}");
            // Paged by 7.
            let (mut spec, mut paged) = (ScanSpec { reverse, count_only: true, limit: 7, ..Default::default() }, 0);
            loop {
                let page = t.scan(ctx, &spec, &w.resolver()).unwrap();
                paged += page.count;
                match page.resume {
                    Some(r) if reverse => spec.end = Some(r),
                    Some(r) => spec.start = r,
                    None => break,
                }
            }
            assert_eq!(paged, rows, "paged at {ctx:?}, reverse {reverse}");
        }
    }
}

/// A read with an uncertainty window (clock skew): another transaction's value
/// written after the read time but within the window fails the read with
/// `ReadRestart` at that value's time (committed versions and committed intents
/// alike, in point reads, scans both ways and counts); values past the window,
/// pending intents and the reader's own writes do not; reading again at the
/// restart time sees the value.
#[test]
fn reads_restart_on_values_in_their_uncertainty_window() {
    let w = World::new();
    w.put("a", "old");
    w.manual.advance(100);
    let read_ht = w.now();
    w.manual.advance(100);
    let new_ht = w.put("a", "new");
    w.manual.advance(1000);
    let late_ht = w.put("b", "late");
    let restart_of = |ctx: ReadContext, key: &str| match w.tablet_for(key.as_bytes()).read(ctx, key.as_bytes(), &w.resolver()) {
        Err(Error::Mvcc(pinax_mvcc::Error::ReadRestart { restart_ht })) => Some(restart_ht),
        Ok(_) => None,
        Err(e) => panic!("{e}"),
    };
    // No window, or a window ending before the new value: the old value, no restart.
    assert_eq!(w.get_ctx("a", ReadContext::at(read_ht)).as_deref(), Some("old"));
    assert_eq!(restart_of(ReadContext::at(read_ht).uncertain_until(new_ht.decremented()), "a"), None);
    // In the window: restart at the value's time, which then sees it.
    let ctx = ReadContext::at(read_ht).uncertain_until(new_ht.add_micros(500));
    assert_eq!(restart_of(ctx, "a"), Some(new_ht));
    let e = w.tablets[0].read(ctx, b"a", &w.resolver()).unwrap_err();
    assert_eq!(e.code(), ErrorCode::ReadRestart);
    assert_eq!(w.get_ctx("a", ReadContext { read_ht: new_ht, ..ctx }).as_deref(), Some("new"));
    // "b" was written past the window: invisible, no restart.
    assert_eq!(restart_of(ctx, "b"), None);
    assert!(late_ht > ctx.limit_ht);
    // Scans and counts, forward and reverse, meet it as well.
    for reverse in [false, true] {
        for count_only in [false, true] {
            let spec = ScanSpec { reverse, count_only, ..ScanSpec::default() };
            match w.tablets[0].scan(ctx, &spec, &w.resolver()) {
                Err(Error::Mvcc(pinax_mvcc::Error::ReadRestart { restart_ht })) => assert_eq!(restart_ht, new_ht),
                other => panic!("scan reverse={reverse} count_only={count_only}: {other:?}"),
            }
        }
    }

    // Intents: another transaction's committed intent in the window restarts (before
    // and after it is applied); a pending one and the reader's own do not.
    let (other, me) = (tid(7), tid(8));
    w.status.create(other).unwrap();
    w.status.create(me).unwrap();
    let r2 = w.now();
    w.txn_write(other, 1, r2, vec![WriteOp::put("c", "theirs")]).unwrap();
    w.txn_write(me, 1, r2, vec![WriteOp::put("d", "mine")]).unwrap();
    let window = |read: HybridTime| ReadContext::at(read).uncertain_until(read.add_micros(10_000));
    assert_eq!(restart_of(window(r2), "c"), None, "a pending intent is not uncertain");
    assert_eq!(restart_of(ReadContext::in_txn(r2, me, 2).uncertain_until(r2.add_micros(10_000)), "d"), None);
    w.manual.advance(100);
    let commit = w.status.commit(other, all_ids(&w)).unwrap();
    assert_eq!(restart_of(window(r2), "c"), Some(commit), "a committed intent in the window");
    assert_eq!(w.tablets[0].apply_intents(other, commit).unwrap(), 1);
    assert_eq!(restart_of(window(r2), "c"), Some(commit), "its applied version");
    assert_eq!(w.get_ctx("c", ReadContext { read_ht: commit, ..window(r2) }).as_deref(), Some("theirs"));
}

#[test]
fn sampled_scans_return_every_kth_visible_row_and_count_them_all() {
    // ANALYZE's sample (`ScanSpec::sample_every`): every k-th visible row is
    // returned, every visible row counted; deleted rows and own pending deletes
    // are not rows; a page stops after `limit` counted rows and resumes after the
    // last one counted, returned or not.
    let w = World::new();
    for i in 0..100 {
        w.put(&format!("a{i:03}"), "v");
    }
    w.tablet_for(b"a050").write_fast(0, &[WriteOp::delete("a050")], None, &w.resolver()).unwrap();
    let txn = tid(9);
    w.status.create(txn).unwrap();
    let r = w.now();
    w.txn_write(txn, 1, r, vec![WriteOp::delete("a060")]).unwrap();
    let t = &w.tablets[0];
    let keys = |rows: &[(Vec<u8>, Vec<u8>)]| rows.iter().map(|(k, _)| String::from_utf8_lossy(k).into_owned()).collect::<Vec<_>>();

    let all = t.scan(ReadContext::at(w.now()), &ScanSpec { sample_every: 10, ..ScanSpec::default() }, &w.resolver()).unwrap();
    assert_eq!(all.count, 99, "the pending delete is not visible to others");
    assert_eq!(keys(&all.rows), ["a009", "a019", "a029", "a039", "a049", "a060", "a070", "a080", "a090"]);
    assert_eq!(all.resume, None);

    let own = t.scan(ReadContext::in_txn(r, txn, 2), &ScanSpec { sample_every: 10, ..ScanSpec::default() }, &w.resolver()).unwrap();
    assert_eq!(own.count, 98);
    assert_eq!(keys(&own.rows), ["a009", "a019", "a029", "a039", "a049", "a061", "a071", "a081", "a091"]);

    let page = t.scan(ReadContext::at(w.now()), &ScanSpec { sample_every: 10, limit: 25, ..ScanSpec::default() }, &w.resolver()).unwrap();
    assert_eq!((page.count, keys(&page.rows)), (25, vec!["a009".to_string(), "a019".to_string()]));
    assert_eq!(page.resume, Some(b"a024\0".to_vec()), "resumes after the last row counted");

    // 0 and 1: every row, as without sampling.
    for every in [0, 1] {
        let s = t.scan(ReadContext::at(w.now()), &ScanSpec { sample_every: every, ..ScanSpec::default() }, &w.resolver()).unwrap();
        assert_eq!((s.count, s.rows.len()), (99, 99));
    }
}

/// A heap tuple of one int4 column (as `heap_form_tuple` lays it out).
fn int4_row(v: i32) -> Vec<u8> {
    let mut t = vec![0u8; 24];
    t[18] = 1; // natts
    t[22] = 24; // t_hoff
    t.extend_from_slice(&v.to_le_bytes());
    t
}

#[test]
fn a_filtered_scan_returns_and_counts_what_a_scan_returns_that_matches() {
    // A pushed-down filter is applied to the visible version of each row, whatever
    // made it visible (a committed version or intent, the reader's own intent), never
    // to versions it does not see; limits and counts apply to matching rows.
    // (Rows are heap tuples of one int4 column: PostgreSQL's layout.)
    use pinax_proto::{AttrLayout, CmpOp, FilterOp, FilterValue, RowFilter};
    let w = World::new();
    let t = &w.tablets[0];
    let key = |i: i32| format!("k{i:02}");
    for i in 0..50 {
        t.write_fast(0, &[WriteOp::put(key(i).as_str(), int4_row(i))], None, &w.resolver()).unwrap();
    }
    let t1 = w.now();
    // Rows 20..25 move out of the range, 40..45 into it; 26 is deleted.
    for i in 20..25 {
        t.write_fast(0, &[WriteOp::put(key(i).as_str(), int4_row(100 + i))], None, &w.resolver()).unwrap();
    }
    t.write_fast(0, &[WriteOp::delete(key(26).as_str())], None, &w.resolver()).unwrap();
    let committed = tid(70);
    w.status.create(committed).unwrap();
    let moved: Vec<WriteOp> = (40..45).map(|i| WriteOp::put(key(i).as_str(), int4_row(i - 15))).collect();
    t.write_intents(0, committed, 1, w.now(), &moved, &w.resolver()).unwrap();
    let commit = w.status.commit(committed, vec![t.id()]).unwrap();
    let pending = tid(71);
    w.status.create(pending).unwrap();
    t.write_intents(0, pending, 1, w.now(), &[WriteOp::put(key(27).as_str(), int4_row(-1)), WriteOp::put(key(10).as_str(), int4_row(21))], &w.resolver())
        .unwrap();
    let own = ReadContext::in_txn(w.now(), pending, 2);
    // 20 <= v AND v < 30
    let filter = RowFilter {
        attrs: vec![AttrLayout { len: 4, align: 4 }],
        ops: vec![
            FilterOp::Cmp { att: 0, op: CmpOp::Ge, value: FilterValue::Int(20) },
            FilterOp::Cmp { att: 0, op: CmpOp::Lt, value: FilterValue::Int(30) },
            FilterOp::And(2),
        ],
    };
    let value = |row: &[u8]| i32::from_le_bytes(row[24..28].try_into().unwrap());
    for ctx in [ReadContext::at(t1), ReadContext::at(commit), ReadContext::at(w.now()), own] {
        for reverse in [false, true] {
            let all = t.scan(ctx, &ScanSpec { reverse, ..Default::default() }, &w.resolver()).unwrap().rows;
            let want: Vec<_> = all.into_iter().filter(|(_, v)| (20..30).contains(&value(v))).collect();
            assert!(!want.is_empty());
            let spec = ScanSpec { reverse, filter: Some(filter.clone()), ..Default::default() };
            assert_eq!(t.scan(ctx, &spec, &w.resolver()).unwrap().rows, want, "at {ctx:?}, reverse {reverse}");
            let counted = t.scan(ctx, &ScanSpec { count_only: true, ..spec.clone() }, &w.resolver()).unwrap();
            assert_eq!(counted.count, want.len() as u64);
            // Paged by 3 matching rows.
            let (mut spec, mut paged) = (ScanSpec { limit: 3, ..spec }, Vec::new());
            loop {
                let page = t.scan(ctx, &spec, &w.resolver()).unwrap();
                assert!(page.rows.len() <= 3);
                paged.extend(page.rows);
                match page.resume {
                    Some(r) if reverse => spec.end = Some(r),
                    Some(r) => spec.start = r,
                    None => break,
                }
            }
            assert_eq!(paged, want, "paged at {ctx:?}, reverse {reverse}");
        }
    }
    // The reader's own intents decide: key 10 (now 21) matches, key 27 (-1) not.
    let mine = t.scan(own, &ScanSpec { filter: Some(filter.clone()), ..Default::default() }, &w.resolver()).unwrap().rows;
    assert!(mine.iter().any(|(k, _)| k == key(10).as_bytes()) && !mine.iter().any(|(k, _)| k == key(27).as_bytes()));
    // A row the filter cannot decide (written before the column existed: its
    // tuple has no attributes) is returned by a scan; a count ships it instead of
    // counting it, and counts only the rows that certainly match.
    let mut old_row = vec![0u8; 24];
    old_row[22] = 24;
    t.write_fast(0, &[WriteOp::put("k99", old_row.clone())], None, &w.resolver()).unwrap();
    let now = ReadContext::at(w.now());
    let spec = ScanSpec { filter: Some(filter.clone()), ..Default::default() };
    let rows = t.scan(now, &spec, &w.resolver()).unwrap().rows;
    assert_eq!(rows.last(), Some(&(b"k99".to_vec(), old_row.clone())));
    let counted = t.scan(now, &ScanSpec { count_only: true, ..spec }, &w.resolver()).unwrap();
    assert_eq!(counted.count, rows.len() as u64 - 1);
    assert_eq!(counted.rows, vec![(b"k99".to_vec(), old_row)]);
    // A malformed filter is the caller's error.
    let bad = ScanSpec { filter: Some(RowFilter { attrs: vec![], ops: vec![FilterOp::IsNull { att: 0 }] }), ..Default::default() };
    let e = t.scan(ReadContext::at(w.now()), &bad, &w.resolver()).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidRequest, "{e:?}");
}

#[test]
fn aggregates_are_computed_over_the_matching_visible_rows() {
    // sum/min/max/count over an int4 column of the rows a filter matches, at
    // several read times (versions, deletes, committed and pending intents); a row
    // whose value cannot be read (written before the column existed) is shipped.
    use pinax_proto::{AggFunc, AggSpec, AggValue, AttrLayout, CmpOp, FilterOp, FilterValue, RowFilter};
    let w = World::new();
    let t = &w.tablets[0];
    let key = |i: i32| format!("k{i:02}");
    for i in 0..40 {
        t.write_fast(0, &[WriteOp::put(key(i).as_str(), int4_row(i))], None, &w.resolver()).unwrap();
    }
    let t1 = w.now();
    t.write_fast(0, &[WriteOp::put(key(3).as_str(), int4_row(-100)), WriteOp::delete(key(4).as_str())], None, &w.resolver()).unwrap();
    let pending = tid(80);
    w.status.create(pending).unwrap();
    t.write_intents(0, pending, 1, w.now(), &[WriteOp::put(key(5).as_str(), int4_row(1000))], &w.resolver()).unwrap();
    let mut old_row = vec![0u8; 24];
    old_row[22] = 24;
    t.write_fast(0, &[WriteOp::put("k99", old_row.clone())], None, &w.resolver()).unwrap();
    let layout = vec![AttrLayout { len: 4, align: 4 }];
    let aggs = vec![
        AggSpec { func: AggFunc::CountRows, att: 0 },
        AggSpec { func: AggFunc::CountValues, att: 0 },
        AggSpec { func: AggFunc::SumInt, att: 0 },
        AggSpec { func: AggFunc::MinInt, att: 0 },
        AggSpec { func: AggFunc::MaxInt, att: 0 },
    ];
    let value = |row: &[u8]| i32::from_le_bytes(row[24..28].try_into().unwrap()) as i64;
    // No condition, and v < 20.
    let conditions = [vec![], vec![FilterOp::Cmp { att: 0, op: CmpOp::Lt, value: FilterValue::Int(20) }]];
    for ops in conditions {
        for ctx in [ReadContext::at(t1), ReadContext::at(w.now()), ReadContext::in_txn(w.now(), pending, 2)] {
            let filter = RowFilter { attrs: layout.clone(), ops: ops.clone() };
            let all = t.scan(ctx, &ScanSpec::default(), &w.resolver()).unwrap().rows;
            let (old, rows): (Vec<_>, Vec<_>) = all.into_iter().partition(|(k, _)| k == b"k99");
            let vals: Vec<i64> = rows.iter().map(|(_, v)| value(v)).filter(|v| ops.is_empty() || *v < 20).collect();
            let spec = ScanSpec { count_only: true, filter: Some(filter), aggregates: aggs.clone(), ..Default::default() };
            let r = t.scan(ctx, &spec, &w.resolver()).unwrap();
            let n = vals.len() as u64;
            assert_eq!(
                r.aggregates,
                vec![
                    AggValue::Count(n),
                    AggValue::Count(n),
                    AggValue::IntSum { sum: vals.iter().sum::<i64>() as i128, n },
                    AggValue::Int(vals.iter().min().copied()),
                    AggValue::Int(vals.iter().max().copied()),
                ],
                "at {ctx:?}, {ops:?}"
            );
            // The row without the column: shipped (its value is the catalog's default).
            assert_eq!(r.rows, old, "at {ctx:?}");
        }
    }
    // Aggregating needs the layout; an aggregate of the wrong width is refused.
    let e = t.scan(ReadContext::at(w.now()), &ScanSpec { aggregates: aggs.clone(), ..Default::default() }, &w.resolver()).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidRequest);
    let f = RowFilter { attrs: layout, ops: vec![] };
    let bad = ScanSpec {
        filter: Some(f),
        aggregates: vec![AggSpec { func: AggFunc::SumFloat4, att: 0 }, AggSpec { func: AggFunc::MaxInt, att: 1 }],
        ..Default::default()
    };
    assert_eq!(t.scan(ReadContext::at(w.now()), &bad, &w.resolver()).unwrap_err().code(), ErrorCode::InvalidRequest);
}

#[test]
fn a_scan_with_a_key_budget_stops_and_resumes_where_it_stopped() {
    // `max_examined` bounds the keys one request visits (rows the filter drops
    // included): the request returns what it found and where to go on; the pages
    // together are the scan, forwards and backwards, for rows and counts alike.
    use pinax_proto::{AttrLayout, CmpOp, FilterOp, FilterValue, RowFilter};
    let w = World::new();
    let t = &w.tablets[0];
    for i in 0..40 {
        t.write_fast(0, &[WriteOp::put(format!("k{i:02}").as_str(), int4_row(i))], None, &w.resolver()).unwrap();
    }
    t.write_fast(0, &[WriteOp::delete("k05")], None, &w.resolver()).unwrap();
    let filter = RowFilter { attrs: vec![AttrLayout { len: 4, align: 4 }], ops: vec![FilterOp::Cmp { att: 0, op: CmpOp::Ge, value: FilterValue::Int(33) }] };
    let ctx = ReadContext::at(w.now());
    for reverse in [false, true] {
        for count_only in [false, true] {
            let whole = ScanSpec { reverse, count_only, filter: Some(filter.clone()), ..Default::default() };
            let want = t.scan(ctx, &whole, &w.resolver()).unwrap();
            let mut spec = ScanSpec { max_examined: 7, ..whole };
            let (mut rows, mut count, mut requests) = (Vec::new(), 0, 0);
            loop {
                let page = t.scan(ctx, &spec, &w.resolver()).unwrap();
                requests += 1;
                assert!(page.count <= 7);
                rows.extend(page.rows);
                count += page.count;
                match page.resume {
                    Some(r) if reverse => spec.end = Some(r),
                    Some(r) => spec.start = r,
                    None => break,
                }
            }
            assert_eq!((rows, count), (want.rows, want.count), "reverse {reverse}, count_only {count_only}");
            assert!((6..=7).contains(&requests), "{requests} requests for 39 keys by 7");
        }
    }
}

#[test]
fn aggregates_are_computed_per_group() {
    // GROUP BY an int4 column: one partial per value, NULL a group of its own; a
    // row whose value cannot be read is shipped and creates no group; pages of a
    // key budget give partial groups that merge to the same.
    use pinax_proto::{AggFunc, AggGroup, AggSpec, AggValue, AttrLayout, GroupBy, RowFilter};
    let w = World::new();
    let t = &w.tablets[0];
    for i in 0..40 {
        t.write_fast(0, &[WriteOp::put(format!("k{i:02}").as_str(), int4_row(i % 5))], None, &w.resolver()).unwrap();
    }
    let mut null_row = vec![0u8; 24];
    null_row[18] = 1; // natts
    null_row[20] = 1; // HEAP_HASNULL; bitmap byte 23 = 0: attribute 1 is NULL
    null_row[22] = 24;
    let mut old_row = vec![0u8; 24];
    old_row[22] = 24;
    t.write_fast(0, &[WriteOp::put("k90", null_row.clone()), WriteOp::put("k91", null_row), WriteOp::put("k99", old_row.clone())], None, &w.resolver())
        .unwrap();
    let aggs = vec![AggSpec { func: AggFunc::CountRows, att: 0 }, AggSpec { func: AggFunc::SumInt, att: 0 }];
    let spec = ScanSpec {
        count_only: true,
        filter: Some(RowFilter { attrs: vec![AttrLayout { len: 4, align: 4 }], ops: vec![] }),
        aggregates: aggs,
        group_by: Some(GroupBy { att: 0, float: false }),
        ..Default::default()
    };
    let r = t.scan(ReadContext::at(w.now()), &spec, &w.resolver()).unwrap();
    let mut want = vec![AggGroup { key: None, shown: vec![], values: vec![AggValue::Count(2), AggValue::IntSum { sum: 0, n: 0 }] }];
    for v in 0..5i32 {
        let b = v.to_le_bytes().to_vec();
        want.push(AggGroup { key: Some(b.clone()), shown: b, values: vec![AggValue::Count(8), AggValue::IntSum { sum: 8 * v as i128, n: 8 }] });
    }
    want.sort_by(|a, b| a.key.cmp(&b.key));
    assert_eq!(r.groups, want);
    assert_eq!(r.rows, vec![(b"k99".to_vec(), old_row)]);
    // In pages of 7 keys: the same groups once merged.
    let mut paged = std::collections::BTreeMap::new();
    let mut s = ScanSpec { max_examined: 7, ..spec };
    loop {
        let page = t.scan(ReadContext::at(w.now()), &s, &w.resolver()).unwrap();
        for g in page.groups {
            let (_, acc) = paged.entry(g.key).or_insert_with(|| (g.shown, vec![AggFunc::CountRows.empty(), AggFunc::SumInt.empty()]));
            AggFunc::CountRows.merge(&mut acc[0], g.values[0]);
            AggFunc::SumInt.merge(&mut acc[1], g.values[1]);
        }
        match page.resume {
            Some(r) => s.start = r,
            None => break,
        }
    }
    assert_eq!(paged.into_iter().map(|(key, (shown, values))| AggGroup { key, shown, values }).collect::<Vec<_>>(), want);
    // Grouping needs aggregates and an attribute the layout describes.
    let bad = ScanSpec { group_by: Some(GroupBy { att: 3, float: false }), ..s };
    assert_eq!(t.scan(ReadContext::at(w.now()), &bad, &w.resolver()).unwrap_err().code(), ErrorCode::InvalidRequest);
}

#[test]
fn a_grouped_scan_ships_rows_of_groups_past_its_cap() {
    // One request gathers at most MAX_GROUPS groups; rows of further groups come
    // back as rows, so a GROUP BY on a unique column cannot exhaust the node's memory.
    use pinax_proto::{AggFunc, AggSpec, AttrLayout, GroupBy, RowFilter};
    let w = World::new();
    let t = &w.tablets[0];
    let n = pinax_pushdown::MAX_GROUPS as i32 + 50;
    let ops: Vec<WriteOp> = (0..n).map(|i| WriteOp::put(format!("k{i:06}").as_str(), int4_row(i))).collect();
    t.write_fast(0, &ops, None, &w.resolver()).unwrap();
    let spec = ScanSpec {
        count_only: true,
        filter: Some(RowFilter { attrs: vec![AttrLayout { len: 4, align: 4 }], ops: vec![] }),
        aggregates: vec![AggSpec { func: AggFunc::CountRows, att: 0 }],
        group_by: Some(GroupBy { att: 0, float: false }),
        ..Default::default()
    };
    let r = t.scan(ReadContext::at(w.now()), &spec, &w.resolver()).unwrap();
    assert_eq!(r.groups.len(), pinax_pushdown::MAX_GROUPS);
    assert_eq!(r.rows.len(), 50);
}

#[test]
fn a_count_ships_undecided_rows_in_bounded_answers() {
    // Rows a filtered count cannot decide are shipped; an answer stops past
    // MAX_SHIPPED_BYTES of them and says where to continue.
    use pinax_proto::{AttrLayout, CmpOp, FilterOp, FilterValue, RowFilter};
    let w = World::new();
    let t = &w.tablets[0];
    // Tuples with no attributes (written before the column existed), 32 KiB each.
    let mut old_row = vec![0u8; 32 << 10];
    old_row[22] = 24;
    let n = (pinax_pushdown::MAX_SHIPPED_BYTES / old_row.len()) as i32 + 20;
    for i in 0..n {
        t.write_fast(0, &[WriteOp::put(format!("k{i:04}").as_str(), old_row.clone())], None, &w.resolver()).unwrap();
    }
    let filter = RowFilter { attrs: vec![AttrLayout { len: 4, align: 4 }], ops: vec![FilterOp::Cmp { att: 0, op: CmpOp::Ge, value: FilterValue::Int(0) }] };
    let mut spec = ScanSpec { count_only: true, filter: Some(filter), ..Default::default() };
    let (mut shipped, mut requests) = (0, 0);
    loop {
        let page = t.scan(ReadContext::at(w.now()), &spec, &w.resolver()).unwrap();
        requests += 1;
        assert_eq!(page.count, 0);
        assert!(page.rows.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>() <= pinax_pushdown::MAX_SHIPPED_BYTES + old_row.len() + 16);
        shipped += page.rows.len();
        match page.resume {
            Some(r) => spec.start = r,
            None => break,
        }
    }
    assert_eq!(shipped, n as usize);
    assert_eq!(requests, 2);
}

/// A patch op: attributes `cols` of `row` change; the update depends on `deps`.
fn patch_op(key: &str, cols: &[u16], deps: &[u16], row: &str) -> WriteOp {
    WriteOp::patch(key, pinax_codec::patch::encode_patch_op(cols, deps, row.as_bytes()))
}

type Stacked = (Vec<(Vec<u16>, String)>, String);

/// The row of `key` as the tablet answers it: (patches newest first as
/// (attributes, row), the full row under them).
fn stacked(w: &World, key: &str, ctx: ReadContext) -> Option<Stacked> {
    let v = w.tablet_for(key.as_bytes()).read(ctx, key.as_bytes(), &w.resolver()).unwrap()?;
    let s = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
    if !pinax_codec::patch::is_stack(&v) {
        return Some((vec![], s(&v)));
    }
    let st = pinax_codec::patch::decode_stack(&v).unwrap();
    Some((st.patches.iter().map(|(c, r)| (c.clone(), s(r))).collect(), s(st.base)))
}

#[test]
fn patches_of_attributes_others_do_not_depend_on_do_not_conflict() {
    let w = World::new();
    w.put("a", "base");
    let (t1, t2, t3, t4) = (tid(1), tid(2), tid(3), tid(4));
    for t in [t1, t2, t3, t4] {
        w.status.create(t).unwrap();
    }
    let before = w.now();
    // t1 changes attribute 2 (its WHERE read attribute 1); t2 attribute 3: both
    // pending at once.
    w.txn_write(t1, 1, w.now(), vec![patch_op("a", &[2], &[1, 2], "r1")]).unwrap();
    w.txn_write(t2, 1, w.now(), vec![patch_op("a", &[3], &[1, 3], "r2")]).unwrap();
    // t3 depends on attribute 2 (t1 changes it): conflict, as a full write does.
    let e = w.txn_write(t3, 1, w.now(), vec![patch_op("a", &[4], &[2, 4], "r3")]).unwrap_err();
    assert_eq!(e.code(), ErrorCode::SerializationFailure);
    let e = w.txn_write(t4, 1, w.now(), vec![WriteOp::put("a", "whole")]).unwrap_err();
    assert_eq!(e.code(), ErrorCode::SerializationFailure);
    let e = w.txn_write(t4, 1, w.now(), vec![WriteOp::delete("a")]).unwrap_err();
    assert_eq!(e.code(), ErrorCode::SerializationFailure);
    // A lock of the row conflicts too (FOR UPDATE), KEY SHARE does not.
    let e = w.txn_write(t4, 1, w.now(), vec![WriteOp::lock("a")]).unwrap_err();
    assert_eq!(e.code(), ErrorCode::SerializationFailure);
    w.txn_write(t4, 1, w.now(), vec![WriteOp::row_lock("a", pinax_proto::LockStrength::KeyShare)]).unwrap();
    // A non-transactional patch of another attribute waits for no one either
    // (t4's KEY SHARE lock does not block an update keeping the key).
    w.tablets[0].write_fast(0, &[patch_op("a", &[5], &[5], "f")], Some(w.now()), &w.resolver()).unwrap();
    let f = Some((vec![(vec![5], "f".to_string())], "base".to_string()));
    // Pending patches are invisible; t2 commits first, t1 second.
    assert_eq!(stacked(&w, "a", ReadContext::at(w.now())), f);
    let c2 = w.status.commit(t2, all_ids(&w)).unwrap();
    w.tablets[0].apply_intents(t2, c2).unwrap();
    let c1 = w.status.commit(t1, all_ids(&w)).unwrap();
    assert!(c1 > c2);
    // Before t1's intents are applied, and after: both patches over the row.
    let want = Some((vec![(vec![2], "r1".to_string()), (vec![3], "r2".to_string()), (vec![5], "f".to_string())], "base".to_string()));
    assert_eq!(stacked(&w, "a", ReadContext::at(w.now())), want);
    w.tablets[0].apply_intents(t1, c1).unwrap();
    assert_eq!(stacked(&w, "a", ReadContext::at(w.now())), want);
    assert_eq!(stacked(&w, "a", ReadContext::at(c2)), Some((vec![(vec![3], "r2".into()), (vec![5], "f".into())], "base".into())));
    assert_eq!(stacked(&w, "a", ReadContext::at(before)), Some((vec![], "base".into())));
    // Counted (and filtered scans ship stacks undecided: see the mvcc filter).
    let spec = ScanSpec { start: b"a".to_vec(), end: Some(b"b".to_vec()), count_only: true, ..ScanSpec::default() };
    assert_eq!(w.tablets[0].scan(ReadContext::at(w.now()), &spec, &w.resolver()).unwrap().count, 1);
    // Read before both commits: a patch of other attributes still goes in; one
    // of attribute 2 or 3, or a whole row, conflicts.
    let t5 = tid(5);
    w.status.create(t5).unwrap();
    for bad in [patch_op("a", &[6], &[2, 6], "x"), patch_op("a", &[3], &[3], "x"), WriteOp::put("a", "x")] {
        let e = w.txn_write(t5, 1, before, vec![bad]).unwrap_err();
        assert_eq!(e.code(), ErrorCode::SerializationFailure);
    }
    w.txn_write(t5, 1, before, vec![patch_op("a", &[6], &[1, 6], "r5")]).unwrap();
    let c5 = w.status.commit(t5, all_ids(&w)).unwrap();
    assert!(c5 > c1, "a writer that stepped over a newer patch commits after it");
    w.tablets[0].apply_intents(t5, c5).unwrap();
    let (patches, base) = stacked(&w, "a", ReadContext::at(w.now())).unwrap();
    assert_eq!((patches.len(), base.as_str()), (4, "base"));
}

#[test]
fn a_transactions_own_patches_combine() {
    let w = World::new();
    w.put("a", "base");
    w.put("b", "base");
    let t1 = tid(1);
    w.status.create(t1).unwrap();
    let r = w.now();
    // Two statements patch "a": the second's row has the first's change in it.
    w.txn_write(t1, 1, r, vec![patch_op("a", &[2], &[2], "s1")]).unwrap();
    w.txn_write(t1, 2, r, vec![patch_op("a", &[3], &[3], "s2")]).unwrap();
    // "b": a whole row, then a patch: the whole row of the patch.
    w.txn_write(t1, 1, r, vec![WriteOp::put("b", "whole")]).unwrap();
    w.txn_write(t1, 2, r, vec![patch_op("b", &[3], &[3], "whole+3")]).unwrap();
    let own = |seq| ReadContext::in_txn(w.now(), t1, seq);
    assert_eq!(stacked(&w, "a", own(2)), Some((vec![(vec![2], "s1".into())], "base".into())));
    assert_eq!(stacked(&w, "a", own(3)), Some((vec![(vec![2, 3], "s2".into())], "base".into())));
    assert_eq!(stacked(&w, "b", own(3)), Some((vec![], "whole+3".into())));
    let c = w.status.commit(t1, all_ids(&w)).unwrap();
    assert_eq!(stacked(&w, "a", ReadContext::at(w.now())), Some((vec![(vec![2, 3], "s2".into())], "base".into())));
    w.tablets[0].apply_intents(t1, c).unwrap();
    // Applied with nothing else in the way: the second statement's whole row.
    assert_eq!(stacked(&w, "a", ReadContext::at(w.now())), Some((vec![], "s2".into())));
    assert_eq!(stacked(&w, "b", ReadContext::at(w.now())), Some((vec![], "whole+3".into())));
}

#[test]
fn patches_last_only_while_updates_are_concurrent() {
    let w = World::new();
    let t = &w.tablets[0];
    w.put("a", "base");
    let now = || ReadContext::at(w.now());
    // Nothing concurrent: a non-transactional patch is stored as the whole row.
    t.write_fast(0, &[patch_op("a", &[2], &[2], "f")], Some(w.now()), &w.resolver()).unwrap();
    assert_eq!(stacked(&w, "a", now()), Some((vec![], "f".into())));
    // A transaction's patch is a patch until it is applied, then the whole row
    // if nothing else wrote the row meanwhile.
    let t1 = tid(1);
    w.status.create(t1).unwrap();
    w.txn_write(t1, 1, w.now(), vec![patch_op("a", &[3], &[3], "t1")]).unwrap();
    let c1 = w.status.commit(t1, all_ids(&w)).unwrap();
    assert_eq!(stacked(&w, "a", now()), Some((vec![(vec![3], "t1".into())], "f".into())));
    t.apply_intents(t1, c1).unwrap();
    assert_eq!(stacked(&w, "a", now()), Some((vec![], "t1".into())));
    // With another transaction's patch pending, patches stay patches (their rows
    // lack the pending change), past MAX_CHAIN.
    let max = pinax_codec::patch::MAX_CHAIN;
    let t2 = tid(2);
    w.status.create(t2).unwrap();
    w.txn_write(t2, 1, w.now(), vec![patch_op("a", &[3], &[3], "t2")]).unwrap();
    for i in 0..=max {
        t.write_fast(0, &[patch_op("a", &[2], &[2], &format!("p{i}"))], Some(w.now()), &w.resolver()).unwrap();
    }
    assert_eq!(stacked(&w, "a", now()).unwrap().0.len(), max + 1);
    // t2 commits after them: applied as a patch (the row changed since it read).
    let c2 = w.status.commit(t2, all_ids(&w)).unwrap();
    t.apply_intents(t2, c2).unwrap();
    let (patches, base) = stacked(&w, "a", now()).unwrap();
    assert_eq!((patches.len(), patches[0].clone(), base.as_str()), (max + 2, (vec![3], "t2".to_string()), "t1"));
    // Over a chain that long, a transaction's patch is written whole at once.
    let t3 = tid(3);
    w.status.create(t3).unwrap();
    w.txn_write(t3, 1, w.now(), vec![patch_op("a", &[4], &[4], "t3")]).unwrap();
    let c3 = w.status.commit(t3, all_ids(&w)).unwrap();
    assert_eq!(stacked(&w, "a", now()), Some((vec![], "t3".into())));
    t.apply_intents(t3, c3).unwrap();
    assert_eq!(stacked(&w, "a", now()), Some((vec![], "t3".into())));
    // That intent was a plain whole row: a patch that read before it conflicts.
    let t4 = tid(4);
    w.status.create(t4).unwrap();
    let e = w.txn_write(t4, 1, c3.decremented(), vec![patch_op("a", &[5], &[5], "t4")]).unwrap_err();
    assert_eq!(e.code(), ErrorCode::SerializationFailure);
    // A whole row written by a patch that was applied still tells which columns
    // it changed: a patch that read before it, and depends on none of them, goes
    // in (as a patch: its row lacks that change).
    let tg = t.write_fast(0, &[patch_op("a", &[4], &[4], "g")], Some(w.now()), &w.resolver()).unwrap();
    assert_eq!(stacked(&w, "a", now()), Some((vec![], "g".into())));
    let e = t.write_fast(0, &[patch_op("a", &[5], &[4, 5], "h")], Some(tg.decremented()), &w.resolver()).unwrap_err();
    assert_eq!(e.code(), ErrorCode::SerializationFailure);
    t.write_fast(0, &[patch_op("a", &[5], &[5], "h")], Some(tg.decremented()), &w.resolver()).unwrap();
    assert_eq!(stacked(&w, "a", now()), Some((vec![(vec![5], "h".into())], "g".into())));
}

#[test]
fn a_whole_row_written_by_a_patch_hides_no_earlier_change_from_a_conflict_check() {
    // A patch stored as the whole row records only the attributes it changed;
    // the changes of the versions under it still count for a writer that read
    // before them. (Before 2026-11-27 the check stopped at that whole row: an
    // update of attribute 3 read before another update of attribute 3 went in
    // once a third update, of attribute 2, had been stored whole over it.)
    let w = World::new();
    let t = &w.tablets[0];
    w.put("a", "base");
    let read = w.now();
    t.write_fast(0, &[patch_op("a", &[3], &[3], "c3")], Some(w.now()), &w.resolver()).unwrap();
    t.write_fast(0, &[patch_op("a", &[2], &[2], "c2")], Some(w.now()), &w.resolver()).unwrap();
    assert_eq!(stacked(&w, "a", ReadContext::at(w.now())), Some((vec![], "c2".into())), "stored whole");
    let e = t.write_fast(0, &[patch_op("a", &[3], &[3], "lost")], Some(read), &w.resolver()).unwrap_err();
    assert_eq!(e.code(), ErrorCode::SerializationFailure);
    let t1 = tid(1);
    w.status.create(t1).unwrap();
    let e = w.txn_write(t1, 1, read, vec![patch_op("a", &[3], &[1, 3], "lost")]).unwrap_err();
    assert_eq!(e.code(), ErrorCode::SerializationFailure);
    // One that depends on neither changed attribute goes in (as a patch).
    t.write_fast(0, &[patch_op("a", &[4], &[4], "c4")], Some(read), &w.resolver()).unwrap();
    assert_eq!(stacked(&w, "a", ReadContext::at(w.now())), Some((vec![(vec![4], "c4".into())], "c2".into())));
    // Read after them: no conflict.
    t.write_fast(0, &[patch_op("a", &[3], &[3], "now")], Some(w.now()), &w.resolver()).unwrap();
}

#[test]
fn a_patch_needs_a_live_row() {
    let w = World::new();
    let t = &w.tablets[0];
    let e = t.write_fast(0, &[patch_op("a", &[2], &[2], "x")], Some(w.now()), &w.resolver()).unwrap_err();
    assert_eq!(e.code(), ErrorCode::SerializationFailure);
    w.put("a", "base");
    w.tablets[0].write_fast(0, &[WriteOp::delete("a")], None, &w.resolver()).unwrap();
    let e = t.write_fast(0, &[patch_op("a", &[2], &[2], "x")], Some(w.now()), &w.resolver()).unwrap_err();
    assert_eq!(e.code(), ErrorCode::SerializationFailure);
    // A malformed patch is refused.
    let e = t.write_fast(0, &[WriteOp::patch("a", vec![0u8, 1])], None, &w.resolver()).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidRequest);
}

#[test]
fn history_gc_keeps_the_whole_row_under_patches_at_the_cutoff() {
    let GcTablet { cutoff, engine, manual, clock, t } = GcTablet::new();
    let status = StatusTablet::open(TabletId(0), MemEngine::new(), clock.clone(), TIMEOUT_US, true).unwrap();
    let resolver = |tx: TxnId, ht: HybridTime| -> pinax_mvcc::Result<TxnStatus> { Ok(status.status(tx, ht).expect("status")) };
    t.write_fast(0, &[WriteOp::put("k", "old")], None, &resolver).unwrap();
    manual.advance(100);
    t.write_fast(0, &[WriteOp::put("k", "base")], None, &resolver).unwrap();
    // A pending patch of another column keeps the next ones patches.
    let t1 = tid(1);
    status.create(t1).unwrap();
    t.write_intents(0, t1, 1, clock.now(), &[patch_op("k", &[9], &[9], "t1")], &resolver).unwrap();
    let mut hts = Vec::new();
    for i in 1..=3 {
        manual.advance(100);
        hts.push(t.write_fast(0, &[patch_op("k", &[i], &[i], &format!("p{i}"))], Some(clock.now()), &resolver).unwrap());
    }
    status.abort(t1, vec![TabletId(1)]).unwrap();
    t.remove_intents(t1).unwrap();
    let read = |ht: HybridTime| {
        let v = t.read(ReadContext::at(ht), b"k", &resolver).unwrap().unwrap();
        let st = pinax_codec::patch::decode_stack(&v).unwrap();
        (st.patches.iter().map(|(c, r)| (c.clone(), String::from_utf8(r.to_vec()).unwrap())).collect::<Vec<_>>(), String::from_utf8(st.base.to_vec()).unwrap())
    };
    let at_cutoff = read(hts[1]);
    let latest = read(hts[2]);
    assert_eq!(at_cutoff, (vec![(vec![2], "p2".to_string()), (vec![1], "p1".to_string())], "base".to_string()));
    // The cutoff on a patch: the patches under it and the whole row stay, the
    // version before that goes.
    let before = engine.version_count(Cf::Regular);
    cutoff.advance_to(hts[1]);
    engine.compact_range(Cf::Regular, None, None).unwrap();
    assert_eq!(engine.version_count(Cf::Regular), before - 1);
    assert_eq!(read(hts[1]), at_cutoff);
    assert_eq!(read(hts[2]), latest);
}

#[test]
fn writes_if_live_apply_only_to_live_rows_and_bound_blind_patches() {
    use pinax_proto::LiveWrite::{Absent, Applied, NeedsRow};
    use pinax_tablet::tablet::BLIND_CHAIN;
    let w = World::new();
    let t = w.tablet_for(b"a");
    let live = |op: &WriteOp, read_ht, full| t.write_if_live(0, op, read_ht, full, &w.resolver()).map(|(_, o)| o);
    // No row, a deleted row: nothing written (no version, no tombstone).
    assert_eq!(live(&patch_op("a", &[2], &[2], "p"), None, false).unwrap(), Absent);
    assert_eq!(live(&WriteOp::delete("a"), None, false).unwrap(), Absent);
    assert_eq!(stacked(&w, "a", ReadContext::at(w.now())), None);
    w.put("a", "base");
    w.tablet_for(b"a").write_fast(0, &[WriteOp::delete("a")], None, &w.resolver()).unwrap();
    assert_eq!(live(&patch_op("a", &[2], &[2], "p"), None, false).unwrap(), Absent);
    // A live row: blind patches stay patches (their rows hold only what they
    // assign), up to BLIND_CHAIN; the next one is refused until the row is written whole.
    w.put("a", "base");
    for i in 0..BLIND_CHAIN {
        assert_eq!(live(&patch_op("a", &[2], &[2], &format!("p{i}")), None, false).unwrap(), Applied);
    }
    let (patches, base) = stacked(&w, "a", ReadContext::at(w.now())).unwrap();
    assert_eq!((patches.len(), base.as_str(), patches[0].1.as_str()), (BLIND_CHAIN, "base", &*format!("p{}", BLIND_CHAIN - 1)));
    assert_eq!(live(&patch_op("a", &[3], &[3], "q"), None, false).unwrap(), NeedsRow);
    assert_eq!(stacked(&w, "a", ReadContext::at(w.now())).unwrap().0.len(), BLIND_CHAIN, "a refused patch writes nothing");
    // The whole row, as read at some time (depending on every attribute): a
    // commit after it is a conflict...
    let read = w.now();
    w.tablet_for(b"a").write_fast(0, &[patch_op("a", &[4], &[4], "late")], None, &w.resolver()).unwrap();
    let whole = patch_op("a", &[3], &[1, 2, 3, 4, 5, 6], "whole");
    let e = live(&whole, Some(read), true).unwrap_err();
    assert_eq!(e.code(), ErrorCode::SerializationFailure);
    // ...read again, it is stored whole (nothing concurrent), and blind patches go in again.
    assert_eq!(live(&whole, Some(w.now()), true).unwrap(), Applied);
    assert_eq!(stacked(&w, "a", ReadContext::at(w.now())), Some((vec![], "whole".into())));
    assert_eq!(live(&patch_op("a", &[2], &[2], "p"), None, false).unwrap(), Applied);
    assert_eq!(stacked(&w, "a", ReadContext::at(w.now())), Some((vec![(vec![2], "p".into())], "whole".into())));
    // Another transaction's pending write of an attribute it depends on: a conflict
    // naming the transaction (the SQL layer waits for it); of another attribute: none.
    let t1 = tid(1);
    w.status.create(t1).unwrap();
    w.txn_write(t1, 1, w.now(), vec![patch_op("a", &[5], &[5], "t1")]).unwrap();
    let e = live(&patch_op("a", &[5], &[5], "x"), None, false).unwrap_err();
    assert!(matches!(e, Error::WriteConflict { other_txn: Some(o), .. } if o == t1), "{e:?}");
    assert_eq!(live(&patch_op("a", &[6], &[6], "y"), None, false).unwrap(), Applied);
    let e = live(&WriteOp::delete("a"), None, false).unwrap_err();
    assert!(matches!(e, Error::WriteConflict { other_txn: Some(o), .. } if o == t1), "{e:?}");
    w.status.abort(t1, all_ids(&w)).unwrap();
    // A delete of a live row: gone; a resend of the same request is not applied twice.
    let first = t.write_if_live(7, &WriteOp::delete("a"), None, false, &w.resolver()).unwrap();
    assert_eq!(first.1, Applied);
    assert_eq!(stacked(&w, "a", ReadContext::at(w.now())), None);
    assert_eq!(t.write_if_live(7, &WriteOp::delete("a"), None, false, &w.resolver()).unwrap(), first);
    // Only deletes and patches.
    for bad in [WriteOp::put("a", "x"), WriteOp::insert("a", "x"), WriteOp::lock("a")] {
        assert_eq!(live(&bad, None, false).unwrap_err().code(), ErrorCode::InvalidRequest);
    }
}

/// A heap tuple of int4 columns (as `heap_form_tuple` lays it out, no NULLs).
fn int4s_row(vals: &[i32]) -> Vec<u8> {
    let mut t = vec![0u8; 24];
    t[18] = vals.len() as u8; // natts
    t[22] = 24; // t_hoff
    for v in vals {
        t.extend_from_slice(&v.to_le_bytes());
    }
    let n = t.len() as i32;
    t[..4].copy_from_slice(&n.to_le_bytes());
    t
}

const INT4S: [(i16, u8); 3] = [(4, 4), (4, 4), (4, 4)];

/// A blind patch of int4 columns: `col` of a row whose other columns are 0 (the
/// writer knows only what it assigns), with the table's layout if `layout`.
fn blind_int4(key: &str, col: u16, v: i32, layout: bool) -> WriteOp {
    let mut vals = [0; 3];
    vals[col as usize - 1] = v;
    let l: &[(i16, u8)] = if layout { &INT4S } else { &[] };
    WriteOp::patch(key, pinax_codec::patch::encode_patch_op_with_layout(&[col], &[col], l, &int4s_row(&vals)))
}

/// The row of `key` as the tablet answers it: (patches over it, the full row).
fn raw_stack(w: &World, key: &str, ctx: ReadContext) -> Option<(usize, Vec<u8>)> {
    let v = w.tablet_for(key.as_bytes()).read(ctx, key.as_bytes(), &w.resolver()).unwrap()?;
    if !pinax_codec::patch::is_stack(&v) {
        return Some((0, v));
    }
    let st = pinax_codec::patch::decode_stack(&v).unwrap();
    Some((st.patches.len(), st.base.to_vec()))
}

#[test]
fn blind_patches_sent_with_the_layout_are_folded_into_the_whole_row() {
    use pinax_proto::LiveWrite::{Applied, NeedsRow};
    use pinax_tablet::tablet::BLIND_CHAIN;
    assert_eq!(BLIND_CHAIN, 2);
    let w = World::new();
    let t = w.tablet_for(b"a");
    let live = |op: &WriteOp| t.write_if_live(0, op, None, false, &w.resolver()).map(|(_, o)| o).unwrap();
    t.write_fast(0, &[WriteOp::put("a", int4s_row(&[1, 2, 3]))], None, &w.resolver()).unwrap();
    // Two patches stay patches; the third, which would be refused without the
    // layout, makes the row whole: every column from the newest layer assigning it.
    assert_eq!(live(&blind_int4("a", 2, 20, true)), Applied);
    assert_eq!(live(&blind_int4("a", 3, 30, true)), Applied);
    assert_eq!(raw_stack(&w, "a", ReadContext::at(w.now())).unwrap().0, 2);
    assert_eq!(live(&blind_int4("a", 3, 300, false)), NeedsRow);
    assert_eq!(live(&blind_int4("a", 1, 10, true)), Applied);
    assert_eq!(raw_stack(&w, "a", ReadContext::at(w.now())), Some((0, int4s_row(&[10, 20, 30]))));
    // Patches go in over it again.
    assert_eq!(live(&blind_int4("a", 2, 21, true)), Applied);
    assert_eq!(live(&blind_int4("a", 2, 22, true)), Applied);
    assert_eq!(live(&blind_int4("a", 3, 33, true)), Applied);
    assert_eq!(raw_stack(&w, "a", ReadContext::at(w.now())), Some((0, int4s_row(&[10, 22, 33]))));
    // A row the layout does not describe (written before a column was added): refused.
    t.write_fast(0, &[WriteOp::put("a", int4s_row(&[1, 2]))], None, &w.resolver()).unwrap();
    assert_eq!(live(&blind_int4("a", 3, 3, true)), Applied);
    assert_eq!(live(&blind_int4("a", 3, 4, true)), Applied);
    assert_eq!(live(&blind_int4("a", 3, 5, true)), NeedsRow);
    // Another transaction's pending patch of another column: refused (the
    // caller reads the row and writes it whole, which waits for it).
    t.write_fast(0, &[WriteOp::put("a", int4s_row(&[1, 2, 3]))], None, &w.resolver()).unwrap();
    assert_eq!(live(&blind_int4("a", 2, 20, true)), Applied);
    assert_eq!(live(&blind_int4("a", 2, 21, true)), Applied);
    let t1 = tid(1);
    w.status.create(t1).unwrap();
    w.txn_write(t1, 1, w.now(), vec![blind_int4("a", 1, 100, false)]).unwrap();
    assert_eq!(live(&blind_int4("a", 3, 30, true)), NeedsRow);
    w.status.abort(t1, all_ids(&w)).unwrap();
    t.remove_intents(t1).unwrap();
    assert_eq!(live(&blind_int4("a", 3, 30, true)), Applied);
    assert_eq!(raw_stack(&w, "a", ReadContext::at(w.now())), Some((0, int4s_row(&[1, 21, 30]))));

    // In a transaction: the folded row is its intent, seen by the transaction's
    // later statements, and applied as the whole row when it commits over the
    // version it was folded from.
    let intent = |txn: TxnId, seq: u32, op: &WriteOp| t.write_intent_if_live(0, txn, seq, op, &w.resolver()).unwrap();
    assert_eq!(live(&blind_int4("a", 1, 2, true)), Applied);
    assert_eq!(live(&blind_int4("a", 1, 3, true)), Applied);
    let t2 = tid(2);
    w.status.create(t2).unwrap();
    assert_eq!(intent(t2, 1, &blind_int4("a", 2, 7, false)), NeedsRow);
    assert_eq!(intent(t2, 1, &blind_int4("a", 2, 7, true)), Applied);
    let merged_in_txn = w.tablet_for(b"a").read(ReadContext::in_txn(w.now(), t2, 2), b"a", &w.resolver()).unwrap().unwrap();
    let st = pinax_codec::patch::decode_stack(&merged_in_txn).unwrap();
    assert_eq!(st.patches[0], (vec![2], &int4s_row(&[3, 7, 30])[..]), "the intent holds the whole row");
    assert_eq!(raw_stack(&w, "a", ReadContext::at(w.now())).unwrap().0, 2, "others see the committed stack");
    let c2 = w.status.commit(t2, vec![t.id()]).unwrap();
    assert_eq!(t.apply_intents(t2, c2).unwrap(), 1);
    assert_eq!(raw_stack(&w, "a", ReadContext::at(w.now())), Some((0, int4s_row(&[3, 7, 30]))));
}

#[test]
fn transactional_writes_if_live_write_intents_over_live_rows_only() {
    use pinax_proto::LiveWrite::{Absent, Applied, NeedsRow};
    use pinax_tablet::tablet::BLIND_CHAIN;
    let w = World::new();
    let t = w.tablet_for(b"a");
    let live = |txn: TxnId, seq: u32, op: &WriteOp| t.write_intent_if_live(0, txn, seq, op, &w.resolver());
    let t1 = tid(1);
    w.status.create(t1).unwrap();
    // No row: nothing written (no intent).
    assert_eq!(live(t1, 1, &patch_op("a", &[2], &[2], "p")).unwrap(), Absent);
    assert_eq!(live(t1, 1, &WriteOp::delete("a")).unwrap(), Absent);
    assert_eq!(t.apply_intents(t1, w.now()).unwrap(), 0, "no intent was written");
    // A live row: the blind patch is an intent, seen by the transaction's later
    // statements (laid over the row), not by its own statement nor by others.
    w.put("a", "base");
    let before = w.now();
    assert_eq!(live(t1, 2, &patch_op("a", &[2], &[2], "p1")).unwrap(), Applied);
    assert_eq!(stacked(&w, "a", ReadContext::in_txn(w.now(), t1, 3)), Some((vec![(vec![2], "p1".into())], "base".into())));
    assert_eq!(stacked(&w, "a", ReadContext::in_txn(w.now(), t1, 2)), Some((vec![], "base".into())));
    assert_eq!(stacked(&w, "a", ReadContext::at(w.now())), Some((vec![], "base".into())));
    // Another transaction meets it: a write of the same attribute conflicts naming
    // t1, of another attribute it does not; an autocommit delete conflicts.
    let t2 = tid(2);
    w.status.create(t2).unwrap();
    let e = live(t2, 1, &patch_op("a", &[2], &[2], "x")).unwrap_err();
    assert!(matches!(e, Error::WriteConflict { other_txn: Some(o), .. } if o == t1), "{e:?}");
    let e = live(t2, 1, &WriteOp::delete("a")).unwrap_err();
    assert!(matches!(e, Error::WriteConflict { other_txn: Some(o), .. } if o == t1), "{e:?}");
    // A second patch of t1's own row needs the row (t1 wrote it): nothing written.
    assert_eq!(live(t1, 3, &patch_op("a", &[3], &[3], "q")).unwrap(), NeedsRow);
    assert_eq!(stacked(&w, "a", ReadContext::in_txn(w.now(), t1, 4)).unwrap().0.len(), 1);
    // Committed: the patch over the row, never folded into a whole row (its row
    // holds only what it assigns), whether read through the intent or applied.
    let commit = w.status.commit(t1, vec![t.id()]).unwrap();
    assert!(commit > before);
    assert_eq!(stacked(&w, "a", ReadContext::at(commit)), Some((vec![(vec![2], "p1".into())], "base".into())));
    assert_eq!(t.apply_intents(t1, commit).unwrap(), 1);
    assert_eq!(stacked(&w, "a", ReadContext::at(w.now())), Some((vec![(vec![2], "p1".into())], "base".into())));
    assert_eq!(stacked(&w, "a", ReadContext::at(commit.decremented())), Some((vec![], "base".into())));
    // t2 (READ COMMITTED: no read time) now writes over the newest version.
    assert_eq!(live(t2, 1, &patch_op("a", &[4], &[4], "p2")).unwrap(), Applied);
    let c2 = w.status.commit(t2, vec![t.id()]).unwrap();
    assert_eq!(t.apply_intents(t2, c2).unwrap(), 1);
    assert_eq!(BLIND_CHAIN, 2);
    // Two patches over the row: the next one needs the row.
    let t3 = tid(3);
    w.status.create(t3).unwrap();
    assert_eq!(live(t3, 1, &patch_op("a", &[5], &[5], "p3")).unwrap(), NeedsRow);
    // A transaction's own full write decides liveness: a patch over it needs the
    // row, a delete of it applies; over its own delete, nothing is there.
    w.txn_write(t3, 1, w.now(), vec![WriteOp::put("b", "mine")]).unwrap();
    assert_eq!(live(t3, 2, &patch_op("b", &[2], &[2], "p")).unwrap(), NeedsRow);
    assert_eq!(live(t3, 2, &WriteOp::delete("b")).unwrap(), Applied);
    assert_eq!(stacked(&w, "b", ReadContext::in_txn(w.now(), t3, 3)), None);
    assert_eq!(live(t3, 3, &WriteOp::delete("b")).unwrap(), Absent);
    // Aborted: nothing of it stays; a resend of an applied request is not written twice.
    w.status.abort(t3, vec![t.id()]).unwrap();
    t.remove_intents(t3).unwrap();
    assert_eq!(w.get_at("b", w.now()), None);
    let t4 = tid(4);
    w.status.create(t4).unwrap();
    assert_eq!(t.write_intent_if_live(9, t4, 1, &WriteOp::delete("a"), &w.resolver()).unwrap(), Applied);
    assert_eq!(t.write_intent_if_live(9, t4, 1, &WriteOp::delete("a"), &w.resolver()).unwrap(), Applied);
    let c4 = w.status.commit(t4, vec![t.id()]).unwrap();
    assert_eq!(t.apply_intents(t4, c4).unwrap(), 1);
    assert_eq!(stacked(&w, "a", ReadContext::at(w.now())), None);
    // Only deletes and patches.
    for bad in [WriteOp::put("a", "x"), WriteOp::insert("a", "x"), WriteOp::lock("a")] {
        assert_eq!(live(t4, 2, &bad).unwrap_err().code(), ErrorCode::InvalidRequest);
    }
}

#[test]
fn batches_out_of_key_order_keep_the_later_write_of_a_key() {
    // Tablets put a batch's records in key order (memtable inserts are cheaper):
    // writes of one key keep their order within the batch.
    let w = World::new();
    let t = w.tablet_for(b"a");
    let ops = vec![WriteOp::put("c", "c1"), WriteOp::put("a", "a1"), WriteOp::put("c", "c2"), WriteOp::put("b", "b1"), WriteOp::delete("a")];
    t.write_fast(0, &ops, None, &w.resolver()).unwrap();
    assert_eq!((w.get_at("a", w.now()), w.get_at("b", w.now()).as_deref(), w.get_at("c", w.now()).as_deref()), (None, Some("b1"), Some("c2")));
    let t1 = tid(1);
    w.status.create(t1).unwrap();
    let ops =
        vec![WriteOp::put("f", "f1"), WriteOp::put("d", "d1"), WriteOp::put("f", "f2"), WriteOp::put("e", "e1"), WriteOp::delete("d"), WriteOp::put("c", "c3")];
    w.txn_write(t1, 1, w.now(), ops).unwrap();
    let ctx = ReadContext::in_txn(w.now(), t1, 2);
    let seen = |k: &str| w.get_ctx(k, ctx);
    assert_eq!((seen("c").as_deref(), seen("d"), seen("e").as_deref(), seen("f").as_deref()), (Some("c3"), None, Some("e1"), Some("f2")));
    let commit = w.status.commit(t1, vec![t.id()]).unwrap();
    assert_eq!(t.apply_intents(t1, commit).unwrap(), 4);
    let now = w.now();
    assert_eq!(
        (w.get_at("c", now).as_deref(), w.get_at("d", now), w.get_at("e", now).as_deref(), w.get_at("f", now).as_deref()),
        (Some("c3"), None, Some("e1"), Some("f2"))
    );
}

#[test]
fn a_transaction_alone_meets_its_own_writes_in_later_batches() {
    // Batches of one transaction alone in its tablet skip looking for intents on
    // rows it never wrote; on rows it wrote they are found.
    let w = World::new();
    let t = w.tablet_for(b"a");
    let t1 = tid(1);
    w.status.create(t1).unwrap();
    let r = w.now();
    t.write_intents(0, t1, 1, r, &[WriteOp::insert("a", "1"), WriteOp::insert("b", "1")], &w.resolver()).unwrap();
    t.write_intents(0, t1, 2, r, &[WriteOp::insert("c", "1"), WriteOp::insert("d", "1")], &w.resolver()).unwrap();
    let e = t.write_intents(0, t1, 3, r, &[WriteOp::insert("e", "1"), WriteOp::insert("b", "2")], &w.resolver()).unwrap_err();
    assert!(matches!(e, Error::DuplicateKey { .. }), "{e:?}");
    t.write_intents(0, t1, 3, r, &[WriteOp::delete("c")], &w.resolver()).unwrap();
    t.write_intents(0, t1, 4, r, &[WriteOp::insert("c", "2"), WriteOp::insert("f", "1")], &w.resolver()).unwrap();
    let ctx = ReadContext::in_txn(w.now(), t1, 5);
    assert_eq!(
        ["a", "b", "c", "d", "e", "f"].map(|k| w.get_ctx(k, ctx)),
        [Some("1"), Some("1"), Some("2"), Some("1"), None, Some("1")].map(|v| v.map(String::from))
    );
    // Another transaction joins: both look again (its write of a row t1 holds conflicts).
    let t2 = tid(2);
    w.status.create(t2).unwrap();
    t.write_intents(0, t2, 1, w.now(), &[WriteOp::insert("g", "1")], &w.resolver()).unwrap();
    let e = t.write_intents(0, t2, 2, w.now(), &[WriteOp::put("a", "x")], &w.resolver()).unwrap_err();
    assert!(matches!(e, Error::WriteConflict { other_txn: Some(o), .. } if o == t1), "{e:?}");
    let e = t.write_intents(0, t1, 5, r, &[WriteOp::insert("g", "2")], &w.resolver()).unwrap_err();
    assert!(matches!(e, Error::WriteConflict { other_txn: Some(o), .. } if o == t2), "{e:?}");
    let commit = w.status.commit(t1, vec![t.id()]).unwrap();
    assert_eq!(t.apply_intents(t1, commit).unwrap(), 5);
    assert_eq!(w.get_at("c", w.now()).as_deref(), Some("2"));
}

#[test]
fn a_bulk_write_alone_in_its_tablet_leaves_its_reverse_index_out() {
    // Past the rows a keyed resolution takes, a transaction alone in its tablet
    // writes no reverse-index entries (a mark instead): its commit, abort and
    // rollback walk the intents.
    let w = World::new();
    let (engine, log, t) = counted_tablet(&w);
    let keys_tagged = |tag: u8| intents_cf_keys(&engine).iter().filter(|k| k.first() == Some(&tag)).count();
    let write = |t: &Tablet<MemEngine>, txn: TxnId, seq: u32, from: usize, rows: usize| {
        for chunk in (from..from + rows).collect::<Vec<_>>().chunks(500) {
            let ops: Vec<WriteOp> = chunk.iter().map(|i| WriteOp::insert(format!("k{i:05}").as_str(), "v")).collect();
            t.write_intents(0, txn, seq, w.now(), &ops, &w.resolver()).unwrap();
        }
    };
    let a = tid(95);
    w.status.create(a).unwrap();
    write(&t, a, 1, 0, 3000);
    write(&t, a, 2, 3000, 3000);
    // Nine batches of 500 indexed (4500 rows, past 4096), then a mark.
    assert_eq!(keys_tagged(b'R'), 4500 + 1);
    assert_eq!(keys_tagged(b'I'), 6000);
    assert_eq!(t.txns_with_intents().unwrap(), vec![a]);
    // A duplicate among them is still found.
    let e = t.write_intents(0, a, 3, w.now(), &[WriteOp::insert("k05999", "again")], &w.resolver()).unwrap_err();
    assert!(matches!(e, Error::DuplicateKey { .. }), "{e:?}");
    // Rollback of statement 2: its rows go, statement 1's stay.
    assert_eq!(t.rollback_intents(a, 2).unwrap(), 3000);
    let seen = |k: &str| t.read(ReadContext::in_txn(w.now(), a, 9), k.as_bytes(), &w.resolver()).unwrap().is_some();
    assert!(seen("k02999") && !seen("k03000") && !seen("k05999"));
    write(&t, a, 3, 3000, 1000);
    // Another transaction joins; a's commit walks, applies its rows and leaves
    // the other's intent.
    let d = tid(96);
    w.status.create(d).unwrap();
    t.write_intents(0, d, 1, w.now(), &[WriteOp::insert("zz", "d")], &w.resolver()).unwrap();
    let e = t.write_intents(0, d, 2, w.now(), &[WriteOp::put("k03500", "d")], &w.resolver()).unwrap_err();
    assert!(matches!(e, Error::WriteConflict { other_txn: Some(o), .. } if o == a), "{e:?}");
    let commit = w.status.commit(a, vec![TabletId(9)]).unwrap();
    assert_eq!(t.apply_intents(a, commit).unwrap(), 4000);
    assert_eq!(t.scan(ReadContext::at(commit), &ScanSpec::default(), &w.resolver()).unwrap().rows.len(), 4000);
    assert_eq!((keys_tagged(b'I'), keys_tagged(b'R')), (1, 1), "only d's intent and its entry");
    assert_eq!(t.txns_with_intents().unwrap(), vec![d]);
    w.status.abort(d, vec![TabletId(9)]).unwrap();
    t.remove_intents(d).unwrap();
    // Across a restart (the mark is stored): an abort still finds every intent.
    let b = tid(97);
    w.status.create(b).unwrap();
    for chunk in (0..5000).collect::<Vec<usize>>().chunks(500) {
        let ops: Vec<WriteOp> = chunk.iter().map(|i| WriteOp::insert(format!("b{i:05}").as_str(), "v")).collect();
        t.write_intents(0, b, 1, w.now(), &ops, &w.resolver()).unwrap();
    }
    assert_eq!(keys_tagged(b'R'), 4500 + 1);
    drop(t);
    let t =
        Tablet::open_replicated(TabletId(9), engine.clone(), log.clone(), w.clock.clone(), Partition { start: vec![], end: None }, HistoryCutoff::default())
            .unwrap();
    assert_eq!(t.txns_with_intents().unwrap(), vec![b]);
    w.status.abort(b, vec![TabletId(9)]).unwrap();
    assert_eq!(t.remove_intents(b).unwrap(), 5000);
    assert_eq!((keys_tagged(b'I'), keys_tagged(b'R')), (0, 0));
    assert_eq!(t.scan(ReadContext::at(w.now()), &ScanSpec::default(), &w.resolver()).unwrap().rows.len(), 4000);
}

impl World {
    fn delete_all(&self, txn: TxnId, seq: u32, read_ht: HybridTime) -> Result<Vec<u64>, Error> {
        self.tablets.iter().map(|t| t.delete_all(txn, seq, read_ht, &self.resolver())).collect()
    }
    fn scan_all(&self, ht: HybridTime) -> Vec<String> {
        let mut out = Vec::new();
        for t in &self.tablets {
            let r = t.scan(ReadContext::at(ht), &ScanSpec::default(), &self.resolver()).unwrap();
            out.extend(r.rows.into_iter().map(|(k, _)| String::from_utf8(k).unwrap()));
        }
        out
    }
}

/// `DELETE FROM t` with no condition, in the tablets: one intent per tablet, a
/// whole-tablet tombstone once committed. Counts, visibility at every read time,
/// conflicts both ways, resend, abort, rollback, restart.
#[test]
fn deleting_every_row_is_one_intent_per_tablet_and_a_tombstone_once_committed() {
    let w = World::new();
    w.put("a", "1");
    w.put("b", "2");
    w.put("x", "9");
    w.tablets[0].write_fast(0, &[WriteOp::delete("b")], None, &w.resolver()).unwrap();
    w.manual.advance(10);
    let d = tid(40);
    w.status.create(d).unwrap();
    let read_ht = w.now();
    // Live rows at the read time: "a" (b was deleted) and "x".
    assert_eq!(w.delete_all(d, 1, read_ht).unwrap(), vec![1, 1]);
    // Sent again: the same count, nothing more written.
    assert_eq!(w.delete_all(d, 1, read_ht).unwrap(), vec![1, 1]);
    assert_eq!(w.tablets[0].txns_with_intents().unwrap(), vec![d]);
    // Pending: reads see every row; writes of any row, new ones included, and
    // another deletion of every row wait for it.
    assert_eq!(w.scan_all(w.now()), vec!["a", "x"]);
    let blocked = |e: Error| matches!(e, Error::WriteConflict { other_txn: Some(t), .. } if t == d);
    assert!(blocked(w.tablets[0].write_fast(0, &[WriteOp::put("c", "3")], None, &w.resolver()).unwrap_err()));
    assert!(blocked(w.tablets[1].write_fast(0, &[WriteOp::delete("x")], None, &w.resolver()).unwrap_err()));
    let e = tid(41);
    w.status.create(e).unwrap();
    assert!(blocked(w.tablets[1].delete_all(e, 1, w.now(), &w.resolver()).unwrap_err()));
    w.manual.advance(10);
    let commit = w.status.commit(d, all_ids(&w)).unwrap();
    // Committed, not applied: every older row is gone at the commit time, there
    // before it; the reader's uncertainty window holding it restarts the read.
    assert_eq!(w.scan_all(commit), Vec::<String>::new());
    assert_eq!(w.scan_all(commit.decremented()), vec!["a", "x"]);
    assert_eq!(w.get_at("a", commit), None);
    let uncertain = ReadContext::at(commit.decremented()).uncertain_until(commit);
    assert!(w.tablets[0].read(uncertain, b"a", &w.resolver()).is_err());
    // An update of a row read before the deletion conflicts with it (committed
    // after its read time); an insert of a deleted row's key is no duplicate.
    let f = tid(42);
    w.status.create(f).unwrap();
    let e1 = w.tablets[0].write_intents(0, f, 1, read_ht, &[WriteOp::put("a", "late")], &w.resolver()).unwrap_err();
    assert!(matches!(e1, Error::WriteConflict { committed_at: Some(t), .. } if t == commit), "{e1:?}");
    w.manual.advance(10);
    let reinserted = w.tablets[0].write_fast(0, &[WriteOp::insert("a", "new")], None, &w.resolver()).unwrap();
    // Applied: the same answers; the tombstone is one record, no row was written.
    for t in &w.tablets {
        t.apply_intents(d, commit).unwrap();
        assert!(t.txns_with_intents().unwrap().iter().all(|x| *x != d));
    }
    assert_eq!(w.scan_all(w.now()), vec!["a"]);
    assert_eq!(w.get_at("a", reinserted).as_deref(), Some("new"));
    assert_eq!(w.get_at("x", w.now()), None);
    assert_eq!(w.get_at("x", commit.decremented()).as_deref(), Some("9"));
    // A deletion whose read time is older than a commit since conflicts.
    let g = tid(43);
    w.status.create(g).unwrap();
    let e2 = w.tablets[0].delete_all(g, 1, commit, &w.resolver()).unwrap_err();
    assert!(matches!(e2, Error::WriteConflict { committed_at: Some(t), .. } if t == reinserted), "{e2:?}");
    // Aborted and rolled back deletions delete nothing, and free the tablet.
    assert_eq!(w.tablets[0].delete_all(g, 1, w.now(), &w.resolver()).unwrap(), 1);
    w.status.abort(g, all_ids(&w)).unwrap();
    w.tablets[0].remove_intents(g).unwrap();
    w.put("b", "again");
    let h = tid(44);
    w.status.create(h).unwrap();
    w.manual.advance(10);
    assert_eq!(w.tablets[0].delete_all(h, 3, w.now(), &w.resolver()).unwrap(), 2);
    w.tablets[0].rollback_intents(h, 3).unwrap();
    w.put("c", "3");
    assert_eq!(w.scan_all(w.now()), vec!["a", "b", "c"]);
    // Over its own earlier writes, a transaction cannot delete every row.
    let k = tid(45);
    w.status.create(k).unwrap();
    w.txn_write(k, 1, w.now(), vec![WriteOp::put("q", "1")]).unwrap();
    assert!(matches!(w.tablets[1].delete_all(k, 2, w.now(), &w.resolver()), Err(Error::InvalidRequest(_))));
    // The applied deletion survives a restart.
    let w = w.restart();
    assert_eq!(w.get_at("x", w.now()), None);
    assert_eq!(w.get_at("x", commit.decremented()).as_deref(), Some("9"));
    assert_eq!(w.get_at("a", w.now()).as_deref(), Some("new"));
}

/// A pending deletion found after a restart (its intent) still holds the tablet,
/// and its commit applies as before.
#[test]
fn a_pending_deletion_of_every_row_survives_a_restart() {
    let w = World::new();
    w.put("a", "1");
    w.put("x", "2");
    w.manual.advance(10);
    let d = tid(50);
    w.status.create(d).unwrap();
    assert_eq!(w.delete_all(d, 1, w.now()).unwrap(), vec![1, 1]);
    w.status.heartbeat(d).unwrap();
    let w = w.restart();
    assert!(
        matches!(w.tablets[0].write_fast(0, &[WriteOp::put("b", "3")], None, &w.resolver()), Err(Error::WriteConflict { other_txn: Some(t), .. }) if t == d)
    );
    let commit = w.status.commit(d, all_ids(&w)).unwrap();
    assert_eq!(w.scan_all(commit), Vec::<String>::new());
    for t in &w.tablets {
        t.apply_intents(d, commit).unwrap();
    }
    w.manual.advance(10);
    w.put("b", "3");
    assert_eq!(w.scan_all(w.now()), vec!["b"]);
}

/// Once the history cutoff passes a deletion of every row, compactions drop the
/// versions it deleted (reads at or after the cutoff never see them).
#[test]
fn history_gc_drops_rows_a_deletion_of_every_row_deleted() {
    let GcTablet { cutoff, engine, manual, t, .. } = GcTablet::new();
    let none = |_: TxnId, _: HybridTime| -> pinax_mvcc::Result<TxnStatus> { Ok(TxnStatus::Aborted) };
    for i in 0..10 {
        manual.advance(10);
        t.write_fast(0, &[WriteOp::put(format!("k{i}"), "v")], None, &none).unwrap();
    }
    manual.advance(10);
    let d = tid(60);
    assert_eq!(t.delete_all(d, 1, t.clock().now(), &none).unwrap(), 10);
    manual.advance(10);
    let commit = t.clock().now();
    t.apply_intents(d, commit).unwrap();
    manual.advance(10);
    let after = t.write_fast(0, &[WriteOp::put("k3", "back")], None, &none).unwrap();
    engine.compact_range(Cf::Regular, None, None).unwrap();
    assert_eq!(engine.version_count(Cf::Regular), 11, "nothing dropped before the cutoff passes the deletion");
    cutoff.advance_to(commit);
    engine.compact_range(Cf::Regular, None, None).unwrap();
    assert_eq!(engine.version_count(Cf::Regular), 1);
    assert_eq!(t.read(ReadContext::at(after), b"k3", &none).unwrap().as_deref(), Some(&b"back"[..]));
    assert_eq!(t.read(ReadContext::at(after), b"k4", &none).unwrap(), None);
}

/// A transaction's statements after its own deletion of every row (a transaction
/// block: `DELETE FROM t; INSERT ...`): they see no older row, write the deleted
/// keys again without duplicates, and their rows outlive the tombstone (applied at
/// the same commit time).
#[test]
fn writes_after_a_transactions_own_deletion_of_every_row() {
    let w = World::new();
    w.put("a", "1");
    w.put("b", "2");
    w.put("x", "9");
    w.manual.advance(10);
    let d = tid(70);
    w.status.create(d).unwrap();
    let read_ht = w.now();
    assert_eq!(w.delete_all(d, 1, read_ht).unwrap(), vec![2, 1]);
    // Statement 2: "a" again (no duplicate), "c" new; statement 3 updates "c".
    w.txn_write(d, 2, read_ht, vec![WriteOp::insert("a", "new"), WriteOp::insert("c", "3")]).unwrap();
    w.txn_write(d, 3, read_ht, vec![WriteOp::put("c", "33")]).unwrap();
    let own = |key: &str| w.get_ctx(key, ReadContext::in_txn(w.now(), d, 4));
    assert_eq!((own("a").as_deref(), own("b"), own("c").as_deref(), own("x")), (Some("new"), None, Some("33"), None));
    // Its statement 1 (the deletion) did not see its own deletion.
    assert_eq!(w.get_ctx("b", ReadContext::in_txn(w.now(), d, 1)).as_deref(), Some("2"));
    // Others see the old rows until it commits.
    assert_eq!(w.scan_all(w.now()), vec!["a", "b", "x"]);
    w.manual.advance(10);
    let commit = w.status.commit(d, all_ids(&w)).unwrap();
    assert_eq!(w.scan_all(commit), vec!["a", "c"]);
    for t in &w.tablets {
        t.apply_intents(d, commit).unwrap();
    }
    assert_eq!(w.scan_all(w.now()), vec!["a", "c"]);
    assert_eq!((w.get_at("a", w.now()).as_deref(), w.get_at("c", w.now()).as_deref()), (Some("new"), Some("33")));
    assert_eq!(w.get_at("a", commit.decremented()).as_deref(), Some("1"));
}

/// A replica's log that is behind: batches replicated while `lagging` are
/// committed by the other replicas but not yet applied here; they are applied
/// when the replica next proves its leadership ([`Replicator::leader_term`], as
/// a new Raft leader applies its predecessors' entries before it decides).
#[derive(Default)]
struct LaggingLog {
    inner: Option<pinax_tablet::DirectWrite<MemEngine>>,
    behind: parking_lot::Mutex<Vec<(HybridTime, pinax_engine::OwnedBatch, u128)>>,
    lagging: std::sync::atomic::AtomicBool,
    term: std::sync::atomic::AtomicU64,
}

impl LaggingLog {
    fn inner(&self) -> &pinax_tablet::DirectWrite<MemEngine> {
        self.inner.as_ref().expect("a log over an engine")
    }
    /// A new term begins here: later batches are applied at once.
    fn new_term(&self) {
        self.lagging.store(false, std::sync::atomic::Ordering::SeqCst);
        self.term.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl pinax_tablet::Replicator for LaggingLog {
    fn replicate(&self, ht: HybridTime, batch: pinax_engine::OwnedBatch, request: u128) -> pinax_tablet::Result<()> {
        if self.lagging.load(std::sync::atomic::Ordering::SeqCst) {
            self.behind.lock().push((ht, batch, request));
            return Ok(());
        }
        self.inner().replicate(ht, batch, request)
    }
    fn applied_request(&self, request: u128) -> Option<HybridTime> {
        self.inner().applied_request(request)
    }
    fn leader_term(&self) -> pinax_tablet::Result<u64> {
        for (ht, batch, request) in std::mem::take(&mut *self.behind.lock()) {
            self.inner().replicate(ht, batch, request)?;
        }
        Ok(self.term.load(std::sync::atomic::Ordering::SeqCst))
    }
    fn leads_now(&self) -> bool {
        true
    }
    fn read_barrier(&self) -> pinax_tablet::Result<u64> {
        self.leader_term()
    }
}

#[test]
fn a_new_leader_resolves_intents_it_has_not_applied_yet() {
    // Regression (the netns bank test, read committed: a transfer's credit was
    // lost): a replica that had just become leader was asked to apply a committed
    // transaction's intents before it had applied the entry that wrote them. It
    // listed the intents from its engine first and proved its leadership (which
    // catches the state machine up) after, so it found none, answered "done", and
    // the status tablet forgot the transaction: the intent was later read as
    // aborted.
    let w = World::new();
    let engine = Arc::new(MemEngine::new());
    let log = Arc::new(LaggingLog { inner: Some(pinax_tablet::DirectWrite::new(engine.clone(), false)), term: 1.into(), ..Default::default() });
    let part = Partition { start: vec![], end: None };
    let t = Tablet::open_replicated(TabletId(9), engine, log.clone(), w.clock.clone(), part, HistoryCutoff::default()).unwrap();
    let resolver = w.resolver();
    t.write_fast(1, &[WriteOp::put("a", "old")], None, &resolver).unwrap();
    let txn = tid(93);
    w.status.create(txn).unwrap();
    log.lagging.store(true, std::sync::atomic::Ordering::SeqCst);
    t.write_intents(2, txn, 1, w.now(), &[WriteOp::put("a", "new")], &resolver).unwrap();
    let commit = w.status.commit(txn, vec![TabletId(9)]).unwrap();
    log.new_term();
    assert_eq!(t.apply_intents(txn, commit).unwrap(), 1, "the intent written in the earlier term is applied");
    assert_eq!(t.read(ReadContext::at(w.now()), b"a", &resolver).unwrap(), Some(b"new".to_vec()));
    assert!(t.txns_with_intents().unwrap().is_empty());
    // An abort likewise removes intents the replica had not applied yet.
    let txn = tid(94);
    w.status.create(txn).unwrap();
    log.lagging.store(true, std::sync::atomic::Ordering::SeqCst);
    t.write_intents(3, txn, 1, w.now(), &[WriteOp::put("b", "x")], &resolver).unwrap();
    w.status.abort(txn, vec![TabletId(9)]).unwrap();
    log.new_term();
    assert_eq!(t.remove_intents(txn).unwrap(), 1);
    assert!(t.txns_with_intents().unwrap().is_empty());
}
