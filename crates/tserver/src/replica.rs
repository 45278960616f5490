//! A tablet's Raft group on this node: the [`Replicator`] the tablet writes
//! through, and the [`Transport`] carrying Raft messages to other nodes over the
//! ordinary RPC frames (a `Request::Raft` per message; the envelope also carries the
//! sender's hybrid time).

use parking_lot::Mutex;
use pinax_common::{HybridClock, HybridTime, TabletId};
use pinax_engine::OwnedBatch;
use pinax_proto::frame::{self, FrameError};
use pinax_proto::stream::Stream;
use pinax_proto::tls::TlsConfig;
use pinax_proto::{Request, RequestEnvelope, Response, ResponseEnvelope};
use pinax_raft::network::{MsgKind, Transport, TransportError};
use pinax_raft::quiesce::PeerWatch;
use pinax_raft::{Command, GroupError, NodeId, RaftGroup};
use pinax_tablet::{Error as TabletError, Replicator};
use std::collections::HashMap;
use std::io::{BufReader, BufWriter, Write};
use std::sync::Arc;
use std::time::Duration;

/// A tablet replica's Raft group, as the tablet sees it.
pub struct RaftReplicator {
    pub tablet_id: TabletId,
    pub group: RaftGroup,
}

pub(crate) fn group_err(tablet_id: TabletId, e: GroupError) -> TabletError {
    match e {
        GroupError::NotLeader { leader_addr, .. } => TabletError::NotLeader { tablet_id, leader_hint: leader_addr },
        GroupError::Timeout => TabletError::Unavailable { tablet_id, message: GroupError::Timeout.to_string() },
        // A replica closing (dropped after a move): another replica serves.
        GroupError::Stopped => TabletError::Unavailable { tablet_id, message: GroupError::Stopped.to_string() },
        // A change refused for now (the group is fine): the caller may try again.
        GroupError::Refused(message) => TabletError::Unavailable { tablet_id, message },
        other => TabletError::Engine(pinax_engine::Error::Other(format!("tablet {}: {other}", tablet_id.0))),
    }
}

impl Replicator for RaftReplicator {
    fn replicate(&self, ht: HybridTime, batch: OwnedBatch, request: u128) -> pinax_tablet::Result<()> {
        self.group.replicate(Command { ht: ht.0, batch: batch.into_bytes().into(), request }).map_err(|e| group_err(self.tablet_id, e))
    }
    fn replicate_then(&self, ht: HybridTime, batch: OwnedBatch, request: u128, queued: &mut dyn FnMut()) -> pinax_tablet::Result<()> {
        self.group.replicate_then(Command { ht: ht.0, batch: batch.into_bytes().into(), request }, queued).map_err(|e| group_err(self.tablet_id, e))
    }
    fn applied_request(&self, request: u128) -> Option<HybridTime> {
        self.group.applied_request(request)
    }
    fn leader_term(&self) -> pinax_tablet::Result<u64> {
        self.group.leader_term().map_err(|e| group_err(self.tablet_id, e))
    }
    fn leads_now(&self) -> bool {
        self.group.leads_now()
    }
    fn read_barrier(&self) -> pinax_tablet::Result<u64> {
        self.group.read_barrier().map_err(|e| group_err(self.tablet_id, e))
    }
}

struct PeerConn {
    reader: BufReader<Stream>,
    writer: BufWriter<Stream>,
    rbuf: Vec<u8>,
    wbuf: Vec<u8>,
}

impl PeerConn {
    fn connect(addr: &str, within: Duration, tls: Option<&TlsConfig>) -> std::io::Result<PeerConn> {
        let s = Stream::connect_tcp(addr, within.min(PEER_CONNECT_TIMEOUT), tls)?;
        s.set_read_timeout(Some(PEER_READ_TIMEOUT))?;
        let w = s.try_clone()?;
        Ok(PeerConn { reader: BufReader::with_capacity(64 << 10, s), writer: BufWriter::with_capacity(64 << 10, w), rbuf: Vec::new(), wbuf: Vec::new() })
    }

    /// A read timeout for the next calls (None: [`PEER_READ_TIMEOUT`]).
    fn set_read_timeout(&mut self, t: Option<Duration>) -> std::io::Result<()> {
        self.reader.get_ref().set_read_timeout(Some(t.unwrap_or(PEER_READ_TIMEOUT)))
    }

    fn call(&mut self, env: &RequestEnvelope) -> Result<ResponseEnvelope, FrameError> {
        frame::write_frame(&mut self.writer, env, &mut self.wbuf)?;
        self.writer.flush().map_err(FrameError::Io)?;
        frame::read_frame::<ResponseEnvelope, _>(&mut self.reader, &mut self.rbuf)?
            .ok_or_else(|| FrameError::Io(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "connection closed")))
    }
}

/// How long a connect to another node may take.
const PEER_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// How long an answer from another node may take.
const PEER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Raft messages over RPC connections, pooled per peer address.
pub struct RpcTransport {
    clock: Arc<HybridClock>,
    pools: Mutex<HashMap<String, Vec<PeerConn>>>,
    /// Addresses requests fail to reach (fault injection, `Request::InjectFaults`).
    unreachable: parking_lot::RwLock<Vec<String>>,
    /// Followers held quiet by quiesced leaders on other nodes; the node pings
    /// those nodes (`node/peer_watch.rs`).
    watch: Arc<PeerWatch>,
    /// This node's TLS identity (None: plaintext).
    tls: Option<Arc<TlsConfig>>,
}

impl RpcTransport {
    pub fn new(clock: Arc<HybridClock>, tls: Option<Arc<TlsConfig>>) -> Self {
        RpcTransport { clock, pools: Mutex::new(HashMap::new()), unreachable: Default::default(), watch: Arc::default(), tls }
    }

    /// The node's watch of the leaders holding its followers quiet.
    pub fn watch(&self) -> &Arc<PeerWatch> {
        &self.watch
    }

    /// Fault injection: requests to `addrs` fail as unreachable until changed.
    pub fn set_unreachable(&self, addrs: Vec<String>) {
        *self.unreachable.write() = addrs;
    }
}

impl RpcTransport {
    /// Send one request to the node at `addr` and wait for its answer.
    pub fn request(&self, addr: &str, request: Request) -> Result<Response, pinax_proto::RpcError> {
        self.request_within(addr, request, None)
    }

    /// The id of the node at `addr` if it answers a `Ping` within `within` (its
    /// connect included). A connection that timed out is dropped, never pooled
    /// (its late answer would be read as the next request's).
    pub fn ping(&self, addr: &str, within: Duration) -> Option<u64> {
        match self.request_within(addr, Request::Ping, Some(within)) {
            Ok(Response::Pong { node_id }) => Some(node_id),
            _ => None,
        }
    }

    /// [`RpcTransport::request`] with its answer awaited at most `within` (None: the usual read timeout).
    pub fn request_within(&self, addr: &str, request: Request, within: Option<Duration>) -> Result<Response, pinax_proto::RpcError> {
        use pinax_common::ErrorCode;
        let unavailable = |e: &dyn std::fmt::Display| pinax_proto::RpcError::new(ErrorCode::Unavailable, format!("node {addr} is unavailable: {e}"));
        if self.unreachable.read().iter().any(|a| a == addr) {
            return Err(unavailable(&"partitioned away (fault injection)"));
        }
        let pooled = self.pools.lock().get_mut(addr).and_then(|p| p.pop());
        let env = RequestEnvelope { ht: self.clock.now(), fence: 0, request };
        let fresh = || -> Result<(PeerConn, ResponseEnvelope), pinax_proto::RpcError> {
            let mut c = PeerConn::connect(addr, within.unwrap_or(PEER_CONNECT_TIMEOUT), self.tls.as_deref()).map_err(|e| unavailable(&e))?;
            c.set_read_timeout(within).map_err(|e| unavailable(&e))?;
            let r = c.call(&env).map_err(|e| unavailable(&e))?;
            c.set_read_timeout(None).map_err(|e| unavailable(&e))?;
            Ok((c, r))
        };
        let (conn, resp) = match pooled {
            Some(mut c) if within.is_some() => {
                let r = c.set_read_timeout(within).and_then(|_| c.call(&env).map_err(|e| std::io::Error::other(e.to_string())));
                match r {
                    Ok(r) => {
                        c.set_read_timeout(None).map_err(|e| unavailable(&e))?;
                        (c, r)
                    }
                    Err(e) => {
                        self.pools.lock().remove(addr);
                        return Err(unavailable(&e));
                    }
                }
            }
            Some(mut c) => match c.call(&env) {
                Ok(r) => (c, r),
                // A pooled connection the node closed (it restarted): its other
                // pooled connections are as stale; send once more on a new one.
                Err(FrameError::Io(_)) => {
                    self.pools.lock().remove(addr);
                    fresh()?
                }
                Err(e) => return Err(unavailable(&e)),
            },
            None => fresh()?,
        };
        // An answer from a clock too far ahead is not believed (nor its time
        // adopted): to Raft the node is unreachable until its clock is fixed.
        if let Err(e) = self.clock.update_checked(resp.ht) {
            return Err(unavailable(&format!("its answer was refused: {e}")));
        }
        let mut pools = self.pools.lock();
        let pool = pools.entry(addr.to_string()).or_default();
        if pool.len() < POOL_PER_PEER {
            pool.push(conn);
        }
        drop(pools);
        resp.result
    }
}

/// Idle connections kept per peer.
const POOL_PER_PEER: usize = 8;

impl Transport for RpcTransport {
    fn call(&self, target: NodeId, addr: &str, group: u64, kind: MsgKind, body: Vec<u8>) -> Result<Vec<u8>, TransportError> {
        match self.request(addr, Request::Raft { group, target, kind: kind as u8, body }) {
            Ok(Response::Raft(bytes)) => Ok(bytes),
            Ok(other) => Err(TransportError::Other(format!("{addr}: unexpected answer to a raft message: {other:?}"))),
            // Not reached (down, restarting) or not node `target` any more.
            Err(e) if e.code == pinax_common::ErrorCode::Unavailable => Err(TransportError::Unreachable(format!("{addr}: {e}"))),
            Err(e) => Err(TransportError::Other(format!("{addr}: {e}"))),
        }
    }

    /// The node watches its peers (its tick pings the nodes of leaders holding
    /// its followers quiet): groups of several members may quiesce.
    fn peer_watch(&self) -> Option<Arc<PeerWatch>> {
        Some(self.watch.clone())
    }
}

/// The master's Raft group as the catalog writes through it.
pub struct RaftCatalogLog {
    pub repl: Arc<RaftReplicator>,
    pub clock: Arc<HybridClock>,
}

fn catalog_err(e: TabletError) -> pinax_master::CatalogError {
    use pinax_master::CatalogError;
    match e {
        TabletError::NotLeader { leader_hint, .. } => CatalogError::NotLeader(leader_hint),
        other => CatalogError::Unavailable(other.to_string()),
    }
}

impl pinax_master::CatalogLog for RaftCatalogLog {
    fn write(&self, batch: OwnedBatch) -> Result<(), pinax_master::CatalogError> {
        self.repl.replicate(self.clock.now(), batch, 0).map_err(catalog_err)
    }
    fn term(&self) -> Result<u64, pinax_master::CatalogError> {
        // A lease or a read-index round: a deposed leader serves nothing stale.
        self.repl.read_barrier().map_err(catalog_err)
    }
}
