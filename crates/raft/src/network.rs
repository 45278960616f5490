//! Raft RPCs between the replicas of a group.
//!
//! The node provides a [`Transport`]: a blocking call that carries one message
//! (`group`, [`MsgKind`], bincode body) to another node and returns the reply
//! bytes; Pinax's nodes carry them in their ordinary RPC frames (checksummed). The
//! receiving node hands the message to [`serve`] with the group's [`Raft`]; the
//! reply is the bincode of `Result<response, RaftError>`, so a remote Raft error
//! (a higher vote, say) reaches the sender's openraft as such.

use crate::quiesce::PeerWatch;
use crate::{decode, encode, NodeId, Raft, TypeConfig};
use openraft::error::{InstallSnapshotError, NetworkError, PayloadTooLarge, RPCError, RaftError, RemoteError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest, VoteResponse};
use openraft::BasicNode;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// An AppendEntries message larger than this is split (openraft sends fewer
/// entries per message when told the payload is too large). openraft 0.9 gives
/// every AppendEntries the heartbeat interval to complete (follower fsync
/// included): megabytes of batches in one message timed out again and again and
/// nothing committed (seen with 200k-row INSERTs at RF 3).
const MAX_APPEND_BYTES: usize = 512 << 10;

/// Which Raft RPC a message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum MsgKind {
    AppendEntries = 1,
    Vote = 2,
    InstallSnapshot = 3,
    /// A quiescing leader asks a follower to hold its election timer off
    /// ([`QuiesceRequest`]; served by `RaftGroup::serve`, not [`serve`]).
    Quiesce = 4,
}

impl MsgKind {
    pub fn from_u8(b: u8) -> Option<MsgKind> {
        match b {
            1 => Some(MsgKind::AppendEntries),
            2 => Some(MsgKind::Vote),
            3 => Some(MsgKind::InstallSnapshot),
            4 => Some(MsgKind::Quiesce),
            _ => None,
        }
    }
}

/// Why a message did not get a reply.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// The node could not be reached (connection refused or reset): openraft backs off.
    #[error("node unreachable: {0}")]
    Unreachable(String),
    /// Anything else (a timeout, an error reply from the node).
    #[error("raft transport: {0}")]
    Other(String),
}

/// Carries Raft messages to other nodes (blocking; called on the blocking pool of
/// the node's shared runtime, [`Network::io`]).
pub trait Transport: Send + Sync + 'static {
    fn call(&self, target: NodeId, addr: &str, group: u64, kind: MsgKind, body: Vec<u8>) -> Result<Vec<u8>, TransportError>;

    /// Where followers whose quiesced leader holds their election timers off are
    /// woken when that leader's node is lost ([`PeerWatch`]). `None`: nobody
    /// watches the nodes, and groups of several members never quiesce (their
    /// followers could wait forever on a dead leader).
    fn peer_watch(&self) -> Option<Arc<PeerWatch>> {
        None
    }
}

/// A quiescing leader's word to a follower ([`MsgKind::Quiesce`]): its vote (term
/// and leader, committed) and its last log id, every entry of which it applied.
/// The follower holds its election timer off if it has the same vote and has
/// applied the same last entry; the reply is whether it does (a `bool`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct QuiesceRequest {
    pub vote: crate::Vote,
    pub last_log_id: Option<crate::LogId>,
}

/// The network factory of one group.
#[derive(Clone)]
pub struct Network {
    pub transport: Arc<dyn Transport>,
    pub group: u64,
    /// The runtime whose blocking pool makes the calls: one pool for the node, not
    /// one per group's runtime.
    pub io: tokio::runtime::Handle,
}

impl Network {
    /// Send one message to `target` at `addr` on the node's blocking pool; its
    /// reply bytes, or why there are none (also when `ttl` passed).
    pub(crate) async fn call(&self, target: NodeId, addr: String, kind: MsgKind, body: Vec<u8>, ttl: Duration) -> Result<Vec<u8>, String> {
        let (transport, group) = (self.transport.clone(), self.group);
        let call = self.io.spawn_blocking(move || transport.call(target, &addr, group, kind, body));
        match tokio::time::timeout(ttl, call).await {
            Err(_) => Err("timed out".into()),
            Ok(Err(join)) => Err(join.to_string()),
            Ok(Ok(res)) => res.map_err(|e| e.to_string()),
        }
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Peer;
    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Peer {
        Peer { transport: self.transport.clone(), group: self.group, target, addr: node.addr.clone(), io: self.io.clone() }
    }
}

/// The connection of one group to one peer.
pub struct Peer {
    transport: Arc<dyn Transport>,
    group: u64,
    target: NodeId,
    addr: String,
    io: tokio::runtime::Handle,
}

impl Peer {
    async fn call<Req: Serialize, Resp: DeserializeOwned, E: std::error::Error + DeserializeOwned>(
        &self,
        kind: MsgKind,
        req: &Req,
        ttl: Duration,
    ) -> Result<Resp, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>> {
        self.send(kind, encode(req), ttl).await
    }

    async fn send<Resp: DeserializeOwned, E: std::error::Error + DeserializeOwned>(
        &self,
        kind: MsgKind,
        body: Vec<u8>,
        ttl: Duration,
    ) -> Result<Resp, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>> {
        let (transport, addr, group, target) = (self.transport.clone(), self.addr.clone(), self.group, self.target);
        let call = self.io.spawn_blocking(move || transport.call(target, &addr, group, kind, body));
        let reply = match tokio::time::timeout(ttl, call).await {
            Err(_) => return Err(RPCError::Network(NetworkError::new(&std::io::Error::new(std::io::ErrorKind::TimedOut, "raft rpc timed out")))),
            Ok(Err(join)) => return Err(RPCError::Network(NetworkError::new(&std::io::Error::other(join.to_string())))),
            Ok(Ok(Err(TransportError::Unreachable(m)))) => {
                return Err(RPCError::Unreachable(Unreachable::new(&std::io::Error::new(std::io::ErrorKind::ConnectionRefused, m))))
            }
            Ok(Ok(Err(TransportError::Other(m)))) => return Err(RPCError::Network(NetworkError::new(&std::io::Error::other(m)))),
            Ok(Ok(Ok(bytes))) => bytes,
        };
        let res: Result<Resp, RaftError<NodeId, E>> =
            decode(&reply).map_err(|m| RPCError::Network(NetworkError::new(&std::io::Error::new(std::io::ErrorKind::InvalidData, m))))?;
        res.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for Peer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        if rpc.entries.is_empty() {
            return self.call(MsgKind::AppendEntries, &rpc, option.hard_ttl()).await;
        }
        let body = encode(&rpc);
        if body.len() > MAX_APPEND_BYTES && rpc.entries.len() > 1 {
            return Err(RPCError::PayloadTooLarge(PayloadTooLarge::new_entries_hint((rpc.entries.len() / 2) as u64)));
        }
        self.send(MsgKind::AppendEntries, body, option.hard_ttl()).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>> {
        self.call(MsgKind::InstallSnapshot, &rpc, option.hard_ttl()).await
    }

    async fn vote(&mut self, rpc: VoteRequest<NodeId>, option: RPCOption) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.call(MsgKind::Vote, &rpc, option.hard_ttl()).await
    }
}

/// Handle one received message with the group's `raft`; the reply bytes.
pub async fn serve(raft: &Raft, group: u64, kind: MsgKind, body: &[u8]) -> Result<Vec<u8>, String> {
    Ok(match kind {
        MsgKind::AppendEntries => {
            let req: AppendEntriesRequest<TypeConfig> = decode(body)?;
            encode(&raft.append_entries(req).await)
        }
        MsgKind::Vote => {
            let req: VoteRequest<NodeId> = decode(body)?;
            let summary = crate::trace_on().then(|| req.to_string());
            let resp = raft.vote(req).await;
            if let (Some(req), Ok(r)) = (summary, &resp) {
                tracing::debug!(target: "pinax_trace", group, req, granted = r.vote_granted, vote = %r.vote, last_log = ?r.last_log_id, "vote request");
            }
            encode(&resp)
        }
        MsgKind::InstallSnapshot => {
            let req: InstallSnapshotRequest<TypeConfig> = decode(body)?;
            encode(&raft.install_snapshot(req).await)
        }
        MsgKind::Quiesce => return Err("a quiesce message is served by its group (RaftGroup::serve)".into()),
    })
}
