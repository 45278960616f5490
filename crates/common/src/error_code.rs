//! Stable error codes. They travel on the wire and are mapped to SQLSTATE by the SQL
//! layer (`pg/ext/src/error.rs`), so a code's number never changes meaning.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
#[repr(u16)]
pub enum ErrorCode {
    /// Unexpected internal failure (SQLSTATE XX000).
    Internal = 1,
    /// Malformed request (SQLSTATE 08P01 / XX000).
    InvalidRequest = 2,
    /// I/O error in storage (SQLSTATE 58030).
    Io = 3,
    /// Data on disk or on the wire failed its checksum or did not decode (XX001).
    Corruption = 4,
    /// No such table (42P01).
    TableNotFound = 10,
    /// No such tablet on this node, or it moved (retryable).
    TabletNotFound = 11,
    /// Table already exists (42P07).
    TableAlreadyExists = 12,
    /// Write-write conflict or a transaction that can no longer commit (40001, retryable).
    SerializationFailure = 20,
    /// The transaction was aborted (expired, or by a conflict) (40001, retryable).
    TxnAborted = 21,
    /// Unknown transaction (40001 / XX000).
    TxnNotFound = 22,
    /// Insert-if-absent found a live row (23505).
    DuplicateKey = 23,
    /// A read met a value in its uncertainty window and must restart (40001, retryable).
    ReadRestart = 24,
    /// Waiting for the transaction holding a conflicting intent would close a cycle of
    /// waiters: this one is the victim (40P01, retryable).
    Deadlock = 25,
    /// Node or tablet unavailable, try again (retryable; 57P03/08006 class).
    Unavailable = 30,
    /// This replica of the tablet is not its Raft leader; the error names the leader
    /// when known (retryable there).
    NotLeader = 33,
    /// Write refused by backpressure (retryable, 53000 class).
    Busy = 31,
    /// The node is shutting down (retryable).
    ShuttingDown = 32,
    /// The caller asked to stop (its statement was canceled) between requests.
    Cancelled = 34,
    /// A write refused because the disk holding the tablet is below its free-space
    /// reserve (53100 disk_full; not retryable: space comes back only when freed).
    DiskFull = 35,
    /// The peer may not make this request (a client certificate asking for
    /// data, a process without one asking for anything but to join) (42501).
    PermissionDenied = 36,
    /// A DDL statement could not take its table locks on another SQL node in
    /// time (55P03 lock_not_available).
    LockNotAvailable = 37,
    /// A request of a SQL node whose lease from the master has lapsed (it lost
    /// contact with the master, which may since have let DDL go on without it):
    /// its statement may have planned against a stale catalog, so the request is
    /// refused, never retried under the same plan (40001: the application retries
    /// the transaction, which plans afresh once the node is back in contact).
    NodeFenced = 38,
    /// The tablet split in two: its keys are its halves' now (retryable: the
    /// client looks the table up again and sends the request to the half that
    /// holds its key; 40001 if it ever reaches SQL).
    TabletSplit = 39,
}

impl ErrorCode {
    /// Whether a client may retry the same request (possibly after backoff).
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            ErrorCode::TabletNotFound
                | ErrorCode::TabletSplit
                | ErrorCode::SerializationFailure
                | ErrorCode::TxnAborted
                | ErrorCode::ReadRestart
                | ErrorCode::Deadlock
                | ErrorCode::Unavailable
                | ErrorCode::NotLeader
                | ErrorCode::Busy
                | ErrorCode::ShuttingDown
        )
    }

    /// The PostgreSQL SQLSTATE this code maps to (the one table the SQL layer uses).
    pub fn sqlstate(self) -> &'static str {
        match self {
            ErrorCode::Internal => "XX000",
            ErrorCode::InvalidRequest => "08P01",
            ErrorCode::Io => "58030",
            ErrorCode::Corruption => "XX001",
            ErrorCode::TableNotFound => "42P01",
            ErrorCode::TabletNotFound => "57P03",
            ErrorCode::TableAlreadyExists => "42P07",
            ErrorCode::SerializationFailure => "40001",
            ErrorCode::TxnAborted => "40001",
            ErrorCode::TxnNotFound => "40001",
            ErrorCode::DuplicateKey => "23505",
            ErrorCode::ReadRestart => "40001",
            ErrorCode::Deadlock => "40P01",
            ErrorCode::Unavailable => "57P03",
            ErrorCode::NotLeader => "57P03",
            ErrorCode::Busy => "53000",
            ErrorCode::ShuttingDown => "57P01",
            ErrorCode::Cancelled => "57014",
            ErrorCode::DiskFull => "53100",
            ErrorCode::PermissionDenied => "42501",
            ErrorCode::LockNotAvailable => "55P03",
            ErrorCode::NodeFenced => "40001",
            ErrorCode::TabletSplit => "40001",
        }
    }
}
