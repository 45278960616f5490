//! One blocking connection to a node.

use crate::error::{ClientError, Result};
use pinax_proto::frame::{self, FrameError};
use pinax_proto::stream::Stream;
use pinax_proto::tls::TlsConfig;
use pinax_proto::{RequestEnvelope, ResponseEnvelope};
use std::io::{BufReader, BufWriter, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

pub struct Conn {
    addr: String,
    reader: BufReader<Stream>,
    writer: BufWriter<Stream>,
    rbuf: Vec<u8>,
    wbuf: Vec<u8>,
}

impl Conn {
    /// Connect to the node at `addr`: through the Unix socket `unix` when given
    /// (the node is on this machine; over TCP if the socket does not answer).
    /// Over TCP with TLS when `tls` is given (the node must present a
    /// certificate naming `addr`'s host; this end presents `tls`'s).
    pub fn connect(addr: &str, timeout: Duration, unix: Option<&Path>, tls: Option<&TlsConfig>) -> Result<Conn> {
        let unavailable = |e: std::io::Error| ClientError::Unavailable { addr: addr.to_string(), message: e.to_string() };
        let s = match unix.and_then(|p| UnixStream::connect(p).ok()) {
            Some(u) => Stream::Unix(u),
            None => Stream::connect_tcp(addr, timeout, tls).map_err(unavailable)?,
        };
        let w = s.try_clone().map_err(unavailable)?;
        Ok(Conn {
            addr: addr.to_string(),
            reader: BufReader::with_capacity(64 << 10, s),
            writer: BufWriter::with_capacity(64 << 10, w),
            rbuf: Vec::new(),
            wbuf: Vec::new(),
        })
    }

    /// Whether the connection is a Unix-domain socket.
    pub fn is_local(&self) -> bool {
        matches!(self.reader.get_ref(), Stream::Unix(_))
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Whether an idle connection can no longer be used: the node closed it (it
    /// stopped or restarted since the connection was pooled) or sent bytes nobody
    /// asked for. One non-blocking peek; a live idle connection has nothing to read.
    /// Every pooled connection is peeked at, however recently it answered: a node
    /// killed and started again can be serving within a few tens of milliseconds
    /// (skipping the peek for connections younger than 50 ms failed the request
    /// after such a restart; `process::a_client_outlives_its_node_restarting`).
    pub fn is_broken(&self) -> bool {
        use nix::sys::socket::{recv, MsgFlags};
        use std::os::fd::AsRawFd;
        if !self.reader.buffer().is_empty() {
            return true;
        }
        let mut b = [0u8; 1];
        match recv(self.reader.get_ref().as_raw_fd(), &mut b, MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT) {
            Err(nix::errno::Errno::EAGAIN) => false,
            Err(nix::errno::Errno::EINTR) => false,
            _ => true, // Ok(0): closed by the node; Ok(n): stray bytes; Err: reset
        }
    }

    /// Send one request and wait for its response.
    pub fn call(&mut self, req: &RequestEnvelope) -> Result<ResponseEnvelope> {
        frame::write_frame(&mut self.writer, req, &mut self.wbuf).map_err(|e| broke(&self.addr, e))?;
        self.writer.flush().map_err(|e| broke(&self.addr, FrameError::Io(e)))?;
        if self.reader.buffer().is_empty() {
            self.reader.get_ref().wait_readable().map_err(|e| broke(&self.addr, FrameError::Io(e)))?;
        }
        // A Unix-domain socket copies memory to memory: no checksum to verify.
        let verify = !self.is_local();
        let res = frame::read_frame_buffered::<ResponseEnvelope, _>(&mut self.reader, &mut self.rbuf, verify).map_err(|e| broke(&self.addr, e))?;
        match res {
            Some(r) => Ok(r),
            None => Err(ClientError::Unavailable { addr: self.addr.clone(), message: "connection closed by the node".into() }),
        }
    }
}

/// The error of a request whose connection to `addr` failed.
fn broke(addr: &str, e: FrameError) -> ClientError {
    match e {
        FrameError::Io(io) => ClientError::Unavailable { addr: addr.to_string(), message: io.to_string() },
        other => ClientError::Protocol(other.to_string()),
    }
}
