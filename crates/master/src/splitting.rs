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
//! Limits: at most [`SplitRules::max_outstanding`] splits under way at once
//! (requested or applied and not yet retired, manual ones included); never a
//! tablet of the catalog's own tables, one already splitting, or one whose
//! leader refused a split recently (too little data to find a middle key:
//! `backoff`). The largest tablets go first.
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
}

impl SplitRules {
    /// YugabyteDB's defaults (`tablet_split_low_phase_size_threshold_bytes`
    /// and its siblings), with two splits under way at once.
    pub const DEFAULT: SplitRules = SplitRules {
        low_bytes: 512 << 20,
        low_tablets_per_node: 8,
        high_bytes: 10 << 30,
        high_tablets_per_node: 24,
        force_bytes: 100 << 30,
        max_outstanding: 2,
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
}

/// The tablets to split now, largest first, at most as many as the
/// outstanding limit leaves room for; with each, its table's name.
pub fn candidates(rules: &SplitRules, input: &SplitInputs<'_>) -> Vec<(String, TabletId)> {
    let room = rules.max_outstanding.saturating_sub(input.splitting.len());
    if room == 0 {
        return Vec::new();
    }
    let mut over: Vec<(u64, &str, TabletId)> = Vec::new();
    for t in input.tables.iter().filter(|t| !t.name.starts_with(SYSTEM_TABLE_PREFIX)) {
        // A split not swapped in yet counts as its two halves.
        let under_way = t.tablets.iter().filter(|ti| input.splitting.contains(&ti.id)).count();
        let limit = threshold(rules, t.tablets.len() + under_way, input.live_nodes);
        for ti in &t.tablets {
            let Some(&size) = input.sizes.get(&ti.id) else {
                continue;
            };
            if size >= limit && !input.splitting.contains(&ti.id) && !input.backoff.contains(&ti.id) {
                over.push((size, &t.name, ti.id));
            }
        }
    }
    // Largest first; equal sizes by id, so the choice is stable.
    over.sort_by(|a, b| b.0.cmp(&a.0).then(a.2.cmp(&b.2)));
    over.into_iter().take(room).map(|(_, name, id)| (name.to_string(), id)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pinax_common::TableId;
    use pinax_proto::{Partition, Sharding, TabletInfo};

    fn table(name: &str, first_id: u64, tablets: usize) -> TableInfo {
        TableInfo {
            id: TableId(first_id),
            name: name.into(),
            sharding: Sharding::Range { split_points: Vec::new() },
            tablets: (0..tablets)
                .map(|i| TabletInfo {
                    id: TabletId(first_id + i as u64),
                    partition: Partition { start: if i == 0 { Vec::new() } else { vec![i as u8] }, end: None },
                    leader: String::new(),
                    replicas: Vec::new(),
                })
                .collect(),
        }
    }

    fn rules() -> SplitRules {
        SplitRules { low_bytes: 100, low_tablets_per_node: 2, high_bytes: 1000, high_tablets_per_node: 4, force_bytes: 10_000, max_outstanding: 3 }
    }

    fn pick(tables: &[TableInfo], sizes: &[(u64, u64)], live: usize, splitting: &[u64], backoff: &[u64]) -> Vec<u64> {
        let sizes: HashMap<TabletId, u64> = sizes.iter().map(|&(id, s)| (TabletId(id), s)).collect();
        let splitting: HashSet<TabletId> = splitting.iter().map(|&i| TabletId(i)).collect();
        let backoff: HashSet<TabletId> = backoff.iter().map(|&i| TabletId(i)).collect();
        let input = SplitInputs { tables, sizes: &sizes, live_nodes: live, splitting: &splitting, backoff: &backoff };
        candidates(&rules(), &input).into_iter().map(|(_, id)| id.0).collect()
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
}
