//! Replica placement as pure decisions: where a new table's replicas go, which
//! replicas move off dead nodes or onto under-replicated tablets
//! (re-replication), which one replica moves to even out the load, which tablet
//! leader moves to even out leaderships, which local replica is an orphan, and
//! what one replica move sends.
//!
//! Nothing here does I/O or reads a clock: the master's node gathers the inputs
//! (the catalog's tables, when it last heard from each node, the leaders each
//! node reported, the current time read through a [`pinax_common::Clock`]),
//! calls these functions and carries out what they decide (`pinax_tserver`'s
//! `node/placement.rs`). Times are [`Micros`] read through that clock; only
//! differences of them matter.
//!
//! Invariants: at most one change per tablet per pass; a replica goes only to a
//! live node that holds none of its tablet; nothing is evened out while a tablet
//! was placed in the same pass or a node is in doubt (missed, not yet gone); the
//! master group's own replicas are neither counted nor moved to even out the
//! load.
//!
//! Start at [`Pass`] (one placement check, run each second by the master).

use crate::MASTER_TABLE_NAME;
use pinax_common::TabletId;
use pinax_proto::{Sharding, TableInfo, TabletInfo};
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// A point in time: microseconds read through a [`pinax_common::Clock`].
pub type Micros = u64;

/// A node: id and RPC address.
pub type NodeEntry = (u64, String);

/// What the master heard of the registered nodes: id → (RPC address, when it
/// was last heard from).
pub type Heard = BTreeMap<u64, (String, Micros)>;

/// What each node said it leads: id → (tablets, when it said so).
pub type LeaderReports = HashMap<u64, (Vec<TabletId>, Micros)>;

/// A node not heard from for this long gets no new replicas.
pub const NODE_LIVENESS: Duration = Duration::from_secs(5);

/// The master moves at most one tablet leader this often.
pub const LEADER_MOVE_INTERVAL: Duration = Duration::from_secs(2);

/// How long ago `since` was at `now`.
fn elapsed(now: Micros, since: Micros) -> Duration {
    Duration::from_micros(now.saturating_sub(since))
}

/// The nodes heard from within [`NODE_LIVENESS`] at `now`, by id.
pub fn live_nodes(heard: &Heard, now: Micros) -> Vec<NodeEntry> {
    heard.iter().filter(|(_, (_, seen))| elapsed(now, *seen) < NODE_LIVENESS).map(|(id, (a, _))| (*id, a.clone())).collect()
}

/// When a node last heard from at `seen` counts as heard from once it failed at
/// `now`: no longer live (until it registers again), still known.
pub fn missed(seen: Micros, now: Micros) -> Micros {
    seen.min(now.checked_sub(NODE_LIVENESS.as_micros() as u64).unwrap_or(seen))
}

/// Replicas per tablet: the replication factor, at most one per live node.
pub fn replicas_per_tablet(replication_factor: u32, live: usize) -> usize {
    (replication_factor.max(1) as usize).min(live)
}

/// A new table's sharding: hash sharding asked for no number of tablets gets
/// `tablets_per_node` per `rf` live nodes.
pub fn new_table_sharding(sharding: Sharding, tablets_per_node: u32, live: usize, rf: usize) -> Sharding {
    match sharding {
        Sharding::Hash { tablets: 0 } => Sharding::Hash { tablets: tablets_per_node * (live / rf).max(1) as u32 },
        s => s,
    }
}

/// Place a new table's tablets: each gets `rf` replicas on consecutive live
/// nodes starting at a different node for each tablet (at node `home` for a
/// node's status table), so replicas and first leaders spread evenly; the first
/// member is the tablet's leader and bootstraps its group. Sets each tablet's
/// leader and replicas in `plan`; returns each tablet with its members.
pub fn place_new_table(plan: &mut TableInfo, live: &[NodeEntry], rf: usize, home: Option<u64>) -> Vec<(TabletInfo, Vec<NodeEntry>)> {
    let mut placed = Vec::new();
    let first = match home.and_then(|n| live.iter().position(|(id, _)| *id == n)) {
        Some(i) => i,
        None => (plan.id.0 as usize) % live.len(),
    };
    for (i, ti) in plan.tablets.iter_mut().enumerate() {
        let members: Vec<NodeEntry> = (0..rf).map(|k| live[(first + i + k) % live.len()].clone()).collect();
        ti.leader = members[0].1.clone();
        ti.replicas = members.iter().map(|(_, a)| a.clone()).collect();
        placed.push((ti.clone(), members));
    }
    placed
}

/// The master's placement settings.
#[derive(Clone, Copy, Debug)]
pub struct Rules {
    /// Replicas per tablet (fewer when fewer nodes are live).
    pub replication_factor: u32,
    /// A node not heard from for this long is gone: its replicas move.
    pub node_timeout: Duration,
}

/// Why a replica moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MoveKind {
    /// Off a dead node (never asked anything), or onto an under-replicated
    /// tablet (no `from`).
    Replace,
    /// Off a live node holding too many (its replica is dropped once the group
    /// no longer has it).
    Rebalance,
}

/// Put a replica of `tablet` (of table `table`, as the catalog has it) on node
/// `to`, in place of node `from`'s if set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaMove {
    pub table: String,
    pub tablet: TabletInfo,
    pub from: Option<NodeEntry>,
    pub to: NodeEntry,
    pub kind: MoveKind,
}

/// What evens out the load after a pass's re-replications.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Balance {
    /// Nothing: the pass placed a replica, or a node is in doubt (missed, not
    /// yet gone: it may come back).
    Wait,
    /// Move one replica from the node holding the most to the one holding the
    /// fewest.
    MoveReplica(ReplicaMove),
    /// Replicas are even: look at the leaders ([`leader_move`]).
    EvenLeaders,
}

/// One placement check of the master (each second): keep every tablet at its
/// replication factor, then even out the load.
///
/// A replica held by a node gone for longer than the node timeout moves to a
/// live node holding no replica of that tablet (the one with the fewest
/// replicas); a tablet with fewer replicas than the replication factor (created
/// while a node was down) gets one more on such a node. At most one change per
/// tablet per pass. Take the moves one by one ([`Pass::next_move`]), telling the
/// pass of each one carried out ([`Pass::moved`]); then ask [`Pass::balance`].
pub struct Pass<'a> {
    tables: &'a [TableInfo],
    dead: Vec<NodeEntry>,
    live: Vec<NodeEntry>,
    /// No node between missed (not live) and gone (dead).
    settled: bool,
    rf: usize,
    /// Replicas per live node's address (the master group's not counted).
    load: HashMap<String, usize>,
    /// Each user tablet's approximate size, as its leader last reported it
    /// ([`Pass::with_sizes`]; empty: every tablet weighs the same).
    sizes: HashMap<TabletId, u64>,
    /// The next (table, tablet) to look at.
    at: (usize, usize),
    /// Moves handed out.
    placed: usize,
}

impl<'a> Pass<'a> {
    /// A pass over `tables` at `now`, the nodes as last heard from.
    pub fn new(tables: &'a [TableInfo], heard: &Heard, now: Micros, rules: Rules) -> Self {
        let dead = heard.iter().filter(|(_, (_, seen))| elapsed(now, *seen) >= rules.node_timeout).map(|(id, (a, _))| (*id, a.clone())).collect();
        let live = live_nodes(heard, now);
        let settled = heard.values().all(|(_, seen)| elapsed(now, *seen) < NODE_LIVENESS || elapsed(now, *seen) >= rules.node_timeout);
        let rf = replicas_per_tablet(rules.replication_factor, live.len());
        let mut load: HashMap<String, usize> = live.iter().map(|(_, a)| (a.clone(), 0)).collect();
        // (The master group's replicas are not counted: they stay where they are.)
        for ti in tables.iter().filter(|t| t.name != MASTER_TABLE_NAME).flat_map(|t| &t.tablets) {
            for r in &ti.replicas {
                if let Some(n) = load.get_mut(r) {
                    *n += 1;
                }
            }
        }
        Pass { tables, dead, live, settled, rf, load, sizes: HashMap::new(), at: (0, 0), placed: 0 }
    }

    /// Balance by size too ([`Pass::balance`]): tablets' approximate sizes
    /// (those not reported weigh as the average).
    pub fn with_sizes(mut self, sizes: HashMap<TabletId, u64>) -> Self {
        self.sizes = sizes;
        self
    }

    /// Each user tablet's weight in the balance: `(1 + size / average) / 2`, so
    /// that tablets of the average size (and all of them while no size is
    /// known) weigh 1 (a replica count), an empty one 1/2, one of ten times
    /// the average 5.5. (A split's halves are tablets of their own: a node
    /// holding a large table's many small tablets weighs what it holds.)
    fn weights(&self) -> HashMap<TabletId, f64> {
        let user = || self.tables.iter().filter(|t| t.name != MASTER_TABLE_NAME).flat_map(|t| &t.tablets);
        let known: Vec<u64> = user().filter_map(|ti| self.sizes.get(&ti.id).copied()).collect();
        let average = if known.is_empty() { 0.0 } else { known.iter().sum::<u64>() as f64 / known.len() as f64 };
        user()
            .map(|ti| {
                let w = match self.sizes.get(&ti.id) {
                    Some(&b) if average > 0.0 => (1.0 + b as f64 / average) / 2.0,
                    _ => 1.0,
                };
                (ti.id, w)
            })
            .collect()
    }

    /// The live nodes, by id.
    pub fn live(&self) -> &[NodeEntry] {
        &self.live
    }

    /// The next re-replication, tables and tablets in order (`None`: done).
    pub fn next_move(&mut self) -> Option<ReplicaMove> {
        let tables = self.tables;
        while let Some(t) = tables.get(self.at.0) {
            let Some(ti) = t.tablets.get(self.at.1) else {
                self.at = (self.at.0 + 1, 0);
                continue;
            };
            self.at.1 += 1;
            let gone = self.dead.iter().find(|(_, a)| ti.replicas.contains(a));
            if gone.is_none() && ti.replicas.len() >= self.rf {
                continue;
            }
            let load = &self.load;
            let Some(to) = self.live.iter().filter(|(_, a)| !ti.replicas.contains(a)).min_by_key(|(_, a)| load.get(a).copied().unwrap_or(0)).cloned() else {
                continue; // no node to put it on
            };
            self.placed += 1;
            return Some(ReplicaMove { table: t.name.clone(), tablet: ti.clone(), from: gone.cloned(), to, kind: MoveKind::Replace });
        }
        None
    }

    /// Move `m` was carried out: its node holds one more replica.
    pub fn moved(&mut self, m: &ReplicaMove) {
        *self.load.entry(m.to.1.clone()).or_default() += 1;
    }

    /// With every tablet placed and no node in doubt: even out the load, by
    /// replicas weighted by size ([`Pass::weights`]; by count while sizes are
    /// unknown). When the live node with the heaviest load has two or more
    /// (two average replicas) than the one with the lightest (a node joined,
    /// came back empty, or its tablets grew), move one replica from it to that
    /// one: a tablet it holds and the other does not, lighter than the
    /// difference (so the spread of loads strictly shrinks: no move undoes
    /// another), preferably one it does not lead, then the one nearest half
    /// the difference. One move per pass, so a joining node fills up gradually
    /// while the cluster serves.
    pub fn balance(&self) -> Balance {
        if self.placed != 0 || !self.settled {
            return Balance::Wait;
        }
        let weights = self.weights();
        let mut load: HashMap<&str, f64> = self.live.iter().map(|(_, a)| (a.as_str(), 0.0)).collect();
        for ti in self.tables.iter().filter(|t| t.name != MASTER_TABLE_NAME).flat_map(|t| &t.tablets) {
            for r in &ti.replicas {
                if let Some(l) = load.get_mut(r.as_str()) {
                    *l += weights[&ti.id];
                }
            }
        }
        let of = |a: &String| load.get(a.as_str()).copied().unwrap_or(0.0);
        // (Ties: the last of the heaviest, the first of the lightest.)
        let (Some(heavy), Some(light)) =
            (self.live.iter().max_by(|x, y| of(&x.1).total_cmp(&of(&y.1))), self.live.iter().min_by(|x, y| of(&x.1).total_cmp(&of(&y.1))))
        else {
            return Balance::EvenLeaders;
        };
        let diff = of(&heavy.1) - of(&light.1);
        if diff < 2.0 - 1e-9 {
            return Balance::EvenLeaders;
        }
        let candidates = self.tables.iter().filter(|t| t.name != MASTER_TABLE_NAME).flat_map(|t| t.tablets.iter().map(move |ti| (t, ti)));
        let movable = candidates.filter(|(_, ti)| ti.replicas.contains(&heavy.1) && !ti.replicas.contains(&light.1) && weights[&ti.id] < diff - 1e-9);
        let fit = |ti: &TabletInfo| (ti.leader == heavy.1, (2.0 * weights[&ti.id] - diff).abs());
        let Some((t, ti)) = movable.min_by(|(_, a), (_, b)| {
            let (fa, fb) = (fit(a), fit(b));
            fa.0.cmp(&fb.0).then(fa.1.total_cmp(&fb.1))
        }) else {
            return Balance::EvenLeaders;
        };
        Balance::MoveReplica(ReplicaMove { table: t.name.clone(), tablet: ti.clone(), from: Some(heavy.clone()), to: light.clone(), kind: MoveKind::Rebalance })
    }
}

/// Hand the leadership of `tablet` from node `from` to node `to`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderMove {
    pub tablet: TabletId,
    pub from: NodeEntry,
    pub to: NodeEntry,
}

/// Replicas being even: when the live node leading the most user tablets leads
/// two or more more than the one leading the fewest (leaders pile up on the
/// nodes that stayed up while another restarted), hand one leadership from the
/// first to the second, for a tablet both hold. Leaders are as the nodes last
/// said (`reports`; this node `me` leads `mine`); nothing moves while a live
/// node's report is missing or older than [`NODE_LIVENESS`], nor within
/// [`LEADER_MOVE_INTERVAL`] of the last move (at `last_move`).
pub fn leader_move(
    tables: &[TableInfo],
    live: &[NodeEntry],
    me: u64,
    mine: &[TabletId],
    reports: &LeaderReports,
    now: Micros,
    last_move: Micros,
) -> Option<LeaderMove> {
    if elapsed(now, last_move) < LEADER_MOVE_INTERVAL {
        return None;
    }
    let user: HashMap<TabletId, &TabletInfo> =
        tables.iter().filter(|t| t.name != MASTER_TABLE_NAME).flat_map(|t| t.tablets.iter().map(|ti| (ti.id, ti))).collect();
    let mut led: BTreeMap<u64, Vec<TabletId>> = BTreeMap::new();
    for (id, _) in live {
        let own = (*id == me).then(|| mine.to_vec());
        // Not known yet: decide nothing.
        let tablets = own.or_else(|| reports.get(id).filter(|(_, at)| elapsed(now, *at) < NODE_LIVENESS).map(|(t, _)| t.clone()))?;
        led.insert(*id, tablets.into_iter().filter(|t| user.contains_key(t)).collect());
    }
    let (Some((heavy, heavy_led)), Some((light, light_led))) = (led.iter().max_by_key(|(_, t)| t.len()), led.iter().min_by_key(|(_, t)| t.len())) else {
        return None;
    };
    if heavy_led.len() < light_led.len() + 2 {
        return None;
    }
    let addr = |id: u64| live.iter().find(|(n, _)| *n == id).map(|(_, a)| a.clone()).unwrap_or_default();
    let (heavy_addr, light_addr) = (addr(*heavy), addr(*light));
    let tablet = heavy_led.iter().copied().find(|t| user[t].replicas.contains(&light_addr))?;
    Some(LeaderMove { tablet, from: (*heavy, heavy_addr), to: (*light, light_addr) })
}

/// Since when each replica on a node has known no leader. A replica moved away
/// or whose table was dropped while its node was down hears from no leader (it
/// is no longer a member); one that has heard from none for the node timeout is
/// looked up in the catalog ([`is_orphan`]). (A replica being added hears from
/// its leader as soon as it is a learner; one whose whole group lost its quorum
/// is still in the catalog.)
#[derive(Default, Debug)]
pub struct Leaderless {
    since: HashMap<TabletId, Micros>,
}

impl Leaderless {
    /// Take in the node's replicas at `now` (tablet, whether it knows a leader):
    /// the ones without a leader for `timeout`, to be looked up (their wait
    /// starts over).
    pub fn due(&mut self, groups: &[(TabletId, bool)], now: Micros, timeout: Duration) -> Vec<TabletId> {
        let mut check = Vec::new();
        if !self.since.is_empty() {
            // (A set: with every replica leaderless, a scan per entry was quadratic.)
            let present: std::collections::HashSet<TabletId> = groups.iter().map(|(g, _)| *g).collect();
            self.since.retain(|id, _| present.contains(id));
        }
        for &(id, has_leader) in groups {
            if has_leader {
                self.since.remove(&id);
                continue;
            }
            let t = self.since.entry(id).or_insert(now);
            if elapsed(now, *t) >= timeout {
                check.push(id);
                *t = now;
            }
        }
        check
    }

    /// Replica `id` is being added (the catalog names it only once the move is
    /// done): a full timeout before it is looked at.
    pub fn forget(&mut self, id: TabletId) {
        self.since.remove(&id);
    }
}

/// What the catalog says of a tablet.
#[derive(Clone, Copy, Debug)]
pub enum Lookup<'a> {
    /// Where it is.
    Found(&'a TabletInfo),
    /// It does not exist (its table was dropped).
    NotFound,
    /// It split, and the catalog lists its halves in its place (their
    /// replicas are the master's business: created where the catalog names
    /// them, from the split or afresh).
    Split,
    /// The master cannot say now.
    Unknown,
}

/// Whether the replica at node address `here` of a tablet found so in the
/// catalog is an orphan, to be dropped (`false` when the catalog cannot say:
/// decide nothing).
pub fn is_orphan(lookup: Lookup<'_>, here: &str) -> bool {
    match lookup {
        Lookup::Found(ti) => !ti.replicas.iter().any(|r| r == here),
        Lookup::NotFound | Lookup::Split => true,
        Lookup::Unknown => false,
    }
}

/// How long a group may lead a tablet the catalog does not know before its
/// leader's replica is dropped ([`unknown_led_tablets`]), by default: a new
/// table's tablets lead before the catalog lists them, for the moment its
/// creation takes.
pub const UNKNOWN_LEADER_GRACE: Duration = Duration::from_secs(60);

/// Groups that lead a tablet the catalog does not know (`known`: every tablet
/// it lists, and the parents and halves of the splits it records), for
/// `grace` (`since`: when each was first seen so; updated):
/// a tablet whose table was dropped while it split, whose split applied after
/// the drop, elects a leader and is no orphan to its replicas. With each, the
/// node leading it (to drop that replica; the others then have no leader and
/// drop themselves as orphans). Leaders as the nodes last said (`reports`;
/// node `me` leads `mine`).
pub fn unknown_led_tablets(
    reports: &LeaderReports,
    me: u64,
    mine: &[TabletId],
    known: &std::collections::HashSet<TabletId>,
    since: &mut HashMap<TabletId, Micros>,
    now: Micros,
    grace: Duration,
) -> Vec<(TabletId, u64)> {
    let led = reports.iter().map(|(id, (t, _))| (*id, t.as_slice())).filter(|(id, _)| *id != me).chain(std::iter::once((me, mine)));
    let unknown: HashMap<TabletId, u64> = led.flat_map(|(node, ts)| ts.iter().filter(|t| !known.contains(t)).map(move |t| (*t, node))).collect();
    since.retain(|t, _| unknown.contains_key(t));
    let mut out: Vec<(TabletId, u64)> = unknown
        .into_iter()
        .filter(|(t, _)| {
            let first = *since.entry(*t).or_insert(now);
            elapsed(now, first) >= grace
        })
        .collect();
    out.sort();
    out
}

/// The RPC addresses of a group's `voters` (id, address as the group knows
/// it) to record in the catalog: each node's address from `directory` where it
/// has one. `None` when there are none (nothing to record).
pub fn voter_addresses(voters: &[(u64, String)], directory: &BTreeMap<u64, String>) -> Option<Vec<String>> {
    let addrs: Vec<String> = voters.iter().map(|(id, addr)| directory.get(id).cloned().unwrap_or_else(|| addr.clone())).filter(|a| !a.is_empty()).collect();
    (!addrs.is_empty() && addrs.len() == voters.len()).then_some(addrs)
}

/// What carrying out a [`ReplicaMove`] sends, in order: `CreateReplica` of
/// `tablet` (as it will be) with `members` to the new node; `ChangeReplicas`
/// (add `add`, remove `remove`) to the tablet's leader, never calling `skip` (a
/// dead node); the move to the catalog; then, for a move off a live node, drop
/// its replica (`drop_after`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MoveSteps {
    pub tablet: TabletInfo,
    pub members: Vec<NodeEntry>,
    pub add: NodeEntry,
    pub remove: Option<u64>,
    pub skip: Option<String>,
    pub drop_after: Option<String>,
}

/// The steps of move `m`: the members are the tablet's replicas but `from`'s,
/// with their ids from `directory` (0 when unknown), then `to`; the leader, if it
/// was `from`, becomes the first member.
pub fn move_steps(m: &ReplicaMove, directory: &BTreeMap<u64, String>) -> MoveSteps {
    let alive = m.kind == MoveKind::Rebalance;
    let from_addr = m.from.as_ref().map(|f| f.1.as_str());
    let mut members: Vec<NodeEntry> = Vec::new();
    for r in m.tablet.replicas.iter().filter(|r| Some(r.as_str()) != from_addr) {
        let id = directory.iter().find(|(_, a)| *a == r).map(|(id, _)| *id).unwrap_or(0);
        members.push((id, r.clone()));
    }
    members.push(m.to.clone());
    let mut moved = m.tablet.clone();
    moved.replicas = members.iter().map(|(_, a)| a.clone()).collect();
    if Some(moved.leader.as_str()) == from_addr {
        moved.leader = moved.replicas[0].clone();
    }
    MoveSteps {
        tablet: moved,
        members,
        add: m.to.clone(),
        remove: m.from.as_ref().map(|f| f.0),
        skip: if alive { None } else { from_addr.map(str::to_string) },
        drop_after: if alive { from_addr.map(str::to_string) } else { None },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pinax_common::TableId;
    use pinax_proto::Partition;

    const SEC: Micros = 1_000_000;
    /// A "now" far from zero, so that times before it exist.
    const NOW: Micros = 1_000 * SEC;

    fn rules() -> Rules {
        Rules { replication_factor: 3, node_timeout: Duration::from_secs(60) }
    }

    fn addr(n: u64) -> String {
        format!("n{n}:7100")
    }

    /// Nodes and how many seconds ago each was heard from.
    fn heard(ago: &[(u64, u64)]) -> Heard {
        ago.iter().map(|(id, s)| (*id, (addr(*id), NOW - s * SEC))).collect()
    }

    fn tablet(id: u64, replicas: &[u64]) -> TabletInfo {
        let replicas: Vec<String> = replicas.iter().map(|n| addr(*n)).collect();
        TabletInfo { id: TabletId(id), partition: Partition { start: vec![], end: None }, leader: replicas[0].clone(), replicas }
    }

    fn table(name: &str, tablets: Vec<TabletInfo>) -> TableInfo {
        TableInfo {
            id: TableId(tablets[0].id.0 - 1),
            name: name.into(),
            sharding: Sharding::Hash { tablets: tablets.len() as u32 },
            tablets,
            options: Default::default(),
        }
    }

    fn entry(n: u64) -> NodeEntry {
        (n, addr(n))
    }

    #[test]
    fn voters_are_recorded_at_their_nodes_addresses() {
        let dir: BTreeMap<u64, String> = [(1, addr(1)), (2, "moved:7100".to_string())].into();
        let voters = vec![(1, "old1".to_string()), (2, "old2".to_string()), (3, addr(3))];
        assert_eq!(voter_addresses(&voters, &dir), Some(vec![addr(1), "moved:7100".into(), addr(3)]));
        assert_eq!(voter_addresses(&[], &dir), None);
        assert_eq!(voter_addresses(&[(4, String::new())], &dir), None, "a voter without an address records nothing");
    }

    fn moves(pass: &mut Pass<'_>) -> Vec<ReplicaMove> {
        let mut out = Vec::new();
        while let Some(m) = pass.next_move() {
            pass.moved(&m);
            out.push(m);
        }
        out
    }

    #[test]
    fn a_node_gone_past_the_timeout_loses_its_replicas_to_the_least_loaded_live_nodes() {
        // Node 3 silent for 61 s; node 4 holds nothing, node 5 one replica.
        let tables = vec![table("t", vec![tablet(2, &[1, 2, 3]), tablet(3, &[2, 3, 1])]), table("u", vec![tablet(5, &[1, 2, 5])])];
        let h = heard(&[(1, 0), (2, 1), (3, 61), (4, 0), (5, 0)]);
        let mut pass = Pass::new(&tables, &h, NOW, rules());
        let got = moves(&mut pass);
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].tablet.id, got[0].from.clone(), got[0].to.clone(), got[0].kind), (TabletId(2), Some(entry(3)), entry(4), MoveKind::Replace));
        // Node 4 now holds one, as node 5: the first of the least loaded.
        assert_eq!((got[1].tablet.id, got[1].to.clone()), (TabletId(3), entry(4)));
        assert_eq!(got[1].table, "t");
        assert_eq!(pass.balance(), Balance::Wait, "nothing is evened out in a pass that placed replicas");
    }

    #[test]
    fn a_failed_move_leaves_the_load_as_it_was() {
        let tables = vec![table("t", vec![tablet(2, &[1, 3]), tablet(3, &[1, 3])])];
        let h = heard(&[(1, 0), (3, 61), (4, 0), (5, 0)]);
        let mut pass = Pass::new(&tables, &h, NOW, rules());
        let first = pass.next_move().unwrap();
        assert_eq!(first.to, entry(4));
        // Not carried out: node 4 is still the least loaded.
        assert_eq!(pass.next_move().unwrap().to, entry(4));
        assert_eq!(pass.next_move(), None);
    }

    #[test]
    fn a_node_missed_but_not_gone_keeps_its_replicas_and_nothing_is_evened_out() {
        let tables = vec![table("t", vec![tablet(2, &[1, 2, 3]), tablet(3, &[1, 2, 3]), tablet(4, &[1, 2, 3])])];
        // Node 3 missed for 59 s of a 60 s timeout; node 4 is empty.
        let h = heard(&[(1, 0), (2, 0), (3, 59), (4, 0)]);
        let mut pass = Pass::new(&tables, &h, NOW, rules());
        assert_eq!(pass.next_move(), None);
        assert_eq!(pass.balance(), Balance::Wait, "node 3 may come back");
        assert_eq!(pass.live(), &[entry(1), entry(2), entry(4)]);
    }

    #[test]
    fn an_under_replicated_tablet_gets_a_replica_and_the_master_group_is_placed_like_any_tablet() {
        let tables = vec![table(MASTER_TABLE_NAME, vec![tablet(9, &[1])]), table("t", vec![tablet(2, &[1, 2, 3])])];
        let h = heard(&[(1, 0), (2, 0), (3, 0)]);
        let mut pass = Pass::new(&tables, &h, NOW, rules());
        let got = moves(&mut pass);
        // The master group's replica is not counted: nodes 2 and 3 hold one each.
        // One change per tablet per pass.
        assert_eq!(got.iter().map(|m| (m.tablet.id, m.from.clone(), m.to.clone())).collect::<Vec<_>>(), vec![(TabletId(9), None, entry(2))]);
        assert_eq!(pass.next_move(), None);
    }

    #[test]
    fn an_uneven_load_moves_one_replica_preferably_one_the_heavy_node_does_not_lead() {
        // Node 4 joined: nodes 1-3 hold 3 each, node 4 none.
        let tables = vec![table("t", vec![tablet(2, &[1, 2, 3]), tablet(3, &[2, 3, 1]), tablet(4, &[3, 1, 2])])];
        let h = heard(&[(1, 0), (2, 0), (3, 0), (4, 0)]);
        let mut pass = Pass::new(&tables, &h, NOW, rules());
        assert_eq!(pass.next_move(), None);
        // The heavy node is the last of the most loaded (node 3); it leads tablet 4.
        match pass.balance() {
            Balance::MoveReplica(m) => {
                assert_eq!((m.tablet.id, m.from, m.to, m.kind), (TabletId(2), Some(entry(3)), entry(4), MoveKind::Rebalance));
            }
            other => panic!("{other:?}"),
        }
    }

    /// Carry out `pass`'s balance moves on `tables` until it has none (at most
    /// `max`); the moves, as (tablet, from, to).
    fn balance_until_even(tables: &mut [TableInfo], h: &Heard, rf: u32, sizes: &[(u64, u64)], max: usize) -> Vec<(u64, u64, u64)> {
        let sizes: HashMap<TabletId, u64> = sizes.iter().map(|&(id, b)| (TabletId(id), b)).collect();
        let mut moves = Vec::new();
        loop {
            let pass = Pass::new(tables, h, NOW, Rules { replication_factor: rf, ..rules() }).with_sizes(sizes.clone());
            let m = match pass.balance() {
                Balance::MoveReplica(m) => m,
                _ => return moves,
            };
            assert!(moves.len() < max, "more than {max} moves: {moves:?}");
            let steps = move_steps(&m, &BTreeMap::new());
            for t in tables.iter_mut() {
                for ti in t.tablets.iter_mut().filter(|ti| ti.id == m.tablet.id) {
                    *ti = steps.tablet.clone();
                }
            }
            moves.push((m.tablet.id.0, m.from.unwrap().0, m.to.0));
        }
    }

    #[test]
    fn large_tablets_move_off_a_node_with_as_many_replicas_as_the_others() {
        // One replica each, two tablets per node: node 1's are 100 times larger.
        let mut tables = vec![table("t", vec![tablet(10, &[1]), tablet(11, &[1]), tablet(12, &[2]), tablet(13, &[2]), tablet(14, &[3]), tablet(15, &[3])])];
        let h = heard(&[(1, 0), (2, 0), (3, 0)]);
        let sizes = [(10, 10_000), (11, 10_000), (12, 100), (13, 100), (14, 100), (15, 100)];
        // By count, nothing moves.
        assert_eq!(balance_until_even(&mut tables.clone(), &h, 1, &[], 0), vec![]);
        // By size, one large tablet goes to a node of small ones, and then the
        // loads are within two average replicas: nothing more.
        assert_eq!(balance_until_even(&mut tables, &h, 1, &sizes, 5), vec![(10, 1, 2)]);
    }

    #[test]
    fn balancing_by_size_ends_and_never_moves_a_replica_back() {
        // Three replicas of 12 tablets over 4 nodes (node 4 new and empty),
        // sizes spread over three orders of magnitude.
        let mut tablets = Vec::new();
        for i in 0..12u64 {
            let n = [1 + i % 3, 1 + (i + 1) % 3, 1 + (i + 2) % 3];
            tablets.push(tablet(20 + i, &n));
        }
        let mut tables = vec![table("t", tablets)];
        let h = heard(&[(1, 0), (2, 0), (3, 0), (4, 0)]);
        let sizes: Vec<(u64, u64)> = (0..12u64).map(|i| (20 + i, 10u64.pow((i % 4) as u32) * 1000)).collect();
        let moves = balance_until_even(&mut tables, &h, 3, &sizes, 40);
        assert!(!moves.is_empty());
        for (k, (t, from, to)) in moves.iter().enumerate() {
            assert!(!moves[k + 1..].iter().any(|(t2, f2, to2)| t2 == t && f2 == to && to2 == from), "tablet {t} moved back: {moves:?}");
        }
        // Every tablet keeps three replicas on distinct nodes.
        for ti in &tables[0].tablets {
            let mut r = ti.replicas.clone();
            r.sort();
            r.dedup();
            assert_eq!(r.len(), 3, "{ti:?}");
        }
    }

    #[test]
    fn a_group_leading_a_tablet_the_catalog_does_not_know_is_named_after_the_grace() {
        let known: std::collections::HashSet<TabletId> = [TabletId(1), TabletId(2)].into_iter().collect();
        let mut reports = LeaderReports::new();
        reports.insert(2, (vec![TabletId(2), TabletId(7)], NOW));
        reports.insert(3, (vec![TabletId(8)], NOW));
        let mut since = HashMap::new();
        let grace = UNKNOWN_LEADER_GRACE.as_micros() as Micros;
        assert_eq!(unknown_led_tablets(&reports, 1, &[TabletId(1), TabletId(9)], &known, &mut since, NOW, UNKNOWN_LEADER_GRACE), vec![]);
        assert_eq!(since.len(), 3);
        // Tablet 8 is listed meanwhile (a table created): forgotten.
        let known: std::collections::HashSet<TabletId> = [1, 2, 8].into_iter().map(TabletId).collect();
        assert_eq!(unknown_led_tablets(&reports, 1, &[TabletId(1), TabletId(9)], &known, &mut since, NOW + grace - 1, UNKNOWN_LEADER_GRACE), vec![]);
        assert!(!since.contains_key(&TabletId(8)));
        assert_eq!(
            unknown_led_tablets(&reports, 1, &[TabletId(1), TabletId(9)], &known, &mut since, NOW + grace, UNKNOWN_LEADER_GRACE),
            vec![(TabletId(7), 2), (TabletId(9), 1)]
        );
    }

    #[test]
    fn an_even_load_leaves_replicas_and_looks_at_leaders() {
        let tables = vec![table("t", vec![tablet(2, &[1, 2]), tablet(3, &[2, 3]), tablet(4, &[3, 1])])];
        let h = heard(&[(1, 0), (2, 0), (3, 0)]);
        let mut pass = Pass::new(&tables, &h, NOW, Rules { replication_factor: 2, ..rules() });
        assert_eq!(pass.next_move(), None);
        assert_eq!(pass.balance(), Balance::EvenLeaders);
    }

    #[test]
    fn leaders_even_out_one_at_a_time_once_every_live_node_reported() {
        let tables = vec![
            table("t", vec![tablet(2, &[1, 2, 3]), tablet(3, &[1, 2, 3]), tablet(4, &[1, 2, 3]), tablet(5, &[1, 2, 3])]),
            table(MASTER_TABLE_NAME, vec![tablet(9, &[1])]),
        ];
        let live = vec![entry(1), entry(2), entry(3)];
        let reports: LeaderReports = [(2, (vec![TabletId(3), TabletId(2), TabletId(4)], NOW - SEC)), (3, (vec![], NOW))].into_iter().collect();
        let long_ago = NOW - 10 * SEC;
        // Node 1 (this one) leads only the master group's tablet: not counted.
        let m = leader_move(&tables, &live, 1, &[TabletId(9)], &reports, NOW, long_ago).unwrap();
        // From node 2 to node 1, the first leader node 1 has a replica of, in
        // node 2's order.
        assert_eq!(m, LeaderMove { tablet: TabletId(3), from: entry(2), to: entry(1) });
        // Not within the interval of the last move.
        assert_eq!(leader_move(&tables, &live, 1, &[], &reports, NOW, NOW - SEC), None);
        // Not while a live node's report is missing or stale.
        let mut stale = reports.clone();
        stale.get_mut(&3).unwrap().1 = NOW - 6 * SEC;
        assert_eq!(leader_move(&tables, &live, 1, &[], &stale, NOW, long_ago), None);
        stale.remove(&3);
        assert_eq!(leader_move(&tables, &live, 1, &[], &stale, NOW, long_ago), None);
        // Ties: the heavy node is the last of the most leading, the light one the
        // first of the least.
        let two_ones: LeaderReports = [(2, (vec![TabletId(2), TabletId(3)], NOW)), (3, (vec![TabletId(4)], NOW))].into_iter().collect();
        assert_eq!(leader_move(&tables, &live, 1, &[], &two_ones, NOW, long_ago), Some(LeaderMove { tablet: TabletId(2), from: entry(2), to: entry(1) }));
        // Not for a difference of one.
        let even: LeaderReports = [(2, (vec![TabletId(2), TabletId(3)], NOW)), (3, (vec![TabletId(5)], NOW))].into_iter().collect();
        assert_eq!(leader_move(&tables, &live, 1, &[TabletId(4)], &even, NOW, long_ago), None);
    }

    #[test]
    fn a_replica_without_a_leader_for_the_timeout_is_looked_up_and_dropped_if_the_catalog_does_not_place_it() {
        let timeout = Duration::from_secs(60);
        let mut w = Leaderless::default();
        let groups = [(TabletId(2), false), (TabletId(3), true)];
        assert!(w.due(&groups, NOW, timeout).is_empty());
        assert!(w.due(&groups, NOW + 59 * SEC, timeout).is_empty());
        assert_eq!(w.due(&groups, NOW + 60 * SEC, timeout), vec![TabletId(2)]);
        // Its wait starts over; one that hears a leader, or is being added, forgets it.
        assert!(w.due(&groups, NOW + 61 * SEC, timeout).is_empty());
        assert_eq!(w.due(&groups, NOW + 120 * SEC, timeout), vec![TabletId(2)]);
        w.due(&[(TabletId(2), true)], NOW + 121 * SEC, timeout);
        assert!(w.due(&groups, NOW + 180 * SEC, timeout).is_empty());
        w.forget(TabletId(2));
        assert!(w.due(&groups, NOW + 200 * SEC, timeout).is_empty(), "a full timeout again");
        let ti = tablet(2, &[1, 2]);
        assert!(!is_orphan(Lookup::Found(&ti), &addr(2)));
        assert!(is_orphan(Lookup::Found(&ti), &addr(3)), "moved away");
        assert!(is_orphan(Lookup::NotFound, &addr(2)), "its table was dropped");
        assert!(is_orphan(Lookup::Split, &addr(2)), "it split: its keys are its halves' now");
        assert!(!is_orphan(Lookup::Unknown, &addr(3)), "the master cannot say: nothing is dropped");
    }

    #[test]
    fn a_move_replaces_the_old_member_and_its_leadership() {
        let directory: BTreeMap<u64, String> = [(1, addr(1)), (2, addr(2))].into_iter().collect();
        let mut ti = tablet(2, &[3, 1, 2]);
        ti.leader = addr(3);
        let dead = ReplicaMove { table: "t".into(), tablet: ti.clone(), from: Some(entry(3)), to: entry(4), kind: MoveKind::Replace };
        let s = move_steps(&dead, &directory);
        assert_eq!(s.members, vec![entry(1), entry(2), entry(4)]);
        assert_eq!((s.tablet.leader.as_str(), s.tablet.replicas.len()), (addr(1).as_str(), 3));
        assert_eq!((s.add, s.remove, s.skip, s.drop_after), (entry(4), Some(3), Some(addr(3)), None));
        let live = ReplicaMove { kind: MoveKind::Rebalance, ..dead };
        let s = move_steps(&live, &directory);
        assert_eq!((s.skip, s.drop_after), (None, Some(addr(3))));
        // Adding a replica: every member stays; an unknown address has id 0.
        let add = ReplicaMove { table: "t".into(), tablet: tablet(2, &[1, 5]), from: None, to: entry(4), kind: MoveKind::Replace };
        let s = move_steps(&add, &directory);
        assert_eq!(s.members, vec![entry(1), (0, addr(5)), entry(4)]);
        assert_eq!((s.tablet.leader, s.remove, s.skip), (addr(1), None, None));
    }

    #[test]
    fn a_new_tables_tablets_start_at_consecutive_nodes() {
        let live = vec![entry(1), entry(2), entry(3)];
        let mut plan = table("t", vec![tablet(5, &[1]), tablet(6, &[1])]);
        let placed = place_new_table(&mut plan, &live, 2, None);
        // Table id 4: the first tablet starts at node 4 % 3 = index 1.
        assert_eq!(placed.iter().map(|(_, m)| m.clone()).collect::<Vec<_>>(), vec![vec![entry(2), entry(3)], vec![entry(3), entry(1)]]);
        assert_eq!((plan.tablets[0].leader.clone(), plan.tablets[1].replicas.clone()), (addr(2), vec![addr(3), addr(1)]));
        let mut status = table("$status.3", vec![tablet(5, &[1])]);
        assert_eq!(place_new_table(&mut status, &live, 3, Some(3))[0].1, vec![entry(3), entry(1), entry(2)]);
        assert_eq!(new_table_sharding(Sharding::Hash { tablets: 0 }, 8, 7, 3), Sharding::Hash { tablets: 16 });
        assert_eq!(new_table_sharding(Sharding::Hash { tablets: 3 }, 8, 7, 3), Sharding::Hash { tablets: 3 });
        assert_eq!(replicas_per_tablet(3, 2), 2);
        assert_eq!(replicas_per_tablet(0, 2), 1);
        assert_eq!(live_nodes(&heard(&[(1, 4), (2, 5)]), NOW), vec![entry(1)]);
        assert_eq!(missed(NOW, NOW + SEC), NOW + SEC - 5 * SEC);
        assert_eq!(missed(NOW - 10 * SEC, NOW), NOW - 10 * SEC);
    }
}
