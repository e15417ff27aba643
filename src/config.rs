//! Configuration: the raw TOML (serde, mirrors the file) and the validated settings the rest
//! of the program uses (`Duration`s, paths, secrets). `Config::from_toml` turns one into the
//! other and reports every problem with its full key.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// A secret value (API key, secret key). `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }

    /// The secret itself, for signing only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// `[cloudstack]`.
#[derive(Debug, Clone)]
pub struct CloudStackSettings {
    /// The API endpoint, e.g. `https://cloud.example.com/client/api`.
    pub url: String,
    pub api_key: Secret,
    pub secret_key: Secret,
    /// Deadline of one HTTP request.
    pub timeout: Duration,
    /// PEM bundle of a private CA that signs the management server's certificate.
    pub ca_file: Option<PathBuf>,
    /// Skip TLS certificate verification (warned about at start).
    pub insecure: bool,
    /// Rows per page of every list call (at most the server's `default.page.size`).
    pub page_size: u32,
}

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
    /// Run on the control node; prints `node/<name>` lines.
    pub command: String,
}

/// `[check]`.
#[derive(Debug, Clone)]
pub struct CheckSettings {
    pub enabled: bool,
    pub interval: Duration,
    pub initial_delay: Duration,
    pub grace_period: Duration,
    /// Clusters checked at once (node listings in flight).
    pub concurrency: usize,
}
