//! `pinax cluster`: a local multi-node cluster on loopback, for tests and demos.
//!
//! `pinax cluster start --nodes N` starts N nodes with data directories
//! `<dir>/node-1` … `<dir>/node-N` on RPC ports `base`, `base+1`, …: node 1 is the
//! master; the others join it. Every node runs PostgreSQL, node i on `--pg-port` +
//! i - 1, and DDL run on any of them reaches the others (the DDL log, see `ddl.rs`),
//! so psql works against any node. New tables get `--replication-factor` replicas
//! (default 3). The layout is kept in `<dir>/cluster.conf`, so `stop`, `kill NODE`
//! (SIGKILL of the node daemon; its PostgreSQL stays up and reconnects when the
//! node is back) and `restart NODE` need only the directory. `--disks N` gives
//! each node N data directories (`node-i/disk-1` …), its tablets spread over them.
//!
//! A restarted node joins through a running node. Node 1 bootstraps the cluster
//! only when the cluster starts: restarted after its directory was wiped it joins
//! as a new node (a fresh node 1 without `--join` would start a second cluster).

use crate::{alive, default_data_dir, has_data, read_pid, start, stop, DirArgs, NodeArgs};
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use pinax_client::Client;
use pinax_master::MASTER_TABLE_NAME;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Subcommand)]
pub enum ClusterCmd {
    /// Start (or restart) a local cluster of N nodes and wait until all have joined.
    Start(StartArgs),
    /// Stop every node of the cluster cleanly.
    Stop(ClusterDir),
    /// Kill node NODE (1-based) with SIGKILL.
    Kill(NodeSel),
    /// Start node NODE again (killing it first if it runs).
    Restart(NodeSel),
}

#[derive(Args)]
pub struct StartArgs {
    #[arg(long, default_value_t = 3)]
    nodes: u32,
    /// Parent of the nodes' data directories (default: the single-node default).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// RPC port of node 1; node i listens on base + i - 1.
    #[arg(long, default_value_t = 7100)]
    base_port: u16,
    /// PostgreSQL port of node 1; node i's is this + i - 1.
    #[arg(long, default_value_t = 5433)]
    pg_port: u16,
    #[arg(long, default_value_t = 3)]
    replication_factor: u32,
    /// Tablets a new hash-sharded table gets per node.
    #[arg(long, default_value_t = 8)]
    tablets_per_node: u32,
    /// Do not start PostgreSQL.
    #[arg(long)]
    no_postgres: bool,
    /// Data directories (disks) per node.
    #[arg(long, default_value_t = 1)]
    disks: u32,
}

#[derive(Args)]
pub struct ClusterDir {
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

#[derive(Args)]
pub struct NodeSel {
    /// Node number (1-based).
    node: u32,
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

/// What `cluster.conf` keeps.
struct Layout {
    nodes: u32,
    base_port: u16,
    pg_port: u16,
    replication_factor: u32,
    tablets_per_node: u32,
    no_postgres: bool,
    disks: u32,
}

fn conf(dir: &Path) -> PathBuf {
    dir.join("cluster.conf")
}

fn save(dir: &Path, l: &Layout) -> Result<()> {
    let text = format!(
        "nodes={}\nbase_port={}\npg_port={}\nreplication_factor={}\ntablets_per_node={}\nno_postgres={}\ndisks={}\n",
        l.nodes, l.base_port, l.pg_port, l.replication_factor, l.tablets_per_node, l.no_postgres, l.disks
    );
    std::fs::write(conf(dir), text).with_context(|| format!("writing {}", conf(dir).display()))
}

fn load(dir: &Path) -> Result<Layout> {
    let text = std::fs::read_to_string(conf(dir)).with_context(|| format!("no cluster in {} (reading cluster.conf)", dir.display()))?;
    let get = |k: &str| -> Result<String> {
        text.lines().find_map(|l| l.strip_prefix(&format!("{k}="))).map(str::to_string).with_context(|| format!("cluster.conf has no {k}"))
    };
    Ok(Layout {
        nodes: get("nodes")?.parse()?,
        base_port: get("base_port")?.parse()?,
        pg_port: get("pg_port")?.parse()?,
        replication_factor: get("replication_factor")?.parse()?,
        tablets_per_node: get("tablets_per_node")?.parse()?,
        no_postgres: get("no_postgres")?.parse()?,
        // Written since disks were configurable.
        disks: get("disks").map_or(Ok(1), |d| d.parse())?,
    })
}

fn node_dir(dir: &Path, i: u32) -> PathBuf {
    dir.join(format!("node-{i}"))
}

fn addr(l: &Layout, i: u32) -> String {
    format!("127.0.0.1:{}", l.base_port + (i - 1) as u16)
}

/// Whether node `i`'s daemon runs.
fn running(dir: &Path, i: u32) -> bool {
    read_pid(&node_dir(dir, i)).is_some_and(alive)
}

/// The node a restarted node `i` joins through: a running other node (node 1
/// first), or node 1 when none runs. None for node 1 when it keeps its data
/// (it knows its cluster) or no other node runs (a new cluster).
fn join_for(dir: &Path, l: &Layout, i: u32) -> Option<String> {
    let others: Vec<u32> = (1..=l.nodes).filter(|j| *j != i).collect();
    let live = others.iter().copied().find(|j| running(dir, *j));
    if i == 1 {
        let fresh = !node_dir(dir, 1).join("node_id").exists() && !has_data(&node_dir(dir, 1));
        return live.filter(|_| fresh).map(|j| addr(l, j));
    }
    Some(addr(l, live.unwrap_or(1)))
}

fn node_args(dir: &Path, l: &Layout, i: u32) -> NodeArgs {
    NodeArgs {
        data_dir: Some(node_dir(dir, i)),
        port: l.base_port + (i - 1) as u16,
        tablets_per_node: l.tablets_per_node,
        no_sync: false,
        txn_timeout_secs: 5,
        block_cache_mb: Some(128),
        memtable_mb: 128,
        min_free_mb: None,
        pg_port: l.pg_port + (i - 1) as u16,
        no_postgres: l.no_postgres,
        join: join_for(dir, l, i),
        replication_factor: l.replication_factor,
        node_timeout_secs: 60,
        fault_injection: false,
        max_clock_skew_ms: 500,
        data_dirs: if l.disks > 1 { (1..=l.disks).map(|d| node_dir(dir, i).join(format!("disk-{d}"))).collect() } else { Vec::new() },
        max_connections: None,
        clock_offset_ms: 0,
    }
}

pub fn run(cmd: ClusterCmd) -> Result<()> {
    match cmd {
        ClusterCmd::Start(a) => {
            let dir = default_data_dir(a.data_dir);
            if a.nodes == 0 {
                bail!("a cluster needs at least one node");
            }
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            if a.disks == 0 {
                bail!("a node needs at least one disk");
            }
            let l = Layout {
                nodes: a.nodes,
                base_port: a.base_port,
                pg_port: a.pg_port,
                replication_factor: a.replication_factor,
                tablets_per_node: a.tablets_per_node,
                no_postgres: a.no_postgres,
                disks: a.disks,
            };
            save(&dir, &l)?;
            // Node 1 first (the master), without PostgreSQL until every node joined:
            // tables created before that would get fewer replicas.
            let mut first = node_args(&dir, &l, 1);
            first.no_postgres = true;
            start(first)?;
            for i in 2..=l.nodes {
                start(node_args(&dir, &l, i))?;
            }
            wait_joined(&format!("127.0.0.1:{}", l.base_port), l.nodes as usize, l.replication_factor.min(l.nodes) as usize)?;
            start(node_args(&dir, &l, 1))?;
            println!("pinax cluster of {} nodes started (replication factor {}), data in {}", l.nodes, l.replication_factor.min(l.nodes), dir.display());
            Ok(())
        }
        ClusterCmd::Stop(a) => {
            let dir = default_data_dir(a.data_dir);
            let l = load(&dir)?;
            for i in (1..=l.nodes).rev() {
                stop(DirArgs { data_dir: Some(node_dir(&dir, i)), timeout_secs: crate::STOP_TIMEOUT_SECS })?;
            }
            Ok(())
        }
        ClusterCmd::Kill(a) => {
            let dir = default_data_dir(a.data_dir);
            let l = load(&dir)?;
            check_node(&l, a.node)?;
            kill(&node_dir(&dir, a.node))
        }
        ClusterCmd::Restart(a) => {
            let dir = default_data_dir(a.data_dir);
            let l = load(&dir)?;
            check_node(&l, a.node)?;
            kill(&node_dir(&dir, a.node))?;
            start(node_args(&dir, &l, a.node))
        }
    }
}

fn check_node(l: &Layout, n: u32) -> Result<()> {
    if n == 0 || n > l.nodes {
        bail!("node {n} is not in this cluster of {} nodes", l.nodes);
    }
    Ok(())
}

fn kill(dir: &Path) -> Result<()> {
    let Some(pid) = read_pid(dir) else {
        println!("node of {} is not running", dir.display());
        return Ok(());
    };
    if alive(pid) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL).context("killing the node")?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while alive(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        println!("killed node of {} (pid {pid})", dir.display());
    }
    Ok(())
}

/// Wait until the master at `master` reports `n` live nodes and its own group
/// has `masters` replicas. (The group grows by one replica a second as nodes
/// register; until it is whole, losing a node may take the master with it.)
fn wait_joined(master: &str, n: usize, masters: usize) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(c) = Client::connect(master) {
            let joined = c.status().is_ok_and(|s| s.nodes.len() >= n);
            if joined && c.refresh_table(MASTER_TABLE_NAME).is_ok_and(|t| t.tablets[0].replicas.len() >= masters) {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            bail!("the master at {master} did not see {n} nodes with {masters} master replicas within 60 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        Layout { nodes: 3, base_port: 7100, pg_port: 5433, replication_factor: 3, tablets_per_node: 2, no_postgres: true, disks: 1 }
    }

    fn set_running(dir: &Path, i: u32, on: bool) {
        std::fs::create_dir_all(node_dir(dir, i)).unwrap();
        let pid = if on { std::process::id() as i32 } else { i32::MAX };
        std::fs::write(node_dir(dir, i).join("pinax.pid"), pid.to_string()).unwrap();
    }

    #[test]
    fn a_restarted_node_joins_through_a_running_node_and_a_wiped_first_node_does_too() {
        let d = tempfile::tempdir().unwrap();
        let (dir, l) = (d.path(), layout());
        // A new cluster: node 1 bootstraps, the others join it.
        assert_eq!(join_for(dir, &l, 1), None);
        set_running(dir, 1, true);
        assert_eq!(join_for(dir, &l, 2).as_deref(), Some("127.0.0.1:7100"));
        // Node 1 down: a restarted node joins through another running node.
        set_running(dir, 1, false);
        set_running(dir, 2, true);
        assert_eq!(join_for(dir, &l, 3).as_deref(), Some("127.0.0.1:7101"));
        // Node 1 wiped (no id, no data) while others run: it joins as a new node.
        assert_eq!(join_for(dir, &l, 1).as_deref(), Some("127.0.0.1:7101"));
        // Node 1 with its data knows its cluster: no --join.
        std::fs::write(node_dir(dir, 1).join("node_id"), "1").unwrap();
        assert_eq!(join_for(dir, &l, 1), None);
        // Nothing runs: node 1 is the way in.
        set_running(dir, 2, false);
        assert_eq!(join_for(dir, &l, 3).as_deref(), Some("127.0.0.1:7100"));
    }

    #[test]
    fn disks_are_kept_in_the_layout_and_given_to_each_node() {
        let d = tempfile::tempdir().unwrap();
        let l = Layout { disks: 2, ..layout() };
        save(d.path(), &l).unwrap();
        let back = load(d.path()).unwrap();
        assert_eq!(back.disks, 2);
        let args = node_args(d.path(), &back, 3);
        assert_eq!(args.data_dirs, vec![d.path().join("node-3/disk-1"), d.path().join("node-3/disk-2")]);
        // A cluster.conf from before disks were configurable.
        let text = std::fs::read_to_string(conf(d.path())).unwrap().replace("disks=2\n", "");
        std::fs::write(conf(d.path()), text).unwrap();
        assert_eq!(load(d.path()).unwrap().disks, 1);
        assert!(node_args(d.path(), &load(d.path()).unwrap(), 1).data_dirs.is_empty());
    }
}
