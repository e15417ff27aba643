//! The files the config names: those that cannot be used (the SSH key, the CA bundle, a
//! missing known_hosts under the strict policy), and those holding secrets that others may read.

use std::path::Path;

use super::{Finding, Raw};
use crate::cloudstack::http::read_ca_bundle;
use crate::config::secret_file;
use crate::remote::ssh::load_private_key;

/// Files named by the config that cannot be used: the SSH key and the CA bundle. (The
/// secret key files are read, and reported, by `config`.)
pub(super) fn file_errors(raw: &Raw<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(path) = raw.path("ssh.private_key")
        && let Err(e) = load_private_key(path)
    {
        let text = crate::base::error_chain::error_chain(&e);
        let text = text.strip_prefix("ssh.private_key: ").unwrap_or(&text);
        out.push(Finding::error("ssh.private_key", text));
    }
    if let Some(path) = raw.path("cloudstack.ca_file")
        && let Err(e) = read_ca_bundle(path)
    {
        let text = match &e {
            crate::cloudstack::error::ApiError::Config { problem, .. } => problem.clone(),
            other => other.to_string(),
        };
        out.push(Finding::error("cloudstack.ca_file", text));
    }
    if let (Some(cert), Some(key)) = (
        raw.path("http.tls_cert_file"),
        raw.path("http.tls_key_file"),
    ) {
        let http = crate::config::HttpSettings {
            listen: None,
            tls: Some(crate::config::http::TlsFiles {
                cert: cert.to_path_buf(),
                key: key.to_path_buf(),
            }),
            basic_auth_users: Vec::new(),
            healthz_without_auth: false,
        };
        if let Err(e) = crate::daemon::web::WebSecurity::from_config(&http) {
            out.push(Finding::error(
                "http.tls_cert_file",
                crate::base::error_chain::error_chain(&e),
            ));
        }
    }
    let strict = raw.str("ssh.host_key_policy") == Some("strict");
    let known_hosts = raw
        .path("ssh.known_hosts")
        .unwrap_or(Path::new(crate::config::DEFAULT_KNOWN_HOSTS));
    if strict && !known_hosts.exists() {
        out.push(Finding::error(
            "ssh.known_hosts",
            format!(
                "{} does not exist and ssh.host_key_policy is \"strict\", so every control node \
                 would be refused; record the nodes' keys there (ssh-keyscan -p 2222 <endpoint \
                 address> >> {}) or use \"accept-new\"",
                known_hosts.display(),
                known_hosts.display()
            ),
        ));
    }
    out
}

/// A warning when someone the secret-file rule does not allow may read `path` (see
/// `secret_file`).
pub(super) fn readable_by_strangers(
    key: &str,
    path: &Path,
    what: &str,
    allowed: &secret_file::Allowed,
) -> Option<Finding> {
    let access = secret_file::access(path)?;
    let stranger = secret_file::readers_beyond(&access, allowed)?;
    Some(Finding::warning(
        key,
        secret_file::warning(path, what, access.mode, &stranger, allowed),
    ))
}

/// Files holding secrets that the rule does not allow others to read: the key files, the SSH
/// key (when it is one), and the config itself when it holds a key inline.
pub(super) fn permission_warnings(
    raw: &Raw<'_>,
    config_path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let allowed = secret_file::allowed();
    let env_set = |name: &str| env(name).is_some_and(|v| !v.trim().is_empty());
    for (key, env_name) in [
        ("cloudstack.api_key", crate::config::ENV_API_KEY),
        ("cloudstack.secret_key", crate::config::ENV_SECRET_KEY),
    ] {
        if env_set(env_name) {
            continue;
        }
        let file_key = format!("{key}_file");
        if let Some(path) = raw.path(&file_key) {
            out.extend(readable_by_strangers(
                &file_key,
                path,
                "holds a secret",
                &allowed,
            ));
        }
        if raw.str(key).is_some_and(|v| !v.trim().is_empty())
            && let Some(warning) =
                readable_by_strangers(key, config_path, &format!("holds {key} inline"), &allowed)
        {
            out.push(Finding {
                message: format!("{}, or move the key to {file_key}", warning.message),
                ..warning
            });
        }
    }
    // A file that is not a usable private key has its error already; its mode is moot.
    if let Some(path) = raw.path("ssh.private_key")
        && load_private_key(path).is_ok()
    {
        out.extend(readable_by_strangers(
            "ssh.private_key",
            path,
            "is a private key",
            &allowed,
        ));
    }
    out
}
