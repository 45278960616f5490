//! Placement, carried out: the master's placement pass each second and every
//! node's check for orphaned replicas gather their inputs (catalog, when nodes
//! were last heard from, leader reports, local groups; time through a
//! [`Clock`]), ask the pure `pinax_master::placement` what to do, and do it
//! (create and drop replicas, change voters, record moves, hand over leaders).

use super::{catalog_err, Node};
use crate::factory::EngineFactory;
use pinax_common::{Clock, ErrorCode, SystemClock, TabletId};
use pinax_master::placement;
use pinax_master::placement::{Balance, Lookup, Micros, NodeEntry, ReplicaMove};
use pinax_proto::{Request, Response, RpcError, TableInfo};
use std::time::Instant;

/// A clock that never goes back (as [`Instant`]), in microseconds from the
/// system's time when it was made: what placement reads time through.
pub(super) struct MonotonicClock {
    start_micros: u64,
    start: Instant,
}

impl MonotonicClock {
    pub(super) fn new() -> Self {
        MonotonicClock { start_micros: SystemClock.now_micros(), start: Instant::now() }
    }
}

impl Clock for MonotonicClock {
    fn now_micros(&self) -> u64 {
        self.start_micros + self.start.elapsed().as_micros() as u64
    }
}

impl<F: EngineFactory> Node<F> {
    /// Now, for placement.
    pub(super) fn now(&self) -> Micros {
        self.placement_clock.now_micros()
    }

    /// Master: keep every tablet at its replication factor, then even out the
    /// load ([`placement::Pass`] decides; this carries the moves out). A move
    /// creates the replica there, has the tablet's leader change the voters, and
    /// records it in the catalog.
    pub(super) fn re_replicate(&self) {
        let now = self.now();
        let heard = {
            let mut nodes = self.nodes.lock();
            nodes.insert(self.cfg.node_id, (self.cfg.rpc_addr.clone(), now));
            nodes.clone()
        };
        let Ok(tables) = self.catalog().and_then(|c| c.tables_shared().map_err(catalog_err)) else {
            return;
        };
        let rules = placement::Rules { replication_factor: self.cfg.replication_factor, node_timeout: self.cfg.node_timeout };
        // (Balanced by the sizes leaders report with their registrations.)
        let sizes = self.tablet_reports_now().into_iter().map(|(id, seen)| (id, seen.bytes)).collect();
        let mut pass = placement::Pass::new(&tables, &heard, now, rules).with_sizes(sizes);
        // A splitting tablet's halves start from its group's members: none moves
        // until the catalog lists the halves (then theirs may).
        let splitting = self.splitting_tablets();
        while let Some(m) = pass.next_move() {
            let (id, from, to) = (m.tablet.id.0, m.from.as_ref().map(|f| f.0), m.to.0);
            if splitting.contains(&m.tablet.id) {
                continue;
            }
            match self.move_replica(&m) {
                Ok(()) => {
                    pass.moved(&m);
                    tracing::info!(tablet_id = id, ?from, to, "tablet replica placed");
                }
                Err(e) => tracing::warn!(tablet_id = id, ?from, to, error = %e, "could not place a tablet replica"),
            }
        }
        match pass.balance() {
            Balance::Wait => {}
            Balance::MoveReplica(m) if splitting.contains(&m.tablet.id) => {}
            Balance::MoveReplica(m) => {
                let (id, from, to) = (m.tablet.id.0, m.from.as_ref().map_or(0, |f| f.0), m.to.0);
                match self.move_replica(&m) {
                    Ok(()) => tracing::info!(tablet_id = id, from, to, "tablet replica moved to even out the load"),
                    Err(e) => tracing::warn!(tablet_id = id, from, to, error = %e, "could not move a tablet replica"),
                }
            }
            Balance::EvenLeaders => self.rebalance_leaders(&tables, pass.live(), now),
        }
    }

    /// Master, replicas being even: move one tablet leader if
    /// [`placement::leader_move`] says so (leaders as the nodes last said, this
    /// node's as it leads now).
    fn rebalance_leaders(&self, tables: &[TableInfo], live: &[NodeEntry], now: Micros) {
        let last_move = *self.last_leader_move.lock();
        let mine = self.leading();
        let decided = placement::leader_move(tables, live, self.cfg.node_id, &mine, &self.leaders.lock(), now, last_move);
        let Some(placement::LeaderMove { tablet, from: (heavy, heavy_addr), to: (light, _) }) = decided else {
            return;
        };
        *self.last_leader_move.lock() = now;
        match self.call_node(&heavy_addr, Request::TransferLeader { tablet, to: light }) {
            Ok(_) => tracing::info!(tablet_id = tablet.0, from = heavy, to = light, "tablet leader moved to even out the load"),
            Err(e) => tracing::warn!(tablet_id = tablet.0, from = heavy, to = light, error = %e, "could not move a tablet leader"),
        }
    }

    /// Drop this node's replicas that were moved away or whose table was dropped
    /// while it was down (nobody could tell it then), or whose tablet split
    /// (the master dropped the other replicas): those without a leader for
    /// the node timeout ([`placement::Leaderless`]) that the catalog does not
    /// place here ([`placement::is_orphan`]) and, for a tablet that still exists,
    /// whose group's leader does not count this node a member
    /// ([`Node::member_of_group`]): the catalog can lag the group, and a replica
    /// the group counts must keep what it acknowledged.
    pub(super) fn drop_orphan_replicas(&self) {
        let groups: Vec<(TabletId, bool)> = self.groups.read().iter().map(|(id, g)| (*id, g.group.has_leader())).collect();
        let check = self.leaderless.lock().due(&groups, self.now(), self.cfg.node_timeout);
        for id in check {
            let _checks = self.replica_checks.lock();
            let answer = self.call_master(Request::LocateTablet { tablet: id });
            let lookup = match &answer {
                Ok(Response::Tablet(ti)) => Lookup::Found(ti),
                Ok(Response::Tablets(_)) => Lookup::Split,
                Err(e) if e.code == ErrorCode::TabletNotFound => Lookup::NotFound,
                _ => Lookup::Unknown, // the master cannot say now: decide nothing
            };
            if !placement::is_orphan(lookup, &self.cfg.rpc_addr) {
                continue;
            }
            if let Ok(Response::Tablet(ti)) = &answer {
                match self.member_of_group(ti) {
                    Some(false) => {}
                    Some(true) => {
                        tracing::info!(tablet_id = id.0, "keeping a replica the catalog does not place here: its group counts it");
                        continue;
                    }
                    None => continue, // its leader cannot say now: decide nothing
                }
            }
            tracing::info!(tablet_id = id.0, "dropping a replica the catalog no longer places here");
            if let Err(e) = self.drop_replica(id) {
                tracing::warn!(tablet_id = id.0, error = %e, "could not drop an orphaned replica");
            }
        }
    }

    /// Master: drop the replica leading each tablet the catalog has not known
    /// for `unknown_leader_grace` ([`placement::unknown_led_tablets`]:
    /// the halves of a split applied after its table was dropped); the other
    /// replicas, left without a leader, drop themselves as orphans. Leaders as
    /// the live nodes last said.
    pub(super) fn drop_unknown_leaders(&self) {
        let Ok(catalog) = self.catalog() else {
            return;
        };
        let (Ok(tables), Ok(splits)) = (catalog.tables_shared(), catalog.splits()) else {
            return;
        };
        let mut known: std::collections::HashSet<TabletId> = tables.iter().flat_map(|t| t.tablets.iter().map(|ti| ti.id)).collect();
        known.extend(splits.iter().flat_map(|r| std::iter::once(r.parent.id).chain(r.children)));
        let now = self.now();
        let liveness = placement::NODE_LIVENESS.as_micros() as Micros;
        let reports: placement::LeaderReports =
            self.leaders.lock().iter().filter(|(_, (_, at))| now.saturating_sub(*at) < liveness).map(|(id, r)| (*id, r.clone())).collect();
        let mine = self.leading();
        let unknown =
            placement::unknown_led_tablets(&reports, self.cfg.node_id, &mine, &known, &mut self.unknown_leaders.lock(), now, self.cfg.unknown_leader_grace);
        for (tablet, node) in unknown {
            let addr = if node == self.cfg.node_id { Some(self.cfg.rpc_addr.clone()) } else { self.directory.read().get(&node).cloned() };
            let Some(addr) = addr else {
                continue;
            };
            tracing::warn!(
                tablet_id = tablet.0,
                node_id = node,
                "a group leads a tablet the catalog does not know (its table was dropped while it split?): dropping its leader's replica"
            );
            if let Err(e) = self.call_node(&addr, Request::DropReplica { tablet }) {
                tracing::warn!(tablet_id = tablet.0, node_id = node, error = %e, "could not drop a replica of a tablet the catalog does not know");
            }
        }
    }

    /// Carry out replica move `m` ([`placement::move_steps`]): create the
    /// replica on the new node, have the tablet's leader change the voters,
    /// record the move in the catalog, and drop the old replica of a live node.
    fn move_replica(&self, m: &ReplicaMove) -> Result<(), RpcError> {
        let ti = &m.tablet;
        let steps = placement::move_steps(m, &self.directory.read());
        let new_addr = steps.add.1.clone();
        self.call_node(&new_addr, Request::CreateReplica { tablet: steps.tablet, members: steps.members, bootstrap: false })?;
        let req = || Request::ChangeReplicas { tablet: ti.id, add: steps.add.clone(), remove: steps.remove };
        let answer = self.call_leader(ti, steps.skip.as_deref(), req, |_| false)?;
        // The catalog records the group's voters as its leader answered, not the
        // move as planned: a change made earlier but not recorded (this master,
        // or an earlier one, failed between the two) leaves the plan wrong.
        let replicas = match answer {
            Response::Members(voters) => placement::voter_addresses(&voters, &self.directory.read()),
            _ => None,
        };
        let catalog = self.catalog()?;
        let voters = match replicas {
            Some(r) => {
                let planned: Vec<&String> =
                    ti.replicas.iter().filter(|a| Some(a.as_str()) != m.from.as_ref().map(|f| f.1.as_str())).chain([&new_addr]).collect();
                if planned.len() != r.len() || planned.iter().any(|a| !r.contains(a)) {
                    tracing::info!(tablet_id = ti.id.0, voters = ?r, ?planned, "the catalog lagged the tablet's group: recording its voters, not the planned move");
                }
                catalog.set_replicas(&m.table, ti.id, &r).map_err(catalog_err)?;
                r
            }
            None => {
                let t = catalog.move_replica(&m.table, ti.id, m.from.as_ref().map(|f| f.1.as_str()), &new_addr).map_err(catalog_err)?;
                t.tablets.iter().find(|t| t.id == ti.id).map(|t| t.replicas.clone()).unwrap_or_default()
            }
        };
        self.locations.lock().remove(&ti.id);
        if let Some(from) = steps.drop_after.filter(|f| !voters.contains(f)) {
            self.drop_replicas(&[(from, ti.id)]);
        }
        Ok(())
    }
}
