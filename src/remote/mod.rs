//! The Kubernetes view of a cluster: the nodes its control node reports (names, readiness,
//! system UUIDs, provider IDs), read over SSH. `ssh` runs the command, `known_hosts` keeps the
//! control nodes' host keys per cluster, `kubectl` parses its output. Which
//! host and user to reach comes from the CloudStack view; comparing the nodes belongs to the
//! diff.

pub mod known_hosts;
pub mod kubectl;
mod messages;
pub mod ssh;

use std::collections::HashSet;
use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

pub use kubectl::{NodeFormat, ParseError, parse_nodes};
pub use ssh::{KeyError, SshNodeLister};

/// A Kubernetes node as the control node listed it. Every field is the tenant's text, checked
/// for shape by `remote::kubectl` and nothing more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Its name, lowercased.
    pub name: String,
    /// `status.nodeInfo.systemUUID`, lowercased: on KVM the VM's CloudStack UUID. `None` when
    /// it is empty or was not listed (an `-o name` command lists names only).
    pub system_uuid: Option<String>,
    /// `spec.providerID` as listed, e.g. `cloudstack:///<vm uuid>` where the CloudStack cloud
    /// provider runs; `None` when it is not set or was not listed.
    pub provider_id: Option<String>,
    /// The status of its `Ready` condition; `None` when it has none or it was not listed
    /// (the command of earlier releases lists no readiness). Shown to the operator only: the
    /// rules compare nodes with VMs whatever their readiness, as CloudStack's check does.
    pub ready: Option<Readiness>,
}

impl Node {
    /// A node known by its name only.
    pub fn named(name: impl Into<String>) -> Self {
        Node {
            name: name.into(),
            system_uuid: None,
            provider_id: None,
            ready: None,
        }
    }
}

#[cfg(test)]
impl Node {
    /// A node listed with these identities and no readiness, for the tests of matching and
    /// parsing.
    pub fn identified(name: &str, system_uuid: Option<&str>, provider_id: Option<&str>) -> Self {
        Node {
            system_uuid: system_uuid.map(str::to_string),
            provider_id: provider_id.map(str::to_string),
            ..Node::named(name)
        }
    }
}

/// The status of a node's `Ready` condition, one of Kubernetes' three condition statuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// `True`: the kubelet is healthy and ready to accept pods.
    Ready,
    /// `False`: the kubelet reports itself not ready (network plugin, runtime, pressure).
    NotReady,
    /// `Unknown`: the node controller stopped hearing from the kubelet (by default after
    /// 40 seconds), as when the VM is stopped or cut off.
    Unknown,
}

impl Readiness {
    /// The condition's status as the API spells it.
    pub fn parse(status: &str) -> Option<Readiness> {
        match status {
            "True" => Some(Readiness::Ready),
            "False" => Some(Readiness::NotReady),
            "Unknown" => Some(Readiness::Unknown),
            _ => None,
        }
    }

    /// As `kubectl get nodes` shows it in its STATUS column, save that `Unknown` is kept
    /// apart from `NotReady`: it says the kubelet went silent, not that it complained.
    pub fn as_str(self) -> &'static str {
        match self {
            Readiness::Ready => "Ready",
            Readiness::NotReady => "NotReady",
            Readiness::Unknown => "Unknown",
        }
    }
}

impl fmt::Display for Readiness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where to log in: a cluster's control node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshTarget {
    /// The cluster's CloudStack id: its control node's host key is trusted for it alone,
    /// not for whichever cluster holds the address later.
    pub cluster_id: String,
    pub host: String,
    pub port: u16,
    pub user: String,
    /// The most node lines read from the command: a longer list is refused as it is read,
    /// never held (see [`node_bound`]).
    pub max_nodes: usize,
}

/// Kubernetes' own limit of nodes in one cluster: no listing is read past it.
pub const MAX_NODES: usize = 5_000;

/// The longest node list compared for a cluster of `vms` VMs: twice its VMs and 20 more (a
/// node per VM, with room for nodes rebuilt by hand), at most [`MAX_NODES`]. A control node
/// that prints more is its tenant's, not Kubernetes': reading stops there.
pub fn node_bound(vms: usize) -> usize {
    (2 * vms + 20).min(MAX_NODES)
}

pub type NodeListFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Vec<Node>, NodeListError>> + Send + 'a>>;

pub type ForgetFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Lists a cluster's Kubernetes nodes (names lowercase). Implementations bound every step with
/// their own deadlines.
pub trait NodeLister: Send + Sync {
    fn list_nodes<'a>(&'a self, target: &'a SshTarget) -> NodeListFuture<'a>;

    /// Forgets what was learned of the clusters not in `listed`: every cluster CloudStack
    /// listed in a cycle whose listing succeeded and was not empty (a key that lost its
    /// rights sees nothing, which is not "every cluster is gone"). Failures are logged.
    fn forget_unlisted<'a>(&'a self, _listed: &'a HashSet<String>) -> ForgetFuture<'a> {
        Box::pin(std::future::ready(()))
    }
}

/// The step of a node listing that ran out of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Name resolution and the TCP connection.
    Connect,
    /// SSH version banner, key exchange and the host key check.
    KeyExchange,
    /// Public key authentication.
    Auth,
    /// Opening the session channel, running the command and reading its output.
    Command,
}

impl Stage {
    /// The setting that bounds this stage.
    pub fn setting(self) -> &'static str {
        match self {
            Stage::Connect | Stage::KeyExchange | Stage::Auth => "ssh.connect_timeout",
            Stage::Command => "ssh.command_timeout",
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stage::Connect => "tcp connect",
            Stage::KeyExchange => "key exchange",
            Stage::Auth => "authentication",
            Stage::Command => "the command",
        })
    }
}

/// How the remote command ended when it did not succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteExit {
    /// It exited with this non-zero status.
    Status(u32),
    /// It was killed by this signal (`TERM`, `KILL`, ...).
    Signal { name: String, core_dumped: bool },
    /// The channel closed without an exit status or signal.
    Unknown,
}

impl fmt::Display for RemoteExit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RemoteExit::Status(status) => write!(f, "exited with status {status}"),
            RemoteExit::Signal { name, core_dumped } => {
                write!(f, "was killed by signal {name}")?;
                if *core_dumped {
                    f.write_str(" (core dumped)")?;
                }
                Ok(())
            }
            RemoteExit::Unknown => f.write_str("ended without an exit status"),
        }
    }
}

/// Why a node listing failed, one variant per step.
#[derive(Debug, thiserror::Error)]
pub enum NodeListError {
    #[error("cannot resolve {host}")]
    Dns {
        host: String,
        #[source]
        source: std::io::Error,
    },
    /// Refused, unreachable, reset.
    #[error("cannot connect to {host}:{port}")]
    Connect {
        host: String,
        port: u16,
        #[source]
        source: std::io::Error,
    },
    #[error("{host}:{port} did not complete {stage} within {after:?} ({})", stage.setting())]
    Timeout {
        host: String,
        port: u16,
        stage: Stage,
        after: Duration,
    },
    #[error(
        "host key of {host}:{port} is not in {} and ssh.host_key_policy is strict",
        known_hosts.display()
    )]
    HostKeyUnknown {
        host: String,
        port: u16,
        known_hosts: PathBuf,
    },
    #[error(
        "host key of {host}:{port} ({presented}) does not match the one recorded{} at {}:{line}; \
         if the node was rebuilt, remove the stale entry (ssh-keygen -R '{}' -f {})",
        recorded_for(cluster.as_deref()),
        known_hosts.display(),
        known_hosts_host(host, *port),
        known_hosts.display()
    )]
    HostKeyChanged {
        host: String,
        port: u16,
        /// Algorithm of the key the server presented.
        presented: String,
        known_hosts: PathBuf,
        /// 1-based line of the recorded entry for this host.
        line: usize,
        /// The cluster the entry was learned for, as the file spells its id; `None` for an
        /// entry without one (written by hand, or before keys were kept per cluster).
        cluster: Option<String>,
    },
    #[error("{host}:{port} presented a host certificate; only plain host keys are supported")]
    HostCertificate { host: String, port: u16 },
    #[error("cannot use known_hosts file {}", path.display())]
    KnownHosts {
        path: PathBuf,
        #[source]
        source: russh::keys::Error,
    },
    #[error(
        "{host}:{port} rejected user {user} with key {} (ssh.private_key, offered as {offered})",
        key_file.display()
    )]
    Auth {
        user: String,
        host: String,
        port: u16,
        key_file: PathBuf,
        /// Signature algorithms tried, e.g. `rsa-sha2-512, rsa-sha2-256`.
        offered: String,
    },
    #[error("ssh session with {host}:{port} failed during {stage}")]
    Ssh {
        host: String,
        port: u16,
        stage: Stage,
        #[source]
        source: russh::Error,
    },
    #[error("command on {host}:{port} {exit}{}", stderr_suffix(stderr))]
    Command {
        host: String,
        port: u16,
        exit: RemoteExit,
        /// Last non-blank line of stderr (the summary, after any log lines), cut to 200
        /// characters; empty if there was none.
        stderr: String,
    },
    #[error("output of the command on {host}:{port} is not a node list")]
    Output {
        host: String,
        port: u16,
        #[source]
        source: ParseError,
    },
    #[error("output of the command on {host}:{port} exceeds {limit} bytes")]
    OutputTooLarge {
        host: String,
        port: u16,
        limit: usize,
    },
    #[error(
        "the command on {host}:{port} printed more than {max_nodes} node lines, more than the \
         cluster can have (twice its VMs and 20 more); the list is not compared"
    )]
    TooManyNodes {
        host: String,
        port: u16,
        max_nodes: usize,
    },
    #[error(
        "the command on {host}:{port} printed a line longer than {limit} bytes, which no node \
         line is"
    )]
    LineTooLong {
        host: String,
        port: u16,
        limit: usize,
    },
}

fn recorded_for(cluster: Option<&str>) -> String {
    cluster.map_or_else(String::new, |c| format!(" for cluster {c}"))
}

fn stderr_suffix(stderr: &str) -> String {
    if stderr.is_empty() {
        " (no stderr)".to_string()
    } else {
        format!(": {stderr}")
    }
}

impl NodeListError {
    /// A short stable label for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            NodeListError::Dns { .. } | NodeListError::Connect { .. } => "connect",
            NodeListError::Timeout { .. } => "timeout",
            NodeListError::HostKeyUnknown { .. }
            | NodeListError::HostKeyChanged { .. }
            | NodeListError::HostCertificate { .. }
            | NodeListError::KnownHosts { .. } => "host_key",
            NodeListError::Auth { .. } => "auth",
            NodeListError::Ssh { stage, .. } => match stage {
                Stage::Connect | Stage::KeyExchange => "connect",
                Stage::Auth => "auth",
                Stage::Command => "command",
            },
            NodeListError::Command { .. } => "command",
            NodeListError::Output { .. }
            | NodeListError::OutputTooLarge { .. }
            | NodeListError::TooManyNodes { .. }
            | NodeListError::LineTooLong { .. } => "output",
        }
    }
}

/// How `known_hosts` (and `ssh-keygen -R`) spells a host: `host` for port 22, `[host]:port`
/// otherwise.
pub fn known_hosts_host(host: &str, port: u16) -> String {
    if port == 22 {
        host.to_string()
    } else {
        format!("[{host}]:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(kind: std::io::ErrorKind) -> std::io::Error {
        std::io::Error::from(kind)
    }

    #[test]
    fn known_hosts_host_form() {
        assert_eq!(known_hosts_host("10.0.0.5", 22), "10.0.0.5");
        assert_eq!(known_hosts_host("10.0.0.5", 2222), "[10.0.0.5]:2222");
    }

    #[test]
    fn changed_host_key_message_says_what_to_do() {
        let err = NodeListError::HostKeyChanged {
            host: "10.0.0.5".into(),
            port: 2222,
            presented: "ssh-ed25519".into(),
            known_hosts: "/var/lib/cks-drift/known_hosts".into(),
            line: 3,
            cluster: Some("5a1e7c52-0b8f-4f0e-9d3e-0c7f0f2a9b11".into()),
        };
        assert_eq!(
            err.to_string(),
            "host key of 10.0.0.5:2222 (ssh-ed25519) does not match the one recorded for \
             cluster 5a1e7c52-0b8f-4f0e-9d3e-0c7f0f2a9b11 at /var/lib/cks-drift/known_hosts:3; \
             if the node was rebuilt, remove the stale entry \
             (ssh-keygen -R '[10.0.0.5]:2222' -f /var/lib/cks-drift/known_hosts)"
        );
        assert_eq!(err.reason(), "host_key");
        let unclaimed = NodeListError::HostKeyChanged {
            host: "10.0.0.5".into(),
            port: 22,
            presented: "ssh-rsa".into(),
            known_hosts: "/var/lib/cks-drift/known_hosts".into(),
            line: 1,
            cluster: None,
        };
        assert_eq!(
            unclaimed.to_string(),
            "host key of 10.0.0.5:22 (ssh-rsa) does not match the one recorded at \
             /var/lib/cks-drift/known_hosts:1; if the node was rebuilt, remove the stale entry \
             (ssh-keygen -R '10.0.0.5' -f /var/lib/cks-drift/known_hosts)"
        );
    }

    #[test]
    fn auth_message_names_user_host_and_key() {
        let err = NodeListError::Auth {
            user: "cloud".into(),
            host: "10.0.0.5".into(),
            port: 22,
            key_file: "/etc/cks-drift/id_rsa".into(),
            offered: "rsa-sha2-512, rsa-sha2-256".into(),
        };
        assert_eq!(
            err.to_string(),
            "10.0.0.5:22 rejected user cloud with key /etc/cks-drift/id_rsa \
             (ssh.private_key, offered as rsa-sha2-512, rsa-sha2-256)"
        );
    }

    #[test]
    fn command_message_carries_exit_and_stderr() {
        let failed = |exit, stderr: &str| NodeListError::Command {
            host: "10.0.0.5".into(),
            port: 22,
            exit,
            stderr: stderr.into(),
        };
        assert_eq!(
            failed(RemoteExit::Status(1), "sudo: a password is required").to_string(),
            "command on 10.0.0.5:22 exited with status 1: sudo: a password is required"
        );
        assert_eq!(
            failed(
                RemoteExit::Signal {
                    name: "KILL".into(),
                    core_dumped: false
                },
                ""
            )
            .to_string(),
            "command on 10.0.0.5:22 was killed by signal KILL (no stderr)"
        );
        assert_eq!(
            failed(RemoteExit::Unknown, "").to_string(),
            "command on 10.0.0.5:22 ended without an exit status (no stderr)"
        );
    }

    #[test]
    fn timeout_message_names_stage_and_setting() {
        let err = NodeListError::Timeout {
            host: "10.0.0.5".into(),
            port: 22,
            stage: Stage::KeyExchange,
            after: Duration::from_secs(10),
        };
        assert_eq!(
            err.to_string(),
            "10.0.0.5:22 did not complete key exchange within 10s (ssh.connect_timeout)"
        );
    }

    #[test]
    fn reasons_are_stable_labels() {
        let h = || "h".to_string();
        let cases: Vec<(NodeListError, &str)> = vec![
            (
                NodeListError::Dns {
                    host: h(),
                    source: io(std::io::ErrorKind::NotFound),
                },
                "connect",
            ),
            (
                NodeListError::Connect {
                    host: h(),
                    port: 22,
                    source: io(std::io::ErrorKind::ConnectionRefused),
                },
                "connect",
            ),
            (
                NodeListError::Timeout {
                    host: h(),
                    port: 22,
                    stage: Stage::Command,
                    after: Duration::from_secs(1),
                },
                "timeout",
            ),
            (
                NodeListError::HostKeyUnknown {
                    host: h(),
                    port: 22,
                    known_hosts: "k".into(),
                },
                "host_key",
            ),
            (
                NodeListError::HostCertificate {
                    host: h(),
                    port: 22,
                },
                "host_key",
            ),
            (
                NodeListError::KnownHosts {
                    path: "k".into(),
                    source: io(std::io::ErrorKind::PermissionDenied).into(),
                },
                "host_key",
            ),
            (
                NodeListError::Ssh {
                    host: h(),
                    port: 22,
                    stage: Stage::KeyExchange,
                    source: russh::Error::Disconnect,
                },
                "connect",
            ),
            (
                NodeListError::Ssh {
                    host: h(),
                    port: 22,
                    stage: Stage::Auth,
                    source: russh::Error::Disconnect,
                },
                "auth",
            ),
            (
                NodeListError::Ssh {
                    host: h(),
                    port: 22,
                    stage: Stage::Command,
                    source: russh::Error::Disconnect,
                },
                "command",
            ),
            (
                NodeListError::Output {
                    host: h(),
                    port: 22,
                    source: ParseError {
                        line: 1,
                        excerpt: "x".into(),
                        format: NodeFormat::Columns,
                    },
                },
                "output",
            ),
            (
                NodeListError::OutputTooLarge {
                    host: h(),
                    port: 22,
                    limit: 1,
                },
                "output",
            ),
        ];
        for (err, reason) in cases {
            assert_eq!(err.reason(), reason, "{err}");
        }
    }
}
