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
//!
//! `--netns PREFIX` (root only) runs each node as a host of its own: node i in
//! network namespace `PREFIX-i` with address `SUBNET.i` on its `eth0`, a veth
//! pair to a bridge in namespace `PREFIX-sw` (which has `SUBNET.254`, for
//! clients: `ip netns exec PREFIX-sw psql -h SUBNET.1 …`). Nodes share no
//! loopback; their only link is the bridge, so `cut NODE` (its bridge port down)
//! partitions a node and `heal NODE` ends it. The namespaces are created by
//! `start` and removed by `stop` (and by a start that failed). The nodes'
//! PostgreSQL servers also listen on their Unix sockets (`node-i/pg`), which
//! work from any namespace.
//!
//! `start` refuses a directory whose nodes (or a single node) run, and ports
//! another process serves; a start that fails stops what it started.

use crate::certs;
use crate::netns;
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
    /// Cut node NODE off the network (`--netns` clusters: its link down).
    Cut(NodeSel),
    /// Undo `cut`.
    Heal(NodeSel),
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
    /// Run each node in a network namespace of its own, `PREFIX-1` …, with its
    /// own address on a bridge in `PREFIX-sw` (root only).
    #[arg(long)]
    netns: Option<String>,
    /// The nodes' /24 in `--netns` mode: node i is SUBNET.i, the bridge's
    /// namespace SUBNET.254.
    #[arg(long, default_value = "10.88.0")]
    subnet: String,
    /// No TLS between the nodes (see `pinax start --insecure`).
    #[arg(long)]
    insecure: bool,
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
    /// `--netns` prefix and subnet.
    netns: Option<(String, String)>,
    /// No TLS (else the cluster's CA is `<dir>/certs`, each node's identity
    /// `node-i/certs`; with `--netns`, nodes 2… join with a token).
    insecure: bool,
}

fn conf(dir: &Path) -> PathBuf {
    dir.join("cluster.conf")
}

fn save(dir: &Path, l: &Layout) -> Result<()> {
    let mut text = format!(
        "nodes={}\nbase_port={}\npg_port={}\nreplication_factor={}\ntablets_per_node={}\nno_postgres={}\ndisks={}\ninsecure={}\n",
        l.nodes, l.base_port, l.pg_port, l.replication_factor, l.tablets_per_node, l.no_postgres, l.disks, l.insecure
    );
    if let Some((prefix, subnet)) = &l.netns {
        text.push_str(&format!("netns={prefix}\nsubnet={subnet}\n"));
    }
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
        netns: get("netns").ok().map(|p| (p, get("subnet").unwrap_or_else(|_| "10.88.0".into()))),
        // Written since clusters are secure by default.
        insecure: get("insecure").map_or(Ok(false), |d| d.parse())?,
    })
}

fn node_dir(dir: &Path, i: u32) -> PathBuf {
    dir.join(format!("node-{i}"))
}

/// Node `i`'s host: 127.0.0.1, or its own address in `--netns` mode.
fn host(l: &Layout, i: u32) -> String {
    match &l.netns {
        Some((_, subnet)) => format!("{subnet}.{i}"),
        None => "127.0.0.1".into(),
    }
}

fn addr(l: &Layout, i: u32) -> String {
    format!("{}:{}", host(l, i), l.base_port + (i - 1) as u16)
}

/// Whether node `i`'s daemon runs.
fn running(dir: &Path, i: u32) -> bool {
    read_pid(&node_dir(dir, i)).is_some_and(alive)
}

/// The node a restarted node `i` joins through: a running other node (node 1
/// first), or node 1 when none runs. None for node 1 when it keeps its data
/// (it knows its cluster) or no other node runs (a new cluster).
fn join_for(dir: &Path, l: &Layout, i: u32) -> Vec<String> {
    join_through(dir, l, i).into_iter().collect()
}

fn join_through(dir: &Path, l: &Layout, i: u32) -> Option<String> {
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
        listen: l.netns.as_ref().map(|_| host(l, i)),
        advertise: None,
        pg_listen: None,
        tablets_per_node: l.tablets_per_node,
        no_sync: false,
        txn_timeout_secs: 5,
        block_cache_mb: Some(128),
        memtable_mb: 128,
        min_free_mb: None,
        pg_port: l.pg_port + (i - 1) as u16,
        no_postgres: l.no_postgres,
        join: join_for(dir, l, i),
        token: None,
        replication_factor: l.replication_factor,
        node_timeout_secs: 60,
        fault_injection: false,
        max_clock_skew_ms: 500,
        data_dirs: if l.disks > 1 { (1..=l.disks).map(|d| node_dir(dir, i).join(format!("disk-{d}"))).collect() } else { Vec::new() },
        max_connections: None,
        clock_offset_ms: 0,
        certs_dir: None,
        pg_credentials: (!l.insecure).then(|| crate::postgres::credentials_file(dir)),
        insecure: l.insecure,
        allow_insecure_remote: l.insecure,
        split: Default::default(),
    }
}

/// The cluster CA's directory (`ca.crt`, `ca.key`).
pub(crate) fn cluster_certs(dir: &Path) -> PathBuf {
    dir.join("certs")
}

/// Node `i`'s certificates: the cluster CA (made with the cluster) and a node
/// certificate naming its address, issued once. With `--netns` the nodes are
/// hosts of their own and join as on separate machines: node 1 holds the CA
/// key, the others get a join token (returned) and their certificates from the
/// cluster.
fn node_certs(dir: &Path, l: &Layout, i: u32) -> Result<Option<String>> {
    if l.insecure {
        return Ok(None);
    }
    let ca = cluster_certs(dir);
    if !ca.join(pinax_proto::tls::CA_CERT).exists() {
        certs::create_ca(&ca, None)?;
    }
    // One superuser password for every node's PostgreSQL.
    let creds = crate::postgres::credentials_file(dir);
    if !creds.exists() {
        let mut users = vec![crate::postgres::superuser()];
        if crate::postgres::os_user() != users[0] {
            users.push(crate::postgres::os_user());
        }
        crate::postgres::write_credentials(&creds, &users, &crate::postgres::generate_password())?;
    }
    let mine = node_dir(dir, i).join("certs");
    if mine.join(pinax_proto::tls::NODE_CERT).exists() {
        return Ok(None);
    }
    if l.netns.is_some() && i > 1 {
        return crate::join::create_join_token(&ca, None, time::Duration::minutes(10)).map(Some);
    }
    std::fs::create_dir_all(&mine).with_context(|| format!("creating {}", mine.display()))?;
    std::fs::copy(ca.join(pinax_proto::tls::CA_CERT), mine.join(pinax_proto::tls::CA_CERT)).context("copying the CA certificate")?;
    if l.netns.is_some() {
        let key = std::fs::read_to_string(ca.join(certs::CA_KEY)).context("reading the cluster's CA key")?;
        certs::write_file(&mine.join(certs::CA_KEY), &key, 0o600)?;
    }
    certs::create_node(&mine, Some(&ca.join(certs::CA_KEY)), &[host(l, i)])?;
    Ok(None)
}

pub fn run(cmd: ClusterCmd) -> Result<()> {
    match cmd {
        ClusterCmd::Start(a) => {
            let dir = default_data_dir(a.data_dir);
            if a.nodes == 0 {
                bail!("a cluster needs at least one node");
            }
            if a.disks == 0 {
                bail!("a node needs at least one disk");
            }
            if a.nodes > 250 {
                bail!("at most 250 nodes");
            }
            if let Some(prefix) = &a.netns {
                netns::check(prefix, &a.subnet)?;
            }
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            let l = Layout {
                nodes: a.nodes,
                base_port: a.base_port,
                pg_port: a.pg_port,
                replication_factor: a.replication_factor,
                tablets_per_node: a.tablets_per_node,
                no_postgres: a.no_postgres,
                disks: a.disks,
                netns: a.netns.map(|p| (p, a.subnet)),
                insecure: a.insecure,
            };
            refuse_if_taken(&dir, &l)?;
            save(&dir, &l)?;
            if let Some((prefix, subnet)) = &l.netns {
                netns::create(prefix, subnet, l.nodes)?;
            }
            let res = start_all(&dir, &l);
            if res.is_err() {
                // Leave nothing half-started behind.
                let _ = stop_all(&dir, &l);
            }
            res
        }
        ClusterCmd::Stop(a) => {
            let dir = default_data_dir(a.data_dir);
            let l = load(&dir)?;
            stop_all(&dir, &l)
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
            start_node(&dir, &l, node_args(&dir, &l, a.node), a.node)
        }
        ClusterCmd::Cut(a) => set_link(a, false),
        ClusterCmd::Heal(a) => set_link(a, true),
    }
}

fn set_link(a: NodeSel, up: bool) -> Result<()> {
    let dir = default_data_dir(a.data_dir);
    let l = load(&dir)?;
    check_node(&l, a.node)?;
    let Some((prefix, _)) = &l.netns else { bail!("cut and heal need a cluster started with --netns") };
    netns::set_link(prefix, a.node, up)
}

/// Start every node: node 1 first (the master), without PostgreSQL until every
/// node joined (tables created before that would get fewer replicas).
fn start_all(dir: &Path, l: &Layout) -> Result<()> {
    let mut first = node_args(dir, l, 1);
    first.no_postgres = true;
    start_node(dir, l, first, 1)?;
    for i in 2..=l.nodes {
        start_node(dir, l, node_args(dir, l, i), i)?;
    }
    let master = addr(l, 1);
    let (n, masters) = (l.nodes as usize, l.replication_factor.min(l.nodes) as usize);
    // Node 1's certificates (made by its start) are read once, not at every poll.
    let opts = if l.insecure { pinax_client::ClientOptions::default() } else { crate::client_options(&node_dir(dir, 1).join("certs"))? };
    let client = move |a: &str| Ok(Client::connect_with(a, opts.clone())?);
    in_cluster_net(l, None, move || wait_joined(&master, n, masters, client))?;
    start_node(dir, l, node_args(dir, l, 1), 1)?;
    println!("pinax cluster of {} nodes started (replication factor {}), data in {}", l.nodes, l.replication_factor.min(l.nodes), dir.display());
    if let Some((prefix, subnet)) = &l.netns {
        println!(
            "nodes at {subnet}.1 … {subnet}.{} (namespaces {prefix}-1 …); clients: ip netns exec {prefix}-sw psql -h {subnet}.1 -p {}",
            l.nodes, l.pg_port
        );
    }
    Ok(())
}

/// Stop every node cleanly (the last first), then remove the namespaces.
fn stop_all(dir: &Path, l: &Layout) -> Result<()> {
    let mut first_err = None;
    for i in (1..=l.nodes).rev() {
        if let Err(e) = stop(DirArgs { data_dir: Some(node_dir(dir, i)), timeout_secs: crate::STOP_TIMEOUT_SECS }) {
            first_err.get_or_insert(e);
        }
    }
    if let Some((prefix, _)) = &l.netns {
        netns::remove(prefix, l.nodes);
    }
    first_err.map_or(Ok(()), Err)
}

/// `start` for node `i`, in its namespace in `--netns` mode (the daemon and
/// PostgreSQL it launches are born there).
fn start_node(dir: &Path, l: &Layout, mut args: NodeArgs, i: u32) -> Result<()> {
    args.token = node_certs(dir, l, i)?;
    in_cluster_net(l, Some(i), move || start(args))
}

/// Runs `f` on a thread in node `node`'s namespace (None: the bridge's), or
/// here when the cluster has no namespaces.
fn in_cluster_net<T: Send + 'static>(l: &Layout, node: Option<u32>, f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    match &l.netns {
        None => f(),
        Some((prefix, _)) => netns::run_in(&netns::name(prefix, node), f),
    }
}

/// Refuse to start over a running node: one in the directory itself (a single
/// node), a node of the cluster, or another process on one of its ports.
fn refuse_if_taken(dir: &Path, l: &Layout) -> Result<()> {
    if let Some(pid) = read_pid(dir).filter(|p| alive(*p)) {
        bail!("a pinax node (pid {pid}) runs with data directory {}: stop it first (pinax stop --data-dir {})", dir.display(), dir.display());
    }
    for i in 1..=l.nodes {
        if let Some(pid) = read_pid(&node_dir(dir, i)).filter(|p| alive(*p)) {
            bail!("node {i} of the cluster in {} runs (pid {pid}): stop it first (pinax cluster stop --data-dir {})", dir.display(), dir.display());
        }
    }
    if l.netns.is_none() {
        for i in 1..=l.nodes {
            let mut ports = vec![("RPC", l.base_port + (i - 1) as u16)];
            if !l.no_postgres {
                ports.push(("PostgreSQL", l.pg_port + (i - 1) as u16));
            }
            for (what, port) in ports {
                if let Err(e) = std::net::TcpListener::bind(("127.0.0.1", port)) {
                    bail!("node {i}'s {what} port {port} is taken ({e}): another node or server uses it; choose other ports (--base-port, --pg-port)");
                }
            }
        }
    }
    Ok(())
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
fn wait_joined(master: &str, n: usize, masters: usize, connect: impl Fn(&str) -> Result<Client>) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(c) = connect(master) {
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
        Layout {
            nodes: 3,
            base_port: 7100,
            pg_port: 5433,
            replication_factor: 3,
            tablets_per_node: 2,
            no_postgres: true,
            disks: 1,
            netns: None,
            insecure: false,
        }
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
        assert_eq!(join_through(dir, &l, 1), None);
        set_running(dir, 1, true);
        assert_eq!(join_through(dir, &l, 2).as_deref(), Some("127.0.0.1:7100"));
        // Node 1 down: a restarted node joins through another running node.
        set_running(dir, 1, false);
        set_running(dir, 2, true);
        assert_eq!(join_through(dir, &l, 3).as_deref(), Some("127.0.0.1:7101"));
        // Node 1 wiped (no id, no data) while others run: it joins as a new node.
        assert_eq!(join_through(dir, &l, 1).as_deref(), Some("127.0.0.1:7101"));
        // Node 1 with its data knows its cluster: no --join.
        std::fs::write(node_dir(dir, 1).join("node_id"), "1").unwrap();
        assert_eq!(join_through(dir, &l, 1), None);
        // Nothing runs: node 1 is the way in.
        set_running(dir, 2, false);
        assert_eq!(join_through(dir, &l, 3).as_deref(), Some("127.0.0.1:7100"));
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

    #[test]
    fn netns_nodes_listen_on_their_own_addresses_and_the_layout_keeps_them() {
        let d = tempfile::tempdir().unwrap();
        let l = Layout { netns: Some(("pnxt".into(), "10.9.8".into())), ..layout() };
        save(d.path(), &l).unwrap();
        let back = load(d.path()).unwrap();
        assert_eq!(back.netns, Some(("pnxt".into(), "10.9.8".into())));
        assert_eq!(addr(&back, 2), "10.9.8.2:7101");
        assert_eq!(node_args(d.path(), &back, 3).listen.as_deref(), Some("10.9.8.3"));
        assert_eq!(node_args(d.path(), &layout(), 3).listen, None);
        set_running(d.path(), 1, true);
        assert_eq!(join_for(d.path(), &back, 2), vec!["10.9.8.1:7100".to_string()]);
        assert_eq!(crate::netns::name("pnxt", Some(2)), "pnxt-2");
        assert_eq!(crate::netns::name("pnxt", None), "pnxt-sw");
    }

    #[test]
    fn a_cluster_does_not_start_over_running_nodes_or_taken_ports() {
        let d = tempfile::tempdir().unwrap();
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let free = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        // A node of the cluster runs.
        let l = Layout { base_port: free(), pg_port: free(), nodes: 1, ..layout() };
        set_running(d.path(), 1, true);
        let e = refuse_if_taken(d.path(), &l).unwrap_err().to_string();
        assert!(e.contains("node 1 of the cluster") && e.contains("runs"), "{e}");
        set_running(d.path(), 1, false);
        refuse_if_taken(d.path(), &l).unwrap();
        // A single node runs in the directory itself.
        std::fs::write(d.path().join("pinax.pid"), std::process::id().to_string()).unwrap();
        let e = refuse_if_taken(d.path(), &l).unwrap_err().to_string();
        assert!(e.contains("runs with data directory"), "{e}");
        std::fs::remove_file(d.path().join("pinax.pid")).unwrap();
        // Another server has node 1's RPC port.
        let e = refuse_if_taken(d.path(), &Layout { base_port: port, ..l }).unwrap_err().to_string();
        assert!(e.contains(&format!("RPC port {port} is taken")), "{e}");
    }
}
