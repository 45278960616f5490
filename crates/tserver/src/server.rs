//! Thread-per-connection RPC server over TCP, and optionally a Unix-domain socket
//! for clients on the same machine (the node's PostgreSQL backends).
//!
//! A backend holds one connection for its lifetime, so a thread per connection costs
//! little and keeps the request path free of scheduler hops. A frame that fails its
//! checksum or does not decode gets an error response, then the connection is
//! closed (the stream cannot be resynchronised). A panic while handling a request is
//! caught and answered as an internal error; the daemon keeps running.

use crate::factory::EngineFactory;
use crate::node::Node;
use parking_lot::Mutex;
use pinax_common::ErrorCode;
use pinax_proto::frame::{self, FrameError};
use pinax_proto::stream::Stream;
use pinax_proto::tls::Peer;
use pinax_proto::{RequestEnvelope, ResponseEnvelope, RpcError};
use std::collections::HashMap;
use std::io::{BufReader, BufWriter, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::net::UnixListener;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Open connections by id: the stream (shut down on stop) and the peer's address.
type Registry = Arc<Mutex<HashMap<u64, (Arc<Stream>, Option<std::net::IpAddr>)>>>;

pub struct RpcServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    /// Open connections, shut down on stop so their threads end.
    conns: Registry,
}

/// What an RPC server takes on at once.
#[derive(Clone, Copy, Debug)]
pub struct ServerLimits {
    /// Most connections served at once. Each costs the node a descriptor and a
    /// thread; one more is answered with a `Busy` error (SQLSTATE 53000 in SQL) and
    /// closed, so a surge of clients cannot take the descriptors the node's storage
    /// needs (a RocksDB flush or compaction that cannot open its file stops the
    /// store's writes).
    pub max_connections: usize,
    /// Most TCP connections from one IP address: one peer (a runaway client, a
    /// misbehaving node) cannot take every connection.
    pub max_per_peer: usize,
    /// A TCP connection with no request for this long is closed (its client
    /// reconnects when it needs the node again). Unix-domain connections, the
    /// local PostgreSQL's backends, are kept however long they idle.
    pub idle_timeout: Duration,
    /// A request frame, once begun, must arrive whole within this (and a
    /// response be taken by the peer within it): a peer that drips its bytes or
    /// stops reading loses its connection instead of holding a thread forever.
    pub frame_timeout: Duration,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits { max_connections: usize::MAX, max_per_peer: usize::MAX, idle_timeout: Duration::from_secs(600), frame_timeout: Duration::from_secs(30) }
    }
}

/// A connection's reader that fails a read once its frame's deadline passed
/// (each read is also bounded by the socket's timeout, `frame_timeout`).
struct DeadlineReader<'a> {
    stream: &'a Stream,
    until: Option<std::time::Instant>,
}

impl std::io::Read for DeadlineReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.until.is_some_and(|t| std::time::Instant::now() > t) {
            return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "a request frame took too long to arrive"));
        }
        std::io::Read::read(&mut &*self.stream, buf)
    }
}

/// A descriptor held in reserve (`/dev/null`), given up to take a connection the
/// process has no descriptor for, to refuse it.
fn spare_descriptor() -> Option<std::fs::File> {
    std::fs::File::open("/dev/null").ok()
}

/// EMFILE (this process) or ENFILE (the system) on Linux.
fn out_of_descriptors(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(24) | Some(23))
}

/// How long the accepting thread waits in poll(2) before it looks whether the
/// server stops.
const ACCEPT_WAIT: Duration = Duration::from_millis(50);

/// Wait until a connection waits on either listener, or for `timeout`. (The
/// thread slept 5 ms between tries before: 400 system calls and 200 wake-ups a
/// second on an idle node, and up to 5 ms more to each new connection.)
fn wait_for_connection(listener: &TcpListener, unix: Option<&UnixListener>, timeout: Duration) {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsFd;
    let mut fds = vec![PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
    if let Some(u) = unix {
        fds.push(PollFd::new(u.as_fd(), PollFlags::POLLIN));
    }
    let ms = PollTimeout::try_from(timeout.as_millis().min(i32::MAX as u128) as i32).unwrap_or(PollTimeout::MAX);
    if poll(&mut fds, ms).is_err() {
        // EINTR or worse: do not spin.
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The next waiting connection, TCP first.
fn accept_any(listener: &TcpListener, unix: Option<&UnixListener>) -> std::io::Result<Stream> {
    match listener.accept() {
        Ok((s, _)) => Ok(Stream::Tcp(s)),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => match unix.map(|u| u.accept()) {
            Some(Ok((s, _))) => Ok(Stream::Unix(s)),
            Some(Err(u)) if u.kind() != std::io::ErrorKind::WouldBlock => Err(u),
            _ => Err(e),
        },
        Err(e) => Err(e),
    }
}

/// A TCP connection wrapped in TLS when the node has TLS on (no I/O: the
/// handshake is its thread's first step). Unix-domain connections stay as they are.
fn secure<F: EngineFactory>(node: &Arc<Node<F>>, stream: Stream) -> std::io::Result<Stream> {
    match (stream, node.config().tls.as_ref()) {
        (Stream::Tcp(tcp), Some(tls)) => Ok(Stream::Tls(Arc::new(tls.accept(tcp)?))),
        (stream, _) => Ok(stream),
    }
}

/// Most connections being refused at once (each waits up to [`REFUSE_WAIT`] for its
/// request); past that a connection is closed without an answer.
const REFUSERS: usize = 4;
const REFUSE_WAIT: Duration = Duration::from_secs(2);

/// Answer a connection's first request with a `Busy` error saying `msg`, then close
/// it (on a thread of its own: the client may be slow to send).
fn refuse<F: EngineFactory>(node: &Arc<Node<F>>, stream: Stream, msg: String, refusers: &Arc<AtomicUsize>) {
    if refusers.fetch_add(1, Ordering::SeqCst) >= REFUSERS {
        refusers.fetch_sub(1, Ordering::SeqCst);
        return; // dropped: the client sees the connection closed
    }
    let node = node.clone();
    let refusers2 = refusers.clone();
    let spawned = std::thread::Builder::new().name("rpc-refuse".into()).spawn(move || {
        let _ = stream.set_nonblocking(false);
        let _ = stream.set_read_timeout(Some(REFUSE_WAIT));
        let mut buf = Vec::new();
        let mut reader = BufReader::new(&stream);
        if let Ok(Some(_)) = frame::read_frame::<RequestEnvelope, _>(&mut reader, &mut buf) {
            let resp = ResponseEnvelope { ht: node.clock().now(), uncertain: node.reads_uncertain(), result: Err(RpcError::new(ErrorCode::Busy, msg)) };
            let mut w = BufWriter::new(&stream);
            let _ = frame::write_frame(&mut w, &resp, &mut buf);
            let _ = w.flush();
        }
        let _ = stream.shutdown();
        refusers2.fetch_sub(1, Ordering::SeqCst);
    });
    if spawned.is_err() {
        refusers.fetch_sub(1, Ordering::SeqCst);
    }
}

impl RpcServer {
    /// Bind `bind` (port 0 = any free port) and serve `node` until stopped.
    pub fn start<F: EngineFactory>(node: Arc<Node<F>>, bind: &str) -> std::io::Result<RpcServer> {
        Self::serve(node, TcpListener::bind(bind)?)
    }

    /// Serve `node` on an already bound listener (lets a caller learn the port
    /// before the node is opened with its advertised address).
    pub fn serve<F: EngineFactory>(node: Arc<Node<F>>, listener: TcpListener) -> std::io::Result<RpcServer> {
        Self::serve_with(node, listener, None)
    }

    /// [`RpcServer::serve`], and also on the Unix-domain socket `unix`.
    pub fn serve_with<F: EngineFactory>(node: Arc<Node<F>>, listener: TcpListener, unix: Option<UnixListener>) -> std::io::Result<RpcServer> {
        Self::serve_limited(node, listener, unix, ServerLimits::default())
    }

    /// [`RpcServer::serve_with`], serving at most `limits.max_connections`
    /// connections at once (see [`ServerLimits`]).
    pub fn serve_limited<F: EngineFactory>(
        node: Arc<Node<F>>,
        listener: TcpListener,
        unix: Option<UnixListener>,
        limits: ServerLimits,
    ) -> std::io::Result<RpcServer> {
        let addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        if let Some(u) = &unix {
            u.set_nonblocking(true)?;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let conns: Registry = Arc::default();
        let conns2 = conns.clone();
        let accept = std::thread::Builder::new().name("rpc-accept".into()).spawn(move || {
            let mut next_id = 0u64;
            let mut spare = spare_descriptor();
            let refusers = Arc::new(AtomicUsize::new(0));
            while !stop2.load(Ordering::SeqCst) {
                if spare.is_none() {
                    spare = spare_descriptor();
                }
                match accept_any(&listener, unix.as_ref()).and_then(|s| secure(&node, s)) {
                    Ok(stream) if spare.is_none() => {
                        // It took the descriptor the spare needs: serving it would
                        // leave none to refuse the next one with.
                        let msg = format!("node {} is out of file descriptors; try again", node.config().node_id);
                        refuse(&node, stream, msg, &refusers);
                    }
                    Ok(stream) => {
                        let open = conns2.lock().len();
                        if open >= limits.max_connections {
                            let msg =
                                format!("node {} serves at most {} connections at once (all in use); try again", node.config().node_id, limits.max_connections);
                            refuse(&node, stream, msg, &refusers);
                            continue;
                        }
                        let peer = stream.peer_ip();
                        if let Some(ip) = peer {
                            let from_peer = conns2.lock().values().filter(|(_, p)| *p == Some(ip)).count();
                            if from_peer >= limits.max_per_peer {
                                let msg = format!(
                                    "node {} serves at most {} connections from one address ({ip} has them all); try again",
                                    node.config().node_id,
                                    limits.max_per_peer
                                );
                                refuse(&node, stream, msg, &refusers);
                                continue;
                            }
                        }
                        let _ = stream.set_nonblocking(false);
                        next_id += 1;
                        let id = next_id;
                        let stream = Arc::new(stream);
                        conns2.lock().insert(id, (stream.clone(), peer));
                        let node = node.clone();
                        let conns3 = conns2.clone();
                        let spawned = std::thread::Builder::new().name("rpc-conn".into()).spawn(move || {
                            serve_connection(node, &stream, limits);
                            // The registry holds the stream too: shut the socket so
                            // the peer sees EOF now.
                            let _ = stream.shutdown();
                            conns3.lock().remove(&id);
                        });
                        if let Err(e) = spawned {
                            // The closure (and the stream) went with the failed spawn.
                            conns2.lock().remove(&id);
                            tracing::warn!(error = %e, "no thread for a new connection: closed it");
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => wait_for_connection(&listener, unix.as_ref(), ACCEPT_WAIT),
                    Err(e) if out_of_descriptors(&e) => {
                        // A connection waits and the process has no descriptor to
                        // take it: give up the spare, take the connection to tell it
                        // why, and take the spare back. Left waiting, its client
                        // would hang until its own timeout.
                        drop(spare.take());
                        match accept_any(&listener, unix.as_ref()).and_then(|s| secure(&node, s)) {
                            Ok(stream) => {
                                let msg = format!("node {} is out of file descriptors ({e}); try again", node.config().node_id);
                                tracing::warn!(error = %e, "out of descriptors: refused a connection");
                                refuse(&node, stream, msg, &refusers);
                            }
                            Err(e) => tracing::warn!(error = %e, "accept failed"),
                        }
                        // Taken back at the top of the loop once the refusal
                        // let go of its descriptor; until then connections wait.
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            }
        })?;
        Ok(RpcServer { addr, stop, accept: Some(accept), conns })
    }

    /// Connections being served now.
    pub fn connections(&self) -> usize {
        self.conns.lock().len()
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
        for (_, (c, _)) in self.conns.lock().drain() {
            let _ = c.shutdown();
        }
    }
}

impl Drop for RpcServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether a refusal logged through `last` may be logged now: at most once a
/// second (a peer sending nothing else must not flood the log).
fn log_now(last: &AtomicU64) -> bool {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    last.swap(now, Ordering::Relaxed) != now
}

/// Log a refused hybrid time (rate-limited).
fn log_refused_time(e: &pinax_common::ClockAhead) {
    static LAST: AtomicU64 = AtomicU64::new(0);
    if log_now(&LAST) {
        tracing::warn!(ahead_ms = e.ahead_micros / 1000, max_skew_ms = e.max_skew_micros / 1000, "refused a request whose hybrid time is too far ahead");
    }
}

/// Log a refused TLS handshake (rate-limited).
fn log_refused_handshake(stream: &Stream, e: &std::io::Error) {
    static LAST: AtomicU64 = AtomicU64::new(0);
    if log_now(&LAST) {
        let peer = stream.peer_ip().map_or_else(|| "?".into(), |a| a.to_string());
        tracing::warn!(%peer, error = %e, "refused a connection: TLS handshake failed (a peer with a certificate of another CA?)");
    }
}

/// The answer to a request past its SQL node's lease.
fn fenced() -> RpcError {
    RpcError::new(
        ErrorCode::NodeFenced,
        "this SQL node's lease from the master has lapsed (it lost contact with the master, and DDL may have gone on without it): retry the transaction",
    )
}

fn describe(peer: &Peer) -> String {
    match peer {
        Peer::Client(user) => format!("a client certificate (user {user:?})"),
        Peer::Anonymous => "a peer without a certificate of this cluster".into(),
        other => format!("{other:?}"),
    }
}

/// Log a request refused for who made it (rate-limited).
fn log_refused_request(stream: &Stream, peer: &Peer, req: &pinax_proto::Request) {
    static LAST: AtomicU64 = AtomicU64::new(0);
    if log_now(&LAST) {
        let from = stream.peer_ip().map_or_else(|| "?".into(), |a| a.to_string());
        let mut what = format!("{req:?}");
        what.truncate(what.char_indices().nth(60).map_or(what.len(), |(i, _)| i));
        tracing::warn!(peer = %from, who = %describe(peer), request = %what, "refused a request its peer may not make");
    }
}

fn serve_connection<F: EngineFactory>(node: Arc<Node<F>>, stream: &Stream, limits: ServerLimits) {
    let _ = stream.tune();
    // A peer must prove it holds a certificate of the cluster's CA before any
    // request of its is read; one that does not, or stalls, is dropped.
    if let Stream::Tls(t) = stream {
        if let Err(e) = t.handshake(pinax_proto::tls::HANDSHAKE_TIMEOUT) {
            log_refused_handshake(stream, &e);
            return;
        }
    }
    // Every read and write is bounded; the deadline below bounds a whole frame.
    if stream.set_read_timeout(Some(limits.frame_timeout)).is_err() || stream.set_write_timeout(Some(limits.frame_timeout)).is_err() {
        return;
    }
    let local = matches!(stream, Stream::Unix(_));
    let peer = match stream {
        Stream::Unix(_) => Peer::Local,
        Stream::Tls(t) => t.peer(),
        Stream::Tcp(_) => Peer::Insecure,
    };
    let mut reader = BufReader::with_capacity(64 << 10, DeadlineReader { stream, until: None });
    let mut writer = BufWriter::with_capacity(64 << 10, stream);
    let mut rbuf = Vec::new();
    let mut wbuf = Vec::new();
    loop {
        // Wait for the next request (not in a blocking read: see
        // `Stream::wait_readable`); a TCP connection idle too long is closed.
        reader.get_mut().until = None;
        if reader.buffer().is_empty() {
            let ready = if local { stream.wait_readable().map(|_| true) } else { stream.wait_readable_for(limits.idle_timeout) };
            if !matches!(ready, Ok(true)) {
                return;
            }
        }
        reader.get_mut().until = Some(std::time::Instant::now() + limits.frame_timeout);
        let env: RequestEnvelope = match frame::read_frame(&mut reader, &mut rbuf) {
            Ok(Some(env)) => env,
            Ok(None) => return,
            Err(FrameError::Io(_)) => return,
            Err(e) => {
                let code = match e {
                    FrameError::Checksum => ErrorCode::Corruption,
                    _ => ErrorCode::InvalidRequest,
                };
                let resp = ResponseEnvelope {
                    ht: node.clock().now(),
                    uncertain: node.reads_uncertain(),
                    result: Err(RpcError::new(code, format!("bad request frame: {e}"))),
                };
                let _ = frame::write_frame(&mut writer, &resp, &mut wbuf);
                let _ = writer.flush();
                return;
            }
        };
        // What the peer's certificate does not allow is refused, and logged;
        // a peer without one gets one answer, then its connection closes.
        if !env.request.allowed_for(&peer) {
            log_refused_request(stream, &peer, &env.request);
            let resp = ResponseEnvelope {
                ht: node.clock().now(),
                uncertain: node.reads_uncertain(),
                result: Err(RpcError::new(ErrorCode::PermissionDenied, format!("{} may not make this request", describe(&peer)))),
            };
            if frame::write_frame(&mut writer, &resp, &mut wbuf).is_err() || writer.flush().is_err() || peer == Peer::Anonymous {
                return;
            }
            continue;
        }
        // A time too far ahead is refused, never adopted (see `update_checked`).
        if let Err(e) = node.clock().update_checked(env.ht) {
            log_refused_time(&e);
            let resp = ResponseEnvelope {
                ht: node.clock().now(),
                uncertain: node.reads_uncertain(),
                result: Err(RpcError::new(ErrorCode::InvalidRequest, e.to_string())),
            };
            if frame::write_frame(&mut writer, &resp, &mut wbuf).is_err() || writer.flush().is_err() {
                return;
            }
            continue;
        }
        // A SQL node's backend past its node's lease: its statement may have
        // planned against a catalog DDL has changed since (see `RequestEnvelope::fence`).
        if env.fence != 0 && env.fence < node.clock().now().physical_micros() {
            let resp = ResponseEnvelope { ht: node.clock().now(), uncertain: node.reads_uncertain(), result: Err(fenced()) };
            if frame::write_frame(&mut writer, &resp, &mut wbuf).is_err() || writer.flush().is_err() {
                return;
            }
            continue;
        }
        let result = match std::panic::catch_unwind(AssertUnwindSafe(|| node.handle(env.request))) {
            Ok(r) => r,
            Err(p) => {
                let msg = p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_default();
                tracing::error!(panic = %msg, "request handler panicked");
                Err(RpcError::new(ErrorCode::Internal, format!("internal error: {msg}")))
            }
        };
        let resp = ResponseEnvelope { ht: node.clock().now(), uncertain: node.reads_uncertain(), result };
        if frame::write_frame(&mut writer, &resp, &mut wbuf).is_err() || writer.flush().is_err() {
            return;
        }
    }
}
