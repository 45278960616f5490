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
//!
//! **DDL locks** (`Request::HoldDdlLock`): a DDL statement on another node's
//! PostgreSQL first has every SQL node take the PostgreSQL table locks it takes
//! itself (SHARE for CREATE INDEX, ACCESS EXCLUSIVE for a rewrite, ...), so that
//! no writer here works on those tables while it changes them. Here each lock is
//! a session of its own, in a transaction holding `LOCK TABLE`s (taking them waits
//! for this node's writers to finish, as PostgreSQL's own DDL would). The DDL's
//! log entry names its lock: applied in that session, then committed, so the
//! locks go in the same instant the change becomes visible here, and no writer
//! here ever works with the old definition after the DDL committed. A lock whose
//! entry never comes goes when its origin says so (`ReleaseDdlLock`, after the
//! log has been applied as far as it goes) or says it is no longer held
//! (`DdlLockHeld`, asked every second: a backend or node that died).

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
    /// DDL locks held here for other nodes' DDL transactions, by lock id.
    locks: Mutex<HashMap<u128, LockSession>>,
    /// The log has been applied through its end since the node started.
    caught_up: std::sync::atomic::AtomicBool,
}

/// A DDL lock held in this node's PostgreSQL: a session in a transaction that
/// holds the lock's table locks.
struct LockSession {
    conn: postgres::Client,
    database: String,
    origin_addr: String,
    /// Relations locked so far, with their modes.
    held: Vec<(String, String)>,
    /// When its origin last said it holds the lock (or when it was taken).
    confirmed: Instant,
}

/// How long a DDL lock is kept while its origin cannot be reached.
const ORIGIN_SILENT_FOR: Duration = Duration::from_secs(15);

/// The lock modes of `LOCK TABLE` (anything else in a request is refused).
const LOCK_MODES: [&str; 8] =
    ["ACCESS SHARE", "ROW SHARE", "ROW EXCLUSIVE", "SHARE UPDATE EXCLUSIVE", "SHARE", "SHARE ROW EXCLUSIVE", "EXCLUSIVE", "ACCESS EXCLUSIVE"];

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
        Replayer {
            node_id,
            rpc_addr,
            tls,
            pgdata,
            pg_port,
            superuser,
            state: Mutex::new(HashMap::new()),
            client: Mutex::new(None),
            socket,
            locks: Mutex::new(HashMap::new()),
            caught_up: std::sync::atomic::AtomicBool::new(false),
        }
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
        let session = if e.lock != 0 { self.locks.lock().remove(&e.lock) } else { None };
        let res = match session {
            // In the lock's session, which commits it: the locks go as the change shows.
            Some(mut s) => run_entry(&mut s.conn, e, true),
            None => match self.connection(conns, &e.database) {
                Ok(c) => run_entry(c, e, false),
                Err(f) => Err(f),
            },
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

    /// A replaying session of this node's PostgreSQL (as its superuser, over the
    /// Unix socket) in database `db`, with startup `options`.
    fn session(&self, db: &str, options: &str, application: &str) -> postgres::Config {
        let mut c = postgres::Config::new();
        c.host_path(&self.pgdata).port(self.pg_port).user(&self.superuser).dbname(db).options(options).application_name(application);
        c
    }

    fn connection<'a>(&self, conns: &'a mut HashMap<String, postgres::Client>, db: &str) -> std::result::Result<&'a mut postgres::Client, Failure> {
        if conns.get_mut(db).is_some_and(|c| c.is_closed()) {
            conns.remove(db);
        }
        if !conns.contains_key(db) {
            let c = self.session(db, "-c pinax.replaying=on -c lock_timeout=5s", "pinax ddl replay").connect(postgres::NoTls).map_err(classify)?;
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

/// Run entry `e` on connection `c`; `locked`: `c` is a DDL lock's session, in
/// its transaction, which the entry's statements join and which commits after
/// them (rolls back if they cannot apply now).
fn run_entry(c: &mut postgres::Client, e: &DdlEntry, locked: bool) -> std::result::Result<(), Failure> {
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
        if let (false, [only]) = (locked, e.statements.as_slice()) {
            // Alone, outside a transaction block (CREATE DATABASE cannot run in one).
            set(c, "pinax.replay_names", &only.encoded_names(), false)?;
            return c.batch_execute(&only.sql).map_err(classify);
        }
        if !locked {
            c.batch_execute("BEGIN").map_err(classify)?;
        }
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

impl Replayer {
    /// Take `lock`'s table locks in its session here (a new one for a lock not
    /// held yet), waiting until `deadline`. A relation this node does not have
    /// (created by the same transaction, or dropped here) is not locked: nobody
    /// here can write it. On failure the lock goes altogether (the DDL fails).
    pub fn hold_lock(&self, lock: &pinax_proto::DdlLock, deadline: Instant) -> std::result::Result<(), String> {
        match self.postgres() {
            (true, true) => {}
            _ => return Ok(()), // no PostgreSQL here (yet): no writer to hold back
        }
        if let Some((_, m)) = lock.relations.iter().find(|(_, m)| !LOCK_MODES.contains(&m.as_str())) {
            return Err(format!("unknown lock mode {m:?}"));
        }
        // The log first, as far as it goes: a relation created by earlier DDL is
        // then here to be locked (best effort: the lock is what matters).
        let _ = self.apply_upto(u64::MAX, Instant::now() + Duration::from_secs(2));
        let mut locks = self.locks.lock();
        let mut session = match locks.remove(&lock.lock) {
            Some(s) => s,
            None => {
                let conn = self.session(&lock.database, "-c pinax.replaying=on", "pinax ddl lock").connect(postgres::NoTls);
                let conn = match conn {
                    Ok(c) => c,
                    Err(e) if e.as_db_error().is_none() => {
                        // PostgreSQL is not running here: no writer to hold back. Its
                        // sessions, once it is back, wait until the log is applied.
                        self.caught_up.store(false, std::sync::atomic::Ordering::SeqCst);
                        tracing::warn!(lock = %format!("{:032x}", lock.lock), error = %e, "no PostgreSQL to take a DDL lock in; its sessions will wait for the DDL log");
                        return Ok(());
                    }
                    Err(e) => return Err(format!("connecting to PostgreSQL: {e}")),
                };
                LockSession { conn, database: lock.database.clone(), origin_addr: lock.origin_addr.clone(), held: Vec::new(), confirmed: Instant::now() }
            }
        };
        drop(locks);
        if session.database != lock.database {
            return Err(format!("DDL lock {} is held in database {}, not {}", lock.lock, session.database, lock.database));
        }
        let res = (|| -> std::result::Result<(), postgres::Error> {
            if session.held.is_empty() {
                session.conn.batch_execute("BEGIN")?;
            }
            for (rel, mode) in &lock.relations {
                if session.held.iter().any(|(r, m)| r == rel && m == mode) {
                    continue;
                }
                let left = deadline.saturating_duration_since(Instant::now()).as_millis().max(1);
                session.conn.batch_execute(&format!("SET LOCAL lock_timeout = {left}"))?;
                // PostgreSQL's own spelling of the name (quoted as needed), if it exists here.
                let row = session.conn.query_one("SELECT to_regclass($1)::text", &[rel])?;
                if let Some(name) = row.get::<_, Option<String>>(0) {
                    session.conn.batch_execute(&format!("LOCK TABLE {name} IN {mode} MODE"))?;
                }
                session.held.push((rel.clone(), mode.clone()));
            }
            Ok(())
        })();
        match res {
            Ok(()) => {
                self.locks.lock().insert(lock.lock, session);
                Ok(())
            }
            Err(e) => {
                let _ = session.conn.batch_execute("ROLLBACK");
                let why = e.as_db_error().map(|d| format!("{} ({})", d.message(), d.code().code())).unwrap_or_else(|| e.to_string());
                tracing::warn!(lock = %format!("{:032x}", lock.lock), origin = lock.origin, error = %why, "could not take a DDL lock");
                Err(why)
            }
        }
    }

    /// Let DDL lock `lock` go: the log is applied first, as far as it goes (an
    /// entry naming the lock then commits in its session; what is left rolls back).
    pub fn release_lock(&self, lock: u128) {
        if !self.locks.lock().contains_key(&lock) {
            return;
        }
        if let Err(e) = self.apply_upto(u64::MAX, Instant::now() + Duration::from_secs(10)) {
            tracing::warn!(error = %e, "applying the DDL log before letting a DDL lock go");
        }
        if let Some(mut s) = self.locks.lock().remove(&lock) {
            let _ = s.conn.batch_execute("ROLLBACK");
            tracing::info!(lock = %format!("{lock:032x}"), "DDL lock let go");
        }
    }

    /// Let go the DDL locks whose origin no longer holds them (asked once a
    /// second each), or could not be reached for [`ORIGIN_SILENT_FOR`].
    fn check_locks(&self) {
        let due: Vec<(u128, String, Instant)> = self
            .locks
            .lock()
            .iter()
            .filter(|(_, s)| s.confirmed.elapsed() >= Duration::from_secs(1))
            .map(|(id, s)| (*id, s.origin_addr.clone(), s.confirmed))
            .collect();
        for (id, addr, confirmed) in due {
            let opts = pinax_client::ClientOptions { tls: self.tls.clone(), ..Default::default() };
            let held = Client::connect_with(&addr, opts).and_then(|c| c.call(Request::DdlLockHeld { lock: id }));
            match held {
                Ok(Response::Held(true)) => {
                    if let Some(s) = self.locks.lock().get_mut(&id) {
                        s.confirmed = Instant::now();
                    }
                }
                Ok(_) => {
                    tracing::info!(lock = %format!("{id:032x}"), origin = %addr, "the origin of a DDL lock no longer holds it");
                    self.release_lock(id);
                }
                Err(e) if confirmed.elapsed() >= ORIGIN_SILENT_FOR => {
                    tracing::warn!(lock = %format!("{id:032x}"), origin = %addr, error = %e, "the origin of a DDL lock is out of reach; letting it go");
                    self.release_lock(id);
                }
                Err(_) => {}
            }
        }
    }
}

impl pinax_tserver::DdlApplier for Replayer {
    fn apply_upto(&self, upto: u64, deadline: Instant) -> std::result::Result<(), String> {
        let res = Replayer::apply_upto(self, upto, deadline);
        if res.is_err() && upto != u64::MAX {
            // The master says the log goes to `upto` and this node could not apply
            // it in time: it is behind, so new sessions wait until the background
            // replay has caught up (`DdlReady`) rather than miss a new table.
            self.caught_up.store(false, std::sync::atomic::Ordering::SeqCst);
        }
        res
    }
    fn hold_lock(&self, lock: &pinax_proto::DdlLock, deadline: Instant) -> std::result::Result<(), String> {
        Replayer::hold_lock(self, lock, deadline)
    }
    fn release_lock(&self, lock: u128) {
        Replayer::release_lock(self, lock)
    }
    fn caught_up(&self) -> bool {
        self.caught_up.load(std::sync::atomic::Ordering::SeqCst)
    }
    fn applied(&self) -> u64 {
        match self.postgres() {
            (true, true) => Replayer::applied(self),
            // No PostgreSQL here (nothing to apply), or not set up yet (its
            // setup's sessions do not wait).
            _ => u64::MAX,
        }
    }
}

/// Catch up with the log every second (a node that was down, or joined later).
pub fn spawn_catch_up(r: std::sync::Arc<Replayer>, stop: std::sync::Arc<std::sync::atomic::AtomicBool>) -> Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("ddl-replay".into())
        .spawn(move || {
            let mut last_error = String::new();
            let mut set_up = false;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                if r.postgres() != (true, true) {
                    // No PostgreSQL here, or not set up yet: its setup's own sessions
                    // do not wait; once set up, sessions wait for the log from its start.
                    r.caught_up.store(true, std::sync::atomic::Ordering::SeqCst);
                    set_up = false;
                    std::thread::sleep(Duration::from_secs(1));
                    continue;
                }
                if !set_up {
                    set_up = true;
                    r.caught_up.store(false, std::sync::atomic::Ordering::SeqCst);
                }
                match r.apply_upto(u64::MAX, Instant::now() + Duration::from_secs(30)) {
                    Ok(()) => {
                        last_error.clear();
                        r.caught_up.store(true, std::sync::atomic::Ordering::SeqCst);
                    }
                    Err(e) if e != last_error => {
                        tracing::warn!(error = %e, "DDL log replay stopped; retrying");
                        last_error = e;
                    }
                    Err(_) => {}
                }
                r.check_locks();
                std::thread::sleep(Duration::from_secs(1));
            }
        })
        .map_err(|e| anyhow!("starting the DDL replay thread: {e}"))
}
