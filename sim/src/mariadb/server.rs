//! The private server's process: its programs, data directory, port and sizing, starting,
//! killing and restarting it, and running its command-line client as root or as the reader.

use super::BUFFER_POOL;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use super::mirror::mirror_sql;
use super::schema::setup_sql;
use super::{DATABASE, READER, Schema};
use crate::world::World;

/// How long a starting server may take to answer a ping.
const START_DEADLINE: Duration = Duration::from_secs(30);
/// How often a starting server is pinged.
const PING_INTERVAL: Duration = Duration::from_millis(50);
/// A free port can be taken by another process between probing and binding; a start whose
/// bind failed is tried again on a new port this many times in all.
const START_ATTEMPTS: usize = 5;

/// How long a starting Galera node may take to say `wsrep_ready = ON` after it answers.
const GALERA_READY_DEADLINE: Duration = Duration::from_secs(30);

/// The `wsrep_cluster_name` of a [`PrivateMariaDb::start_galera`] server.
pub const GALERA_CLUSTER: &str = "cksdrift-test";
/// Its `wsrep_node_name`.
pub const GALERA_NODE: &str = "cksdrift-node1";

/// Where the Galera provider library is: Debian's `galera-4`, then the RPM distributions'.
const GALERA_PROVIDERS: [&str; 2] = [
    "/usr/lib/galera/libgalera_smm.so",
    "/usr/lib64/galera-4/libgalera_smm.so",
];

/// What makes a server a single-node Galera cluster: the provider and its group
/// communication (gcomm) port, kept across [`PrivateMariaDb::restart`].
#[derive(Debug, Clone)]
struct Galera {
    provider: PathBuf,
    port: u16,
}

/// A MariaDB server of this process's own, with database [`DATABASE`], the three tables of
/// the chosen [`Schema`] and the read-only account [`READER`]. Dropping it kills the server
/// and deletes its data.
pub struct PrivateMariaDb {
    schema: Schema,
    tls: Option<ServerTls>,
    programs: Programs,
    /// A single-node Galera cluster (`wsrep_on = ON`) rather than a lone server.
    galera: Option<Galera>,
    port: u16,
    password: String,
    server: Option<Child>,
    /// What the last mirror wrote, while nothing else has written since.
    /// Data, socket and log; deleted when dropped, after `drop` has reaped the server.
    dir: TempDir,
}

/// The certificate and key a server offers TLS with (PEM files), e.g. made by `openssl` in
/// a test.
#[derive(Debug, Clone)]
pub struct ServerTls {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl PrivateMariaDb {
    /// Initialises a data directory, starts a server on a free loopback port, waits until it
    /// answers and creates the database, the tables and the read-only account (with a random
    /// password), granted exactly `SELECT` on [`READABLE_TABLES`](super::READABLE_TABLES).
    ///
    /// # Panics
    /// If MariaDB is not installed, or the server does not start within 30 s (the message
    /// carries its error log).
    pub fn start(schema: Schema) -> PrivateMariaDb {
        PrivateMariaDb::start_configured(schema, None, None)
    }

    /// Like [`PrivateMariaDb::start`], but the server is the one node of a Galera cluster
    /// ([`GALERA_CLUSTER`], node [`GALERA_NODE`], `wsrep_on = ON`), its group communication
    /// on a free loopback port of its own; it is returned once `wsrep_ready` is `ON`.
    ///
    /// # Panics
    /// As [`PrivateMariaDb::start`], and if the Galera provider (Debian: the `galera-4`
    /// package) is not installed.
    pub fn start_galera(schema: Schema) -> PrivateMariaDb {
        let provider = GALERA_PROVIDERS
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
            .unwrap_or_else(|| {
                panic!(
                    "none of {GALERA_PROVIDERS:?} exists; the Galera tests need the Galera \
                     provider (Debian: apt-get install galera-4)"
                )
            });
        PrivateMariaDb::start_configured(schema, Some(Galera { provider, port: 0 }), None)
    }

    /// [`PrivateMariaDb::start`], the server offering TLS with `tls` (`--ssl-cert`,
    /// `--ssl-key`) when given; without, it offers none, as MariaDB's packages ship.
    ///
    /// # Panics
    /// As [`PrivateMariaDb::start`].
    pub fn start_with(schema: Schema, tls: Option<ServerTls>) -> PrivateMariaDb {
        PrivateMariaDb::start_configured(schema, None, tls)
    }

    fn start_configured(
        schema: Schema,
        galera: Option<Galera>,
        tls: Option<ServerTls>,
    ) -> PrivateMariaDb {
        let programs = Programs::find();
        let dir = tempfile::Builder::new()
            .prefix("cks-drift-mariadb-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a directory for MariaDB: {e}"));
        let mut db = PrivateMariaDb {
            schema,
            tls,
            programs,
            galera,
            port: 0,
            password: random_password(),
            server: None,
            dir,
        };
        db.install();
        for attempt in 1..=START_ATTEMPTS {
            db.port = free_port();
            if let Some(galera) = &mut db.galera {
                galera.port = free_port();
            }
            // Each attempt's log is read on its own.
            let _ = std::fs::remove_file(db.error_log());
            match db.launch() {
                Ok(()) => break,
                Err(log) if attempt < START_ATTEMPTS && log.contains("Address already in use") => {}
                Err(log) => panic!("MariaDB did not start on port {}:\n{log}", db.port),
            }
        }
        db.run_root(None, &setup_sql(schema, &db.password))
            .unwrap_or_else(|e| panic!("creating the CloudStack tables failed: {e}"));
        db
    }

    pub fn schema(&self) -> Schema {
        self.schema
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether it is a Galera node ([`PrivateMariaDb::start_galera`]).
    pub fn is_galera(&self) -> bool {
        self.galera.is_some()
    }

    /// Where cks-drift connects, without the password (see [`PrivateMariaDb::password`]).
    pub fn url(&self) -> String {
        format!("mysql://{READER}@127.0.0.1:{}/{DATABASE}", self.port)
    }

    /// The password of [`READER`].
    pub fn password(&self) -> &str {
        &self.password
    }

    /// Runs statements as root in [`DATABASE`] and returns what they print: tab-separated
    /// rows without a header line, as `mariadb --batch --skip-column-names` writes them
    /// (`NULL` for null, tabs, newlines and backslashes escaped). The next
    /// [`PrivateMariaDb::mirror`] rewrites every row, as these may have changed some.
    ///
    /// # Panics
    /// If the client fails (a statement is refused, the server is down), with its stderr.
    pub fn sql(&self, sql: &str) -> String {
        self.run_root(Some(DATABASE), sql)
            .unwrap_or_else(|e| panic!("SQL failed: {e}\n{sql}"))
    }

    /// Starts the client as root with `sql` and leaves it running (a `SLEEP` in `sql` holds
    /// its connection, and what it took, that long). Kill the child to end it.
    pub fn spawn_as_root(&self, sql: &str) -> std::process::Child {
        Command::new(&self.programs.client)
            .arg("--no-defaults")
            .arg(format!("--socket={}", self.socket().display()))
            .args(["--user=root", &format!("--database={DATABASE}"), "--batch"])
            .arg("--execute")
            .arg(sql)
            .env_remove("MYSQL_PWD")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.programs.client.display()))
    }

    /// Runs statements as [`READER`] over TCP, as cks-drift connects; `Err` carries the
    /// client's stderr (a refused `SELECT`, say).
    pub fn sql_as_reader(&self, sql: &str) -> Result<String, String> {
        self.run_as_reader(&self.password, sql)
    }

    pub(super) fn run_as_reader(&self, password: &str, sql: &str) -> Result<String, String> {
        let args = [
            "--host=127.0.0.1",
            &format!("--port={}", self.port),
            &format!("--user={READER}"),
            &format!("--database={DATABASE}"),
        ];
        // The password goes through the environment, not the command line `ps` shows.
        self.run_client(&args, Some(password), sql)
    }

    /// Makes the three tables hold the world's rows and nothing else, in one transaction.
    ///
    /// A VM's id is its position in `world.vms` plus one ([`vm_db_id`](super::vm_db_id)), a
    /// cluster's likewise; map rows are numbered from 1 in map order, cluster by cluster, and a map
    /// row of a VM that never existed gets [`vm_db_id`](super::vm_db_id)'s synthetic id. The first
    /// `control_nodes` rows of a cluster that are not etcd nodes get `control_node`; in
    /// [`Schema::Newest`], `etcd_node` and `external_node` come from the VM's flags. The world
    /// keeps no removal times: a removed VM's `removed` is its `lastupdated` (expunging stamps it),
    /// a removed cluster's its `created`.
    ///
    /// # Panics
    /// If the server refuses the rows or is down.
    pub fn mirror(&self, world: &World) {
        let sql = mirror_sql(world, self.schema);
        self.run_root(Some(DATABASE), &sql)
            .unwrap_or_else(|e| panic!("mirroring the world failed: {e}"));
    }

    /// Kills the server with SIGKILL, as a crash or a lost host would, and reaps it. The data
    /// directory stays for [`PrivateMariaDb::restart`].
    pub fn kill(&mut self) {
        if let Some(mut server) = self.server.take() {
            // Fails only if it has exited already, which is what is wanted.
            let _ = server.kill();
            let _ = server.wait();
        }
    }

    /// Starts the server again on the same port and data directory (killing it first if it
    /// runs); committed rows survive.
    ///
    /// # Panics
    /// If it does not start within 30 s.
    pub fn restart(&mut self) {
        self.kill();
        // Committed rows survive a kill, but a full rewrite costs little certainty.
        if let Err(log) = self.launch() {
            panic!("MariaDB did not restart on port {}:\n{log}", self.port);
        }
    }

    /// Whether the server process is still alive (it may have been killed or have died).
    pub fn is_running(&mut self) -> bool {
        self.server
            .as_mut()
            .is_some_and(|s| matches!(s.try_wait(), Ok(None)))
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("mariadbd.sock")
    }

    fn error_log(&self) -> PathBuf {
        self.dir.path().join("error.log")
    }

    /// `mariadb-install-db` into a fresh data directory. Root gets the `normal` method (no
    /// password) so that any OS user can connect through the socket, which only this process
    /// can reach (the temporary directory is 0700); the other root accounts, reachable over
    /// TCP, are dropped by `setup_sql`.
    fn install(&self) {
        let mut cmd = Command::new(&self.programs.install_db);
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", self.data_dir().display()))
            // The bootstrap's temporary tables too: not in a /tmp shared with other servers.
            .arg(format!("--tmpdir={}", self.dir.path().display()))
            .args([
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--skip-name-resolve",
            ])
            .args(server_sizing());
        if running_as_root() {
            cmd.arg("--user=root");
        }
        let out = output_of(&mut cmd, None);
        if !out.status.success() {
            panic!(
                "mariadb-install-db failed ({}):\n{}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    /// Starts `mariadbd` and waits until it answers a ping; `Err` carries its log.
    fn launch(&mut self) -> Result<(), String> {
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.error_log())
            .unwrap_or_else(|e| panic!("cannot open the MariaDB log: {e}"));
        let log_too = log
            .try_clone()
            .unwrap_or_else(|e| panic!("cannot open the MariaDB log: {e}"));
        let dir = self.dir.path();
        let mut cmd = Command::new(&self.programs.server);
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", self.data_dir().display()))
            .arg(format!("--socket={}", self.socket().display()))
            .arg(format!("--pid-file={}", dir.join("mariadbd.pid").display()))
            .arg(format!("--tmpdir={}", dir.display()))
            .arg(format!("--port={}", self.port))
            .args([
                "--bind-address=127.0.0.1",
                "--skip-name-resolve",
                "--character-set-server=utf8mb4",
                "--collation-server=utf8mb4_general_ci",
                // Committed rows reach the OS at commit, so they survive `kill`; a test
                // server has no power failure to fear.
                "--innodb-flush-log-at-trx-commit=2",
            ])
            .args(server_sizing());
        if let Some(galera) = &self.galera {
            cmd.args(galera_args(galera));
        }
        if let Some(tls) = &self.tls {
            cmd.arg(format!("--ssl-cert={}", tls.cert.display()))
                .arg(format!("--ssl-key={}", tls.key.display()));
        }
        if running_as_root() {
            cmd.arg("--user=root");
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_too));
        let server = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.programs.server.display()));
        self.server = Some(server);

        let deadline = Instant::now() + START_DEADLINE;
        loop {
            if !self.is_running() {
                self.server = None;
                return Err(self.read_log());
            }
            if self.ping() {
                return self.wait_until_ready();
            }
            if Instant::now() >= deadline {
                self.kill();
                return Err(format!(
                    "no answer within {START_DEADLINE:?}\n{}",
                    self.read_log()
                ));
            }
            thread::sleep(PING_INTERVAL);
        }
    }

    /// A Galera node answers before it has joined its cluster: waits for `wsrep_ready`.
    fn wait_until_ready(&mut self) -> Result<(), String> {
        if self.galera.is_none() {
            return Ok(());
        }
        let deadline = Instant::now() + GALERA_READY_DEADLINE;
        loop {
            let ready = self.run_root(None, "SHOW GLOBAL STATUS LIKE 'wsrep_ready'");
            if ready.is_ok_and(|out| out.trim_end().ends_with("ON")) {
                return Ok(());
            }
            if !self.is_running() || Instant::now() >= deadline {
                self.kill();
                return Err(format!(
                    "wsrep_ready did not become ON within {GALERA_READY_DEADLINE:?}\n{}",
                    self.read_log()
                ));
            }
            thread::sleep(PING_INTERVAL);
        }
    }

    fn ping(&self) -> bool {
        let mut cmd = Command::new(&self.programs.admin);
        cmd.arg("--no-defaults")
            .arg(format!("--socket={}", self.socket().display()))
            .args(["--user=root", "--connect-timeout=1", "ping"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd.status().is_ok_and(|s| s.success())
    }

    fn read_log(&self) -> String {
        std::fs::read(self.error_log())
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_else(|e| format!("(no log: {e})"))
    }

    /// Runs statements as root through the socket, in `database` if given.
    pub(super) fn run_root(&self, database: Option<&str>, sql: &str) -> Result<String, String> {
        let mut args = vec![
            format!("--socket={}", self.socket().display()),
            "--user=root".to_string(),
        ];
        if let Some(db) = database {
            args.push(format!("--database={db}"));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.run_client(&args, None, sql)
    }

    /// The `mariadb` client in batch mode with `sql` on stdin.
    fn run_client(
        &self,
        args: &[&str],
        password: Option<&str>,
        sql: &str,
    ) -> Result<String, String> {
        let mut cmd = Command::new(&self.programs.client);
        cmd.arg("--no-defaults").args(args).args([
            "--batch",
            "--skip-column-names",
            "--default-character-set=utf8mb4",
            "--connect-timeout=5",
        ]);
        match password {
            Some(p) => cmd.env("MYSQL_PWD", p),
            None => cmd.env_remove("MYSQL_PWD"),
        };
        let out = output_of(&mut cmd, Some(sql));
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() {
            Ok(stdout)
        } else {
            Err(format!(
                "{} ({}): {}",
                self.programs.client.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim_end()
            ))
        }
    }
}

impl Drop for PrivateMariaDb {
    fn drop(&mut self) {
        self.kill();
    }
}

impl std::fmt::Debug for PrivateMariaDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrivateMariaDb")
            .field("schema", &self.schema)
            .field("port", &self.port)
            .field("galera", &self.galera)
            .field("dir", &self.dir.path())
            .field("password", &"<redacted>")
            .finish()
    }
}

/// Paths of MariaDB's programs (the `mysql*` names of older packages as a fallback).
#[derive(Debug, Clone)]
struct Programs {
    install_db: PathBuf,
    server: PathBuf,
    admin: PathBuf,
    client: PathBuf,
}

impl Programs {
    fn find() -> Programs {
        Programs {
            install_db: program(&["mariadb-install-db", "mysql_install_db"]),
            server: program(&["mariadbd", "mysqld"]),
            admin: program(&["mariadb-admin", "mysqladmin"]),
            client: program(&["mariadb", "mysql"]),
        }
    }
}

/// The first of `names` on `PATH` or in the usual system directories (the server lives in
/// `/usr/sbin`, which a non-login `PATH` may lack).
fn program(names: &[&str]) -> PathBuf {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.extend(["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"].map(PathBuf::from));
    names
        .iter()
        .flat_map(|name| dirs.iter().map(move |dir| dir.join(name)))
        .find(|path| path.is_file())
        .unwrap_or_else(|| {
            panic!(
                "none of {names:?} is installed; the database tests need MariaDB \
                 (Debian: apt-get install mariadb-server mariadb-client)"
            )
        })
}

/// Small enough that several servers run side by side on a small machine.
fn server_sizing() -> [String; 4] {
    [
        format!("--innodb-buffer-pool-size={BUFFER_POOL}"),
        "--innodb-log-file-size=16M".to_string(),
        "--skip-log-bin".to_string(),
        "--performance-schema=OFF".to_string(),
    ]
}

/// A new cluster of one node (`gcomm://` with no peer bootstraps it), its group communication
/// on loopback only, with a small write-set cache and the settings Galera requires.
fn galera_args(galera: &Galera) -> Vec<String> {
    vec![
        "--wsrep-on=ON".to_string(),
        format!("--wsrep-provider={}", galera.provider.display()),
        "--wsrep-cluster-address=gcomm://".to_string(),
        format!("--wsrep-cluster-name={GALERA_CLUSTER}"),
        format!("--wsrep-node-name={GALERA_NODE}"),
        "--wsrep-node-address=127.0.0.1".to_string(),
        format!(
            "--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:{};gcache.size=16M",
            galera.port
        ),
        "--binlog-format=ROW".to_string(),
        "--innodb-autoinc-lock-mode=2".to_string(),
    ]
}

/// mariadbd refuses to run as root unless told which user to run as.
fn running_as_root() -> bool {
    // /proc/self belongs to the process's effective user.
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// A loopback port nothing listens on right now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("no free loopback port: {e}"))
}

/// 32 hexadecimal digits from the kernel's random source.
fn random_password() -> String {
    let mut bytes = [0u8; 16];
    File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .unwrap_or_else(|e| panic!("cannot read /dev/urandom: {e}"));
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Runs `cmd` with `input` on its stdin (written from another thread, so a large input and
/// a large output cannot block each other).
fn output_of(cmd: &mut Command, input: Option<&str>) -> Output {
    cmd.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {:?}: {e}", cmd.get_program()));
    let stdin = child.stdin.take();
    thread::scope(|scope| {
        if let (Some(mut stdin), Some(input)) = (stdin, input) {
            // A client that stops reading has failed; its status and stderr say why.
            scope.spawn(move || {
                let _ = stdin.write_all(input.as_bytes());
            });
        }
        child
            .wait_with_output()
            .unwrap_or_else(|e| panic!("cannot wait for {:?}: {e}", cmd.get_program()))
    })
}
