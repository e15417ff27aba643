//! `[cloudstack]`: the API endpoint, the keys cks-drift signs with, and how requests go.

use std::path::PathBuf;
use std::time::Duration;

use super::Secret;
use super::key::{Default, Key, Kind};
use super::reader::Reader;
use crate::base::net::redacted_url;

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

/// Environment variables that override the secret keys (for containers and systemd
/// credentials).
pub const ENV_API_KEY: &str = "CKS_DRIFT_API_KEY";
pub const ENV_SECRET_KEY: &str = "CKS_DRIFT_SECRET_KEY";

/// The warning of a plain `http://` API endpoint, at start and in `validate-config`.
pub const PLAIN_HTTP: &str = "is a plain http:// URL: every request's signature and the answers \
     travel in clear, so anything on the way can read them, replay a request within its expiry \
     and forge answers; use https:// (with cloudstack.ca_file for a private CA)";

/// An example of `cloudstack.url`, for its problems.
const URL_EXAMPLE: &str = "e.g. \"https://cloud.example.com/client/api\"";

const fn key(name: &'static str, default: Default, doc: &'static str, kind: Kind) -> Key {
    Key {
        table: "cloudstack",
        name,
        default,
        doc,
        kind,
    }
}

pub const URL: Key = key("url", Default::Required, "the API endpoint", Kind::Text);
pub const API_KEY: Key = key(
    "api_key",
    Default::Required,
    "the API key (or api_key_file, or CKS_DRIFT_API_KEY)",
    Kind::Text,
);
pub const API_KEY_FILE: Key = key(
    "api_key_file",
    Default::Required,
    "the API key of the CloudStack user cks-drift acts as (an Admin; its keys are under Accounts, \
     the user, Generate keys)",
    Kind::Text,
);
pub const SECRET_KEY: Key = key(
    "secret_key",
    Default::Required,
    "the secret key (or secret_key_file, or CKS_DRIFT_SECRET_KEY)",
    Kind::Text,
);
pub const SECRET_KEY_FILE: Key = key(
    "secret_key_file",
    Default::Required,
    "the secret key of the CloudStack user cks-drift acts as (shown beside its API key)",
    Kind::Text,
);
pub const TIMEOUT: Key = key(
    "timeout",
    Default::Is("30s"),
    "deadline of one request",
    Kind::Duration {
        min: Duration::from_secs(1),
        max: Duration::from_secs(3600),
    },
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
pub const PAGE_SIZE: Key = key(
    "page_size",
    Default::Is("500"),
    "rows per page of every list call",
    Kind::Int {
        min: 1,
        max: 10_000,
    },
);

pub const KEYS: &[&Key] = &[
    &URL,
    &API_KEY,
    &API_KEY_FILE,
    &SECRET_KEY,
    &SECRET_KEY_FILE,
    &TIMEOUT,
    &CA_FILE,
    &INSECURE,
    &PAGE_SIZE,
];

impl Reader<'_> {
    /// `[cloudstack]`.
    pub(super) fn cloudstack(
        &mut self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> CloudStackSettings {
        let url = self.cloudstack_url();
        let api_key = self.secret(&API_KEY, &API_KEY_FILE, ENV_API_KEY, env);
        let secret_key = self.secret(&SECRET_KEY, &SECRET_KEY_FILE, ENV_SECRET_KEY, env);
        CloudStackSettings {
            url,
            api_key,
            secret_key,
            timeout: self.duration(&TIMEOUT),
            ca_file: self.path(&CA_FILE),
            insecure: self.bool(&INSECURE),
            page_size: self.int(&PAGE_SIZE) as u32,
        }
    }

    /// `cloudstack.url`: an http:// or https:// endpoint, without a query string or
    /// credentials. Kept as written (trimmed) even when it has a problem.
    fn cloudstack_url(&mut self) -> String {
        let name = URL.full();
        let Some(u) = self.string(&URL) else {
            self.problem(
                &name,
                format!("is missing; set it to the API endpoint, {URL_EXAMPLE}"),
            );
            return String::new();
        };
        let u = u.trim().to_string();
        // Messages never show a password written into the URL.
        let shown = redacted_url(&u);
        match reqwest::Url::parse(&u) {
            Ok(parsed)
                if matches!(parsed.scheme(), "http" | "https") && parsed.host().is_some() =>
            {
                if parsed.query().is_some() {
                    self.problem(
                        &name,
                        format!(
                            "{shown:?} has a query string; give only the endpoint, {URL_EXAMPLE}"
                        ),
                    );
                }
                // It would be sent as basic auth, and shown in every warning naming
                // the URL; the API takes the API key and secret key only.
                if !parsed.username().is_empty() || parsed.password().is_some() {
                    self.problem(
                        &name,
                        format!(
                            "{shown:?} holds a user name or password; remove \"user:password@\": \
                             CloudStack's API takes the API key and secret key only \
                             (cloudstack.api_key_file, cloudstack.secret_key_file)"
                        ),
                    );
                }
            }
            Ok(_) => {
                self.problem(
                    &name,
                    format!("{shown:?} must be an http:// or https:// URL, {URL_EXAMPLE}"),
                );
            }
            Err(e) => {
                self.problem(
                    &name,
                    format!("{shown:?} is not a URL ({e}); {URL_EXAMPLE}"),
                );
            }
        }
        u
    }
}
