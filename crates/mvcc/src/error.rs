use pinax_codec::keys::KeyError;
use pinax_common::ErrorCode;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Engine(#[from] pinax_engine::Error),
    #[error("corrupt stored record: {0}")]
    Corruption(#[from] KeyError),
    #[error("could not resolve transaction status: {message}")]
    StatusUnavailable { code: ErrorCode, message: String },
}

impl Error {
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Engine(pinax_engine::Error::Corruption(_)) | Error::Corruption(_) => ErrorCode::Corruption,
            Error::Engine(_) => ErrorCode::Io,
            Error::StatusUnavailable { code, .. } => *code,
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;
