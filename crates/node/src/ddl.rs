//! Replaying the cluster's DDL log into this node's PostgreSQL.
//!
//! Every SQL node's PostgreSQL publishes its committed DDL to the master's log
//! (the extension's `ddl.rs`). This node applies the entries other nodes logged,
//! in log order: when the master asks (`Request::ApplyDdl`, while the origin's
//! COMMIT waits) and every second in the background, so a node that was down or
//! joined later catches up from where it stopped.
//!
//! Each entry runs in the origin's database, as the origin's role, with its
//! search_path, in a session with `pinax.replaying = on` (the extension then
//! names the origin's storage tables instead of creating storage and drops writes).
//! A transaction's statements replay in one transaction, each under a savepoint: a
//! statement that fails because of what this node has or lacks (a temporary table
//! of the origin's session, an object already there after a crash between replay
//! and bookkeeping) is skipped with a log line, the others apply. Errors that may
//! pass (connection, lock timeout, the storage being unavailable) stop the replay;
//! it is tried again.
//!
//! Progress is the last applied sequence number, in `<pgdata>/pinax.ddl_applied`:
//! next to the catalogs it describes, so a re-created PostgreSQL starts over.

use anyhow::{anyhow, Result};
use parking_lot::Mutex;
use pinax_client::Client;
use pinax_proto::{DdlEntry, Request, Response};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Entries fetched from the master per request.
const BATCH: u32 = 100;

pub struct Replayer {
    node_id: u64,
    rpc_addr: String,
    tls: Option<std::sync::Arc<pinax_proto::tls::TlsConfig>>,
    pgdata: PathBuf,
    pg_port: u16,
    superuser: String,
    /// One replay at a time: (open connections per database).
    state: Mutex<HashMap<String, postgres::Client>>,
    /// The client of this node, kept between replays (a new one each second
    /// cost a TCP connection and, secure, a TLS handshake per second).
    client: Mutex<Option<Client>>,
    /// The node's Unix socket, which the client uses when it can.
    socket: Option<PathBuf>,
}

/// Why a replay stopped: retry later, or the entry (statement) cannot apply here.
enum Failure {
    Retry(String),
    Skip(String),
}

impl Replayer {
    pub fn new(
        node_id: u64,
        rpc_addr: String,
        tls: Option<std::sync::Arc<pinax_proto::tls::TlsConfig>>,
        pgdata: PathBuf,
        pg_port: u16,
        superuser: String,
    ) -> Self {
        let socket = pgdata.parent().and_then(crate::socket_file);
        Replayer { node_id, rpc_addr, tls, pgdata, pg_port, superuser, state: Mutex::new(HashMap::new()), client: Mutex::new(None), socket }
    }

    /// This node's client: the one kept, else a new one.
    fn client(&self) -> std::result::Result<Client, String> {
        let mut kept = self.client.lock();
        if let Some(c) = kept.as_ref() {
            return Ok(c.clone());
        }
        let opts =
            pinax_client::ClientOptions { tls: self.tls.clone(), local_socket: self.socket.clone().map(|p| (self.rpc_addr.clone(), p)), ..Default::default() };
        let c = Client::connect_with(&self.rpc_addr, opts).map_err(|e| e.to_string())?;
        *kept = Some(c.clone());
        Ok(c)
    }

    fn applied_file(&self) -> PathBuf {
        self.pgdata.join("pinax.ddl_applied")
    }

    fn applied(&self) -> u64 {
        std::fs::read_to_string(self.applied_file()).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
    }

    fn set_applied(&self, seq: u64) -> Result<()> {
        let tmp = self.pgdata.join("pinax.ddl_applied.tmp");
        std::fs::write(&tmp, seq.to_string())?;
        std::fs::File::open(&tmp)?.sync_all()?;
        std::fs::rename(&tmp, self.applied_file())?;
        Ok(())
    }

    /// Whether this node has a PostgreSQL at all, and whether it is set up.
    fn postgres(&self) -> (bool, bool) {
        (self.pgdata.join("PG_VERSION").exists(), self.pgdata.join("pinax.initialized").exists())
    }

    /// Apply the log through `upto` (all of it: `u64::MAX`), giving up at `deadline`.
    pub fn apply_upto(&self, upto: u64, deadline: Instant) -> std::result::Result<(), String> {
        match self.postgres() {
            (false, _) => return Ok(()), // not a SQL node
            (true, false) => return Err("PostgreSQL is not set up on this node yet".into()),
            (true, true) => {}
        }
        let Some(mut conns) = self.state.try_lock_until(deadline) else {
            return Err("another replay of the DDL log is still running".into());
        };
        let mut applied = self.applied();
        let client = self.client()?;
        while applied < upto {
            let entries = match client.call(Request::ReadDdl { after: applied, max: BATCH }) {
                Ok(Response::Ddl(e)) => e,
                Ok(other) => return Err(format!("unexpected answer to ReadDdl: {other:?}")),
                Err(e) => return Err(format!("reading the DDL log: {e}")),
            };
            if entries.is_empty() {
                if upto == u64::MAX {
                    return Ok(());
                }
                return Err(format!("the DDL log ends before entry {upto}"));
            }
            for e in entries {
                if e.origin != self.node_id {
                    if Instant::now() > deadline {
                        return Err(format!("DDL log entry {} not applied in time", e.seq));
                    }
                    self.apply(&mut conns, &e)?;
                }
                applied = e.seq;
                self.set_applied(applied).map_err(|e| format!("recording DDL progress: {e}"))?;
                if applied >= upto {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Apply one entry; an error means: try again later.
    fn apply(&self, conns: &mut HashMap<String, postgres::Client>, e: &DdlEntry) -> std::result::Result<(), String> {
        let res = match self.connection(conns, &e.database) {
            Ok(c) => run_entry(c, e),
            Err(f) => Err(f),
        };
        match res {
            Ok(()) => {
                tracing::info!(seq = e.seq, origin = e.origin, statements = e.statements.len(), "applied DDL");
                Ok(())
            }
            Err(Failure::Skip(why)) => {
                tracing::warn!(seq = e.seq, origin = e.origin, database = %e.database, error = %why, "DDL log entry skipped: it cannot apply on this node");
                Ok(())
            }
            Err(Failure::Retry(why)) => {
                conns.remove(&e.database);
                Err(format!("DDL log entry {}: {why}", e.seq))
            }
        }
    }

    fn connection<'a>(&self, conns: &'a mut HashMap<String, postgres::Client>, db: &str) -> std::result::Result<&'a mut postgres::Client, Failure> {
        if conns.get_mut(db).is_some_and(|c| c.is_closed()) {
            conns.remove(db);
        }
        if !conns.contains_key(db) {
            let c = postgres::Config::new()
                .host_path(&self.pgdata)
                .port(self.pg_port)
                .user(&self.superuser)
                .dbname(db)
                .options("-c pinax.replaying=on -c lock_timeout=5s")
                .application_name("pinax ddl replay")
                .connect(postgres::NoTls)
                .map_err(classify)?;
            conns.insert(db.to_string(), c);
        }
        conns.get_mut(db).ok_or_else(|| Failure::Retry("no connection".into()))
    }
}

fn quote_ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

/// SQLSTATEs after which the same replay may succeed later.
fn transient(code: &str) -> bool {
    code.starts_with("08") // connection
        || code.starts_with("53") // insufficient resources
        || code.starts_with("57") // operator intervention, cannot connect now (57P03: storage unavailable)
        || code.starts_with("40") // serialization failure, deadlock
        || code == "55P03" // lock not available (lock_timeout)
        || code == "55006" // object in use (DROP DATABASE with sessions)
}

fn classify(e: postgres::Error) -> Failure {
    match e.as_db_error() {
        Some(db) if db.code().code() == "3D000" => Failure::Skip(db.message().to_string()), // database gone
        Some(db) if transient(db.code().code()) => Failure::Retry(format!("{} ({})", db.message(), db.code().code())),
        Some(db) => Failure::Skip(format!("{} ({})", db.message(), db.code().code())),
        None => Failure::Retry(e.to_string()),
    }
}

/// Run entry `e` on connection `c`.
fn run_entry(c: &mut postgres::Client, e: &DdlEntry) -> std::result::Result<(), Failure> {
    let set = |c: &mut postgres::Client, name: &str, value: &str, local: bool| {
        c.execute("SELECT set_config($1, $2, $3)", &[&name, &value, &local]).map(|_| ()).map_err(classify)
    };
    // As the origin's role, if this node has it (else as the superuser).
    let role_exists = c.query_opt("SELECT 1 FROM pg_roles WHERE rolname = $1", &[&e.user]).map_err(classify)?.is_some();
    if role_exists {
        c.batch_execute(&format!("SET SESSION AUTHORIZATION {}", quote_ident(&e.user))).map_err(classify)?;
    }
    let res = (|| {
        set(c, "search_path", &e.search_path, false)?;
        if let [only] = e.statements.as_slice() {
            // Alone, outside a transaction block (CREATE DATABASE cannot run in one).
            set(c, "pinax.replay_names", &only.encoded_names(), false)?;
            return c.batch_execute(&only.sql).map_err(classify);
        }
        c.batch_execute("BEGIN").map_err(classify)?;
        for st in &e.statements {
            c.batch_execute("SAVEPOINT pinax_replay").map_err(classify)?;
            set(c, "pinax.replay_names", &st.encoded_names(), true)?;
            match c.batch_execute(&st.sql).map_err(classify) {
                Ok(()) => c.batch_execute("RELEASE SAVEPOINT pinax_replay").map_err(classify)?,
                Err(Failure::Skip(why)) => {
                    tracing::warn!(seq = e.seq, statement = %st.sql, error = %why, "replayed DDL statement skipped");
                    c.batch_execute("ROLLBACK TO SAVEPOINT pinax_replay; RELEASE SAVEPOINT pinax_replay").map_err(classify)?;
                }
                Err(f) => {
                    let _ = c.batch_execute("ROLLBACK");
                    return Err(f);
                }
            }
        }
        c.batch_execute("COMMIT").map_err(classify)
    })();
    let reset = c.batch_execute("RESET pinax.replay_names; RESET SESSION AUTHORIZATION; RESET search_path").map_err(classify);
    res.and(reset)
}

impl pinax_tserver::DdlApplier for Replayer {
    fn apply_upto(&self, upto: u64, deadline: Instant) -> std::result::Result<(), String> {
        Replayer::apply_upto(self, upto, deadline)
    }
}

/// Catch up with the log every second (a node that was down, or joined later).
pub fn spawn_catch_up(r: std::sync::Arc<Replayer>, stop: std::sync::Arc<std::sync::atomic::AtomicBool>) -> Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("ddl-replay".into())
        .spawn(move || {
            let mut last_error = String::new();
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                if r.postgres() != (true, true) {
                    // No PostgreSQL here, or not set up yet.
                    std::thread::sleep(Duration::from_secs(1));
                    continue;
                }
                match r.apply_upto(u64::MAX, Instant::now() + Duration::from_secs(30)) {
                    Ok(()) => last_error.clear(),
                    Err(e) if e != last_error => {
                        tracing::warn!(error = %e, "DDL log replay stopped; retrying");
                        last_error = e;
                    }
                    Err(_) => {}
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        })
        .map_err(|e| anyhow!("starting the DDL replay thread: {e}"))
}
