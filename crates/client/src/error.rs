use pinax_common::ErrorCode;
use pinax_proto::RpcError;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server answered with an error.
    #[error("{0}")]
    Rpc(#[from] RpcError),
    /// Could not reach the node or the connection broke.
    #[error("could not reach pinax node at {addr}: {message}")]
    Unavailable { addr: String, message: String },
    /// The server sent something this client cannot understand.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The transaction was already committed or aborted.
    #[error("transaction is already finished")]
    TxnFinished,
}

impl ClientError {
    pub fn code(&self) -> ErrorCode {
        match self {
            ClientError::Rpc(e) => e.code,
            ClientError::Unavailable { .. } => ErrorCode::Unavailable,
            ClientError::Protocol(_) => ErrorCode::Internal,
            ClientError::TxnFinished => ErrorCode::InvalidRequest,
        }
    }
    /// The transaction whose pending intent this write conflicted with, if any: the
    /// write may succeed once it ends ([`crate::Client::wait_txn`]).
    pub fn blocker(&self) -> Option<pinax_common::TxnId> {
        match self {
            ClientError::Rpc(e) if e.code == ErrorCode::SerializationFailure => e.blocker,
            _ => None,
        }
    }
    pub fn is_retryable(&self) -> bool {
        self.code().is_retryable()
    }
}

pub type Result<T> = std::result::Result<T, ClientError>;
