use pinax_common::{ErrorCode, HybridTime, TabletId, TxnId};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Mvcc(#[from] pinax_mvcc::Error),
    #[error(transparent)]
    Engine(#[from] pinax_engine::Error),
    #[error("corrupt stored record: {0}")]
    Corruption(#[from] pinax_codec::keys::KeyError),
    #[error(transparent)]
    Txn(#[from] pinax_txn::TxnError),
    #[error("could not serialize access due to concurrent update")]
    WriteConflict { tablet_id: TabletId, other_txn: Option<TxnId>, committed_at: Option<HybridTime> },
    #[error("duplicate key value violates unique constraint")]
    DuplicateKey { tablet_id: TabletId, key: Vec<u8> },
    #[error("key is outside tablet {tablet_id}'s partition")]
    WrongTablet { tablet_id: TabletId },
    #[error("tablet {tablet_id} was written with format version {found}, expected {expected}")]
    FormatVersion { tablet_id: TabletId, found: u32, expected: u32 },
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error("this replica of tablet {tablet_id} is not its leader")]
    NotLeader { tablet_id: TabletId, leader_hint: Option<String> },
    #[error("tablet {tablet_id} is unavailable: {message}")]
    Unavailable { tablet_id: TabletId, message: String },
    #[error("could not write to tablet {tablet_id}: {message}")]
    DiskFull { tablet_id: TabletId, message: String },
    #[error("tablet {tablet_id} split into tablets {} and {} at key {:02x?}", .split.left, .split.right, .split.at)]
    Split { tablet_id: TabletId, split: crate::split::SplitRecord },
}

impl Error {
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Mvcc(e) => e.code(),
            Error::Engine(pinax_engine::Error::Corruption(_)) | Error::Corruption(_) => ErrorCode::Corruption,
            Error::Engine(_) => ErrorCode::Io,
            Error::Txn(e) => e.code(),
            Error::WriteConflict { .. } => ErrorCode::SerializationFailure,
            Error::DuplicateKey { .. } => ErrorCode::DuplicateKey,
            Error::WrongTablet { .. } => ErrorCode::TabletNotFound,
            Error::FormatVersion { .. } => ErrorCode::Corruption,
            Error::InvalidRequest(_) => ErrorCode::InvalidRequest,
            Error::NotLeader { .. } => ErrorCode::NotLeader,
            Error::Unavailable { .. } => ErrorCode::Unavailable,
            Error::DiskFull { .. } => ErrorCode::DiskFull,
            Error::Split { .. } => ErrorCode::TabletSplit,
        }
    }
    pub fn is_retryable(&self) -> bool {
        self.code().is_retryable()
    }
}

pub type Result<T> = std::result::Result<T, Error>;
