//! The PostgreSQL 15 server next to the node daemon.
//!
//! `pinax start` creates (first time) and starts a PostgreSQL cluster in
//! `<data-dir>/pg`: initdb (UTF-8, C.UTF-8 locale so text keys sort by bytes, trust
//! authentication on 127.0.0.1), the `pinax` extension preloaded and installed in
//! template1 and postgres, `default_table_access_method = pinax`, and a role and
//! database named after the invoking OS user so that plain `psql -h 127.0.0.1 -p
//! 5433` works. As root, PostgreSQL runs as the `postgres` OS user (PostgreSQL
//! refuses to run as root). `pinax stop` stops it before the daemon.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where PostgreSQL 15's programs are (`PINAX_PG_BINDIR` overrides).
pub fn bindir() -> PathBuf {
    if let Some(d) = std::env::var_os("PINAX_PG_BINDIR") {
        return PathBuf::from(d);
    }
    PathBuf::from("/usr/lib/postgresql/15/bin")
}

pub fn pgdata(dir: &Path) -> PathBuf {
    dir.join("pg")
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// The OS user PostgreSQL runs as when we are root.
pub(crate) const PG_OS_USER: &str = "postgres";

/// A command for PostgreSQL program `prog`, run as the PostgreSQL OS user.
fn pg_command(prog: &str) -> Command {
    let path = bindir().join(prog);
    if is_root() {
        let mut c = Command::new("runuser");
        c.arg("-u").arg(PG_OS_USER).arg("--").arg(path);
        c
    } else {
        Command::new(path)
    }
}

fn run(mut c: Command, what: &str) -> Result<String> {
    let out = c.output().with_context(|| format!("running {what}"))?;
    if !out.status.success() {
        bail!("{what} failed: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The invoking OS user's name.
fn os_user() -> String {
    std::env::var("USER").ok().filter(|s| !s.is_empty()).unwrap_or_else(|| if is_root() { "root".into() } else { "postgres".into() })
}

/// The PostgreSQL superuser created by initdb.
pub fn superuser() -> String {
    if is_root() {
        PG_OS_USER.into()
    } else {
        os_user()
    }
}

pub fn running(dir: &Path) -> bool {
    let d = pgdata(dir);
    if !d.join("PG_VERSION").exists() {
        return false;
    }
    let mut c = pg_command("pg_ctl");
    c.arg("-D").arg(&d).arg("status");
    c.output().map(|o| o.status.success()).unwrap_or(false)
}

fn psql(dir: &Path, port: u16, db: &str, sql: &str) -> Result<String> {
    let mut c = pg_command("psql");
    c.arg("-X").arg("-q").arg("-tA").arg("-v").arg("ON_ERROR_STOP=1").arg("-h").arg(pgdata(dir)).arg("-p").arg(port.to_string());
    c.arg("-U").arg(superuser()).arg("-d").arg(db).arg("-c").arg(sql);
    // Every node sets itself up: its set-up DDL is not for the other nodes.
    c.env("PGOPTIONS", "-c pinax.replicate_ddl=off");
    run(c, &format!("psql ({sql})"))
}

/// Create (first time) and start PostgreSQL on `port` of `listen` (its
/// `listen_addresses`), using the node at `rpc_addr`.
/// `tls_dir`: the certs directory whose `backend.crt`/`.key` the backends present
/// to other nodes (None: an `--insecure` node).
pub fn start(dir: &Path, port: u16, listen: &str, rpc_addr: &str, tls_dir: Option<&Path>) -> Result<()> {
    let d = pgdata(dir);
    let fresh = !d.join("PG_VERSION").exists();
    if fresh {
        std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
        if is_root() {
            let mut c = Command::new("chown");
            c.arg("-R").arg(format!("{PG_OS_USER}:{PG_OS_USER}")).arg(&d);
            run(c, "chown")?;
            let mut t = Command::new("runuser");
            t.arg("-u").arg(PG_OS_USER).arg("--").arg("test").arg("-w").arg(&d);
            if !t.status().map(|s| s.success()).unwrap_or(false) {
                bail!(
                    "PostgreSQL runs as OS user {PG_OS_USER}, which cannot reach {}; use a --data-dir it can reach (e.g. under /var/lib or /tmp)",
                    d.display()
                );
            }
        }
        let mut c = pg_command("initdb");
        c.arg("-D").arg(&d).arg("--auth=trust").arg("--encoding=UTF8").arg("--locale=C.UTF-8").arg("-U").arg(superuser());
        run(c, "initdb")?;
        let conf = d.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf).context("reading postgresql.conf")?;
        text.push_str("\n# Pinax settings (rewritten by `pinax start`)\ninclude_if_exists = 'pinax.conf'\n");
        std::fs::write(&conf, text).context("writing postgresql.conf")?;
    }
    let mut settings = format!(
        "listen_addresses = '{listen}'\nport = {port}\nunix_socket_directories = '{}'\nshared_preload_libraries = 'pinax'\ndefault_table_access_method = 'pinax'\npinax.address = '{rpc_addr}'\nlogging_collector = off\n",
        d.display()
    );
    // Backends reach this node through its Unix socket (see `crate::socket_file`).
    if let Some(sock) = crate::socket_file(dir) {
        settings.push_str(&format!("pinax.socket = '{}'\n", sock.display()));
    }
    if let Some(t) = tls_dir {
        settings.push_str(&format!("pinax.tls_dir = '{}'\n", t.display()));
    }
    let pinax_conf = d.join("pinax.conf");
    std::fs::write(&pinax_conf, settings).context("writing pinax.conf")?;
    if is_root() {
        let mut c = Command::new("chown");
        c.arg(format!("{PG_OS_USER}:{PG_OS_USER}")).arg(&pinax_conf);
        run(c, "chown")?;
    }
    if !running(dir) {
        let mut c = pg_command("pg_ctl");
        c.arg("-D").arg(&d).arg("-l").arg(d.join("postgres.log")).arg("-w").arg("-t").arg("120").arg("start");
        // Backtraces would end up in SQL error details.
        c.env_remove("RUST_BACKTRACE").env_remove("RUST_LIB_BACKTRACE");
        run(c, "pg_ctl start").with_context(|| format!("see {}", d.join("postgres.log").display()))?;
    }
    if fresh || !d.join("pinax.initialized").exists() {
        for db in ["template1", "postgres"] {
            psql(dir, port, db, "CREATE EXTENSION IF NOT EXISTS pinax")?;
        }
        let me = os_user();
        if me != superuser() {
            let q = me.replace('"', "\"\"");
            let lit = me.replace('\'', "''");
            psql(
                dir,
                port,
                "postgres",
                &format!("DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{lit}') THEN CREATE ROLE \"{q}\" SUPERUSER LOGIN; END IF; END$$"),
            )?;
            let exists = psql(dir, port, "postgres", &format!("SELECT 1 FROM pg_database WHERE datname = '{lit}'"))?;
            if exists.trim() != "1" {
                psql(dir, port, "postgres", &format!("CREATE DATABASE \"{q}\" OWNER \"{q}\""))?;
            }
        }
        std::fs::write(d.join("pinax.initialized"), "1")?;
    }
    Ok(())
}

/// Stop PostgreSQL (fast shutdown: clients are disconnected, data is safe).
pub fn stop(dir: &Path) -> Result<bool> {
    if !running(dir) {
        return Ok(false);
    }
    let mut c = pg_command("pg_ctl");
    c.arg("-D").arg(pgdata(dir)).arg("-m").arg("fast").arg("-w").arg("-t").arg("120").arg("stop");
    run(c, "pg_ctl stop")?;
    Ok(true)
}
