//! The fate of a transaction, as the status tablet knows it: the word every layer
//! shares (MVCC reads decide visibility by it, the coordinator's records produce it,
//! the wire carries it). It lives here, below all of them, so that `pinax-mvcc`
//! needs no wire types; `pinax_proto::TxnStatus` is this type, and its serde form is
//! part of the wire format (variants and fields keep their order).

use crate::HybridTime;
use serde::{Deserialize, Serialize};

/// Fate of a transaction as seen by a reader or writer meeting its intent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnStatus {
    /// Still running (or its status tablet has not decided yet).
    Pending,
    Committed {
        commit_ht: HybridTime,
    },
    /// Aborted, expired, or unknown to its status tablet.
    Aborted,
}
