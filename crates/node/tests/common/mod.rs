//! Helpers shared by the process-level tests (each test file uses some of them).
#![allow(dead_code)]

use pinax_client::{Client, ClientOptions};
use std::time::{Duration, Instant};

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_pinax")
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A client of the node at `addr`, once it answers (within 60 s).
pub fn wait_client(addr: &str) -> Client {
    wait_client_with(addr, ClientOptions::default())
}

/// [`wait_client`] with `opts`.
pub fn wait_client_with(addr: &str, opts: ClientOptions) -> Client {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(c) = Client::connect_with(addr, opts.clone()) {
            return c;
        }
        assert!(Instant::now() < deadline, "node at {addr} did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Key `i`: a 16-bit hash prefix (spreading keys over hash tablets), then `i`.
pub fn key(i: u32) -> Vec<u8> {
    let h = (i.wrapping_mul(2654435761) >> 16) as u16;
    let mut k = h.to_be_bytes().to_vec();
    k.extend_from_slice(&i.to_be_bytes());
    k
}

/// A `pinax run` child that is killed (SIGKILL) and reaped when dropped: a test
/// that fails does not leave its daemon running.
pub struct Daemon(pub std::process::Child);

impl Daemon {
    /// SIGKILL the daemon (it must still be running) and wait for it.
    pub fn kill9(&mut self) {
        self.0.kill().unwrap();
        self.0.wait().unwrap();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// A cluster CA and a node certificate for 127.0.0.1 in `dir` (made with the
/// `pinax cert` commands), shared by the loopback nodes of a test.
pub fn make_certs(dir: &std::path::Path) {
    let _ = std::fs::remove_dir_all(dir);
    for args in [vec!["cert", "create-ca", "--certs-dir"], vec!["cert", "create-node", "--certs-dir"]] {
        let mut cmd = std::process::Command::new(bin());
        cmd.args(&args).arg(dir);
        if args[1] == "create-node" {
            cmd.arg("127.0.0.1");
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

/// Client options presenting the node identity in `dir`.
pub fn tls_options(dir: &std::path::Path) -> ClientOptions {
    ClientOptions { tls: Some(pinax_proto::tls::TlsConfig::node(dir).unwrap()), ..Default::default() }
}
