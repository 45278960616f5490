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
use pinax_proto::{RequestEnvelope, ResponseEnvelope, RpcError};
use std::collections::HashMap;
use std::io::{BufReader, BufWriter, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::net::UnixListener;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

pub struct RpcServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    /// Open connections, shut down on stop so their threads end.
    conns: Arc<Mutex<HashMap<u64, Stream>>>,
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
        let addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        if let Some(u) = &unix {
            u.set_nonblocking(true)?;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let conns: Arc<Mutex<HashMap<u64, Stream>>> = Arc::default();
        let conns2 = conns.clone();
        let accept = std::thread::Builder::new().name("rpc-accept".into()).spawn(move || {
            let mut next_id = 0u64;
            while !stop2.load(Ordering::SeqCst) {
                let accepted = match listener.accept() {
                    Ok((s, _)) => Ok(Stream::Tcp(s)),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => match unix.as_ref().map(|u| u.accept()) {
                        Some(Ok((s, _))) => Ok(Stream::Unix(s)),
                        Some(Err(e)) if e.kind() != std::io::ErrorKind::WouldBlock => Err(e),
                        _ => Err(e),
                    },
                    Err(e) => Err(e),
                };
                match accepted {
                    Ok(stream) => {
                        let _ = stream.set_nonblocking(false);
                        next_id += 1;
                        let id = next_id;
                        if let Ok(c) = stream.try_clone() {
                            conns2.lock().insert(id, c);
                        }
                        let node = node.clone();
                        let conns3 = conns2.clone();
                        let _ = std::thread::Builder::new().name("rpc-conn".into()).spawn(move || {
                            serve_connection(node, &stream);
                            // The registry holds a clone: shut the socket so the peer sees EOF.
                            let _ = stream.shutdown();
                            conns3.lock().remove(&id);
                        });
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(5)),
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            }
        })?;
        Ok(RpcServer { addr, stop, accept: Some(accept), conns })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
        for (_, c) in self.conns.lock().drain() {
            let _ = c.shutdown();
        }
    }
}

impl Drop for RpcServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn serve_connection<F: EngineFactory>(node: Arc<Node<F>>, stream: &Stream) {
    let _ = stream.set_nodelay();
    let (Ok(rstream), Ok(wstream)) = (stream.try_clone(), stream.try_clone()) else {
        return;
    };
    let mut reader = BufReader::with_capacity(64 << 10, rstream);
    let mut writer = BufWriter::with_capacity(64 << 10, wstream);
    let mut rbuf = Vec::new();
    let mut wbuf = Vec::new();
    loop {
        // (Not a blocking read: see `Stream::wait_readable`.)
        if reader.buffer().is_empty() && reader.get_ref().wait_readable().is_err() {
            return;
        }
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
        node.clock().update(env.ht);
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
