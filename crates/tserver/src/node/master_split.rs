//! The master's side of tablet splits (docs/plans/tablet-splitting.md §4):
//! `SplitTablet`, and the master tick's driver of the splits recorded in the
//! catalog ([`pinax_master::SplitRecord`]).
//!
//! A split goes M1 → M4, each step idempotent, so any master resumes any
//! record from its state:
//! - M1: the catalog records the split and allocates the children's ids
//!   ([`Catalog::request_split`]); from then on `LocateTablet` of a child
//!   answers "not listed yet" (retryable), never "does not exist", so no
//!   node's orphan check drops a new half that has no leader yet.
//! - M2: the parent's leader splits it (`SplitReplica`, [`super::split`]); a
//!   parent that split already answers from its record, so a retry after any
//!   crash gets the same key and children. A split its leader refuses for
//!   good (no key inside the tablet, too little data to find a middle) is
//!   cancelled: its record goes, its ids are never used.
//! - M3: the catalog swaps the parent for the children in one write
//!   ([`Catalog::finish_split`]); `SplitTablet` answers here.
//! - M4 (the tick): once each child's group has a leader, its replica is
//!   created on every node the catalog names (a no-op where the split was
//!   applied; a fresh replica, caught up by its leader, on a node whose parent
//!   replica never applied it), the parent's replicas are dropped (its data
//!   shared with the children stays, see `EngineFactory::destroy`), and the
//!   record is retired; retired records are forgotten after
//!   [`RETIRED_SPLIT_RETENTION`].
//!
//! Automatic splits ([`Node::request_auto_splits`], each placement pass):
//! nodes report the sizes of the tablets they lead with their registration;
//! the master records M1 for the tablets [`splitting::candidates`] names
//! (limits and phases there), and the same pass drives them like any other.
//!
//! Recovery: a node that takes over as master drives every record it finds
//! in the catalog at its next placement pass: `Requested` from M2,
//! `Applied` from M4. A record is driven by one thread at a time
//! ([`Node::claim_split`]); placement moves no replica of a tablet whose split
//! is pending.

use super::{catalog_err, err, Node};
use crate::factory::EngineFactory;
use pinax_common::{ErrorCode, TabletId};
use pinax_master::{splitting, Catalog, Located, SplitRecord, SplitState};
use pinax_proto::{Request, Response, RpcError, TabletInfo};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// How long a retired split's record is kept: transactions that wrote to the
/// parent are resolved through it (its `LocateTablet` names the children)
/// until their status records are gone (`status_retention` after they
/// resolve) and no transaction that began before the split is still running.
pub(crate) const RETIRED_SPLIT_RETENTION: Duration = Duration::from_secs(3600);

/// How long `SplitTablet` waits for another thread driving the same split.
const SPLIT_WAIT: Duration = Duration::from_secs(60);

/// How long a tablet whose leader refused a split (no middle key: too little
/// flushed data) is not split automatically.
const SPLIT_REFUSAL_BACKOFF: Duration = Duration::from_secs(60);

/// The splits a thread of this node drives now (parent ids).
pub(super) type SplitsInFlight = parking_lot::Mutex<HashSet<TabletId>>;

/// A split this thread drives: let go when dropped.
pub(super) struct SplitClaim<'a> {
    in_flight: &'a SplitsInFlight,
    parent: TabletId,
}

impl Drop for SplitClaim<'_> {
    fn drop(&mut self) {
        self.in_flight.lock().remove(&self.parent);
    }
}

impl<F: EngineFactory> Node<F> {
    /// Master: `SplitTablet` (M1 to M3; see the module docs).
    pub(in crate::node) fn split_tablet(&self, tablet: TabletId, at: Option<Vec<u8>>) -> Result<Response, RpcError> {
        let catalog = self.catalog()?;
        let r = catalog.request_split(tablet, at, self.now()).map_err(catalog_err)?;
        super::crash::point("master.recorded");
        if r.state == SplitState::Requested {
            tracing::info!(tablet_id = tablet.0, left = r.children[0].0, right = r.children[1].0, table = %r.table, "tablet split requested");
        }
        let deadline = Instant::now() + SPLIT_WAIT;
        let claim = loop {
            if let Some(c) = self.claim_split(tablet) {
                break c;
            }
            if Instant::now() >= deadline {
                return Err(err(ErrorCode::Unavailable, format!("the split of tablet {} is still under way; try again", tablet.0)));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // (Another thread may have moved it on meanwhile.)
        let r = catalog
            .split_of(tablet)
            .map_err(catalog_err)?
            .ok_or_else(|| err(ErrorCode::TabletNotFound, format!("tablet {} was dropped while it split", tablet.0)))?;
        let r = self.split_and_swap(&catalog, r, &claim)?;
        let at = r.at().map(<[u8]>::to_vec).unwrap_or_default();
        let children = r.children.iter().map(|c| self.listed_or_planned(&catalog, &r, *c, &at)).collect::<Result<Vec<_>, _>>()?;
        Ok(Response::Split { parent: tablet, at, children })
    }

    /// Child `child` of split `r` (at `at`) as the catalog lists it, or as the
    /// swap listed it if it is gone from the table since (split again).
    fn listed_or_planned(&self, catalog: &Catalog<F::Engine>, r: &SplitRecord, child: TabletId, at: &[u8]) -> Result<TabletInfo, RpcError> {
        match catalog.locate(child).map_err(catalog_err)? {
            Located::Tablet(ti) => Ok(ti),
            _ => r.child_infos(at).into_iter().find(|ti| ti.id == child).ok_or_else(|| err(ErrorCode::Internal, "a split record without its child")),
        }
    }

    /// Drive split `parent` from this thread, unless another one does.
    pub(super) fn claim_split(&self, parent: TabletId) -> Option<SplitClaim<'_>> {
        let fresh = self.splits_in_flight.lock().insert(parent);
        // (Made only when claimed: a claim dropped lets the split go.)
        fresh.then(|| SplitClaim { in_flight: &self.splits_in_flight, parent })
    }

    /// M2 and M3 of split `r` (claimed): the parent's leader splits it, then
    /// the catalog lists the halves. A record already swapped is returned as
    /// it is.
    fn split_and_swap(&self, catalog: &Catalog<F::Engine>, r: SplitRecord, _claim: &SplitClaim<'_>) -> Result<SplitRecord, RpcError> {
        if r.state != SplitState::Requested {
            return Ok(r);
        }
        let parent = r.parent.id;
        // Where the parent is now (a leader or replica moved since the request).
        let ti = match catalog.locate(parent).map_err(catalog_err)? {
            Located::Tablet(ti) => ti,
            _ => r.parent.clone(),
        };
        let req = || Request::SplitReplica { tablet: parent, children: r.children, at: r.requested_at.clone() };
        let refused = |e: &RpcError| e.code == ErrorCode::InvalidRequest;
        let at = match self.call_leader(&ti, None, req, refused) {
            Ok(Response::SplitDone { at, .. }) => at,
            Ok(other) => return Err(err(ErrorCode::Internal, format!("unexpected answer to SplitReplica: {other:?}"))),
            Err(e) if refused(&e) => {
                // Refused before anything was proposed: the split will never
                // happen as recorded. Its ids stay used.
                tracing::info!(tablet_id = parent.0, error = %e, "tablet split refused by its leader; cancelled");
                catalog.cancel_split(parent).map_err(catalog_err)?;
                self.split_refused.lock().insert(parent, self.now());
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        let table = catalog.finish_split(parent, &at, r.children, self.now()).map_err(catalog_err)?;
        super::crash::point("master.swapped");
        self.locations.lock().remove(&parent);
        tracing::info!(tablet_id = parent.0, left = r.children[0].0, right = r.children[1].0, table = %table.name, "tablet split; the catalog lists its halves");
        catalog.split_of(parent).map_err(catalog_err)?.ok_or_else(|| err(ErrorCode::TabletNotFound, format!("tablet {} was dropped while it split", parent.0)))
    }

    /// M4 of split `r` (claimed, swapped): each child's replicas on every node
    /// the catalog names, once its group has a leader; then the parent's
    /// replicas dropped (best effort: a node that is down drops its replica
    /// itself later, as an orphan) and the record retired. An error leaves
    /// the record as it is, for the next tick.
    fn place_children(&self, catalog: &Catalog<F::Engine>, r: &SplitRecord, _claim: &SplitClaim<'_>) -> Result<(), RpcError> {
        let parent = r.parent.id;
        for child in r.children {
            // A child that split again is its own record's business.
            let Located::Tablet(ti) = catalog.locate(child).map_err(catalog_err)? else {
                continue;
            };
            let members = match self.call_leader(&ti, None, || Request::GroupMembers { tablet: child }, |_| false)? {
                Response::Members(m) => m,
                other => return Err(err(ErrorCode::Internal, format!("unexpected answer to GroupMembers: {other:?}"))),
            };
            for addr in &ti.replicas {
                self.call_node(addr, Request::CreateReplica { tablet: ti.clone(), members: members.clone(), bootstrap: false })
                    .map_err(|e| err(e.code, format!("creating the replica of tablet {} on {addr}: {}", child.0, e.message)))?;
            }
        }
        super::crash::point("cleanup.created");
        for addr in &r.parent.replicas {
            if let Err(e) = self.call_node(addr, Request::DropReplica { tablet: parent }) {
                tracing::warn!(tablet_id = parent.0, %addr, error = %e, "could not drop a split tablet's replica; the node drops it later");
            }
        }
        super::crash::point("cleanup.dropped");
        catalog.retire_split(parent, self.now()).map_err(catalog_err)?;
        tracing::info!(tablet_id = parent.0, "split tablet retired: its halves are placed, its replicas dropped");
        Ok(())
    }

    /// Master, each placement pass: record the splits of tablets grown past
    /// their size threshold or hot for long enough ([`splitting::candidates`],
    /// from what their leaders reported); [`Node::drive_splits`] carries them
    /// out. Reports not made again for a while (a leader gone) are forgotten,
    /// and so are refusals after [`SPLIT_REFUSAL_BACKOFF`].
    pub(super) fn request_auto_splits(&self) {
        let Some(rules) = self.cfg.auto_split else {
            return;
        };
        let Ok(catalog) = self.catalog() else {
            return;
        };
        let now = self.now();
        let older = |since: u64, d: Duration| now.saturating_sub(since) > d.as_micros() as u64;
        let reported = self.tablet_reports_now();
        let sizes: HashMap<TabletId, u64> = reported.iter().map(|(id, seen)| (*id, seen.bytes)).collect();
        let hot: HashMap<TabletId, u64> =
            reported.iter().filter(|(_, seen)| seen.hot >= rules.load_reports.max(1)).map(|(id, seen)| (*id, seen.rate)).collect();
        let backoff: HashSet<TabletId> = {
            let mut refused = self.split_refused.lock();
            refused.retain(|_, at| !older(*at, SPLIT_REFUSAL_BACKOFF));
            refused.keys().copied().collect()
        };
        let (Ok(tables), Ok(records)) = (catalog.tables_shared(), catalog.splits()) else {
            return;
        };
        let splitting: HashSet<TabletId> = records.iter().filter(|r| !matches!(r.state, SplitState::Retired { .. })).map(|r| r.parent.id).collect();
        let live_nodes = self.live_nodes().len();
        let input = splitting::SplitInputs { tables: &tables, sizes: &sizes, live_nodes, splitting: &splitting, backoff: &backoff, hot: &hot };
        for (table, tablet) in splitting::candidates(&rules, &input) {
            let size = sizes.get(&tablet).copied().unwrap_or(0);
            let rate = hot.get(&tablet).copied();
            match catalog.request_split(tablet, None, now) {
                Ok(r) => {
                    super::crash::point("master.recorded");
                    // A hot tablet's streak starts again (its halves are new tablets anyway).
                    if let Some(seen) = self.tablet_reports.lock().get_mut(&tablet) {
                        seen.hot = 0;
                    }
                    tracing::info!(tablet_id = tablet.0, %table, size, hot_requests_per_sec = ?rate, left = r.children[0].0, right = r.children[1].0, "tablet past its split threshold or hot; split requested")
                }
                Err(e) => {
                    tracing::warn!(tablet_id = tablet.0, %table, error = %e, "could not request a tablet split");
                    self.split_refused.lock().insert(tablet, now);
                }
            }
        }
    }

    /// Master: what leaders reported of their tablets, less the reports not
    /// made again for a while (a leader gone, a tablet dropped or split;
    /// quiesced tablets are reported only in full reports).
    pub(super) fn tablet_reports_now(&self) -> HashMap<TabletId, SeenTablet> {
        let now = self.now();
        let stale = (self.cfg.size_report_interval * (3 * super::master_role::FULL_SIZE_REPORT_EVERY)).as_micros() as u64;
        let mut reported = self.tablet_reports.lock();
        reported.retain(|_, seen| now.saturating_sub(seen.at) <= stale);
        reported.clone()
    }

    /// Master, each placement pass: move every split recorded in the catalog
    /// on (a `Requested` one left by a failure or an earlier master from M2,
    /// an `Applied` one from M4) and forget old retired ones.
    pub(super) fn drive_splits(&self) {
        let Ok(catalog) = self.catalog() else {
            return;
        };
        let records = match catalog.splits() {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "reading the split records");
                return;
            }
        };
        for r in records {
            let parent = r.parent.id;
            let Some(claim) = self.claim_split(parent) else {
                continue;
            };
            let res = match r.state {
                SplitState::Requested => self.split_and_swap(&catalog, r, &claim).and_then(|r| self.place_children(&catalog, &r, &claim)),
                SplitState::Applied { .. } => self.place_children(&catalog, &r, &claim),
                SplitState::Retired { .. } => Ok(()),
            };
            if let Err(e) = res {
                tracing::debug!(tablet_id = parent.0, error = %e, "tablet split not done yet; retrying");
            }
        }
        let before = self.now().saturating_sub(RETIRED_SPLIT_RETENTION.as_micros() as u64);
        if let Err(e) = catalog.forget_retired_splits(before) {
            tracing::warn!(error = %e, "forgetting retired split records");
        }
    }

    /// Master: the tablets whose split is pending (placement moves none of
    /// their replicas: the halves start from the parent group's members).
    pub(super) fn splitting_tablets(&self) -> HashSet<TabletId> {
        let records = self.catalog().and_then(|c| c.splits().map_err(catalog_err)).unwrap_or_default();
        records.into_iter().filter(|r| r.state == SplitState::Requested).map(|r| r.parent.id).collect()
    }
}

/// Master: what a tablet's leader last reported of it.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct SeenTablet {
    /// Approximate bytes on disk.
    pub(super) bytes: u64,
    /// Requests a second.
    pub(super) rate: u64,
    /// Reports in a row that found it hot (`splitting::is_hot`).
    pub(super) hot: u32,
    /// When (placement clock).
    pub(super) at: pinax_master::placement::Micros,
}
