//! Transaction fate as seen by a reader or writer meeting an intent.

use pinax_common::{HybridTime, TxnId};

pub use pinax_common::TxnStatus;

/// Answers "what happened to transaction `txn`?" for a reader at `read_ht`. The
/// implementation must move its status tablet's clock past `read_ht` before answering
/// `Pending`, so that a later commit gets a commit time above `read_ht`.
pub trait TxnStatusResolver {
    fn status(&self, txn: TxnId, read_ht: HybridTime) -> crate::Result<TxnStatus>;
}

impl<F> TxnStatusResolver for F
where
    F: Fn(TxnId, HybridTime) -> crate::Result<TxnStatus>,
{
    fn status(&self, txn: TxnId, read_ht: HybridTime) -> crate::Result<TxnStatus> {
        self(txn, read_ht)
    }
}
