//! `JoinCluster`: a node without a certificate asks for one with a join token.

use crate::factory::EngineFactory;
use crate::node::{err, JoinRefusal, Node};
use pinax_common::ErrorCode;
use pinax_proto::{Request, Response, RpcError};

impl<F: EngineFactory> Node<F> {
    /// Sign the joining node's certificate request here if this node holds the
    /// CA key; else (not `forwarded`) ask the other nodes this node knows.
    pub(in crate::node) fn join_cluster(&self, token: String, csr: String, forwarded: bool) -> Result<Response, RpcError> {
        let Some(signer) = self.cfg.join_signer.as_ref() else {
            return Err(err(ErrorCode::InvalidRequest, "this node issues no certificates (it runs --insecure)"));
        };
        match signer.sign(&token, &csr) {
            Ok((ca, cert)) => {
                tracing::info!("issued a node certificate to a node joining with a token");
                Ok(Response::Joined { ca, cert })
            }
            Err(JoinRefusal::Refused(why)) => {
                tracing::warn!(reason = %why, "refused a node asking to join");
                Err(err(ErrorCode::PermissionDenied, why))
            }
            Err(JoinRefusal::NoCaKey) if forwarded => Err(err(ErrorCode::Unavailable, "this node does not hold the cluster's CA key")),
            Err(JoinRefusal::NoCaKey) => {
                let others: Vec<String> = self.directory.read().iter().filter(|(id, _)| **id != self.cfg.node_id).map(|(_, a)| a.clone()).collect();
                for addr in others {
                    match self.call_node(&addr, Request::JoinCluster { token: token.clone(), csr: csr.clone(), forwarded: true }) {
                        Ok(r @ Response::Joined { .. }) => return Ok(r),
                        Err(e) if e.code == ErrorCode::PermissionDenied => return Err(e),
                        _ => {}
                    }
                }
                Err(err(ErrorCode::Unavailable, "no live node holds the cluster's CA key (ca.key): start the node holding it, or join through it"))
            }
        }
    }
}
