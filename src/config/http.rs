//! `[http]`: where `/metrics`, `/healthz`, the status page and its API listen, and how the
//! endpoint is secured when it is opened beyond loopback: TLS from a certificate and key file,
//! and basic authentication with bcrypt-hashed passwords (the meaning of the exporter
//! toolkit's `tls_server_config` and `basic_auth_users`, as TOML keys).

use std::path::PathBuf;

use super::key::{Default, Key, Kind};
use super::reader::Reader;

/// `[http]`.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// Where the endpoint listens; `None` when turned off (`listen = ""`).
    pub listen: Option<std::net::SocketAddr>,
    /// PEM certificate chain and key: the endpoint speaks TLS only.
    pub tls: Option<TlsFiles>,
    /// `(user, bcrypt hash)`: every path asks for one of them (basic authentication).
    pub basic_auth_users: Vec<(String, String)>,
    /// `/healthz` answers without authentication (a load balancer's probe).
    pub healthz_without_auth: bool,
}

/// The endpoint's certificate chain and private key, PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

pub const DEFAULT_LISTEN: &str = "127.0.0.1:9712";

const fn key(name: &'static str, default: Default, doc: &'static str, kind: Kind) -> Key {
    Key {
        table: "http",
        name,
        default,
        doc,
        kind,
    }
}

pub const LISTEN: Key = key(
    "listen",
    Default::Is(DEFAULT_LISTEN),
    "where /metrics, /healthz, the status page and its API listen; \"\" turns it off",
    Kind::Text,
);
pub const TLS_CERT_FILE: Key = key(
    "tls_cert_file",
    Default::Unset,
    "PEM certificate chain: the endpoint speaks TLS only (with tls_key_file)",
    Kind::Text,
);
pub const TLS_KEY_FILE: Key = key(
    "tls_key_file",
    Default::Unset,
    "PEM private key of tls_cert_file",
    Kind::Text,
);
pub const BASIC_AUTH_USERS: Key = key(
    "basic_auth_users",
    Default::Unset,
    "\"user:bcrypt hash\" entries: every path asks for one (basic authentication)",
    Kind::List,
);
pub const HEALTHZ_WITHOUT_AUTH: Key = key(
    "healthz_without_auth",
    Default::Is("false"),
    "/healthz answers without authentication, for a load balancer's probe",
    Kind::Bool,
);

pub const KEYS: &[&Key] = &[
    &LISTEN,
    &TLS_CERT_FILE,
    &TLS_KEY_FILE,
    &BASIC_AUTH_USERS,
    &HEALTHZ_WITHOUT_AUTH,
];

/// How to write one entry of `http.basic_auth_users`.
const USERS_HOW: &str = "give \"user:hash\" with a bcrypt hash, e.g. from `htpasswd -nbB user \
     password` or `mkpasswd -m bcrypt`";

/// Reads one `user:hash` entry: a user name without `:` and a bcrypt hash (`$2a$`, `$2b$`,
/// `$2x$` or `$2y$`, a cost of 4 to 31, 53 characters of salt and hash).
pub fn parse_user(entry: &str) -> Result<(String, String), String> {
    let Some((user, hash)) = entry.split_once(':') else {
        return Err(format!("{entry:?} has no \":\"; {USERS_HOW}"));
    };
    if user.is_empty() || user.chars().any(char::is_control) {
        return Err(format!(
            "an entry has an empty or unprintable user name; {USERS_HOW}"
        ));
    }
    if hash.parse::<bcrypt::HashParts>().is_err() {
        return Err(format!(
            "the hash of user {user:?} is not a bcrypt hash; {USERS_HOW}"
        ));
    }
    Ok((user.to_string(), hash.to_string()))
}

impl Reader<'_> {
    /// `[http]`.
    pub(super) fn http(&mut self) -> HttpSettings {
        let listen_text = self.text(&LISTEN);
        let listen = if listen_text.trim().is_empty() {
            None
        } else {
            match listen_text.trim().parse() {
                Ok(addr) => Some(addr),
                Err(_) => {
                    self.problem(
                        &LISTEN.full(),
                        format!(
                            "{listen_text:?} is not an address:port, e.g. {DEFAULT_LISTEN:?}; \
                             use \"\" to turn the endpoint off"
                        ),
                    );
                    None
                }
            }
        };
        let tls = match (self.path(&TLS_CERT_FILE), self.path(&TLS_KEY_FILE)) {
            (Some(cert), Some(key)) => Some(TlsFiles { cert, key }),
            (None, None) => None,
            (Some(_), None) => {
                self.problem(
                    &TLS_KEY_FILE.full(),
                    "is missing while http.tls_cert_file is set; give the certificate's key",
                );
                None
            }
            (None, Some(_)) => {
                self.problem(
                    &TLS_CERT_FILE.full(),
                    "is missing while http.tls_key_file is set; give the key's certificate",
                );
                None
            }
        };
        HttpSettings {
            listen,
            tls,
            basic_auth_users: self.basic_auth_users(),
            healthz_without_auth: self.bool(&HEALTHZ_WITHOUT_AUTH),
        }
    }

    fn basic_auth_users(&mut self) -> Vec<(String, String)> {
        let name = BASIC_AUTH_USERS.full();
        let items = match self.value(&BASIC_AUTH_USERS) {
            None => return Vec::new(),
            Some(toml::Value::Array(items)) => items.clone(),
            Some(other) => {
                self.problem(
                    &name,
                    format!(
                        "must be a list of strings, not {}; {USERS_HOW}",
                        other.type_str()
                    ),
                );
                return Vec::new();
            }
        };
        let mut users: Vec<(String, String)> = Vec::new();
        for item in items {
            let Some(entry) = item.as_str() else {
                self.problem(&name, format!("holds a {}; {USERS_HOW}", item.type_str()));
                continue;
            };
            match parse_user(entry) {
                Ok((user, _)) if users.iter().any(|(u, _)| *u == user) => {
                    self.problem(&name, format!("names user {user:?} twice"));
                }
                Ok(pair) => users.push(pair),
                Err(e) => self.problem(&name, e),
            }
        }
        users
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH: &str = "$2y$04$U2lRZXF1aXBQYXNzd29yZOo1mCA0qd7A8C7sY2Vb0C6fy5gbxTQce";

    #[test]
    fn users_are_a_name_and_a_bcrypt_hash() {
        assert_eq!(
            parse_user(&format!("prometheus:{HASH}")),
            Ok(("prometheus".to_string(), HASH.to_string()))
        );
        assert!(
            parse_user("prometheus")
                .unwrap_err()
                .contains("has no \":\"")
        );
        assert!(
            parse_user("prometheus:secret")
                .unwrap_err()
                .contains("is not a bcrypt hash")
        );
        assert!(parse_user(&format!(":{HASH}")).is_err());
    }
}
