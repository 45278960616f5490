//! `Sequence`: operations on cluster-wide sequences (at the master).

use crate::factory::EngineFactory;
use crate::node::{catalog_err, err, Node};
use pinax_common::ErrorCode;
use pinax_proto::{Response, RpcError, SequenceOp};

impl<F: EngineFactory> Node<F> {
    /// Master: an operation on a cluster-wide sequence.
    pub(in crate::node) fn sequence(&self, name: &str, op: SequenceOp) -> Result<Response, RpcError> {
        let catalog = self.catalog()?;
        let r = match op {
            SequenceOp::Alias { existing } => catalog.sequence_alias(name, &existing).map(|_| Response::Done),
            SequenceOp::Next { start, increment, min, max, cycle, count } => {
                if increment == 0 || min > max {
                    return Err(err(ErrorCode::InvalidRequest, format!("invalid options for sequence {name}")));
                }
                let o = pinax_master::catalog::SequenceOptions { start, increment, min, max, cycle };
                catalog.sequence_next(name, o, count.clamp(1, 1_000_000)).map(|(first, count)| Response::SequenceValues { first, count })
            }
            SequenceOp::Set { value, is_called } => catalog.sequence_set(name, value, is_called).map(|_| Response::Done),
            SequenceOp::Drop => catalog.sequence_drop(name).map(|_| Response::Done),
        };
        r.map_err(catalog_err)
    }
}
