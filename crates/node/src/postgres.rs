//! The PostgreSQL 15 server next to the node daemon.
//!
//! `pinax start` creates (first time) and starts a PostgreSQL cluster in
//! `<data-dir>/pg`: initdb (UTF-8, C.UTF-8 locale so text keys sort by bytes), the
//! `pinax` extension preloaded and installed in template1 and postgres,
//! `default_table_access_method = pinax`, and a role and database named after the
//! invoking OS user. A secure node (the default) takes TCP clients with SCRAM
//! passwords only, over TLS with the node's certificate (`sslmode=verify-full`
//! against the cluster's `ca.crt` works) except on loopback; the local socket by
//! peer authentication; the superuser's password is generated once and kept in
//! `<data-dir>/credentials` (a libpq password file, 0600). pg_hba.conf and
//! pg_ident.conf are rewritten on every start. An `--insecure` node trusts
//! loopback clients, as before. As root, PostgreSQL runs as the `postgres` OS user (PostgreSQL
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

/// As root: give file `f` to PostgreSQL's OS user (its server reads it).
fn chown_to_pg(f: &Path) -> Result<()> {
    if is_root() {
        let mut c = Command::new("chown");
        c.arg(format!("{PG_OS_USER}:{PG_OS_USER}")).arg(f);
        run(c, "chown")?;
    }
    Ok(())
}

/// As root, PostgreSQL's OS user (None: not root, PostgreSQL runs as this
/// process's user; or no such user).
pub(crate) fn pg_os_user() -> Result<Option<nix::unistd::User>> {
    if !is_root() {
        return Ok(None);
    }
    Ok(nix::unistd::User::from_name(PG_OS_USER)?)
}

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
pub(crate) fn os_user() -> String {
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

/// psql as the superuser on database `db` of the server of `dir`, through its
/// Unix socket, stopping at the first error.
fn psql_command(dir: &Path, port: u16, db: &str) -> Command {
    let mut c = pg_command("psql");
    c.arg("-X").arg("-q").arg("-v").arg("ON_ERROR_STOP=1").arg("-h").arg(pgdata(dir)).arg("-p").arg(port.to_string());
    c.arg("-U").arg(superuser()).arg("-d").arg(db);
    c
}

fn psql(dir: &Path, port: u16, db: &str, sql: &str) -> Result<String> {
    let mut c = psql_command(dir, port, db);
    c.arg("-tA").arg("-c").arg(sql);
    // Every node sets itself up: its set-up DDL is not for the other nodes.
    c.env("PGOPTIONS", "-c pinax.replicate_ddl=off");
    run(c, &format!("psql ({sql})"))
}

/// Create (first time) and start PostgreSQL on `port` of `listen` (its
/// `listen_addresses`), using the node at `rpc_addr`.
/// How a secure node's PostgreSQL takes clients: TLS with the node's
/// certificate, passwords (SCRAM) for every TCP connection.
pub struct Secure<'a> {
    /// The certs directory: `backend.crt`/`.key` are PostgreSQL's server
    /// certificate (signed by the cluster CA, naming the node's addresses) and
    /// what its backends present to other nodes.
    pub certs: &'a Path,
    /// A credentials file (the format of [`credentials_file`]) whose superuser
    /// password this node takes the first time (`pinax cluster start` gives its
    /// nodes one); None: a generated one.
    pub password_from: Option<&'a Path>,
}

/// `<data-dir>/credentials`: the superuser's password, in libpq's password file
/// format (`PGPASSFILE=<it> psql …`), mode 0600.
pub fn credentials_file(dir: &Path) -> PathBuf {
    dir.join("credentials")
}

/// The password in a credentials file (its first entry).
pub fn read_password(file: &Path) -> Result<String> {
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    text.lines()
        .find(|l| !l.starts_with('#') && !l.trim().is_empty())
        .and_then(|l| l.splitn(5, ':').nth(4))
        .map(str::to_string)
        .with_context(|| format!("{} holds no password", file.display()))
}

/// A new password: 24 characters of [A-Za-z0-9] from the OS's CSPRNG (~143 bits).
pub fn generate_password() -> String {
    use rand::Rng;
    const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rngs::OsRng;
    (0..24).map(|_| CHARS[rng.gen_range(0..CHARS.len())] as char).collect()
}

/// Write credentials file `file` for `users` (mode 0600).
pub fn write_credentials(file: &Path, users: &[String], password: &str) -> Result<()> {
    let mut text = String::from("# Pinax: PostgreSQL superuser password (libpq password file: PGPASSFILE=this-file psql -h HOST -p PORT -U USER)\n");
    for u in users {
        text.push_str(&format!("*:*:*:{}:{password}\n", u.replace('\\', "\\\\").replace(':', "\\:")));
    }
    crate::certs::write_file(file, &text, 0o600)
}

/// pg_hba.conf and pg_ident.conf, rewritten on every start. Secure: the local
/// socket by peer (an OS user as the role of its name; root, whose daemon
/// replays DDL, also as the superuser), TCP by SCRAM password: over TLS from
/// anywhere, without TLS only on loopback (nothing but this machine sees those
/// bytes, and SCRAM sends no password). A non-loopback connection without TLS
/// matches no line: refused. Insecure: today's trust, on loopback only.
fn write_auth(d: &Path, secure: bool) -> Result<()> {
    let hba = if secure {
        "# Written by `pinax start` on every start (secure node).\n\
         local   all all              peer map=pinax\n\
         host    all all 127.0.0.1/32 scram-sha-256\n\
         host    all all ::1/128      scram-sha-256\n\
         hostssl all all 0.0.0.0/0    scram-sha-256\n\
         hostssl all all ::/0         scram-sha-256\n"
    } else {
        "# Written by `pinax start` on every start (--insecure node: no passwords, loopback only).\n\
         local   all all              trust\n\
         host    all all 127.0.0.1/32 trust\n\
         host    all all ::1/128      trust\n"
    };
    let mut ident = String::from("# Written by `pinax start`: map=pinax of pg_hba.conf.\n");
    if is_root() {
        ident.push_str(&format!("pinax root {}\n", superuser()));
    }
    ident.push_str("pinax /^(.*)$ \\1\n");
    for (name, text) in [("pg_hba.conf", hba.to_string()), ("pg_ident.conf", ident)] {
        let f = d.join(name);
        std::fs::write(&f, text).with_context(|| format!("writing {}", f.display()))?;
        chown_to_pg(&f)?;
    }
    Ok(())
}

/// Create (first time) and start PostgreSQL on `port` of `listen` (its
/// `listen_addresses`), using the node at `rpc_addr`; `secure`: TLS and
/// passwords (None: an `--insecure` node).
pub fn start(dir: &Path, port: u16, listen: &str, rpc_addr: &str, secure: Option<&Secure>) -> Result<()> {
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
    if let Some(sec) = secure {
        let c = sec.certs.display();
        settings.push_str(&format!(
            "pinax.tls_dir = '{c}'\nssl = on\nssl_cert_file = '{c}/{}'\nssl_key_file = '{c}/{}'\npassword_encryption = 'scram-sha-256'\n",
            crate::certs::BACKEND_CERT,
            crate::certs::BACKEND_KEY
        ));
    }
    write_auth(&d, secure.is_some())?;
    let pinax_conf = d.join("pinax.conf");
    std::fs::write(&pinax_conf, settings).context("writing pinax.conf")?;
    chown_to_pg(&pinax_conf)?;
    if running(dir) {
        // New settings, pg_hba.conf and certificates (PostgreSQL reads them on reload).
        let mut c = pg_command("pg_ctl");
        c.arg("-D").arg(&d).arg("reload");
        run(c, "pg_ctl reload")?;
    } else {
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
    // Every session waits, as it starts, until the node has applied the DDL log
    // (the extension's `pinax.session_ready`; idempotent, so also on older data).
    psql(dir, port, "postgres", "ALTER ROLE ALL SET pinax.session_ready = on")?;
    if let Some(sec) = secure {
        set_password(dir, port, sec)?;
    }
    Ok(())
}

/// The first secure start (of a new node, or of one from before passwords):
/// give the superuser (and the invoking OS user's role) the cluster's password
/// or a new one, and keep it in [`credentials_file`]. Later starts leave it.
fn set_password(dir: &Path, port: u16, sec: &Secure) -> Result<()> {
    let file = credentials_file(dir);
    if file.exists() {
        return Ok(());
    }
    let password = match sec.password_from {
        Some(f) => read_password(f)?,
        None => generate_password(),
    };
    let mut users = vec![superuser()];
    if os_user() != superuser() {
        users.push(os_user());
    }
    // Sent on stdin, not the command line (which other users can read); stored
    // by PostgreSQL as a SCRAM verifier.
    let mut sql = String::from("SET pinax.replicate_ddl = off;\n");
    for u in &users {
        sql.push_str(&format!("ALTER ROLE \"{}\" PASSWORD '{password}';\n", u.replace('"', "\"\"")));
    }
    psql_stdin(dir, port, "postgres", &sql)?;
    write_credentials(&file, &users, &password)
}

/// [`psql`] with the statements on standard input.
fn psql_stdin(dir: &Path, port: u16, db: &str, sql: &str) -> Result<()> {
    use std::io::Write;
    let mut c = psql_command(dir, port, db);
    c.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    let mut child = c.spawn().context("running psql")?;
    child.stdin.take().context("psql's stdin")?.write_all(sql.as_bytes()).context("writing to psql")?;
    let out = child.wait_with_output().context("running psql")?;
    if !out.status.success() {
        bail!("psql failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

/// Have PostgreSQL re-read its configuration files and its TLS certificate
/// (`pg_ctl reload`), if it runs.
pub fn reload(dir: &Path) -> Result<bool> {
    if !running(dir) {
        return Ok(false);
    }
    let mut c = pg_command("pg_ctl");
    c.arg("-D").arg(pgdata(dir)).arg("reload");
    run(c, "pg_ctl reload")?;
    Ok(true)
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
