//! Network namespaces for `pinax cluster start --netns` (see `cluster.rs`): each
//! node a host of its own on a bridge, made with iproute2's `ip` (root only).
//!
//! ```text
//! PREFIX-sw:  br0 (SUBNET.254/24) ── n1 ─┐   ── n2 ─┐   …
//! PREFIX-1:   eth0 (SUBNET.1/24)  ───────┘          │
//! PREFIX-2:   eth0 (SUBNET.2/24)  ──────────────────┘
//! ```
//! Every namespace has its own loopback (up). A node is cut off by setting its
//! bridge port (`nI` in `PREFIX-sw`) down.

use anyhow::{bail, Context, Result};
use std::process::Command;

/// The namespace of node `node` (None: the bridge's, where clients run).
pub fn name(prefix: &str, node: Option<u32>) -> String {
    match node {
        Some(i) => format!("{prefix}-{i}"),
        None => format!("{prefix}-sw"),
    }
}

/// Whether `--netns PREFIX --subnet SUBNET` can be used here.
pub fn check(prefix: &str, subnet: &str) -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("--netns needs root (it creates network namespaces)");
    }
    if prefix.is_empty() || prefix.len() > 40 || !prefix.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        bail!("--netns {prefix:?}: use up to 40 letters, digits, - and _");
    }
    let octets: Vec<&str> = subnet.split('.').collect();
    if octets.len() != 3 || octets.iter().any(|o| o.parse::<u8>().is_err()) {
        bail!("--subnet {subnet:?}: give the first three numbers of a /24, e.g. 10.88.0");
    }
    ip(&["-V"]).context("--netns needs iproute2's `ip` (apt-get install iproute2)")?;
    Ok(())
}

fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip").args(args).output().with_context(|| format!("running ip {}", args.join(" ")))?;
    if !out.status.success() {
        bail!("ip {} failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// Create the bridge's namespace and one per node (removing any left by an
/// earlier run first).
pub fn create(prefix: &str, subnet: &str, nodes: u32) -> Result<()> {
    remove(prefix, nodes);
    let res = (|| {
        let sw = name(prefix, None);
        ip(&["netns", "add", &sw])?;
        ip(&["-n", &sw, "link", "set", "lo", "up"])?;
        ip(&["-n", &sw, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &sw, "addr", "add", &format!("{subnet}.254/24"), "dev", "br0"])?;
        ip(&["-n", &sw, "link", "set", "br0", "up"])?;
        for i in 1..=nodes {
            let ns = name(prefix, Some(i));
            let port = format!("n{i}");
            ip(&["netns", "add", &ns])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            ip(&["-n", &ns, "link", "add", "eth0", "type", "veth", "peer", "name", &port, "netns", &sw])?;
            ip(&["-n", &ns, "addr", "add", &format!("{subnet}.{i}/24"), "dev", "eth0"])?;
            ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
            ip(&["-n", &sw, "link", "set", &port, "master", "br0"])?;
            ip(&["-n", &sw, "link", "set", &port, "up"])?;
        }
        Ok(())
    })();
    if res.is_err() {
        remove(prefix, nodes);
    }
    res
}

/// Remove the namespaces (their interfaces go with them). Missing ones are fine.
pub fn remove(prefix: &str, nodes: u32) {
    for n in (1..=nodes).map(Some).chain([None]) {
        let ns = name(prefix, n);
        if std::path::Path::new("/run/netns").join(&ns).exists() {
            if let Err(e) = ip(&["netns", "del", &ns]) {
                eprintln!("pinax: {e:#}");
            }
        }
    }
}

/// Node `node`'s link to the bridge up (healed) or down (cut off).
pub fn set_link(prefix: &str, node: u32, up: bool) -> Result<()> {
    ip(&["-n", &name(prefix, None), "link", "set", &format!("n{node}"), if up { "up" } else { "down" }])
}

/// Runs `f` on a thread of its own that entered namespace `ns`: its sockets,
/// and the processes it starts, are in that namespace.
pub fn run_in<T: Send + 'static>(ns: &str, f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    let path = std::path::Path::new("/run/netns").join(ns);
    let file = std::fs::File::open(&path).with_context(|| format!("opening network namespace {}", path.display()))?;
    let ns = ns.to_string();
    std::thread::spawn(move || -> Result<T> {
        nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).with_context(|| format!("entering network namespace {ns}"))?;
        drop(file);
        f()
    })
    .join()
    .map_err(|_| anyhow::anyhow!("a thread in a network namespace panicked"))?
}
