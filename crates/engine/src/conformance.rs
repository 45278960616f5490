//! The conformance suite: one set of behavioural checks every [`KvEngine`] must pass.
//!
//! Each case is a public function taking a fresh, empty engine (`&E`). Run the whole
//! suite from an engine crate's tests with the [`conformance_tests!`](crate::conformance_tests)
//! macro, which generates one `#[test]` per case (so a failure names the case):
//!
//! ```text
//! // crates/engine-mem/src/lib.rs
//! #[cfg(test)]
//! mod conformance {
//!     pinax_engine::conformance_tests!(|| crate::MemEngine::new());
//! }
//! ```
//!
//! The expression given to the macro is called once per case and must return a
//! [`Fixture`]: either the engine itself (every `KvEngine` is a fixture) or a value that
//! owns the engine plus whatever must outlive it (a temporary directory, say).
//!
//! What is checked (see each function): put/get/delete per column family and column
//! family isolation; unsigned byte ordering; semantics inside one batch; batch
//! atomicity (also under concurrent readers); snapshot stability; iterators forward and
//! reverse, all seeks, inclusive/exclusive bounds, empty ranges, deleted keys;
//! `delete_range`; `replace_contents` (a snapshot's install); maintenance calls (`flush`, `compact_range`, `stats`) keeping data
//! intact; and a randomized model test against a `BTreeMap` with a fixed seed.
//!
//! Conventions the suite pins down (beyond the trait docs):
//! - `delete_range(start, end)` with `start >= end` deletes nothing;
//! - an iterator whose `lower >= upper` is empty;
//! - `seek(k)` with `k` below `lower` lands on the first key in bounds, and
//!   `seek_for_prev(k)` with `k` at or above `upper` lands on the last key in bounds;
//! - the empty key is a valid key;
//! - `prefix_same_as_start` is a hint only and never changes results.
//!
//! The suite uses no sleeps and no wall-clock time; the random test is deterministic.

use crate::{Cf, IterOptions, KvEngine, KvIterator, Snapshot, WriteBatch, WriteOptions};
use std::collections::BTreeMap;

/// Something owning a fresh engine for one test case (plus anything it needs alive).
pub trait Fixture {
    type Engine: KvEngine;
    fn engine(&self) -> &Self::Engine;
}

impl<E: KvEngine> Fixture for E {
    type Engine = E;
    fn engine(&self) -> &E {
        self
    }
}

/// Generates one `#[test]` per conformance case. The argument is an expression that,
/// called with no arguments, returns a fresh [`Fixture`](crate::conformance::Fixture)
/// (a closure or a function path). Invoke it inside a test module.
#[macro_export]
macro_rules! conformance_tests {
    ($open:expr) => {
        $crate::conformance_tests!(@cases $open;
            put_get_delete,
            overwrite_and_empty_values,
            cf_isolation,
            unsigned_byte_ordering,
            batch_semantics,
            batch_atomicity,
            concurrent_batch_atomicity,
            snapshot_stability,
            iterator_stable_under_writes,
            iter_forward_reverse,
            iter_seeks,
            iter_bounds,
            iter_empty_ranges,
            iter_prefix_hint_is_harmless,
            iter_probe_prefix,
            iter_across_deleted_keys,
            delete_range,
            large_keys_and_values,
            maintenance_keeps_data,
            randomized_model,
            replace_contents,
        );
    };
    (@cases $open:expr; $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                let fixture = ($open)();
                $crate::conformance::$case($crate::conformance::Fixture::engine(&fixture));
            }
        )*
    };
}

// ---------------------------------------------------------------------------
// helpers

type Kv = (Vec<u8>, Vec<u8>);
/// `(lower, upper)` of an iterator.
type Bounds<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

fn write_batch<E: KvEngine>(e: &E, f: impl FnOnce(&mut E::Batch)) {
    let mut b = e.new_batch();
    f(&mut b);
    e.write(b, WriteOptions::default()).expect("write");
}

fn put<E: KvEngine>(e: &E, cf: Cf, k: &[u8], v: &[u8]) {
    write_batch(e, |b| b.put(cf, k, v));
}

fn del<E: KvEngine>(e: &E, cf: Cf, k: &[u8]) {
    write_batch(e, |b| b.delete(cf, k));
}

fn get<E: KvEngine>(e: &E, cf: Cf, k: &[u8]) -> Option<Vec<u8>> {
    e.get(cf, k).expect("get")
}

fn sget<S: Snapshot>(s: &S, cf: Cf, k: &[u8]) -> Option<Vec<u8>> {
    s.get(cf, k).expect("snapshot get")
}

fn valid<I: KvIterator>(it: &I) -> bool {
    it.valid().expect("iterator error")
}

fn cur<I: KvIterator>(it: &I) -> Option<Kv> {
    valid(it).then(|| (it.key().to_vec(), it.value().to_vec()))
}

fn cur_key<I: KvIterator>(it: &I) -> Option<Vec<u8>> {
    valid(it).then(|| it.key().to_vec())
}

fn opts(lower: Option<&[u8]>, upper: Option<&[u8]>) -> IterOptions {
    IterOptions { lower: lower.map(<[u8]>::to_vec), upper: upper.map(<[u8]>::to_vec), prefix_same_as_start: false }
}

/// All entries, forward.
fn scan<S: Snapshot>(s: &S, cf: Cf, o: IterOptions) -> Vec<Kv> {
    let mut it = s.iter(cf, o);
    let mut out = Vec::new();
    it.seek_to_first();
    while let Some(kv) = cur(&it) {
        out.push(kv);
        it.next();
    }
    out
}

/// All entries, backward (returned in descending order).
fn scan_rev<S: Snapshot>(s: &S, cf: Cf, o: IterOptions) -> Vec<Kv> {
    let mut it = s.iter(cf, o);
    let mut out = Vec::new();
    it.seek_to_last();
    while let Some(kv) = cur(&it) {
        out.push(kv);
        it.prev();
    }
    out
}

fn keys(kvs: &[Kv]) -> Vec<Vec<u8>> {
    kvs.iter().map(|(k, _)| k.clone()).collect()
}

fn bkeys(ks: &[&[u8]]) -> Vec<Vec<u8>> {
    ks.iter().map(|k| k.to_vec()).collect()
}

/// Checks forward and reverse full scans of `cf` in `s` equal `expected` (ascending).
fn assert_scan<S: Snapshot>(s: &S, cf: Cf, o: IterOptions, expected: &[Kv], what: &str) {
    let fwd = scan(s, cf, o.clone());
    assert_eq!(fwd, expected, "{what}: forward scan of {cf}");
    let mut rev = scan_rev(s, cf, o);
    rev.reverse();
    assert_eq!(rev, expected, "{what}: reverse scan of {cf}");
}

fn kv(k: &[u8], v: &[u8]) -> Kv {
    (k.to_vec(), v.to_vec())
}

// ---------------------------------------------------------------------------
// cases

/// Put, get, overwrite and delete in every column family, through the engine and a snapshot.
pub fn put_get_delete<E: KvEngine>(e: &E) {
    for cf in Cf::ALL {
        assert_eq!(get(e, cf, b"k1"), None, "{cf}: fresh engine is empty");
        put(e, cf, b"k1", b"v1");
        assert_eq!(get(e, cf, b"k1").as_deref(), Some(&b"v1"[..]), "{cf}");
        assert_eq!(get(e, cf, b"k2"), None, "{cf}");
        assert_eq!(get(e, cf, b"k"), None, "{cf}: a prefix is another key");
        assert_eq!(get(e, cf, b"k10"), None, "{cf}: an extension is another key");
        put(e, cf, b"k1", b"v1b");
        assert_eq!(get(e, cf, b"k1").as_deref(), Some(&b"v1b"[..]), "{cf}: overwrite");
        let s = e.snapshot();
        assert_eq!(sget(&s, cf, b"k1").as_deref(), Some(&b"v1b"[..]), "{cf}");
        drop(s);
        del(e, cf, b"k1");
        assert_eq!(get(e, cf, b"k1"), None, "{cf}: deleted");
        del(e, cf, b"never-written");
        assert_eq!(get(e, cf, b"never-written"), None, "{cf}: deleting a missing key is fine");
        put(e, cf, b"k1", b"again");
        assert_eq!(get(e, cf, b"k1").as_deref(), Some(&b"again"[..]), "{cf}: put after delete");
        let s = e.snapshot();
        assert_eq!(sget(&s, cf, b"k1").as_deref(), Some(&b"again"[..]), "{cf}");
    }
}

/// Empty values are values (distinct from absence); the empty key is a key.
pub fn overwrite_and_empty_values<E: KvEngine>(e: &E) {
    for cf in Cf::ALL {
        put(e, cf, b"empty", b"");
        assert_eq!(get(e, cf, b"empty"), Some(vec![]), "{cf}: empty value is present");
        put(e, cf, b"", b"empty key");
        assert_eq!(get(e, cf, b"").as_deref(), Some(&b"empty key"[..]), "{cf}: empty key");
        let s = e.snapshot();
        assert_scan(&s, cf, IterOptions::default(), &[kv(b"", b"empty key"), kv(b"empty", b"")], "empty key/value");
        drop(s);
        del(e, cf, b"");
        del(e, cf, b"empty");
        assert_eq!(get(e, cf, b""), None, "{cf}");
        assert_eq!(get(e, cf, b"empty"), None, "{cf}");
        for i in 0..10u8 {
            put(e, cf, b"ow", &[i]);
        }
        assert_eq!(get(e, cf, b"ow"), Some(vec![9]), "{cf}: last overwrite wins");
        let s = e.snapshot();
        assert_scan(&s, cf, IterOptions::default(), &[kv(b"ow", &[9])], "many versions of one key");
    }
}

/// Column families are separate key spaces.
pub fn cf_isolation<E: KvEngine>(e: &E) {
    put(e, Cf::Regular, b"k", b"regular");
    put(e, Cf::Intents, b"k", b"intents");
    put(e, Cf::Regular, b"only-regular", b"r");
    put(e, Cf::Meta, b"only-meta", b"m");
    assert_eq!(get(e, Cf::Regular, b"k").as_deref(), Some(&b"regular"[..]));
    assert_eq!(get(e, Cf::Intents, b"k").as_deref(), Some(&b"intents"[..]));
    assert_eq!(get(e, Cf::Meta, b"k"), None);
    assert_eq!(get(e, Cf::Intents, b"only-regular"), None);
    assert_eq!(get(e, Cf::Regular, b"only-meta"), None);
    let s = e.snapshot();
    assert_scan(&s, Cf::Regular, IterOptions::default(), &[kv(b"k", b"regular"), kv(b"only-regular", b"r")], "isolation");
    assert_scan(&s, Cf::Intents, IterOptions::default(), &[kv(b"k", b"intents")], "isolation");
    assert_scan(&s, Cf::Meta, IterOptions::default(), &[kv(b"only-meta", b"m")], "isolation");
    drop(s);

    del(e, Cf::Intents, b"k");
    assert_eq!(get(e, Cf::Regular, b"k").as_deref(), Some(&b"regular"[..]), "delete is per CF");
    assert_eq!(get(e, Cf::Intents, b"k"), None);

    put(e, Cf::Intents, b"k", b"intents");
    write_batch(e, |b| b.delete_range(Cf::Regular, b"", b"\xff\xff"));
    assert_eq!(get(e, Cf::Regular, b"k"), None);
    assert_eq!(get(e, Cf::Intents, b"k").as_deref(), Some(&b"intents"[..]), "delete_range is per CF");
    assert_eq!(get(e, Cf::Meta, b"only-meta").as_deref(), Some(&b"m"[..]), "delete_range is per CF");
}

/// Keys order as unsigned bytes (memcmp), shorter prefix first.
pub fn unsigned_byte_ordering<E: KvEngine>(e: &E) {
    // Written in a scrambled order.
    let written: [&[u8]; 17] = [
        b"\xff",
        b"\x80",
        b"",
        b"\x7f",
        b"ab",
        b"\x00",
        b"\xff\xff",
        b"\x7f\xff",
        b"\x00\x00",
        b"a",
        b"\x80\x00",
        b"\x01",
        b"abc",
        b"\xff\x00",
        b"b",
        b"\x00\xff",
        b"\xfe\xff\xff",
    ];
    let mut sorted: Vec<Vec<u8>> = written.iter().map(|k| k.to_vec()).collect();
    sorted.sort(); // Vec<u8> orders lexicographically by unsigned byte
    for cf in Cf::ALL {
        for (i, k) in written.iter().enumerate() {
            put(e, cf, k, &[i as u8]);
        }
        let s = e.snapshot();
        let got = scan(&s, cf, IterOptions::default());
        assert_eq!(keys(&got), sorted, "{cf}: forward order");
        let mut rev = keys(&scan_rev(&s, cf, IterOptions::default()));
        rev.reverse();
        assert_eq!(rev, sorted, "{cf}: reverse order");
        for (k, v) in &got {
            let i = written.iter().position(|w| w == &k.as_slice()).expect("written key");
            assert_eq!(v, &vec![i as u8], "{cf}: value of {k:?}");
        }

        let mut it = s.iter(cf, IterOptions::default());
        it.seek(b"\x7f\xff\x00");
        assert_eq!(cur_key(&it).as_deref(), Some(&b"\x80"[..]), "{cf}: 0x80 sorts after 0x7f..");
        it.seek(b"\x00\x00\x00");
        assert_eq!(cur_key(&it).as_deref(), Some(&b"\x00\xff"[..]), "{cf}");
        it.seek_for_prev(b"\x80");
        assert_eq!(cur_key(&it).as_deref(), Some(&b"\x80"[..]), "{cf}");
        it.seek_for_prev(b"\x7f\xff\xff");
        assert_eq!(cur_key(&it).as_deref(), Some(&b"\x7f\xff"[..]), "{cf}");
        it.seek(b"\xff\xff\x00");
        assert!(!valid(&it), "{cf}: nothing after 0xffff");
        it.seek(b"");
        assert_eq!(cur_key(&it).as_deref(), Some(&b""[..]), "{cf}: empty key is first");
        it.seek_for_prev(b"\x00");
        assert_eq!(cur_key(&it).as_deref(), Some(&b"\x00"[..]), "{cf}");
        it.prev();
        assert_eq!(cur_key(&it).as_deref(), Some(&b""[..]), "{cf}");

        // Bounds with high bytes.
        let got = scan(&s, cf, opts(Some(b"\x7f\xff"), Some(b"\xff")));
        assert_eq!(keys(&got), bkeys(&[b"\x7f\xff", b"\x80", b"\x80\x00", b"\xfe\xff\xff"]), "{cf}");
        let got = scan_rev(&s, cf, opts(Some(b"\xff"), None));
        assert_eq!(keys(&got), bkeys(&[b"\xff\xff", b"\xff\x00", b"\xff"]), "{cf}");
    }
}

/// Operations inside one batch apply in order; batch bookkeeping works.
pub fn batch_semantics<E: KvEngine>(e: &E) {
    let mut b = e.new_batch();
    assert!(b.is_empty());
    assert_eq!(b.count(), 0);
    let empty_size = b.data_size();
    b.put(Cf::Regular, b"a", b"1");
    assert_eq!(b.count(), 1);
    assert!(!b.is_empty());
    let one = b.data_size();
    assert!(one > empty_size, "data_size grows");
    b.delete(Cf::Intents, b"x");
    b.delete_range(Cf::Meta, b"m", b"n");
    assert_eq!(b.count(), 3);
    assert!(b.data_size() > one);
    b.clear();
    assert!(b.is_empty());
    assert_eq!(b.count(), 0);
    e.write(b, WriteOptions::default()).expect("write cleared batch");
    assert_eq!(get(e, Cf::Regular, b"a"), None, "a cleared batch writes nothing");
    e.write(e.new_batch(), WriteOptions { sync: true, ..Default::default() }).expect("write empty batch");

    put(e, Cf::Regular, b"pre", b"old");
    put(e, Cf::Regular, b"r2", b"old");
    write_batch(e, |b| {
        b.put(Cf::Regular, b"k", b"1");
        b.put(Cf::Regular, b"k", b"2"); // later put wins
        b.put(Cf::Regular, b"gone", b"x");
        b.delete(Cf::Regular, b"gone"); // put then delete: absent
        b.delete(Cf::Regular, b"pre");
        b.put(Cf::Regular, b"pre", b"new"); // delete then put: present
        b.put(Cf::Regular, b"r1", b"x");
        b.delete_range(Cf::Regular, b"r", b"s"); // covers r1 (this batch) and r2 (before)
        b.put(Cf::Regular, b"r3", b"after-range"); // after the range delete: present
        b.delete_range(Cf::Regular, b"z", b"a"); // start > end: no-op
        b.delete_range(Cf::Regular, b"k", b"k"); // empty range: no-op
    });
    assert_eq!(get(e, Cf::Regular, b"k").as_deref(), Some(&b"2"[..]));
    assert_eq!(get(e, Cf::Regular, b"gone"), None);
    assert_eq!(get(e, Cf::Regular, b"pre").as_deref(), Some(&b"new"[..]));
    assert_eq!(get(e, Cf::Regular, b"r1"), None);
    assert_eq!(get(e, Cf::Regular, b"r2"), None);
    assert_eq!(get(e, Cf::Regular, b"r3").as_deref(), Some(&b"after-range"[..]));
    let s = e.snapshot();
    assert_scan(&s, Cf::Regular, IterOptions::default(), &[kv(b"k", b"2"), kv(b"pre", b"new"), kv(b"r3", b"after-range")], "batch result");
}

/// A snapshot sees all of a batch or none of it; an unwritten batch is invisible.
pub fn batch_atomicity<E: KvEngine>(e: &E) {
    write_batch(e, |b| {
        b.put(Cf::Regular, b"old1", b"o");
        b.put(Cf::Regular, b"old2", b"o");
        b.put(Cf::Intents, b"old3", b"o");
    });
    let before = e.snapshot();
    let mut b = e.new_batch();
    for cf in Cf::ALL {
        for i in 0..50u32 {
            b.put(cf, format!("new{i:03}").as_bytes(), &i.to_be_bytes());
        }
    }
    b.delete(Cf::Regular, b"old1");
    b.delete_range(Cf::Regular, b"old2", b"old3");
    b.put(Cf::Intents, b"old3", b"replaced");
    // Not yet written: invisible.
    assert_eq!(get(e, Cf::Regular, b"new000"), None);
    assert_eq!(get(e, Cf::Regular, b"old1").as_deref(), Some(&b"o"[..]));
    e.write(b, WriteOptions::default()).expect("write");
    let after = e.snapshot();

    for cf in Cf::ALL {
        let none: Vec<Kv> = scan(&before, cf, opts(Some(b"new"), Some(b"nex")));
        assert!(none.is_empty(), "{cf}: older snapshot sees none of the batch");
        let all = scan(&after, cf, opts(Some(b"new"), Some(b"nex")));
        assert_eq!(all.len(), 50, "{cf}: newer snapshot sees all of the batch");
        for i in 0..50u32 {
            let k = format!("new{i:03}");
            assert_eq!(sget(&before, cf, k.as_bytes()), None);
            assert_eq!(sget(&after, cf, k.as_bytes()), Some(i.to_be_bytes().to_vec()));
            assert_eq!(get(e, cf, k.as_bytes()), Some(i.to_be_bytes().to_vec()));
        }
    }
    assert_eq!(sget(&before, Cf::Regular, b"old1").as_deref(), Some(&b"o"[..]));
    assert_eq!(sget(&before, Cf::Regular, b"old2").as_deref(), Some(&b"o"[..]));
    assert_eq!(sget(&before, Cf::Intents, b"old3").as_deref(), Some(&b"o"[..]));
    assert_eq!(sget(&after, Cf::Regular, b"old1"), None);
    assert_eq!(sget(&after, Cf::Regular, b"old2"), None);
    assert_eq!(sget(&after, Cf::Intents, b"old3").as_deref(), Some(&b"replaced"[..]));
}

/// Readers on other threads never observe half of a batch.
pub fn concurrent_batch_atomicity<E: KvEngine>(e: &E) {
    use std::sync::atomic::{AtomicBool, Ordering};
    const ROUNDS: u32 = 300;
    let done = AtomicBool::new(false);
    let check = |s: &E::Snapshot<'_>| -> u32 {
        // Invariant of every batch: the same counter under "a" (Regular), "b" (Intents),
        // "c" (Meta), and "k<n>" present in Regular exactly for n < counter.
        let a = sget(s, Cf::Regular, b"a");
        let b = sget(s, Cf::Intents, b"b");
        let c = sget(s, Cf::Meta, b"c");
        assert_eq!(a, b, "torn batch across CFs");
        assert_eq!(a, c, "torn batch across CFs");
        let n = a.map_or(0, |v| u32::from_be_bytes(v.try_into().expect("4 bytes")));
        let ks = scan(s, Cf::Regular, opts(Some(b"k"), Some(b"l")));
        assert_eq!(ks.len() as u32, n, "torn batch: key count vs counter");
        n
    };
    std::thread::scope(|scope| {
        let readers: Vec<_> = (0..2)
            .map(|_| {
                scope.spawn(|| {
                    let mut last = 0;
                    let mut checks = 0u32;
                    while !done.load(Ordering::Acquire) || checks == 0 {
                        let s = e.snapshot();
                        let n = check(&s);
                        assert!(n >= last, "snapshots go back in time");
                        last = n;
                        checks += 1;
                    }
                })
            })
            .collect();
        for i in 1..=ROUNDS {
            let mut b = e.new_batch();
            let v = i.to_be_bytes();
            b.put(Cf::Regular, b"a", &v);
            b.put(Cf::Intents, b"b", &v);
            b.put(Cf::Meta, b"c", &v);
            b.put(Cf::Regular, format!("k{:05}", i - 1).as_bytes(), b"x");
            e.write(b, WriteOptions::default()).expect("write");
        }
        done.store(true, Ordering::Release);
        for r in readers {
            r.join().expect("reader panicked");
        }
    });
    assert_eq!(check(&e.snapshot()), ROUNDS);
}

/// A snapshot's view never changes, whatever is written (or deleted) after it.
pub fn snapshot_stability<E: KvEngine>(e: &E) {
    for cf in Cf::ALL {
        for i in 0..20u8 {
            put(e, cf, &[b'k', i], &[i]);
        }
    }
    let s1 = e.snapshot();
    let expect1: Vec<Kv> = (0..20u8).map(|i| (vec![b'k', i], vec![i])).collect();

    for cf in Cf::ALL {
        put(e, cf, &[b'k', 0], b"changed");
        del(e, cf, &[b'k', 1]);
        put(e, cf, &[b'k', 1, 0], b"new");
        write_batch(e, |b| b.delete_range(cf, &[b'k', 10], &[b'k', 15]));
        put(e, cf, b"zzz", b"new");
    }
    let s2 = e.snapshot();
    for cf in Cf::ALL {
        put(e, cf, &[b'k', 0], b"changed again");
    }
    e.flush().expect("flush");
    for cf in Cf::ALL {
        e.compact_range(cf, None, None).expect("compact");
    }

    for cf in Cf::ALL {
        assert_scan(&s1, cf, IterOptions::default(), &expect1, "first snapshot");
        assert_eq!(sget(&s1, cf, &[b'k', 0]), Some(vec![0]));
        assert_eq!(sget(&s1, cf, &[b'k', 1]), Some(vec![1]));
        assert_eq!(sget(&s1, cf, &[b'k', 12]), Some(vec![12]));
        assert_eq!(sget(&s1, cf, b"zzz"), None);

        let mut expect2 = expect1.clone();
        expect2.retain(|(k, _)| k[1] != 1 && !(10..15).contains(&k[1]));
        expect2[0].1 = b"changed".to_vec();
        expect2.insert(1, (vec![b'k', 1, 0], b"new".to_vec()));
        expect2.push((b"zzz".to_vec(), b"new".to_vec()));
        assert_scan(&s2, cf, IterOptions::default(), &expect2, "second snapshot");
        assert_eq!(get(e, cf, &[b'k', 0]).as_deref(), Some(&b"changed again"[..]));
        assert_eq!(get(e, cf, &[b'k', 12]), None);
    }
    // Dropping the older snapshot first does not disturb the newer one.
    drop(s1);
    for cf in Cf::ALL {
        e.compact_range(cf, None, None).expect("compact");
        assert_eq!(sget(&s2, cf, &[b'k', 0]).as_deref(), Some(&b"changed"[..]));
        assert_eq!(sget(&s2, cf, &[b'k', 2]), Some(vec![2]));
    }
}

/// An iterator already positioned keeps walking its snapshot while the engine changes.
pub fn iterator_stable_under_writes<E: KvEngine>(e: &E) {
    for i in 0..10u8 {
        put(e, Cf::Regular, &[b'k', i * 2], &[i]);
    }
    let s = e.snapshot();
    let mut it = s.iter(Cf::Regular, IterOptions::default());
    it.seek_to_first();
    assert_eq!(cur(&it), Some((vec![b'k', 0], vec![0])));
    for i in 0..10u8 {
        put(e, Cf::Regular, &[b'k', i * 2 + 1], b"between");
        del(e, Cf::Regular, &[b'k', i * 2]);
    }
    e.flush().expect("flush");
    let mut seen = Vec::new();
    while let Some(kv) = cur(&it) {
        seen.push(kv);
        it.next();
    }
    let expect: Vec<Kv> = (0..10u8).map(|i| (vec![b'k', i * 2], vec![i])).collect();
    assert_eq!(seen, expect);
    it.seek_to_last();
    assert_eq!(cur(&it), Some((vec![b'k', 18], vec![9])));
    // A new snapshot sees the new state.
    let s2 = e.snapshot();
    let now = scan(&s2, Cf::Regular, IterOptions::default());
    assert_eq!(now.len(), 10);
    assert!(now.iter().all(|(k, v)| k[1] % 2 == 1 && v == b"between"));
}

fn fill_letters<E: KvEngine>(e: &E, cf: Cf) -> Vec<Kv> {
    // a, c, e, ..., s (10 keys) with values = uppercase.
    let mut out = Vec::new();
    write_batch(e, |b| {
        for c in (b'a'..=b's').step_by(2) {
            b.put(cf, &[c], &[c.to_ascii_uppercase()]);
            out.push((vec![c], vec![c.to_ascii_uppercase()]));
        }
    });
    out
}

/// next/prev in both directions, turning around, running off either end.
pub fn iter_forward_reverse<E: KvEngine>(e: &E) {
    let all = fill_letters(e, Cf::Intents);
    let s = e.snapshot();
    assert_scan(&s, Cf::Intents, IterOptions::default(), &all, "letters");
    let mut it = s.iter(Cf::Intents, IterOptions::default());
    it.seek(b"e");
    assert_eq!(cur(&it), Some(kv(b"e", b"E")));
    it.next();
    assert_eq!(cur_key(&it), Some(b"g".to_vec()));
    it.prev();
    assert_eq!(cur_key(&it), Some(b"e".to_vec()), "turn around backward");
    it.prev();
    assert_eq!(cur_key(&it), Some(b"c".to_vec()));
    it.next();
    assert_eq!(cur_key(&it), Some(b"e".to_vec()), "turn around forward");
    it.seek_to_first();
    assert_eq!(cur_key(&it), Some(b"a".to_vec()));
    it.prev();
    assert!(!valid(&it), "prev before the first key");
    it.seek_to_last();
    assert_eq!(cur(&it), Some(kv(b"s", b"S")));
    it.next();
    assert!(!valid(&it), "next after the last key");
    it.seek_to_last();
    it.prev();
    assert_eq!(cur_key(&it), Some(b"q".to_vec()));
    // Zig-zag across the whole range.
    it.seek_to_first();
    for (i, (k, _)) in all.iter().enumerate() {
        assert_eq!(cur_key(&it).as_ref(), Some(k));
        it.next();
        if i + 1 < all.len() {
            it.prev();
            assert_eq!(cur_key(&it).as_ref(), Some(k));
            it.next();
        }
    }
    assert!(!valid(&it));
}

/// seek / seek_for_prev / seek_to_first / seek_to_last, exact and between keys.
pub fn iter_seeks<E: KvEngine>(e: &E) {
    {
        let s = e.snapshot();
        let mut it = s.iter(Cf::Regular, IterOptions::default());
        it.seek_to_first();
        assert!(!valid(&it), "empty CF");
        it.seek_to_last();
        assert!(!valid(&it), "empty CF");
        it.seek(b"a");
        assert!(!valid(&it), "empty CF");
        it.seek_for_prev(b"a");
        assert!(!valid(&it), "empty CF");
    }
    fill_letters(e, Cf::Regular);
    let s = e.snapshot();
    let mut it = s.iter(Cf::Regular, IterOptions::default());
    let cases_seek: [(&[u8], Option<&[u8]>); 7] =
        [(b"", Some(b"a")), (b"a", Some(b"a")), (b"b", Some(b"c")), (b"c\x00", Some(b"e")), (b"bzzz", Some(b"c")), (b"s", Some(b"s")), (b"s\x00", None)];
    for (target, want) in cases_seek {
        it.seek(target);
        assert_eq!(cur_key(&it).as_deref(), want, "seek({target:?})");
    }
    let cases_prev: [(&[u8], Option<&[u8]>); 7] =
        [(b"", None), (b"a", Some(b"a")), (b"a\x00", Some(b"a")), (b"b", Some(b"a")), (b"d", Some(b"c")), (b"s", Some(b"s")), (b"zz", Some(b"s"))];
    for (target, want) in cases_prev {
        it.seek_for_prev(target);
        assert_eq!(cur_key(&it).as_deref(), want, "seek_for_prev({target:?})");
    }
    // Seeking again after running off the end works.
    it.seek(b"t");
    assert!(!valid(&it));
    it.seek(b"k");
    assert_eq!(cur(&it), Some(kv(b"k", b"K")));
    it.seek_for_prev(b"\x00");
    assert!(!valid(&it));
    it.seek_for_prev(b"l");
    assert_eq!(cur(&it), Some(kv(b"k", b"K")));
    it.next();
    assert_eq!(cur_key(&it).as_deref(), Some(&b"m"[..]), "forward after seek_for_prev");
    it.seek(b"l");
    it.prev();
    assert_eq!(cur_key(&it).as_deref(), Some(&b"k"[..]), "backward after seek");
}

/// Lower bound inclusive, upper bound exclusive, for every positioning call.
pub fn iter_bounds<E: KvEngine>(e: &E) {
    let all = fill_letters(e, Cf::Regular); // a c e g i k m o q s
    let s = e.snapshot();
    let sel = |lo: &[u8], hi: &[u8]| -> Vec<Kv> { all.iter().filter(|(k, _)| k.as_slice() >= lo && k.as_slice() < hi).cloned().collect() };
    // Bounds on existing keys: lower included, upper excluded.
    assert_scan(&s, Cf::Regular, opts(Some(b"e"), Some(b"m")), &sel(b"e", b"m"), "[e, m)");
    // Bounds between keys.
    assert_scan(&s, Cf::Regular, opts(Some(b"d"), Some(b"n")), &sel(b"d", b"n"), "[d, n)");
    // One-sided.
    assert_scan(&s, Cf::Regular, opts(Some(b"m"), None), &sel(b"m", b"\xff"), "[m, ..)");
    assert_scan(&s, Cf::Regular, opts(None, Some(b"e")), &sel(b"", b"e"), "[.., e)");
    assert_scan(&s, Cf::Regular, opts(None, Some(b"e\x00")), &sel(b"", b"e\x00"), "[.., e\\0)");
    // Single key.
    assert_scan(&s, Cf::Regular, opts(Some(b"g"), Some(b"g\x00")), &[kv(b"g", b"G")], "[g, g\\0)");

    let mut it = s.iter(Cf::Regular, opts(Some(b"e"), Some(b"m")));
    it.seek(b"a");
    assert_eq!(cur_key(&it).as_deref(), Some(&b"e"[..]), "seek below lower");
    it.seek(b"e");
    assert_eq!(cur_key(&it).as_deref(), Some(&b"e"[..]));
    it.seek(b"j");
    assert_eq!(cur_key(&it).as_deref(), Some(&b"k"[..]));
    it.seek(b"l");
    assert!(!valid(&it), "next key m is the (exclusive) upper bound");
    it.seek(b"m");
    assert!(!valid(&it), "seek at upper");
    it.seek(b"z");
    assert!(!valid(&it), "seek above upper");
    it.seek_for_prev(b"z");
    assert_eq!(cur_key(&it).as_deref(), Some(&b"k"[..]), "seek_for_prev above upper");
    it.seek_for_prev(b"m");
    assert_eq!(cur_key(&it).as_deref(), Some(&b"k"[..]), "seek_for_prev at upper");
    it.seek_for_prev(b"l");
    assert_eq!(cur_key(&it).as_deref(), Some(&b"k"[..]));
    it.seek_for_prev(b"e");
    assert_eq!(cur_key(&it).as_deref(), Some(&b"e"[..]), "seek_for_prev at lower");
    it.seek_for_prev(b"d");
    assert!(!valid(&it), "seek_for_prev below lower");
    it.seek_to_first();
    assert_eq!(cur_key(&it).as_deref(), Some(&b"e"[..]));
    it.prev();
    assert!(!valid(&it), "prev past lower");
    it.seek_to_last();
    assert_eq!(cur_key(&it).as_deref(), Some(&b"k"[..]));
    it.next();
    assert!(!valid(&it), "next past upper");
}

/// Ranges that hold nothing.
pub fn iter_empty_ranges<E: KvEngine>(e: &E) {
    fill_letters(e, Cf::Meta); // a c e ... s
    let s = e.snapshot();
    let empty_cases: [Bounds<'_>; 7] = [
        (Some(b"g"), Some(b"g")),     // lower == upper on a key
        (Some(b"h"), Some(b"h")),     // lower == upper off keys
        (Some(b"g\x00"), Some(b"h")), // gap between keys
        (Some(b"t"), None),           // above all keys
        (None, Some(b"a")),           // below all keys (upper excludes a)
        (Some(b"k"), Some(b"c")),     // lower > upper
        (Some(b"s\x00"), Some(b"\xff")),
    ];
    for (lo, hi) in empty_cases {
        let what = format!("bounds {lo:?}..{hi:?}");
        assert_scan(&s, Cf::Meta, opts(lo, hi), &[], &what);
        let mut it = s.iter(Cf::Meta, opts(lo, hi));
        for probe in [&b""[..], b"a", b"g", b"h", b"k", b"z"] {
            it.seek(probe);
            assert!(!valid(&it), "{what}: seek({probe:?})");
            it.seek_for_prev(probe);
            assert!(!valid(&it), "{what}: seek_for_prev({probe:?})");
        }
    }
    // Other CFs are empty.
    assert_scan(&s, Cf::Regular, IterOptions::default(), &[], "empty CF");
    assert_scan(&s, Cf::Intents, opts(Some(b"a"), Some(b"z")), &[], "empty CF, bounded");
}

/// `prefix_same_as_start` never changes what an iterator returns.
pub fn iter_prefix_hint_is_harmless<E: KvEngine>(e: &E) {
    let all = fill_letters(e, Cf::Regular);
    let s = e.snapshot();
    for (lo, hi) in [(None, None), (Some(&b"c"[..]), Some(&b"k"[..]))] {
        let mut o = opts(lo, hi);
        let plain = scan(&s, Cf::Regular, o.clone());
        o.prefix_same_as_start = true;
        assert_eq!(scan(&s, Cf::Regular, o.clone()), plain);
        let mut it = s.iter(Cf::Regular, o);
        it.seek(b"d");
        assert_eq!(cur_key(&it).as_deref(), Some(&b"e"[..]));
    }
    assert_eq!(scan(&s, Cf::Regular, IterOptions::default()), all);
}

/// A probe (`prefix_same_as_start`) returns every key of the seek target's probe
/// prefix, from SST files and the memtable, and none of another row; and a probe
/// for a row with no key finds none, whatever the bloom filters say. In both
/// column families that have probe prefixes.
pub fn iter_probe_prefix<E: KvEngine>(e: &E) {
    for (cf, suffix) in [(Cf::Regular, crate::PROBE_SUFFIX_LEN), (Cf::Intents, crate::INTENT_PROBE_SUFFIX_LEN)] {
        // Rows r000..r199 (even ones only), three keys each: row ++ 00 01 ++ suffix.
        let row = |i: u32| {
            let mut k = format!("r{i:03}").into_bytes();
            k.extend_from_slice(&crate::PROBE_PREFIX_END);
            k
        };
        let key = |i: u32, v: u8| {
            let mut k = row(i);
            k.extend(std::iter::repeat_n(v, suffix));
            k
        };
        for half in 0..2u32 {
            write_batch(e, |b| {
                for i in (0..200).filter(|i| i % 2 == 0 && i % 4 == 2 * half) {
                    for v in [3u8, 7, 9] {
                        b.put(cf, &key(i, v), &i.to_be_bytes());
                    }
                }
            });
            if half == 0 {
                e.flush().expect("flush"); // half in SST files, half in the memtable
            }
        }
        let s = e.snapshot();
        let mut it = s.iter(cf, IterOptions { prefix_same_as_start: true, ..IterOptions::default() });
        for i in 0..200u32 {
            let target = key(i, 0);
            assert_eq!(crate::probe_prefix(cf, &target), Some(&row(i)[..]));
            it.seek(&target);
            let mut found = Vec::new();
            while let Some(k) = cur_key(&it) {
                if crate::probe_prefix(cf, &k) != Some(&row(i)[..]) {
                    break;
                }
                found.push(k);
                it.next();
            }
            let want: Vec<Vec<u8>> = if i % 2 == 0 { [3u8, 7, 9].iter().map(|&v| key(i, v)).collect() } else { Vec::new() };
            assert_eq!(found, want, "{cf:?}: probe of row {i}");
        }
        // Without the hint the iterator runs on across rows.
        let mut plain = s.iter(cf, IterOptions::default());
        plain.seek(&key(1, 0));
        assert_eq!(cur_key(&plain), Some(key(2, 3)));
        assert_eq!(crate::probe_prefix(cf, b"r001"), None);
    }
    assert_eq!(crate::probe_prefix(Cf::Regular, &[0, 1, 1, 2, 3, 4, 5, 6, 7, 8]), Some(&[0u8, 1][..]));
    assert_eq!(crate::probe_prefix(Cf::Intents, &[0, 1, 1, 2, 3, 4, 5, 6, 7, 8]), None);
    assert_eq!(crate::probe_prefix(Cf::Meta, &[0, 1, 1, 2, 3, 4, 5, 6, 7, 8]), None);
}

/// Iteration and seeks skip deleted keys (including runs of them and at the bounds).
pub fn iter_across_deleted_keys<E: KvEngine>(e: &E) {
    let cf = Cf::Regular;
    let key = |i: u32| format!("k{i:03}").into_bytes();
    write_batch(e, |b| {
        for i in 0..100 {
            b.put(cf, &key(i), &i.to_be_bytes());
        }
    });
    e.flush().expect("flush"); // deletes may then sit above the puts in the engine
    write_batch(e, |b| {
        for i in 0..100 {
            if i % 2 == 0 || (40..70).contains(&i) {
                b.delete(cf, &key(i));
            }
        }
    });
    let live: Vec<u32> = (0..100).filter(|i| i % 2 == 1 && !(40..70).contains(i)).collect();
    let expect: Vec<Kv> = live.iter().map(|&i| (key(i), i.to_be_bytes().to_vec())).collect();
    let s = e.snapshot();
    assert_scan(&s, cf, IterOptions::default(), &expect, "odd keys, with a deleted run");
    let mut it = s.iter(cf, IterOptions::default());
    it.seek(&key(40));
    assert_eq!(cur_key(&it), Some(key(71)), "seek into a deleted run");
    it.prev();
    assert_eq!(cur_key(&it), Some(key(39)), "prev across a deleted run");
    it.seek_for_prev(&key(69));
    assert_eq!(cur_key(&it), Some(key(39)));
    it.next();
    assert_eq!(cur_key(&it), Some(key(71)), "next across a deleted run");
    it.seek(&key(98));
    assert_eq!(cur_key(&it), Some(key(99)), "seek onto a deleted key lands on the next live one");
    it.next();
    assert!(!valid(&it));
    it.seek_to_first();
    assert_eq!(cur_key(&it), Some(key(1)), "first key deleted");
    // Bounds landing on deleted keys.
    let b = opts(Some(&key(40)), Some(&key(72)));
    assert_scan(&s, cf, b, &[(key(71), 71u32.to_be_bytes().to_vec())], "bounds on deleted keys");
    drop(it);
    drop(s);

    // Delete everything: empty again.
    write_batch(e, |b| {
        for i in live.iter().copied() {
            b.delete(cf, &key(i));
        }
    });
    let s = e.snapshot();
    assert_scan(&s, cf, IterOptions::default(), &[], "everything deleted");
    let mut it = s.iter(cf, IterOptions::default());
    it.seek(&key(50));
    assert!(!valid(&it));
    it.seek_for_prev(&key(50));
    assert!(!valid(&it));
}

/// `delete_range` removes `[start, end)` in one CF, atomically, and later puts reappear.
pub fn delete_range<E: KvEngine>(e: &E) {
    for cf in [Cf::Regular, Cf::Intents] {
        let all = fill_letters(e, cf); // a c e g i k m o q s
        let before = e.snapshot();
        write_batch(e, |b| b.delete_range(cf, b"c", b"i"));
        let after: Vec<Kv> = all.iter().filter(|(k, _)| !(b"c"[..] <= k[..] && k[..] < b"i"[..])).cloned().collect();
        let s = e.snapshot();
        assert_scan(&s, cf, IterOptions::default(), &after, "after delete_range [c, i)");
        assert_eq!(get(e, cf, b"c"), None);
        assert_eq!(get(e, cf, b"g"), None);
        assert_eq!(get(e, cf, b"i").as_deref(), Some(&b"I"[..]), "end is exclusive");
        assert_eq!(get(e, cf, b"a").as_deref(), Some(&b"A"[..]));
        assert_scan(&before, cf, IterOptions::default(), &all, "snapshot before delete_range");
        let mut it = s.iter(cf, IterOptions::default());
        it.seek(b"b");
        assert_eq!(cur_key(&it).as_deref(), Some(&b"i"[..]), "seek skips the deleted range");
        it.prev();
        assert_eq!(cur_key(&it).as_deref(), Some(&b"a"[..]));
        drop(it);
        drop(s);

        // A put after the range delete is visible; older snapshot still unaffected.
        put(e, cf, b"e", b"new");
        assert_eq!(get(e, cf, b"e").as_deref(), Some(&b"new"[..]));
        e.flush().expect("flush");
        assert_eq!(get(e, cf, b"e").as_deref(), Some(&b"new"[..]), "after flush");
        assert_eq!(get(e, cf, b"c"), None, "after flush");
        e.compact_range(cf, None, None).expect("compact");
        assert_eq!(get(e, cf, b"c"), None, "after compaction");
        assert_eq!(sget(&before, cf, b"c").as_deref(), Some(&b"C"[..]));
        drop(before);

        // No-ops.
        write_batch(e, |b| b.delete_range(cf, b"k", b"k"));
        write_batch(e, |b| b.delete_range(cf, b"z", b"a"));
        write_batch(e, |b| b.delete_range(cf, b"t", b"z"));
        assert_eq!(get(e, cf, b"k").as_deref(), Some(&b"K"[..]));
        assert_eq!(get(e, cf, b"s").as_deref(), Some(&b"S"[..]));

        // Everything, including the empty key.
        put(e, cf, b"", b"empty");
        write_batch(e, |b| b.delete_range(cf, b"", b"\xff\xff\xff"));
        let s = e.snapshot();
        assert_scan(&s, cf, IterOptions::default(), &[], "delete_range of everything");
    }
    assert_eq!(get(e, Cf::Meta, b"a"), None);
}

/// Big keys and values round-trip.
pub fn large_keys_and_values<E: KvEngine>(e: &E) {
    let big_key: Vec<u8> = (0..16 * 1024).map(|i| (i % 251) as u8).collect();
    let big_val: Vec<u8> = (0..2 * 1024 * 1024).map(|i| (i % 253) as u8).collect();
    put(e, Cf::Regular, &big_key, &big_val);
    put(e, Cf::Regular, b"small", b"v");
    assert_eq!(get(e, Cf::Regular, &big_key).as_deref(), Some(&big_val[..]));
    e.flush().expect("flush");
    let s = e.snapshot();
    assert_eq!(sget(&s, Cf::Regular, &big_key).as_deref(), Some(&big_val[..]));
    let got = scan(&s, Cf::Regular, IterOptions::default());
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].0, big_key);
    assert_eq!(got[0].1, big_val);
}

/// flush / compact_range / stats / sync writes never change what is visible.
pub fn maintenance_keeps_data<E: KvEngine>(e: &E) {
    let key = |i: u32| format!("m{i:05}").into_bytes();
    for round in 0..3u32 {
        let mut b = e.new_batch();
        for i in 0..500 {
            for cf in Cf::ALL {
                b.put(cf, &key(i), format!("{round}-{i}").as_bytes());
            }
        }
        e.write(b, WriteOptions { sync: round % 2 == 0, ..Default::default() }).expect("write");
        e.flush().expect("flush");
    }
    write_batch(e, |b| {
        for i in (0..500).step_by(3) {
            b.delete(Cf::Regular, &key(i));
        }
    });
    let _ = e.stats();
    for cf in Cf::ALL {
        e.compact_range(cf, Some(&key(100)), Some(&key(200))).expect("compact part");
    }
    e.compact_range(Cf::Regular, None, Some(&key(50))).expect("compact part");
    e.compact_range(Cf::Regular, Some(&key(450)), None).expect("compact part");
    for cf in Cf::ALL {
        e.compact_range(cf, None, None).expect("compact all");
    }
    e.flush().expect("flush with nothing to flush");
    let stats = e.stats();
    let _ = (stats.approximate_bytes, stats.l0_files, stats.memtable_bytes, stats.pending_compaction_bytes);
    let s = e.snapshot();
    for cf in Cf::ALL {
        let got = scan(&s, cf, IterOptions::default());
        let expect: Vec<Kv> = (0..500).filter(|i| cf != Cf::Regular || i % 3 != 0).map(|i| (key(i), format!("2-{i}").into_bytes())).collect();
        assert_eq!(got, expect, "{cf} after maintenance");
    }
}

// ---------------------------------------------------------------------------
// randomized model test

/// SplitMix64: a tiny deterministic PRNG (the suite must not depend on `rand`).
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    /// Keys of 0..=3 bytes over an alphabet that exercises unsigned ordering.
    fn key(&mut self) -> Vec<u8> {
        const ALPHABET: [u8; 6] = [0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff];
        let len = self.below(4) as usize;
        (0..len).map(|_| ALPHABET[self.below(6) as usize]).collect()
    }
    fn value(&mut self) -> Vec<u8> {
        let len = self.below(12) as usize;
        (0..len).map(|_| self.next_u64() as u8).collect()
    }
    fn cf(&mut self) -> Cf {
        Cf::ALL[self.below(Cf::ALL.len() as u64) as usize]
    }
}

type Model = [BTreeMap<Vec<u8>, Vec<u8>>; Cf::ALL.len()];

fn model_range(m: &BTreeMap<Vec<u8>, Vec<u8>>, lo: &Option<Vec<u8>>, hi: &Option<Vec<u8>>) -> Vec<Kv> {
    m.iter().filter(|(k, _)| lo.as_ref().is_none_or(|l| *k >= l) && hi.as_ref().is_none_or(|h| *k < h)).map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// Compares a snapshot with the model it should equal: point gets, full and bounded
/// scans both ways, and random seeks followed by random next/prev walks.
fn check_against_model<S: Snapshot>(s: &S, m: &Model, rng: &mut Rng, step: usize) {
    for cf in Cf::ALL {
        let mm = &m[cf.index()];
        for _ in 0..4 {
            let k = rng.key();
            assert_eq!(sget(s, cf, &k).as_ref(), mm.get(&k), "step {step}: get({k:?}) in {cf}");
        }
        let (lo, hi) = match rng.below(4) {
            0 => (None, None),
            1 => (Some(rng.key()), None),
            2 => (None, Some(rng.key())),
            _ => (Some(rng.key()), Some(rng.key())),
        };
        let o = IterOptions { lower: lo.clone(), upper: hi.clone(), prefix_same_as_start: false };
        let expect = model_range(mm, &lo, &hi);
        let what = format!("step {step}: bounds {lo:?}..{hi:?}");
        assert_scan(s, cf, o.clone(), &expect, &what);

        let mut it = s.iter(cf, o);
        for _ in 0..3 {
            let target = rng.key();
            let mut pos: Option<usize> = match rng.below(4) {
                0 => {
                    it.seek(&target);
                    expect.iter().position(|(k, _)| *k >= target)
                }
                1 => {
                    it.seek_for_prev(&target);
                    expect.iter().rposition(|(k, _)| *k <= target)
                }
                2 => {
                    it.seek_to_first();
                    (!expect.is_empty()).then_some(0)
                }
                _ => {
                    it.seek_to_last();
                    expect.len().checked_sub(1)
                }
            };
            for _ in 0..6 {
                assert_eq!(cur(&it), pos.map(|i| expect[i].clone()), "{what}: walk from {target:?}");
                let Some(i) = pos else { break };
                if rng.chance(50) {
                    it.next();
                    pos = (i + 1 < expect.len()).then_some(i + 1);
                } else {
                    it.prev();
                    pos = i.checked_sub(1);
                }
            }
        }
    }
}

/// Random batches (put / delete / delete_range over all CFs) against a `BTreeMap` model;
/// snapshots are kept for a while and compared with the model as of their creation.
/// Flushes and compactions are mixed in. Fixed seed: failures reproduce.
pub fn randomized_model<E: KvEngine>(e: &E) {
    const STEPS: usize = 1500;
    let mut rng = Rng(0x5EED_F00D_B1A5);
    let mut model: Model = Default::default();
    let mut snaps: Vec<(E::Snapshot<'_>, Model)> = Vec::new();
    for step in 0..STEPS {
        // One batch of 1..=6 operations.
        let mut b = e.new_batch();
        for _ in 0..1 + rng.below(6) {
            let cf = rng.cf();
            let m = &mut model[cf.index()];
            match rng.below(10) {
                0..=5 => {
                    let (k, v) = (rng.key(), rng.value());
                    b.put(cf, &k, &v);
                    m.insert(k, v);
                }
                6..=8 => {
                    let k = rng.key();
                    b.delete(cf, &k);
                    m.remove(&k);
                }
                _ => {
                    let (mut a, mut z) = (rng.key(), rng.key());
                    if rng.chance(80) && a > z {
                        std::mem::swap(&mut a, &mut z); // sometimes keep start > end: a no-op
                    }
                    b.delete_range(cf, &a, &z);
                    if a < z {
                        let doomed: Vec<Vec<u8>> = m.range(a.clone()..z.clone()).map(|(k, _)| k.clone()).collect();
                        for k in doomed {
                            m.remove(&k);
                        }
                    }
                }
            }
        }
        e.write(b, WriteOptions { sync: rng.chance(5), ..Default::default() }).expect("write");

        if rng.chance(10) {
            snaps.push((e.snapshot(), model.clone()));
        }
        if snaps.len() > 4 || (!snaps.is_empty() && rng.chance(5)) {
            let i = rng.below(snaps.len() as u64) as usize;
            snaps.swap_remove(i);
        }
        if rng.chance(1) {
            e.flush().expect("flush");
        }
        if rng.chance(1) {
            let cf = rng.cf();
            let (a, z) = (rng.key(), rng.key());
            let (a, z) = if a <= z { (a, z) } else { (z, a) };
            e.compact_range(cf, Some(&a), Some(&z)).expect("compact");
            if rng.chance(30) {
                e.compact_range(cf, None, None).expect("compact");
            }
        }

        // Latest state via engine.get.
        for _ in 0..2 {
            let cf = rng.cf();
            let k = rng.key();
            assert_eq!(get(e, cf, &k).as_ref(), model[cf.index()].get(&k), "step {step}: latest get({k:?}) in {cf}");
        }
        if step % 10 == 0 {
            check_against_model(&e.snapshot(), &model, &mut rng, step);
        }
        if !snaps.is_empty() && rng.chance(20) {
            let i = rng.below(snaps.len() as u64) as usize;
            let (s, m) = &snaps[i];
            check_against_model(s, m, &mut rng, step);
        }
    }
    for (s, m) in &snaps {
        check_against_model(s, m, &mut rng, STEPS);
    }
    check_against_model(&e.snapshot(), &model, &mut rng, STEPS);
}

/// `replace_contents` leaves exactly the given entries in the column families it
/// replaces (old keys gone, also ones in files and in the memtable, and deleted
/// ones stay deleted), the others untouched; snapshots taken before still see the
/// old contents; entries out of order or of another column family are refused.
pub fn replace_contents<E: KvEngine>(e: &E) {
    for i in 0..50u32 {
        put(e, Cf::Regular, format!("old{i:03}").as_bytes(), b"o");
        put(e, Cf::Meta, format!("m{i:03}").as_bytes(), b"o");
    }
    e.flush().expect("flush");
    put(e, Cf::Regular, b"in-memtable", b"o");
    put(e, Cf::Intents, b"intent", b"kept");
    let before = e.snapshot();
    let new: Vec<(Cf, Vec<u8>, Vec<u8>)> = (0..300u32)
        .map(|i| (Cf::Regular, format!("new{i:04}").into_bytes(), vec![i as u8; 100]))
        .chain([(Cf::Meta, b"a".to_vec(), b"meta".to_vec()), (Cf::Meta, b"m010".to_vec(), b"n".to_vec())])
        .collect();
    e.replace_contents(&[Cf::Regular, Cf::Meta], &mut new.clone().into_iter().map(Ok)).expect("replace");
    let s = e.snapshot();
    let regular: Vec<Kv> = new.iter().filter(|(cf, _, _)| *cf == Cf::Regular).map(|(_, k, v)| (k.clone(), v.clone())).collect();
    assert_scan(&s, Cf::Regular, IterOptions::default(), &regular, "replaced regular");
    assert_scan(&s, Cf::Meta, IterOptions::default(), &[kv(b"a", b"meta"), kv(b"m010", b"n")], "replaced meta");
    assert_scan(&s, Cf::Intents, IterOptions::default(), &[kv(b"intent", b"kept")], "not replaced");
    assert_eq!(get(e, Cf::Regular, b"old001"), None);
    assert_eq!(get(e, Cf::Regular, b"in-memtable"), None);
    assert_eq!(sget(&before, Cf::Regular, b"old001").as_deref(), Some(&b"o"[..]), "an older snapshot keeps its view");
    drop(before);
    // Later writes land on top as usual.
    put(e, Cf::Regular, b"new0001", b"later");
    assert_eq!(get(e, Cf::Regular, b"new0001").as_deref(), Some(&b"later"[..]));
    // Replacing with nothing empties.
    e.replace_contents(&[Cf::Meta], &mut std::iter::empty()).expect("replace with nothing");
    assert_scan(&e.snapshot(), Cf::Meta, IterOptions::default(), &[], "emptied");
    // Refused: an entry of a column family not being replaced. Keys out of order:
    // an error or taken, never a panic.
    let other = vec![Ok((Cf::Intents, b"x".to_vec(), b"y".to_vec()))];
    assert!(e.replace_contents(&[Cf::Meta], &mut other.into_iter()).is_err());
    let unordered = vec![Ok((Cf::Meta, b"b".to_vec(), b"1".to_vec())), Ok((Cf::Meta, b"a".to_vec(), b"2".to_vec()))];
    let _ = e.replace_contents(&[Cf::Meta], &mut unordered.into_iter());
}
