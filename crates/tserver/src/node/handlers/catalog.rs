//! The master's catalog requests (`CreateTable`, `DropTable`, `GetTable`,
//! `SetTableOptions`, `AddTableName`, `RegisterNode`, `EnsureStatusTablet`, `LocateTablet`,
//! `SplitTablet` (in `master_split.rs`), ...;
//! served only while this node leads the master group) and creating a table:
//! planned by the catalog, placed by `pinax_master::placement`, its replicas
//! created on the nodes, then committed.

use crate::factory::EngineFactory;
use crate::node::{catalog_err, err, Node};
use pinax_common::{ErrorCode, TabletId};
use pinax_master::placement;
use pinax_master::{status_table_name, CatalogError, Dropped, Located};
use pinax_proto::{Request, Response, RpcError, Sharding, TableInfo, TableOptions};

/// A table to create and place.
#[derive(Clone)]
enum Planned<'a> {
    /// A SQL relation's storage table.
    Sql { name: &'a str, sharding: Sharding, if_not_exists: bool, options: TableOptions },
    /// Node `n`'s status table: one tablet, its first replica (and leader) on `n`.
    Status(u64),
}

/// Why creating a table failed: because of one node (place it again without that
/// node), or otherwise.
enum CreateFailed {
    Node(u64, RpcError),
    Other(RpcError),
}

impl<F: EngineFactory> Node<F> {
    /// A catalog request at the master (NotLeader unless this node leads it).
    pub(in crate::node) fn handle_master(&self, req: Request) -> Result<Response, RpcError> {
        match req {
            Request::AddTableName { name, existing } => self.catalog()?.add_name(&name, &existing).map(Response::Table).map_err(catalog_err),
            Request::PublishDdl { entry } => self.publish_ddl(entry),
            Request::LockDdl { lock } => self.spread_ddl_lock(lock),
            Request::UnlockDdl { lock } => self.spread_ddl_unlock(lock),
            Request::ReadDdl { after, max } => self.catalog()?.read_ddl(after, max.clamp(1, 10_000) as usize).map(Response::Ddl).map_err(catalog_err),
            Request::Sequence { name, op } => self.sequence(&name, op),
            Request::CreateTable { name, sharding, if_not_exists, options } => {
                self.create_table_placed(Planned::Sql { name: &name, sharding, if_not_exists, options }).map(Response::Table)
            }
            Request::SetTableOptions { name, options } => self.catalog()?.set_options(&name, options).map(Response::Table).map_err(catalog_err),
            Request::DropTable { name, if_exists } => self.drop_table(&name, if_exists),
            Request::GetTable { name } => self.catalog()?.get(&name).map(Response::Table).map_err(catalog_err),
            Request::RegisterNode { node_id, addr, leading, reports } => self.register_node(node_id, addr, leading, reports),
            Request::EnsureStatusTablet { node } => self.ensure_status_tablet(node),
            Request::LocateTablet { tablet } => self.locate_tablet(tablet),
            Request::SplitTablet { tablet, at } => self.split_tablet(tablet, at),
            other => Err(err(ErrorCode::InvalidRequest, format!("not a catalog request: {other:?}"))),
        }
    }

    /// Master: create and place a table (a SQL table, or a node's status table,
    /// whose first replica and first leader is that node). Each tablet gets
    /// `replication_factor` replicas (at most one per live node) on consecutive
    /// nodes starting at a different node for each tablet, so replicas and first
    /// leaders spread evenly; the first member bootstraps the group and is its
    /// expected leader.
    fn create_table_placed(&self, planned: Planned<'_>) -> Result<TableInfo, RpcError> {
        // One status table at a time: two creations of the same one would share
        // tablet ids, and the loser would drop the winner's replicas.
        let _one = matches!(planned, Planned::Status(_)).then(|| self.status_creation.lock());
        // A node that fails to create its replica is left out and the table placed
        // again on the others (it may have died since it last registered).
        let mut down: Vec<u64> = Vec::new();
        loop {
            match self.try_create_table(planned.clone(), &down) {
                Err(CreateFailed::Node(id, e)) => {
                    tracing::warn!(node_id = id, error = %e, "a node could not create its replicas; placing the table without it");
                    // Not live from now on (until it registers again); still
                    // known, so that its replicas move once it is gone for good.
                    if let Some((_, seen)) = self.nodes.lock().get_mut(&id) {
                        *seen = placement::missed(*seen, self.now());
                    }
                    down.push(id);
                    if down.len() >= 3 {
                        return Err(e);
                    }
                }
                Err(CreateFailed::Other(e)) => return Err(e),
                Ok(t) => return Ok(t),
            }
        }
    }

    fn try_create_table(&self, planned: Planned<'_>, down: &[u64]) -> Result<TableInfo, CreateFailed> {
        let catalog = self.catalog().map_err(CreateFailed::Other)?;
        let mut live = self.live_nodes();
        live.retain(|(id, _)| !down.contains(id) || *id == self.cfg.node_id);
        let rf = placement::replicas_per_tablet(self.cfg.replication_factor, live.len());
        let existing = |name: &str| catalog.get(name).map_err(|e| CreateFailed::Other(catalog_err(e)));
        let (mut plan, home) = match planned {
            Planned::Sql { name, sharding, if_not_exists, options } => {
                let sharding = placement::new_table_sharding(sharding, self.cfg.tablets_per_node, live.len(), rf);
                match catalog.plan_table(name, sharding, &self.cfg.rpc_addr) {
                    Ok(p) => (TableInfo { options, ..p }, None),
                    Err(CatalogError::AlreadyExists(_)) if if_not_exists => return existing(name),
                    Err(e) => return Err(CreateFailed::Other(catalog_err(e))),
                }
            }
            Planned::Status(node) => match catalog.plan_status_table(node, &self.cfg.rpc_addr) {
                Ok(p) => (p, Some(node)),
                Err(CatalogError::AlreadyExists(name)) => return existing(&name),
                Err(e) => return Err(CreateFailed::Other(catalog_err(e))),
            },
        };
        let placed = placement::place_new_table(&mut plan, &live, rf, home);
        // Followers first, so the bootstrap replica's first messages find them.
        let mut done: Vec<(String, TabletId)> = Vec::new();
        for bootstrap in [false, true] {
            for (ti, members) in &placed {
                for (k, (node_id, addr)) in members.iter().enumerate() {
                    if (k == 0) != bootstrap {
                        continue;
                    }
                    let req = Request::CreateReplica { tablet: ti.clone(), members: members.clone(), bootstrap };
                    if let Err(e) = self.call_node(addr, req) {
                        self.drop_replicas(&done);
                        let e = err(e.code, format!("creating a replica of tablet {} on {addr}: {}", ti.id.0, e.message));
                        return Err(if *node_id == self.cfg.node_id { CreateFailed::Other(e) } else { CreateFailed::Node(*node_id, e) });
                    }
                    done.push((addr.clone(), ti.id));
                }
            }
        }
        if let Err(e) = catalog.commit_table(&plan) {
            self.drop_replicas(&done);
            return Err(CreateFailed::Other(catalog_err(e)));
        }
        Ok(plan)
    }

    /// Best effort: drop replicas (a node that is down keeps its replica until it
    /// learns otherwise).
    pub(in crate::node) fn drop_replicas(&self, replicas: &[(String, TabletId)]) {
        for (addr, id) in replicas {
            if let Err(e) = self.call_node(addr, Request::DropReplica { tablet: *id }) {
                tracing::warn!(tablet_id = id.0, %addr, error = %e, "could not drop a replica");
            }
        }
    }

    fn destroy_tablets(&self, t: &TableInfo) {
        let all: Vec<(String, TabletId)> = t.tablets.iter().flat_map(|ti| ti.replicas.iter().map(|a| (a.clone(), ti.id))).collect();
        self.drop_replicas(&all);
    }

    fn drop_table(&self, name: &str, if_exists: bool) -> Result<Response, RpcError> {
        match self.catalog()?.drop_table(name) {
            Ok(Dropped::Table(t, split_leftovers)) => {
                self.destroy_tablets(&t);
                let leftovers: Vec<(String, TabletId)> = split_leftovers.into_iter().flat_map(|(id, rs)| rs.into_iter().map(move |a| (a, id))).collect();
                self.drop_replicas(&leftovers);
                Ok(Response::Dropped)
            }
            Ok(Dropped::Name) => Ok(Response::Dropped),
            Err(CatalogError::NotFound(_)) if if_exists => Ok(Response::Dropped),
            Err(e) => Err(catalog_err(e)),
        }
    }

    /// Master: `LocateTablet` (see its docs for tablets that split).
    fn locate_tablet(&self, id: TabletId) -> Result<Response, RpcError> {
        match self.catalog()?.locate(id).map_err(catalog_err)? {
            Located::Tablet(ti) => Ok(Response::Tablet(ti)),
            Located::Split(now) => Ok(Response::Tablets(now)),
            Located::Pending(parent) => {
                Err(err(ErrorCode::Unavailable, format!("tablet {} is a half of tablet {}, which is splitting: not in the catalog yet", id.0, parent.0)))
            }
            Located::NotFound => Err(err(ErrorCode::TabletNotFound, format!("tablet {} does not exist", id.0))),
        }
    }

    /// Master: `EnsureStatusTablet`.
    fn ensure_status_tablet(&self, node: u64) -> Result<Response, RpcError> {
        if let Ok(t) = self.catalog()?.get(&status_table_name(node)) {
            return Ok(Response::Tablet(t.tablets[0].clone()));
        }
        let t = self.create_table_placed(Planned::Status(node))?;
        tracing::info!(node_id = node, replicas = ?t.tablets[0].replicas, "status tablet created");
        Ok(Response::Tablet(t.tablets[0].clone()))
    }

    /// Master: every live node has a status tablet (created before its first
    /// transaction needs it, so that does not wait).
    pub(in crate::node) fn ensure_status_tablets(&self) {
        for (node, _) in self.live_nodes() {
            if let Err(e) = self.ensure_status_tablet(node) {
                tracing::warn!(node_id = node, error = %e, "could not create a status tablet");
            }
        }
    }
}
