//! Join tokens: how a node with no certificate gets one (`pinax cert
//! create-join-token`, `pinax start --join ADDR --token TOKEN`).
//!
//! A token is `pinax-join1-` and the base64url of: a random id (16 bytes), its
//! expiry (Unix seconds, 8 bytes big-endian), the SHA-256 of the cluster CA's
//! certificate (32 bytes), and an HMAC-SHA256 of those under the CA's key (32
//! bytes). Only a holder of the CA key can make one or check one; nothing is
//! stored when it is made.
//!
//! The joining node makes its key and a certificate request naming its
//! addresses, connects to a `--join` node over TLS without a certificate
//! (`pinax_proto::tls::connect_pinned`: the server must present the CA the
//! token names, so the token's secret goes only to that cluster) and sends
//! `JoinCluster`. A node holding the CA key checks the token, records its id in
//! `join-tokens-used` of its certs directory (a token admits one node), and
//! signs the request as a node certificate; a node without the key passes the
//! request to the other nodes it knows. The private key never leaves the
//! joining node.

use crate::certs::{self, CA_KEY};
use anyhow::{bail, Context, Result};
use base64::Engine as _;
use pinax_common::{ErrorCode, HybridTime};
use pinax_proto::frame;
use pinax_proto::stream::Stream;
use pinax_proto::tls::{self, CA_CERT, NODE_CERT, NODE_KEY};
use pinax_proto::{Request, RequestEnvelope, Response, ResponseEnvelope};
use pinax_tserver::{JoinRefusal, JoinSigner};
use rcgen::{CertificateParams, CertificateSigningRequestParams, KeyPair};
use ring::hmac;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

const PREFIX: &str = "pinax-join1-";
/// Where a CA holder records the tokens it honoured (id and expiry, one per line).
pub const USED_TOKENS: &str = "join-tokens-used";
const BODY: usize = 16 + 8 + 32;

/// A parsed (not yet checked) token.
struct Token {
    id: [u8; 16],
    expires: u64,
    ca: [u8; 32],
    body: [u8; BODY],
    mac: [u8; 32],
}

fn mac_key(ca_key_pem: &str) -> hmac::Key {
    hmac::Key::new(hmac::HMAC_SHA256, ca_key_pem.as_bytes())
}

fn signed_part(body: &[u8]) -> Vec<u8> {
    let mut m = b"pinax join token v1\0".to_vec();
    m.extend_from_slice(body);
    m
}

fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn ca_key_path(dir: &Path, key: Option<&Path>) -> PathBuf {
    key.map(Path::to_path_buf).unwrap_or_else(|| dir.join(CA_KEY))
}

/// Make a token of the CA in `dir` (its key at `key`, default `dir/ca.key`)
/// that expires after `ttl`.
pub fn create_join_token(dir: &Path, key: Option<&Path>, ttl: time::Duration) -> Result<String> {
    let key_path = ca_key_path(dir, key);
    let key_pem = std::fs::read_to_string(&key_path).with_context(|| format!("reading the CA key {} (tokens are made where it is)", key_path.display()))?;
    let ca = tls::file_fingerprint(&dir.join(CA_CERT))?;
    let mut body = [0u8; BODY];
    body[..16].copy_from_slice(&rand::random::<[u8; 16]>());
    body[16..24].copy_from_slice(&(unix_now() + ttl.whole_seconds().max(1) as u64).to_be_bytes());
    body[24..].copy_from_slice(&ca);
    let mac = hmac::sign(&mac_key(&key_pem), &signed_part(&body));
    let mut all = body.to_vec();
    all.extend_from_slice(mac.as_ref());
    Ok(format!("{PREFIX}{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(all)))
}

fn parse(token: &str) -> Result<Token, String> {
    let not = || "not a Pinax join token (made by `pinax cert create-join-token`)".to_string();
    let b64 = token.trim().strip_prefix(PREFIX).ok_or_else(not)?;
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(b64).map_err(|_| not())?;
    if raw.len() != BODY + 32 {
        return Err(not());
    }
    let mut t = Token { id: [0; 16], expires: 0, ca: [0; 32], body: [0; BODY], mac: [0; 32] };
    t.body.copy_from_slice(&raw[..BODY]);
    t.id.copy_from_slice(&raw[..16]);
    t.expires = u64::from_be_bytes(raw[16..24].try_into().unwrap_or_default());
    t.ca.copy_from_slice(&raw[24..BODY]);
    t.mac.copy_from_slice(&raw[BODY..]);
    Ok(t)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Issues node certificates to nodes joining with a token, with the CA key of
/// a certs directory ([`JoinRefusal::NoCaKey`] when it holds none).
#[derive(Debug)]
pub struct CertsSigner {
    dir: PathBuf,
    /// One signing at a time (the used-token file is read, then rewritten).
    lock: parking_lot::Mutex<()>,
}

impl CertsSigner {
    pub fn new(dir: &Path) -> CertsSigner {
        CertsSigner { dir: dir.to_path_buf(), lock: parking_lot::Mutex::new(()) }
    }

    fn check(&self, token: &str, key_pem: &str) -> Result<Token, String> {
        let t = parse(token)?;
        if hmac::verify(&mac_key(key_pem), &signed_part(&t.body), &t.mac).is_err() {
            return Err("the join token was not made with this cluster's CA key (or was altered)".into());
        }
        let ca = tls::file_fingerprint(&self.dir.join(CA_CERT)).map_err(|e| e.to_string())?;
        if ca != t.ca {
            return Err("the join token names another CA certificate than this node's".into());
        }
        if t.expires < unix_now() {
            return Err(format!("the join token expired {} s ago: make a new one", unix_now() - t.expires));
        }
        Ok(t)
    }

    /// The ids of honoured tokens not yet expired (id hex → expiry).
    fn used(&self) -> Vec<(String, u64)> {
        let text = std::fs::read_to_string(self.dir.join(USED_TOKENS)).unwrap_or_default();
        let now = unix_now();
        text.lines()
            .filter_map(|l| {
                let (id, exp) = l.split_once(' ')?;
                let exp: u64 = exp.trim().parse().ok()?;
                (exp >= now).then(|| (id.to_string(), exp))
            })
            .collect()
    }
}

impl JoinSigner for CertsSigner {
    fn sign(&self, token: &str, csr: &str) -> Result<(String, String), JoinRefusal> {
        let key_path = self.dir.join(CA_KEY);
        let Ok(key_pem) = std::fs::read_to_string(&key_path) else { return Err(JoinRefusal::NoCaKey) };
        let _one = self.lock.lock();
        let t = self.check(token, &key_pem).map_err(JoinRefusal::Refused)?;
        let id = hex(&t.id);
        let mut used = self.used();
        if used.iter().any(|(u, _)| *u == id) {
            return Err(JoinRefusal::Refused("the join token was used already (a token admits one node): make a new one".into()));
        }
        let cert = sign_request(&self.dir, csr).map_err(|e| JoinRefusal::Refused(format!("{e:#}")))?;
        used.push((id, t.expires));
        let text: String = used.iter().map(|(i, e)| format!("{i} {e}\n")).collect();
        certs::write_file(&self.dir.join(USED_TOKENS), &text, 0o600).map_err(|e| JoinRefusal::Refused(format!("recording the token: {e:#}")))?;
        let ca = std::fs::read_to_string(self.dir.join(CA_CERT)).map_err(|e| JoinRefusal::Refused(format!("reading {CA_CERT}: {e}")))?;
        Ok((ca, cert))
    }
}

/// Sign certificate request `csr` (PEM) as a node certificate of the CA in
/// `dir`: its subject alternative names are the request's; the rest (subject,
/// usages, validity) is what this CA puts in every node certificate.
fn sign_request(dir: &Path, csr: &str) -> Result<String> {
    let req = CertificateSigningRequestParams::from_pem(csr).context("the certificate request does not parse")?;
    if req.params.subject_alt_names.is_empty() {
        bail!("the certificate request names no address");
    }
    let mut params = CertificateParams::default();
    params.subject_alt_names = req.params.subject_alt_names.clone();
    let signed = CertificateSigningRequestParams { params: certs::node_params(params), public_key: req.public_key };
    let issuer = certs::issuer(dir, None)?;
    Ok(signed.signed_by(&issuer).context("signing the certificate")?.pem())
}

/// Get this node's certificate with `token` from one of the nodes at `join`:
/// writes `ca.crt`, `node.crt` and `node.key` (made here) to `dir`.
pub fn join_with_token(dir: &Path, hosts: &[String], join: &[String], token: &str) -> Result<()> {
    let t = parse(token).map_err(anyhow::Error::msg)?;
    let key = KeyPair::generate().context("generating the node's key")?;
    let csr = CertificateParams::new(certs::node_names(hosts))
        .context("certificate names")?
        .serialize_request(&key)
        .context("making the certificate request")?
        .pem()
        .context("encoding the certificate request")?;
    let mut last = String::new();
    for addr in join {
        match ask(addr, t.ca, token, &csr) {
            Ok((ca, cert)) => {
                if tls::fingerprint(&rustls_der(&ca)?) != t.ca {
                    bail!("{addr} answered with another CA than the token names");
                }
                certs::create_dir(dir)?;
                certs::write_file(&dir.join(NODE_KEY), &key.serialize_pem(), 0o600)?;
                certs::write_file(&dir.join(NODE_CERT), &cert, 0o644)?;
                certs::write_file(&dir.join(CA_CERT), &ca, 0o644)?;
                tracing::info!(from = %addr, "joined with a token: got this node's certificate");
                return Ok(());
            }
            Err(e) if e.downcast_ref::<Refused>().is_some() => bail!("{addr} refused the join token: {e}"),
            Err(e) => last = format!("{addr}: {e:#}"),
        }
    }
    bail!("could not get a certificate with the join token from any of {}: {last}", join.join(","))
}

fn rustls_der(pem: &str) -> Result<Vec<u8>> {
    use rustls::pki_types::pem::PemObject;
    Ok(rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).context("the CA certificate received does not parse")?.to_vec())
}

/// A node's refusal of the token (trying another node would not help).
#[derive(Debug)]
struct Refused(String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// One `JoinCluster` request to the node at `addr`.
fn ask(addr: &str, ca: [u8; 32], token: &str, csr: &str) -> Result<(String, String)> {
    use std::net::ToSocketAddrs;
    let timeout = Duration::from_secs(5);
    let sa = addr.to_socket_addrs().with_context(|| format!("resolving {addr}"))?.next().with_context(|| format!("{addr} resolves to nothing"))?;
    let tcp = std::net::TcpStream::connect_timeout(&sa, timeout).with_context(|| format!("connecting to {addr}"))?;
    let tls = tls::connect_pinned(tcp, addr, ca, timeout).context("TLS")?;
    let stream = Stream::Tls(std::sync::Arc::new(tls));
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut buf = Vec::new();
    let req = RequestEnvelope {
        ht: HybridTime::INVALID,
        fence: 0,
        request: Request::JoinCluster { token: token.trim().to_string(), csr: csr.to_string(), forwarded: false },
    };
    let mut w = &stream;
    frame::write_frame(&mut w, &req, &mut buf).context("sending the request")?;
    w.flush()?;
    let mut r = &stream;
    let resp: ResponseEnvelope = frame::read_frame(&mut r, &mut buf).context("reading the answer")?.context("the node closed the connection")?;
    match resp.result {
        Ok(Response::Joined { ca, cert }) => Ok((ca, cert)),
        Ok(other) => bail!("unexpected answer {other:?}"),
        Err(e) if e.code == ErrorCode::PermissionDenied => Err(Refused(e.message).into()),
        Err(e) => bail!("{e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ca() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        certs::create_ca(d.path(), None).unwrap();
        d
    }

    fn request(hosts: &[&str]) -> String {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = hosts.iter().map(|h| h.to_string()).collect();
        CertificateParams::new(names).unwrap().serialize_request(&key).unwrap().pem().unwrap()
    }

    fn refusal(r: Result<(String, String), JoinRefusal>) -> String {
        match r {
            Err(JoinRefusal::Refused(why)) => why,
            Err(JoinRefusal::NoCaKey) => "no CA key".into(),
            Ok(_) => panic!("signed"),
        }
    }

    #[test]
    fn a_token_admits_one_node_with_the_names_it_asks_for() {
        let d = ca();
        let token = create_join_token(d.path(), None, time::Duration::minutes(5)).unwrap();
        let signer = CertsSigner::new(d.path());
        let (ca_pem, cert) = signer.sign(&token, &request(&["10.1.0.7", "n7.example"])).unwrap();
        assert_eq!(ca_pem, std::fs::read_to_string(d.path().join(CA_CERT)).unwrap());
        let f = d.path().join("joined.crt");
        std::fs::write(&f, &cert).unwrap();
        let info = certs::inspect(&f).unwrap();
        assert!(info.names.contains(&"10.1.0.7".to_string()) && info.names.contains(&"n7.example".to_string()), "{:?}", info.names);
        assert_eq!(tls::peer_of_certificate(&rustls_der(&cert).unwrap()), tls::Peer::Node, "a joined node's certificate is a node's");
        // Used once: the second node with it is refused.
        let again = refusal(signer.sign(&token, &request(&["10.1.0.8"])));
        assert!(again.contains("used already"), "{again}");
    }

    #[test]
    fn forged_altered_expired_and_foreign_tokens_are_refused() {
        let d = ca();
        let signer = CertsSigner::new(d.path());
        let csr = request(&["10.1.0.9"]);
        assert!(refusal(signer.sign("hello", &csr)).contains("not a Pinax join token"));
        // One bit of the expiry changed: the MAC no longer matches.
        let token = create_join_token(d.path(), None, time::Duration::minutes(5)).unwrap();
        let mut raw = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(token.strip_prefix(PREFIX).unwrap()).unwrap();
        raw[20] ^= 1;
        let altered = format!("{PREFIX}{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&raw));
        assert!(refusal(signer.sign(&altered, &csr)).contains("not made with this cluster's CA key"));
        // Another cluster's token.
        let other = ca();
        let foreign = create_join_token(other.path(), None, time::Duration::minutes(5)).unwrap();
        assert!(refusal(signer.sign(&foreign, &csr)).contains("not made with this cluster's CA key"));
        // Expired: made with a lifetime already over (the MAC is right).
        let key_pem = std::fs::read_to_string(d.path().join(CA_KEY)).unwrap();
        let mut body = [0u8; BODY];
        body[16..24].copy_from_slice(&(unix_now() - 10).to_be_bytes());
        body[24..].copy_from_slice(&tls::file_fingerprint(&d.path().join(CA_CERT)).unwrap());
        let mut all = body.to_vec();
        all.extend_from_slice(hmac::sign(&mac_key(&key_pem), &signed_part(&body)).as_ref());
        let expired = format!("{PREFIX}{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(all));
        assert!(refusal(signer.sign(&expired, &csr)).contains("expired"));
        // A request naming nothing, or not a request.
        let token = create_join_token(d.path(), None, time::Duration::minutes(5)).unwrap();
        assert!(refusal(signer.sign(&token, "junk")).contains("does not parse"));
        // Still unused after the failed attempts.
        signer.sign(&token, &csr).unwrap();
    }

    #[test]
    fn a_node_without_the_ca_key_says_so() {
        let d = ca();
        let token = create_join_token(d.path(), None, time::Duration::minutes(5)).unwrap();
        std::fs::remove_file(d.path().join(CA_KEY)).unwrap();
        assert_eq!(refusal(CertsSigner::new(d.path()).sign(&token, &request(&["10.1.0.9"]))), "no CA key");
    }
}
