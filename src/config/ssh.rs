//! `[ssh]`: the key, user and host-key policy of the logins to the control nodes, and the
//! command that lists a cluster's nodes there.

use std::path::PathBuf;
use std::time::Duration;

use super::key::{Default, Key, Kind};
use super::reader::Reader;

/// How the SSH host key of a control node is checked against `known_hosts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostKeyPolicy {
    /// Only hosts already in `known_hosts`, with the same key.
    Strict,
    /// Learn a host seen for the first time; refuse a changed key.
    AcceptNew,
    /// No check at all (what CloudStack itself does).
    Off,
}

/// `[ssh]`.
#[derive(Debug, Clone)]
pub struct SshSettings {
    pub private_key: PathBuf,
    /// Fallback login user when the first mapped VM has no `controlNodeLoginUser` detail.
    pub user: String,
    pub known_hosts: PathBuf,
    pub host_key_policy: HostKeyPolicy,
    /// TCP connect, key exchange and authentication.
    pub connect_timeout: Duration,
    /// The remote command, from exec to exit.
    pub command_timeout: Duration,
    /// Run on the control node; prints a node per line: name, system UUID and provider ID
    /// columns, or `node/<name>` (names only).
    pub command: String,
}

pub const DEFAULT_KNOWN_HOSTS: &str = "/var/lib/cks-drift/known_hosts";
/// Lists each node's name, readiness, system UUID and provider ID
/// (`remote::kubectl::LIST_ARGUMENTS`).
pub const DEFAULT_COMMAND: &str = "sudo -n /opt/bin/kubectl get nodes --no-headers \
    -o 'custom-columns=NAME:.metadata.name,READY:.status.conditions[?(@.type==\"Ready\")].status,\
    UUID:.status.nodeInfo.systemUUID,PROVIDER:.spec.providerID'";

/// The problem of a config without `ssh.private_key`.
const PRIVATE_KEY_MISSING: &str = "is missing; point it at the management server's key \
     (/var/lib/cloudstack/management/.ssh/id_rsa on Debian/Ubuntu packages, \
     /var/cloudstack/management/.ssh/id_rsa on EL) or the private half of the cluster's key pair";

/// The warning of `ssh.host_key_policy = "off"`, at start and in `validate-config`.
pub const HOST_KEYS_OFF: &str = "is \"off\": any host key is accepted, so a machine posing as a \
     control node is trusted; use \"accept-new\" (the default) or \"strict\"";

const fn key(name: &'static str, default: Default, doc: &'static str, kind: Kind) -> Key {
    Key {
        table: "ssh",
        name,
        default,
        doc,
        kind,
    }
}

pub const PRIVATE_KEY: Key = key(
    "private_key",
    Default::Required,
    "SSH key for the control nodes",
    Kind::Text,
);
pub const USER: Key = key(
    "user",
    Default::Is("cloud"),
    "login user when the VM has no controlNodeLoginUser detail",
    Kind::Text,
);
pub const KNOWN_HOSTS: Key = key(
    "known_hosts",
    Default::Is(DEFAULT_KNOWN_HOSTS),
    "control node host keys, per cluster",
    Kind::Text,
);
pub const HOST_KEY_POLICY: Key = key(
    "host_key_policy",
    Default::Is("accept-new"),
    "strict, accept-new or off",
    Kind::Text,
);
pub const CONNECT_TIMEOUT: Key = key(
    "connect_timeout",
    Default::Is("10s"),
    "TCP, key exchange and authentication",
    Kind::Duration {
        min: Duration::from_millis(100),
        max: Duration::from_secs(600),
    },
);
pub const COMMAND_TIMEOUT: Key = key(
    "command_timeout",
    Default::Is("20s"),
    "the remote command, also bounded remotely with timeout",
    Kind::Duration {
        min: Duration::from_secs(1),
        max: Duration::from_secs(3600),
    },
);
pub const COMMAND: Key = key(
    "command",
    Default::Is(DEFAULT_COMMAND),
    "prints one node a line",
    Kind::Text,
);

pub const KEYS: &[&Key] = &[
    &PRIVATE_KEY,
    &USER,
    &KNOWN_HOSTS,
    &HOST_KEY_POLICY,
    &CONNECT_TIMEOUT,
    &COMMAND_TIMEOUT,
    &COMMAND,
];

impl Reader<'_> {
    /// `[ssh]`.
    pub(super) fn ssh(&mut self) -> SshSettings {
        let private_key = self.path(&PRIVATE_KEY).unwrap_or_else(|| {
            if self.value(&PRIVATE_KEY).is_none() {
                self.problem(&PRIVATE_KEY.full(), PRIVATE_KEY_MISSING);
            }
            PathBuf::new()
        });
        let host_key_policy = self.host_key_policy();
        let user = self.text(&USER);
        if user.trim().is_empty() {
            self.problem(&USER.full(), "is empty; CKS nodes use \"cloud\"");
        }
        let command = self.text(&COMMAND);
        if command.trim().is_empty() {
            self.problem(
                &COMMAND.full(),
                format!("is empty; the default is {DEFAULT_COMMAND:?}"),
            );
        }
        SshSettings {
            private_key,
            user,
            known_hosts: self
                .path(&KNOWN_HOSTS)
                .unwrap_or_else(|| DEFAULT_KNOWN_HOSTS.into()),
            host_key_policy,
            connect_timeout: self.duration(&CONNECT_TIMEOUT),
            command_timeout: self.duration(&COMMAND_TIMEOUT),
            command,
        }
    }

    /// `ssh.host_key_policy`, `accept-new` when it is not set.
    fn host_key_policy(&mut self) -> HostKeyPolicy {
        match self.string(&HOST_KEY_POLICY).as_deref() {
            None | Some("accept-new") => HostKeyPolicy::AcceptNew,
            Some("strict") => HostKeyPolicy::Strict,
            Some("off") => HostKeyPolicy::Off,
            Some(other) => {
                self.problem(
                    &HOST_KEY_POLICY.full(),
                    format!("is {other:?}; use \"strict\", \"accept-new\" or \"off\""),
                );
                HostKeyPolicy::AcceptNew
            }
        }
    }
}
