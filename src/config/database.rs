//! `[database]`: the CloudStack database, read for the exact VM map and for the lock that lets
//! one of several instances check at a time; its URL and its password.

use std::path::PathBuf;
use std::time::Duration;

use super::Secret;
use super::key::{Default, Key, Kind};
use super::reader::Reader;
use crate::base::net::{is_loopback, redacted_url};

/// `[database]`: the CloudStack database, read for the exact VM map and for the lock that lets
/// one of several instances check at a time.
#[derive(Debug, Clone, PartialEq)]
pub struct DatabaseSettings {
    /// `mysql://user@host:port/name` as configured (it holds no password).
    pub url: String,
    pub host: String,
    pub port: u16,
    pub user: String,
    /// The database name, `cloud` in CloudStack's packages.
    pub name: String,
    pub password: Secret,
    /// Encrypt the connection and verify the server's certificate.
    pub tls: bool,
    /// PEM bundle of the CA that signs the database server's certificate (implies `tls`).
    pub ca_file: Option<PathBuf>,
    /// The name the server's certificate is checked against, when it is not the URL's host
    /// (implies `tls`).
    pub tls_server_name: Option<String>,
    /// TCP connect and login.
    pub connect_timeout: Duration,
    /// One query, from sending it to its last row.
    pub query_timeout: Duration,
    /// How often a standby instance asks for the lock, and the active one confirms it holds it.
    pub lock_interval: Duration,
}

/// The environment variable that gives the database password (it wins over `password_file`).
pub const ENV_DB_PASSWORD: &str = "CKS_DRIFT_DB_PASSWORD";

/// The warning of `database.tls = false` for a database on another host, at start and in
/// `validate-config`.
pub fn database_in_clear(host: &str) -> String {
    format!(
        "is false while the database is on {host}: the password, the VM map and the lock's \
         answers travel in clear and can be read or changed on the way; remove the line (TLS \
         is on by default for a host other than loopback), with database.ca_file for a private CA"
    )
}

/// An example of `database.url`, for its problems.
const URL_EXAMPLE: &str = "e.g. \"mysql://cksdrift@db.example.com:3306/cloud\"";

const fn key(name: &'static str, default: Default, doc: &'static str, kind: Kind) -> Key {
    Key {
        table: "database",
        name,
        default,
        doc,
        kind,
    }
}

pub const URL: Key = key(
    "url",
    Default::Unset,
    "mysql://user@host:port/name, no password in it",
    Kind::Text,
);
pub const PASSWORD_FILE: Key = key(
    "password_file",
    Default::Required,
    "the password of the database user",
    Kind::Text,
);
pub const TLS: Key = key(
    "tls",
    Default::Derived("on for a host other than loopback, and with `ca_file` or `tls_server_name`"),
    "encrypt and verify the connection",
    Kind::Bool,
);
pub const CA_FILE: Key = key(
    "ca_file",
    Default::Unset,
    "PEM bundle of the CA that signs the database server's certificate",
    Kind::Text,
);
pub const TLS_SERVER_NAME: Key = key(
    "tls_server_name",
    Default::Unset,
    "the name the server's certificate must hold, when it is not the URL's host",
    Kind::Text,
);
pub const CONNECT_TIMEOUT: Key = key(
    "connect_timeout",
    Default::Is("10s"),
    "TCP connect and login",
    Kind::Duration {
        min: Duration::from_millis(100),
        max: Duration::from_secs(600),
    },
);
pub const QUERY_TIMEOUT: Key = key(
    "query_timeout",
    Default::Is("30s"),
    "one query, from sending it to its last row",
    Kind::Duration {
        min: Duration::from_secs(1),
        max: Duration::from_secs(3600),
    },
);
pub const LOCK_INTERVAL: Key = key(
    "lock_interval",
    Default::Is("5s"),
    "how often a standby asks for the lock and the active instance confirms it",
    Kind::Duration {
        min: Duration::from_millis(100),
        max: Duration::from_secs(600),
    },
);

pub const KEYS: &[&Key] = &[
    &URL,
    &PASSWORD_FILE,
    &TLS,
    &CA_FILE,
    &TLS_SERVER_NAME,
    &CONNECT_TIMEOUT,
    &QUERY_TIMEOUT,
    &LOCK_INTERVAL,
];

impl Reader<'_> {
    /// `[database]`, when the file has one.
    pub(super) fn database(
        &mut self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Option<DatabaseSettings> {
        self.root.get("database")?.as_table()?;
        let url = self.database_url();
        let (host, port, user, name) = match parse_database_url(&url) {
            Ok(parts) => parts,
            Err(_) if url.is_empty() => (String::new(), 3306, String::new(), String::new()),
            Err(e) => {
                self.problem(&URL.full(), format!("{e}; {URL_EXAMPLE}"));
                (String::new(), 3306, String::new(), String::new())
            }
        };
        let password = self.database_password(&user, env);
        let ca_file = self.path(&CA_FILE);
        let tls_server_name = self.tls_server_name();
        // On by default for a database on another host: the login, the map rows and the
        // lock's answers are not to travel in clear.
        let tls = self.bool_or(
            &TLS,
            ca_file.is_some()
                || tls_server_name.is_some()
                || (!host.is_empty() && !is_loopback(&host)),
        );
        for (set, key) in [
            (ca_file.is_some(), &CA_FILE),
            (tls_server_name.is_some(), &TLS_SERVER_NAME),
        ] {
            if !tls && set {
                self.problem(
                    &TLS.full(),
                    format!("is false while {} is set; remove one of them", key.full()),
                );
            }
        }
        Some(DatabaseSettings {
            url,
            host,
            port,
            user,
            name,
            password,
            tls,
            ca_file,
            tls_server_name,
            connect_timeout: self.duration(&CONNECT_TIMEOUT),
            query_timeout: self.duration(&QUERY_TIMEOUT),
            lock_interval: self.duration(&LOCK_INTERVAL),
        })
    }

    /// `database.tls_server_name`: a DNS name or an IP address, as certificates hold them.
    fn tls_server_name(&mut self) -> Option<String> {
        let name = self.string(&TLS_SERVER_NAME)?.trim().to_string();
        let dns = |n: &str| {
            n.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            })
        };
        if name.parse::<std::net::IpAddr>().is_ok() || (name.len() <= 253 && dns(&name)) {
            Some(name)
        } else {
            self.problem(
                &TLS_SERVER_NAME.full(),
                format!(
                    "\"{}\" is not a host name or an IP address; write one of the names the \
                     server's certificate holds (its subjectAltName), e.g. \"db.example.com\"",
                    crate::base::untrusted::shown(&name, 80)
                ),
            );
            None
        }
    }

    /// `database.url`, trimmed; empty (with its problem) when it is missing.
    fn database_url(&mut self) -> String {
        match self.string(&URL) {
            Some(u) => u.trim().to_string(),
            None => {
                self.problem(
                    &URL.full(),
                    format!(
                        "is missing; set it to the CloudStack database, {URL_EXAMPLE}, or \
                         remove [database] to read everything through the API"
                    ),
                );
                String::new()
            }
        }
    }

    /// The password of `user`: from the environment, else from `database.password_file`.
    fn database_password(&mut self, user: &str, env: &dyn Fn(&str) -> Option<String>) -> Secret {
        if let Some(v) = env(ENV_DB_PASSWORD).filter(|v| !v.trim().is_empty()) {
            return Secret::new(v.trim());
        }
        if let Some(path) = self.path(&PASSWORD_FILE) {
            return self.secret_file(&PASSWORD_FILE, &path);
        }
        if self.value(&PASSWORD_FILE).is_none() {
            let whose = if user.is_empty() {
                "the database user".to_string()
            } else {
                format!("{user:?}")
            };
            self.problem(
                &PASSWORD_FILE.full(),
                format!(
                    "is missing; point it at a file holding the password of {whose}, or set \
                     {ENV_DB_PASSWORD}"
                ),
            );
        }
        Secret::new("")
    }
}

/// Why `database.url` is not one cks-drift can use. `url` is the URL without its password,
/// even one that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DatabaseUrlError {
    #[error("{url:?} is not a URL ({reason})")]
    NotAUrl { url: String, reason: String },
    #[error("{url:?} must start with mysql://")]
    Scheme { url: String },
    #[error(
        "holds a password; keep it out of the URL (it would show in logs) and put it in \
         database.password_file"
    )]
    Password,
    #[error("{url:?} names no user; write mysql://<user>@<host>/<database>")]
    NoUser { url: String },
    #[error("{url:?} names no host")]
    NoHost { url: String },
    #[error("{url:?} must name one database after the host, e.g. /cloud")]
    NoDatabase { url: String },
    #[error("{url:?} has options after the database name; use the [database] keys instead")]
    Options { url: String },
}

/// `mysql://user@host:port/name`: host, port (3306 when absent), user and database name. A
/// password in the URL is refused: it would show wherever the URL is logged.
pub fn parse_database_url(raw: &str) -> Result<(String, u16, String, String), DatabaseUrlError> {
    let url = || redacted_url(raw).into_owned();
    let parsed = reqwest::Url::parse(raw).map_err(|e| DatabaseUrlError::NotAUrl {
        url: url(),
        reason: e.to_string(),
    })?;
    if !matches!(parsed.scheme(), "mysql" | "mariadb") {
        return Err(DatabaseUrlError::Scheme { url: url() });
    }
    if parsed.password().is_some() {
        return Err(DatabaseUrlError::Password);
    }
    let user = percent_encoding::percent_decode_str(parsed.username())
        .decode_utf8_lossy()
        .into_owned();
    if user.is_empty() {
        return Err(DatabaseUrlError::NoUser { url: url() });
    }
    let host = match parsed.host_str() {
        Some(h) if !h.is_empty() => h.trim_start_matches('[').trim_end_matches(']').to_string(),
        _ => return Err(DatabaseUrlError::NoHost { url: url() }),
    };
    let name = parsed.path().trim_start_matches('/').to_string();
    if name.is_empty() || name.contains('/') {
        return Err(DatabaseUrlError::NoDatabase { url: url() });
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(DatabaseUrlError::Options { url: url() });
    }
    Ok((host, parsed.port().unwrap_or(3306), user, name))
}
