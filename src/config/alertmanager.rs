//! `[alertmanager]`: the Alertmanagers every open finding is also sent to, and how
//! cks-drift authenticates to them.

use std::path::PathBuf;
use std::time::Duration;

use super::Secret;
use super::key::{Default, Key, Kind};
use super::messages::ALERTMANAGER_NO_PASSWORD;
use super::reader::Reader;
use crate::base::net::redacted_url;

/// `[alertmanager]`: where every open finding is also an alert.
#[derive(Debug, Clone)]
pub struct AlertmanagerSettings {
    /// Base URLs of the Alertmanagers of one cluster (`/api/v2/alerts` is added); each gets
    /// every alert.
    pub urls: Vec<String>,
    pub auth: AlertmanagerAuth,
    pub ca_file: Option<PathBuf>,
    pub insecure: bool,
    /// Deadline of one request.
    pub timeout: Duration,
    /// Added to every alert's annotations when set.
    pub runbook_url: Option<String>,
}

/// How cks-drift authenticates to Alertmanager.
#[derive(Debug, Clone)]
pub enum AlertmanagerAuth {
    None,
    Basic { username: String, password: Secret },
    Bearer(Secret),
}

/// An example of `alertmanager.urls`, for its problems.
const URLS_EXAMPLE: &str = "e.g. [\"http://127.0.0.1:9093\"]";

const fn key(name: &'static str, default: Default, doc: &'static str, kind: Kind) -> Key {
    Key {
        table: "alertmanager",
        name,
        default,
        doc,
        kind,
    }
}

pub const URLS: Key = key(
    "urls",
    Default::Unset,
    "the Alertmanagers of one cluster; each gets every alert",
    Kind::List,
);
pub const USERNAME: Key = key(
    "username",
    Default::Unset,
    "the user of basic auth",
    Kind::Text,
);
pub const PASSWORD_FILE: Key = key(
    "password_file",
    Default::Unset,
    "the password of alertmanager.username",
    Kind::Text,
);
pub const BEARER_TOKEN_FILE: Key = key(
    "bearer_token_file",
    Default::Unset,
    "the bearer token the Alertmanagers take",
    Kind::Text,
);
pub const CA_FILE: Key = key(
    "ca_file",
    Default::Unset,
    "PEM bundle of a private CA",
    Kind::Text,
);
pub const INSECURE: Key = key(
    "insecure",
    Default::Is("false"),
    "skip TLS verification",
    Kind::Bool,
);
pub const TIMEOUT: Key = key(
    "timeout",
    Default::Is("10s"),
    "deadline of one request",
    Kind::Duration {
        min: Duration::from_millis(100),
        max: Duration::from_secs(600),
    },
);
pub const RUNBOOK_URL: Key = key(
    "runbook_url",
    Default::Unset,
    "added to every alert's annotations",
    Kind::Text,
);

pub const KEYS: &[&Key] = &[
    &URLS,
    &USERNAME,
    &PASSWORD_FILE,
    &BEARER_TOKEN_FILE,
    &CA_FILE,
    &INSECURE,
    &TIMEOUT,
    &RUNBOOK_URL,
];

impl Reader<'_> {
    /// `[alertmanager]`, when the file has one.
    pub(super) fn alertmanager(&mut self) -> Option<AlertmanagerSettings> {
        self.root.get("alertmanager")?.as_table()?;
        let urls = self.alertmanager_urls();
        let auth = self.alertmanager_auth();
        let runbook_url = self.string(&RUNBOOK_URL).map(|u| u.trim().to_string());
        Some(AlertmanagerSettings {
            urls,
            auth,
            ca_file: self.path(&CA_FILE),
            insecure: self.bool(&INSECURE),
            timeout: self.duration(&TIMEOUT),
            runbook_url,
        })
    }

    /// `alertmanager.urls`: the usable URLs it lists, each without a trailing `/`.
    fn alertmanager_urls(&mut self) -> Vec<String> {
        let name = URLS.full();
        match self.value(&URLS) {
            None => {
                self.problem(
                    &name,
                    format!(
                        "is missing; list the Alertmanagers, {URLS_EXAMPLE}, or remove \
                         [alertmanager]"
                    ),
                );
                Vec::new()
            }
            Some(toml::Value::Array(items)) => {
                let urls = items
                    .iter()
                    .filter_map(|item| self.alertmanager_url(item))
                    .collect();
                if items.is_empty() {
                    self.problem(&name, format!("is empty; {URLS_EXAMPLE}"));
                }
                urls
            }
            Some(other) => {
                self.problem(
                    &name,
                    format!(
                        "must be a list of URLs, not {}; {URLS_EXAMPLE}",
                        other.type_str()
                    ),
                );
                Vec::new()
            }
        }
    }

    /// One item of `alertmanager.urls`: an http:// or https:// URL without credentials, else
    /// `None` and its problem.
    fn alertmanager_url(&mut self, item: &toml::Value) -> Option<String> {
        let parsed = item
            .as_str()
            .map(str::trim)
            .map(|u| (u, reqwest::Url::parse(u)));
        match parsed {
            // Credentials in the URL would be sent as basic auth and shown in every
            // warning naming the URL; the auth keys keep them out of both.
            Some((u, Ok(p))) if !p.username().is_empty() || p.password().is_some() => {
                self.problem(
                    &URLS.full(),
                    format!(
                        "holds {:?}, a URL with a user name or password; remove \
                         \"user:password@\" from it and set alertmanager.username and \
                         alertmanager.password_file (or alertmanager.bearer_token_file) \
                         instead",
                        redacted_url(u)
                    ),
                );
                None
            }
            Some((u, Ok(p))) if matches!(p.scheme(), "http" | "https") => {
                Some(u.trim_end_matches('/').to_string())
            }
            _ => {
                self.problem(
                    &URLS.full(),
                    format!(
                        "holds {}, which is not an http:// or https:// URL; {URLS_EXAMPLE}",
                        redacted_url(&item.to_string())
                    ),
                );
                None
            }
        }
    }

    /// How cks-drift authenticates to the Alertmanagers: basic auth (`username` and
    /// `password_file`), a bearer token, or neither; never both.
    fn alertmanager_auth(&mut self) -> AlertmanagerAuth {
        let username = self.string(&USERNAME);
        let password = self.path(&PASSWORD_FILE);
        let bearer = self.path(&BEARER_TOKEN_FILE);
        match (username, password, bearer) {
            (None, None, None) => AlertmanagerAuth::None,
            (Some(_), _, Some(_)) | (_, Some(_), Some(_)) => {
                self.problem(
                    &BEARER_TOKEN_FILE.full(),
                    "is set together with basic auth (username, password_file); keep one of them",
                );
                AlertmanagerAuth::None
            }
            (None, None, Some(path)) => {
                AlertmanagerAuth::Bearer(self.secret_file(&BEARER_TOKEN_FILE, &path))
            }
            (Some(username), Some(path), None) => AlertmanagerAuth::Basic {
                username,
                password: self.secret_file(&PASSWORD_FILE, &path),
            },
            (Some(_), None, None) => {
                self.problem(&PASSWORD_FILE.full(), ALERTMANAGER_NO_PASSWORD);
                AlertmanagerAuth::None
            }
            (None, Some(_), None) => {
                self.problem(
                    &USERNAME.full(),
                    "is missing while alertmanager.password_file is set",
                );
                AlertmanagerAuth::None
            }
        }
    }
}
