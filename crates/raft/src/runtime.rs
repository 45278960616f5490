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
//! thread: every [`TICK`] it gives each runtime nobody drove in that time two
//! rounds of its ready tasks and expired timers, then lets go of it. A runtime's
//! core is held by one thread at a time; a thread that finds it taken waits for
//! its own future (tokio wakes it when the holder lets go), so the ticker never
//! blocks behind a long wait.
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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Once, OnceLock, Weak};
use std::time::{Duration, Instant};

/// How often the ticker drives a runtime nobody else drove. Raft's timers are
/// 100 ms (heartbeats) and 500-1000 ms (elections): a few milliseconds late is
/// nothing to them.
pub const TICK: Duration = Duration::from_millis(5);

/// One group's runtime (see the module docs).
pub struct GroupRuntime {
    rt: tokio::runtime::Runtime,
    /// When a thread last finished driving it (milliseconds since [`epoch`]).
    driven_ms: AtomicU64,
}

/// Every live group runtime, for the ticker.
static RUNTIMES: Mutex<Vec<Weak<GroupRuntime>>> = Mutex::new(Vec::new());
static TICKER: Once = Once::new();

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
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let g = Arc::new(GroupRuntime { rt, driven_ms: AtomicU64::new(now_ms()) });
        RUNTIMES.lock().push(Arc::downgrade(&g));
        TICKER.call_once(|| {
            if let Err(e) = std::thread::Builder::new().name("raft-tick".into()).spawn(tick_forever) {
                panic!("invariant: the raft ticker thread starts: {e}");
            }
        });
        Ok(g)
    }

    /// Run `f` to completion on this thread, running the group's tasks meanwhile
    /// (unless another thread is driving them; then this one waits for `f`).
    /// Panics if called from inside a tokio runtime.
    pub fn block_on<F: Future>(&self, f: F) -> F::Output {
        let out = self.rt.block_on(f);
        self.driven_ms.store(now_ms(), Ordering::Relaxed);
        out
    }

    /// A handle to spawn tasks on the runtime.
    pub fn handle(&self) -> &tokio::runtime::Handle {
        self.rt.handle()
    }

    /// One tick: unless a thread drove the runtime within [`TICK`], run its ready
    /// tasks and expired timers twice over (tasks the first round's timers woke run
    /// in the second).
    fn tick(&self) {
        if now_ms().saturating_sub(self.driven_ms.load(Ordering::Relaxed)) < TICK.as_millis() as u64 {
            return;
        }
        self.block_on(async {
            tokio::task::yield_now().await;
            tokio::task::yield_now().await;
        });
    }
}

fn tick_forever() {
    loop {
        std::thread::sleep(TICK);
        let live: Vec<Arc<GroupRuntime>> = {
            let mut all = RUNTIMES.lock();
            all.retain(|w| w.strong_count() > 0);
            all.iter().filter_map(Weak::upgrade).collect()
        };
        for g in &live {
            g.tick();
        }
        // A runtime whose group went meanwhile is dropped here, outside any runtime.
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
