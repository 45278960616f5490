//! Per-backend state: the storage client, the open storage transaction, the write
//! buffer, statement read times and the TID map.
//!
//! Transactions: PostgreSQL decides what to read and write, Pinax when it is visible.
//! - Writes are buffered in chunks tagged with the writing command id (`cid`) and sent
//!   in batches: when the buffer is large, before any read (a read must see earlier
//!   commands' writes), at the end of a statement inside a transaction block, and at
//!   commit.
//! - A transaction that never had to flush early commits its buffer at PRE_COMMIT: one
//!   table → `Client::write` (one tablet: the single-RPC fast path, no intents);
//!   otherwise a storage transaction is begun, written and committed.
//! - Subtransactions own the command ids from their start on: rolling one back drops
//!   its buffered writes and asks storage to drop the transaction's intents of those
//!   command ids (`Txn::rollback_to`), which also releases its row locks.
//! - Reads use the statement's read time (READ COMMITTED: new per statement; REPEATABLE
//!   READ: one per transaction) and see own writes of commands below the snapshot's
//!   `curcid`, so a statement never sees its own writes but sees earlier ones.
//!
//! Only the backend's main thread touches this state (thread-local); the client's
//! heartbeat thread never calls into PostgreSQL.

use crate::guc;
use crate::tid::TidMap;
use pgrx::pg_sys;
use pinax_client::{Client, ClientError, Txn};
use pinax_common::HybridTime;
use pinax_proto::{LiveWrite, LockStrength, ReadPoint, WriteOp};
use std::cell::RefCell;

/// Flush the buffer once it holds this many operations, or `pinax.write_buffer_size`
/// bytes (default 2 MiB). A tablet's share becomes one Raft log entry, about twice
/// as large with its intent records, which followers must store within the
/// AppendEntries timeout (`pinax_raft::RaftTiming`): the default keeps entries
/// within the size group commit merges writes to (4 MiB). Larger batches cost the
/// node less per row: a tablet applies each batch in key order, and RocksDB's
/// memtable insert of a key resumes from the previous one's place, so it costs
/// the log of the distance between them. Against batches of 4096 operations or
/// 1 MiB (the limits before), a 1M-row insert..select of random uuid keys took
/// 25-40% less of the node's CPU during the statement, 16-27% less server CPU in
/// all; a COPY of 1M rows 27% less (bench/results/2026-11-27-write-batches.txt).
const FLUSH_OPS: usize = 65536;

struct Chunk {
    seq: u32,
    table: String,
    ops: Vec<WriteOp>,
    /// SERIALIZABLE read locks only (sent with `READ_LOCK_SEQ`).
    read_locks: bool,
}

/// Sharding options taken out of `CREATE TABLE ... WITH (pinax.*)` by the utility hook,
/// consumed when the table's storage is created.
#[derive(Clone, Debug, Default)]
pub struct CreateOptions {
    pub range: bool,
    pub tablets: Option<u32>,
    pub split_at: Vec<Vec<u8>>,
    /// `pinax.auto_split` (None: the default, on).
    pub auto_split: Option<bool>,
}

/// Speculative insertions that may lose in a row, with no conflicting row found
/// by the look-ups between them, before the statement fails (`lost_speculation`).
const SPEC_LOSSES_MAX: u32 = 1000;

/// A failed flush: which storage table, and the error.
pub struct FlushError {
    pub table: String,
    pub error: ClientError,
}

#[derive(Default)]
pub struct Backend {
    client: Option<Client>,
    txn: Option<Txn>,
    buf: Vec<Chunk>,
    buf_ops: usize,
    buf_bytes: usize,
    /// The read time of the current statement (READ COMMITTED) or transaction.
    stmt: Option<ReadTime>,
    /// A read met a value in its uncertainty window at this time and could not
    /// restart in place: a statement run again reads from there (keeping the
    /// window's start, so that restarts end).
    rerun_at: Option<HybridTime>,
    pub tids: TidMap,
    pub pending_create: Option<CreateOptions>,
    /// Writes so far in this transaction.
    pub writes: u64,
    /// Highest command id written (buffered or sent) in this transaction.
    max_seq: Option<u32>,
    /// Open subtransactions: (subtransaction id, first command id that belongs to it).
    subxacts: Vec<(u32, u32)>,
    /// A rollback to this command id that could not be sent to storage yet: it is
    /// retried before the next storage operation, and COMMIT fails without it.
    pending_rollback: Option<u32>,
    /// Command id of the latest row write (index entries are written with it).
    pub last_cid: u32,
    /// Index entries an UPDATE keeps unchanged: (index OID, key). `aminsert` skips them.
    pub unchanged: std::collections::HashSet<(u32, Vec<u8>)>,
    /// The speculative insertion (INSERT ... ON CONFLICT) in progress.
    pub spec: Option<Speculative>,
    /// Command id of the latest speculative insertion (INSERT ... ON CONFLICT)...
    pub spec_cid: Option<u32>,
    /// ...and the rows that command wrote: (relation, row key) → command id. A row
    /// met again by the same command is "invisible" to it (PostgreSQL then raises
    /// "ON CONFLICT DO UPDATE command cannot affect row a second time").
    pub spec_rows: std::collections::HashMap<(u32, Vec<u8>), u32>,
    /// Speculative insertions that lost in a row, each to the same key
    /// (`lost_speculation`): past SPEC_LOSSES_MAX, PostgreSQL's look-up and
    /// Pinax's storage disagree on a conflict, and the statement fails instead of
    /// retrying forever.
    spec_losses: (u32, Option<Vec<u8>>),
    /// Rows of tables with an exclusion constraint written by command `.0`, with
    /// the TIDs they were handed (`note_excl_row`).
    excl_rows: (u32, std::collections::HashMap<(u32, Vec<u8>), pg_sys::ItemPointerData>),
    /// The relation whose one row the running statement writes at once, and how
    /// (`insert_at_once`), until it is written.
    pub insert_at_once: Option<crate::insert_at_once::AtOnce>,
    /// SERIALIZABLE: the tablets' range-lock keys this transaction locked (storage
    /// table, range-lock key, SHARE for range reads or PREDICATE WRITE for writes,
    /// command id), so each is locked once (and again after a rollback dropped it).
    range_locks: Vec<(String, Vec<u8>, LockStrength, u32)>,
}

/// The read time of a statement (READ COMMITTED) or a transaction (REPEATABLE READ,
/// SERIALIZABLE), and its clock-uncertainty window.
#[derive(Clone, Copy, Debug)]
struct ReadTime {
    /// The statement's start timestamp (0: the whole transaction).
    ident: i64,
    ht: HybridTime,
    /// The first read time taken: where the uncertainty window starts (a restart
    /// moves `ht`, never this).
    origin: HybridTime,
    /// Whether a read at `ht` has returned rows: until one has, a read that meets
    /// a value in its uncertainty window moves `ht` past it and runs again, and
    /// nobody can tell (YugabyteDB's transparent read restart).
    served: bool,
}

/// A speculative insertion: what it wrote (to undo if it loses) and whether a
/// unique conflict was found.
#[derive(Debug, Default)]
pub struct Speculative {
    /// The row key that already existed (a primary-key conflict), if any.
    pub conflict: Option<Vec<u8>>,
    /// The key of the unique index entry that already existed, if a unique index
    /// reported the conflict.
    pub index_conflict: Option<Vec<u8>>,
    pub written: Vec<(String, Vec<u8>)>,
    /// The row was committed at once (`insert_at_once`), not written in the
    /// storage transaction: nothing is to be undone.
    pub committed: bool,
}

thread_local! {
    static BACKEND: RefCell<Backend> = RefCell::new(Backend::default());
}

/// Whether this backend's statement is being canceled or the backend terminated
/// (statement_timeout, pg_cancel_backend, ...): the storage client stops a long
/// scan between requests (`ClientError::Interrupted`), and raising that error
/// first lets PostgreSQL report the cancellation its own way.
fn cancel_pending() -> bool {
    // SAFETY: plain reads of signal-set flags on the backend's own thread.
    unsafe { pg_sys::QueryCancelPending != 0 || pg_sys::ProcDiePending != 0 }
}

/// Run `f` with the backend state. Do not call back into code that uses the state.
pub fn with<R>(f: impl FnOnce(&mut Backend) -> R) -> R {
    BACKEND.with(|b| f(&mut b.borrow_mut()))
}

impl Backend {
    /// The storage client, connecting on first use.
    /// Whether this session has its node's client yet.
    pub fn connected(&self) -> bool {
        self.client.is_some()
    }

    pub fn client(&mut self) -> Result<Client, ClientError> {
        if let Some(c) = &self.client {
            return Ok(c.clone());
        }
        let addr = guc::address();
        // Other nodes are reached over TCP with TLS, presenting the node's
        // identity (copied for PostgreSQL's OS user as backend.crt/.key).
        let tls = match guc::tls_dir() {
            Some(dir) => {
                let id = pinax_proto::tls::Identity { ca: dir.join("ca.crt"), cert: dir.join("backend.crt"), key: dir.join("backend.key") };
                Some(pinax_proto::tls::TlsConfig::load(id).map_err(|e| ClientError::Unavailable { addr: addr.clone(), message: format!("TLS: {e}") })?)
            }
            None => None,
        };
        let opts = pinax_client::ClientOptions {
            local_socket: guc::socket().map(|p| (addr.clone(), p)),
            interrupted: Some(cancel_pending),
            tls,
            // Requests carry the node's SQL lease: refused once it lapsed (a
            // node cut off from the master, DDL going on without it).
            fenced: !guc::replaying(),
            ..Default::default()
        };
        let c = Client::connect_with(&addr, opts)?;
        if !guc::replaying() {
            wait_for_ddl(&c, &addr)?;
        }
        self.client = Some(c.clone());
        Ok(c)
    }

    /// Queue a write of command `seq` to storage table `table`.
    pub fn push(&mut self, seq: u32, table: &str, op: WriteOp) -> Result<(), FlushError> {
        if !op.kind.is_lock() && serializable_locking() {
            // A SERIALIZABLE write conflicts with SERIALIZABLE range reads of its
            // tablet (see `lock_ranges`).
            let info = self.table_info(table)?;
            let p = &info.tablets[info.tablet_index_for(&op.key)].partition;
            self.lock_range_key(seq, table, &p.start.clone(), p.end.clone().as_deref(), LockStrength::PredicateWrite)?;
        }
        self.push_op(seq, table, op, false)
    }

    fn table_info(&mut self, table: &str) -> Result<std::sync::Arc<pinax_proto::TableInfo>, FlushError> {
        let mk = |e| FlushError { table: table.to_string(), error: e };
        self.client().map_err(mk)?.table(table).map_err(mk)
    }

    /// Lock the range-lock key of the tablet `[key, end)` with `strength`,
    /// once per transaction (by key, not by the tablet's place in the list,
    /// which a split shifts). Sent as a range lock ([`WriteOp::range_lock`]):
    /// if the tablet has split by the time the lock is sent, each of its halves
    /// is locked (a lock that reached it before, the split copies to its right
    /// half).
    fn lock_range_key(&mut self, seq: u32, table: &str, key: &[u8], end: Option<&[u8]>, strength: LockStrength) -> Result<(), FlushError> {
        if self.range_locks.iter().any(|(t, k, s, _)| t == table && k.as_slice() == key && *s == strength) {
            return Ok(());
        }
        self.range_locks.push((table.to_string(), key.to_vec(), strength, seq));
        let read_lock = strength == LockStrength::Share;
        self.push_op(seq, table, WriteOp::range_lock(key.to_vec(), end, strength), read_lock)
    }

    /// SERIALIZABLE (`serializable_locking`): a scan of storage table `table` reads
    /// `[start, end)`. Lock it against SERIALIZABLE writers until commit: SHARE on
    /// the range-lock key of each tablet it overlaps, which conflicts with their
    /// PREDICATE WRITE there (a pending writer is waited for; one that committed after
    /// this read time makes the lock fail with 40001: the read may have missed its
    /// rows). Coarse (a tablet's whole range), so phantoms are impossible.
    pub fn lock_ranges(&mut self, table: &str, start: &[u8], end: Option<&[u8]>) -> Result<(), FlushError> {
        let info = self.table_info(table)?;
        for t in &info.tablets {
            let overlaps = end.is_none_or(|e| t.partition.start.as_slice() < e) && t.partition.end.as_ref().is_none_or(|pe| start < pe.as_slice());
            if overlaps {
                self.lock_range_key(READ_LOCK_SEQ, table, &t.partition.start, t.partition.end.as_deref(), LockStrength::Share)?;
            }
        }
        Ok(())
    }

    /// SERIALIZABLE: a row read by key (a point lookup, found or not, or a row
    /// fetched through a secondary index) is locked SHARE until commit: a concurrent
    /// writer of it waits for this transaction, and one that committed after the
    /// read time makes the lock fail with 40001.
    pub fn lock_read_row(&mut self, table: &str, key: &[u8]) -> Result<(), FlushError> {
        self.push_op(READ_LOCK_SEQ, table, WriteOp::row_lock(key.to_vec(), LockStrength::Share), true)
    }

    /// Queue `op`; `read_lock`: a SERIALIZABLE read lock (sent with
    /// `READ_LOCK_SEQ`, whatever command took it).
    fn push_op(&mut self, seq: u32, table: &str, op: WriteOp, read_lock: bool) -> Result<(), FlushError> {
        if guc::replaying() {
            // Replayed DDL (`ddl.rs`): the origin node wrote the rows and index entries.
            return Ok(());
        }
        self.writes += 1;
        self.buf_ops += 1;
        self.buf_bytes += op.key.len() + op.value.len() + 16;
        if read_lock {
            // Read locks go to one chunk per table at the front of the buffer: they
            // do not change data, so sending them first changes nothing, and they
            // do not split the statements' chunks into more requests.
            match self.buf.iter_mut().find(|c| c.read_locks && c.table == table) {
                Some(c) => c.ops.push(op),
                None => self.buf.insert(0, Chunk { seq: READ_LOCK_SEQ, table: table.to_string(), ops: vec![op], read_locks: true }),
            }
        } else {
            self.max_seq = Some(self.max_seq.map_or(seq, |m| m.max(seq)));
            match self.buf.last_mut() {
                Some(c) if c.seq == seq && c.table == table && !c.read_locks => c.ops.push(op),
                _ => self.buf.push(Chunk { seq, table: table.to_string(), ops: vec![op], read_locks: false }),
            }
        }
        if self.buf_ops >= FLUSH_OPS || self.buf_bytes >= crate::guc::write_buffer_size() {
            self.flush()?;
        }
        Ok(())
    }

    /// Nothing written in this transaction yet: no storage transaction, nothing
    /// buffered (a statement may then commit its own write at once).
    pub fn wrote_nothing(&self) -> bool {
        self.txn.is_none() && self.buf.is_empty() && self.pending_rollback.is_none()
    }

    pub fn has_buffered(&self) -> bool {
        !self.buf.is_empty()
    }

    /// The current statement's read time (new per statement under READ COMMITTED,
    /// one per transaction under REPEATABLE READ and SERIALIZABLE).
    fn statement_ht(&mut self) -> Result<ReadTime, ClientError> {
        // SAFETY: reads backend-global variables.
        let ident = unsafe {
            if pg_sys::XactIsoLevel >= pg_sys::XACT_REPEATABLE_READ as i32 {
                0
            } else {
                pg_sys::GetCurrentStatementStartTimestamp()
            }
        };
        if let Some(rt) = self.stmt {
            if rt.ident == ident {
                return Ok(rt);
            }
        }
        let ht = self.client()?.now().sub_micros(crate::guc::read_time_lag_micros());
        let rt = ReadTime { ident, ht, origin: ht, served: false };
        self.stmt = Some(rt);
        // A read restart met by an earlier statement (its error caught) says
        // nothing about this one.
        self.rerun_at = None;
        Ok(rt)
    }

    /// A read at the current read time returned rows: from now on a read restart
    /// cannot be taken in place.
    pub fn read_served(&mut self) {
        if let Some(rt) = &mut self.stmt {
            rt.served = true;
        }
    }

    /// A read met a value in its uncertainty window at `restart_ht`. If nothing was
    /// read at the current read time yet, move the read time there (keeping the
    /// window's start) and return true: the caller reads again. Otherwise the
    /// statement (READ COMMITTED, hooks/restart.rs) or the transaction must fail.
    pub fn read_restart(&mut self, restart_ht: HybridTime) -> bool {
        let Some(rt) = &mut self.stmt else { return false };
        if rt.served || restart_ht <= rt.ht {
            return false;
        }
        rt.ht = restart_ht;
        if let Some(t) = &mut self.txn {
            t.set_read_ht(restart_ht);
        }
        true
    }

    /// Whether reads may meet values in a clock-uncertainty window (the node
    /// said so in its latest answer; true before any).
    pub fn reads_uncertain(&self) -> bool {
        self.client.as_ref().is_none_or(|c| c.reads_uncertain())
    }

    /// Whether the read time (the transaction's, under REPEATABLE READ and
    /// SERIALIZABLE) is still free to move: nothing written or locked, and no read
    /// at it has returned rows. A plain SELECT may then run again at a later one.
    pub fn read_time_unused(&self) -> bool {
        self.txn.is_none() && self.buf.is_empty() && self.stmt.is_none_or(|rt| !rt.served)
    }

    /// A read met a value in its uncertainty window at `restart_ht` after rows
    /// were read at the current read time: the statement fails (40001), and if it
    /// runs again (hooks/restart.rs) it reads from `restart_ht`.
    pub fn read_restart_failed(&mut self, restart_ht: HybridTime) {
        self.rerun_at = Some(self.rerun_at.map_or(restart_ht, |h| h.max(restart_ht)));
    }

    /// A statement runs again after a write conflict or a read restart (its writes
    /// were rolled back with its subtransaction). After a read restart it reads
    /// from the restart time, in the same uncertainty window (which ends: a value
    /// written after the statement began lies beyond it); else at a new read time.
    pub fn restart_statement(&mut self) {
        self.stmt = match (self.stmt, self.rerun_at.take()) {
            (Some(rt), Some(ht)) => Some(ReadTime { ht: ht.max(rt.ht), served: false, ..rt }),
            _ => None,
        };
    }

    /// Send every buffered write (as part of a storage transaction). A write that
    /// meets another transaction's pending intent waits for it to end, as PostgreSQL
    /// waits for a row lock ([`wait_for`]).
    pub fn flush(&mut self) -> Result<(), FlushError> {
        self.flush_inner(true)
    }

    /// [`Backend::flush`], but meeting another transaction's pending intent fails at
    /// once (NOWAIT, SKIP LOCKED): the error's `blocker()` is set.
    pub fn flush_nowait(&mut self) -> Result<(), FlushError> {
        self.flush_inner(false)
    }

    fn flush_inner(&mut self, wait: bool) -> Result<(), FlushError> {
        self.send_pending_rollback()?;
        if self.buf.is_empty() {
            return Ok(());
        }
        let mk = |e: ClientError| FlushError { table: String::new(), error: e };
        let ht = self.statement_ht().map_err(mk)?.ht;
        let client = self.client().map_err(mk)?;
        let txn = self.txn.get_or_insert_with(|| client.begin());
        txn.set_read_ht(ht);
        let chunks = std::mem::take(&mut self.buf);
        self.buf_ops = 0;
        self.buf_bytes = 0;
        let me = txn.id();
        let mut started = None;
        for c in chunks {
            txn.set_seq(c.seq);
            let inserts = only_inserts(&c.ops);
            let res = txn.write_waiting(&c.table, c.ops, &mut |client, blocker| {
                if wait {
                    wait_for(client, blocker, Some(me), &mut started).map(|aborted| aborted || inserts)
                } else {
                    Ok(false)
                }
            });
            if let Err(e) = res {
                return Err(FlushError { table: c.table, error: e });
            }
        }
        Ok(())
    }

    /// Delete every row of storage table `table` as command `seq`, in its tablets
    /// (`Txn::delete_all`: one intent per tablet), within the storage transaction
    /// (begun here), at the statement's read time. Returns how many rows it
    /// deleted. A pending writer met is waited for; a conflict with a commit after
    /// the read time is returned (the READ COMMITTED wrapper runs the statement
    /// again at a new read time).
    pub fn delete_all(&mut self, seq: u32, table: &str) -> Result<u64, FlushError> {
        let mk = |e: ClientError| FlushError { table: table.to_string(), error: e };
        self.statement_txn(seq, table)?;
        self.writes += 1;
        self.max_seq = Some(self.max_seq.map_or(seq, |m| m.max(seq)));
        let txn = self.txn.as_mut().expect("begun by statement_txn");
        let me = txn.id();
        let mut started = None;
        txn.delete_all(table, &mut |client, blocker| wait_for(client, blocker, Some(me), &mut started)).map_err(mk)
    }

    /// The storage transaction (begun here), set for command `seq` at the
    /// statement's read time, after the buffered writes were sent.
    fn statement_txn(&mut self, seq: u32, table: &str) -> Result<&mut Txn, FlushError> {
        self.flush()?;
        let mk = |e: ClientError| FlushError { table: table.to_string(), error: e };
        let ht = self.statement_ht().map_err(mk)?.ht;
        let client = self.client().map_err(mk)?;
        let txn = self.txn.get_or_insert_with(|| client.begin());
        txn.set_read_ht(ht);
        txn.set_seq(seq);
        Ok(txn)
    }

    /// Write `op` (a blind patch or a delete of one row, see `write_by_key`) as
    /// command `seq` of the storage transaction (begun here) only if the row is live
    /// for it (`Txn::write_if_live`: READ COMMITTED, the newest committed version or
    /// the transaction's own writes). A pending writer met is waited for, and the
    /// write sent again however it ended (it reads nothing that could be outdated).
    pub fn write_if_live(&mut self, seq: u32, table: &str, op: WriteOp) -> Result<LiveWrite, FlushError> {
        let mk = |e: ClientError| FlushError { table: table.to_string(), error: e };
        let txn = self.statement_txn(seq, table)?;
        let me = txn.id();
        let mut started = None;
        let outcome = txn.write_if_live(table, op, &mut |client, blocker| wait_for(client, blocker, Some(me), &mut started).map(|_| true)).map_err(mk)?;
        if outcome == LiveWrite::Applied {
            self.writes += 1;
            self.max_seq = Some(self.max_seq.map_or(seq, |m| m.max(seq)));
        }
        Ok(outcome)
    }

    /// Where a read with a snapshot at command `curcid` reads: after flushing, at the
    /// statement's read time, seeing own writes of commands below `curcid`.
    pub fn read_point(&mut self, curcid: u32) -> Result<ReadPoint, FlushError> {
        self.flush()?;
        let rt = self.statement_ht().map_err(|e| FlushError { table: String::new(), error: e })?;
        Ok(match &mut self.txn {
            Some(t) => {
                t.set_read_ht(rt.ht);
                ReadPoint { uncertain_from: rt.origin, ..t.read_point(curcid) }
            }
            None => ReadPoint { read_ht: rt.ht, txn: None, uncertain_from: rt.origin },
        })
    }

    /// A speculative insertion (INSERT ... ON CONFLICT) of command `cid` is under
    /// way: `spec`; the rows an earlier command's insertions wrote are forgotten.
    pub fn begin_speculative(&mut self, cid: u32, spec: Speculative) {
        self.spec = Some(spec);
        self.begin_upsert(cid);
    }

    /// A speculative insertion lost to a conflict on `key` (the row key or the
    /// unique entry's; None: an exclusion constraint's) that its look-up had not
    /// found. A lost race with a concurrent inserter is retried once: the look-up
    /// then finds the winner's row, and the next loss, if any, is on another key.
    /// Err once it lost SPEC_LOSSES_MAX times in a row on one key.
    pub fn lost_speculation(&mut self, key: Option<Vec<u8>>) -> Result<(), u32> {
        if self.spec_losses.1 != key {
            self.spec_losses = (0, key);
        }
        self.spec_losses.0 += 1;
        if self.spec_losses.0 >= SPEC_LOSSES_MAX {
            self.spec_losses = (0, None);
            return Err(SPEC_LOSSES_MAX);
        }
        Ok(())
    }

    /// A speculative insertion won.
    pub fn speculation_settled(&mut self) {
        self.spec_losses = (0, None);
    }

    /// Row `key` of relation `relid`, which has an exclusion constraint, was
    /// written by command `cid` under `tid`. PostgreSQL's exclusion check looks
    /// the row up with a dirty snapshot and skips the entry whose TID is the
    /// row's own: the look-up must hand that row out under that TID
    /// (`excl_row_tid`), or the row conflicts with itself.
    pub fn note_excl_row(&mut self, cid: u32, relid: u32, key: &[u8], tid: pg_sys::ItemPointerData) {
        if self.excl_rows.0 != cid {
            self.excl_rows.0 = cid;
            self.excl_rows.1.clear();
        }
        self.excl_rows.1.insert((relid, key.to_vec()), tid);
    }

    /// The TID row `key` of `relid` (a table with an exclusion constraint) was
    /// written under by the command writing rows now, if it wrote it.
    pub fn excl_row_tid(&self, relid: u32, key: &[u8]) -> Option<pg_sys::ItemPointerData> {
        if self.excl_rows.1.is_empty() || self.excl_rows.0 != self.last_cid {
            return None;
        }
        self.excl_rows.1.get(&(relid, key.to_vec())).copied()
    }

    /// Command `cid` runs INSERT ... ON CONFLICT DO UPDATE: the rows it updates are
    /// remembered as the ones it inserts are (`spec_rows`), so that meeting one of
    /// them again is "a second time" (21000), also before any insertion of it.
    pub fn begin_upsert(&mut self, cid: u32) {
        if self.spec_cid != Some(cid) {
            self.spec_cid = Some(cid);
            self.spec_rows.clear();
        }
    }

    /// Where a read that must see the newest committed rows reads (PostgreSQL's
    /// dirty snapshot: ON CONFLICT's and unique checks' look-ups, which must find
    /// a row committed after the statement's read time that a write then met):
    /// after flushing, at the serving tablet's present time, seeing every own write.
    pub fn read_point_latest(&mut self, curcid: u32) -> Result<ReadPoint, FlushError> {
        self.flush()?;
        let txn = self.txn.as_ref().and_then(|t| t.read_point(curcid).txn);
        Ok(ReadPoint { read_ht: HybridTime::INVALID, txn, uncertain_from: HybridTime::INVALID })
    }

    /// A subtransaction starts (SAVEPOINT, an exception block): writes of command
    /// `current_cid` and later belong to it, unless that command id was already
    /// written before it started. Earlier writes are sent now, so that their errors
    /// are not taken for the subtransaction's.
    pub fn start_subxact(&mut self, subid: u32, current_cid: u32) -> Result<(), FlushError> {
        let from = match self.max_seq {
            Some(m) => current_cid.max(m.saturating_add(1)),
            None => current_cid,
        };
        self.subxacts.push((subid, from));
        self.flush()
    }

    /// A subtransaction commits (RELEASE, end of an exception block): its writes
    /// become the parent's. They were sent by the caller (PRE_COMMIT_SUB), so their
    /// errors were raised inside it.
    pub fn commit_subxact(&mut self, subid: u32) {
        self.subxacts.retain(|(id, _)| *id < subid);
    }

    /// A subtransaction aborts (ROLLBACK TO SAVEPOINT, an exception caught): undo
    /// its writes and locks (and its children's), in the buffer and in storage.
    /// Never raises: a rollback storage does not take now is retried before the
    /// next storage operation, and the transaction cannot commit without it.
    pub fn abort_subxact(&mut self, subid: u32) {
        self.spec = None;
        self.unchanged.clear();
        let Some(pos) = self.subxacts.iter().position(|(id, _)| *id == subid) else { return };
        let from = self.subxacts[pos].1;
        self.subxacts.truncate(pos);
        self.buf.retain(|c| c.seq < from);
        self.buf_ops = self.buf.iter().map(|c| c.ops.len()).sum();
        self.buf_bytes = self.buf.iter().flat_map(|c| &c.ops).map(|op| op.key.len() + op.value.len() + 16).sum();
        self.tids.unsupersede_from(from);
        self.spec_rows.retain(|_, cid| *cid < from);
        self.range_locks.retain(|(_, _, _, seq)| *seq < from);
        self.max_seq = self.max_seq.filter(|_| from > 0).map(|m| m.min(from - 1));
        self.pending_rollback = Some(self.pending_rollback.map_or(from, |p| p.min(from)));
        // Best effort now (releases the subtransaction's row locks at once).
        let _ = self.send_pending_rollback();
    }

    fn send_pending_rollback(&mut self) -> Result<(), FlushError> {
        let Some(from) = self.pending_rollback else { return Ok(()) };
        if let Some(txn) = &mut self.txn {
            txn.rollback_to(from).map_err(|e| FlushError { table: String::new(), error: e })?;
        }
        self.pending_rollback = None;
        Ok(())
    }

    /// PRE_COMMIT: make every write durable, or fail (the transaction then aborts).
    pub fn pre_commit(&mut self) -> Result<(), FlushError> {
        self.send_pending_rollback()?;
        if self.txn.is_none() && !self.buf.is_empty() && self.buf.iter().all(|c| c.read_locks) {
            // Only SERIALIZABLE read locks, never sent (an autocommit SELECT): a
            // transaction that wrote nothing read one snapshot, which is serializable
            // as it is (as for READ ONLY ones); locks taken at commit would be let go
            // at once.
            self.buf.clear();
            self.buf_ops = 0;
            self.buf_bytes = 0;
            return Ok(());
        }
        if self.write_fast_path()? {
            return Ok(());
        }
        self.flush()?;
        if let Some(txn) = self.txn.take() {
            txn.commit().map_err(|e| FlushError { table: String::new(), error: e })?;
        }
        Ok(())
    }

    /// The autocommit fast path: a transaction that never had to flush, whose
    /// buffered writes all go to one storage table, commits them in one
    /// `Client::write` (one tablet: one RPC, no intents; several: a storage
    /// transaction aborted if it fails), atomically checked against commits after
    /// the statement's read time. Returns false (nothing done) when it does not apply.
    fn write_fast_path(&mut self) -> Result<bool, FlushError> {
        if self.txn.is_some() || self.buf.is_empty() || !self.buf.iter().all(|c| c.table == self.buf[0].table) {
            return Ok(false);
        }
        let table = self.buf[0].table.clone();
        let ops: Vec<WriteOp> = std::mem::take(&mut self.buf).into_iter().flat_map(|c| c.ops).collect();
        self.buf_ops = 0;
        self.buf_bytes = 0;
        self.write_now(&table, &ops, false)?;
        Ok(true)
    }

    /// Commit `ops` to storage table `table` at once, outside any storage
    /// transaction (`Client::write_at`: one tablet, one RPC; several, a storage
    /// transaction aborted if it fails), checked against commits after the
    /// statement's read time. A pending writer met is waited for, and the write
    /// sent again (inserts whatever it did, others if it aborted).
    /// `blind`: the written values do not depend on what the statement read (an
    /// upsert's row, `insert_at_once`): not checked against commits after the read
    /// time, and sent again after any pending writer met ended.
    pub fn write_now(&mut self, table: &str, ops: &[WriteOp], blind: bool) -> Result<(), FlushError> {
        let mk = |e| FlushError { table: table.to_string(), error: e };
        let client = self.client().map_err(mk)?;
        // Values computed from reads (UPDATE t SET v = v + 1) conflict with
        // commits after the read time: no lost update. (No read: no check.)
        let read_ht = if blind { None } else { self.stmt.map(|rt| rt.ht) };
        // Sent again after a committed writer too when nothing read decides it.
        let again = blind || only_inserts(ops);
        let mut started = None;
        loop {
            // One tablet's write is atomic; several go through a transaction
            // that is aborted when it fails: retrying is safe either way.
            match client.write_at(table, ops, read_ht) {
                Ok(_) => return Ok(()),
                Err(e) => match e.blocker() {
                    Some(b) if wait_for(&client, b, None, &mut started).map_err(mk)? || again => continue,
                    _ => return Err(mk(e)),
                },
            }
        }
    }

    /// A restartable READ COMMITTED statement ended (hooks/restart.rs): send its
    /// writes now, so that a conflict is known while it can still run again.
    /// `whole_transaction`: nothing else will run in this transaction before it
    /// commits, and nothing was written before, so the fast path may commit the
    /// writes at once; otherwise they go to the storage transaction.
    pub fn finish_statement(&mut self, whole_transaction: bool) -> Result<(), FlushError> {
        self.send_pending_rollback()?;
        if whole_transaction && self.write_fast_path()? {
            return Ok(());
        }
        self.flush()
    }

    /// Forget everything transaction-scoped; abort an open storage transaction.
    pub fn end_of_xact(&mut self) {
        self.buf.clear();
        self.buf_ops = 0;
        self.buf_bytes = 0;
        if let Some(txn) = self.txn.take() {
            // Dropping an open transaction aborts it (best effort).
            let _ = txn.abort();
        }
        self.stmt = None;
        self.rerun_at = None;
        self.tids.clear();
        self.pending_create = None;
        self.writes = 0;
        self.max_seq = None;
        self.subxacts.clear();
        self.pending_rollback = None;
        self.unchanged.clear();
        self.spec = None;
        self.spec_cid = None;
        self.spec_rows.clear();
        self.spec_losses = (0, None);
        self.excl_rows.1.clear();
        self.insert_at_once = None;
        self.range_locks.clear();
    }
}

/// The statement number SERIALIZABLE read locks are written with: below every
/// subtransaction's, so that rolling one back keeps them (PostgreSQL keeps the
/// predicate locks of a rolled-back subtransaction too: its reads happened).
const READ_LOCK_SEQ: u32 = 0;

/// Whether this transaction is SERIALIZABLE and not READ ONLY: its reads lock what
/// they read (rows read by key, ranges scanned) until commit, so that a write
/// skew or a phantom between SERIALIZABLE transactions becomes a wait, a deadlock
/// (40P01) or a serialization failure (40001), never an anomaly. SERIALIZABLE READ
/// ONLY transactions read their snapshot without locks.
pub fn serializable_locking() -> bool {
    // SAFETY: reads backend-global variables.
    unsafe { pg_sys::XactIsoLevel == pg_sys::XACT_SERIALIZABLE as i32 && !pg_sys::XactReadOnly }
}

/// Wait for transaction `blocker` (holding an intent a write of `me` met) to end, as
/// PostgreSQL waits for a row lock: cancel and `statement_timeout` interrupt the
/// wait, `lock_timeout` ends it with 55P03, and a wait that closes a cycle of
/// waiters fails with `Deadlock` (40P01). `started`: when this statement began
/// waiting. Returns whether to retry the write: only if the blocker aborted. One
/// that committed may have written what this statement, reading before that, did
/// not see (a foreign-key child of the row it deletes), and nothing re-checks the
/// statement's reads yet (PostgreSQL's EvalPlanQual): the conflict (40001) stands.
pub fn wait_for(
    client: &Client,
    blocker: pinax_common::TxnId,
    me: Option<pinax_common::TxnId>,
    started: &mut Option<std::time::Instant>,
) -> Result<bool, ClientError> {
    let start = *started.get_or_insert_with(std::time::Instant::now);
    loop {
        pg_sys::check_for_interrupts!();
        // SAFETY: reads a GUC variable.
        let lock_timeout = unsafe { pg_sys::LockTimeout };
        let mut slice = WAIT_SLICE_MS;
        if lock_timeout > 0 {
            let left = (lock_timeout as u128).saturating_sub(start.elapsed().as_millis());
            if left == 0 {
                crate::error::raise_with(pgrx::PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE, "canceling statement due to lock timeout", None);
            }
            slice = slice.min(left as u32);
        }
        // Shown as wait_event_type/wait_event "Extension" in pg_stat_activity while
        // the backend waits (PostgreSQL shows "Lock"/"transactionid" for a row lock).
        // SAFETY: my_wait_event_info always points at a valid slot (pgstat_report_wait_start).
        unsafe { *pg_sys::my_wait_event_info = pg_sys::PG_WAIT_EXTENSION };
        let res = client.wait_txn(blocker, me, slice);
        // SAFETY: as above (pgstat_report_wait_end).
        unsafe { *pg_sys::my_wait_event_info = 0 };
        if let Some(committed) = res? {
            return Ok(!committed);
        }
    }
}

/// Whether a batch only inserts (insert-if-absent: rows and unique index entries).
/// Such a batch may be retried after the transaction it waited for committed: the
/// insert is checked against the latest committed state, not the statement's reads,
/// so the retry reports the duplicate key (23505) or succeeds if that transaction
/// deleted the key, as PostgreSQL does.
fn only_inserts(ops: &[WriteOp]) -> bool {
    ops.iter().all(|o| o.kind == pinax_proto::WriteOpKind::Insert)
}

/// Longest single wait before checking for interrupts again.
const WAIT_SLICE_MS: u32 = 250;

/// How long a session waits, as it first uses its node, for the node to apply
/// the DDL other nodes ran while it was down.
const DDL_CATCH_UP_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Wait until the node has applied the cluster's DDL log since it started
/// (`Request::DdlReady`): a session must not plan against a catalog that other
/// nodes changed while this one was down. Fails (57P03) after
/// [`DDL_CATCH_UP_WAIT`].
fn wait_for_ddl(c: &Client, addr: &str) -> Result<(), ClientError> {
    let started = std::time::Instant::now();
    loop {
        match c.call(pinax_proto::Request::DdlReady)? {
            pinax_proto::Response::Ready(false) if started.elapsed() < DDL_CATCH_UP_WAIT => std::thread::sleep(std::time::Duration::from_millis(50)),
            pinax_proto::Response::Ready(false) => {
                return Err(ClientError::Unavailable {
                    addr: addr.to_string(),
                    message: "the node has not applied the schema changes other nodes made while it was down yet".into(),
                })
            }
            _ => return Ok(()),
        }
    }
}
