//! `Status`: what `pinax status` shows of this node and the cluster.

use crate::factory::EngineFactory;
use crate::node::{catalog_err, err, Node};
use pinax_common::ErrorCode;
use pinax_master::SYSTEM_TABLE_PREFIX;
use pinax_proto::{NodeStatus, Request, Response, RpcError};

impl<F: EngineFactory> Node<F> {
    /// `Status`: this node, with the master's tables and live nodes.
    pub(in crate::node) fn node_status(&self) -> Result<Response, RpcError> {
        // Tables and live nodes are the master's.
        let (tables, nodes) = if self.is_master() {
            (self.catalog()?.tables().map_err(catalog_err)?, self.live_nodes())
        } else {
            match self.call_master(Request::Status)? {
                Response::Status(m) => (m.tables, m.nodes),
                other => return Err(err(ErrorCode::Internal, format!("unexpected answer to Status: {other:?}"))),
            }
        };
        Ok(Response::Status(NodeStatus {
            node_id: self.cfg.node_id,
            rpc_addr: self.cfg.rpc_addr.clone(),
            data_dir: self.cfg.data_dir.clone(),
            tables: tables.into_iter().filter(|t| !t.name.starts_with(SYSTEM_TABLE_PREFIX)).collect(),
            status_tablet_records: self.status_tablets.read().values().map(|st| st.len() as u64).sum(),
            hybrid_time: self.clock.now(),
            nodes,
            replicas: {
                let mut r: Vec<_> = self.groups.read().keys().copied().collect();
                r.sort();
                r
            },
        }))
    }
}
