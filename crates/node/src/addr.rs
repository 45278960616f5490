//! Network addresses on the command line: `HOST[:PORT]` with IPv6 literals
//! (`::1`, `[::1]`, `[::1]:7100`), host names, and the checks `pinax start`
//! makes of its `--listen` / `--advertise` pair.

use anyhow::{bail, Result};
use std::net::IpAddr;

/// `host:port`, an IPv6 literal in brackets (as `ToSocketAddrs` and URLs want it).
pub fn host_port(host: &str, port: u16) -> String {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    if h.contains(':') {
        format!("[{h}]:{port}")
    } else {
        format!("{h}:{port}")
    }
}

/// Splits `HOST[:PORT]`: a bare IPv6 literal (`::1`) has no port; `[::1]:7100`,
/// `10.0.0.5:7100` and `n1.example:7100` do. The host comes back without brackets.
pub fn split_host_port(s: &str) -> Result<(String, Option<u16>)> {
    let s = s.trim();
    if s.is_empty() {
        bail!("an empty address");
    }
    if let Some(rest) = s.strip_prefix('[') {
        let Some((host, after)) = rest.split_once(']') else { bail!("{s}: no closing ] after an IPv6 address") };
        if host.parse::<std::net::Ipv6Addr>().is_err() {
            bail!("{s}: {host} is not an IPv6 address");
        }
        return match after {
            "" => Ok((host.to_string(), None)),
            p => match p.strip_prefix(':').map(str::parse::<u16>) {
                Some(Ok(port)) => Ok((host.to_string(), Some(port))),
                _ => bail!("{s}: a port after ]: must be a number up to 65535"),
            },
        };
    }
    if s.parse::<std::net::Ipv6Addr>().is_ok() {
        return Ok((s.to_string(), None));
    }
    match s.rsplit_once(':') {
        None => Ok((s.to_string(), None)),
        Some((host, _)) if host.contains(':') => bail!("{s}: write an IPv6 address with a port as [ADDRESS]:PORT"),
        Some((host, port)) => match port.parse::<u16>() {
            Ok(p) if !host.is_empty() => Ok((host.to_string(), Some(p))),
            _ => bail!("{s}: {port:?} is not a port"),
        },
    }
}

/// Whether `host` is a wildcard address (listen on every interface): not an
/// address another node could reach this one at.
pub fn is_wildcard(host: &str) -> bool {
    host.parse::<IpAddr>().is_ok_and(|ip| ip.is_unspecified())
}

/// Where a node listens and what it tells the others, from `--listen`,
/// `--advertise` and `--port`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Addresses {
    /// What the RPC server binds (`host:port`).
    pub listen: String,
    /// What the other nodes and the master record for this node (`host:port`).
    pub advertise: String,
    /// An address this machine reaches the node at (the listen address, or
    /// loopback of its family when that is a wildcard).
    pub local: String,
    /// The listen host (no brackets).
    pub listen_host: String,
}

/// The addresses of a node started with `--listen listen` (default
/// `127.0.0.1`), `--advertise advertise` (default: the listen address) and
/// `--port port` (the port when `--listen` names none). A wildcard listen
/// address needs an `--advertise`; a wildcard advertised address is refused.
pub fn resolve(listen: Option<&str>, advertise: Option<&str>, port: u16) -> Result<Addresses> {
    let (lhost, lport) = split_host_port(listen.unwrap_or("127.0.0.1"))?;
    let lport = lport.unwrap_or(port);
    let advertise = match advertise {
        Some(a) => {
            let (ahost, aport) = split_host_port(a)?;
            if is_wildcard(&ahost) {
                bail!("--advertise {a}: a wildcard address is not one other nodes can reach; give this node's own address or name");
            }
            host_port(&ahost, aport.unwrap_or(lport))
        }
        None if is_wildcard(&lhost) => {
            bail!(
                "--listen {}: listening on every interface needs --advertise HOST[:PORT], the address other nodes reach this one at",
                host_port(&lhost, lport)
            )
        }
        None => host_port(&lhost, lport),
    };
    let local = if is_wildcard(&lhost) {
        let ip: IpAddr = lhost.parse().expect("a wildcard is an IP address");
        host_port(if ip.is_ipv4() { "127.0.0.1" } else { "::1" }, lport)
    } else {
        host_port(&lhost, lport)
    };
    Ok(Addresses { listen: host_port(&lhost, lport), advertise, local, listen_host: lhost })
}

/// PostgreSQL's `listen_addresses` for `--pg-listen` (default: the node's listen
/// host; a wildcard listens everywhere: `*`).
pub fn pg_listen_addresses(pg_listen: Option<&str>, listen_host: &str) -> String {
    let given = pg_listen.unwrap_or(listen_host);
    given
        .split(',')
        .map(|h| {
            let h = h.trim().trim_start_matches('[').trim_end_matches(']');
            if is_wildcard(h) {
                "*".to_string()
            } else {
                h.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_and_port_are_split_with_ipv6_literals_and_names() {
        assert_eq!(split_host_port("10.0.0.5").unwrap(), ("10.0.0.5".into(), None));
        assert_eq!(split_host_port("10.0.0.5:7100").unwrap(), ("10.0.0.5".into(), Some(7100)));
        assert_eq!(split_host_port("n1.example:7101").unwrap(), ("n1.example".into(), Some(7101)));
        assert_eq!(split_host_port("::1").unwrap(), ("::1".into(), None));
        assert_eq!(split_host_port("[::1]").unwrap(), ("::1".into(), None));
        assert_eq!(split_host_port("[fd00::5]:7100").unwrap(), ("fd00::5".into(), Some(7100)));
        for bad in ["", "[::1", "[nope]:1", "[::1]:x", "10.0.0.5:99999", ":7100", "fd00::5:x:"] {
            assert!(split_host_port(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(host_port("::1", 7100), "[::1]:7100");
        assert_eq!(host_port("[::1]", 7100), "[::1]:7100");
        assert_eq!(host_port("10.0.0.5", 7100), "10.0.0.5:7100");
    }

    #[test]
    fn a_node_advertises_its_listen_address_unless_told_and_never_a_wildcard() {
        let a = resolve(None, None, 7100).unwrap();
        assert_eq!((a.listen.as_str(), a.advertise.as_str(), a.local.as_str()), ("127.0.0.1:7100", "127.0.0.1:7100", "127.0.0.1:7100"));
        let a = resolve(Some("10.0.0.5"), None, 7200).unwrap();
        assert_eq!((a.listen.as_str(), a.advertise.as_str()), ("10.0.0.5:7200", "10.0.0.5:7200"));
        let a = resolve(Some("0.0.0.0:7300"), Some("n1.example"), 7100).unwrap();
        assert_eq!((a.listen.as_str(), a.advertise.as_str(), a.local.as_str()), ("0.0.0.0:7300", "n1.example:7300", "127.0.0.1:7300"));
        let a = resolve(Some("[::]"), Some("[fd00::5]:7400"), 7100).unwrap();
        assert_eq!((a.listen.as_str(), a.advertise.as_str(), a.local.as_str()), ("[::]:7100", "[fd00::5]:7400", "[::1]:7100"));
        let a = resolve(Some("::1"), None, 7100).unwrap();
        assert_eq!(a.advertise, "[::1]:7100");
        let e = resolve(Some("0.0.0.0"), None, 7100).unwrap_err().to_string();
        assert!(e.contains("needs --advertise"), "{e}");
        let e = resolve(Some("10.0.0.5"), Some("0.0.0.0"), 7100).unwrap_err().to_string();
        assert!(e.contains("wildcard"), "{e}");
    }

    #[test]
    fn postgres_listens_where_the_node_does_unless_told() {
        assert_eq!(pg_listen_addresses(None, "127.0.0.1"), "127.0.0.1");
        assert_eq!(pg_listen_addresses(None, "0.0.0.0"), "*");
        assert_eq!(pg_listen_addresses(None, "::"), "*");
        assert_eq!(pg_listen_addresses(Some("10.0.0.5, [::1]"), "0.0.0.0"), "10.0.0.5,::1");
    }
}
