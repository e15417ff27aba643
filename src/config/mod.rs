//! Configuration: the validated settings the rest of the program uses (`Duration`s, paths,
//! secrets), read from the TOML file by `Config::from_toml`, which reports every problem with
//! its full key.
//!
//! Each table has a file that declares its keys once (`key::Key`: name, default, bounds, what
//! it holds) and reads them into its settings type; `key` derives the keys each table takes
//! and the problems of unknown ones from those declarations, and `reader` reads a value by its
//! declaration.

pub mod alertmanager;
pub mod check;
pub mod cloudstack;
pub mod database;
pub mod http;
pub mod ignore;
pub mod key;
pub mod log;
mod messages;
pub mod notify;
mod reader;
pub mod secret_file;
pub mod ssh;
pub mod state;
pub mod tables;

use std::fmt;
use std::path::PathBuf;

use messages::NO_CONFIG_FILE;

pub use alertmanager::{AlertmanagerAuth, AlertmanagerSettings};
pub use check::{CheckSettings, DEFAULT_BLIND_AFTER};
pub use cloudstack::{CloudStackSettings, ENV_API_KEY, ENV_SECRET_KEY, PLAIN_HTTP};
pub use database::{DatabaseSettings, ENV_DB_PASSWORD, database_in_clear, parse_database_url};
pub use http::{DEFAULT_LISTEN, HttpSettings};
pub use ignore::{IgnoreRule, KIND_NAMES, parse_expiry};
pub use log::{LogFormat, LogSettings};
pub use notify::{
    DEFAULT_STORM_CLUSTERS, NotifySettings, STORM_MIN_CLUSTERS, StormThreshold,
    parse_storm_clusters,
};
pub use ssh::{DEFAULT_COMMAND, DEFAULT_KNOWN_HOSTS, HOST_KEYS_OFF, HostKeyPolicy, SshSettings};
pub use state::{DEFAULT_STATE_PATH, StateSettings};

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

/// The whole validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub cloudstack: CloudStackSettings,
    pub ssh: SshSettings,
    pub check: CheckSettings,
    pub state: StateSettings,
    pub notify: NotifySettings,
    pub http: HttpSettings,
    pub log: LogSettings,
    /// `None` without a `[database]` table: everything is read through the API.
    pub database: Option<DatabaseSettings>,
    /// `None` without an `[alertmanager]` table.
    pub alertmanager: Option<AlertmanagerSettings>,
    /// `[[ignore]]`: drift an operator has accepted, in file order.
    pub ignore: Vec<IgnoreRule>,
    /// The files secrets were read from (`cloudstack.api_key_file`, ...), by key: their
    /// access is checked at start as `validate-config` checks it.
    pub secret_files: Vec<(String, PathBuf)>,
}

/// One problem with the configuration, named by its full key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub key: String,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

/// Why a configuration could not be used: every problem found, not just the first.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {reason}")]
    Read { path: PathBuf, reason: String },
    #[error("config file {path} is not valid TOML: {detail}")]
    Syntax { path: PathBuf, detail: String },
    #[error("config file {}{}", path.display(), list_problems(problems))]
    Invalid {
        path: PathBuf,
        problems: Vec<Problem>,
    },
}

/// One problem on the same line; several on lines of their own below a count.
fn list_problems(problems: &[Problem]) -> String {
    match problems {
        [one] => format!(": {one}"),
        _ => format!(
            " has {} problems:\n{}",
            problems.len(),
            problems
                .iter()
                .map(|p| format!("  {p}"))
                .collect::<Vec<_>>()
                .join("\n")
        ),
    }
}

/// A TOML error on one line: where it is, then what is wrong (the source excerpt between
/// them is left out).
fn one_line(e: &toml::de::Error) -> String {
    let text = e.to_string();
    let place = text.lines().next().unwrap_or("").trim();
    let what = e.message().split_whitespace().collect::<Vec<_>>().join(" ");
    if place.is_empty() || place == what {
        what
    } else {
        format!("{place}: {what}")
    }
}

impl Config {
    /// Reads and validates a config file; secrets may come from the process environment.
    pub fn load(path: &std::path::Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.to_path_buf(),
            reason: match e.kind() {
                std::io::ErrorKind::NotFound => NO_CONFIG_FILE.into(),
                std::io::ErrorKind::PermissionDenied => secret_file::permission_denied(path),
                _ => e.to_string(),
            },
        })?;
        Config::from_toml(&text, path, &|name| std::env::var(name).ok())
    }

    /// Validates a config text. `env` looks up environment variables (a seam for tests).
    pub fn from_toml(
        text: &str,
        path: &std::path::Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let root: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| ConfigError::Syntax {
                path: path.to_path_buf(),
                detail: one_line(&e),
            })?;
        let mut r = reader::Reader::new(&root);
        tables::unknown_keys(&mut r);
        // The tables are read in this order, and their problems are listed in it.
        let cloudstack = r.cloudstack(env);
        let ssh = r.ssh();
        let check = r.check();
        let state = r.state();
        let notify = r.notify(&state.path);
        let http = r.http();
        let log = r.log();
        let database = r.database(env);
        let alertmanager = r.alertmanager();
        let ignore = r.ignore_rules();

        if r.problems.is_empty() {
            Ok(Config {
                cloudstack,
                ssh,
                check,
                state,
                notify,
                http,
                log,
                database,
                alertmanager,
                ignore,
                secret_files: r.secret_files,
            })
        } else {
            Err(ConfigError::Invalid {
                path: path.to_path_buf(),
                problems: r.problems,
            })
        }
    }
}

#[cfg(test)]
mod listed;
#[cfg(test)]
mod tests;
