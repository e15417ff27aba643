//! The endpoint's security for when it is opened beyond loopback: TLS (rustls) from
//! `http.tls_cert_file` and `http.tls_key_file`, and basic authentication against
//! `http.basic_auth_users` (bcrypt hashes), on every path but `/healthz` when
//! `http.healthz_without_auth` says so. Read at start and again on SIGHUP.

use std::collections::VecDeque;
use std::hash::{BuildHasher, RandomState};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::config::HttpSettings;

/// How long a user and password bcrypt accepted are taken again without hashing: a scraper
/// sends them every few seconds, and each bcrypt costs tens of milliseconds.
const VERIFIED_FOR: Duration = Duration::from_secs(600);
/// How many accepted pairs are remembered.
const VERIFIED_MAX: usize = 32;
/// Checked for a user that does not exist, so that a wrong name costs as long as a wrong
/// password (cost 10, like the hashes `htpasswd -B` makes).
const DUMMY_HASH: &str = "$2y$10$zQ0H6d0nbcdPgFEjNCzVXeD9sMoyRJyq8hvDYpJTKWDNi1FmbSD3.";

/// Why the endpoint's TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    #[error("cannot read http.tls_cert_file {}", .path.display())]
    Cert {
        path: PathBuf,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("http.tls_cert_file {} holds no certificate (PEM \"CERTIFICATE\")", .path.display())]
    NoCert { path: PathBuf },
    #[error("cannot read http.tls_key_file {} (a PEM private key)", .path.display())]
    Key {
        path: PathBuf,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("http.tls_cert_file and http.tls_key_file do not make a TLS server")]
    Tls(#[source] rustls::Error),
}

/// TLS and basic authentication of the endpoint, as configured.
pub struct WebSecurity {
    pub tls: Option<TlsAcceptor>,
    users: Vec<(String, String)>,
    healthz_open: bool,
    /// Hashes (keyed per process) of user and password pairs bcrypt accepted, with when.
    verified: Mutex<VecDeque<(u64, Instant)>>,
    keyed: RandomState,
}

impl WebSecurity {
    /// No TLS, no authentication: the endpoint on loopback, as by default.
    pub fn open() -> WebSecurity {
        WebSecurity {
            tls: None,
            users: Vec::new(),
            healthz_open: true,
            verified: Mutex::new(VecDeque::new()),
            keyed: RandomState::new(),
        }
    }

    pub fn from_config(http: &HttpSettings) -> Result<WebSecurity, WebError> {
        let tls = match &http.tls {
            None => None,
            Some(files) => Some(acceptor(&files.cert, &files.key)?),
        };
        Ok(WebSecurity {
            tls,
            users: http.basic_auth_users.clone(),
            healthz_open: http.healthz_without_auth,
            ..WebSecurity::open()
        })
    }

    /// Whether a request for `path` with this `Authorization` header is let in.
    pub async fn admits(&self, path: &str, authorization: Option<&[u8]>) -> bool {
        if self.users.is_empty() || (path == "/healthz" && self.healthz_open) {
            return true;
        }
        let Some((user, password)) = authorization.and_then(basic_credentials) else {
            return false;
        };
        let pair = self.keyed.hash_one((&user, &password));
        let now = Instant::now();
        {
            let mut verified = self.verified.lock().unwrap_or_else(|e| e.into_inner());
            verified.retain(|(_, at)| now.duration_since(*at) < VERIFIED_FOR);
            if verified.iter().any(|(p, _)| *p == pair) {
                return true;
            }
        }
        let known = self.users.iter().find(|(u, _)| *u == user);
        let hash = known.map_or(DUMMY_HASH, |(_, h)| h.as_str()).to_string();
        let accepted = tokio::task::spawn_blocking(move || bcrypt::verify(password, &hash))
            .await
            .is_ok_and(|r| r.unwrap_or(false))
            && known.is_some();
        if accepted {
            let mut verified = self.verified.lock().unwrap_or_else(|e| e.into_inner());
            if verified.len() >= VERIFIED_MAX {
                verified.pop_front();
            }
            verified.push_back((pair, now));
        }
        accepted
    }
}

/// `Basic <base64 of user:password>` read: the user and the password.
fn basic_credentials(header: &[u8]) -> Option<(String, String)> {
    let text = std::str::from_utf8(header).ok()?;
    let (scheme, encoded) = text.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let (user, password) = std::str::from_utf8(&decoded).ok()?.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

/// A TLS acceptor of the certificate chain at `cert` and the key at `key` (PEM).
fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, WebError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|source| WebError::Cert {
            path: cert.to_path_buf(),
            source,
        })?;
    if chain.is_empty() {
        return Err(WebError::NoCert {
            path: cert.to_path_buf(),
        });
    }
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|source| WebError::Key {
        path: key.to_path_buf(),
        source,
    })?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(WebError::Tls)?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(WebError::Tls)?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_are_read_as_rfc_7617_writes_them() {
        // "prometheus:s3cr:et", the password holding a colon.
        let header = b"Basic cHJvbWV0aGV1czpzM2NyOmV0";
        assert_eq!(
            basic_credentials(header),
            Some(("prometheus".into(), "s3cr:et".into()))
        );
        assert_eq!(basic_credentials(b"Bearer abc"), None);
        assert_eq!(basic_credentials(b"Basic !!!"), None);
    }

    #[tokio::test]
    async fn a_user_is_let_in_with_its_password_alone_and_healthz_as_configured() {
        let hash = bcrypt::hash("right", 4).unwrap();
        let web = WebSecurity {
            users: vec![("prometheus".into(), hash)],
            healthz_open: false,
            ..WebSecurity::open()
        };
        let header = |user: &str, password: &str| {
            let raw =
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
            format!("Basic {raw}")
        };
        let right = header("prometheus", "right");
        assert!(web.admits("/", Some(right.as_bytes())).await);
        // Again, from what was remembered.
        assert!(web.admits("/metrics", Some(right.as_bytes())).await);
        assert!(
            !web.admits("/", Some(header("prometheus", "wrong").as_bytes()))
                .await
        );
        assert!(
            !web.admits("/", Some(header("nobody", "right").as_bytes()))
                .await
        );
        assert!(!web.admits("/", None).await);
        assert!(!web.admits("/healthz", None).await);
        let web = WebSecurity {
            healthz_open: true,
            ..web
        };
        assert!(web.admits("/healthz", None).await);
        assert!(!web.admits("/metrics", None).await);
    }
}
