//! A cluster's certificates: `pinax cert create-ca | create-node | create-client |
//! list`, and the zero-ceremony path of `pinax run` (a new cluster's first node
//! makes its CA and its own certificate; a node whose CA key is at hand makes a
//! certificate naming its addresses when it has none).
//!
//! A certs directory holds `ca.crt` (the cluster CA, trusted), `node.crt` /
//! `node.key` (a node's identity, for both ends of its connections: extended key
//! usages serverAuth and clientAuth, subject alternative names = its addresses),
//! `client.<user>.crt` / `.key` (clientAuth only) and, on a CA holder, `ca.key`.
//! Keys are written 0600; certificates are backdated an hour (clocks differ)
//! and CA-issued ones last five years, the CA ten.
//!
//! PostgreSQL's backends reach other nodes over TLS too: the node copies its
//! identity to `backend.crt` / `backend.key`, owned by PostgreSQL's OS user
//! ([`prepare_backend_identity`]).

use anyhow::{bail, Context, Result};
use pinax_proto::tls::{CA_CERT, NODE_CERT, NODE_KEY};
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use std::path::{Path, PathBuf};
use time::{Duration, OffsetDateTime};

pub const CA_KEY: &str = "ca.key";

#[derive(clap::Subcommand)]
pub enum CertCmd {
    /// Create a cluster's CA: ca.crt in the certs directory, its key (ca.key) there
    /// or at --ca-key. Keep the key only where certificates are issued.
    CreateCa(CertArgs),
    /// Issue node.crt / node.key for a node reachable at HOST… (its advertised
    /// address, other names it is dialled by).
    CreateNode {
        #[command(flatten)]
        args: CertArgs,
        #[arg(required = true)]
        hosts: Vec<String>,
    },
    /// Issue client.USER.crt / .key (a tool presenting it reaches every node).
    CreateClient {
        #[command(flatten)]
        args: CertArgs,
        user: String,
    },
    /// Print a join token: a node started with `--join ADDR --token TOKEN` and
    /// no certificates gets its certificate from a node holding the CA key.
    /// A token admits one node, until it expires.
    CreateJoinToken {
        #[command(flatten)]
        args: CertArgs,
        /// Minutes until the token expires.
        #[arg(long, default_value_t = 60)]
        expires_in_mins: u64,
    },
    /// Show the certificates of a certs directory: names and expiry.
    List(CertArgs),
}

#[derive(clap::Args)]
pub struct CertArgs {
    #[arg(long)]
    certs_dir: PathBuf,
    /// The CA's key (default: ca.key in the certs directory).
    #[arg(long)]
    ca_key: Option<PathBuf>,
}

pub fn run(c: CertCmd) -> Result<()> {
    match c {
        CertCmd::CreateCa(a) => {
            create_ca(&a.certs_dir, a.ca_key.as_deref())?;
            println!("created {}", a.certs_dir.join(CA_CERT).display());
        }
        CertCmd::CreateNode { args, hosts } => {
            create_dir(&args.certs_dir)?;
            create_node(&args.certs_dir, args.ca_key.as_deref(), &hosts)?;
            println!("created {} for {}", args.certs_dir.join(NODE_CERT).display(), node_names(&hosts).join(", "));
        }
        CertCmd::CreateClient { args, user } => {
            create_client(&args.certs_dir, args.ca_key.as_deref(), &user)?;
            println!("created {}", args.certs_dir.join(format!("client.{user}.crt")).display());
        }
        CertCmd::CreateJoinToken { args, expires_in_mins } => {
            let token = crate::join::create_join_token(&args.certs_dir, args.ca_key.as_deref(), Duration::minutes(expires_in_mins.min(60 * 24 * 30) as i64))?;
            println!("{token}");
        }
        CertCmd::List(a) => {
            let mut files: Vec<PathBuf> = std::fs::read_dir(&a.certs_dir)
                .with_context(|| format!("reading {}", a.certs_dir.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "crt"))
                .collect();
            files.sort();
            for f in files {
                match inspect(&f) {
                    Ok(i) => println!(
                        "{}: {}{}, expires {}{}",
                        f.file_name().unwrap_or_default().to_string_lossy(),
                        i.subject,
                        if i.is_ca { " (CA)" } else { "" },
                        i.not_after.date(),
                        if i.names.is_empty() { String::new() } else { format!(", names {}", i.names.join(" ")) }
                    ),
                    Err(e) => println!("{}: {e:#}", f.display()),
                }
            }
        }
    }
    Ok(())
}
pub const BACKEND_CERT: &str = "backend.crt";
pub const BACKEND_KEY: &str = "backend.key";

/// Names every node certificate carries besides the node's own addresses, so
/// tools on the node's machine can dial it on loopback.
const LOCAL_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

/// Write `text` to `path` atomically, with `mode`.
pub(crate) fn write_file(path: &Path, text: &str, mode: u32) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    f.write_all(text.as_bytes()).and_then(|_| f.sync_all()).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

pub(crate) fn create_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    // Readable by PostgreSQL's OS user (its backends' identity is here); the keys
    // themselves are 0600.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).with_context(|| format!("setting the mode of {}", dir.display()))?;
    Ok(())
}

/// Create a cluster CA in `dir` (`ca.crt`) with its key at `key` (default
/// `dir/ca.key`). Refuses to replace an existing one.
pub fn create_ca(dir: &Path, key: Option<&Path>) -> Result<()> {
    let key_path = key.map(Path::to_path_buf).unwrap_or_else(|| dir.join(CA_KEY));
    let cert_path = dir.join(CA_CERT);
    if cert_path.exists() || key_path.exists() {
        bail!("{} or {} exists already: a cluster has one CA (remove them to start a new cluster's)", cert_path.display(), key_path.display());
    }
    create_dir(dir)?;
    let key = KeyPair::generate().context("generating the CA key")?;
    let mut p = CertificateParams::new(Vec::<String>::new())?;
    let id: u32 = rand::random();
    p.distinguished_name.push(DnType::OrganizationName, "Pinax");
    p.distinguished_name.push(DnType::CommonName, format!("Pinax cluster CA {id:08x}"));
    p.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    p.not_before = now() - Duration::hours(1);
    p.not_after = now() + Duration::days(3650);
    let cert = p.self_signed(&key).context("signing the CA certificate")?;
    write_file(&key_path, &key.serialize_pem(), 0o600)?;
    write_file(&cert_path, &cert.pem(), 0o644)?;
    Ok(())
}

/// The CA of `dir` as an issuer (its key at `key`, default `dir/ca.key`).
pub(crate) fn issuer(dir: &Path, key: Option<&Path>) -> Result<Issuer<'static, KeyPair>> {
    let key_path = key.map(Path::to_path_buf).unwrap_or_else(|| dir.join(CA_KEY));
    let key_pem = std::fs::read_to_string(&key_path).with_context(|| format!("reading the CA key {}", key_path.display()))?;
    let key = KeyPair::from_pem(&key_pem).with_context(|| format!("parsing {}", key_path.display()))?;
    let cert_path = dir.join(CA_CERT);
    let cert_pem = std::fs::read_to_string(&cert_path).with_context(|| format!("reading {}", cert_path.display()))?;
    Issuer::from_ca_cert_pem(&cert_pem, key).with_context(|| format!("parsing {}", cert_path.display()))
}

/// What a leaf certificate of this CA says besides its names (`p` holds them).
fn leaf_params(mut p: CertificateParams, common_name: &str, ekus: Vec<ExtendedKeyUsagePurpose>) -> CertificateParams {
    p.distinguished_name = rcgen::DistinguishedName::new();
    p.distinguished_name.push(DnType::OrganizationName, "Pinax");
    p.distinguished_name.push(DnType::CommonName, common_name);
    p.is_ca = IsCa::ExplicitNoCa;
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    p.extended_key_usages = ekus;
    p.not_before = now() - Duration::hours(1);
    p.not_after = now() + Duration::days(5 * 365);
    p
}

/// A node certificate's extended key usages: it serves and calls (a client
/// certificate only calls; see `pinax_proto::tls::Peer`).
fn node_ekus() -> Vec<ExtendedKeyUsagePurpose> {
    vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth]
}

/// A node certificate's parameters, its names taken from `p`.
pub(crate) fn node_params(p: CertificateParams) -> CertificateParams {
    leaf_params(p, "node", node_ekus())
}

/// Issue a leaf certificate with `names` as subject alternative names.
fn issue(dir: &Path, ca_key: Option<&Path>, common_name: &str, names: &[String], ekus: Vec<ExtendedKeyUsagePurpose>) -> Result<(String, String)> {
    let issuer = issuer(dir, ca_key)?;
    let key = KeyPair::generate().context("generating a key")?;
    let p = leaf_params(CertificateParams::new(names.to_vec()).context("certificate names")?, common_name, ekus);
    let cert = p.signed_by(&key, &issuer).context("signing the certificate")?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// The names a node certificate for `hosts` carries: them, then [`LOCAL_NAMES`].
pub fn node_names(hosts: &[String]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for h in hosts.iter().map(|h| h.trim_start_matches('[').trim_end_matches(']').to_string()).chain(LOCAL_NAMES.iter().map(|s| s.to_string())) {
        if !h.is_empty() && !names.contains(&h) {
            names.push(h);
        }
    }
    names
}

/// Issue `dir/node.crt` and `node.key` for a node reachable at `hosts`.
pub fn create_node(dir: &Path, ca_key: Option<&Path>, hosts: &[String]) -> Result<()> {
    let (cert, key) = issue(dir, ca_key, "node", &node_names(hosts), node_ekus())?;
    write_file(&dir.join(NODE_KEY), &key, 0o600)?;
    write_file(&dir.join(NODE_CERT), &cert, 0o644)?;
    Ok(())
}

/// Issue `dir/client.<user>.crt` and `.key`.
pub fn create_client(dir: &Path, ca_key: Option<&Path>, user: &str) -> Result<()> {
    if user.is_empty() || user.contains(['/', '\0']) {
        bail!("{user:?} is not a user name");
    }
    let (cert, key) = issue(dir, ca_key, user, &[], vec![ExtendedKeyUsagePurpose::ClientAuth])?;
    write_file(&dir.join(format!("client.{user}.key")), &key, 0o600)?;
    write_file(&dir.join(format!("client.{user}.crt")), &cert, 0o644)?;
    Ok(())
}

/// What a certificate file says: its subject, names, and validity.
pub struct CertInfo {
    pub subject: String,
    pub names: Vec<String>,
    pub not_after: OffsetDateTime,
    pub is_ca: bool,
}

pub fn inspect(path: &Path) -> Result<CertInfo> {
    use rustls::pki_types::pem::PemObject;
    let der = rustls::pki_types::CertificateDer::from_pem_file(path).with_context(|| format!("reading {}", path.display()))?;
    let (_, x) = x509_parser::parse_x509_certificate(&der).map_err(|e| anyhow::anyhow!("parsing {}: {e}", path.display()))?;
    let mut names = Vec::new();
    if let Ok(Some(san)) = x.subject_alternative_name() {
        for n in &san.value.general_names {
            match n {
                x509_parser::extensions::GeneralName::DNSName(d) => names.push(d.to_string()),
                x509_parser::extensions::GeneralName::IPAddress(b) => match b.len() {
                    4 => names.push(std::net::Ipv4Addr::from(<[u8; 4]>::try_from(*b).unwrap_or_default()).to_string()),
                    16 => names.push(std::net::Ipv6Addr::from(<[u8; 16]>::try_from(*b).unwrap_or_default()).to_string()),
                    _ => {}
                },
                _ => {}
            }
        }
    }
    Ok(CertInfo { subject: x.subject().to_string(), names, not_after: x.validity().not_after.to_datetime(), is_ca: x.is_ca() })
}

/// Make sure certs directory `dir` holds what a node reachable at `hosts`
/// needs, creating what it can: the CA when `new_cluster` (this node starts a
/// cluster) and there is none, a node certificate when there is none or it
/// does not name every host and the CA key is here. Errors say what to do.
pub fn ensure_node(dir: &Path, hosts: &[String], new_cluster: bool) -> Result<()> {
    if !dir.join(CA_CERT).exists() {
        if !new_cluster {
            bail!(
                "{} has no {CA_CERT}: a node joining a secure cluster needs the cluster's certificates. Start it with \
                 --token $(pinax cert create-join-token --certs-dir CERTS) (run where the CA key is), or issue them there with \
                 `pinax cert create-node --certs-dir DIR HOST…` and copy ca.crt, node.crt and node.key to {} (or start every node with --insecure)",
                dir.display(),
                dir.display()
            );
        }
        create_ca(dir, None)?;
        tracing::info!(dir = %dir.display(), "created this cluster's certificate authority");
    }
    let wanted = node_names(hosts);
    let cert = dir.join(NODE_CERT);
    let missing: Vec<String> = match inspect(&cert) {
        Ok(info) => wanted.iter().filter(|n| !info.names.contains(n)).cloned().collect(),
        Err(_) => wanted.clone(),
    };
    if missing.is_empty() && dir.join(NODE_KEY).exists() {
        return Ok(());
    }
    if !dir.join(CA_KEY).exists() {
        bail!(
            "{} does not name {} (or is missing) and the CA key is not here to issue one: `pinax cert create-node --certs-dir DIR {}` on a machine with it",
            cert.display(),
            missing.join(", "),
            hosts.join(" ")
        );
    }
    // Keep the names the certificate had (other addresses it is known by).
    let mut names: Vec<String> = hosts.to_vec();
    if let Ok(info) = inspect(&cert) {
        names.extend(info.names);
    }
    create_node(dir, None, &names)?;
    tracing::info!(names = %node_names(&names).join(","), "issued this node's certificate");
    Ok(())
}

/// Copy the node's identity to `backend.crt` / `backend.key`, owned by
/// PostgreSQL's OS user when the daemon runs as root: its backends present it
/// to the other nodes.
pub fn prepare_backend_identity(dir: &Path) -> Result<()> {
    let cert = std::fs::read_to_string(dir.join(NODE_CERT)).with_context(|| format!("reading {}", dir.join(NODE_CERT).display()))?;
    let key = std::fs::read_to_string(dir.join(NODE_KEY)).with_context(|| format!("reading {}", dir.join(NODE_KEY).display()))?;
    write_file(&dir.join(BACKEND_CERT), &cert, 0o644)?;
    write_file(&dir.join(BACKEND_KEY), &key, 0o600)?;
    if let Some(u) = crate::postgres::pg_os_user()? {
        for f in [BACKEND_CERT, BACKEND_KEY] {
            nix::unistd::chown(&dir.join(f), Some(u.uid), Some(u.gid)).with_context(|| format!("chown {}", dir.join(f).display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pinax_proto::tls::{Identity, TlsConfig};

    #[test]
    fn a_new_cluster_makes_its_ca_and_a_node_certificate_naming_its_addresses() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("certs");
        ensure_node(&dir, &["10.0.0.5".into()], true).unwrap();
        let info = inspect(&dir.join(NODE_CERT)).unwrap();
        assert_eq!(info.names, vec!["10.0.0.5", "localhost", "127.0.0.1", "::1"]);
        assert!(!info.is_ca);
        assert!(inspect(&dir.join(CA_CERT)).unwrap().is_ca);
        use std::os::unix::fs::PermissionsExt;
        for k in [CA_KEY, NODE_KEY] {
            assert_eq!(std::fs::metadata(dir.join(k)).unwrap().permissions().mode() & 0o777, 0o600, "{k}");
        }
        TlsConfig::node(&dir).unwrap();
        // A second start with another address adds it, keeping the first.
        ensure_node(&dir, &["n1.example".into()], false).unwrap();
        let names = inspect(&dir.join(NODE_CERT)).unwrap().names;
        assert!(names.contains(&"10.0.0.5".to_string()) && names.contains(&"n1.example".to_string()), "{names:?}");
        // Not replaced: a CA exists.
        assert!(create_ca(&dir, None).is_err());
        create_client(&dir, None, "alice").unwrap();
        TlsConfig::load(Identity::client(&dir, "alice")).unwrap();
    }

    #[test]
    fn a_joining_node_without_certificates_is_told_what_to_do() {
        let d = tempfile::tempdir().unwrap();
        let e = ensure_node(d.path(), &["10.0.0.6".into()], false).unwrap_err().to_string();
        assert!(e.contains("pinax cert create-node"), "{e}");
        // With the CA's certificate but not its key, a missing name cannot be added.
        let ca = tempfile::tempdir().unwrap();
        create_ca(ca.path(), None).unwrap();
        std::fs::copy(ca.path().join(CA_CERT), d.path().join(CA_CERT)).unwrap();
        let e = ensure_node(d.path(), &["10.0.0.6".into()], false).unwrap_err().to_string();
        assert!(e.contains("CA key is not here"), "{e}");
        // `--ca-key`: the CA's key kept elsewhere.
        create_node(d.path(), Some(&ca.path().join(CA_KEY)), &["10.0.0.6".into()]).unwrap();
        ensure_node(d.path(), &["10.0.0.6".into()], false).unwrap();
    }
}
