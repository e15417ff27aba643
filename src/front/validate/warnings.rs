//! Settings that work but are risky or probably not meant: connections in clear or trusting
//! whoever answers, Alertmanager's, and those that tell too soon or too much.

use std::time::Duration;

use super::command::command_warnings;
use super::{Finding, Raw};
use crate::base::duration::parse_duration;

/// Grace periods shorter than this are warned about.
pub const SHORT_GRACE: Duration = Duration::from_secs(5 * 60);

/// Settings that work but are risky or probably not meant.
pub(super) fn setting_warnings(raw: &Raw<'_>) -> Vec<Finding> {
    let mut out = exposure_warnings(raw);
    out.extend(alertmanager_warnings(raw));
    out.extend(noise_warnings(raw));
    out.extend(command_warnings(raw));
    out
}

/// Connections that trust whoever answers or travel in clear: to CloudStack, its database
/// and the control nodes.
fn exposure_warnings(raw: &Raw<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    if raw
        .value("cloudstack.insecure")
        .and_then(toml::Value::as_bool)
        == Some(true)
    {
        out.push(Finding::warning(
            "cloudstack.insecure",
            "is true: the management server's certificate is not verified, so anything between \
             this host and it can pose as CloudStack; set cloudstack.ca_file to the CA that \
             signed its certificate and remove insecure",
        ));
    }
    if raw
        .str("cloudstack.url")
        .is_some_and(|u| u.trim().to_ascii_lowercase().starts_with("http://"))
    {
        out.push(Finding::warning(
            "cloudstack.url",
            crate::config::PLAIN_HTTP,
        ));
    }
    if let Some(url) = raw.str("database.url")
        && raw.value("database.tls").and_then(toml::Value::as_bool) == Some(false)
        && let Ok((host, ..)) = crate::config::parse_database_url(url.trim())
        && !crate::base::net::is_loopback(&host)
    {
        out.push(Finding::warning(
            "database.tls",
            crate::config::database_in_clear(&host),
        ));
    }
    if raw.str("ssh.host_key_policy") == Some("off") {
        out.push(Finding::warning(
            "ssh.host_key_policy",
            crate::config::HOST_KEYS_OFF,
        ));
    }
    out.extend(endpoint_warning(raw));
    out
}

/// The endpoint listens beyond loopback without TLS or without authentication: anyone who
/// reaches the port reads every tenant's findings on the status page and its API.
fn endpoint_warning(raw: &Raw<'_>) -> Option<Finding> {
    let listen = raw
        .str("http.listen")
        .unwrap_or(crate::config::DEFAULT_LISTEN)
        .trim();
    let addr: std::net::SocketAddr = listen.parse().ok()?;
    if addr.ip().is_loopback() {
        return None;
    }
    let tls = raw.str("http.tls_cert_file").is_some();
    let auth = raw
        .value("http.basic_auth_users")
        .and_then(toml::Value::as_array)
        .is_some_and(|users| !users.is_empty());
    let missing = match (tls, auth) {
        (true, true) => return None,
        (false, true) => {
            "TLS (http.tls_cert_file, http.tls_key_file): the passwords travel in clear"
        }
        (true, false) => "authentication (http.basic_auth_users)",
        (false, false) => {
            "TLS (http.tls_cert_file, http.tls_key_file) or authentication \
             (http.basic_auth_users)"
        }
    };
    Some(Finding::warning(
        "http.listen",
        format!(
            "is {listen:?}, beyond loopback, without {missing}; anyone who reaches the port \
             reads every tenant's findings on the status page and its API; set both, or listen \
             on 127.0.0.1"
        ),
    ))
}

/// The risks `notify::alertmanager` sees in `[alertmanager]`, when the file has one.
fn alertmanager_warnings(raw: &Raw<'_>) -> Vec<Finding> {
    if !raw.0.get("alertmanager").is_some_and(toml::Value::is_table) {
        return Vec::new();
    }
    let urls: Vec<&str> = raw
        .value("alertmanager.urls")
        .and_then(toml::Value::as_array)
        .map(|a| a.iter().filter_map(toml::Value::as_str).collect())
        .unwrap_or_default();
    let credentials = [
        "alertmanager.username",
        "alertmanager.password_file",
        "alertmanager.bearer_token_file",
    ]
    .iter()
    .any(|key| raw.value(key).is_some());
    let insecure = raw
        .value("alertmanager.insecure")
        .and_then(toml::Value::as_bool)
        == Some(true);
    crate::notify::alertmanager::risks(&urls, credentials, insecure)
        .into_iter()
        .map(|(key, message)| Finding::warning(key, message))
        .collect()
}

/// Settings that tell too soon or too much: a short grace period, storms turned off.
fn noise_warnings(raw: &Raw<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(text) = raw.str("check.grace_period")
        && let Ok(grace) = parse_duration(text)
        && grace < SHORT_GRACE
    {
        out.push(Finding::warning(
            "check.grace_period",
            format!(
                "is {text:?}, under 5 minutes: VMs of a cluster being created, scaled or upgraded \
                 may be reported before the operation ends; use at least \"5m\" (the default is \
                 \"15m\")"
            ),
        ));
    }
    if raw.str("notify.storm_clusters").map(str::trim) == Some("off") {
        out.push(Finding::warning(
            "notify.storm_clusters",
            "is \"off\": every finding is alerted on its own however many come at once, so one \
             outage (storage, network, SSH across the cloud) sends an alert and an annotation per \
             finding; the default \"20%\" sends one storm alert instead",
        ));
    }
    out
}
