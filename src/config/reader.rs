//! Reading typed values out of the TOML tables by their `Key`: the default and the bounds come
//! from the declaration, and every problem is collected with its full key.

use std::path::PathBuf;
use std::time::Duration;

use super::key::{Key, Kind};
use super::{Problem, Secret};
use crate::base::duration::{human_duration, parse_duration};

/// Reads typed values out of the TOML tables, collecting every problem with its full key.
pub(super) struct Reader<'a> {
    pub(super) root: &'a toml::Table,
    pub(super) problems: Vec<Problem>,
    /// The files secrets were read from, by key.
    pub(super) secret_files: Vec<(String, PathBuf)>,
}

impl<'a> Reader<'a> {
    pub(super) fn new(root: &'a toml::Table) -> Self {
        Reader {
            root,
            problems: Vec::new(),
            secret_files: Vec::new(),
        }
    }

    pub(super) fn problem(&mut self, key: &str, message: impl Into<String>) {
        self.problems.push(Problem {
            key: key.to_string(),
            message: message.into(),
        });
    }

    pub(super) fn value(&self, key: &Key) -> Option<&'a toml::Value> {
        self.root.get(key.table)?.as_table()?.get(key.name)
    }

    /// The string the file gives, `None` when it gives none (or something else, a problem).
    pub(super) fn string(&mut self, key: &Key) -> Option<String> {
        match self.value(key)? {
            toml::Value::String(s) => Some(s.clone()),
            other => {
                self.problem(
                    &key.full(),
                    format!("must be a string, not {}", other.type_str()),
                );
                None
            }
        }
    }

    /// The string the file gives, else the key's default.
    pub(super) fn text(&mut self, key: &Key) -> String {
        self.string(key)
            .unwrap_or_else(|| key.default_text().to_string())
    }

    pub(super) fn bool(&mut self, key: &Key) -> bool {
        let default = key.default_text() == "true";
        self.bool_or(key, default)
    }

    /// A boolean whose default follows from other settings.
    pub(super) fn bool_or(&mut self, key: &Key, default: bool) -> bool {
        match self.value(key) {
            None => default,
            Some(toml::Value::Boolean(b)) => *b,
            Some(other) => {
                self.problem(
                    &key.full(),
                    format!("must be true or false, not {}", other.type_str()),
                );
                default
            }
        }
    }

    pub(super) fn int(&mut self, key: &Key) -> i64 {
        let (min, max) = match key.kind {
            Kind::Int { min, max } => (min, max),
            _ => (i64::MIN, i64::MAX),
        };
        let default = key.default_text().parse().unwrap_or(min);
        match self.value(key) {
            None => default,
            Some(toml::Value::Integer(n)) if (min..=max).contains(n) => *n,
            Some(toml::Value::Integer(n)) => {
                self.problem(
                    &key.full(),
                    format!("is {n}; it must be between {min} and {max}"),
                );
                default
            }
            Some(other) => {
                self.problem(
                    &key.full(),
                    format!("must be a whole number, not {}", other.type_str()),
                );
                default
            }
        }
    }

    /// A duration within the key's bounds.
    pub(super) fn duration(&mut self, key: &Key) -> Duration {
        let (min, max) = match key.kind {
            Kind::Duration { min, max } => (min, max),
            _ => (Duration::ZERO, Duration::MAX),
        };
        let default = parse_duration(key.default_text()).unwrap_or(min);
        let text = self.text(key);
        match parse_duration(&text) {
            Ok(d) if d >= min && d <= max => d,
            Ok(d) if d < min => {
                let min_text = human_duration(min);
                self.problem(
                    &key.full(),
                    format!("is {text:?}; it must be at least {min_text}"),
                );
                default
            }
            Ok(_) => {
                let max_text = human_duration(max);
                self.problem(
                    &key.full(),
                    format!("is {text:?}; it must be at most {max_text}"),
                );
                default
            }
            Err(e) => {
                self.problem(&key.full(), e.to_string());
                default
            }
        }
    }

    pub(super) fn path(&mut self, key: &Key) -> Option<PathBuf> {
        let s = self.string(key)?;
        if s.trim().is_empty() {
            self.problem(&key.full(), "is empty; give a file path");
            return None;
        }
        Some(PathBuf::from(s))
    }

    /// A secret from `inline`, the file `file` names, or the environment (which wins).
    pub(super) fn secret(
        &mut self,
        inline: &Key,
        file: &Key,
        env_name: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Secret {
        if let Some(v) = env(env_name).filter(|v| !v.trim().is_empty()) {
            return Secret::new(v.trim());
        }
        let (key, file_key) = (inline.full(), file.full());
        let inline_value = self.string(inline);
        let path = self.path(file);
        match (inline_value, path) {
            (Some(_), Some(_)) => {
                self.problem(
                    &key,
                    format!("is set together with {file_key}; keep one of them"),
                );
                Secret::new("")
            }
            (Some(v), None) if !v.trim().is_empty() => Secret::new(v.trim()),
            (None, Some(path)) => self.secret_file(file, &path),
            _ => {
                self.problem(
                    &key,
                    format!(
                        "is missing; set {key}, {file_key}, or the environment variable {env_name}"
                    ),
                );
                Secret::new("")
            }
        }
    }

    /// A secret read from the file at `path`, named by `key` when it cannot be read.
    pub(super) fn secret_file(&mut self, key: &Key, path: &std::path::Path) -> Secret {
        let full = key.full();
        self.secret_files.push((full.clone(), path.to_path_buf()));
        match std::fs::read_to_string(path) {
            Ok(v) if !v.trim().is_empty() => Secret::new(v.trim()),
            Ok(_) => {
                self.problem(&full, format!("file {} is empty", path.display()));
                Secret::new("")
            }
            Err(e) => {
                let why = match e.kind() {
                    std::io::ErrorKind::PermissionDenied => {
                        super::secret_file::permission_denied(path)
                    }
                    std::io::ErrorKind::NotFound => format!(
                        "no such file; create it holding {} and nothing else, readable by the \
                         service alone: install -m 0640 -g cks-drift /dev/null {p}, then write \
                         the value into it",
                        key.doc,
                        p = path.display()
                    ),
                    _ => e.to_string(),
                };
                self.problem(&full, format!("cannot read {}: {why}", path.display()));
                Secret::new("")
            }
        }
    }
}
