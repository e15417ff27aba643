//! Runs the node-listing command on a control node over SSH: TCP, key exchange with the
//! host key checked against `known_hosts`, public key authentication, one exec. Parsing the
//! output is `remote::kubectl`; choosing the host and user is the caller's.
//!
//! Every step has a deadline: `ssh.connect_timeout` bounds TCP, key exchange and
//! authentication together, `ssh.command_timeout` bounds the command. The command is also
//! bounded on the control node (see [`remote_command`]), because closing the connection does
//! not stop a command that has no terminal.
//!
//! The rooms: this file connects, checks the handshake's deadline and authenticates;
//! `host_key` checks the control node's host key; `command` runs the command and bounds its
//! output; `key` loads the private key.

mod command;
pub(super) mod host_key;
mod key;

use std::collections::HashSet;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex as StdMutex, PoisonError};
use std::time::Duration;

use russh::Disconnect;
use russh::client::{self, AuthResult};
use russh::keys::{HashAlg, PrivateKey, PrivateKeyWithHashAlg};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout, timeout_at};
use tracing::{Instrument, debug, debug_span, info, warn};

use super::known_hosts;
use super::{
    ForgetFuture, Node, NodeListError, NodeListFuture, NodeLister, SshTarget, Stage, parse_nodes,
};
use crate::config::{HostKeyPolicy, SshSettings};
use crate::remote::messages::HOST_KEYS_KEPT;
pub use command::{ExecFailure, LINE_LIMIT, LineBound, remote_command};
use host_key::HostKeyCheck;
pub use key::{KeyError, load_private_key};

/// How long to wait for our disconnect message to go out.
const DISCONNECT_GRACE: Duration = Duration::from_secs(1);

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
                    "{HOST_KEYS_KEPT}"
                ),
            }
        })
    }
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
