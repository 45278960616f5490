//! Placement decisions: where the master moves tablet replicas and leaders, and
//! which replicas a node drops as orphans. Pure: the caller (the node, in
//! `pinax-tserver`) gathers the inputs (catalog tables, registered nodes and when
//! each was last heard from, replica loads, leader reports, the current
//! [`Instant`] read once) and carries out the decisions ([`Decision`]); nothing
//! here does I/O or reads a clock.
//!
//! Invariants: the master group's own table ([`MASTER_TABLE_NAME`]) is never
//! counted in the load nor moved to even it out; at most one change per tablet
//! per re-replication pass, at most one rebalancing move and one leader move per
//! pass. Ties are broken as `Iterator::min_by_key` (first) and `max_by_key`
//! (last) break them, over the order given (nodes by id, tables and tablets in
//! catalog order).
//! Start at [`NodeAges::classify`], then [`place_replica`].

use crate::MASTER_TABLE_NAME;
use pinax_common::TabletId;
use pinax_proto::{TableInfo, TabletInfo};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// A node: its id and RPC address.
pub type NodeEntry = (u64, String);

/// A node not heard from for this long gets no new replicas.
pub const NODE_LIVENESS: Duration = Duration::from_secs(5);

/// The master moves at most one tablet leader this often.
pub const LEADER_MOVE_INTERVAL: Duration = Duration::from_secs(2);

/// One placement decision, for the caller to carry out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Put a replica of `tablet` (of table `table`) on node `to`, in place of
    /// node `from` if set: a dead node, or, when `alive`, a live one whose
    /// replica is dropped once the group no longer has it.
    MoveReplica { table: String, tablet: TabletId, from: Option<NodeEntry>, to: NodeEntry, alive: bool },
    /// Have node `from` (which leads `tablet`) hand its leadership to node `to`.
    TransferLeader { tablet: TabletId, from: NodeEntry, to: u64 },
    /// Drop this node's replica of `tablet`: the catalog no longer places it here.
    DropOrphan { tablet: TabletId },
}

/// The registered nodes sorted by how long ago each was heard from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeAges {
    /// Not heard from for `node_timeout` or more: their replicas move away.
    pub dead: Vec<NodeEntry>,
    /// Heard from within [`NODE_LIVENESS`].
    pub live: Vec<NodeEntry>,
    /// No node is between missed (not live) and gone (dead): none may come back.
    pub settled: bool,
}

impl NodeAges {
    /// Sort `nodes` (id, address, last heard from; in id order) as of `now`.
    pub fn classify<'a>(nodes: impl IntoIterator<Item = (u64, &'a str, Instant)> + Clone, now: Instant, node_timeout: Duration) -> Self {
        let age = |seen: Instant| now.saturating_duration_since(seen);
        let dead = nodes.clone().into_iter().filter(|(_, _, seen)| age(*seen) >= node_timeout).map(|(id, a, _)| (id, a.to_string())).collect();
        let live = nodes.clone().into_iter().filter(|(_, _, seen)| age(*seen) < NODE_LIVENESS).map(|(id, a, _)| (id, a.to_string())).collect();
        let settled = nodes.into_iter().all(|(_, _, seen)| age(seen) < NODE_LIVENESS || age(seen) >= node_timeout);
        NodeAges { dead, live, settled }
    }
}

/// The replication factor to place to: the configured one (at least 1), at most
/// the number of live nodes.
pub fn target_replicas(configured: u32, live: usize) -> usize {
    (configured.max(1) as usize).min(live)
}

/// How many replicas each live node (by address) holds; the master group's
/// replicas are not counted (they stay where they are).
pub fn replica_load(tables: &[TableInfo], live: &[NodeEntry]) -> HashMap<String, usize> {
    let mut load: HashMap<String, usize> = live.iter().map(|(_, a)| (a.clone(), 0)).collect();
    for ti in tables.iter().filter(|t| t.name != MASTER_TABLE_NAME).flat_map(|t| &t.tablets) {
        for r in &ti.replicas {
            if let Some(n) = load.get_mut(r) {
                *n += 1;
            }
        }
    }
    load
}

/// Re-replication of one tablet: a replica held by a dead node moves to a live
/// node holding no replica of it (the one with the fewest replicas); a tablet
/// with fewer than `rf` replicas gets one more on such a node. `None` when the
/// tablet needs nothing or no node can take it. (The caller adds one to the
/// target's load when the move succeeds, before placing the next tablet.)
pub fn place_replica(table: &TableInfo, ti: &TabletInfo, nodes: &NodeAges, rf: usize, load: &HashMap<String, usize>) -> Option<Decision> {
    let gone = nodes.dead.iter().find(|(_, a)| ti.replicas.contains(a));
    if gone.is_none() && ti.replicas.len() >= rf {
        return None;
    }
    let to = nodes.live.iter().filter(|(_, a)| !ti.replicas.contains(a)).min_by_key(|(_, a)| load.get(a).copied().unwrap_or(0)).cloned()?;
    Some(Decision::MoveReplica { table: table.name.clone(), tablet: ti.id, from: gone.cloned(), to, alive: false })
}

/// When the live node holding the most replicas has two or more than the one
/// holding the fewest, move one replica from it to that one: a tablet it holds
/// and the other does not, preferably one it does not lead. The master group's
/// replicas stay where they are. `None` when balanced or nothing can move.
pub fn rebalance(tables: &[TableInfo], live: &[NodeEntry], load: &HashMap<String, usize>) -> Option<Decision> {
    let count = |a: &String| load.get(a).copied().unwrap_or(0);
    let (heavy, light) = (live.iter().max_by_key(|(_, a)| count(a))?, live.iter().min_by_key(|(_, a)| count(a))?);
    if count(&heavy.1) < count(&light.1) + 2 {
        return None;
    }
    let candidates = tables.iter().filter(|t| t.name != MASTER_TABLE_NAME).flat_map(|t| t.tablets.iter().map(move |ti| (t, ti)));
    let movable: Vec<(&TableInfo, &TabletInfo)> = candidates.filter(|(_, ti)| ti.replicas.contains(&heavy.1) && !ti.replicas.contains(&light.1)).collect();
    let (t, ti) = movable.iter().find(|(_, ti)| ti.leader != heavy.1).or(movable.first()).copied()?;
    Some(Decision::MoveReplica { table: t.name.clone(), tablet: ti.id, from: Some(heavy.clone()), to: light.clone(), alive: true })
}

/// Replicas being even: when the live node leading the most tablets leads two or
/// more more than the one leading the fewest, hand one leadership from the first
/// to the second, for a tablet both hold. `led` gives, for each live node in
/// order, the tablets it last said it leads (`None`: no recent report, then
/// nothing moves); `since_last_move` is how long ago the last leader moved (at
/// most one per [`LEADER_MOVE_INTERVAL`]).
pub fn rebalance_leaders(tables: &[TableInfo], live: &[NodeEntry], led: Vec<(u64, Option<Vec<TabletId>>)>, since_last_move: Duration) -> Option<Decision> {
    if since_last_move < LEADER_MOVE_INTERVAL {
        return None;
    }
    let user: HashMap<TabletId, &TabletInfo> = tables.iter().filter(|t| t.name != MASTER_TABLE_NAME).flat_map(|t| t.tablets.iter().map(|ti| (ti.id, ti))).collect();
    let mut by_node: BTreeMap<u64, Vec<TabletId>> = BTreeMap::new();
    for (id, tablets) in led {
        // A report not known yet: decide nothing.
        by_node.insert(id, tablets?.into_iter().filter(|t| user.contains_key(t)).collect());
    }
    let ((heavy, heavy_led), (light, light_led)) = (by_node.iter().max_by_key(|(_, t)| t.len())?, by_node.iter().min_by_key(|(_, t)| t.len())?);
    if heavy_led.len() < light_led.len() + 2 {
        return None;
    }
    let addr = |id: u64| live.iter().find(|(n, _)| *n == id).map(|(_, a)| a.clone()).unwrap_or_default();
    let (heavy_addr, light_addr) = (addr(*heavy), addr(*light));
    let tablet = heavy_led.iter().copied().find(|t| user[t].replicas.contains(&light_addr))?;
    Some(Decision::TransferLeader { tablet, from: (*heavy, heavy_addr), to: *light })
}

/// This node's replicas to look up in the catalog as possible orphans: those
/// whose group (`groups`: tablet, has a leader) has heard from no leader for
/// `node_timeout`. `leaderless_since` is the caller's record of when each group
/// lost its leader; this updates it (forgets groups gone or led, starts the
/// clock for newly leaderless ones, restarts it for those returned).
pub fn orphan_checks(groups: Vec<(TabletId, bool)>, leaderless_since: &mut HashMap<TabletId, Instant>, now: Instant, node_timeout: Duration) -> Vec<TabletId> {
    let mut check = Vec::new();
    leaderless_since.retain(|id, _| groups.iter().any(|(g, _)| g == id));
    for (id, has_leader) in groups {
        if has_leader {
            leaderless_since.remove(&id);
            continue;
        }
        let t = leaderless_since.entry(id).or_insert(now);
        if now.saturating_duration_since(*t) >= node_timeout {
            check.push(id);
            *t = now;
        }
    }
    check
}

/// Whether a replica of `tablet` on node `addr` is an orphan, given where the
/// catalog places the tablet (`Some(None)`: the catalog has no such tablet;
/// `None`: the master cannot say now, then decide nothing).
pub fn orphan_verdict(tablet: TabletId, addr: &str, located: Option<Option<&TabletInfo>>) -> Option<Decision> {
    let placed_here = located?.is_some_and(|ti| ti.replicas.iter().any(|r| r == addr));
    (!placed_here).then_some(Decision::DropOrphan { tablet })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pinax_common::TableId;
    use pinax_proto::{Partition, Sharding};

    fn node(id: u64) -> NodeEntry {
        (id, format!("n{id}"))
    }

    fn tablet(id: u64, replicas: &[u64]) -> TabletInfo {
        let replicas: Vec<String> = replicas.iter().map(|n| format!("n{n}")).collect();
        TabletInfo { id: TabletId(id), partition: Partition { start: vec![], end: None }, leader: replicas[0].clone(), replicas }
    }

    fn table(name: &str, tablets: Vec<TabletInfo>) -> TableInfo {
        TableInfo { id: TableId(1), name: name.to_string(), sharding: Sharding::Hash { tablets: 1 }, tablets }
    }

    const TIMEOUT: Duration = Duration::from_secs(30);

    fn ages(now: Instant, seen: &[(u64, Duration)]) -> NodeAges {
        let nodes: Vec<(u64, String, Instant)> = seen.iter().map(|(id, ago)| (*id, format!("n{id}"), now - *ago)).collect();
        NodeAges::classify(nodes.iter().map(|(id, a, s)| (*id, a.as_str(), *s)), now, TIMEOUT)
    }

    #[test]
    fn dead_node_past_timeout_is_re_replicated() {
        let now = Instant::now() + Duration::from_secs(3600);
        let nodes = ages(now, &[(1, Duration::ZERO), (2, Duration::ZERO), (3, TIMEOUT), (4, Duration::ZERO)]);
        assert_eq!(nodes.dead, vec![node(3)]);
        assert_eq!(nodes.live, vec![node(1), node(2), node(4)]);
        assert!(nodes.settled);
        let t = table("t", vec![tablet(7, &[1, 2, 3])]);
        let rf = target_replicas(3, nodes.live.len());
        let load = replica_load(std::slice::from_ref(&t), &nodes.live);
        let d = place_replica(&t, &t.tablets[0], &nodes, rf, &load);
        assert_eq!(d, Some(Decision::MoveReplica { table: "t".into(), tablet: TabletId(7), from: Some(node(3)), to: node(4), alive: false }));
    }

    #[test]
    fn node_not_yet_past_timeout_is_left_alone() {
        let now = Instant::now() + Duration::from_secs(3600);
        let nodes = ages(now, &[(1, Duration::ZERO), (2, Duration::ZERO), (3, Duration::from_secs(10)), (4, Duration::ZERO)]);
        assert!(nodes.dead.is_empty());
        assert!(!nodes.settled, "node 3 is missed but not gone");
        let t = table("t", vec![tablet(7, &[1, 2, 3])]);
        let load = replica_load(std::slice::from_ref(&t), &nodes.live);
        assert_eq!(place_replica(&t, &t.tablets[0], &nodes, target_replicas(3, nodes.live.len()), &load), None);
    }

    #[test]
    fn under_replicated_tablet_gets_the_least_loaded_node() {
        let nodes = NodeAges { dead: vec![], live: vec![node(1), node(2), node(3)], settled: true };
        let tables = vec![table("a", vec![tablet(1, &[1]), tablet(2, &[2, 3])])];
        let load = replica_load(&tables, &nodes.live);
        let d = place_replica(&tables[0], &tables[0].tablets[0], &nodes, 2, &load);
        assert_eq!(d, Some(Decision::MoveReplica { table: "a".into(), tablet: TabletId(1), from: None, to: node(2), alive: false }));
    }

    #[test]
    fn replica_imbalance_moves_one_not_led() {
        let live = vec![node(1), node(2), node(3)];
        let mut led_by_1 = tablet(1, &[1, 2]);
        led_by_1.leader = "n1".into();
        let mut led_by_2 = tablet(2, &[2, 1]);
        led_by_2.leader = "n2".into();
        let tables = vec![table(MASTER_TABLE_NAME, vec![tablet(0, &[3])]), table("a", vec![led_by_1, led_by_2, tablet(3, &[1])])];
        let load = replica_load(&tables, &live);
        assert_eq!(load["n3"], 0, "the master group is not counted");
        let d = rebalance(&tables, &live, &load);
        assert_eq!(d, Some(Decision::MoveReplica { table: "a".into(), tablet: TabletId(2), from: Some(node(1)), to: node(3), alive: true }));
    }

    #[test]
    fn balanced_cluster_moves_nothing() {
        let live = vec![node(1), node(2), node(3)];
        let tables = vec![table("a", vec![tablet(1, &[1, 2]), tablet(2, &[2, 3]), tablet(3, &[3, 1])])];
        let load = replica_load(&tables, &live);
        assert_eq!(rebalance(&tables, &live, &load), None);
        let led = vec![(1, Some(vec![TabletId(1)])), (2, Some(vec![TabletId(2)])), (3, Some(vec![TabletId(3)]))];
        assert_eq!(rebalance_leaders(&tables, &live, led, LEADER_MOVE_INTERVAL), None);
        let nodes = NodeAges { dead: vec![], live: live.clone(), settled: true };
        for ti in &tables[0].tablets {
            assert_eq!(place_replica(&tables[0], ti, &nodes, 2, &load), None);
        }
    }

    #[test]
    fn leader_imbalance_transfers_one() {
        let live = vec![node(1), node(2)];
        let tables = vec![table("a", vec![tablet(1, &[1, 2]), tablet(2, &[1, 2])])];
        let led = || vec![(1, Some(vec![TabletId(1), TabletId(2)])), (2, Some(vec![]))];
        let d = rebalance_leaders(&tables, &live, led(), LEADER_MOVE_INTERVAL);
        assert_eq!(d, Some(Decision::TransferLeader { tablet: TabletId(1), from: node(1), to: 2 }));
        assert_eq!(rebalance_leaders(&tables, &live, led(), Duration::from_secs(1)), None, "too soon after the last move");
        assert_eq!(rebalance_leaders(&tables, &live, vec![(1, Some(vec![TabletId(1), TabletId(2)])), (2, None)], LEADER_MOVE_INTERVAL), None, "a report is missing");
    }

    #[test]
    fn leaderless_replica_not_placed_here_is_dropped() {
        let start = Instant::now();
        let mut since = HashMap::new();
        let groups = || vec![(TabletId(1), false), (TabletId(2), true)];
        assert!(orphan_checks(groups(), &mut since, start, TIMEOUT).is_empty());
        assert!(orphan_checks(groups(), &mut since, start + Duration::from_secs(10), TIMEOUT).is_empty());
        assert_eq!(orphan_checks(groups(), &mut since, start + TIMEOUT, TIMEOUT), vec![TabletId(1)]);
        assert!(orphan_checks(groups(), &mut since, start + TIMEOUT, TIMEOUT).is_empty(), "the clock restarts");
        let elsewhere = tablet(1, &[2, 3]);
        assert_eq!(orphan_verdict(TabletId(1), "n1", Some(Some(&elsewhere))), Some(Decision::DropOrphan { tablet: TabletId(1) }));
        assert_eq!(orphan_verdict(TabletId(1), "n1", Some(None)), Some(Decision::DropOrphan { tablet: TabletId(1) }));
        assert_eq!(orphan_verdict(TabletId(1), "n2", Some(Some(&elsewhere))), None);
        assert_eq!(orphan_verdict(TabletId(1), "n1", None), None, "the master cannot say");
    }
}
