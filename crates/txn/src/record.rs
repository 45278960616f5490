//! The status record of one transaction.

use pinax_common::{HybridTime, TabletId};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnState {
    Pending,
    Committed,
    Aborted,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnRecord {
    pub state: TxnState,
    /// Valid when `state == Committed`.
    pub commit_ht: HybridTime,
    pub start_ht: HybridTime,
    pub last_heartbeat: HybridTime,
    /// Tablets holding intents, as told at commit/abort.
    pub participants: Vec<TabletId>,
    /// When every participant confirmed it applied (or removed) the intents.
    pub resolved_at: Option<HybridTime>,
}

impl TxnRecord {
    pub fn new(now: HybridTime) -> Self {
        TxnRecord { state: TxnState::Pending, commit_ht: HybridTime::INVALID, start_ht: now, last_heartbeat: now, participants: Vec::new(), resolved_at: None }
    }

    pub fn status(&self) -> pinax_mvcc::TxnStatus {
        match self.state {
            TxnState::Pending => pinax_mvcc::TxnStatus::Pending,
            TxnState::Committed => pinax_mvcc::TxnStatus::Committed { commit_ht: self.commit_ht },
            TxnState::Aborted => pinax_mvcc::TxnStatus::Aborted,
        }
    }
}
