//! Runs the node-listing command on a control node over SSH: TCP, key exchange with the
//! host key checked against `known_hosts`, public key authentication, one exec. Parsing the
//! output is `remote::kubectl`; choosing the host and user is the caller's.
//!
//! Every step has a deadline: `ssh.connect_timeout` bounds TCP, key exchange and
//! authentication together, `ssh.command_timeout` bounds the command. The command is also
//! bounded on the control node (see [`remote_command`]), because closing the connection does
//! not stop a command that has no terminal.

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex as StdMutex, PoisonError};
use std::time::Duration;

use russh::client::{self, AuthResult};
use russh::keys::{HashAlg, PrivateKey, PrivateKeyWithHashAlg, PublicKey, PublicKeyOrCertificate};
use russh::{ChannelMsg, Disconnect, Sig};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout, timeout_at};
use tracing::{Instrument, debug, debug_span, info, warn};

use super::known_hosts::{self, HostKeyMatch};
use super::{
    ForgetFuture, Node, NodeListError, NodeListFuture, NodeLister, RemoteExit, SshTarget, Stage,
    parse_nodes,
};
use crate::config::{HostKeyPolicy, SshSettings};

/// Most stdout kept. A node list is about 130 bytes a node with its system UUID and provider
/// ID (40 with names only), so this is far beyond any cluster; more means the output is not a node list, and a cut list would look like
/// missing nodes, so it is refused rather than truncated.
const STDOUT_LIMIT: usize = 4 * 1024 * 1024;
/// Longest stdout line read: a node line is a name (at most 253 characters), its readiness,
/// a system UUID and a provider ID. A longer line ends the listing at once.
pub const LINE_LIMIT: usize = 4096;
/// Most stderr kept; the rest is read and dropped.
const STDERR_LIMIT: usize = 64 * 1024;
/// Longest stderr line carried in an error.
const STDERR_LINE_CHARS: usize = 200;
/// How long to wait for our disconnect message to go out.
const DISCONNECT_GRACE: Duration = Duration::from_secs(1);
/// Exit status of coreutils `timeout` when it had to stop the command.
const TIMEOUT_EXIT_STATUS: u32 = 124;

/// The private key in `ssh.private_key` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error(
        "ssh.private_key: {} does not exist; point ssh.private_key at the management server's \
         key or at the private half of the clusters' key pair",
        path.display()
    )]
    Missing { path: PathBuf },
    #[error("ssh.private_key: cannot read {}: {why}", path.display())]
    Denied { path: PathBuf, why: String },
    #[error("ssh.private_key: cannot read {}", path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("ssh.private_key: {} is a public key; give its private half{}", path.display(), private_half(path))]
    PublicKey { path: PathBuf },
    #[error(
        "ssh.private_key: {} is not a private key (expected PEM RSA, OpenSSH RSA or OpenSSH ed25519)",
        path.display()
    )]
    NotAKey {
        path: PathBuf,
        #[source]
        source: russh::keys::Error,
    },
    #[error(
        "ssh.private_key: {} is encrypted and passphrases are not supported; \
         give an unencrypted key (ssh-keygen -p -N '' -f <copy of the key>)",
        path.display()
    )]
    Encrypted { path: PathBuf },
}

/// Lists nodes by running `ssh.command` on the control node. One lister serves every
/// cluster; the private key is loaded once, at construction.
pub struct SshNodeLister {
    key: Arc<PrivateKey>,
    key_file: PathBuf,
    known_hosts: PathBuf,
    policy: HostKeyPolicy,
    connect_timeout: Duration,
    command_timeout: Duration,
    command: String,
    config: Arc<client::Config>,
    /// Held while a connection reads or writes `known_hosts`, or the entries of clusters gone
    /// are dropped, so that no write is lost and no cluster is learned twice.
    known_hosts_lock: Arc<tokio::sync::Mutex<()>>,
}

impl fmt::Debug for SshNodeLister {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SshNodeLister")
            .field("key_file", &self.key_file)
            .field("key_algorithm", &self.key.algorithm().as_str())
            .field("known_hosts", &self.known_hosts)
            .field("policy", &self.policy)
            .field("connect_timeout", &self.connect_timeout)
            .field("command_timeout", &self.command_timeout)
            .field("command", &self.command)
            .finish_non_exhaustive()
    }
}

impl SshNodeLister {
    /// Loads the private key: PEM PKCS#1 RSA (`BEGIN RSA PRIVATE KEY`, what CloudStack
    /// generates for CKS), OpenSSH RSA or OpenSSH ed25519, unencrypted.
    pub fn new(settings: &SshSettings) -> Result<Self, KeyError> {
        let key = load_private_key(&settings.private_key)?;
        debug!(
            key_file = %settings.private_key.display(),
            algorithm = key.algorithm().as_str(),
            "loaded ssh private key"
        );
        let config = client::Config {
            // A backstop for a session task left behind; our own deadlines are shorter.
            inactivity_timeout: Some(settings.connect_timeout + settings.command_timeout),
            nodelay: true,
            ..Default::default()
        };
        Ok(SshNodeLister {
            key: Arc::new(key),
            key_file: settings.private_key.clone(),
            known_hosts: settings.known_hosts.clone(),
            policy: settings.host_key_policy,
            connect_timeout: settings.connect_timeout,
            command_timeout: settings.command_timeout,
            command: settings.command.clone(),
            config: Arc::new(config),
            known_hosts_lock: Arc::new(tokio::sync::Mutex::new(())),
        })
    }

    async fn list(&self, target: &SshTarget) -> Result<Vec<Node>, NodeListError> {
        let deadline = Instant::now() + self.connect_timeout;
        let stream = self.connect_tcp(target, deadline).await?;
        debug!("tcp connected");
        // russh runs the session on a task of its own, which a dropped future does not stop:
        // a peer that stalls the key exchange, and keeps the inactivity timer alive, would
        // keep the socket and the task for ever. A second handle on the socket ends the
        // connection when this listing ends, whatever the peer does.
        let (stream, _ends) =
            SocketGuard::take(stream).map_err(|source| NodeListError::Connect {
                host: target.host.clone(),
                port: target.port,
                source,
            })?;

        let refusal = Arc::new(StdMutex::new(None));
        let check = HostKeyCheck {
            cluster: known_hosts::cluster_word(&target.cluster_id),
            host: target.host.clone(),
            port: target.port,
            known_hosts: self.known_hosts.clone(),
            policy: self.policy,
            lock: Arc::clone(&self.known_hosts_lock),
            refusal: Arc::clone(&refusal),
        };
        let handshake = client::connect_stream(Arc::clone(&self.config), stream, check);
        let mut handle = match timeout_at(deadline, handshake).await {
            Err(_) => return Err(self.timeout(target, Stage::KeyExchange)),
            Ok(Err(source)) => {
                // A refused host key surfaces from russh as a bare `UnknownKey`; the reason
                // was recorded by the check.
                let recorded = refusal
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                return Err(recorded.unwrap_or_else(|| NodeListError::Ssh {
                    host: target.host.clone(),
                    port: target.port,
                    stage: Stage::KeyExchange,
                    source,
                }));
            }
            Ok(Ok(handle)) => handle,
        };
        debug!("key exchange done");

        let outcome = async {
            self.authenticate(&mut handle, target, deadline).await?;
            debug!("authenticated");
            self.run_command(&handle, target).await
        }
        .await;
        close(handle).await;

        let stdout = outcome?;
        let nodes = parse_nodes(&stdout).map_err(|source| NodeListError::Output {
            host: target.host.clone(),
            port: target.port,
            source,
        })?;
        debug!(
            nodes = nodes.len(),
            with_identity = nodes
                .iter()
                .filter(|n| n.system_uuid.is_some() || n.provider_id.is_some())
                .count(),
            "listed nodes"
        );
        Ok(nodes)
    }

    async fn connect_tcp(
        &self,
        target: &SshTarget,
        deadline: Instant,
    ) -> Result<TcpStream, NodeListError> {
        let lookup = tokio::net::lookup_host((target.host.as_str(), target.port));
        let addrs: Vec<_> = match timeout_at(deadline, lookup).await {
            Err(_) => return Err(self.timeout(target, Stage::Connect)),
            Ok(Err(source)) => {
                return Err(NodeListError::Dns {
                    host: target.host.clone(),
                    source,
                });
            }
            Ok(Ok(addrs)) => addrs.collect(),
        };
        let mut last_error = std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "the name resolved to no addresses",
        );
        for addr in addrs {
            match timeout_at(deadline, TcpStream::connect(addr)).await {
                Err(_) => return Err(self.timeout(target, Stage::Connect)),
                Ok(Ok(stream)) => {
                    if let Err(e) = stream.set_nodelay(true) {
                        debug!(error = %e, "cannot set TCP_NODELAY");
                    }
                    return Ok(stream);
                }
                Ok(Err(e)) => {
                    debug!(%addr, error = %e, "tcp connect failed");
                    last_error = e;
                }
            }
        }
        Err(NodeListError::Connect {
            host: target.host.clone(),
            port: target.port,
            source: last_error,
        })
    }

    /// Offers the key. RSA signs with rsa-sha2-512 and then rsa-sha2-256: the server's
    /// `server-sig-algs` lists what it implements, not what it accepts, so the only way to
    /// learn that SHA-512 is refused is to try. Never SHA-1 (`ssh-rsa`), which OpenSSH 8.8+
    /// refuses by default.
    async fn authenticate(
        &self,
        handle: &mut client::Handle<HostKeyCheck>,
        target: &SshTarget,
        deadline: Instant,
    ) -> Result<(), NodeListError> {
        let hashes: &[Option<HashAlg>] = if self.key.algorithm().is_rsa() {
            &[Some(HashAlg::Sha512), Some(HashAlg::Sha256)]
        } else {
            &[None]
        };
        let mut offered = Vec::new();
        for hash in hashes {
            let key = PrivateKeyWithHashAlg::new(Arc::clone(&self.key), *hash);
            let algorithm = key.algorithm();
            offered.push(algorithm.as_str().to_string());
            let attempt = handle.authenticate_publickey(target.user.as_str(), key);
            let result = timeout_at(deadline, attempt)
                .await
                .map_err(|_| self.timeout(target, Stage::Auth))?
                .map_err(|source| NodeListError::Ssh {
                    host: target.host.clone(),
                    port: target.port,
                    stage: Stage::Auth,
                    source,
                })?;
            match result {
                AuthResult::Success => return Ok(()),
                AuthResult::Failure { .. } => {
                    debug!(algorithm = algorithm.as_str(), "public key refused");
                }
            }
        }
        Err(NodeListError::Auth {
            user: target.user.clone(),
            host: target.host.clone(),
            port: target.port,
            key_file: self.key_file.clone(),
            offered: offered.join(", "),
        })
    }

    async fn run_command(
        &self,
        handle: &client::Handle<HostKeyCheck>,
        target: &SshTarget,
    ) -> Result<String, NodeListError> {
        let command = remote_command(&self.command, self.command_timeout);
        debug!(command = %command, "running command");
        let output = timeout(
            self.command_timeout,
            exec(handle, &command, target.max_nodes),
        )
        .await
        .map_err(|_| self.timeout(target, Stage::Command))?
        .map_err(|failure| match failure {
            ExecFailure::Ssh(source) => NodeListError::Ssh {
                host: target.host.clone(),
                port: target.port,
                stage: Stage::Command,
                source,
            },
            ExecFailure::TooLarge => NodeListError::OutputTooLarge {
                host: target.host.clone(),
                port: target.port,
                limit: STDOUT_LIMIT,
            },
            ExecFailure::TooManyLines => NodeListError::TooManyNodes {
                host: target.host.clone(),
                port: target.port,
                max_nodes: target.max_nodes,
            },
            ExecFailure::LineTooLong => NodeListError::LineTooLong {
                host: target.host.clone(),
                port: target.port,
                limit: LINE_LIMIT,
            },
        })?;
        debug!(
            exit = ?output.exit,
            stdout_bytes = output.stdout.len(),
            stderr_bytes = output.stderr.len(),
            "command finished"
        );
        let exit = match output.exit {
            Some(RemoteExit::Status(0)) => {
                return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
            }
            Some(RemoteExit::Status(TIMEOUT_EXIT_STATUS)) => {
                return Err(self.timeout(target, Stage::Command));
            }
            Some(exit) => exit,
            None => RemoteExit::Unknown,
        };
        Err(NodeListError::Command {
            host: target.host.clone(),
            port: target.port,
            exit,
            stderr: last_line(&output.stderr),
        })
    }

    /// Drops the entries learned for clusters not in `listed` and returns how many went.
    /// Only under `accept-new`: with `strict` the file is the operator's, with `off` unused.
    pub async fn forget(&self, listed: &HashSet<String>) -> std::io::Result<usize> {
        if self.policy != HostKeyPolicy::AcceptNew || listed.is_empty() {
            return Ok(0);
        }
        let words: HashSet<String> = listed
            .iter()
            .map(|id| known_hosts::cluster_word(id))
            .collect();
        let _guard = self.known_hosts_lock.lock().await;
        let text = match known_hosts::read_no_follow(&self.known_hosts) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(e),
        };
        match known_hosts::prune(&text, |cluster| words.contains(cluster)) {
            None => Ok(0),
            Some((kept, dropped)) => {
                known_hosts::replace(&self.known_hosts, &kept)?;
                Ok(dropped)
            }
        }
    }

    fn timeout(&self, target: &SshTarget, stage: Stage) -> NodeListError {
        let after = match stage {
            Stage::Command => self.command_timeout,
            _ => self.connect_timeout,
        };
        NodeListError::Timeout {
            host: target.host.clone(),
            port: target.port,
            stage,
            after,
        }
    }
}

impl NodeLister for SshNodeLister {
    fn list_nodes<'a>(&'a self, target: &'a SshTarget) -> NodeListFuture<'a> {
        let span = debug_span!("ssh", host = %target.host, port = target.port, user = %target.user);
        Box::pin(self.list(target).instrument(span))
    }

    fn forget_unlisted<'a>(&'a self, listed: &'a HashSet<String>) -> ForgetFuture<'a> {
        Box::pin(async move {
            match self.forget(listed).await {
                Ok(0) => {}
                Ok(dropped) => info!(
                    known_hosts = %self.known_hosts.display(),
                    entries = dropped,
                    "forgot the host keys of clusters CloudStack no longer lists"
                ),
                Err(e) => warn!(
                    known_hosts = %self.known_hosts.display(),
                    error = %e,
                    "cannot forget the host keys of clusters CloudStack no longer lists; they are kept"
                ),
            }
        })
    }
}

/// The command as sent to the control node: `timeout <N>s <command>`, with N the command
/// timeout rounded up to whole seconds (at least 1).
///
/// Without a terminal the remote command gets no hangup when we disconnect, so a hung
/// kubectl would otherwise outlive every cycle. `timeout` comes first so that a command
/// starting with `sudo -n` needs no sudo rule for `timeout` itself; it stops the whole
/// command (sudo passes the signal on) and exits 124, which reads as a command timeout. The
/// configured command must therefore be a simple command (a program and its arguments), not
/// a shell pipeline or assignment.
pub fn remote_command(command: &str, bound: Duration) -> String {
    let seconds = bound.as_secs() + u64::from(bound.subsec_nanos() > 0);
    format!("timeout {}s {}", seconds.max(1), command.trim())
}

/// Loads an unencrypted private key as [`SshNodeLister::new`] does, to check that it is
/// usable without building a lister.
pub fn load_private_key(path: &Path) -> Result<PrivateKey, KeyError> {
    let bytes = std::fs::read(path).map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            KeyError::Missing {
                path: path.to_path_buf(),
            }
        } else if source.kind() == std::io::ErrorKind::PermissionDenied {
            KeyError::Denied {
                path: path.to_path_buf(),
                why: crate::config::secret_file::permission_denied(path),
            }
        } else {
            KeyError::Unreadable {
                path: path.to_path_buf(),
                source,
            }
        }
    })?;
    let text = String::from_utf8_lossy(&bytes);
    if is_public_key(&text) {
        return Err(KeyError::PublicKey {
            path: path.to_path_buf(),
        });
    }
    russh::keys::decode_secret_key(&text, None).map_err(|source| {
        // PEM with a DEK-Info other than AES-128-CBC, for one, fails as a parse error.
        let marked_encrypted =
            text.contains("Proc-Type: 4,ENCRYPTED") || text.contains("BEGIN ENCRYPTED PRIVATE KEY");
        if matches!(source, russh::keys::Error::KeyIsEncrypted) || marked_encrypted {
            KeyError::Encrypted {
                path: path.to_path_buf(),
            }
        } else {
            KeyError::NotAKey {
                path: path.to_path_buf(),
                source,
            }
        }
    })
}

/// A public key in any of the forms `ssh-keygen` writes or reads: the one-line OpenSSH form
/// (`ssh-rsa AAAA… comment`, what a `.pub` file holds), RFC 4716 or PEM.
fn is_public_key(text: &str) -> bool {
    let text = text.trim_start();
    ["ssh-", "ecdsa-sha2-", "sk-ssh-", "sk-ecdsa-"]
        .iter()
        .any(|p| text.starts_with(p))
        || [
            "---- BEGIN SSH2 PUBLIC KEY",
            "-----BEGIN PUBLIC KEY",
            "-----BEGIN RSA PUBLIC KEY",
        ]
        .iter()
        .any(|p| text.starts_with(p))
}

/// Where the private half of a `.pub` file usually is.
fn private_half(path: &Path) -> String {
    match path.to_str().and_then(|p| p.strip_suffix(".pub")) {
        Some(private) if !private.is_empty() => format!(", usually {private}"),
        _ => String::new(),
    }
}

struct CommandOutput {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    exit: Option<RemoteExit>,
}

/// Why a command's output was not read to its end.
#[derive(Debug)]
pub enum ExecFailure {
    Ssh(russh::Error),
    TooLarge,
    /// More lines than `max_nodes`.
    TooManyLines,
    /// A line longer than [`LINE_LIMIT`].
    LineTooLong,
}

/// Counts stdout's lines as they arrive, so that a control node printing far more than a node
/// list is stopped at the bound, not held whole (a tenant's control node may print anything).
/// Public for the fuzz target that feeds it with [`parse_nodes`].
pub struct LineBound {
    /// Lines allowed: `max_nodes`. None for a header: no node list has one (`parse_nodes`
    /// refuses every header line), so a line for it would only let one node more through.
    max_lines: usize,
    lines: usize,
    /// Bytes of the line not yet ended.
    open: usize,
}

impl LineBound {
    pub fn new(max_nodes: usize) -> LineBound {
        LineBound {
            max_lines: max_nodes,
            lines: 0,
            open: 0,
        }
    }

    /// Takes the next piece of stdout; an error once the output is past the bound.
    pub fn take(&mut self, data: &[u8]) -> Result<(), ExecFailure> {
        for piece in data.split_inclusive(|&b| b == b'\n') {
            self.open += piece.len();
            if self.open > LINE_LIMIT {
                return Err(ExecFailure::LineTooLong);
            }
            if piece.ends_with(b"\n") {
                self.lines += 1;
                self.open = 0;
            }
        }
        // An unended last line counts too.
        let lines = self.lines + usize::from(self.open > 0);
        if lines > self.max_lines {
            return Err(ExecFailure::TooManyLines);
        }
        Ok(())
    }
}

/// Runs one command and reads until the channel is gone: OpenSSH sends the exit status
/// before the last data may have been handed over, so stopping at `ExitStatus` or `Eof`
/// could lose output.
async fn exec(
    handle: &client::Handle<HostKeyCheck>,
    command: &str,
    max_nodes: usize,
) -> Result<CommandOutput, ExecFailure> {
    let mut bound = LineBound::new(max_nodes);
    let mut channel = handle
        .channel_open_session()
        .await
        .map_err(ExecFailure::Ssh)?;
    channel
        .exec(true, command)
        .await
        .map_err(ExecFailure::Ssh)?;
    let mut output = CommandOutput {
        stdout: Vec::new(),
        stderr: Vec::new(),
        exit: None,
    };
    while let Some(msg) = channel.wait().await {
        match msg {
            ChannelMsg::Data { data } => {
                if output.stdout.len() + data.len() > STDOUT_LIMIT {
                    return Err(ExecFailure::TooLarge);
                }
                bound.take(&data)?;
                output.stdout.extend_from_slice(&data);
            }
            ChannelMsg::ExtendedData { data, ext: 1 } => {
                let room = STDERR_LIMIT - output.stderr.len();
                output
                    .stderr
                    .extend_from_slice(&data[..data.len().min(room)]);
            }
            ChannelMsg::ExitStatus { exit_status } => {
                output.exit = Some(RemoteExit::Status(exit_status));
            }
            ChannelMsg::ExitSignal {
                signal_name,
                core_dumped,
                ..
            } => {
                output.exit = Some(RemoteExit::Signal {
                    name: signal_label(&signal_name),
                    core_dumped,
                });
            }
            ChannelMsg::Failure => debug!("server refused the exec request"),
            _ => {}
        }
    }
    Ok(output)
}

fn signal_label(signal: &Sig) -> String {
    let name = match signal {
        Sig::ABRT => "ABRT",
        Sig::ALRM => "ALRM",
        Sig::FPE => "FPE",
        Sig::HUP => "HUP",
        Sig::ILL => "ILL",
        Sig::INT => "INT",
        Sig::KILL => "KILL",
        Sig::PIPE => "PIPE",
        Sig::QUIT => "QUIT",
        Sig::SEGV => "SEGV",
        Sig::TERM => "TERM",
        Sig::USR1 => "USR1",
        Sig::Custom(name) => name,
    };
    name.to_string()
}

/// The last non-blank line, trimmed and cut to 200 characters. The last line is the summary:
/// kubectl logs several klog lines (`E1130 ... memcache.go:265] ...`) before "The connection
/// to the server ... was refused", and sudo without `-n` says "a terminal is required" before
/// "a password is required".
fn last_line(stderr: &[u8]) -> String {
    String::from_utf8_lossy(stderr)
        .lines()
        .map(str::trim)
        .rfind(|line| !line.is_empty())
        .unwrap_or_default()
        .chars()
        .take(STDERR_LINE_CHARS)
        .collect()
}

async fn close(handle: client::Handle<HostKeyCheck>) {
    let bye = handle.disconnect(Disconnect::ByApplication, "", "en");
    match timeout(DISCONNECT_GRACE, bye).await {
        Ok(Ok(())) => {}
        // The session may already be gone (the server closed it, or it failed).
        Ok(Err(e)) => debug!(error = %e, "disconnect failed"),
        Err(_) => debug!("disconnect timed out"),
    }
}

/// A duplicate of a connection's socket that shuts the connection down when dropped, so the
/// session task reading from it sees the end of the stream and stops.
struct SocketGuard(std::net::TcpStream);

impl SocketGuard {
    fn take(stream: TcpStream) -> std::io::Result<(TcpStream, SocketGuard)> {
        let std_stream = stream.into_std()?;
        let duplicate = std_stream.try_clone()?;
        Ok((TcpStream::from_std(std_stream)?, SocketGuard(duplicate)))
    }
}

impl Drop for SocketGuard {
    fn drop(&mut self) {
        // Already closed by the peer or by a clean disconnect: nothing to do.
        let _ = self.0.shutdown(std::net::Shutdown::Both);
    }
}

/// Checks the server's host key during key exchange. russh turns a refusal into a bare
/// `UnknownKey`, so the reason is left in `refusal` for the caller.
struct HostKeyCheck {
    /// The cluster, as `known_hosts` spells its id.
    cluster: String,
    host: String,
    port: u16,
    known_hosts: PathBuf,
    policy: HostKeyPolicy,
    lock: Arc<tokio::sync::Mutex<()>>,
    refusal: Arc<StdMutex<Option<NodeListError>>>,
}

impl client::Handler for HostKeyCheck {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        server_key: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        match self.verify(server_key).await {
            Ok(()) => Ok(true),
            Err(refusal) => {
                debug!(error = %refusal, "host key refused");
                *self.refusal.lock().unwrap_or_else(PoisonError::into_inner) = Some(refusal);
                Ok(false)
            }
        }
    }

    // A control node is the tenant's machine: every channel it tries to open towards us (a
    // forwarded port, an agent, X11, a session) is refused. Dropping `reply` rejects it.

    async fn server_channel_open_forwarded_tcpip(
        &mut self,
        _: russh::Channel<client::Msg>,
        _: &str,
        _: u32,
        _: &str,
        _: u32,
        _reply: client::ChannelOpenHandle,
        _: &mut client::Session,
    ) -> Result<(), Self::Error> {
        refused_channel("forwarded-tcpip");
        Ok(())
    }

    async fn server_channel_open_forwarded_streamlocal(
        &mut self,
        _: russh::Channel<client::Msg>,
        _: &str,
        _reply: client::ChannelOpenHandle,
        _: &mut client::Session,
    ) -> Result<(), Self::Error> {
        refused_channel("forwarded-streamlocal");
        Ok(())
    }

    async fn server_channel_open_agent_forward(
        &mut self,
        _: russh::Channel<client::Msg>,
        _reply: client::ChannelOpenHandle,
        _: &mut client::Session,
    ) -> Result<(), Self::Error> {
        refused_channel("agent forwarding");
        Ok(())
    }

    async fn server_channel_open_session(
        &mut self,
        _: russh::Channel<client::Msg>,
        _reply: client::ChannelOpenHandle,
        _: &mut client::Session,
    ) -> Result<(), Self::Error> {
        refused_channel("session");
        Ok(())
    }

    async fn server_channel_open_direct_tcpip(
        &mut self,
        _: russh::Channel<client::Msg>,
        _: &str,
        _: u32,
        _: &str,
        _: u32,
        _reply: client::ChannelOpenHandle,
        _: &mut client::Session,
    ) -> Result<(), Self::Error> {
        refused_channel("direct-tcpip");
        Ok(())
    }

    async fn server_channel_open_direct_streamlocal(
        &mut self,
        _: russh::Channel<client::Msg>,
        _: &str,
        _reply: client::ChannelOpenHandle,
        _: &mut client::Session,
    ) -> Result<(), Self::Error> {
        refused_channel("direct-streamlocal");
        Ok(())
    }

    async fn server_channel_open_x11(
        &mut self,
        _: russh::Channel<client::Msg>,
        _: &str,
        _: u32,
        _reply: client::ChannelOpenHandle,
        _: &mut client::Session,
    ) -> Result<(), Self::Error> {
        refused_channel("x11");
        Ok(())
    }
}

fn refused_channel(kind: &'static str) {
    info!(channel = kind, "the control node opened a channel; refused");
}

impl HostKeyCheck {
    async fn verify(&self, server_key: &PublicKeyOrCertificate) -> Result<(), NodeListError> {
        if self.policy == HostKeyPolicy::Off {
            debug!("host key not checked (ssh.host_key_policy = off)");
            return Ok(());
        }
        let key = match server_key {
            PublicKeyOrCertificate::PublicKey { key, .. } => key,
            PublicKeyOrCertificate::Certificate(_) => {
                return Err(NodeListError::HostCertificate {
                    host: self.host.clone(),
                    port: self.port,
                });
            }
        };
        let _guard = self.lock.lock().await;
        let (text, found) = self.lookup(key)?;
        match found {
            HostKeyMatch::Known => {
                debug!(algorithm = key.algorithm().as_str(), "host key known");
                Ok(())
            }
            // `strict` leaves the operator's file as written: its entries stand for the
            // address, whichever cluster is there.
            HostKeyMatch::Unclaimed { .. } if self.policy == HostKeyPolicy::Strict => {
                debug!(algorithm = key.algorithm().as_str(), "host key known");
                Ok(())
            }
            HostKeyMatch::Unclaimed { lines } => {
                // The key matches an entry for the address: it is trusted whether or not the
                // entry can be marked as the cluster's (a folder the service may not write).
                let claimed = known_hosts::claim(&text, &lines, &self.cluster);
                match known_hosts::replace(&self.known_hosts, &claimed) {
                    Ok(()) => info!(
                        known_hosts = %self.known_hosts.display(),
                        entries = lines.len(),
                        "the host key recorded for the address is now the cluster's"
                    ),
                    Err(e) => warn!(
                        known_hosts = %self.known_hosts.display(),
                        error = %crate::base::error_chain::error_chain(&e),
                        "the host key recorded for the address matches; it cannot be marked as the cluster's, so another cluster at this address later would be trusted with it too: let the service write the file"
                    ),
                }
                Ok(())
            }
            HostKeyMatch::Changed { line, cluster } => Err(NodeListError::HostKeyChanged {
                host: self.host.clone(),
                port: self.port,
                presented: key.algorithm().as_str().to_string(),
                known_hosts: self.known_hosts.clone(),
                line,
                cluster,
            }),
            HostKeyMatch::New if self.policy == HostKeyPolicy::Strict => {
                Err(NodeListError::HostKeyUnknown {
                    host: self.host.clone(),
                    port: self.port,
                    known_hosts: self.known_hosts.clone(),
                })
            }
            HostKeyMatch::New => {
                let line = known_hosts::learned_line(&self.host, self.port, key, &self.cluster)
                    .map_err(|e| self.file_error(e))?;
                known_hosts::append(&self.known_hosts, &line)
                    .map_err(|e| self.file_error(e.into()))?;
                info!(
                    known_hosts = %self.known_hosts.display(),
                    algorithm = key.algorithm().as_str(),
                    "learned the host key of a new cluster"
                );
                Ok(())
            }
        }
    }

    /// The file's text and what it says of `key` for this cluster.
    fn lookup(&self, key: &PublicKey) -> Result<(String, HostKeyMatch), NodeListError> {
        // A symlink is refused, as it is when writing.
        let text = match known_hosts::read_no_follow(&self.known_hosts) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok((String::new(), HostKeyMatch::New));
            }
            Err(e) => return Err(self.file_error(e.into())),
        };
        let recorded = known_hosts::entries_for(&text, &self.host, self.port)
            .map_err(|e| self.file_error(e))?;
        let found = known_hosts::match_host_key(&recorded, &self.cluster, key);
        Ok((text, found))
    }

    fn file_error(&self, source: russh::keys::Error) -> NodeListError {
        NodeListError::KnownHosts {
            path: self.known_hosts.clone(),
            source,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    // Public host keys only (from ssh-keygen); no secrets here.
    pub(crate) const ED25519_A: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGxBFHSA4HziROuowlujBbjRpX7LFBT5aZLdp09KGpFt";
    pub(crate) const ED25519_B: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEOEBH6TGyDlRlFiBgvt8fSNDuhTP0uNeC2yQfxVNruH";

    fn public(line: &str) -> PublicKey {
        PublicKey::from_openssh(line).unwrap()
    }

    #[test]
    fn stdout_is_stopped_past_the_bound_of_lines_or_a_line_too_long() {
        // Two nodes, in pieces that split lines anywhere.
        let mut bound = LineBound::new(2);
        for piece in [&b"node-a  Tr"[..], b"ue\nno", b"de-b  True\n"] {
            assert!(bound.take(piece).is_ok());
        }
        assert!(matches!(bound.take(b"x"), Err(ExecFailure::TooManyLines)));
        let mut bound = LineBound::new(2);
        assert!(matches!(
            bound.take(b"a\nb\nc\nd\n"),
            Err(ExecFailure::TooManyLines)
        ));
        let mut bound = LineBound::new(5_000);
        assert!(bound.take(&[b'a'; LINE_LIMIT]).is_ok());
        assert!(matches!(bound.take(b"a"), Err(ExecFailure::LineTooLong)));
        let mut bound = LineBound::new(5_000);
        let mut line = vec![b'a'; LINE_LIMIT - 1];
        line.push(b'\n');
        assert!(bound.take(&line).is_ok());
    }

    /// Found by the `node_list` fuzz target: the bound let one line more through, for a
    /// header, but no header is a node line (`parse_nodes` refuses every one), so a list of
    /// `max_nodes + 1` nodes was read whole.
    #[test]
    fn no_more_lines_than_the_bound_of_nodes_are_read() {
        let mut bound = LineBound::new(2);
        assert!(bound.take(b"node/a\nnode/b\n").is_ok());
        assert!(matches!(
            bound.take(b"node/c\n"),
            Err(ExecFailure::TooManyLines)
        ));
        let mut bound = LineBound::new(0);
        assert!(bound.take(b"").is_ok());
        assert!(matches!(bound.take(b"n"), Err(ExecFailure::TooManyLines)));
    }

    #[test]
    fn remote_command_rounds_the_bound_up_to_whole_seconds() {
        let cmd = "sudo -n /opt/bin/kubectl get nodes -o name";
        assert_eq!(
            remote_command(cmd, Duration::from_secs(20)),
            "timeout 20s sudo -n /opt/bin/kubectl get nodes -o name"
        );
        assert_eq!(
            remote_command(cmd, Duration::from_millis(20_001)),
            "timeout 21s sudo -n /opt/bin/kubectl get nodes -o name"
        );
        assert_eq!(
            remote_command(cmd, Duration::from_millis(300)),
            "timeout 1s sudo -n /opt/bin/kubectl get nodes -o name"
        );
        assert_eq!(
            remote_command(&format!("  {cmd}\n"), Duration::from_secs(5)),
            "timeout 5s sudo -n /opt/bin/kubectl get nodes -o name"
        );
    }

    #[test]
    fn last_stderr_line_skips_blank_lines_and_is_cut() {
        assert_eq!(last_line(b""), "");
        assert_eq!(last_line(b"\n \n"), "");
        let sudo = b"sudo: a terminal is required to read the password\n  sudo: a password is required\r\n\n";
        assert_eq!(last_line(sudo), "sudo: a password is required");
        assert_eq!(last_line("x".repeat(300).as_bytes()), "x".repeat(200));
    }

    #[test]
    fn signal_labels() {
        assert_eq!(signal_label(&Sig::TERM), "TERM");
        assert_eq!(signal_label(&Sig::Custom("XCPU".into())), "XCPU");
    }

    #[test]
    fn lookup_reports_the_editor_line_of_a_changed_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("known_hosts");
        std::fs::write(
            &path,
            format!(
                "# rebuilt nodes go here\n10.0.0.6 {ED25519_A}\n\
                 [10.0.0.5]:2222 {ED25519_B} cks-drift-cluster=c-1\n"
            ),
        )
        .unwrap();
        let check = HostKeyCheck {
            cluster: "c-1".into(),
            host: "10.0.0.5".into(),
            port: 2222,
            known_hosts: path.clone(),
            policy: HostKeyPolicy::Strict,
            lock: Arc::default(),
            refusal: Arc::default(),
        };
        assert_eq!(
            check.lookup(&public(ED25519_A)).unwrap().1,
            HostKeyMatch::Changed {
                line: 3,
                cluster: Some("c-1".into())
            }
        );
        assert_eq!(
            check.lookup(&public(ED25519_B)).unwrap().1,
            HostKeyMatch::Known
        );
    }
}
