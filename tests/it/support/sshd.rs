//! A real OpenSSH server on 127.0.0.1, private to one test: its own config, host keys,
//! authorized_keys and log in a temporary directory. It needs root (to run sshd and to log in
//! as root), `/usr/sbin/sshd` and `ssh-keygen`.

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

const SSHD: &str = "/usr/sbin/sshd";
/// sshd refuses to start without its privilege-separation directory.
const PRIVSEP_DIR: &str = "/run/sshd";
const READY_WITHIN: Duration = Duration::from_secs(10);

/// Kinds of client key the tests use.
#[derive(Debug, Clone, Copy)]
pub enum KeyKind {
    /// `BEGIN RSA PRIVATE KEY`, as CloudStack generates for CKS clusters.
    RsaPkcs1,
    /// OpenSSH format ed25519.
    Ed25519,
}

/// Generates an unencrypted client key pair at `path` and `path.pub`.
pub fn keygen(path: &Path, kind: KeyKind) -> PathBuf {
    let args: &[&str] = match kind {
        KeyKind::RsaPkcs1 => &["-m", "PEM", "-t", "rsa", "-b", "2048"],
        KeyKind::Ed25519 => &["-t", "ed25519"],
    };
    run_keygen(path, args, "");
    path.to_path_buf()
}

/// Generates a key pair protected by `passphrase`.
pub fn keygen_encrypted(path: &Path, kind: KeyKind, passphrase: &str) -> PathBuf {
    let args: &[&str] = match kind {
        KeyKind::RsaPkcs1 => &["-m", "PEM", "-t", "rsa", "-b", "2048"],
        KeyKind::Ed25519 => &["-t", "ed25519"],
    };
    run_keygen(path, args, passphrase);
    path.to_path_buf()
}

fn run_keygen(path: &Path, args: &[&str], passphrase: &str) {
    let status = Command::new("ssh-keygen")
        .args(["-q", "-C", "cks-drift-test", "-N", passphrase, "-f"])
        .arg(path)
        .args(args)
        .stdin(Stdio::null())
        .status()
        .expect("run ssh-keygen");
    assert!(status.success(), "ssh-keygen {args:?} failed: {status}");
}

/// A running sshd; killed on drop.
pub struct Sshd {
    dir: TempDir,
    ip: Ipv4Addr,
    port: u16,
    child: Child,
    client_key: PathBuf,
    host_keys: Vec<String>,
}

impl Sshd {
    /// Starts sshd on a free port with fresh host keys and a fresh PKCS#1 RSA client key
    /// authorized for every user.
    pub fn start() -> Sshd {
        Sshd::start_on(free_port())
    }

    /// Starts sshd on `port` (e.g. the port of a stopped one, to play a rebuilt node).
    pub fn start_on(port: u16) -> Sshd {
        Sshd::start_at(Ipv4Addr::LOCALHOST, port)
    }

    /// Starts sshd on `ip:port`: a control node as CKS reaches it (port 2222 or 22) on an
    /// address of its own in 127.0.0.0/8.
    pub fn start_at(ip: Ipv4Addr, port: u16) -> Sshd {
        let dir = tempfile::tempdir().expect("temp dir");
        let base = dir.path();
        let mut host_key_lines = String::new();
        let mut host_keys = Vec::new();
        for (name, args) in [
            ("host_ed25519", &["-t", "ed25519"][..]),
            ("host_rsa", &["-t", "rsa", "-b", "2048"][..]),
        ] {
            let path = base.join(name);
            run_keygen(&path, args, "");
            host_key_lines.push_str(&format!("HostKey {}\n", path.display()));
            host_keys.push(public_key_line(&path.with_extension("pub")));
        }
        let client_key = keygen(&base.join("client_rsa"), KeyKind::RsaPkcs1);
        std::fs::copy(
            client_key.with_extension("pub"),
            base.join("authorized_keys"),
        )
        .expect("write authorized_keys");

        let config = format!(
            "Port {port}\n\
             ListenAddress {ip}\n\
             {host_key_lines}\
             PidFile {base}/sshd.pid\n\
             UsePAM no\n\
             PasswordAuthentication no\n\
             KbdInteractiveAuthentication no\n\
             PermitRootLogin prohibit-password\n\
             StrictModes no\n\
             AuthorizedKeysFile {base}/authorized_keys\n\
             PubkeyAcceptedAlgorithms rsa-sha2-512,rsa-sha2-256,ssh-ed25519\n\
             LogLevel DEBUG1\n",
            base = base.display()
        );
        let config_path = base.join("sshd_config");
        std::fs::write(&config_path, config).expect("write sshd_config");
        std::fs::create_dir_all(PRIVSEP_DIR).expect("create /run/sshd");

        let child = spawn_sshd(base);
        let mut sshd = Sshd {
            dir,
            ip,
            port,
            child,
            client_key,
            host_keys,
        };
        sshd.wait_ready();
        sshd
    }

    /// Stops listening: connections are refused until [`Sshd::answer_again`].
    pub fn refuse(&mut self) {
        self.kill();
    }

    /// Listens again, with the same host keys and authorized keys, after [`Sshd::refuse`].
    pub fn answer_again(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            return;
        }
        self.child = spawn_sshd(self.dir.path());
        self.wait_ready();
    }

    /// Stops the listener's process (SIGSTOP): connections are accepted by the kernel and
    /// then hang, no banner comes, until [`Sshd::unhang`].
    pub fn hang(&self) {
        signal(self.child.id(), "STOP");
    }

    pub fn unhang(&self) {
        signal(self.child.id(), "CONT");
    }

    /// Polls the port until sshd accepts, or panics with its log.
    fn wait_ready(&mut self) {
        let addr = SocketAddr::from((self.ip, self.port));
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("sshd exited with {status}; log:\n{}", self.log());
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return;
            }
            if started.elapsed() > READY_WITHIN {
                panic!("sshd not listening on {addr}; log:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn ip(&self) -> Ipv4Addr {
        self.ip
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The PKCS#1 RSA client key authorized at start.
    pub fn client_key(&self) -> &Path {
        &self.client_key
    }

    /// A scratch directory that lives as long as this server.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Authorizes the public half (`<key>.pub`) of another client key.
    pub fn authorize(&self, key: &Path) {
        let line = std::fs::read_to_string(key.with_extension("pub")).expect("read public key");
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(self.dir.path().join("authorized_keys"))
            .expect("open authorized_keys");
        file.write_all(line.as_bytes())
            .expect("append to authorized_keys");
    }

    /// The server log (`LogLevel DEBUG1`).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default()
    }

    /// Its public host keys, `<algorithm> <base64>` each (ed25519 first, then RSA).
    pub fn host_keys(&self) -> &[String] {
        &self.host_keys
    }

    /// `known_hosts` lines for all its host keys under `[127.0.0.1]:<port>`.
    pub fn known_hosts_lines(&self) -> String {
        self.host_keys
            .iter()
            .map(|key| format!("[127.0.0.1]:{} {key}\n", self.port))
            .collect()
    }

    /// Stops the listener and waits for it, freeing the port.
    pub fn stop(mut self) {
        self.kill();
    }

    fn kill(&mut self) {
        // Sessions already forked keep running, as with a real sshd restart.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Runs sshd in the foreground on the config written in `base`, logging to `sshd.log` there.
fn spawn_sshd(base: &Path) -> Child {
    Command::new(SSHD)
        .args(["-D", "-e", "-f"])
        .arg(base.join("sshd_config"))
        .arg("-E")
        .arg(base.join("sshd.log"))
        .stdin(Stdio::null())
        .spawn()
        .expect("start sshd")
}

/// Sends SIGSTOP, SIGCONT, … (`kill -<name> <pid>`).
pub fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{name} {pid}");
}

/// `<algorithm> <base64>` of a `.pub` file, without the comment.
fn public_key_line(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("read host public key");
    let mut fields = text.split_whitespace();
    match (fields.next(), fields.next()) {
        (Some(algorithm), Some(key)) => format!("{algorithm} {key}"),
        _ => panic!("unexpected public key file {}: {text:?}", path.display()),
    }
}

/// A port nothing listens on right now (the listener is closed again).
pub fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .expect("bind 127.0.0.1:0")
        .port()
}

/// A loopback address no other test of this run uses (127.77.x.y), so several control nodes
/// can listen on CKS's own port 2222 (or 22) at once. The process id spreads concurrent runs.
pub fn fresh_loopback() -> Ipv4Addr {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed) + (std::process::id() % 200) * 300;
    Ipv4Addr::new(127, 77, ((n / 250) % 250) as u8 + 1, (n % 250) as u8 + 1)
}
