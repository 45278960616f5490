//! Automatic tablet splitting as pure decisions: which tablets the master
//! splits now, from the sizes their leaders report ([`candidates`]).
//!
//! As YugabyteDB does, the size that makes a tablet split depends on how many
//! tablets its table has per live node ([`threshold`]): while a table is
//! small in tablets (the *low phase*, fewer than
//! [`SplitRules::low_tablets_per_node`] per node) its tablets split at a low
//! size, so a table loaded into one range tablet soon spreads over every
//! node; then (the *high phase*) at a larger size; past
//! [`SplitRules::high_tablets_per_node`] only at [`SplitRules::force_bytes`].
//! A table's tablet count is its catalog list, where a split not swapped in
//! yet counts as its two halves.
//!
//! By load, as CockroachDB's and TiKV's load-based splitting: a tablet is *hot*
//! while its leader serves at least [`SplitRules::load_requests_per_sec`]
//! requests a second and that is at least [`SplitRules::load_share_percent`] of
//! what its node's led tablets serve ([`is_hot`]); one hot for
//! [`SplitRules::load_reports`] size reports in a row splits (at its size
//! middle), unless its table is past the high phase already (load alone never
//! splits a table into more than `high_tablets_per_node` tablets per node).
//!
//! Limits: at most [`SplitRules::max_outstanding`] splits under way at once
//! (requested or applied and not yet retired, manual ones included), and at
//! most [`SplitRules::max_per_node`] requested ones whose parent a node leads
//! (the part of a split its leader does: drain, flush, replicate); never a
//! tablet of a table whose `auto_split` option is off, of the catalog's own
//! tables, one already splitting, or one whose leader refused a split
//! recently (too little data to find a middle key: `backoff`). The largest
//! tablets go first, then the hot ones, busiest first.
//!
//! Nothing here does I/O or reads a clock: the master's node gathers the
//! inputs (the catalog's tables, the sizes nodes reported with their
//! `RegisterNode`, the split records) and requests the splits
//! (`pinax_tserver`'s `node/master_split.rs`).

use crate::catalog::SYSTEM_TABLE_PREFIX;
use pinax_common::TabletId;
use pinax_proto::TableInfo;
use std::collections::{HashMap, HashSet};

/// When tablets split by themselves (node flags `--split-*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitRules {
    /// Low phase: a tablet of a table with fewer than `low_tablets_per_node`
    /// tablets per live node splits at this size.
    pub low_bytes: u64,
    pub low_tablets_per_node: u32,
    /// High phase: below `high_tablets_per_node` tablets per live node, at
    /// this size.
    pub high_bytes: u64,
    pub high_tablets_per_node: u32,
    /// Any table: a tablet this large splits.
    pub force_bytes: u64,
    /// Splits under way at once, in the whole cluster.
    pub max_outstanding: usize,
    /// Requested splits at once whose parent one node leads.
    pub max_per_node: usize,
    /// By load: a tablet serving at least this many requests a second (0: no
    /// splits by load)...
    pub load_requests_per_sec: u64,
    /// ... and at least this share of its node's (percent)...
    pub load_share_percent: u32,
    /// ... in this many size reports in a row.
    pub load_reports: u32,
}

impl SplitRules {
    /// YugabyteDB's defaults (`tablet_split_low_phase_size_threshold_bytes`
    /// and its siblings), with two splits under way at once and one per node;
    /// by load, CockroachDB's 2,500 requests a second
    /// (`kv.range_split.load_qps_threshold`), half its node's, for a minute
    /// (six 10-second reports).
    pub const DEFAULT: SplitRules = SplitRules {
        low_bytes: 512 << 20,
        low_tablets_per_node: 8,
        high_bytes: 10 << 30,
        high_tablets_per_node: 24,
        force_bytes: 100 << 30,
        max_outstanding: 2,
        max_per_node: 1,
        load_requests_per_sec: 2500,
        load_share_percent: 50,
        load_reports: 6,
    };
}

impl Default for SplitRules {
    fn default() -> Self {
        SplitRules::DEFAULT
    }
}

/// The size at which a tablet of a table with `tablets` tablets splits, with
/// `live_nodes` nodes live.
pub fn threshold(rules: &SplitRules, tablets: usize, live_nodes: usize) -> u64 {
    let nodes = live_nodes.max(1);
    if tablets < rules.low_tablets_per_node as usize * nodes {
        rules.low_bytes
    } else if tablets < rules.high_tablets_per_node as usize * nodes {
        rules.high_bytes
    } else {
        rules.force_bytes
    }
}

/// Whether a tablet serving `rate` requests a second is hot, on a node whose
/// led tablets serve `node_rate` in all.
pub fn is_hot(rules: &SplitRules, rate: u64, node_rate: u64) -> bool {
    rules.load_requests_per_sec > 0
        && rate >= rules.load_requests_per_sec
        && rate.saturating_mul(100) >= node_rate.saturating_mul(rules.load_share_percent as u64)
}

/// What the master knows when it decides.
pub struct SplitInputs<'a> {
    /// The catalog's tables.
    pub tables: &'a [TableInfo],
    /// Each tablet's approximate size on disk, as its leader last reported.
    pub sizes: &'a HashMap<TabletId, u64>,
    pub live_nodes: usize,
    /// Tablets whose split is under way (requested or applied, not retired).
    pub splitting: &'a HashSet<TabletId>,
    /// Tablets not to split now (their leader refused a split recently).
    pub backoff: &'a HashSet<TabletId>,
    /// Tablets hot for `load_reports` reports in a row, with their request rate.
    pub hot: &'a HashMap<TabletId, u64>,
}

/// The tablets to split now (largest first, then the hot ones), at most as
/// many as the limits leave room for; with each, its table's name.
pub fn candidates(rules: &SplitRules, input: &SplitInputs<'_>) -> Vec<(String, TabletId)> {
    let room = rules.max_outstanding.saturating_sub(input.splitting.len());
    if room == 0 {
        return Vec::new();
    }
    // (order: 0 by size, 1 by load; weight: size or rate; table; tablet; its leader)
    let mut over: Vec<(u8, u64, &str, TabletId, &str)> = Vec::new();
    // Requested splits per leader (a parent still listed has not split yet).
    let mut per_node: HashMap<&str, usize> = HashMap::new();
    for t in input.tables.iter().filter(|t| !t.name.starts_with(SYSTEM_TABLE_PREFIX)) {
        // A split not swapped in yet counts as its two halves.
        let under_way = t.tablets.iter().filter(|ti| input.splitting.contains(&ti.id)).count();
        for ti in t.tablets.iter().filter(|ti| input.splitting.contains(&ti.id)) {
            *per_node.entry(ti.leader.as_str()).or_default() += 1;
        }
        if !t.options.auto_split {
            continue;
        }
        let tablets = t.tablets.len() + under_way;
        let limit = threshold(rules, tablets, input.live_nodes);
        let by_load = tablets < rules.high_tablets_per_node as usize * input.live_nodes.max(1);
        for ti in &t.tablets {
            if input.splitting.contains(&ti.id) || input.backoff.contains(&ti.id) {
                continue;
            }
            match (input.sizes.get(&ti.id), input.hot.get(&ti.id)) {
                (Some(&size), _) if size >= limit => over.push((0, size, &t.name, ti.id, &ti.leader)),
                (_, Some(&rate)) if by_load => over.push((1, rate, &t.name, ti.id, &ti.leader)),
                _ => {}
            }
        }
    }
    // Largest (busiest) first; equal weights by id, so the choice is stable.
    over.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(a.3.cmp(&b.3)));
    let mut out = Vec::new();
    for (_, _, name, id, leader) in over {
        if out.len() == room {
            break;
        }
        let n = per_node.entry(leader).or_default();
        if *n >= rules.max_per_node {
            continue;
        }
        *n += 1;
        out.push((name.to_string(), id));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pinax_common::TableId;
    use pinax_proto::{Partition, Sharding, TableOptions, TabletInfo};

    fn table(name: &str, first_id: u64, tablets: usize) -> TableInfo {
        TableInfo {
            id: TableId(first_id),
            name: name.into(),
            sharding: Sharding::Range { split_points: Vec::new() },
            tablets: (0..tablets)
                .map(|i| TabletInfo {
                    id: TabletId(first_id + i as u64),
                    partition: Partition { start: if i == 0 { Vec::new() } else { vec![i as u8] }, end: None },
                    leader: format!("n{}", i % 2),
                    replicas: Vec::new(),
                })
                .collect(),
            options: TableOptions::default(),
        }
    }

    fn rules() -> SplitRules {
        SplitRules {
            low_bytes: 100,
            low_tablets_per_node: 2,
            high_bytes: 1000,
            high_tablets_per_node: 4,
            force_bytes: 10_000,
            max_outstanding: 3,
            max_per_node: 3,
            load_requests_per_sec: 1000,
            load_share_percent: 50,
            load_reports: 2,
        }
    }

    fn pick(tables: &[TableInfo], sizes: &[(u64, u64)], live: usize, splitting: &[u64], backoff: &[u64]) -> Vec<u64> {
        pick_with(&rules(), tables, sizes, &[], live, splitting, backoff)
    }

    fn pick_with(r: &SplitRules, tables: &[TableInfo], sizes: &[(u64, u64)], hot: &[(u64, u64)], live: usize, splitting: &[u64], backoff: &[u64]) -> Vec<u64> {
        let sizes: HashMap<TabletId, u64> = sizes.iter().map(|&(id, s)| (TabletId(id), s)).collect();
        let hot: HashMap<TabletId, u64> = hot.iter().map(|&(id, s)| (TabletId(id), s)).collect();
        let splitting: HashSet<TabletId> = splitting.iter().map(|&i| TabletId(i)).collect();
        let backoff: HashSet<TabletId> = backoff.iter().map(|&i| TabletId(i)).collect();
        let input = SplitInputs { tables, sizes: &sizes, live_nodes: live, splitting: &splitting, backoff: &backoff, hot: &hot };
        candidates(r, &input).into_iter().map(|(_, id)| id.0).collect()
    }

    #[test]
    fn the_threshold_rises_with_the_tables_tablets_per_live_node() {
        let r = rules();
        // Two nodes: low phase below 4 tablets, high below 8, then forced only.
        assert_eq!(threshold(&r, 1, 2), 100);
        assert_eq!(threshold(&r, 3, 2), 100);
        assert_eq!(threshold(&r, 4, 2), 1000);
        assert_eq!(threshold(&r, 7, 2), 1000);
        assert_eq!(threshold(&r, 8, 2), 10_000);
        assert_eq!(threshold(&r, 1000, 2), 10_000);
        // More nodes, longer phases; no live node counts as one.
        assert_eq!(threshold(&r, 7, 4), 100);
        assert_eq!(threshold(&r, 2, 0), 1000);
    }

    #[test]
    fn tablets_over_their_tables_threshold_split_largest_first() {
        // t: 1 tablet (low phase, 100); u: 4 tablets on 2 nodes (high phase, 1000).
        let tables = [table("t", 10, 1), table("u", 20, 4)];
        let sizes = [(10, 150), (20, 500), (21, 5000), (22, 999), (23, 1000)];
        assert_eq!(pick(&tables, &sizes, 2, &[], &[]), vec![21, 23, 10]);
        // Exactly at the threshold splits; unreported tablets never do.
        assert_eq!(pick(&tables, &[(10, 100)], 2, &[], &[]), vec![10]);
        assert_eq!(pick(&tables, &[], 2, &[], &[]), Vec::<u64>::new());
    }

    #[test]
    fn splits_under_way_count_against_the_limit_and_are_not_asked_again() {
        let tables = [table("t", 10, 1), table("u", 20, 3)];
        let sizes = [(10, 400), (20, 300), (21, 200), (22, 150)];
        // Three at most; one under way (of another table) leaves two.
        assert_eq!(pick(&tables, &sizes, 2, &[], &[]), vec![10, 20, 21]);
        assert_eq!(pick(&tables, &sizes, 2, &[99], &[]), vec![10, 20]);
        // A splitting tablet is skipped (and counts).
        assert_eq!(pick(&tables, &sizes, 2, &[10], &[]), vec![20, 21]);
        assert_eq!(pick(&tables, &sizes, 2, &[10, 20, 99], &[]), Vec::<u64>::new());
        assert_eq!(pick(&tables, &sizes, 2, &[1, 2, 3, 4], &[]), Vec::<u64>::new());
        // u's split of 20 not swapped in yet counts as two tablets: 4 on 2
        // nodes, the high phase (1000), so u's others stay.
        assert_eq!(pick(&tables, &sizes, 2, &[20], &[]), vec![10]);
    }

    #[test]
    fn refused_tablets_and_the_catalogs_own_tables_never_split() {
        let tables = [table("t", 10, 1), table("$master", 1, 1), table("$status.1", 30, 1)];
        let sizes = [(10, 1 << 40), (1, 1 << 40), (30, 1 << 40)];
        assert_eq!(pick(&tables, &sizes, 1, &[], &[]), vec![10]);
        assert_eq!(pick(&tables, &sizes, 1, &[], &[10]), Vec::<u64>::new());
    }

    #[test]
    fn tables_with_auto_split_off_never_split_by_size_or_load() {
        let mut off = table("t", 10, 1);
        off.options.auto_split = false;
        let tables = [off, table("u", 20, 1)];
        let sizes = [(10, 1 << 40), (20, 150)];
        assert_eq!(pick_with(&rules(), &tables, &sizes, &[(10, 5000)], 2, &[], &[]), vec![20]);
    }

    #[test]
    fn each_node_leads_at_most_its_limit_of_requested_splits() {
        let r = SplitRules { max_per_node: 1, ..rules() };
        // u's tablets alternate leaders n0, n1, n0, n1 (high phase on 2 nodes: 1000).
        let tables = [table("u", 20, 4)];
        let sizes = [(20, 4000), (21, 3000), (22, 2000), (23, 1000)];
        assert_eq!(pick_with(&r, &tables, &sizes, &[], 2, &[], &[]), vec![20, 21]);
        // n0 has a requested split already (22, still listed): only n1's.
        assert_eq!(pick_with(&r, &tables, &sizes, &[], 2, &[22], &[]), vec![21]);
        // A split swapped in (parent no longer listed) counts only cluster-wide.
        assert_eq!(pick_with(&r, &tables, &sizes, &[], 2, &[99], &[]), vec![20, 21]);
    }

    #[test]
    fn hot_tablets_split_after_the_oversized_ones_until_the_high_phase_ends() {
        // t: 1 tablet; u: 4 tablets on 2 nodes (high phase: 8 and more are past it).
        let tables = [table("t", 10, 1), table("u", 20, 4), table("v", 30, 8)];
        let sizes = [(10, 50), (20, 5000)];
        let hot = [(10, 2000), (21, 3000), (30, 9000)];
        // 20 by size first; then 21 (busier) and 10; v is past the high phase.
        assert_eq!(pick_with(&rules(), &tables, &sizes, &hot, 2, &[], &[]), vec![20, 21, 10]);
        assert!(is_hot(&rules(), 1000, 2000));
        assert!(!is_hot(&rules(), 999, 999), "below the rate");
        assert!(!is_hot(&rules(), 1000, 2001), "below half its node's");
        assert!(!is_hot(&SplitRules { load_requests_per_sec: 0, ..rules() }, 1 << 40, 1), "off");
    }
}
