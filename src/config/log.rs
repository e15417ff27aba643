//! `[log]`: the filter and the format of the log.

use super::key::{Default, Key, Kind};
use super::reader::Reader;

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// `[log]`.
#[derive(Debug, Clone)]
pub struct LogSettings {
    /// A tracing filter directive, e.g. `info` or `cks_drift=debug`; `RUST_LOG` overrides it.
    pub level: String,
    pub format: LogFormat,
}

pub const LEVEL: Key = Key {
    table: "log",
    name: "level",
    default: Default::Is("info"),
    doc: "a tracing filter; RUST_LOG wins",
    kind: Kind::Text,
};
pub const FORMAT: Key = Key {
    table: "log",
    name: "format",
    default: Default::Is("text"),
    doc: "text or json",
    kind: Kind::Text,
};

pub const KEYS: &[&Key] = &[&LEVEL, &FORMAT];

impl Reader<'_> {
    /// `[log]`.
    pub(super) fn log(&mut self) -> LogSettings {
        let format = match self.string(&FORMAT).as_deref() {
            None | Some("text") => LogFormat::Text,
            Some("json") => LogFormat::Json,
            Some(other) => {
                self.problem(
                    &FORMAT.full(),
                    format!("is {other:?}; use \"text\" or \"json\""),
                );
                LogFormat::Text
            }
        };
        let log = LogSettings {
            level: self.text(&LEVEL),
            format,
        };
        if tracing_subscriber::EnvFilter::try_new(&log.level).is_err() {
            self.problem(
                &LEVEL.full(),
                format!(
                    "{:?} is not a log filter; use e.g. \"info\" or \"debug\"",
                    log.level
                ),
            );
        }
        log
    }
}
