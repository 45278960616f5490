//! The executor of a scan request ([`ScanSpec`]) over the rows MVCC makes visible:
//! pushed-down filters, LIMIT and byte limits, counts, ANALYZE's sampling, and
//! aggregate partials (one set, or one per group), with the budget of keys one
//! request visits and where the next one resumes.
//!
//! It drives one [`Scanner`] key by key and never decides visibility: every key it
//! sees was visible to the read (or is skipped as hidden) whatever the request
//! asks. Invariants: a row the filter cannot decide here (or a stack of patches,
//! or a value it cannot fold) is shipped for the SQL layer to decide, never
//! dropped or counted; an answer stays bounded ([`MAX_GROUPS`],
//! [`MAX_SHIPPED_BYTES`]); a row's value is read only when the request returns it
//! or a filter needs it (a plain count reads none).

use crate::filter::{RowMatcher, Verdict};
use crate::Result;
use pinax_codec::patch;
use pinax_engine::Snapshot;
use pinax_mvcc::{MvccReader, ScanRange, Step, TxnStatusResolver, Want};
use pinax_proto::{AggGroup, AggValue, GroupKey, GroupState, ScanResult, ScanSpec};
use std::collections::BTreeMap;

/// Most groups one grouped scan request gathers; rows of further groups are
/// returned as rows (the caller folds them).
pub const MAX_GROUPS: usize = 10_000;

/// Bytes of undecided rows a count or aggregate request ships at most before it
/// stops (with `resume`): its answer stays well under the frame limit.
pub const MAX_SHIPPED_BYTES: usize = 8 << 20;

/// The answer of `reader` to the scan request `spec`: visible rows in
/// `[spec.start, spec.end)` in key order (or reverse), filtered, limited, counted
/// or aggregated as `spec` asks. A malformed request (bad filter, aggregates or
/// grouping) is refused before anything is read.
pub fn scan<S: Snapshot, R: TxnStatusResolver + ?Sized>(reader: &MvccReader<'_, S, R>, spec: &ScanSpec) -> Result<ScanResult> {
    let mut matcher = spec.filter.as_ref().map(RowMatcher::new).transpose()?;
    let mut out = ScanResult::default();
    let aggs = &spec.aggregates;
    if !aggs.is_empty() {
        match &matcher {
            Some(m) => m.check_aggregates(aggs)?,
            None => return Err(crate::Error::InvalidRequest("aggregates need a filter (for the attributes' layout)".into())),
        }
        out.aggregates = aggs.iter().map(|a| a.func.empty()).collect();
    }
    if let (Some(g), Some(m)) = (&spec.group_by, &matcher) {
        if aggs.is_empty() || g.att as usize >= m.attributes() {
            return Err(crate::Error::InvalidRequest(format!("bad grouping {g:?}")));
        }
    }
    let range = ScanRange { start: &spec.start, end: spec.end.as_deref(), reverse: spec.reverse, point: spec.point };
    let mut rows = reader.scanner(range)?;
    let mut groups: BTreeMap<GroupKey, GroupState> = BTreeMap::new();
    let mut bytes = 0usize;
    let mut examined = 0u64;
    loop {
        if spec.max_examined > 0 && examined >= spec.max_examined && rows.at_key() {
            // The budget is spent: continue after the last key visited.
            out.resume = rows.resume_after()?;
            break;
        }
        examined += 1;
        // Whether this key's row, if visible, is returned (its value is read).
        let returned = !spec.count_only && (spec.sample_every <= 1 || (out.count + 1) % spec.sample_every as u64 == 0);
        // A filtered row's value is read even when it is only counted.
        let want = if returned || matcher.is_some() { Want::Value } else { Want::Presence };
        let visible = match rows.next(want)? {
            Step::End => break,
            Step::Hidden => None,
            Step::Visible(v) => Some(v),
        };
        // A filtered count ships the rows the filter cannot decide (the SQL
        // layer decides them) and counts the others that match.
        let visible = match (visible, matcher.as_mut()) {
            // A stack is merged by the SQL layer, which decides it.
            (Some(v), Some(m)) => match if patch::is_stack(&v) { Verdict::Maybe } else { m.verdict(&v) } {
                Verdict::Yes if !aggs.is_empty() => {
                    let folded = match &spec.group_by {
                        None => m.fold(&v, aggs, &mut out.aggregates),
                        // A row whose key or values cannot be read here is
                        // shipped, and creates no group.
                        Some(g) => match m.group_key(&v, g) {
                            None => false,
                            // Past the cap, a row of a new group is shipped:
                            // a request's memory stays bounded whatever the
                            // number of groups.
                            Some((k, _)) if groups.len() >= MAX_GROUPS && !groups.contains_key(&k) => false,
                            Some((k, shown)) => {
                                let mut one: Vec<AggValue> = aggs.iter().map(|a| a.func.empty()).collect();
                                let ok = m.fold(&v, aggs, &mut one);
                                if ok {
                                    let (_, acc) = groups.entry(k).or_insert_with(|| (shown, aggs.iter().map(|a| a.func.empty()).collect()));
                                    for ((a, acc), p) in aggs.iter().zip(acc.iter_mut()).zip(one) {
                                        a.func.merge(acc, p);
                                    }
                                }
                                ok
                            }
                        },
                    };
                    if folded {
                        out.count += 1;
                    } else {
                        let user_key = rows.user_key()?;
                        bytes += user_key.len() + v.len();
                        out.rows.push((user_key, v));
                    }
                    None
                }
                Verdict::Yes => Some(v),
                Verdict::No => None,
                Verdict::Maybe if spec.count_only || !aggs.is_empty() => {
                    let user_key = rows.user_key()?;
                    bytes += user_key.len() + v.len();
                    out.rows.push((user_key, v));
                    None
                }
                Verdict::Maybe => Some(v),
            },
            (v, _) => v,
        };
        let mut full = false;
        if let Some(v) = visible {
            out.count += 1;
            if returned {
                let user_key = rows.user_key()?;
                bytes += user_key.len() + v.len();
                out.rows.push((user_key, v));
            }
            full = (spec.limit > 0 && out.count >= spec.limit as u64) || (spec.max_bytes > 0 && bytes >= spec.max_bytes);
        }
        // Rows shipped by a count or an aggregate (undecided ones) fill the
        // answer: it stays well under the frame limit.
        full |= (spec.count_only || !aggs.is_empty()) && bytes >= MAX_SHIPPED_BYTES;
        if rows.is_point() {
            // The range holds this one key, and nothing follows it.
            break;
        }
        if full {
            // Continue after the last key seen (counted, returned or not).
            out.resume = rows.resume_after()?;
            break;
        }
    }
    out.groups = groups.into_iter().map(|(key, (shown, values))| AggGroup { key, shown, values }).collect();
    Ok(out)
}
