//! pinax-tserver: the tablet server — a node's tablet replicas (each a Raft group,
//! [`replica`]), its replicas of status tablets (also Raft groups: one per node,
//! keeping the records of the transactions begun through it), its replica of the
//! master group (the catalog; the group's leader is the master: replica placement,
//! moving replicas off dead nodes), the RPC service and background work.
//!
//! Key types:
//! - [`Node`]: owns everything a node serves; [`Node::handle`] executes one
//!   [`pinax_proto::Request`].
//! - [`EngineFactory`]: how a node opens one engine per tablet (a view of its disk's
//!   shared RocksDB store in production,
//!   memory in tests): [`RocksFactory`], [`MemFactory`].
//! - [`server::RpcServer`]: thread-per-connection framed RPC over TCP.
//!
//! Request flow: `server` reads a frame → takes in the sender's hybrid time →
//! `Node::handle` → tablet / status tablet / catalog → response with the node's time.
//! A request on a status record whose status tablet another node leads is passed
//! to that leader (`Request::Forwarded`).
//! Background ([`Node::tick`]): for each status tablet led here, expire abandoned
//! transactions, apply or remove intents of decided ones, forget old records; sweep
//! intents; advance the MVCC history cutoff; on the master, place replicas and create
//! missing status tablets. What to place where is decided by the pure
//! `pinax_master::placement`; the node gathers its inputs and carries the decisions out.
//!
//! Invariants: a request never panics the daemon (panics are caught per request and
//! reported as internal errors); a committed transaction's intents are applied
//! eventually even across restarts and leader changes (the status tablet keeps it
//! unresolved until all participants confirm).
//! Start at [`Node::handle`].

pub mod factory;
pub mod node;
pub mod replica;
pub mod server;

pub use factory::{EngineFactory, MemFactory, RocksFactory};
pub use node::{DdlApplier, JoinRefusal, JoinSigner, Node, NodeConfig};
pub use server::{RpcServer, ServerLimits};
