//! `validate-config`: every problem of a config file at once, each on its own line with its
//! full key and a fix; warnings about risky settings; and with `--connect`, one API call and
//! one SSH login to show that the credentials work, naming the step that failed.
//!
//! Parsing and validating the settings belongs to `config` (reused here as is); this module
//! adds the checks that read the files the config names, the warnings, and the connection
//! test. It changes nothing, except that `accept-new` may learn a host key, as a check would.
//!
//! Its parts: `files` (the files the config names: unusable, or readable by others),
//! `warnings` and `command` (settings that work but are risky), `rules` (`[[ignore]]` rules
//! that match nothing or more than meant), and the connection test (`connect`, in the order of
//! its steps: `cloudstack`, `ssh`, `database`), with `socket` (whether `run` would serve a
//! socket systemd passes).

use std::fmt;
use std::io::Write;
use std::path::Path;

use crate::base::untrusted::controls_escaped;
use crate::config::{Config, ConfigError};
use crate::daemon::listen::passed_fds;

mod cloudstack;
mod command;
mod connect;
mod database;
mod files;
mod rules;
mod socket;
mod ssh;
mod warnings;

pub use command::{lists_names_only, lists_no_readiness, shell_syntax};
pub use connect::connect;
pub use rules::{cluster_rule_warnings, unmatched_rules};
pub use socket::passed_socket;
pub use warnings::SHORT_GRACE;

use files::{file_errors, permission_warnings};
use warnings::setting_warnings;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// The daemon would refuse to start, or a check would fail.
    Error,
    /// Works, but is risky or probably not meant.
    Warning,
    /// A connection test that succeeded.
    Ok,
}

/// One line of the result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub severity: Severity,
    /// The full key (`check.grace_period`), or the step of a connection test; `None` for the
    /// file as a whole.
    pub key: Option<String>,
    /// What is wrong, then what to do.
    pub message: String,
}

impl Finding {
    fn new(severity: Severity, key: &str, message: impl Into<String>) -> Self {
        Finding {
            severity,
            key: Some(key.to_string()),
            message: message.into(),
        }
    }

    fn error(key: &str, message: impl Into<String>) -> Self {
        Finding::new(Severity::Error, key, message)
    }

    fn warning(key: &str, message: impl Into<String>) -> Self {
        Finding::new(Severity::Warning, key, message)
    }
}

/// One line, with no control character whatever the finding quotes: tenant text is escaped
/// where it is quoted (with its backslashes doubled, so that it cannot forge an escape), and
/// this is the guard for any text that was not, without escaping twice what already was.
impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let label = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Ok => "ok",
        };
        let message = controls_escaped(&self.message);
        match &self.key {
            Some(key) => write!(f, "{label}: {}: {message}", controls_escaped(key)),
            None => write!(f, "{label}: {message}"),
        }
    }
}

/// The findings about a config text, errors first, and the validated config when it has no
/// error of its own. `env` looks up environment variables (a seam for tests).
pub fn check_text(
    text: &str,
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> (Vec<Finding>, Option<Config>) {
    let mut findings = Vec::new();
    let config = match Config::from_toml(text, path, env) {
        Ok(c) => Some(c),
        Err(ConfigError::Invalid { problems, .. }) => {
            findings.extend(
                problems
                    .into_iter()
                    .map(|p| Finding::error(&p.key, p.message)),
            );
            None
        }
        Err(other) => return (vec![whole_file(other.to_string())], None),
    };
    let Ok(raw) = text.parse::<toml::Table>() else {
        let message = format!("config file {} is not valid TOML", path.display());
        return (vec![whole_file(message)], None);
    };
    let raw = Raw(&raw);
    findings.extend(file_errors(&raw));
    let usable = findings.is_empty();
    findings.extend(setting_warnings(&raw));
    findings.extend(permission_warnings(&raw, path, env));
    if let Some(c) = &config {
        findings.extend(
            crate::state::ignore::expiry_warnings(&c.ignore, crate::base::time::Timestamp::now())
                .into_iter()
                .map(|(key, message)| Finding::warning(&key, message)),
        );
    }
    (findings, config.filter(|_| usable))
}

/// An error about the file as a whole.
fn whole_file(message: String) -> Finding {
    Finding {
        severity: Severity::Error,
        key: None,
        message,
    }
}

/// Reads and checks a config file.
pub fn check_file(path: &Path) -> (Vec<Finding>, Option<Config>) {
    match std::fs::read_to_string(path) {
        Ok(text) => check_text(&text, path, &|name| std::env::var(name).ok()),
        Err(_) => {
            // `load` words the reasons (missing, permission denied).
            let message = match Config::load(path) {
                Err(e) => e.to_string(),
                Ok(_) => format!("cannot read config file {}", path.display()),
            };
            (vec![whole_file(message)], None)
        }
    }
}

/// The raw TOML, read leniently: a value of the wrong type is `None` here (`config` reports
/// it).
struct Raw<'a>(&'a toml::Table);

impl Raw<'_> {
    fn value(&self, key: &str) -> Option<&toml::Value> {
        let (table, name) = key.split_once('.')?;
        self.0.get(table)?.as_table()?.get(name)
    }

    fn str(&self, key: &str) -> Option<&str> {
        self.value(key)?.as_str()
    }

    /// A non-empty path setting.
    fn path(&self, key: &str) -> Option<&Path> {
        self.str(key)
            .filter(|s| !s.trim().is_empty())
            .map(Path::new)
    }
}

/// Runs `validate-config` and returns the exit code: 2 on any error, else 0.
pub async fn run(path: &Path, connect_too: bool, out: &mut dyn Write) -> i32 {
    let (mut findings, config) = check_file(path);
    let var = |name: &str| std::env::var(name).ok();
    let passed = passed_fds(
        std::process::id(),
        var("LISTEN_PID").as_deref(),
        var("LISTEN_FDS").as_deref(),
        var("LISTEN_FDNAMES").as_deref(),
    );
    findings.extend(passed_socket(passed));
    let has_errors = |f: &[Finding]| f.iter().any(|f| f.severity == Severity::Error);
    let mut skipped = None;
    if connect_too {
        match &config {
            Some(c) => {
                findings.extend(connect(c).await);
                if let Some(db) = &c.database {
                    findings.extend(database::connect(db).await);
                }
            }
            None => {
                skipped = Some("--connect was skipped: fix the errors above first");
            }
        }
    }
    let count = |s: Severity| findings.iter().filter(|f| f.severity == s).count();
    let (errors, warnings) = (count(Severity::Error), count(Severity::Warning));
    let mut text = String::new();
    for f in &findings {
        text.push_str(&f.to_string());
        text.push('\n');
    }
    if let Some(s) = skipped {
        text.push_str(s);
        text.push('\n');
    }
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let summary = match (errors, warnings) {
        (0, 0) => format!("config file {} is valid", path.display()),
        (0, w) => format!(
            "config file {} is valid, with {}",
            path.display(),
            plural(w, "warning", "warnings")
        ),
        (e, w) => format!(
            "config file {}: {}, {}; fix the errors and run validate-config again",
            path.display(),
            plural(e, "error", "errors"),
            plural(w, "warning", "warnings")
        ),
    };
    text.push_str(&summary);
    text.push('\n');
    let _ = out.write_all(text.as_bytes());
    if has_errors(&findings) {
        crate::front::report::exit::CANNOT_RUN
    } else {
        crate::front::report::exit::MATCHES
    }
}

#[cfg(test)]
mod tests;
