use pinax_common::ErrorCode;
use pinax_proto::RpcError;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server answered with an error (boxed: errors travel in `Result`s on
    /// every path, and an `RpcError` is large).
    #[error("{0}")]
    Rpc(Box<RpcError>),
    /// Could not reach the node or the connection broke.
    #[error("could not reach pinax node at {addr}: {message}")]
    Unavailable { addr: String, message: String },
    /// The server sent something this client cannot understand.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The transaction was already committed or aborted.
    #[error("transaction is already finished")]
    TxnFinished,
    /// `ClientOptions::interrupted` said stop (between the pages of a scan).
    #[error("the scan was interrupted")]
    Interrupted,
}

impl From<RpcError> for ClientError {
    fn from(e: RpcError) -> Self {
        ClientError::Rpc(Box::new(e))
    }
}

impl ClientError {
    pub fn code(&self) -> ErrorCode {
        match self {
            ClientError::Rpc(e) => e.code,
            ClientError::Unavailable { .. } => ErrorCode::Unavailable,
            ClientError::Protocol(_) => ErrorCode::Internal,
            ClientError::TxnFinished => ErrorCode::InvalidRequest,
            ClientError::Interrupted => ErrorCode::Cancelled,
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
    /// `ReadRestart`: the read met a value in its uncertainty window; reading
    /// again at this time (or later) sees it.
    pub fn restart_ht(&self) -> Option<pinax_common::HybridTime> {
        match self {
            ClientError::Rpc(e) if e.code == ErrorCode::ReadRestart && e.restart_ht != pinax_common::HybridTime::INVALID => Some(e.restart_ht),
            _ => None,
        }
    }
    pub fn is_retryable(&self) -> bool {
        self.code().is_retryable()
    }
}

pub type Result<T> = std::result::Result<T, ClientError>;
