use pinax_codec::keys::KeyError;
use pinax_common::{ErrorCode, HybridTime};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Engine(#[from] pinax_engine::Error),
    #[error("corrupt stored record: {0}")]
    Corruption(#[from] KeyError),
    #[error("could not resolve transaction status: {message}")]
    StatusUnavailable { code: ErrorCode, message: String },
    /// The read met a value written after its read time but inside its uncertainty
    /// window (clock skew): it may have been written before the read began on
    /// another node's clock, so the read must run again at `restart_ht` or later.
    #[error("could not serialize access: read restart required at {restart_ht}")]
    ReadRestart { restart_ht: HybridTime },
    /// The request itself is malformed (a bad pushed-down filter: `pinax-pushdown`,
    /// whose errors are this crate's, so that a read fails with one error type).
    #[error("{0}")]
    InvalidRequest(String),
}

impl Error {
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Engine(pinax_engine::Error::Corruption(_)) | Error::Corruption(_) => ErrorCode::Corruption,
            Error::Engine(_) => ErrorCode::Io,
            Error::StatusUnavailable { code, .. } => *code,
            Error::ReadRestart { .. } => ErrorCode::ReadRestart,
            Error::InvalidRequest(_) => ErrorCode::InvalidRequest,
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;
