//! pinax-proto: the wire. Every message between a client (SQL backend, tool, test)
//! and a node, and between nodes, is defined here; so are the row-operation types
//! the lower layers share with the wire.
//!
//! Framing (see [`frame`]): `[len: u32 BE][crc32c(payload): u32 BE][payload]`, payload =
//! bincode (standard config) of a [`RequestEnvelope`] or [`ResponseEnvelope`]. Every
//! envelope carries the sender's hybrid time (clock propagation). A frame over
//! [`frame::MAX_FRAME`] or with a bad checksum is rejected without decoding.
//!
//! Decoding depth is bounded whatever a peer sends: the only recursion is a
//! boxed inner request (`Forwarded`, `CreateTxnAndWrite::write`), decoded by
//! [`nested_request`], which refuses more than [`MAX_NESTING`] levels (a frame of
//! a million nested `Forwarded` would otherwise overflow the decoding thread's
//! stack and kill the node). Batching happens inside messages: one `Write`
//! carries many row operations.
//!
//! Errors travel as [`RpcError`] with a stable [`pinax_common::ErrorCode`].
//! Depends only on `pinax-common`. Start at [`Request`].

pub mod filter;
pub mod frame;
pub mod stream;
pub mod tls;
pub mod types;
pub mod wire;

pub use filter::*;
pub use types::*;

use pinax_common::{ErrorCode, HybridTime, TableId, TabletId, TxnId};
use serde::{Deserialize, Serialize};

/// Most requests nested in a request (a forwarded `CreateTxnAndWrite` holds two).
pub const MAX_NESTING: u32 = 4;

thread_local! {
    /// How deep in nested requests this thread's decoder is.
    static NESTING: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Decodes a request nested in another, refusing more than [`MAX_NESTING`] levels.
fn nested_request<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Box<Request>, D::Error> {
    struct Level;
    impl Drop for Level {
        fn drop(&mut self) {
            NESTING.with(|n| n.set(n.get() - 1));
        }
    }
    let depth = NESTING.with(|n| {
        n.set(n.get() + 1);
        n.get()
    });
    let _level = Level;
    if depth > MAX_NESTING {
        return Err(serde::de::Error::custom(format!("requests nested more than {MAX_NESTING} deep")));
    }
    Request::deserialize(d).map(Box::new)
}

/// How a table is split into tablets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Sharding {
    /// Keys start with a 16-bit hash; the hash space is cut into `tablets` equal parts.
    Hash { tablets: u32 },
    /// Keys in order; tablets cut at these (sorted) user keys.
    Range { split_points: Vec<Vec<u8>> },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TabletInfo {
    pub id: TabletId,
    pub partition: Partition,
    /// RPC address of the node expected to lead it (`host:port`): the leader at
    /// creation. Clients follow NotLeader answers from there and cache what they learn.
    pub leader: String,
    /// RPC addresses of every replica (the leader's included).
    pub replicas: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableInfo {
    pub id: TableId,
    pub name: String,
    pub sharding: Sharding,
    /// Sorted by partition start.
    pub tablets: Vec<TabletInfo>,
    pub options: TableOptions,
}

/// A leader's figures for one tablet, sent to the master with `RegisterNode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TabletReport {
    pub tablet: TabletId,
    /// Approximate bytes on disk (flushed data).
    pub bytes: u64,
    /// Requests served a second since the previous report (0 for the first).
    pub requests_per_sec: u64,
}

/// A table's settings that are not its layout (`CREATE TABLE ... WITH
/// (pinax.auto_split = off)`, `ALTER TABLE ... SET (...)`; a SQL table's
/// indexes get the table's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableOptions {
    /// Whether the master splits the table's tablets by itself (by size or
    /// load); manual splits are allowed either way.
    pub auto_split: bool,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions { auto_split: true }
    }
}

impl TableInfo {
    /// Index of the tablet owning `key`.
    pub fn tablet_index_for(&self, key: &[u8]) -> usize {
        // tablets are sorted and cover the key space without gaps
        self.tablets.partition_point(|t| t.partition.start.as_slice() <= key).saturating_sub(1)
    }
}

/// Read position of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadPoint {
    /// `HybridTime::INVALID` = "now" at the serving tablet (returned in the response).
    pub read_ht: HybridTime,
    /// The reading transaction and its statement number.
    pub txn: Option<(TxnId, u32)>,
    /// Where the read's uncertainty window starts (`HybridTime::INVALID`: no
    /// window): its first read time, kept when the read restarts at a later one.
    /// The serving node reads with the window `(read_ht, uncertain_from + max
    /// clock skew]`: another transaction's value in it may have been written
    /// before the read began on a clock that runs ahead, and the read fails with
    /// `ReadRestart` (the error's `restart_ht` says when to read again).
    pub uncertain_from: HybridTime,
}

impl ReadPoint {
    /// "Now" at the serving tablet, no transaction.
    pub const LATEST: ReadPoint = ReadPoint { read_ht: HybridTime::INVALID, txn: None, uncertain_from: HybridTime::INVALID };
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStatus {
    pub node_id: u64,
    pub rpc_addr: String,
    pub data_dir: String,
    pub tables: Vec<TableInfo>,
    pub status_tablet_records: u64,
    pub hybrid_time: HybridTime,
    /// The cluster's live nodes (id, RPC address) as the master sees them.
    pub nodes: Vec<(u64, String)>,
    /// The tablets this node holds a replica of (its own view, not the
    /// catalog's), in id order.
    pub replicas: Vec<TabletId>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    Ping,
    /// Current hybrid time of the node.
    Now,
    Status,
    CreateTable {
        name: String,
        sharding: Sharding,
        if_not_exists: bool,
        options: TableOptions,
    },
    DropTable {
        name: String,
        if_exists: bool,
    },
    GetTable {
        name: String,
    },
    /// Write to one tablet. Without `txn`: the single-tablet fast path (committed at
    /// once; `read_ht`, if set, makes commits after it a conflict). With `txn`:
    /// provisional records of that transaction's statement `seq`, at its read time.
    /// `request`: the client's id of this write (random, the same when the client
    /// sends it again; 0: none): a replica that applied it answers without writing.
    Write {
        tablet: TabletId,
        ops: Vec<WriteOp>,
        read_ht: Option<HybridTime>,
        txn: Option<(TxnId, u32)>,
        request: u128,
    },
    Read {
        tablet: TabletId,
        key: Vec<u8>,
        at: ReadPoint,
    },
    Scan {
        tablet: TabletId,
        spec: ScanSpec,
        at: ReadPoint,
    },
    CreateTxn {
        txn: TxnId,
    },
    Heartbeat {
        txn: TxnId,
    },
    CommitTxn {
        txn: TxnId,
        participants: Vec<TabletId>,
    },
    AbortTxn {
        txn: TxnId,
        participants: Vec<TabletId>,
    },
    TxnStatus {
        txn: TxnId,
        read_ht: HybridTime,
    },
    /// Roll transaction `txn` back to its statement `from_seq` on one tablet (ROLLBACK
    /// TO SAVEPOINT): its intents of statements `from_seq` and later are dropped.
    RollbackTxn {
        tablet: TabletId,
        txn: TxnId,
        from_seq: u32,
    },
    /// Wait (at most `timeout_ms`) until transaction `txn` is committed or aborted.
    /// `waiter`: the transaction that waits, for deadlock detection (a wait that
    /// would close a cycle of waiters fails with `Deadlock`).
    WaitTxn {
        txn: TxnId,
        waiter: Option<TxnId>,
        timeout_ms: u32,
    },
    /// To `txn`'s home node (its client's node, the first 8 bytes of its id):
    /// which transaction `txn` waits for now, if any (that node sees every
    /// `WaitTxn` of `txn`). Deadlock detection follows these edges from node to
    /// node.
    WaitsFor {
        txn: TxnId,
    },
    /// A Raft message (`pinax_raft::network`) for node `target`'s replica of group
    /// (tablet) `group`: `kind` says which RPC, `body` is its bincode. A node whose
    /// id is not `target` refuses it (a node restarted with a new id at an old
    /// address must not answer for the old one).
    Raft {
        group: u64,
        target: u64,
        kind: u8,
        body: Vec<u8>,
    },
    /// To the master: node `node_id` (0: a new node, which gets an id) serves at
    /// `addr`, and leads these tablets' groups. Nodes send it every second; it is
    /// how the master knows who is alive and where leaders are. Every few
    /// seconds (else empty) `reports` gives the size and load of each tablet it
    /// leads: what automatic splitting goes by.
    RegisterNode {
        node_id: u64,
        addr: String,
        leading: Vec<TabletId>,
        reports: Vec<TabletReport>,
    },
    /// Create this node's replica of `tablet` in a group of `members` (node id, RPC
    /// address). The `bootstrap` replica makes the members the group's first
    /// configuration. Idempotent.
    CreateReplica {
        tablet: TabletInfo,
        members: Vec<(u64, String)>,
        bootstrap: bool,
    },
    /// Delete this node's replica of `tablet` (its table was dropped). Idempotent.
    DropReplica {
        tablet: TabletId,
    },
    /// To the master: where tablet `tablet` is (`Tablet`). A tablet that split
    /// answers `Tablets` (where its keys are now); a half of a split that the
    /// catalog does not list yet fails with `Unavailable` (retryable), not
    /// `TabletNotFound`, which means the tablet is gone (its table dropped).
    LocateTablet {
        tablet: TabletId,
    },
    /// To a tablet's leader: make node `add` (id, RPC address; its replica already
    /// created) a voter, in place of node `remove` if set. Returns when the new
    /// membership is committed. Answers `Members`: the group's voters after the
    /// change (`add` a voter already: nothing changed, the voters as they are;
    /// the caller's record lagged the group and is corrected from them).
    ChangeReplicas {
        tablet: TabletId,
        add: (u64, String),
        remove: Option<u64>,
    },
    /// To a tablet's leader: apply (`commit_ht` set) or remove the intents of a
    /// decided transaction (sent by its status tablet's node). Idempotent.
    ResolveTxn {
        tablet: TabletId,
        txn: TxnId,
        commit_ht: Option<HybridTime>,
    },
    /// Tests only (a node started with `--fault-injection`): from now on, requests
    /// from this node to these RPC addresses fail as if they were unreachable (Raft
    /// messages included), emulating a network partition. Empty: heal.
    InjectFaults {
        unreachable: Vec<String>,
    },
    /// To the master: make `name` another name of existing table `existing` (a SQL
    /// node's name for a table another node's PostgreSQL created, see
    /// [`DdlEntry`]). Names are weak: dropping one drops only it, dropping the
    /// table's own name drops the table and all its names. Idempotent.
    AddTableName {
        name: String,
        existing: String,
    },
    /// From a SQL node's PostgreSQL (to any node, forwarded to the master): append
    /// this DDL to the cluster's DDL log, then have every other live node with
    /// PostgreSQL apply the log through it. Answers `DdlPublished`.
    PublishDdl {
        entry: DdlEntry,
    },
    /// The cluster's DDL log after sequence number `after` (at most `max` entries).
    ReadDdl {
        after: u64,
        max: u32,
    },
    /// To a node: apply the DDL log through `upto` to this node's PostgreSQL (waits
    /// at most a few seconds; fails with `Unavailable` if it could not).
    ApplyDdl {
        upto: u64,
    },
    /// To the master: an operation on cluster-wide sequence `name` (every SQL node's
    /// PostgreSQL takes its values there; see pg/ext `sequence.rs`).
    Sequence {
        name: String,
        op: SequenceOp,
    },
    /// A request on a transaction's status record (`CreateTxn`, `Heartbeat`,
    /// `CommitTxn`, `AbortTxn`, `TxnStatus`, `WaitTxn`) passed on by the node that
    /// received it to the leader of the record's status tablet, or a catalog
    /// request (and `Status`) passed on to the master's leader: handled there,
    /// or answered `NotLeader` (never passed on again).
    Forwarded(#[serde(deserialize_with = "nested_request")] Box<Request>),
    /// To the master: node `node`'s status tablet, created (and placed with its
    /// first replica on that node) if it does not exist yet. Answers `Tablet`.
    EnsureStatusTablet {
        node: u64,
    },
    /// To a tablet's leader (from the master, evening out leaders): hand the
    /// leadership to voter `to` (node id), which must have caught up. Answers
    /// `Done` once `to` was told to `Campaign`; the move completes about a
    /// follower lease later (`pinax_raft::group` docs).
    TransferLeader {
        tablet: TabletId,
        to: u64,
    },
    /// To a tablet's follower whose leader hands over to it: start an election
    /// once the other followers' leases ran out.
    Campaign {
        tablet: TabletId,
    },
    /// A transaction's first write, sent to its home node (the status node) when
    /// that node also leads the tablet written: `CreateTxn { txn }`, then, once the
    /// record exists, `write` (a `Write` or `WriteIntentIfLive` of `txn`). One round trip instead of two.
    /// Fails as `CreateTxn` would when the record could not be created (nothing was
    /// written); otherwise answers `TxnWritten` with the write's own outcome.
    CreateTxnAndWrite {
        txn: TxnId,
        #[serde(deserialize_with = "nested_request")]
        write: Box<Request>,
    },
    /// A single-row write outside any transaction (committed at once, as `Write`
    /// without `txn`) that takes effect only if the row is live: `op` is a `Delete`
    /// or a `Patch`. The SQL layer's UPDATE/DELETE by primary key without reading
    /// the row first. `full`: the patch's row is the whole row as read at
    /// `read_ht` (commits after it are a conflict; stored whole when nothing else
    /// is in the way); otherwise it holds only the columns it assigns (a blind
    /// patch; over a row already carrying two patches, folded with them into the
    /// whole row when it carries the table's layout and nothing else is in the
    /// way, else refused with `NeedsRow`: reads merge every layer). Answers `WrittenIfLive`.
    WriteIfLive {
        tablet: TabletId,
        op: WriteOp,
        read_ht: Option<HybridTime>,
        full: bool,
        request: u128,
    },
    /// `WriteIfLive` inside transaction `txn`, as its statement `seq`: a blind patch
    /// or a delete written as an intent if the row is live for the transaction (its
    /// own earlier writes, else the newest committed version: READ COMMITTED). A
    /// patch over a row the transaction wrote itself, or carrying two patches it
    /// cannot fold (as `WriteIfLive`), answers `NeedsRow` (nothing written).
    /// Answers `WrittenIfLive`.
    WriteIntentIfLive {
        tablet: TabletId,
        op: WriteOp,
        txn: TxnId,
        seq: u32,
        request: u128,
    },
    /// Delete every row of a tablet as transaction `txn`'s statement `seq`, which
    /// reads at `read_ht` (`DELETE FROM t` with no condition, done in the tablets:
    /// one intent per tablet, a whole-tablet tombstone once applied). Conflicts as
    /// a write of every row would; the transaction must not have written to the
    /// tablet before. Answers `DeletedAll` with the number of rows live at `read_ht`.
    DeleteAll {
        tablet: TabletId,
        txn: TxnId,
        seq: u32,
        read_ht: HybridTime,
    },
    /// From a process without a certificate (the only request it may make): a
    /// node joining with `token` (`pinax cert create-join-token`) asks for a
    /// certificate for `csr` (PEM; its names are the joining node's addresses).
    /// A node holding the CA key checks the token (unexpired, unused, of this
    /// CA) and answers `Joined`; one without asks the other live nodes
    /// (`forwarded`: never passed on again).
    JoinCluster {
        token: String,
        csr: String,
        forwarded: bool,
    },
    /// To a tablet's leader: every node of its Raft group's membership (voters
    /// and learners), once a round with a quorum confirmed the leadership.
    /// Answers `Members` (addresses as the group knows them). A node drops a
    /// replica the catalog no longer places there only if its node is not among
    /// them: the group may count on a replica the catalog lost track of.
    GroupMembers {
        tablet: TabletId,
    },
    /// To a node holding a replica of `tablet`: its replica's figures as that
    /// replica knows them. Answers `TabletStats`.
    TabletStats {
        tablet: TabletId,
    },
    /// From a SQL node's PostgreSQL, before a DDL statement on existing
    /// relations runs (to its node, which passes it on to the master): take
    /// these PostgreSQL table locks in every other live SQL node's PostgreSQL,
    /// for the DDL's transaction `lock` (see [`DdlLock`]). Answers `Now`: the
    /// highest clock reading of the nodes once they held the locks (every write
    /// their sessions made before is older). Fails if a node could not take them
    /// in time; what was taken is let go.
    LockDdl {
        lock: DdlLock,
    },
    /// The transaction of DDL lock `lock` ended without logging DDL that names
    /// it (to its node, passed on to the master, which passes it on to every
    /// node): the nodes let its locks go.
    UnlockDdl {
        lock: u128,
    },
    /// From the master to a node: hold `lock` in this node's PostgreSQL (a
    /// session of its own, in a transaction that ends when the DDL log entry
    /// naming the lock is applied in it, or at `ReleaseDdlLock`). Answers `Now`.
    HoldDdlLock {
        lock: DdlLock,
    },
    /// From the master to a node: let DDL lock `lock` go (idempotent).
    ReleaseDdlLock {
        lock: u128,
    },
    /// To the origin node of DDL lock `lock`: whether the PostgreSQL backend that
    /// took it still runs its transaction. Answers `Held`. A node holding the
    /// lock asks every second, and lets it go when the answer is no (or the
    /// origin stayed out of reach), so a backend or node that died does not
    /// leave tables locked cluster-wide.
    DdlLockHeld {
        lock: u128,
    },
    /// From a SQL node's PostgreSQL, as a session starts: whether the node has
    /// applied the cluster's DDL log since it started (a node that was down
    /// while other nodes changed the schema must not plan against its old
    /// catalog). Answers `Ready`.
    DdlReady,
    /// This node's SQL lease (from this node's PostgreSQL): until when its
    /// backends' requests may run (see `RequestEnvelope::fence`). Answers
    /// `Lease`.
    SqlLease,
    /// To the leader of `tablet`: split it in two at user key `at` (none: at
    /// its approximate middle by size), the halves becoming tablets
    /// `children` (left: keys below the split key) with the same replicas. One
    /// Raft entry of the tablet's group, applied by every replica; the tablet
    /// then refuses every request (`TabletSplit`). Idempotent: a tablet split
    /// into the same children answers as the first time. Answers `SplitDone`.
    SplitReplica {
        tablet: TabletId,
        children: [TabletId; 2],
        at: Option<Vec<u8>>,
    },
    /// To the master: split tablet `tablet` in two at user key `at` (none: at
    /// its approximate middle by size, as its leader finds it). The master
    /// records the split (allocating the halves' ids), has the tablet's leader
    /// split it (`SplitReplica`), then lists the two halves in the table in
    /// its place, in one catalog write. Answers `Split` once the catalog lists
    /// them; the parent's replicas are dropped later (the master's tick).
    /// Idempotent: a tablet that split already answers with its halves.
    /// Tablets of the catalog's own tables (status tablets, the master) do
    /// not split.
    SplitTablet {
        tablet: TabletId,
        at: Option<Vec<u8>>,
    },
    /// To the master: set the options of table `name` (any of its names).
    /// Answers `Table` with the table as it is now.
    SetTableOptions {
        name: String,
        options: TableOptions,
    },
    /// Tests only (a node started with `--fault-injection`): from now on, end
    /// this node's process abruptly (as `kill -9`) when it reaches this step of
    /// a tablet split (see the tablet server's `crash.rs`); None: never.
    CrashAt {
        step: Option<String>,
    },
    /// Point reads of several rows of one tablet at one read point (batched
    /// look-ups: the rows a secondary index's entries name): `Response::Values`,
    /// one value per key, in the order of `keys`.
    ReadMany {
        tablet: TabletId,
        keys: Vec<Vec<u8>>,
        at: ReadPoint,
    },
    /// Tests only (a node started with `--fault-injection`): the node's
    /// background loop (`Node::tick`) sleeps `ms` milliseconds at its next run,
    /// as a slow flush or a long intent sweep would hold it. Answers `Done`.
    StallTick {
        ms: u64,
    },
}

/// The PostgreSQL table locks a DDL transaction takes on every SQL node
/// (`Request::LockDdl`): PostgreSQL takes them on its own node as the statement
/// runs; the other nodes take them in a session of theirs, so that their writers
/// wait (and those writing already finish) before the DDL changes the table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DdlLock {
    /// The DDL transaction's lock id (random, nonzero; one per transaction:
    /// statements after the first add their locks to it).
    pub lock: u128,
    /// Node of the PostgreSQL running the DDL, and the backend's process id.
    pub origin: u64,
    pub origin_addr: String,
    pub pid: u32,
    pub database: String,
    /// (relation as a quoted `schema.name`, PostgreSQL lock mode as `LOCK TABLE`
    /// spells it, e.g. `SHARE`, `ACCESS EXCLUSIVE`).
    pub relations: Vec<(String, String)>,
    /// How long a node may wait for its locks (milliseconds).
    pub timeout_ms: u64,
}

impl Request {
    /// Whether `peer` may make this request. Nodes (and the node's own
    /// PostgreSQL, over the Unix socket), and anyone on an `--insecure` node,
    /// may make any; an operator's client certificate only asks for status; a
    /// peer without a certificate only asks to join with a token.
    pub fn allowed_for(&self, peer: &tls::Peer) -> bool {
        use tls::Peer;
        match peer {
            Peer::Local | Peer::Insecure | Peer::Node => true,
            Peer::Client(_) => matches!(self, Request::Ping | Request::Now | Request::Status),
            Peer::Anonymous => matches!(self, Request::JoinCluster { forwarded: false, .. }),
        }
    }
}

/// What `Request::Sequence` does. A sequence's state is PostgreSQL's: the last
/// value and whether it was returned yet; it starts as (`start`, not returned) at
/// the first `Next` (its options live in every node's catalog, sent with `Next`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SequenceOp {
    /// Make the sequence's name another name of sequence `existing` (a node
    /// replaying the CREATE of another node's sequence).
    Alias { existing: String },
    /// Take up to `count` consecutive values (`first`, `first + increment`, ...),
    /// as PostgreSQL's nextval with a cache of `count` would. Answers
    /// `SequenceValues`; `count = 0` there: the sequence reached its bound.
    Next { start: i64, increment: i64, min: i64, max: i64, cycle: bool, count: u32 },
    /// setval: the last value and whether it was returned.
    Set { value: i64, is_called: bool },
    /// Drop the name (the sequence itself if it is its own name).
    Drop,
}

/// One statement of a [`DdlEntry`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DdlStatement {
    /// The statement's SQL text, as the client sent it.
    pub sql: String,
    /// Storage tables it created, in order: (relation as `schema.name`, storage
    /// table). A node replaying the statement names these tables for its own
    /// relations of those names instead of creating storage.
    pub names: Vec<(String, String)>,
}

impl DdlStatement {
    /// `names` as the replaying session passes them to the extension (the
    /// `pinax.replay_names` setting): `hex(relation)=storage`, comma-separated
    /// (relation names may hold any character; storage names are `[a-z0-9_]`).
    pub fn encoded_names(&self) -> String {
        let hex = |s: &str| s.bytes().map(|b| format!("{b:02x}")).collect::<String>();
        self.names.iter().map(|(k, v)| format!("{}={v}", hex(k))).collect::<Vec<_>>().join(",")
    }

    /// The names [`DdlStatement::encoded_names`] wrote (malformed parts skipped).
    pub fn decode_names(s: &str) -> Vec<(String, String)> {
        let unhex = |s: &str| -> Option<String> {
            if !s.len().is_multiple_of(2) {
                return None;
            }
            let bytes: Option<Vec<u8>> = (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect();
            String::from_utf8(bytes?).ok()
        };
        s.split(',').filter_map(|p| p.split_once('=')).filter_map(|(k, v)| Some((unhex(k)?, v.to_string()))).collect()
    }
}

#[cfg(test)]
mod ddl_tests {
    use super::*;

    #[test]
    fn replay_names_survive_any_relation_name() {
        let names = vec![("public.t".to_string(), "n2_t5_16390".to_string()), ("we,ird=\"schéma\".x y".to_string(), "q5_7".to_string())];
        let st = DdlStatement { sql: String::new(), names: names.clone() };
        assert_eq!(DdlStatement::decode_names(&st.encoded_names()), names);
        assert!(DdlStatement::decode_names("").is_empty());
        assert!(DdlStatement::decode_names("zz=x,abc=y").is_empty());
    }
}

/// A committed transaction's DDL, as the SQL node that ran it logged it: what
/// every other SQL node replays so that all PostgreSQL catalogs agree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DdlEntry {
    /// Position in the DDL log (set by the master).
    pub seq: u64,
    /// Node whose PostgreSQL ran it (it does not replay it).
    pub origin: u64,
    pub database: String,
    /// Role that ran it (`current_user`), so replayed objects have the same owner.
    pub user: String,
    pub search_path: String,
    pub statements: Vec<DdlStatement>,
    /// The DDL lock its transaction held (0: none; see [`DdlLock`]): a node
    /// holding it applies the entry in the lock's session and commits there, so
    /// the lock goes only once the change is visible to that node's writers.
    pub lock: u128,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// Answer to `Ping`: the node's id (a client's transactions keep their status
    /// records on the node it is connected to; their ids carry that node's id).
    Pong {
        node_id: u64,
    },
    Now(HybridTime),
    Status(NodeStatus),
    Table(TableInfo),
    Dropped,
    Written {
        ht: HybridTime,
    },
    Value {
        value: Option<Vec<u8>>,
        read_ht: HybridTime,
    },
    Rows {
        result: ScanResult,
        read_ht: HybridTime,
    },
    TxnCreated {
        start_ht: HybridTime,
    },
    Committed {
        commit_ht: HybridTime,
    },
    Done,
    TxnStatus(TxnStatus),
    /// Answer to `WaitTxn`: whether the transaction has ended, and if so whether it
    /// committed.
    Waited {
        ended: bool,
        committed: bool,
    },
    /// Answer to `WaitsFor`.
    WaitingFor {
        holder: Option<TxnId>,
    },
    /// Answer to `Raft`: the receiving replica's reply, as bincode.
    Raft(Vec<u8>),
    /// Answer to `RegisterNode`: the node's id, every node the master knows
    /// (id, RPC address), and the RPC addresses of the master group's replicas.
    Registered {
        node_id: u64,
        nodes: Vec<(u64, String)>,
        masters: Vec<String>,
        /// The node's SQL lease, renewed (the DDL log's last sequence number
        /// then), or withheld (None: a DDL statement went on without the node
        /// and has not finished yet).
        lease: Option<u64>,
    },
    /// Answer to `LocateTablet`.
    Tablet(TabletInfo),
    /// Answer to `PublishDdl`: the entry's sequence number, and the nodes (id, RPC
    /// address) that have not applied it yet (they will when they can).
    DdlPublished {
        seq: u64,
        lagging: Vec<(u64, String)>,
    },
    /// Answer to `ReadDdl`.
    Ddl(Vec<DdlEntry>),
    /// Answer to `Sequence { op: Next }`: `count` values from `first` on, by the
    /// sequence's increment (0: none left).
    SequenceValues {
        first: i64,
        count: u32,
    },
    /// Answer to `CreateTxnAndWrite`: the status record was created; what the
    /// write answered.
    TxnWritten {
        write: Result<Box<Response>, RpcError>,
    },
    /// Answer to `WriteIfLive`: what it did, and its commit time if it wrote.
    WrittenIfLive {
        ht: HybridTime,
        outcome: LiveWrite,
    },
    /// Answer to `DeleteAll`: how many rows it deletes.
    DeletedAll {
        count: u64,
    },
    /// Answer to `JoinCluster`: the cluster's CA certificate and the joining
    /// node's, both PEM.
    Joined {
        ca: String,
        cert: String,
    },
    /// Answer to `ChangeReplicas` and `GroupMembers`: nodes of a Raft group (id,
    /// RPC address).
    Members(Vec<(u64, String)>),
    /// Answer to `TabletStats`: the replica's approximate size on disk (its
    /// key interval's SST files; not what is still in memtables), the leader
    /// it knows (node id, address) and its group's voters (node ids).
    TabletStats {
        approximate_bytes: u64,
        leader: Option<(u64, String)>,
        voters: Vec<u64>,
    },
    /// Answer to `DdlLockHeld`.
    Held(bool),
    /// Answer to `DdlReady`.
    Ready(bool),
    /// Answer to `SqlLease`: until when (hybrid time's physical microseconds)
    /// requests of this node's backends may run; 0: none may now.
    Lease(u64),
    /// Answer to `SplitReplica`: the user key the tablet split at, and its
    /// halves (left, right).
    SplitDone {
        at: Vec<u8>,
        children: Vec<TabletInfo>,
    },
    /// Answer to `SplitTablet`: the tablet that split, the user key it split
    /// at, and its halves (left, right) as the catalog listed them then.
    Split {
        parent: TabletId,
        at: Vec<u8>,
        children: Vec<TabletInfo>,
    },
    /// Answer to `LocateTablet` for a tablet that split (and whose halves the
    /// catalog lists): the tablets holding its keys now, in key order.
    Tablets(Vec<TabletInfo>),
    /// Answer to `ReadMany`: the value of each key (None: no row), in order.
    Values {
        values: Vec<Option<Vec<u8>>>,
        read_ht: HybridTime,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct RpcError {
    pub code: ErrorCode,
    pub message: String,
    /// The user key the error is about, when there is one (`DuplicateKey`: the key
    /// that already holds a live row), so the caller can say which row failed.
    pub key: Option<Vec<u8>>,
    /// The transaction whose pending intent caused a write conflict, which the
    /// caller may wait for (`WaitTxn`) and then retry.
    pub blocker: Option<TxnId>,
    /// `NotLeader`: the RPC address of the tablet's leader, when the replica knows it.
    pub leader: Option<String>,
    /// `ReadRestart`: the read time to read again at (`HybridTime::INVALID`
    /// otherwise; not an `Option`, to keep errors small).
    pub restart_ht: HybridTime,
}

impl RpcError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        RpcError { code, message: message.into(), key: None, blocker: None, leader: None, restart_ht: HybridTime::INVALID }
    }
    pub fn with_leader(mut self, leader: Option<String>) -> Self {
        self.leader = leader;
        self
    }
    pub fn with_blocker(mut self, txn: TxnId) -> Self {
        self.blocker = Some(txn);
        self
    }
    pub fn with_key(mut self, key: Vec<u8>) -> Self {
        self.key = Some(key);
        self
    }
    pub fn with_restart(mut self, ht: HybridTime) -> Self {
        self.restart_ht = ht;
        self
    }
    pub fn is_retryable(&self) -> bool {
        self.code.is_retryable()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestEnvelope {
    /// Sender's hybrid time.
    pub ht: HybridTime,
    /// The sending SQL node's lease end (physical microseconds of hybrid time):
    /// the receiver refuses the request (`NodeFenced`) once its clock is past it.
    /// 0: not fenced (requests between nodes, tools). See `Request::SqlLease`.
    pub fence: u64,
    pub request: Request,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResponseEnvelope {
    /// Server's hybrid time after handling the request.
    pub ht: HybridTime,
    /// Whether reads this server serves use a clock-uncertainty window (it knows
    /// another node): only then can a read need a restart.
    pub uncertain: bool,
    pub result: Result<Response, RpcError>,
}
