//! `pinax`: the node daemon and its command line.
//!
//! - `pinax start`  — start a node in the background (creating its data directory the
//!   first time), wait until it serves, then create/start its PostgreSQL server with
//!   the pinax extension (see `postgres.rs`), print how to connect.
//! - `pinax run`    — run the node in the foreground (what `start` launches).
//! - `pinax stop`   — stop PostgreSQL, then the node of a data directory, cleanly
//!   (SIGTERM; SIGKILL if it has not stopped after `--timeout-secs`, default 30).
//! - `pinax status` — show the node, its tables and tablets.
//! - `pinax cluster start|stop|kill|restart|cut|heal` — a local multi-node cluster
//!   (`cluster.rs`).
//! - `pinax cert create-ca|create-node|create-client|create-join-token|list` — a
//!   cluster's certificates (`certs.rs`) and join tokens (`join.rs`: `pinax start
//!   --join … --token T` gets a node its certificate); nodes run with mutual TLS
//!   unless `--insecure`.

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use pinax_client::Client;
use pinax_common::HybridClock;
use pinax_engine_rocks::SharedResources;
use pinax_master::splitting::SplitRules;
use pinax_tserver::{Node, NodeConfig, RocksFactory, RpcServer, ServerLimits};
// mimalloc, with `override`: RocksDB's C++ allocations (iterators, write batches,
// blocks) go through it too, not only Rust's. Measured against glibc malloc in
// bench/results/2026-11-26-mimalloc.txt: 5-9% less server CPU per YCSB operation,
// ~12% less on the seed workload.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod addr;
mod certs;
mod cluster;
mod ddl;
mod join;
mod netns;
mod postgres;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(name = "pinax", version, about = "Pinax distributed SQL: node daemon")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Start a node in the background and wait until it serves.
    Start(NodeArgs),
    /// Run a node in the foreground.
    Run(NodeArgs),
    /// Stop the node of a data directory.
    Stop(DirArgs),
    /// Show a node's status, tables and tablets.
    Status(StatusArgs),
    /// A local multi-node cluster on loopback.
    #[command(subcommand)]
    Cluster(cluster::ClusterCmd),
    /// Create and list a cluster's certificates.
    #[command(subcommand)]
    Cert(certs::CertCmd),
    /// Work on one tablet.
    #[command(subcommand)]
    Tablet(TabletCmd),
}

#[derive(Subcommand)]
enum TabletCmd {
    /// Split a tablet online: at `--at` (a stored key, in hex), or at its
    /// approximate middle key. Prints the two halves.
    Split(SplitArgs),
}

#[derive(Args)]
struct SplitArgs {
    /// The tablet's id (`pinax status` lists them).
    tablet: u64,
    /// The key the right half starts at, in hex (as `pinax status` shows bounds).
    #[arg(long)]
    at: Option<String>,
    #[command(flatten)]
    node: StatusArgs,
}

#[derive(Args, Clone)]
struct NodeArgs {
    /// Data directory (default: /var/lib/pinax as root, else $HOME/.pinax).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// RPC port (when `--listen` names none).
    #[arg(long, default_value_t = 7100)]
    port: u16,
    /// Address the RPC server binds, `HOST[:PORT]` (an IPv6 address in brackets
    /// with a port: `[fd00::5]:7100`; `0.0.0.0` or `::` for every interface, then
    /// `--advertise` is needed). Default 127.0.0.1: a lone node on this machine.
    #[arg(long)]
    listen: Option<String>,
    /// Address the other nodes and the master record for this node, `HOST[:PORT]`
    /// (default: the listen address; never a wildcard). A node keeps it for life:
    /// restarting an existing node with another one is refused.
    #[arg(long)]
    advertise: Option<String>,
    /// PostgreSQL's `listen_addresses` (comma-separated; default: the `--listen`
    /// host, `*` for a wildcard).
    #[arg(long)]
    pg_listen: Option<String>,
    /// Tablets a new hash-sharded table gets per node.
    #[arg(long, default_value_t = 8)]
    tablets_per_node: u32,
    /// Do not fsync acknowledged writes (faster; loses recent writes on power loss,
    /// not on a process crash).
    #[arg(long)]
    no_sync: bool,
    /// Seconds without heartbeat after which a transaction is aborted.
    #[arg(long, default_value_t = 5)]
    txn_timeout_secs: u64,
    /// Block cache size in MiB (shared by all tablets; default: an eighth of the
    /// machine's memory, at least 256). Blocks are cached uncompressed: a scan of
    /// a table that fits reads no file and decompresses nothing.
    #[arg(long)]
    block_cache_mb: Option<usize>,
    /// Memtable budget in MiB (shared by all tablets).
    #[arg(long, default_value_t = 256)]
    memtable_mb: usize,
    /// Free space in MiB each data directory's disk keeps in reserve: below it,
    /// writes of rows are refused with SQLSTATE 53100 (disk full) while reads,
    /// DROP TABLE and the node's own work (flushes, compactions, the Raft log,
    /// committed transactions' resolution) go on, so a full disk never stops the
    /// node. Default: twice the memtable budget plus 256 MiB (0: no reserve).
    #[arg(long)]
    min_free_mb: Option<u64>,
    /// Port of this node's PostgreSQL server.
    #[arg(long, default_value_t = 5433)]
    pg_port: u16,
    /// Start only the node daemon, no PostgreSQL (`start` only).
    #[arg(long)]
    no_postgres: bool,
    /// Join the cluster of the nodes at HOST:PORT[,HOST:PORT…] (any live node of
    /// it will do; a list lets a restarting node find one). Without it, this node
    /// is a new cluster's first node and its master (or, restarted, finds the
    /// cluster it recorded).
    #[arg(long, value_delimiter = ',')]
    join: Vec<String>,
    /// A join token (`pinax cert create-join-token`, where the CA key is): with
    /// `--join` and no certificates yet, the node gets its certificate from the
    /// cluster with it (ignored once it has one). Also read from
    /// `PINAX_JOIN_TOKEN`.
    #[arg(long)]
    token: Option<String>,
    /// Replicas per tablet of new tables (master only; capped by the live nodes).
    #[arg(long, default_value_t = 3)]
    replication_factor: u32,
    /// Seconds without news from a node after which the master re-creates its
    /// replicas on other nodes.
    #[arg(long, default_value_t = 60)]
    node_timeout_secs: u64,
    /// Accept `InjectFaults` requests (partition tests).
    #[arg(long, hide = true)]
    fault_injection: bool,
    #[command(flatten)]
    split: SplitFlags,
    /// Bound on the clock skew between any two nodes, in milliseconds: a read
    /// treats values written up to this much after its read time as uncertain and
    /// restarts past them (YugabyteDB's `max_clock_skew_usec`). A lone node uses 0.
    #[arg(long, default_value_t = 500)]
    max_clock_skew_ms: u64,
    /// Directories for tablet data, one per disk, comma-separated (default: `data`
    /// in the data directory). New tablets go to the one holding the fewest. A
    /// node's directories may grow, never shrink: it refuses to start without one
    /// it used before.
    #[arg(long, value_delimiter = ',')]
    data_dirs: Vec<PathBuf>,
    /// Most RPC connections served at once (each PostgreSQL backend holds one);
    /// more are refused with an error. Default: what the descriptor limit leaves
    /// after the storage's share.
    #[arg(long)]
    max_connections: Option<usize>,
    /// The node's certificates (default: `certs` in the data directory): ca.crt,
    /// node.crt, node.key. A new cluster's first node creates them (with the CA's
    /// key, ca.key); a joining node gets them with `--token`, or has them copied
    /// in, issued by `pinax cert create-node` where the CA key is.
    #[arg(long)]
    certs_dir: Option<PathBuf>,
    /// No TLS between nodes: anyone who reaches the RPC port can read and write
    /// every table. Refused with a listen address other than loopback unless
    /// `--allow-insecure-remote` is given too.
    #[arg(long)]
    insecure: bool,
    /// With `--insecure`: listen on addresses other than loopback all the same.
    #[arg(long)]
    allow_insecure_remote: bool,
    /// A credentials file whose superuser password PostgreSQL takes on its first
    /// secure start (default: a generated one; kept in `<data-dir>/credentials`).
    #[arg(long)]
    pg_credentials: Option<PathBuf>,
    /// Run this node's clock this many milliseconds ahead (negative: behind) of
    /// the machine's (clock-skew tests).
    #[arg(long, hide = true, default_value_t = 0, allow_hyphen_values = true)]
    clock_offset_ms: i64,
}

/// When the master splits tablets by themselves (flags of the node leading
/// the master; the defaults are [`SplitRules::DEFAULT`], YugabyteDB's).
#[derive(Args, Clone, Debug)]
struct SplitFlags {
    /// Master: never split a tablet by itself (by size or load); `pinax tablet split`
    /// and `pinax_split_tablet` still do.
    #[arg(long)]
    no_auto_split: bool,
    /// Master: a tablet of a table with fewer than
    /// `--split-low-tablets-per-node` tablets per live node splits once its
    /// leader reports this many MiB on disk (the low phase).
    #[arg(long, default_value_t = SplitRules::DEFAULT.low_bytes >> 20)]
    split_low_mb: u64,
    #[arg(long, default_value_t = SplitRules::DEFAULT.low_tablets_per_node)]
    split_low_tablets_per_node: u32,
    /// Master: below `--split-high-tablets-per-node` tablets per live node, a
    /// tablet splits at this many MiB (the high phase); above, only at
    /// `--split-force-mb`.
    #[arg(long, default_value_t = SplitRules::DEFAULT.high_bytes >> 20)]
    split_high_mb: u64,
    #[arg(long, default_value_t = SplitRules::DEFAULT.high_tablets_per_node)]
    split_high_tablets_per_node: u32,
    #[arg(long, default_value_t = SplitRules::DEFAULT.force_bytes >> 20)]
    split_force_mb: u64,
    /// Master: tablet splits under way at once in the cluster.
    #[arg(long, default_value_t = SplitRules::DEFAULT.max_outstanding)]
    split_max_outstanding: usize,
    /// Master: requested tablet splits at once whose tablet one node leads.
    #[arg(long, default_value_t = SplitRules::DEFAULT.max_per_node)]
    split_max_per_node: usize,
    /// Master: a tablet whose leader serves this many requests a second (0: no
    /// splits by load), at least `--split-load-share-percent` of its node's,
    /// in `--split-load-reports` size reports in a row (10 s apart), splits.
    #[arg(long, default_value_t = SplitRules::DEFAULT.load_requests_per_sec)]
    split_load_requests_per_sec: u64,
    #[arg(long, default_value_t = SplitRules::DEFAULT.load_share_percent)]
    split_load_share_percent: u32,
    #[arg(long, default_value_t = SplitRules::DEFAULT.load_reports)]
    split_load_reports: u32,
}

impl Default for SplitFlags {
    fn default() -> Self {
        let d = SplitRules::DEFAULT;
        SplitFlags {
            no_auto_split: false,
            split_low_mb: d.low_bytes >> 20,
            split_low_tablets_per_node: d.low_tablets_per_node,
            split_high_mb: d.high_bytes >> 20,
            split_high_tablets_per_node: d.high_tablets_per_node,
            split_force_mb: d.force_bytes >> 20,
            split_max_outstanding: d.max_outstanding,
            split_max_per_node: d.max_per_node,
            split_load_requests_per_sec: d.load_requests_per_sec,
            split_load_share_percent: d.load_share_percent,
            split_load_reports: d.load_reports,
        }
    }
}

impl SplitFlags {
    /// The rules these flags give (None: automatic splitting off).
    fn rules(&self) -> Option<SplitRules> {
        const MIB: u64 = 1 << 20;
        (!self.no_auto_split).then_some(SplitRules {
            low_bytes: self.split_low_mb.saturating_mul(MIB),
            low_tablets_per_node: self.split_low_tablets_per_node,
            high_bytes: self.split_high_mb.saturating_mul(MIB),
            high_tablets_per_node: self.split_high_tablets_per_node,
            force_bytes: self.split_force_mb.saturating_mul(MIB),
            max_outstanding: self.split_max_outstanding,
            max_per_node: self.split_max_per_node,
            load_requests_per_sec: self.split_load_requests_per_sec,
            load_share_percent: self.split_load_share_percent,
            load_reports: self.split_load_reports,
        })
    }

    /// The same flags on the command line of `pinax run` (`pinax start`).
    fn pass_on(&self, cmd: &mut std::process::Command) {
        if self.no_auto_split {
            cmd.arg("--no-auto-split");
        }
        cmd.arg("--split-low-mb").arg(self.split_low_mb.to_string());
        cmd.arg("--split-low-tablets-per-node").arg(self.split_low_tablets_per_node.to_string());
        cmd.arg("--split-high-mb").arg(self.split_high_mb.to_string());
        cmd.arg("--split-high-tablets-per-node").arg(self.split_high_tablets_per_node.to_string());
        cmd.arg("--split-force-mb").arg(self.split_force_mb.to_string());
        cmd.arg("--split-max-outstanding").arg(self.split_max_outstanding.to_string());
        cmd.arg("--split-max-per-node").arg(self.split_max_per_node.to_string());
        cmd.arg("--split-load-requests-per-sec").arg(self.split_load_requests_per_sec.to_string());
        cmd.arg("--split-load-share-percent").arg(self.split_load_share_percent.to_string());
        cmd.arg("--split-load-reports").arg(self.split_load_reports.to_string());
    }
}

#[derive(Args)]
struct DirArgs {
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Seconds to wait for a clean stop after SIGTERM before killing the node
    /// (SIGKILL; acknowledged writes survive it).
    #[arg(long, default_value_t = STOP_TIMEOUT_SECS)]
    timeout_secs: u64,
}

#[derive(Args)]
struct StatusArgs {
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Certificates to reach the node with (default: the data directory's `certs`;
    /// plaintext if it holds none).
    #[arg(long)]
    certs_dir: Option<PathBuf>,
    /// Address of the node (default: read from the data directory, else 127.0.0.1:7100).
    #[arg(long)]
    addr: Option<String>,
}

/// `--data-dir`, else /var/lib/pinax for root (PostgreSQL then runs as the postgres
/// OS user, which cannot enter /root), else $HOME/.pinax.
fn default_data_dir(d: Option<PathBuf>) -> PathBuf {
    d.unwrap_or_else(|| {
        if nix::unistd::geteuid().is_root() {
            return PathBuf::from("/var/lib/pinax");
        }
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
        home.join(".pinax")
    })
}

fn pid_file(dir: &Path) -> PathBuf {
    dir.join("pinax.pid")
}
/// The Unix-domain socket the node also serves on, for its PostgreSQL's backends
/// (cheaper than loopback TCP); None when the path is too long for one (108
/// bytes with the NUL): they use TCP then.
pub(crate) fn socket_file(dir: &Path) -> Option<PathBuf> {
    let p = dir.join("pinax.sock");
    (p.as_os_str().len() < 100).then_some(p)
}
fn addr_file(dir: &Path) -> PathBuf {
    dir.join("rpc_address")
}
fn log_file(dir: &Path) -> PathBuf {
    dir.join("pinax.log")
}

/// The certificates directory of the node in `dir`.
fn certs_dir(dir: &Path, given: Option<&Path>) -> PathBuf {
    given.map(|d| std::path::absolute(d).unwrap_or_else(|_| d.to_path_buf())).unwrap_or_else(|| dir.join("certs"))
}

/// How a tool on this machine reaches nodes: TLS with the node identity in
/// `certs`, plaintext when there is none (an `--insecure` node).
pub(crate) fn client_options(certs: &Path) -> Result<pinax_client::ClientOptions> {
    let tls = if certs.join(pinax_proto::tls::NODE_CERT).exists() {
        Some(pinax_proto::tls::TlsConfig::node(certs).with_context(|| format!("loading the certificates in {}", certs.display()))?)
    } else {
        None
    };
    Ok(pinax_client::ClientOptions { tls, ..Default::default() })
}

fn read_pid(dir: &Path) -> Option<i32> {
    std::fs::read_to_string(pid_file(dir)).ok()?.trim().parse().ok()
}

/// Whether process `pid` exists and is not a zombie (a killed node whose parent has
/// not reaped it yet is gone for our purposes).
fn alive(pid: i32) -> bool {
    if nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_err() {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // the state follows the parenthesised command name
        Ok(stat) => stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next()) != Some("Z"),
        Err(_) => true,
    }
}

fn main() {
    let cli = Cli::parse();
    let res = match cli.cmd {
        Cmd::Start(a) => start(a),
        Cmd::Run(a) => run(a),
        Cmd::Stop(a) => stop(a),
        Cmd::Status(a) => status(a),
        Cmd::Cluster(c) => cluster::run(c),
        Cmd::Cert(c) => certs::run(c),
        Cmd::Tablet(TabletCmd::Split(a)) => split_tablet(a),
    };
    if let Err(e) = res {
        eprintln!("pinax: {e:#}");
        std::process::exit(1);
    }
}

/// Wait until the node started as process `pid` with data directory `dir`
/// answers at `addr`. It writes its pid file once it serves: a node answering
/// there before that may be another one (its port was taken).
fn wait_ready(addr: &str, dir: &Path, certs: &Path, pid: u32, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        // (The certificates may be the node's own making: read once it serves.)
        if read_pid(dir) == Some(pid as i32) && Client::connect_with(addr, client_options(certs)?).is_ok() {
            return Ok(());
        }
        if !alive(pid as i32) {
            bail!("the node exited during start-up");
        }
        if Instant::now() > deadline {
            bail!("the node did not answer on {addr} within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn start(a: NodeArgs) -> Result<()> {
    let dir = default_data_dir(a.data_dir.clone());
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let addrs = addr::resolve(a.listen.as_deref(), a.advertise.as_deref(), a.port)?;
    if let Some(pid) = read_pid(&dir) {
        if alive(pid) {
            println!("pinax node already running (pid {pid}), rpc {}, data dir {}", addrs.advertise, dir.display());
            return start_postgres(&a, &dir, &addrs);
        }
    }
    let exe = std::env::current_exe().context("locating the pinax binary")?;
    let log = std::fs::OpenOptions::new().create(true).append(true).open(log_file(&dir)).context("opening the log file")?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("run").arg("--data-dir").arg(&dir).arg("--port").arg(a.port.to_string());
    cmd.arg("--listen").arg(&addrs.listen).arg("--advertise").arg(&addrs.advertise);
    cmd.arg("--tablets-per-node").arg(a.tablets_per_node.to_string());
    cmd.arg("--txn-timeout-secs").arg(a.txn_timeout_secs.to_string());
    if let Some(mb) = a.block_cache_mb {
        cmd.arg("--block-cache-mb").arg(mb.to_string());
    }
    cmd.arg("--memtable-mb").arg(a.memtable_mb.to_string());
    if let Some(mb) = a.min_free_mb {
        cmd.arg("--min-free-mb").arg(mb.to_string());
    }
    if let Some(n) = a.max_connections {
        cmd.arg("--max-connections").arg(n.to_string());
    }
    if a.no_sync {
        cmd.arg("--no-sync");
    }
    if !a.join.is_empty() {
        cmd.arg("--join").arg(a.join.join(","));
    }
    if let Some(t) = &a.token {
        // In the environment: a command line is visible to every local user.
        cmd.env(JOIN_TOKEN_ENV, t);
    }
    cmd.arg("--replication-factor").arg(a.replication_factor.to_string());
    cmd.arg("--pg-port").arg(a.pg_port.to_string());
    cmd.arg("--node-timeout-secs").arg(a.node_timeout_secs.to_string());
    if a.fault_injection {
        cmd.arg("--fault-injection");
    }
    cmd.arg("--max-clock-skew-ms").arg(a.max_clock_skew_ms.to_string());
    a.split.pass_on(&mut cmd);
    if !a.data_dirs.is_empty() {
        let dirs: Vec<String> = a.data_dirs.iter().map(|d| std::path::absolute(d).unwrap_or_else(|_| d.clone()).display().to_string()).collect();
        cmd.arg("--data-dirs").arg(dirs.join(","));
    }
    if a.clock_offset_ms != 0 {
        cmd.arg(format!("--clock-offset-ms={}", a.clock_offset_ms));
    }
    let certs = certs_dir(&dir, a.certs_dir.as_deref());
    cmd.arg("--certs-dir").arg(&certs);
    if a.insecure {
        cmd.arg("--insecure");
    }
    if a.allow_insecure_remote {
        cmd.arg("--allow-insecure-remote");
    }
    if let Some(c) = &a.pg_credentials {
        cmd.arg("--pg-credentials").arg(c);
    }
    cmd.stdin(std::process::Stdio::null()).stdout(log.try_clone()?).stderr(log);
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let child = cmd.spawn().context("starting the node")?;
    wait_ready(&addrs.local, &dir, &certs, child.id(), Duration::from_secs(60)).with_context(|| format!("see {}", log_file(&dir).display()))?;
    println!("pinax node started (pid {}): rpc {}, data dir {}, log {}", child.id(), addrs.advertise, dir.display(), log_file(&dir).display());
    start_postgres(&a, &dir, &addrs)
}

fn start_postgres(a: &NodeArgs, dir: &Path, addrs: &addr::Addresses) -> Result<()> {
    if a.no_postgres {
        return Ok(());
    }
    let listen = addr::pg_listen_addresses(a.pg_listen.as_deref(), &addrs.listen_host);
    // The backends present the node's identity to other nodes (over TCP).
    let certs = certs_dir(dir, a.certs_dir.as_deref());
    let secure = postgres::Secure { certs: &certs, password_from: a.pg_credentials.as_deref() };
    postgres::start(dir, a.pg_port, &listen, &addrs.local, (!a.insecure).then_some(&secure)).context("starting PostgreSQL")?;
    println!("PostgreSQL 15 with pinax started: data {}, log {}", postgres::pgdata(dir).display(), postgres::pgdata(dir).join("postgres.log").display());
    // A host psql can reach: the first listen address, the advertised host for a wildcard.
    let first = listen.split(',').next().unwrap_or("127.0.0.1");
    let host = if first == "*" { addr::split_host_port(&addrs.advertise).map_or_else(|_| "127.0.0.1".into(), |(h, _)| h) } else { first.to_string() };
    if a.insecure {
        println!("connect with: psql -h {host} -p {}   (postgresql://{}/)", a.pg_port, addr::host_port(&host, a.pg_port));
    } else {
        let creds = postgres::credentials_file(dir);
        println!(
            "connect with: PGPASSFILE={} psql 'host={host} port={} user={} sslmode=verify-full sslrootcert={}'",
            creds.display(),
            a.pg_port,
            postgres::superuser(),
            certs.join(pinax_proto::tls::CA_CERT).display()
        );
        println!(
            "  (the superuser's password is in {}; clients on this machine may also use the Unix socket in {})",
            creds.display(),
            postgres::pgdata(dir).display()
        );
    }
    Ok(())
}

/// The block cache a node gets unless told: an eighth of the machine's memory
/// (`MemTotal`), at least 256 MiB. The cache takes memory only as blocks are
/// read; PostgreSQL's counterpart is the OS page cache more than `shared_buffers`.
fn default_block_cache_mb() -> usize {
    block_cache_mb_for(&std::fs::read_to_string("/proc/meminfo").unwrap_or_default())
}

/// [`default_block_cache_mb`] given the text of `/proc/meminfo`.
fn block_cache_mb_for(meminfo: &str) -> usize {
    let total_kb =
        meminfo.lines().find_map(|l| l.strip_prefix("MemTotal:").and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())).unwrap_or(0);
    (total_kb / 1024 / 8).max(256)
}

/// The directories of a node's tablet data: `--data-dirs`, else `<dir>/data`.
/// The list is kept in `<dir>/data-dirs`; a start without a directory listed there
/// is refused (its tablets would be missing: the node would recreate them empty).
fn tablet_dirs(dir: &Path, given: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut dirs: Vec<PathBuf> =
        if given.is_empty() { vec![dir.join("data")] } else { given.iter().map(|d| std::path::absolute(d).unwrap_or_else(|_| d.clone())).collect() };
    dirs.dedup();
    let record = dir.join("data-dirs");
    let before: Vec<PathBuf> = match std::fs::read_to_string(&record) {
        Ok(s) => s.lines().filter(|l| !l.is_empty()).map(PathBuf::from).collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => vec![dir.join("data")],
        Err(e) => return Err(e).with_context(|| format!("reading {}", record.display())),
    };
    let used = |d: &PathBuf| std::fs::read_dir(d).map(|mut rd| rd.next().is_some()).unwrap_or(false);
    for d in &before {
        if used(d) && !dirs.contains(d) {
            bail!(
                "data directory {} holds tablets of this node but is not in --data-dirs ({}); add it back",
                d.display(),
                dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(",")
            );
        }
    }
    for d in &dirs {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let mut all = dirs.clone();
    all.extend(before.into_iter().filter(|d| !dirs.contains(d) && used(d)));
    let text: String = all.iter().map(|d| format!("{}\n", d.display())).collect();
    std::fs::write(&record, text).with_context(|| format!("writing {}", record.display()))?;
    Ok(dirs)
}

/// The id recorded in the data directory, if any.
fn recorded_node_id(dir: &Path) -> Result<Option<u64>> {
    let f = dir.join("node_id");
    match std::fs::read_to_string(&f) {
        Ok(s) => Ok(Some(s.trim().parse().with_context(|| format!("reading {}", f.display()))?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", f.display())),
    }
}

/// Whether a node ran in the data directory (it holds an engine or a list of
/// its disks).
fn has_data(dir: &Path) -> bool {
    std::fs::read_dir(dir.join("data")).map(|mut d| d.next().is_some()).unwrap_or(false) || dir.join("data-dirs").exists()
}

/// The id of a node started without `--join`: the recorded one, else 1 (it
/// bootstraps a new cluster, or is the first node of a data directory from
/// before ids were recorded).
fn first_node_id(dir: &Path) -> Result<u64> {
    if let Some(id) = recorded_node_id(dir)? {
        return Ok(id);
    }
    let f = dir.join("node_id");
    std::fs::write(&f, "1").with_context(|| format!("writing {}", f.display()))?;
    Ok(1)
}

/// The id of a node joining the cluster of the nodes at `join`: kept in the data
/// directory, assigned by the master on the first start (asked through whichever
/// of them answers; a node that is not the master forwards the request).
fn joined_node_id(dir: &Path, join: &[String], addr: &str, tls: Option<Arc<pinax_proto::tls::TlsConfig>>) -> Result<u64> {
    let f = dir.join("node_id");
    if let Some(id) = recorded_node_id(dir)? {
        return Ok(id);
    }
    if has_data(dir) {
        bail!("{} holds data but no node id: it is the first node of a cluster from an earlier version; start it without --join", dir.display());
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let id = 'found: loop {
        let mut last = None;
        for node in join {
            let res = Client::connect_with(node, pinax_client::ClientOptions { tls: tls.clone(), ..Default::default() })
                .and_then(|c| c.call(pinax_proto::Request::RegisterNode { node_id: 0, addr: addr.to_string(), leading: Vec::new(), reports: Vec::new() }));
            match res {
                Ok(pinax_proto::Response::Registered { node_id, .. }) => break 'found node_id,
                Ok(other) => bail!("unexpected answer from the node at {node}: {other:?}"),
                Err(e) => last = Some(format!("{node}: {e}")),
            }
        }
        let last = last.unwrap_or_default();
        if Instant::now() >= deadline {
            bail!("could not register with the cluster at {}: {last}", join.join(","));
        }
        tracing::info!(error = %last, "waiting for the cluster");
        std::thread::sleep(Duration::from_millis(200));
    };
    std::fs::write(&f, id.to_string()).with_context(|| format!("writing {}", f.display()))?;
    Ok(id)
}

/// A node keeps the address it first advertised: the cluster's replica lists
/// and Raft memberships name it by that address. A restart with another one is
/// refused (before anything is opened) with what to do instead.
fn check_identity(dir: &Path, advertise: &str) -> Result<()> {
    if recorded_node_id(dir)?.is_none() {
        return Ok(());
    }
    let Ok(before) = std::fs::read_to_string(addr_file(dir)) else { return Ok(()) };
    let before = before.trim();
    if !before.is_empty() && before != advertise {
        bail!(
            "this node (data directory {}) is known to its cluster at {before}, not {advertise}: a node's address cannot change. \
             Start it with --advertise {before} (listening where that reaches it), or remove the node and join with an empty data directory",
            dir.display()
        );
    }
    Ok(())
}

fn run(a: NodeArgs) -> Result<()> {
    let dir = default_data_dir(a.data_dir.clone());
    std::fs::create_dir_all(dir.join("data")).with_context(|| format!("creating {}", dir.display()))?;
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,openraft=warn".into()))
        .with_ansi(false)
        .init();
    // No transparent huge pages in the daemon. mimalloc asks for them on its arenas
    // (madvise), and the daemon's memory turns over fast (memtables, Raft entries, write
    // batches): each first touch of a huge page zeroes 2 MiB, ~10% of the machine in a
    // profile of a COPY. Off: COPY of 1M rows -15% server CPU, -20% wall
    // (bench/results/2026-11-27-thp.txt). The flag holds for the whole process (the
    // kernel checks it at each fault), so mappings made before this line are covered.
    if let Err(e) = nix::sys::prctl::set_thp_disable(true) {
        tracing::warn!(error = %e, "could not turn transparent huge pages off");
    }
    let descriptors = raise_descriptor_limit();
    let addrs = addr::resolve(a.listen.as_deref(), a.advertise.as_deref(), a.port)?;
    let addr = addrs.advertise.clone();
    check_identity(&dir, &addr)?;
    let tls = node_tls(&a, &dir, &addrs)?;
    // Bind first: a port already in use fails before any data is touched.
    let listener = std::net::TcpListener::bind(&addrs.listen).with_context(|| format!("listening on {}", addrs.listen))?;
    let node_id = if a.join.is_empty() { first_node_id(&dir)? } else { joined_node_id(&dir, &a.join, &addr, tls.clone())? };
    let cfg = NodeConfig {
        node_id,
        join: a.join.clone(),
        replication_factor: a.replication_factor,
        node_timeout: Duration::from_secs(a.node_timeout_secs),
        fault_injection: a.fault_injection,
        rpc_addr: addr.clone(),
        data_dir: dir.display().to_string(),
        tablets_per_node: a.tablets_per_node,
        sync: !a.no_sync,
        txn_heartbeat_timeout: Duration::from_secs(a.txn_timeout_secs),
        tls: tls.clone(),
        join_signer: tls.is_some().then(|| Arc::new(join::CertsSigner::new(&certs_dir(&dir, a.certs_dir.as_deref()))) as Arc<dyn pinax_tserver::JoinSigner>),
        auto_split: a.split.rules(),
        ..NodeConfig::default()
    };
    let shared = SharedResources::new(a.block_cache_mb.unwrap_or_else(default_block_cache_mb) << 20, a.memtable_mb << 20);
    let factory = RocksFactory::with_roots(tablet_dirs(&dir, &a.data_dirs)?, shared);
    // RocksDB's files take at most a quarter of the descriptors (the rest: Raft
    // logs, connections, snapshots), split among the stores.
    let roots = factory.roots();
    let per_store = (descriptors / 4 / roots as u64).clamp(64, 4096) as i32;
    let factory = factory.with_max_open_files(per_store);
    let min_free_mb = a.min_free_mb.unwrap_or(2 * a.memtable_mb as u64 + 256);
    let factory = factory.with_min_free_bytes(min_free_mb << 20);
    let physical = pinax_common::SkewedClock::new(pinax_common::SystemClock, a.clock_offset_ms.saturating_mul(1000));
    let clock = HybridClock::new(Arc::new(physical)).with_max_skew(a.max_clock_skew_ms.saturating_mul(1000));
    let node = Node::open(cfg, factory, Arc::new(clock)).map_err(|e| anyhow::anyhow!("opening the node: {e}"))?;
    let unix = socket_file(&dir).and_then(|p| {
        // A socket left by a node that did not stop cleanly (this node's pid file
        // was checked: none is running here).
        let _ = std::fs::remove_file(&p);
        match std::os::unix::net::UnixListener::bind(&p) {
            Ok(l) => {
                if let Err(e) = restrict_socket(&p) {
                    tracing::warn!(path = %p.display(), error = %e, "could not restrict the Unix socket to PostgreSQL's OS user");
                }
                Some(l)
            }
            Err(e) => {
                tracing::warn!(path = %p.display(), error = %e, "not serving on a Unix socket; local clients use TCP");
                None
            }
        }
    });
    let max_conns = a.max_connections.unwrap_or_else(|| max_connections(descriptors, per_store as u64 * roots as u64));
    // One address (a node's backends and Raft traffic, or one client machine)
    // gets at most half of them.
    let limits = ServerLimits { max_connections: max_conns, max_per_peer: (max_conns / 2).max(16), ..ServerLimits::default() };
    tracing::info!(max_connections = limits.max_connections, max_per_peer = limits.max_per_peer, "connections");
    let mut server = RpcServer::serve_limited(node.clone(), listener, unix, limits).with_context(|| format!("serving on {addr}"))?;
    std::fs::write(pid_file(&dir), std::process::id().to_string())?;
    std::fs::write(addr_file(&dir), &addr)?;
    let term = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGTERM, term.clone())?;
    signal_hook::flag::register(signal_hook::consts::SIGINT, term.clone())?;
    let hup = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGHUP, hup.clone())?;
    let applier = {
        let n = node.clone();
        std::thread::Builder::new().name("applier".into()).spawn(move || n.run_applier())?
    };
    // Liveness and the SQL lease, on a thread of their own (see `Node::heartbeat`).
    let heartbeat = {
        let (n, term) = (node.clone(), term.clone());
        std::thread::Builder::new().name("heartbeat".into()).spawn(move || {
            while !term.load(Ordering::SeqCst) {
                n.heartbeat();
                std::thread::sleep(Duration::from_millis(200));
            }
        })?
    };
    // This node's PostgreSQL (if it has one) replays the other nodes' DDL.
    let replayer = Arc::new(ddl::Replayer::new(node_id, addrs.local.clone(), tls.clone(), postgres::pgdata(&dir), a.pg_port, postgres::superuser()));
    node.set_ddl_applier(replayer.clone());
    let replay = ddl::spawn_catch_up(replayer, term.clone())?;
    tracing::info!(%addr, data_dir = %dir.display(), "pinax node serving");
    while !term.load(Ordering::SeqCst) {
        if hup.swap(false, Ordering::SeqCst) {
            reload_certificates(tls.as_deref(), &certs_dir(&dir, a.certs_dir.as_deref()), &dir);
        }
        node.tick();
        std::thread::sleep(Duration::from_millis(200));
    }
    tracing::info!("shutting down");
    node.shutdown();
    server.stop();
    let _ = applier.join();
    let _ = heartbeat.join();
    let _ = replay.join();
    node.flush_all();
    node.close();
    if let Some(p) = socket_file(&dir) {
        let _ = std::fs::remove_file(p);
    }
    let _ = std::fs::remove_file(pid_file(&dir));
    tracing::info!("stopped");
    Ok(())
}

/// The node's TLS settings: None with `--insecure` (refused on a non-loopback
/// listen address unless `--allow-insecure-remote`), else its certificates,
/// made first if this node can (see `certs::ensure_node`), and a copy of its
/// identity for its PostgreSQL's backends.
fn node_tls(a: &NodeArgs, dir: &Path, addrs: &addr::Addresses) -> Result<Option<Arc<pinax_proto::tls::TlsConfig>>> {
    if a.insecure {
        let loopback = addrs.listen_host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback()) || addrs.listen_host == "localhost";
        if !loopback && !a.allow_insecure_remote {
            bail!(
                "--insecure on {}: every machine that reaches this address could read and write all data. \
                 Run secure (the default), or add --allow-insecure-remote",
                addrs.listen
            );
        }
        tracing::warn!("running --insecure: no TLS between nodes, anyone who reaches the RPC port owns the data");
        return Ok(None);
    }
    let certs = certs_dir(dir, a.certs_dir.as_deref());
    let mut hosts = vec![addr::split_host_port(&addrs.advertise)?.0];
    if !addr::is_wildcard(&addrs.listen_host) {
        hosts.push(addrs.listen_host.clone());
    }
    let token = a.token.clone().or_else(|| std::env::var(JOIN_TOKEN_ENV).ok()).filter(|t| !t.trim().is_empty());
    if let Some(token) = token {
        if a.join.is_empty() {
            bail!("--token is for joining a cluster: give --join too");
        }
        if !certs.join(pinax_proto::tls::CA_CERT).exists() || !certs.join(pinax_proto::tls::NODE_CERT).exists() {
            join::join_with_token(&certs, &hosts, &a.join, &token)?;
        }
    }
    certs::ensure_node(&certs, &hosts, a.join.is_empty())?;
    let tls = pinax_proto::tls::TlsConfig::node(&certs).with_context(|| format!("loading the certificates in {}", certs.display()))?;
    certs::prepare_backend_identity(&certs)?;
    tracing::info!(certs = %certs.display(), "TLS between nodes");
    Ok(Some(tls))
}

/// Where `pinax start` hands a join token to the node it spawns.
const JOIN_TOKEN_ENV: &str = "PINAX_JOIN_TOKEN";

/// SIGHUP: read the certificates again (rotation); connections made afterwards
/// use the new ones, PostgreSQL's server certificate too (`pg_ctl reload`). A
/// bad set is logged and the old one stays.
fn reload_certificates(tls: Option<&pinax_proto::tls::TlsConfig>, certs: &Path, dir: &Path) {
    let Some(tls) = tls else { return };
    match tls.reload() {
        Ok(()) => {
            if let Err(e) = certs::prepare_backend_identity(certs) {
                tracing::warn!(error = %e, "could not copy the new certificate for PostgreSQL's backends");
            } else if let Err(e) = postgres::reload(dir) {
                tracing::warn!(error = %e, "could not have PostgreSQL reload its certificate");
            }
            tracing::info!(certs = %certs.display(), "certificates reloaded");
        }
        Err(e) => tracing::error!(error = %e, "could not reload the certificates: the old ones stay in use"),
    }
}

/// The node's Unix socket bypasses PostgreSQL's privileges (what a backend asks
/// for, the node does): only PostgreSQL's backends may connect. Mode 0600, owned
/// by the OS user PostgreSQL runs as (`postgres` when the daemon runs as root;
/// else the daemon's own user, which PostgreSQL runs as). Bound with the default
/// umask first (no write bit for others: nobody else could connect meanwhile).
fn restrict_socket(p: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o600))?;
    match postgres::pg_os_user()? {
        Some(u) => nix::unistd::chown(p, Some(u.uid), Some(u.gid))?,
        None if nix::unistd::geteuid().is_root() => tracing::info!(user = postgres::PG_OS_USER, "no such OS user: the Unix socket stays root's"),
        None => {}
    }
    Ok(())
}

/// Descriptors a node wants at least: RocksDB's table cache (4096 per data
/// directory), each tablet's Raft log segment, connections, PostgreSQL's backends'
/// sockets.
const DESCRIPTORS_WANTED: u64 = 65_536;

/// Raises this process's descriptor limit (`RLIMIT_NOFILE`) to its hard limit, as
/// TiKV and CockroachDB do at start (many distributions give 1024 soft), and warns
/// when even the hard limit is below [`DESCRIPTORS_WANTED`]: the node then keeps
/// serving, but a surge of tablets or connections can run it out of descriptors
/// (statements fail with "Too many open files" until the surge ends). Returns the
/// limit in force.
fn raise_descriptor_limit() -> u64 {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(error = %e, "could not read the descriptor limit");
            return 1024;
        }
    };
    let mut now = soft;
    if hard > soft {
        match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => now = hard,
            Err(e) => tracing::warn!(error = %e, soft, hard, "could not raise the descriptor limit"),
        }
    }
    if now < DESCRIPTORS_WANTED {
        tracing::warn!(limit = now, wanted = DESCRIPTORS_WANTED, "the descriptor limit is low (raise the hard limit: ulimit -Hn, LimitNOFILE=)");
    } else {
        tracing::info!(limit = now, "descriptor limit");
    }
    now
}

/// Descriptors kept from connections besides RocksDB's table caches: the Raft logs'
/// files, listeners, connections to other nodes, files being written by flushes,
/// compactions and snapshots.
const DESCRIPTORS_RESERVED: u64 = 256;

/// How many connections the node serves at once: what its descriptor limit leaves
/// after its storage's share (`storage`: RocksDB's table caches) and
/// [`DESCRIPTORS_RESERVED`]; at least 16. Past it a connection is refused with an
/// error (the client's statement fails with SQLSTATE 53000) rather than taking a
/// descriptor a flush needs (RocksDB stops a store's writes when one cannot open its
/// file).
fn max_connections(descriptors: u64, storage: u64) -> usize {
    descriptors.saturating_sub(storage + DESCRIPTORS_RESERVED).max(16) as usize
}

/// How long `pinax stop` waits for a node to stop after SIGTERM before it kills it.
const STOP_TIMEOUT_SECS: u64 = 30;

fn stop(a: DirArgs) -> Result<()> {
    let dir = default_data_dir(a.data_dir);
    if postgres::stop(&dir).context("stopping PostgreSQL")? {
        println!("PostgreSQL stopped");
    }
    let Some(pid) = read_pid(&dir) else {
        println!("no pinax node is running for {}", dir.display());
        return Ok(());
    };
    if !alive(pid) {
        let _ = std::fs::remove_file(pid_file(&dir));
        println!("no pinax node is running for {} (stale pid file removed)", dir.display());
        return Ok(());
    }
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGTERM).context("signalling the node")?;
    let deadline = Instant::now() + Duration::from_secs(a.timeout_secs);
    while alive(pid) {
        if Instant::now() > deadline {
            // Every acknowledged write is durable (kill -9 loses none): a node that
            // cannot finish its clean shutdown is stopped anyway, and its next start
            // recovers as after a crash.
            eprintln!("node (pid {pid}) did not stop within {} s after SIGTERM: killing it (SIGKILL)", a.timeout_secs);
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
            let killed = Instant::now() + Duration::from_secs(10);
            while alive(pid) {
                if Instant::now() > killed {
                    bail!("node (pid {pid}) survived SIGKILL for 10 s");
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = std::fs::remove_file(pid_file(&dir));
            println!("pinax node killed (pid {pid})");
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    println!("pinax node stopped (pid {pid})");
    Ok(())
}

/// A client of the node `a` names (its address, else the data directory's, else
/// the default port on loopback).
fn node_client(a: StatusArgs) -> Result<Client> {
    let dir = default_data_dir(a.data_dir);
    let addr = a.addr.or_else(|| std::fs::read_to_string(addr_file(&dir)).ok().map(|s| s.trim().to_string())).unwrap_or_else(|| "127.0.0.1:7100".into());
    let opts = client_options(&certs_dir(&dir, a.certs_dir.as_deref()))?;
    Client::connect_with(&addr, opts).with_context(|| format!("no pinax node answers at {addr}"))
}

/// `pinax tablet split`.
fn split_tablet(a: SplitArgs) -> Result<()> {
    let at = match &a.at {
        Some(h) => Some(unhex(h).with_context(|| format!("--at {h}: not a hex key"))?),
        None => None,
    };
    let client = node_client(a.node)?;
    match client.call(pinax_proto::Request::SplitTablet { tablet: pinax_common::TabletId(a.tablet), at })? {
        pinax_proto::Response::Split { parent, at, children } => {
            println!("tablet {} split at {}:", parent.0, hex(&at));
            for ti in &children {
                let end = ti.partition.end.as_ref().map(|e| hex(e)).unwrap_or_else(|| "∞".into());
                println!("  tablet {:>5} [{}, {}) replicas {}", ti.id.0, hex(&ti.partition.start), end, ti.replicas.join(","));
            }
            Ok(())
        }
        other => bail!("unexpected answer: {other:?}"),
    }
}

/// Bytes from hex digits.
fn unhex(h: &str) -> Option<Vec<u8>> {
    if !h.len().is_multiple_of(2) {
        return None;
    }
    (0..h.len()).step_by(2).map(|i| u8::from_str_radix(h.get(i..i + 2)?, 16).ok()).collect()
}

fn status(a: StatusArgs) -> Result<()> {
    let client = node_client(a)?;
    let s = client.status()?;
    // Written with `writeln!`, not `println!`: a reader that stops early (`| head`)
    // must not make this panic on a broken pipe.
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "node {} at {} (data dir {}), hybrid time {}", s.node_id, s.rpc_addr, s.data_dir, s.hybrid_time);
    let nodes: Vec<String> = s.nodes.iter().map(|(id, a)| format!("{id}@{a}")).collect();
    let _ = writeln!(out, "nodes: {} live: {}", s.nodes.len(), nodes.join(" "));
    let _ = writeln!(out, "status tablets led here: {} transaction records", s.status_tablet_records);
    let _ = writeln!(out, "tables: {}", s.tables.len());
    for t in &s.tables {
        let _ = writeln!(out, "  {} (id {}, {:?}): {} tablets", t.name, t.id.0, t.sharding, t.tablets.len());
        for ti in &t.tablets {
            let end = ti.partition.end.as_ref().map(|e| hex(e)).unwrap_or_else(|| "∞".into());
            let _ = writeln!(out, "    tablet {:>5} [{}, {}) leader {} replicas {}", ti.id.0, hex(&ti.partition.start), end, ti.leader, ti.replicas.join(","));
        }
    }
    Ok(())
}

fn hex(b: &[u8]) -> String {
    if b.is_empty() {
        return "-∞".into();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::block_cache_mb_for;

    #[test]
    fn split_keys_are_read_in_hex() {
        assert_eq!(super::unhex("00ff1a"), Some(vec![0, 255, 26]));
        assert_eq!(super::unhex(""), Some(vec![]));
        assert_eq!(super::unhex("abc"), None);
        assert_eq!(super::unhex("zz"), None);
    }

    #[test]
    fn the_default_block_cache_is_an_eighth_of_memory_and_at_least_256_mib() {
        assert_eq!(block_cache_mb_for("MemTotal:       24576000 kB\nMemFree:         1000 kB\n"), 3000);
        assert_eq!(block_cache_mb_for("MemFree: 1 kB\nMemTotal: 1048576 kB\n"), 256);
        assert_eq!(block_cache_mb_for(""), 256);
        assert_eq!(block_cache_mb_for("MemTotal: lots\n"), 256);
    }
}
