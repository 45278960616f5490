//! [`GroupRuntime`]: the tokio runtime one Raft group's tasks run on.
//!
//! Each group has a current-thread runtime of its own, driven by whichever thread
//! waits on the group: the RPC thread of a write (`RaftGroup::propose`), of a read
//! barrier, or of a Raft message from a peer (`RaftGroup::block_on`). That thread
//! runs the group's openraft tasks itself while it waits (the leader's log append
//! and fsync, the commit, the state machine's apply) and returns with the answer:
//! no hand-over to another thread and back. With a shared multi-thread runtime a
//! write woke a Raft worker, which woke the RPC thread again when it was done, and
//! tokio woke a second worker to look for work: ~4.7 context switches per
//! single-row write in the daemon, each costing tens of microseconds on a VM
//! (bench/results/2026-11-27-raft-runtime.txt has the figures).
//!
//! Work nobody waits on (timers: heartbeats, election timeouts, a campaign's
//! delay; replies from peers that arrive after the waiting write returned; the
//! state machine catching up on a follower) is driven by the process's ticker
//! thread: every [`TICK`] it gives each runtime nobody drove in that time, and
//! that has work waiting or may have, two rounds of its ready tasks and expired
//! timers, then lets go of it. Work waiting is a task woken from another thread
//! (a peer's reply: tokio's injection queue) or left behind by the last thread
//! that drove the runtime; timers cannot be seen from outside, so a runtime with
//! neither is visited every [`IDLE_TICK`] only (Raft's timers are 100 ms and
//! more): an idle group, the common case on a node of many tablets, is visited
//! a fifth as often (with the runtimes built without an I/O driver, and their
//! metrics kept: the ticker's CPU on an idle node of 200 tablets -60%, the
//! groups' own timers remain; bench/results/2026-11-27-idle-ticks.txt). A runtime's
//! core is held by one thread at a time; a thread that finds it taken waits for
//! its own future (tokio wakes it when the holder lets go), so the ticker never
//! blocks behind a long wait.
//!
//! Quiescence: an idle group costs nothing. Its group decides when nothing needs
//! its timers (see `group.rs`: a single-voter leader with everything applied, no
//! request for a while) and calls [`Quiescence::quiesce`]; from then on the ticker
//! does not visit the runtime at all (its timers stay unfired: nobody drives
//! them), unless a task was woken from another thread (tokio's injection queue:
//! a spawned task, a late reply), which wakes the group first. Any thread that
//! drives the runtime through [`GroupRuntime::block_on`] (a write, a read round, a
//! Raft message from a peer) wakes it too, before running anything: the timers
//! that expired meanwhile then fire as late timers do, and the group's own task
//! turns openraft's tick back on. The ticker checks quiesced runtimes only every
//! [`QUIESCED_CHECK`], the others every [`TICK`]; a woken one joins the others at
//! the next tick.
//!
//! Blocking calls to peers go to the node's shared runtime (its blocking pool),
//! not to a pool per group (see `network::Network::io`).
//!
//! Constraint (as before, with a shared runtime): code running inside a group's
//! tasks (log store, state machine) must not wait on a group; a thread holding a
//! lock the group's tasks take must not wait on the group either (the tasks run on
//! whichever thread waits, which would be blocked on that lock).

use parking_lot::Mutex;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Once, OnceLock, Weak};
use std::time::{Duration, Instant};

/// How often the ticker drives a runtime nobody else drove. Raft's timers are
/// 100 ms (heartbeats) and 500-1000 ms (elections): a few milliseconds late is
/// nothing to them.
pub const TICK: Duration = Duration::from_millis(5);

/// How often the ticker drives a runtime with no work seen waiting (for its
/// timers: heartbeats every 100 ms, elections after 500 ms and more).
pub const IDLE_TICK: Duration = Duration::from_millis(25);

/// How often the ticker looks at every quiesced runtime, for a task woken from
/// another thread without waking the group (a late reply: rare, since a group
/// quiesces only with nothing in flight; whoever brings the group work wakes it,
/// and the ticker takes the woken runtime into its list at its next tick). Each
/// look costs a runtime's cache misses: every 25 ms, 16,000 quiesced tablets
/// cost the ticker ~190 ms of CPU per second.
pub const QUIESCED_CHECK: Duration = Duration::from_millis(1000);

/// Whether a group is quiesced, and when it was last active (see the module
/// docs). Shared by the group's runtime (the ticker skips it while quiesced) and
/// the group's own task that decides to quiesce and waits to be woken.
#[derive(Default)]
pub struct Quiescence {
    quiesced: AtomicBool,
    /// When a thread last drove the runtime for a request, or the group was
    /// woken (milliseconds since [`epoch`]).
    active_ms: AtomicU64,
    woken: tokio::sync::Notify,
    /// Times the group quiesced (tests, metrics).
    count: AtomicU64,
    /// The group's runtime, handed to the ticker when the group is woken.
    runtime: OnceLock<Weak<GroupRuntime>>,
}

impl Quiescence {
    /// Whether the group is quiesced now.
    pub fn is_quiesced(&self) -> bool {
        self.quiesced.load(Ordering::SeqCst)
    }

    /// How many times the group quiesced.
    pub fn times_quiesced(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// The activity stamp to pass to [`Quiescence::quiesce`], and how long ago it is.
    pub fn idle(&self) -> (u64, Duration) {
        let at = self.active_ms.load(Ordering::SeqCst);
        (at, Duration::from_millis(now_ms().saturating_sub(at)))
    }

    /// Record activity and wake the group if it is quiesced (its task then resumes
    /// its timers). Cheap when awake: an atomic store and a load.
    pub fn wake(&self) {
        self.active_ms.store(now_ms(), Ordering::SeqCst);
        if self.quiesced.load(Ordering::SeqCst) && self.quiesced.swap(false, Ordering::SeqCst) {
            self.woken.notify_one();
            if let Some(rt) = self.runtime.get() {
                WOKEN_LIST.lock().push(rt.clone());
            }
            WOKEN.store(true, Ordering::Release);
        }
    }

    /// Quiesce, unless there was activity since stamp `seen` (from
    /// [`Quiescence::idle`]). The caller turned its timers off first; on `true`
    /// it waits in [`Quiescence::woken`] before turning them on again, on `false`
    /// it turns them on at once.
    ///
    /// A concurrent [`Quiescence::wake`] either comes before the flag is set (it
    /// moved the stamp: seen here, undone) or after (it clears the flag and
    /// leaves a permit: `woken` returns at once). Either way no wake is lost and
    /// no permit is left over for a later quiescence.
    pub fn quiesce(&self, seen: u64) -> bool {
        self.quiesced.store(true, Ordering::SeqCst);
        if self.active_ms.load(Ordering::SeqCst) != seen && self.quiesced.swap(false, Ordering::SeqCst) {
            return false;
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Wait until woken (after [`Quiescence::quiesce`] returned `true`).
    pub async fn woken(&self) {
        self.woken.notified().await;
        self.quiesced.store(false, Ordering::SeqCst);
    }
}

/// One group's runtime (see the module docs).
pub struct GroupRuntime {
    rt: tokio::runtime::Runtime,
    /// Its metrics (kept: making them from the handle clones it every time).
    metrics: tokio::runtime::RuntimeMetrics,
    /// When a thread last finished driving it (milliseconds since [`epoch`]).
    driven_ms: AtomicU64,
    /// When the ticker last drove it.
    ticked_ms: AtomicU64,
    /// Times the ticker drove it (tests).
    ticks: AtomicU64,
    /// Quiesced: the ticker leaves it alone (see the module docs).
    quiescence: Arc<Quiescence>,
}

/// Every live group runtime, for the ticker.
static RUNTIMES: Mutex<Vec<Weak<GroupRuntime>>> = Mutex::new(Vec::new());
static TICKER: Once = Once::new();
/// A quiesced runtime was woken: the ticker takes [`WOKEN_LIST`] into the runtimes
/// it drives at its next tick.
static WOKEN: AtomicBool = AtomicBool::new(false);
/// Runtimes woken from quiescence since the ticker last looked.
static WOKEN_LIST: Mutex<Vec<Weak<GroupRuntime>>> = Mutex::new(Vec::new());
/// Runtimes added to [`RUNTIMES`] so far (the ticker takes the list again when it changes).
static ADDED: AtomicU64 = AtomicU64::new(0);

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_ms() -> u64 {
    epoch().elapsed().as_millis() as u64
}

impl GroupRuntime {
    /// A new runtime, registered with the ticker (started on first use).
    pub fn new() -> std::io::Result<Arc<GroupRuntime>> {
        // Timers only: a group's network calls run on the node's shared runtime
        // (and its files are read and written synchronously), so parking needs no
        // I/O driver (an epoll_wait at every visit of the ticker).
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
        let now = now_ms();
        let metrics = rt.metrics();
        let quiescence = Arc::new(Quiescence { active_ms: AtomicU64::new(now), ..Default::default() });
        let g = Arc::new(GroupRuntime { rt, metrics, driven_ms: AtomicU64::new(now), ticked_ms: AtomicU64::new(now), ticks: AtomicU64::new(0), quiescence });
        let _ = g.quiescence.runtime.set(Arc::downgrade(&g));
        RUNTIMES.lock().push(Arc::downgrade(&g));
        ADDED.fetch_add(1, Ordering::Release);
        TICKER.call_once(|| {
            if let Err(e) = std::thread::Builder::new().name("raft-tick".into()).spawn(tick_forever) {
                panic!("invariant: the raft ticker thread starts: {e}");
            }
        });
        Ok(g)
    }

    /// Run `f` to completion on this thread, running the group's tasks meanwhile
    /// (unless another thread is driving them; then this one waits for `f`).
    /// Wakes the group first if it is quiesced: whoever drives it has a request.
    /// Panics if called from inside a tokio runtime.
    pub fn block_on<F: Future>(&self, f: F) -> F::Output {
        self.quiescence.wake();
        self.drive(f)
    }

    fn drive<F: Future>(&self, f: F) -> F::Output {
        let out = self.rt.block_on(f);
        self.driven_ms.store(now_ms(), Ordering::Relaxed);
        out
    }

    /// The group's quiescence state (see the module docs).
    pub fn quiescence(&self) -> &Arc<Quiescence> {
        &self.quiescence
    }

    /// A handle to spawn tasks on the runtime.
    pub fn handle(&self) -> &tokio::runtime::Handle {
        self.rt.handle()
    }

    /// Times the ticker drove this runtime.
    pub fn ticks(&self) -> u64 {
        self.ticks.load(Ordering::Relaxed)
    }

    /// One tick: unless a thread drove the runtime within [`TICK`], run its ready
    /// tasks and expired timers twice over (tasks the first round's timers woke run
    /// in the second), if a task was woken from another thread, a thread drove it
    /// since the last tick (it may have left ready tasks), or the last tick is
    /// [`IDLE_TICK`] old (timers).
    ///
    /// A quiesced runtime is skipped, unless a task was woken from another
    /// thread: then the group is woken (whatever woke the task may be followed by
    /// work only the runtime's own timers or local queue hold).
    fn tick(&self) {
        if self.quiescence.is_quiesced() {
            if self.metrics.global_queue_depth() == 0 {
                return;
            }
            self.quiescence.wake();
        }
        let now = now_ms();
        let driven = self.driven_ms.load(Ordering::Relaxed);
        if now.saturating_sub(driven) < TICK.as_millis() as u64 {
            return;
        }
        let ticked = self.ticked_ms.load(Ordering::Relaxed);
        let due = driven > ticked || now.saturating_sub(ticked) >= IDLE_TICK.as_millis() as u64;
        if !due && self.metrics.global_queue_depth() == 0 {
            return;
        }
        self.drive(async {
            tokio::task::yield_now().await;
            tokio::task::yield_now().await;
        });
        self.ticks.fetch_add(1, Ordering::Relaxed);
        // At or after the driven time block_on just stamped: nothing left behind.
        self.ticked_ms.store(now_ms().max(self.driven_ms.load(Ordering::Relaxed)), Ordering::Relaxed);
    }
}

/// The ticker's loop. It keeps its own list of the runtimes, taken again from
/// [`RUNTIMES`] only when one was added, and walks all of them only every
/// [`QUIESCED_CHECK`]; in between, only those awake at the last full walk or woken
/// since ([`WOKEN_LIST`], taken at the next [`TICK`]), dropping those that have
/// quiesced since, every [`IDLE_TICK`]. (A wake used to start a full walk: with
/// traffic reaching a few of 16,000 quiesced groups, that was a walk of all of
/// them at nearly every tick.) Even a check of a quiesced
/// runtime costs its cache misses: walking 1,600 quiesced runtimes every 5 ms was
/// ~32 ms of CPU per second (and taking the lock, upgrading every weak reference
/// and collecting them at each walk more again).
fn tick_forever() {
    let every = (QUIESCED_CHECK.as_millis() / TICK.as_millis()).max(1) as u64;
    let prune_every = (IDLE_TICK.as_millis() / TICK.as_millis()).max(1) as u64;
    // Weak references: a group's runtime (its tasks hold the group's engine) is
    // dropped by whoever drops the group, at once, not later on this thread: a
    // store closed here after the process began to exit (a test's end, the daemon's
    // return from main) aborted in RocksDB's destroyed statics.
    let mut live: Vec<Weak<GroupRuntime>> = Vec::new();
    let mut awake: Vec<Weak<GroupRuntime>> = Vec::new();
    let mut taken = u64::MAX;
    let mut walk = 0u64;
    loop {
        std::thread::sleep(TICK);
        walk += 1;
        let added = ADDED.load(Ordering::Acquire);
        let woken = WOKEN.swap(false, Ordering::AcqRel);
        let mut full = walk.is_multiple_of(every);
        if added != taken {
            taken = added;
            full = true;
            live = {
                let mut all = RUNTIMES.lock();
                all.retain(|w| w.strong_count() > 0);
                all.clone()
            };
        }
        if woken {
            // A full walk sees them anyway.
            let mut list = WOKEN_LIST.lock();
            if full {
                list.clear();
            } else {
                awake.append(&mut list);
            }
        }
        if full {
            awake.clear();
            live.retain(|w| w.strong_count() > 0);
            for w in &live {
                // A runtime whose group went during the tick is dropped here,
                // outside any runtime.
                if let Some(g) = w.upgrade() {
                    g.tick();
                    if !g.quiescence.is_quiesced() {
                        awake.push(w.clone());
                    }
                }
            }
        } else {
            for w in &awake {
                if let Some(g) = w.upgrade() {
                    g.tick();
                }
            }
            if walk.is_multiple_of(prune_every) {
                awake.retain(|w| w.upgrade().is_some_and(|g| !g.quiescence.is_quiesced()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn the_ticker_fires_timers_nobody_waits_on() {
        let g = GroupRuntime::new().unwrap();
        let fired = Arc::new(AtomicBool::new(false));
        let f = fired.clone();
        g.handle().spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            f.store(true, Ordering::SeqCst);
        });
        let deadline = Instant::now() + Duration::from_secs(5);
        while !fired.load(Ordering::SeqCst) {
            assert!(Instant::now() < deadline, "a timer of an undriven runtime never fired");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn an_idle_runtime_is_visited_every_idle_tick_and_a_woken_task_runs() {
        let g = GroupRuntime::new().unwrap();
        // Nothing to do: visited every IDLE_TICK (for its timers), not every TICK.
        let t0 = g.ticks();
        let start = Instant::now();
        std::thread::sleep(Duration::from_millis(300));
        let visits = g.ticks() - t0;
        let most = start.elapsed().as_millis() as u64 / IDLE_TICK.as_millis() as u64 + 2;
        assert!(visits <= most, "{visits} visits in {:?} (at most {most})", start.elapsed());
        // A task woken from another thread (a peer's reply) runs without anyone
        // waiting on the runtime.
        let (tx, rx) = std::sync::mpsc::channel();
        let (wake, woken) = tokio::sync::oneshot::channel::<()>();
        g.handle().spawn(async move {
            let _ = woken.await;
            let _ = tx.send(Instant::now());
        });
        std::thread::sleep(Duration::from_millis(50));
        let sent = Instant::now();
        wake.send(()).unwrap();
        let ran = rx.recv_timeout(Duration::from_secs(5)).expect("the woken task ran");
        assert!(ran >= sent);
    }

    #[test]
    fn a_quiesced_runtime_is_not_visited_until_woken() {
        let g = GroupRuntime::new().unwrap();
        let q = g.quiescence().clone();
        let (seen, _) = q.idle();
        assert!(q.quiesce(seen));
        let t0 = g.ticks();
        std::thread::sleep(IDLE_TICK * 8);
        assert_eq!(g.ticks(), t0, "the ticker visited a quiesced runtime");
        // A task spawned from another thread (the injection queue) wakes it and runs.
        let (tx, rx) = std::sync::mpsc::channel();
        g.handle().spawn(async move {
            let _ = tx.send(());
        });
        rx.recv_timeout(Duration::from_secs(5)).expect("the spawned task ran");
        assert!(!q.is_quiesced());
        // Quiesced again: a thread driving it for a request wakes it.
        let (seen, _) = q.idle();
        assert!(q.quiesce(seen));
        assert_eq!(g.block_on(async { 7 }), 7);
        assert!(!q.is_quiesced());
        g.block_on(async { tokio::time::timeout(Duration::from_secs(1), q.woken()).await }).expect("the wake left a permit for the waiting task");
    }

    #[test]
    fn a_woken_runtime_has_its_timers_driven_at_once() {
        let g = GroupRuntime::new().unwrap();
        let fired = Arc::new(AtomicBool::new(false));
        let f = fired.clone();
        // A timer of the group's own (not the injection queue), then quiesced.
        g.block_on(async move {
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                f.store(true, Ordering::SeqCst);
            });
            tokio::task::yield_now().await;
        });
        let q = g.quiescence().clone();
        let (seen, _) = q.idle();
        assert!(q.quiesce(seen));
        // Nobody drives a quiesced runtime's timers (the full walks look for
        // injected tasks only).
        std::thread::sleep(Duration::from_millis(250));
        assert!(!fired.load(Ordering::SeqCst), "a quiesced runtime's timer fired");
        // Woken (as a request does) without being driven: the ticker takes it up at
        // its next tick, long before its next full walk.
        let woke = Instant::now();
        q.wake();
        while !fired.load(Ordering::SeqCst) {
            assert!(woke.elapsed() < QUIESCED_CHECK / 2, "a woken runtime's expired timer waited for a full walk");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    #[test]
    fn a_wake_racing_a_quiescence_is_never_lost() {
        let q = Quiescence::default();
        // Activity after the stamp was read: quiescing is undone at once.
        let (seen, _) = q.idle();
        std::thread::sleep(Duration::from_millis(2));
        q.wake();
        assert!(!q.quiesce(seen));
        assert!(!q.is_quiesced());
        // A wake after quiescing leaves one permit, consumed by the next wait only.
        let (seen, _) = q.idle();
        assert!(q.quiesce(seen));
        q.wake();
        q.wake();
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(1), q.woken()).await.expect("woken");
            let (seen, _) = q.idle();
            assert!(q.quiesce(seen));
            assert!(tokio::time::timeout(Duration::from_millis(50), q.woken()).await.is_err(), "a stale permit woke a later quiescence");
        });
    }

    #[test]
    fn a_waiting_thread_runs_the_groups_tasks_itself() {
        let g = GroupRuntime::new().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let here = std::thread::current().id();
        let ran_on = g.block_on(async move {
            // Spawned from inside: queued on this runtime, run by this thread
            // while it waits (the ticker skips a runtime driven within a tick).
            tokio::spawn(async move {
                let _ = tx.send(std::thread::current().id());
            });
            rx.await.unwrap()
        });
        assert_eq!(ran_on, here, "the task ran on another thread than the one waiting");
    }

    #[test]
    fn many_threads_wait_on_one_runtime_at_once() {
        let g = GroupRuntime::new().unwrap();
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let g = g.clone();
                std::thread::spawn(move || {
                    for j in 0..200u64 {
                        let (tx, rx) = tokio::sync::oneshot::channel();
                        g.handle().spawn(async move {
                            tokio::task::yield_now().await;
                            let _ = tx.send(i * 1000 + j);
                        });
                        assert_eq!(g.block_on(async { rx.await.unwrap() }), i * 1000 + j);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}
