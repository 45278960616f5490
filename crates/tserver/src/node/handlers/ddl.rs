//! The cluster's DDL log: `PublishDdl` (the master logs an entry and has the
//! live nodes apply it) and `ApplyDdl` (this node's PostgreSQL applies the log).

use crate::factory::EngineFactory;
use crate::node::{catalog_err, err, DdlApplier, Node};
use pinax_common::ErrorCode;
use pinax_proto::{DdlEntry, Request, Response, RpcError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the master waits for each node to apply a published DDL entry.
const DDL_APPLY_WAIT: Duration = Duration::from_secs(5);

impl<F: EngineFactory> Node<F> {
    /// Master: log `entry`, then have every other live node apply the log through
    /// it (in parallel, each for at most `DDL_APPLY_WAIT`). Nodes that did not are
    /// reported; they catch up from the log on their own.
    pub(in crate::node) fn publish_ddl(&self, entry: DdlEntry) -> Result<Response, RpcError> {
        let origin = entry.origin;
        let seq = self.catalog()?.append_ddl(entry).map_err(catalog_err)?;
        let others: Vec<(u64, String)> = self.live_nodes().into_iter().filter(|(id, _)| *id != origin).collect();
        let lagging = std::thread::scope(|s| {
            let calls: Vec<_> = others
                .iter()
                .map(|(id, addr)| {
                    s.spawn(move || {
                        let done = if *id == self.cfg.node_id {
                            self.handle(Request::ApplyDdl { upto: seq }).is_ok()
                        } else {
                            self.call_node(addr, Request::ApplyDdl { upto: seq }).is_ok()
                        };
                        (!done).then(|| (*id, addr.clone()))
                    })
                })
                .collect();
            calls.into_iter().filter_map(|c| c.join().ok().flatten()).collect::<Vec<_>>()
        });
        // Registered nodes not heard from lately were not asked: they are behind too.
        let mut lagging = lagging;
        let asked: Vec<u64> = others.iter().map(|(id, _)| *id).collect();
        let mut silent: Vec<(u64, String)> =
            self.nodes.lock().iter().filter(|(id, _)| **id != origin && !asked.contains(id)).map(|(id, (a, _))| (*id, a.clone())).collect();
        silent.sort();
        lagging.extend(silent);
        if !lagging.is_empty() {
            tracing::warn!(seq, ?lagging, "nodes have not applied a DDL log entry yet");
        }
        Ok(Response::DdlPublished { seq, lagging })
    }

    /// Set what applies the DDL log to this node's PostgreSQL (once).
    pub fn set_ddl_applier(&self, a: Arc<dyn DdlApplier>) {
        let _ = self.ddl.set(a);
    }

    /// `ApplyDdl`: have this node's PostgreSQL apply the DDL log through `upto`
    /// (none here: nothing to apply).
    pub(in crate::node) fn apply_ddl(&self, upto: u64) -> Result<Response, RpcError> {
        match self.ddl.get() {
            None => Ok(Response::Done),
            Some(a) => a.apply_upto(upto, Instant::now() + DDL_APPLY_WAIT).map(|_| Response::Done).map_err(|e| err(ErrorCode::Unavailable, e)),
        }
    }
}
