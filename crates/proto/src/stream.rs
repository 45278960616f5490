//! A connection between a client and a node: TCP, or a Unix-domain socket when
//! both are on one machine (the SQL layer and its local node: no TCP/IP stack, no
//! loopback softirq per message; see `bench/results/*-transport.txt`).

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;

/// One end of a connection.
#[derive(Debug)]
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    /// TCP with TLS (`crate::tls`); clones share the one TLS state.
    Tls(std::sync::Arc<crate::tls::TlsStream>),
}

impl Stream {
    pub fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tls(s) => Stream::Tls(s.clone()),
        })
    }

    pub fn shutdown(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.shutdown(Shutdown::Both),
            Stream::Unix(s) => s.shutdown(Shutdown::Both),
            Stream::Tls(s) => s.tcp().shutdown(Shutdown::Both),
        }
    }

    pub fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_nonblocking(on),
            Stream::Unix(s) => s.set_nonblocking(on),
            Stream::Tls(s) => s.tcp().set_nonblocking(on),
        }
    }

    /// Wait until the stream has bytes to read (or is closed or broken): call it
    /// before a read that would block. On a Unix-domain socket this waits in
    /// poll(2) for input only. A read that blocks sleeps on the socket's wait
    /// queue, which is also woken whenever the peer reads what this end wrote (the
    /// send buffer's space frees, `unix_write_space`): a request-response exchange
    /// woke each side once for nothing, a context switch and an inter-processor
    /// interrupt per message. poll's waiter ignores wake-ups for output. (TCP
    /// wakes writers only when one ran out of space: nothing to do there.)
    pub fn wait_readable(&self) -> io::Result<()> {
        let Stream::Unix(s) = self else { return Ok(()) };
        poll_input(std::os::fd::AsFd::as_fd(s), None).map(|_| ())
    }

    /// Wait up to `timeout` until the stream has bytes to read (or is closed or
    /// broken): Ok(false) if none came. Bytes TLS already decrypted count.
    pub fn wait_readable_for(&self, timeout: std::time::Duration) -> io::Result<bool> {
        use std::os::fd::AsFd;
        let fd = match self {
            Stream::Tcp(s) => s.as_fd(),
            Stream::Unix(s) => s.as_fd(),
            Stream::Tls(t) if t.has_plaintext() => return Ok(true),
            Stream::Tls(t) => t.tcp().as_fd(),
        };
        poll_input(fd, Some(timeout))
    }

    /// A TCP connection to `addr` (`HOST:PORT`) within `timeout`, tuned
    /// ([`tune_tcp`]), with TLS when `tls` is given (the server must present a
    /// certificate naming HOST; the handshake gets at least
    /// [`crate::tls::MIN_HANDSHAKE`]).
    pub fn connect_tcp(addr: &str, timeout: std::time::Duration, tls: Option<&crate::tls::TlsConfig>) -> io::Result<Stream> {
        let sockaddr = std::net::ToSocketAddrs::to_socket_addrs(addr)?.next().ok_or_else(|| io::Error::other("address did not resolve"))?;
        let tcp = TcpStream::connect_timeout(&sockaddr, timeout)?;
        tune_tcp(&tcp)?;
        Ok(match tls {
            Some(tls) => Stream::Tls(std::sync::Arc::new(tls.connect(tcp, addr, timeout.max(crate::tls::MIN_HANDSHAKE))?)),
            None => Stream::Tcp(tcp),
        })
    }

    /// The peer's IP address (TCP; None for a Unix-domain socket).
    pub fn peer_ip(&self) -> Option<std::net::IpAddr> {
        match self {
            Stream::Tcp(s) => s.peer_addr().ok().map(|a| a.ip()),
            Stream::Tls(t) => t.tcp().peer_addr().ok().map(|a| a.ip()),
            Stream::Unix(_) => None,
        }
    }

    pub fn set_write_timeout(&self, t: Option<std::time::Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_write_timeout(t),
            Stream::Unix(s) => s.set_write_timeout(t),
            Stream::Tls(s) => s.tcp().set_write_timeout(t),
        }
    }

    pub fn set_read_timeout(&self, t: Option<std::time::Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(t),
            Stream::Unix(s) => s.set_read_timeout(t),
            Stream::Tls(s) => s.tcp().set_read_timeout(t),
        }
    }

    /// TCP: [`tune_tcp`] (no Nagle delay, dead peers found in seconds). Unix
    /// sockets never delay and their peer cannot vanish unnoticed.
    pub fn tune(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => tune_tcp(s),
            Stream::Tls(s) => tune_tcp(s.tcp()),
            Stream::Unix(_) => Ok(()),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
            Stream::Tls(s) => (&**s).read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
            Stream::Tls(s) => (&**s).write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            Stream::Unix(s) => s.flush(),
            Stream::Tls(s) => (&**s).flush(),
        }
    }
}

/// Reads and writes through a shared reference (as `&TcpStream` does), so one
/// descriptor serves a connection's reader, writer and registry entry: a clone per
/// role cost the node three extra descriptors per connection.
impl Read for &Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => (&*s).read(buf),
            Stream::Unix(s) => (&*s).read(buf),
            Stream::Tls(s) => (&**s).read(buf),
        }
    }
}

impl Write for &Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => (&*s).write(buf),
            Stream::Unix(s) => (&*s).write(buf),
            Stream::Tls(s) => (&**s).write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => (&*s).flush(),
            Stream::Unix(s) => (&*s).flush(),
            Stream::Tls(s) => (&**s).flush(),
        }
    }
}

impl AsRawFd for Stream {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
            Stream::Tls(s) => s.tcp().as_raw_fd(),
        }
    }
}

/// Wait in poll(2) until `fd` has input (or is closed or broken), for at most
/// `timeout` (None: however long it takes): Ok(false) if the time ran out.
fn poll_input(fd: std::os::fd::BorrowedFd<'_>, timeout: Option<std::time::Duration>) -> io::Result<bool> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let ms = match timeout {
        Some(t) => PollTimeout::try_from(t.as_millis().min(i32::MAX as u128) as i32).unwrap_or(PollTimeout::MAX),
        None => PollTimeout::NONE,
    };
    let deadline = timeout.map(|t| std::time::Instant::now() + t);
    loop {
        let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
        match poll(&mut fds, ms) {
            Ok(0) => return Ok(false),
            Ok(_) => return Ok(true),
            Err(nix::errno::Errno::EINTR) if deadline.is_none_or(|d| std::time::Instant::now() < d) => continue,
            Err(nix::errno::Errno::EINTR) => return Ok(false),
            Err(e) => return Err(e.into()),
        }
    }
}

/// How long a TCP peer may leave this end's bytes unacknowledged, or stay
/// silent to keepalive probes, before the connection fails: a partitioned or
/// powered-off node is found out in seconds instead of TCP's ~15 minutes of
/// retransmissions (or never, for a connection waiting for an answer).
pub const TCP_DEAD_PEER: std::time::Duration = std::time::Duration::from_secs(4);

/// Set up a TCP connection between nodes or between a client and a node: no
/// Nagle delay, keepalive probes after 2 s of silence (every second, 3 unanswered
/// fail it) and [`TCP_DEAD_PEER`] as `TCP_USER_TIMEOUT` (which also bounds the
/// probes). A live peer that is merely slow to answer a request keeps the
/// connection: its kernel acknowledges the probes.
pub fn tune_tcp(s: &TcpStream) -> io::Result<()> {
    use nix::sys::socket::{setsockopt, sockopt};
    s.set_nodelay(true)?;
    setsockopt(s, sockopt::KeepAlive, &true)?;
    setsockopt(s, sockopt::TcpKeepIdle, &2)?;
    setsockopt(s, sockopt::TcpKeepInterval, &1)?;
    setsockopt(s, sockopt::TcpKeepCount, &3)?;
    setsockopt(s, sockopt::TcpUserTimeout, &(TCP_DEAD_PEER.as_millis() as u32))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// This thread's voluntary context switches so far (Linux).
    fn voluntary_switches() -> u64 {
        let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
        status.lines().find_map(|l| l.strip_prefix("voluntary_ctxt_switches:")).unwrap().trim().parse().unwrap()
    }

    /// A side waiting for its answer sleeps once: the peer reading the request
    /// (which frees this side's send buffer) does not wake it. A blocking read
    /// instead of `wait_readable` is woken twice here (checked by hand).
    #[test]
    fn waiting_for_input_sleeps_through_the_peer_reading_the_request() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let mut a = Stream::Unix(a);
        a.write_all(b"request").unwrap();
        let waiter = std::thread::spawn(move || {
            let before = voluntary_switches();
            a.wait_readable().unwrap();
            let woken = voluntary_switches() - before;
            let mut answer = [0u8; 6];
            a.read_exact(&mut answer).unwrap();
            assert_eq!(&answer, b"answer");
            woken
        });
        std::thread::sleep(Duration::from_millis(100));
        let mut request = [0u8; 7];
        b.read_exact(&mut request).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        b.write_all(b"answer").unwrap();
        // 0 if the thread started after the answer came (a loaded machine).
        let woken = waiter.join().unwrap();
        assert!(woken <= 1, "the waiting side was woken {woken} times: before its answer came");
    }

    #[test]
    fn waiting_for_input_ends_when_the_peer_closes() {
        let (a, b) = UnixStream::pair().unwrap();
        let a = Stream::Unix(a);
        let waiter = std::thread::spawn(move || a.wait_readable());
        std::thread::sleep(Duration::from_millis(20));
        drop(b);
        waiter.join().unwrap().unwrap();
    }

    #[test]
    fn tcp_connections_find_a_dead_peer_in_seconds() {
        use nix::sys::socket::{getsockopt, sockopt};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        super::tune_tcp(&c).unwrap();
        assert!(c.nodelay().unwrap());
        assert!(getsockopt(&c, sockopt::KeepAlive).unwrap());
        assert_eq!(getsockopt(&c, sockopt::TcpKeepIdle).unwrap(), 2);
        assert_eq!(getsockopt(&c, sockopt::TcpUserTimeout).unwrap() as u128, super::TCP_DEAD_PEER.as_millis());
    }
}
