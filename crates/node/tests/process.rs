//! Process-level tests of the `pinax` binary: CLI start/status/stop, and durability
//! of acknowledged writes across `kill -9`.

mod common;
use common::{bin, free_port, key, wait_client, Daemon};

use pinax_client::Client;
use pinax_proto::{ScanSpec, Sharding, WriteOp};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn spawn_run(dir: &std::path::Path, port: u16) -> Daemon {
    spawn_run_with(dir, port, &["--memtable-mb", "32"])
}

/// `pinax run` on `dir` and `port` with a 16 MiB block cache and `extra` arguments.
fn spawn_run_with(dir: &std::path::Path, port: u16, extra: &[&str]) -> Daemon {
    Daemon(
        Command::new(bin())
            .args(["run", "--data-dir"])
            .arg(dir)
            .args(["--port", &port.to_string(), "--block-cache-mb", "16", "--insecure"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

#[test]
fn acknowledged_writes_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = spawn_run(dir.path(), port);
    let c = wait_client(&addr);
    let t = c.create_table("durable", Sharding::Hash { tablets: 8 }).unwrap();
    assert_eq!(t.tablets.len(), 8);

    // Committed transactions across tablets, fast-path writes, an aborted
    // transaction and one left open when the node dies.
    let mut acked: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    for round in 0..30u32 {
        let mut txn = c.begin();
        let ops: Vec<WriteOp> = (0..8).map(|j| WriteOp::put(key(round * 8 + j), format!("r{round}").into_bytes())).collect();
        txn.write("durable", ops.clone()).unwrap();
        txn.commit().unwrap();
        acked.extend(ops.into_iter().map(|o| (o.key, o.value)));
    }
    for i in 1000..1050u32 {
        c.write("durable", vec![WriteOp::put(key(i), b"fast".to_vec())]).unwrap();
        acked.push((key(i), b"fast".to_vec()));
    }
    let mut aborted = c.begin();
    aborted.write("durable", (2000..2010).map(|i| WriteOp::put(key(i), b"aborted".to_vec())).collect()).unwrap();
    aborted.abort().unwrap();
    // The open transaction's client never heartbeats: once the node restarts, nobody
    // keeps the transaction alive (a leaked client would, which is the point of
    // heartbeats).
    let silent =
        pinax_client::Client::connect_with(&addr, pinax_client::ClientOptions { heartbeat_interval: Duration::from_secs(3600), ..Default::default() }).unwrap();
    let mut open = silent.begin();
    open.write("durable", (3000..3010).map(|i| WriteOp::put(key(i), b"open".to_vec())).collect()).unwrap();

    child.kill9();
    std::mem::forget(open); // its node is gone; do not try to abort it
    drop(c);

    let mut child = spawn_run(dir.path(), port);
    let c = wait_client(&addr);
    for (k, v) in &acked {
        assert_eq!(c.get("durable", k).unwrap().as_ref(), Some(v), "acknowledged write lost");
    }
    for i in (2000..2010).chain(3000..3010) {
        assert_eq!(c.get("durable", &key(i)).unwrap(), None, "unacknowledged write visible");
    }
    let rows = c.scan("durable", ScanSpec::default()).unwrap();
    assert_eq!(rows.len(), acked.len());
    // the open transaction's keys are writable again once it expires (5 s default)
    let deadline = Instant::now() + Duration::from_secs(30);
    while c.write("durable", vec![WriteOp::put(key(3000), b"after".to_vec())]).is_err() {
        assert!(Instant::now() < deadline, "abandoned transaction never released its keys");
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill9();
}

/// Past a Raft snapshot (every 20,000 entries; the log behind it purged), a
/// kill -9 loses nothing. Applies are not written to RocksDB's log (the Raft log
/// is the write-ahead log): those since the last memtable flush are redone from
/// the Raft log at restart, so the log must not be purged past them (building a
/// snapshot flushes first; without that, this test lost the rows).
#[test]
fn writes_survive_kill_9_after_the_log_was_purged() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let spawn = || spawn_run_with(dir.path(), port, &["--no-sync", "--memtable-mb", "256"]);
    let mut child = spawn();
    let c = wait_client(&addr);
    c.create_table("purged", Sharding::Hash { tablets: 1 }).unwrap();
    // One Raft entry per write (--no-sync: a process kill keeps what reached the
    // kernel, which is all a synced run keeps too).
    const WRITES: u32 = 24_000;
    std::thread::scope(|s| {
        for t in 0..4u32 {
            let addr = addr.clone();
            s.spawn(move || {
                let c = Client::connect(&addr).unwrap();
                for i in (t..WRITES).step_by(4) {
                    c.write("purged", vec![WriteOp::put(key(i), format!("v{i}").into_bytes())]).unwrap();
                }
            });
        }
    });
    child.kill9();
    drop(c);
    let mut child = spawn();
    let c = wait_client(&addr);
    let rows = c.scan("purged", ScanSpec::default()).unwrap();
    assert_eq!(rows.len(), WRITES as usize, "rows lost across kill -9");
    for i in (0..WRITES).step_by(997) {
        assert_eq!(c.get("purged", &key(i)).unwrap(), Some(format!("v{i}").into_bytes()));
    }
    child.kill9();
}

#[test]
fn cli_start_status_stop() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port().to_string();
    let d = dir.path().to_str().unwrap();
    let out = Command::new(bin())
        .args(["start", "--no-postgres", "--data-dir", d, "--port", &port, "--block-cache-mb", "16", "--memtable-mb", "32"])
        .output()
        .unwrap();
    assert!(out.status.success(), "start failed: {}", String::from_utf8_lossy(&out.stderr));
    let so = String::from_utf8_lossy(&out.stdout);
    assert!(so.contains(&format!("127.0.0.1:{port}")), "{so}");
    // starting again is harmless
    let again = Command::new(bin()).args(["start", "--no-postgres", "--data-dir", d, "--port", &port]).output().unwrap();
    assert!(again.status.success());
    assert!(String::from_utf8_lossy(&again.stdout).contains("already running"));
    // Secure by default: the node made its cluster's CA and certificate, and
    // answers only a client presenting one.
    assert!(Client::connect(&format!("127.0.0.1:{port}")).is_err(), "a client without a certificate was served");
    let tls = pinax_proto::tls::TlsConfig::node(&dir.path().join("certs")).unwrap();
    let c = Client::connect_with(&format!("127.0.0.1:{port}"), pinax_client::ClientOptions { tls: Some(tls), ..Default::default() }).unwrap();
    c.create_table("shown", Sharding::Hash { tablets: 0 }).unwrap();
    let st = Command::new(bin()).args(["status", "--data-dir", d]).output().unwrap();
    assert!(st.status.success());
    let text = String::from_utf8_lossy(&st.stdout);
    assert!(text.contains("shown"), "{text}");
    assert_eq!(text.matches("    tablet ").count(), 8, "{text}");
    let stop = Command::new(bin()).args(["stop", "--data-dir", d]).output().unwrap();
    assert!(stop.status.success(), "{}", String::from_utf8_lossy(&stop.stderr));
    assert!(String::from_utf8_lossy(&stop.stdout).contains("stopped"));
    assert!(Client::connect(&format!("127.0.0.1:{port}")).is_err());
    assert!(!dir.path().join("pinax.pid").exists());
}

#[test]
fn a_client_outlives_its_node_restarting() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = spawn_run(dir.path(), port);
    let c = wait_client(&addr);
    c.create_table("t", Sharding::Hash { tablets: 2 }).unwrap();
    c.write("t", vec![WriteOp::put(key(1), b"one".to_vec())]).unwrap();
    child.kill9();
    let mut child = spawn_run(dir.path(), port);
    let _ = wait_client(&addr);
    // The same client works again at once: a connection pooled before the restart
    // is noticed as closed and replaced, not handed a request to fail on.
    c.write("t", vec![WriteOp::put(key(2), b"two".to_vec())]).unwrap();
    assert_eq!(c.get("t", &key(1)).unwrap().as_deref(), Some(&b"one"[..]));
    child.kill9();
    // While the node is down: a clear, retryable error, never a hang or a panic.
    let e = c.get("t", &key(1)).unwrap_err();
    assert_eq!(e.code(), pinax_common::ErrorCode::Unavailable, "{e}");
    assert!(e.is_retryable());
    let mut child = spawn_run(dir.path(), port);
    let _ = wait_client(&addr);
    assert_eq!(c.get("t", &key(2)).unwrap().as_deref(), Some(&b"two"[..]));
    child.kill9();
}

#[test]
fn tablets_spread_over_data_dirs_and_a_missing_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let disks: Vec<std::path::PathBuf> = (0..2).map(|i| dir.path().join(format!("disk{i}"))).collect();
    let dirs_arg = disks.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(",");
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let run = |dirs: &str| {
        Command::new(bin())
            .args(["run", "--data-dir"])
            .arg(dir.path().join("node"))
            .args(["--port", &port.to_string(), "--block-cache-mb", "16", "--memtable-mb", "32", "--insecure", "--data-dirs", dirs])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // The engines each disk's store holds (read with the node stopped).
    let tablets_per_disk = || {
        let f = pinax_tserver::RocksFactory::with_roots(disks.clone(), pinax_engine_rocks::SharedResources::new(8 << 20, 8 << 20));
        let placed = f.placement().unwrap();
        placed.iter().map(|(_, names)| names.iter().filter(|n| n.starts_with("tablet-")).count()).collect::<Vec<usize>>()
    };
    let mut child = Daemon(run(&dirs_arg));
    let c = wait_client(&addr);
    c.create_table("spread", Sharding::Hash { tablets: 8 }).unwrap();
    for i in 0..100 {
        c.write("spread", vec![WriteOp::put(key(i), b"v".to_vec())]).unwrap();
    }
    child.kill9();
    drop(c);
    let counts = tablets_per_disk();
    // 8 tablets, and the node's status tablet once the master created it; evenly
    // (the catalog is an engine too).
    assert!((8..=9).contains(&counts.iter().sum::<usize>()), "{counts:?}");
    assert!(counts.iter().all(|n| *n >= 4), "tablets not spread evenly: {counts:?}");

    // Without one of the disks: refused, nothing touched.
    let out = run(&disks[0].display().to_string()).wait_with_output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("holds tablets of this node") && err.contains("disk1"), "{err}");

    // With both again: every row is there.
    let mut child = Daemon(run(&dirs_arg));
    let c = wait_client(&addr);
    assert_eq!(c.scan("spread", ScanSpec::default()).unwrap().len(), 100);
    child.kill9();
}

/// The daemon turns transparent huge pages off for itself (mimalloc would ask for
/// them, and each first touch of one zeroes 2 MiB: bench/results/2026-11-27-thp.txt).
#[test]
fn the_daemon_runs_without_transparent_huge_pages() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let child = spawn_run(dir.path(), port);
    let _ = wait_client(&format!("127.0.0.1:{port}"));
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.0.id())).unwrap();
    match status.lines().find_map(|l| l.strip_prefix("THP_enabled:")) {
        Some(v) => assert_eq!(v.trim(), "0", "THP_enabled in /proc/PID/status"),
        // Kernels before 6.0 do not show the flag.
        None => eprintln!("no THP_enabled line in /proc/PID/status: not checked"),
    }
}

/// `pinax stop` always stops the node: one that does not finish its clean stop
/// (here: frozen by SIGSTOP, so SIGTERM is never handled) is killed after the
/// timeout, and starts again with every acknowledged write.
#[test]
fn stop_kills_a_node_that_does_not_stop() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = spawn_run(dir.path(), port);
    let c = wait_client(&addr);
    c.create_table("t", Sharding::Hash { tablets: 2 }).unwrap();
    c.write("t", vec![WriteOp::put(key(1), b"one".to_vec())]).unwrap();
    drop(c);
    let pid = nix::unistd::Pid::from_raw(child.0.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let out = Command::new(bin()).args(["stop", "--timeout-secs", "1", "--data-dir"]).arg(dir.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("killing it"), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("killed"));
    child.0.wait().unwrap();
    let _child = spawn_run(dir.path(), port);
    let c = wait_client(&addr);
    assert_eq!(c.get("t", &key(1)).unwrap(), Some(b"one".to_vec()));
}

/// The node raises its soft descriptor limit to the hard one at start.
#[test]
fn the_node_raises_its_descriptor_limit() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    // prlimit (util-linux) execs the daemon with a soft limit of 1024, hard 4096.
    let child = Daemon(
        Command::new("prlimit")
            .arg("--nofile=1024:4096")
            .arg(bin())
            .args(["run", "--data-dir"])
            .arg(dir.path())
            .args(["--port", &port.to_string(), "--block-cache-mb", "16", "--memtable-mb", "32", "--insecure"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let _ = wait_client(&format!("127.0.0.1:{port}"));
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", child.0.id())).unwrap();
    let line = limits.lines().find(|l| l.starts_with("Max open files")).unwrap();
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(&fields[3..5], &["4096", "4096"], "{line}");
}

/// A daemon under `prlimit --nofile=N:N` with extra arguments.
fn spawn_limited(dir: &std::path::Path, port: u16, nofile: u32, extra: &[&str]) -> Daemon {
    Daemon(
        Command::new("prlimit")
            .arg(format!("--nofile={nofile}:{nofile}"))
            .arg(bin())
            .args(["run", "--data-dir"])
            .arg(dir)
            .args(["--port", &port.to_string(), "--block-cache-mb", "16", "--memtable-mb", "32", "--insecure"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// Opens clients until `n` are connected or the node refuses more; returns the
/// connected ones and the refusals' messages. Every attempt ends within the
/// client's connect timeout: a refused client is told, not left hanging.
fn connect_many(addr: &str, n: usize) -> (Vec<Client>, Vec<String>) {
    let (mut held, mut refused) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let t0 = Instant::now();
        match Client::connect(addr) {
            Ok(c) => held.push(c),
            Err(e) => refused.push(e.to_string()),
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "a connection attempt took {:?}", t0.elapsed());
    }
    (held, refused)
}

/// The node and its tablets keep working for a client connected before a surge.
fn still_serves(c: &Client, table: &str, i: u32) {
    c.create_table(table, Sharding::Hash { tablets: 4 }).unwrap();
    c.write(table, vec![WriteOp::put(key(i), b"v".to_vec())]).unwrap();
    assert_eq!(c.get(table, &key(i)).unwrap(), Some(b"v".to_vec()));
    assert_eq!(c.get("t", &key(1)).unwrap(), Some(b"one".to_vec()));
}

/// A node with few descriptors, driven past them by a surge of clients: the
/// clients it cannot serve are refused with a clear error (not left hanging), the
/// clients it serves, the master and every tablet keep working, and once the surge
/// ends new clients are served again. Twice: past the node's connection budget
/// (what its descriptor limit leaves after its storage's share), and, with the
/// budget set above the limit, past the descriptors themselves (accept fails with
/// EMFILE: the node refuses the waiting client with a descriptor held in reserve).
#[test]
fn a_node_driven_past_its_descriptors_refuses_clients_and_recovers() {
    for (round, extra) in [(0u32, vec![]), (1, vec!["--max-connections", "100000"])] {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        // 512 descriptors: 128 for RocksDB's files, 256 reserved, 128 connections.
        let _child = spawn_limited(dir.path(), port, 512, &extra);
        let c = wait_client(&addr);
        c.create_table("t", Sharding::Hash { tablets: 4 }).unwrap();
        c.write("t", vec![WriteOp::put(key(1), b"one".to_vec())]).unwrap();
        let (held, refused) = connect_many(&addr, 600);
        assert!(!refused.is_empty(), "round {round}: all 600 clients were served with 512 descriptors");
        // (One address gets half the connection budget: from 127.0.0.1 alone the
        // surge meets that bound first.)
        let why: &[&str] = if round == 0 { &["connections at once", "from one address"] } else { &["out of file descriptors"] };
        assert!(refused.iter().any(|m| why.iter().any(|w| m.contains(w))), "round {round}: refusals {:?}", &refused[..refused.len().min(3)]);
        if round == 0 {
            assert!(held.len() <= 128, "{} clients served with a budget of 128", held.len());
        }
        still_serves(&c, "during", 2);
        drop(held);
        // The node closes the surge's connections as their clients go.
        let deadline = Instant::now() + Duration::from_secs(20);
        let fresh = loop {
            match Client::connect(&addr) {
                Ok(f) => break f,
                Err(e) => assert!(Instant::now() < deadline, "round {round}: no new client served after the surge: {e}"),
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        still_serves(&fresh, "after", 3);
        let (again, _) = connect_many(&addr, 50);
        assert_eq!(again.len(), 50, "round {round}");
    }
}

/// A tmpfs of `mib` MiB mounted on a fresh directory (root only), unmounted when
/// dropped; `None` where mounting is not allowed.
struct SmallDisk(tempfile::TempDir);

impl SmallDisk {
    fn mount(mib: u32) -> Option<SmallDisk> {
        let dir = tempfile::tempdir().unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(dir.path())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(SmallDisk(dir))
    }
    fn path(&self) -> &std::path::Path {
        self.0.path()
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.0.path()).status();
    }
}

/// A node whose disk fills up: once the disk's free space falls below the node's
/// reserve, writes fail with "disk full" (53100) while reads and DDL go on and the
/// node stays up; dropping the table that filled it gives the space back and
/// writes succeed again; every acknowledged write is there after a restart.
#[test]
fn a_node_whose_disk_fills_refuses_writes_keeps_serving_and_resumes_when_space_is_freed() {
    let Some(disk) = SmallDisk::mount(256) else {
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    };
    let data = disk.path().join("node");
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let spawn = || spawn_run_with(&data, port, &["--memtable-mb", "16", "--min-free-mb", "64"]);
    let mut child = spawn();
    let c = wait_client(&addr);
    c.create_table("t", Sharding::Hash { tablets: 4 }).unwrap();
    c.create_table("big", Sharding::Hash { tablets: 4 }).unwrap();
    // Rows of 16 KiB that do not compress, 64 (1 MiB) per write.
    let value = |i: u32| -> Vec<u8> { (0..16u32 << 10).map(|j| (j.wrapping_mul(2654435761).wrapping_add(i.wrapping_mul(40503)) >> 13) as u8).collect() };
    let batch = |from: u32| -> Vec<WriteOp> { (from..from + 64).map(|i| WriteOp::put(key(i), value(i))).collect() };
    c.write("t", batch(0)).unwrap();
    let kept: Vec<u32> = (0..64).collect();
    let mut filled = 0u32;
    // Writes to `big` until one is refused; returns the refusal.
    let fill = |filled: &mut u32| loop {
        assert!(*filled < 256 * 64, "256 MiB written to a 256 MiB disk without a refusal");
        match c.write("big", batch(*filled)) {
            Ok(_) => *filled += 64,
            Err(e) => break e,
        }
    };
    let refusal = fill(&mut filled);
    assert_eq!(refusal.code(), pinax_common::ErrorCode::DiskFull, "{refusal}");
    assert_eq!(refusal.code().sqlstate(), "53100");
    assert!(refusal.to_string().contains("below the reserve of 64 MiB"), "{refusal}");
    let first = filled / 64;
    assert!(first >= 32, "refused after only {first} MiB of rows");
    eprintln!("refused after {first} MiB of rows: {refusal}");

    // The node keeps serving: reads and DDL; more writes are refused again before
    // long (the node's own work may free a little space meanwhile: its flushes
    // drop the write-ahead log they cover).
    for i in [0, filled / 2, filled - 1] {
        assert_eq!(c.get("big", &key(i)).unwrap(), Some(value(i)), "row {i}");
    }
    assert_eq!(c.get("t", &key(5)).unwrap(), Some(value(5)));
    c.create_table("u", Sharding::Hash { tablets: 2 }).unwrap();
    let e = fill(&mut filled);
    assert_eq!(e.code(), pinax_common::ErrorCode::DiskFull, "{e}");
    assert!(filled / 64 - first <= 32, "{} MiB more written after the first refusal", filled / 64 - first);
    assert!(child.0.try_wait().unwrap().is_none(), "the node is still up");

    // Dropping the table gives its space back: writes succeed again.
    c.drop_table("big", false).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match c.write("t", vec![WriteOp::put(key(1 << 30), b"after".to_vec())]) {
            Ok(_) => break,
            Err(e) => {
                assert_eq!(e.code(), pinax_common::ErrorCode::DiskFull, "{e}");
                assert!(Instant::now() < deadline, "writes still refused 30 s after the table was dropped: {e}");
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
    c.write("u", vec![WriteOp::put(key(1), b"u".to_vec())]).unwrap();

    // Every acknowledged write survives a restart.
    child.kill9();
    drop(child);
    let _child = spawn();
    let c = wait_client(&addr);
    for &i in &kept {
        assert_eq!(c.get("t", &key(i)).unwrap().map(|v| v == value(i)), Some(true), "row {i} after the restart");
    }
    assert_eq!(c.get("t", &key(1 << 30)).unwrap(), Some(b"after".to_vec()));
    assert_eq!(c.get("u", &key(1)).unwrap(), Some(b"u".to_vec()));
}

/// A node listens where `--listen` says (here an IPv6 literal, where the machine
/// has ::1) and keeps the address it advertised: restarted with another one it
/// refuses to start, saying why; restarted with its own it serves its rows.
#[test]
fn a_node_keeps_its_advertised_address_and_listens_on_ipv6() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let host = if std::net::TcpListener::bind(("::1", 0)).is_ok() { "[::1]" } else { "127.0.0.1" };
    let addr = format!("{host}:{port}");
    let mut node = spawn_run_with(dir.path(), port, &["--listen", host]);
    let c = wait_client(&addr);
    c.create_table("kept", Sharding::Hash { tablets: 2 }).unwrap();
    c.write("kept", vec![WriteOp::put(key(1), b"one".to_vec())]).unwrap();
    drop(c);
    node.kill9();
    let out = Command::new(bin())
        .args(["run", "--data-dir"])
        .arg(dir.path())
        .args(["--port", &port.to_string(), "--listen", host, "--advertise", "10.1.2.3"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a node started at another address: {err}");
    assert!(err.contains(&format!("is known to its cluster at {addr}, not 10.1.2.3:{port}")), "{err}");
    let _node = spawn_run_with(dir.path(), port, &["--listen", host]);
    let c = wait_client(&addr);
    assert_eq!(c.get("kept", &key(1)).unwrap(), Some(b"one".to_vec()));
    // A wildcard needs an address to advertise.
    let out = Command::new(bin()).args(["run", "--data-dir"]).arg(dir.path()).args(["--listen", "0.0.0.0"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs --advertise"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// The node's Unix socket (which bypasses PostgreSQL's privileges) is for
/// PostgreSQL's backends only: mode 0600, owned by PostgreSQL's OS user (root's
/// daemon: `postgres`, when that user exists).
#[test]
fn the_unix_socket_is_for_postgres_only() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let _node = spawn_run(dir.path(), port);
    let _c = wait_client(&format!("127.0.0.1:{port}"));
    // Bound and restricted before the node serves: there once a client is.
    let m = std::fs::metadata(dir.path().join("pinax.sock")).unwrap();
    assert_eq!(m.permissions().mode() & 0o777, 0o600);
    let pg_user = nix::unistd::User::from_name("postgres").ok().flatten();
    match pg_user {
        Some(u) if nix::unistd::geteuid().is_root() => assert_eq!(m.uid(), u.uid.as_raw()),
        _ => assert_eq!(m.uid(), nix::unistd::geteuid().as_raw()),
    }
}

/// `--insecure` stays on loopback unless also asked explicitly (as CockroachDB's
/// does): a plaintext node on a reachable address is every neighbour's.
#[test]
fn insecure_is_refused_off_loopback_unless_asked() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port().to_string();
    let out = Command::new(bin())
        .args(["run", "--data-dir"])
        .arg(dir.path())
        .args(["--port", &port, "--listen", "0.0.0.0", "--advertise", "10.1.2.3", "--insecure"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "an insecure node listened on every interface: {err}");
    assert!(err.contains("--allow-insecure-remote"), "{err}");
    assert!(!dir.path().join("pinax.pid").exists());
}

/// A secure `pinax run` (no `--insecure`) on `dir` and `port`, its log in
/// `dir/../<name>.log`.
fn spawn_secure(dir: &std::path::Path, port: u16, extra: &[&str]) -> Daemon {
    let log = std::fs::File::create(dir.with_extension("log")).unwrap();
    Daemon(
        Command::new(bin())
            .args(["run", "--data-dir"])
            .arg(dir)
            .args(["--port", &port.to_string(), "--block-cache-mb", "16", "--memtable-mb", "32"])
            .args(extra)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    )
}

fn join_token(certs: &std::path::Path) -> String {
    let out = Command::new(bin()).args(["cert", "create-join-token", "--certs-dir"]).arg(certs).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A client of the secure node at `addr` whose certificates are in `dir/certs`
/// (made by the node as it starts).
fn wait_secure(addr: &str, dir: &std::path::Path) -> Client {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !dir.join("certs/node.crt").exists() {
        assert!(Instant::now() < deadline, "{} got no certificate", dir.display());
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(100));
    common::wait_client_with(addr, common::tls_options(&dir.join("certs")))
}

fn wait_nodes(c: &Client, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while c.status().map(|s| s.nodes.len()).unwrap_or(0) < n {
        assert!(Instant::now() < deadline, "the cluster did not reach {n} nodes");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The zero-ceremony join: a node started with `--join` and a token from the
/// first node (which made the CA) gets its certificate from the cluster, through
/// a node without the CA key too; a token admits one node; a wrong one is
/// refused. A client certificate reaches status, not data; a peer without a
/// certificate may only ask to join.
#[test]
fn nodes_join_with_a_token_and_certificate_roles_hold() {
    let root = tempfile::tempdir().unwrap();
    let dirs: Vec<std::path::PathBuf> = (1..=4).map(|i| root.path().join(format!("n{i}"))).collect();
    let ports: Vec<u16> = (0..4).map(|_| free_port()).collect();
    let addrs: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let _n1 = spawn_secure(&dirs[0], ports[0], &[]);
    let c1 = wait_secure(&addrs[0], &dirs[0]);
    c1.create_table("joined", Sharding::Hash { tablets: 2 }).unwrap();

    // Node 2 joins with a token; its certificate names its address, its CA is
    // node 1's, and it holds no CA key.
    let token = join_token(&dirs[0].join("certs"));
    let _n2 = spawn_secure(&dirs[1], ports[1], &["--join", &addrs[0], "--token", &token]);
    let c2 = wait_secure(&addrs[1], &dirs[1]);
    wait_nodes(&c1, 2);
    let read = |p: &std::path::PathBuf| std::fs::read(p).unwrap();
    assert_eq!(read(&dirs[1].join("certs/ca.crt")), read(&dirs[0].join("certs/ca.crt")));
    assert!(!dirs[1].join("certs/ca.key").exists());
    c2.write("joined", vec![WriteOp::put(key(1), b"one".to_vec())]).unwrap();
    assert_eq!(c1.get("joined", &key(1)).unwrap().as_deref(), Some(&b"one"[..]));

    // The same token again: refused, the node does not start.
    let run = |i: usize, join: &str, token: &str| {
        Command::new(bin())
            .args(["run", "--data-dir"])
            .arg(&dirs[i])
            .args(["--port", &ports[i].to_string(), "--join", join, "--token", token])
            .output()
            .unwrap()
    };
    let again = run(2, &addrs[0], &token);
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(!again.status.success() && err.contains("used already"), "{err}");
    assert!(!dirs[2].join("certs/node.crt").exists());
    // Not a token, and one of another cluster's CA.
    let bad = run(2, &addrs[0], "pinax-join1-AAAA");
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("not a Pinax join token"));
    let other = root.path().join("other-ca");
    assert!(Command::new(bin()).args(["cert", "create-ca", "--certs-dir"]).arg(&other).status().unwrap().success());
    let foreign = run(2, &addrs[0], &join_token(&other));
    let err = String::from_utf8_lossy(&foreign.stderr);
    assert!(!foreign.status.success() && err.contains("did not present the CA of the join token"), "{err}");
    // Without any token: told what to do.
    let none = Command::new(bin()).args(["run", "--data-dir"]).arg(&dirs[2]).args(["--port", &ports[2].to_string(), "--join", &addrs[0]]).output().unwrap();
    assert!(!none.status.success() && String::from_utf8_lossy(&none.stderr).contains("--token"));

    // Node 3 joins through node 2, which has no CA key: node 2 passes the
    // request on to node 1.
    let token = join_token(&dirs[0].join("certs"));
    let _n3 = spawn_secure(&dirs[2], ports[2], &["--join", &addrs[1], "--token", &token]);
    let _c3 = wait_secure(&addrs[2], &dirs[2]);
    wait_nodes(&c1, 3);

    // An operator's client certificate: status, not data, not the cluster.
    let certs = dirs[0].join("certs");
    assert!(Command::new(bin()).args(["cert", "create-client", "--certs-dir"]).arg(&certs).arg("alice").status().unwrap().success());
    let alice = pinax_proto::tls::TlsConfig::load(pinax_proto::tls::Identity::client(&certs, "alice")).unwrap();
    let ca = Client::connect_with(&addrs[0], pinax_client::ClientOptions { tls: Some(alice), ..Default::default() }).unwrap();
    assert_eq!(ca.status().unwrap().nodes.len(), 3);
    for e in [ca.get("joined", &key(1)).unwrap_err(), ca.create_table("alice_t", Sharding::Hash { tablets: 1 }).unwrap_err()] {
        assert_eq!(e.code(), pinax_common::ErrorCode::PermissionDenied, "{e}");
    }
    let ddl = ca.call(pinax_proto::Request::ReadDdl { after: 0, max: 10 }).unwrap_err();
    assert_eq!(ddl.code(), pinax_common::ErrorCode::PermissionDenied, "{ddl}");

    // A peer without a certificate: anything but a join is refused, and the
    // connection closed.
    use std::io::Write as _;
    let fp = pinax_proto::tls::file_fingerprint(&certs.join("ca.crt")).unwrap();
    let tcp = std::net::TcpStream::connect(&addrs[0]).unwrap();
    let s = pinax_proto::tls::connect_pinned(tcp, &addrs[0], fp, Duration::from_secs(5)).unwrap();
    let mut buf = Vec::new();
    let env = pinax_proto::RequestEnvelope { ht: pinax_common::HybridTime::INVALID, fence: 0, request: pinax_proto::Request::Status };
    pinax_proto::frame::write_frame(&mut &s, &env, &mut buf).unwrap();
    (&s).flush().unwrap();
    let resp: pinax_proto::ResponseEnvelope = pinax_proto::frame::read_frame(&mut &s, &mut buf).unwrap().unwrap();
    assert_eq!(resp.result.unwrap_err().code, pinax_common::ErrorCode::PermissionDenied);
    assert!(pinax_proto::frame::read_frame::<pinax_proto::ResponseEnvelope, _>(&mut &s, &mut buf).map_or(true, |r| r.is_none()), "the connection stayed open");
    let log = std::fs::read_to_string(dirs[0].with_extension("log")).unwrap();
    assert!(log.contains("refused a request its peer may not make"), "{log}");
}

fn hup(d: &Daemon) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(d.0.id() as i32), nix::sys::signal::Signal::SIGHUP).unwrap();
}

/// Rotating the cluster's CA with reloads, as README says: both CAs in
/// `ca.crt` on every node and SIGHUP, node certificates of the new CA and
/// SIGHUP, then the old CA out and SIGHUP. The cluster serves throughout, a
/// restarted node reconnects with the new certificates, and a certificate of
/// the old CA is refused at the end.
#[test]
fn the_clusters_ca_rotates_with_reloads() {
    let root = tempfile::tempdir().unwrap();
    let dirs: Vec<std::path::PathBuf> = (1..=2).map(|i| root.path().join(format!("n{i}"))).collect();
    let ports: Vec<u16> = (0..2).map(|_| free_port()).collect();
    let addrs: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let n1 = spawn_secure(&dirs[0], ports[0], &[]);
    let c1 = wait_secure(&addrs[0], &dirs[0]);
    let token = join_token(&dirs[0].join("certs"));
    let n2_args = ["--join", &addrs[0], "--token", &token];
    let mut n2 = spawn_secure(&dirs[1], ports[1], &n2_args);
    let _ = wait_secure(&addrs[1], &dirs[1]);
    wait_nodes(&c1, 2);
    c1.create_table("rot", Sharding::Hash { tablets: 2 }).unwrap();
    c1.write("rot", vec![WriteOp::put(key(0), b"v0".to_vec())]).unwrap();
    // The old identity, to try at the end.
    let old = root.path().join("old");
    std::fs::create_dir(&old).unwrap();
    for f in ["ca.crt", "node.crt", "node.key"] {
        std::fs::copy(dirs[0].join("certs").join(f), old.join(f)).unwrap();
    }
    let new = root.path().join("new");
    assert!(Command::new(bin()).args(["cert", "create-ca", "--certs-dir"]).arg(&new).status().unwrap().success());
    let settle = || std::thread::sleep(Duration::from_millis(600));
    let write_through = |i: u32| {
        let c = Client::connect_with(&addrs[1], common::tls_options(&dirs[1].join("certs"))).unwrap();
        c.write("rot", vec![WriteOp::put(key(i), format!("v{i}").into_bytes())]).unwrap();
        let c = Client::connect_with(&addrs[0], common::tls_options(&dirs[0].join("certs"))).unwrap();
        assert_eq!(c.get("rot", &key(i)).unwrap(), Some(format!("v{i}").into_bytes()));
    };
    // 1. Both CAs trusted everywhere.
    let both = std::fs::read_to_string(old.join("ca.crt")).unwrap() + &std::fs::read_to_string(new.join("ca.crt")).unwrap();
    for d in &dirs {
        std::fs::write(d.join("certs/ca.crt"), &both).unwrap();
    }
    hup(&n1);
    hup(&n2);
    settle();
    write_through(1);
    // 2. Node certificates of the new CA.
    for d in &dirs {
        assert!(Command::new(bin()).args(["cert", "create-node", "--certs-dir"]).arg(&new).arg("127.0.0.1").status().unwrap().success());
        for f in ["node.crt", "node.key"] {
            std::fs::copy(new.join(f), d.join("certs").join(f)).unwrap();
        }
    }
    hup(&n1);
    hup(&n2);
    settle();
    write_through(2);
    // 3. The old CA out (and the new CA's key where tokens are made).
    for d in &dirs {
        std::fs::copy(new.join("ca.crt"), d.join("certs/ca.crt")).unwrap();
    }
    std::fs::copy(new.join("ca.key"), dirs[0].join("certs/ca.key")).unwrap();
    hup(&n1);
    hup(&n2);
    settle();
    write_through(3);
    // A restarted node connects anew, with the new certificates only.
    n2.kill9();
    let _n2 = spawn_secure(&dirs[1], ports[1], &n2_args);
    let _ = wait_secure(&addrs[1], &dirs[1]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let c = Client::connect_with(&addrs[1], common::tls_options(&dirs[1].join("certs"))).unwrap();
        match c.write("rot", vec![WriteOp::put(key(4), b"v4".to_vec())]) {
            Ok(_) => break,
            Err(e) => assert!(e.is_retryable() && Instant::now() < deadline, "{e}"),
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // (c1 trusts the old CA only: a client of the new one.)
    let c = Client::connect_with(&addrs[0], common::tls_options(&dirs[0].join("certs"))).unwrap();
    for i in 0..5 {
        loop {
            match c.get("rot", &key(i)) {
                Ok(v) => break assert_eq!(v, Some(format!("v{i}").into_bytes())),
                Err(e) => assert!(e.is_retryable() && Instant::now() < deadline, "{e}"),
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    assert!(Client::connect_with(&addrs[0], common::tls_options(&old)).is_err(), "a certificate of the retired CA was served");
    // Tokens are made and honoured with the new CA.
    let t = join_token(&dirs[0].join("certs"));
    assert!(t.starts_with("pinax-join1-"));
}
