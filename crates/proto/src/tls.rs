//! Mutual TLS on the connections between nodes (and from clients that reach a
//! node over TCP): rustls with the `ring` provider, TLS 1.3 only.
//!
//! A cluster has its own certificate authority. Every node holds, in its certs
//! directory, the CA's certificate (`ca.crt`) and a certificate of its own signed
//! by it (`node.crt`, `node.key`) naming its addresses; a client holds one too
//! (`client.<user>.crt` / `.key`, or a node's). A server accepts a certificate
//! only if the cluster CA signed it (another cluster's fails the handshake and
//! never reaches a request handler); a client accepts a server only if its
//! certificate names the address it dialled. A peer without a certificate
//! completes the handshake but may only ask to join the cluster with a token
//! ([`Peer::Anonymous`]); a client certificate (clientAuth only) is an
//! operator's, allowed status requests, not data or cluster requests ([`Peer`],
//! `Request::allowed_for`). The node's Unix socket stays plaintext: only
//! PostgreSQL's OS user can open it (`pinax.sock`, mode 0600).
//!
//! [`TlsConfig::reload`] re-reads the files (a rotated certificate is used by
//! every connection made afterwards; established ones keep theirs).

use parking_lot::{Mutex, RwLock};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, ClientConnection, Connection, RootCertStore, ServerConfig, ServerConnection};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The CA certificate's file name in a certs directory.
pub const CA_CERT: &str = "ca.crt";
/// A node's certificate and key.
pub const NODE_CERT: &str = "node.crt";
pub const NODE_KEY: &str = "node.key";

/// How long a TLS handshake may take (a peer that connects and sends nothing,
/// or drips its bytes, loses its connection then).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// The least time a client gives a handshake (a connect timeout may be shorter:
/// the handshake takes two round trips and the peer's signature).
pub const MIN_HANDSHAKE: Duration = Duration::from_secs(2);

/// Why a certs directory could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// Which files make up an identity: the CA certificate to trust, and the
/// certificate (with its chain) and key to present.
#[derive(Clone, Debug)]
pub struct Identity {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Identity {
    /// A node's identity in certs directory `dir`.
    pub fn node(dir: &Path) -> Identity {
        Identity { ca: dir.join(CA_CERT), cert: dir.join(NODE_CERT), key: dir.join(NODE_KEY) }
    }

    /// A client's identity in certs directory `dir`: `client.<user>.crt`/`.key`.
    pub fn client(dir: &Path, user: &str) -> Identity {
        Identity { ca: dir.join(CA_CERT), cert: dir.join(format!("client.{user}.crt")), key: dir.join(format!("client.{user}.key")) }
    }
}

/// The TLS settings of a node or client, reloadable.
pub struct TlsConfig {
    identity: Identity,
    configs: RwLock<(Arc<ServerConfig>, Arc<ClientConfig>)>,
}

impl std::fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConfig").field("identity", &self.identity).finish()
    }
}

fn file_err(path: &Path, e: impl std::fmt::Display) -> TlsError {
    TlsError::File { path: path.to_path_buf(), message: e.to_string() }
}

fn build(id: &Identity) -> Result<(Arc<ServerConfig>, Arc<ClientConfig>), TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    let cas: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(&id.ca).map_err(|e| file_err(&id.ca, e))?.collect::<Result<_, _>>().map_err(|e| file_err(&id.ca, e))?;
    for c in &cas {
        roots.add(c.clone()).map_err(|e| file_err(&id.ca, e))?;
    }
    if roots.is_empty() {
        return Err(file_err(&id.ca, "holds no certificate"));
    }
    let roots = Arc::new(roots);
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(&id.cert).map_err(|e| file_err(&id.cert, e))?.collect::<Result<_, _>>().map_err(|e| file_err(&id.cert, e))?;
    if chain.is_empty() {
        return Err(file_err(&id.cert, "holds no certificate"));
    }
    let key = PrivateKeyDer::from_pem_file(&id.key).map_err(|e| file_err(&id.key, e))?;
    let config = |e: rustls::Error| TlsError::Config(e.to_string());
    // A client without a certificate completes the handshake as
    // `Peer::Anonymous`, which may only ask to join with a token
    // (`Request::allowed_for`); one presenting a certificate the cluster's CA
    // did not sign is refused in the handshake.
    let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
        .allow_unauthenticated()
        .build()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    // The server sends the CA with its certificate: a joining node checks it
    // against the fingerprint its token carries (`connect_pinned`).
    let mut server_chain = chain.clone();
    server_chain.extend(cas.iter().filter(|c| !chain.contains(c)).cloned());
    let mut server = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(config)?
        .with_client_cert_verifier(verifier)
        .with_single_cert(server_chain, key.clone_key())
        .map_err(config)?;
    // No session tickets: they follow the handshake, and a pooled connection's
    // liveness check (a peek for unasked bytes) would take one for a closed link.
    server.send_tls13_tickets = 0;
    let mut client = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(config)?
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .map_err(config)?;
    client.resumption = rustls::client::Resumption::disabled();
    Ok((Arc::new(server), Arc::new(client)))
}

impl TlsConfig {
    /// Load `identity`'s files.
    pub fn load(identity: Identity) -> Result<Arc<TlsConfig>, TlsError> {
        let configs = build(&identity)?;
        Ok(Arc::new(TlsConfig { identity, configs: RwLock::new(configs) }))
    }

    /// A node's settings from its certs directory.
    pub fn node(dir: &Path) -> Result<Arc<TlsConfig>, TlsError> {
        Self::load(Identity::node(dir))
    }

    /// Read the files again (a rotated certificate or CA). On error the settings
    /// in force stay.
    pub fn reload(&self) -> Result<(), TlsError> {
        let configs = build(&self.identity)?;
        *self.configs.write() = configs;
        Ok(())
    }

    pub fn server_config(&self) -> Arc<ServerConfig> {
        self.configs.read().0.clone()
    }

    pub fn client_config(&self) -> Arc<ClientConfig> {
        self.configs.read().1.clone()
    }

    /// The server end of an accepted TCP connection. No I/O yet: the handshake
    /// happens at [`TlsStream::handshake`] (or the first read).
    pub fn accept(&self, tcp: TcpStream) -> io::Result<TlsStream> {
        let conn = ServerConnection::new(self.server_config()).map_err(io::Error::other)?;
        Ok(TlsStream { sock: tcp, conn: State::new(Connection::Server(conn)) })
    }

    /// The client end of a TCP connection to the server at `addr` (`HOST:PORT`;
    /// its certificate must name HOST), handshake done within `timeout`.
    pub fn connect(&self, tcp: TcpStream, addr: &str, timeout: Duration) -> io::Result<TlsStream> {
        let name = server_name(addr)?;
        let conn = ClientConnection::new(self.client_config(), name).map_err(io::Error::other)?;
        let s = TlsStream { sock: tcp, conn: State::new(Connection::Client(conn)) };
        s.handshake(timeout)?;
        Ok(s)
    }
}

/// The SHA-256 of a certificate's DER: what a join token pins the cluster's CA by.
pub fn fingerprint(der: &[u8]) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, der);
    let mut f = [0u8; 32];
    f.copy_from_slice(d.as_ref());
    f
}

/// The fingerprint of the (first) certificate of PEM file `path`.
pub fn file_fingerprint(path: &Path) -> Result<[u8; 32], TlsError> {
    let der = CertificateDer::from_pem_file(path).map_err(|e| file_err(path, e))?;
    Ok(fingerprint(&der))
}

/// Who is at the other end of a connection the server accepted, and so which
/// requests it may make ([`crate::Request::allowed_for`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Peer {
    /// The node's Unix socket (mode 0600: PostgreSQL's backends).
    Local,
    /// Plaintext TCP (`--insecure`): anyone.
    Insecure,
    /// A certificate of the cluster's CA with extended key usage serverAuth:
    /// a node (or its PostgreSQL's backends, which hold the node's identity).
    Node,
    /// A client certificate (clientAuth only) of this user: an operator's tool.
    Client(String),
    /// TLS without a certificate: a node asking to join with a token.
    Anonymous,
}

/// The role a peer certificate (DER) gives its holder (the CA signed it: the
/// handshake checked that).
pub fn peer_of_certificate(der: &[u8]) -> Peer {
    let Ok((_, x)) = x509_parser::parse_x509_certificate(der) else { return Peer::Anonymous };
    if let Ok(Some(eku)) = x.extended_key_usage() {
        if eku.value.server_auth {
            return Peer::Node;
        }
    }
    let cn = x.subject().iter_common_name().next().and_then(|c| c.as_str().ok()).unwrap_or_default().to_string();
    Peer::Client(cn)
}

/// A server verifier for a node that has no CA yet, only the fingerprint its
/// join token carries: the server must send a CA certificate with that
/// fingerprint, and its own certificate must be signed by it and name the
/// dialled host.
#[derive(Debug)]
struct PinnedCa {
    fingerprint: [u8; 32],
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl rustls::client::danger::ServerCertVerifier for PinnedCa {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        let Some(ca) = intermediates.iter().find(|c| fingerprint(c) == self.fingerprint) else {
            return Err(rustls::Error::General("the server did not present the CA of the join token (another cluster, or a token of another CA)".into()));
        };
        let mut roots = RootCertStore::empty();
        roots.add(ca.clone().into_owned())?;
        let inner = rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), self.provider.clone())
            .build()
            .map_err(|e| rustls::Error::General(e.to_string()))?;
        inner.verify_server_cert(end_entity, &[], server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

/// A TLS connection without a client certificate to the server at `addr`,
/// which must present a CA with `ca_fingerprint` and a certificate it signed
/// naming `addr`'s host: how a node with a join token asks for its certificate.
pub fn connect_pinned(tcp: TcpStream, addr: &str, ca_fingerprint: [u8; 32], timeout: Duration) -> io::Result<TlsStream> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = Arc::new(PinnedCa { fingerprint: ca_fingerprint, provider: provider.clone() });
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(io::Error::other)?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    config.resumption = rustls::client::Resumption::disabled();
    let conn = ClientConnection::new(Arc::new(config), server_name(addr)?).map_err(io::Error::other)?;
    let s = TlsStream { sock: tcp, conn: State::new(Connection::Client(conn)) };
    s.handshake(timeout)?;
    Ok(s)
}

/// The name a server at `addr` (`HOST:PORT`, `[V6]:PORT`) must present.
pub fn server_name(addr: &str) -> io::Result<ServerName<'static>> {
    let host = match addr.rsplit_once(':') {
        Some((h, p)) if p.parse::<u16>().is_ok() && (h.starts_with('[') || !h.contains(':')) => h,
        _ => addr,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string()).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{addr}: not a server name: {e}")))
}

/// A TLS connection over TCP, read and written through shared references (as
/// [`crate::stream::Stream`] is): the reader and writer of one connection take
/// turns on its TLS state, so the lock is never contended.
pub struct TlsStream {
    sock: TcpStream,
    conn: Mutex<State>,
}

/// How many bytes of the socket one read takes (rustls reads at most 4 KiB
/// at a time: a 64 KiB Raft append would cost 16 system calls).
const READ_AHEAD: usize = 64 << 10;

/// A connection's TLS state and the bytes read from its socket that rustls has
/// not taken yet (`inbuf[start..end]`).
struct State {
    conn: Connection,
    inbuf: Vec<u8>,
    start: usize,
    end: usize,
}

impl State {
    fn new(conn: Connection) -> Mutex<State> {
        Mutex::new(State { conn, inbuf: Vec::new(), start: 0, end: 0 })
    }

    /// Hand rustls the next bytes of the socket: buffered ones, else one read
    /// of up to [`READ_AHEAD`] (its end of file, if so).
    fn feed(&mut self, sock: &TcpStream) -> io::Result<()> {
        if self.start == self.end {
            if self.inbuf.len() < READ_AHEAD {
                self.inbuf.resize(READ_AHEAD, 0);
            }
            let n = (&*sock).read(&mut self.inbuf)?;
            (self.start, self.end) = (0, n);
            if n == 0 {
                self.conn.read_tls(&mut io::empty())?;
                return Ok(());
            }
        }
        let n = self.conn.read_tls(&mut &self.inbuf[self.start..self.end])?;
        self.start += n;
        Ok(())
    }
}

impl std::fmt::Debug for TlsStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsStream").field("sock", &self.sock).finish()
    }
}

/// A TLS error as an I/O error (the connection cannot go on).
fn tls_io(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}"))
}

impl TlsStream {
    pub fn tcp(&self) -> &TcpStream {
        &self.sock
    }

    /// Complete the handshake within `timeout` (the certificates are checked
    /// here). TLS 1.3 lets a client finish before the server has checked the
    /// client's certificate: a refused client learns it at its first read.
    pub fn handshake(&self, timeout: Duration) -> io::Result<()> {
        let before = self.sock.read_timeout()?;
        self.sock.set_read_timeout(Some(timeout))?;
        self.sock.set_write_timeout(Some(timeout))?;
        let mut state = self.conn.lock();
        let c = &mut state.conn;
        let mut res = Ok(());
        while c.is_handshaking() {
            match c.complete_io(&mut &self.sock) {
                Ok((0, 0)) if c.is_handshaking() => {
                    res = Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed during the TLS handshake"));
                    break;
                }
                Ok(_) => {}
                Err(e) => {
                    res = Err(e);
                    break;
                }
            }
        }
        drop(state);
        self.sock.set_read_timeout(before)?;
        self.sock.set_write_timeout(None)?;
        res
    }

    /// Who the peer is, by the certificate it presented in the handshake.
    pub fn peer(&self) -> Peer {
        let c = self.conn.lock();
        match c.conn.peer_certificates().and_then(|certs| certs.first()) {
            Some(cert) => peer_of_certificate(cert),
            None => Peer::Anonymous,
        }
    }

    /// Whether decrypted bytes wait to be read, or bytes read ahead hold some
    /// (a poll of the socket would not see them). A TLS error counts as
    /// readable: the read reports it.
    pub fn has_plaintext(&self) -> bool {
        let mut st = self.conn.lock();
        loop {
            match st.conn.process_new_packets() {
                Ok(s) if s.plaintext_bytes_to_read() == 0 => {}
                _ => return true,
            }
            if st.start == st.end {
                return false;
            }
            let State { conn, inbuf, start, end } = &mut *st;
            match conn.read_tls(&mut &inbuf[*start..*end]) {
                Ok(n) if n > 0 => *start += n,
                _ => return true,
            }
        }
    }

    /// Send what the TLS state holds for the peer.
    fn write_pending(c: &mut Connection, sock: &TcpStream) -> io::Result<()> {
        while c.wants_write() {
            c.write_tls(&mut &*sock)?;
        }
        Ok(())
    }

    fn read_plain(&self, buf: &mut [u8]) -> io::Result<usize> {
        let mut st = self.conn.lock();
        loop {
            match st.conn.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            Self::write_pending(&mut st.conn, &self.sock)?;
            st.feed(&self.sock)?;
            if let Err(e) = st.conn.process_new_packets() {
                // The alert saying why, if it can be sent.
                let _ = Self::write_pending(&mut st.conn, &self.sock);
                return Err(tls_io(e));
            }
        }
    }

    fn write_plain(&self, buf: &[u8]) -> io::Result<usize> {
        let mut st = self.conn.lock();
        let n = st.conn.writer().write(buf)?;
        Self::write_pending(&mut st.conn, &self.sock)?;
        Ok(n)
    }

    fn flush_plain(&self) -> io::Result<()> {
        let mut st = self.conn.lock();
        st.conn.writer().flush()?;
        Self::write_pending(&mut st.conn, &self.sock)
    }
}

impl Read for &TlsStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_plain(buf)
    }
}

impl Write for &TlsStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_plain(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.flush_plain()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A CA and a node certificate for 127.0.0.1 in a new directory.
    fn certs() -> tempfile::TempDir {
        use rcgen::{BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair};
        let d = tempfile::tempdir().unwrap();
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca, ca_key);
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        let cert = p.signed_by(&key, &issuer).unwrap();
        std::fs::write(d.path().join(CA_CERT), ca_cert.pem()).unwrap();
        std::fs::write(d.path().join(NODE_CERT), cert.pem()).unwrap();
        std::fs::write(d.path().join(NODE_KEY), key.serialize_pem()).unwrap();
        d
    }

    /// Bytes rustls has not decrypted yet but the stream read ahead of the
    /// socket count as readable (a poll would not see them), and a message far
    /// larger than a TLS record or the read-ahead arrives whole and in order.
    #[test]
    fn bytes_read_ahead_are_readable_and_large_messages_arrive_whole() {
        let d = certs();
        let cfg = TlsConfig::node(d.path()).unwrap();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let big: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let server = {
            let (cfg, big) = (cfg.clone(), big.clone());
            std::thread::spawn(move || {
                let (tcp, _) = l.accept().unwrap();
                let s = cfg.accept(tcp).unwrap();
                s.handshake(HANDSHAKE_TIMEOUT).unwrap();
                assert_eq!(s.peer(), Peer::Node);
                let mut got = vec![0u8; big.len()];
                (&s).read_exact(&mut got).unwrap();
                assert!(got == big, "the large message arrived altered");
                (&s).write_all(b"ok").unwrap();
                (&s).flush().unwrap();
                // Two records waiting in the socket: one read takes both, rustls
                // the first 4 KiB; once the first message is read, the second
                // is here (read ahead), though the socket is empty.
                std::thread::sleep(Duration::from_millis(300));
                let mut first = [0u8; 5];
                (&s).read_exact(&mut first).unwrap();
                assert_eq!(&first, b"hello");
                assert!(s.has_plaintext(), "bytes read ahead were not seen");
                let mut second = vec![0u8; 10_000];
                (&s).read_exact(&mut second).unwrap();
                assert!(second.iter().all(|b| *b == b'w'));
                assert!(!s.has_plaintext());
            })
        };
        let tcp = TcpStream::connect(&addr).unwrap();
        let c = cfg.connect(tcp, &addr, HANDSHAKE_TIMEOUT).unwrap();
        for chunk in big.chunks(100_000) {
            (&c).write_all(chunk).unwrap();
        }
        (&c).flush().unwrap();
        let mut ok = [0u8; 2];
        (&c).read_exact(&mut ok).unwrap();
        assert_eq!(&ok, b"ok");
        (&c).write_all(b"hello").unwrap();
        (&c).flush().unwrap();
        (&c).write_all(&[b'w'; 10_000]).unwrap();
        (&c).flush().unwrap();
        server.join().unwrap();
        // The server closed: the client reads an end, not a hang.
        let mut rest = [0u8; 1];
        assert!(matches!((&c).read(&mut rest), Ok(0) | Err(_)));
    }

    #[test]
    fn server_names_are_the_host_of_the_dialled_address() {
        assert_eq!(server_name("10.0.0.5:7100").unwrap(), ServerName::try_from("10.0.0.5").unwrap());
        assert_eq!(server_name("[fd00::5]:7100").unwrap(), ServerName::try_from("fd00::5").unwrap());
        assert_eq!(server_name("n1.example:7100").unwrap(), ServerName::try_from("n1.example").unwrap());
        assert_eq!(server_name("n1.example").unwrap(), ServerName::try_from("n1.example").unwrap());
        assert!(server_name("bad name:7100").is_err());
    }
}
