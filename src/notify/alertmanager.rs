//! Alertmanager through its v2 API (`POST /api/v2/alerts`), as Prometheus sends to it: every
//! open finding is posted each cycle with an `endsAt` that outlasts one missed cycle and no
//! more, so an alert stays active while cks-drift runs and lapses soon after it stops; a
//! resolved finding is posted once more with `endsAt` set to when it resolved (through the
//! outbox, so an Alertmanager that is down gets it later). Every URL gets every alert: the
//! Alertmanagers of one cluster deduplicate among themselves.
//!
//! An Alertmanager is not trusted to be small or quick: an answer's body is read only when it
//! explains an error, at most [`BODY_READ_MAX`] of it, within the request's deadline.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;
use tracing::warn;

use crate::base::time::Timestamp;
use crate::config::{AlertmanagerAuth, AlertmanagerSettings};
use crate::diff::Mismatch;
use crate::diff::wording::{
    LabelledCluster, alertmanager_annotations, alertmanager_labels, alertmanager_storm,
    alertmanager_summary,
};
use crate::state::State;

/// Longest answer body kept for an error message.
const BODY_EXCERPT: usize = 300;

/// The most of an error answer's body that is read. Alertmanager explains a refusal in one
/// line of JSON; the rest is never read, so that a hostile or broken peer, or anyone in the
/// middle of an `http://` one, cannot make cks-drift hold more than this.
pub const BODY_READ_MAX: usize = 4 * 1024;

/// Why Alertmanager did not take the alerts.
#[derive(Debug, thiserror::Error)]
pub enum AlertmanagerError {
    /// No answer: the connection or the request failed (the error holds no URL).
    #[error("cannot reach Alertmanager at {url}")]
    Unreachable {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    /// No whole answer within `alertmanager.timeout`.
    #[error(
        "cannot reach Alertmanager at {url}: no answer within {} s (alertmanager.timeout)",
        within.as_secs_f64()
    )]
    Timeout { url: String, within: Duration },
    #[error("Alertmanager at {url} answered HTTP {status}: {body}")]
    Refused {
        url: String,
        status: u16,
        body: String,
    },
    /// `alertmanager.ca_file` could not be used.
    #[error("cannot build the Alertmanager client: alertmanager.ca_file: {0}")]
    CaFile(crate::cloudstack::error::ApiError),
    #[error("cannot build the Alertmanager client: {0}")]
    Build(reqwest::Error),
}

impl AlertmanagerError {
    /// Alertmanager refused the alerts themselves (HTTP 400, 422): sending them again
    /// cannot help.
    pub fn is_refusal(&self) -> bool {
        matches!(self, AlertmanagerError::Refused { status, .. } if matches!(status, 400 | 422))
    }
}

/// The configured Alertmanagers.
#[derive(Debug)]
pub struct Alertmanager {
    http: reqwest::Client,
    urls: Vec<String>,
    auth: AlertmanagerAuth,
    runbook_url: Option<String>,
    /// Deadline of one post, from connecting to the last byte read.
    timeout: Duration,
}

impl Alertmanager {
    /// The client of the configured Alertmanagers; warns about risky settings (see [`risks`]),
    /// once each time a config is taken into use.
    pub fn new(settings: &AlertmanagerSettings) -> Result<Self, AlertmanagerError> {
        let urls: Vec<&str> = settings.urls.iter().map(String::as_str).collect();
        let credentials = !matches!(settings.auth, AlertmanagerAuth::None);
        for (key, message) in risks(&urls, credentials, settings.insecure) {
            warn!("{key} {message}");
        }
        let http = crate::cloudstack::http::client_builder(
            settings.timeout,
            settings.ca_file.as_deref(),
            settings.insecure,
        )
        .map_err(AlertmanagerError::CaFile)?
        .build()
        .map_err(AlertmanagerError::Build)?;
        Ok(Alertmanager {
            http,
            urls: settings.urls.clone(),
            auth: settings.auth.clone(),
            runbook_url: settings.runbook_url.clone(),
            timeout: settings.timeout,
        })
    }

    /// Posts `alerts` to every Alertmanager. Taken when one of them took them (the others
    /// are told by their peers, and get them again next cycle); otherwise the first error.
    pub async fn post(&self, alerts: &[Value]) -> Result<(), AlertmanagerError> {
        let mut alerts = alerts.to_vec();
        if let Some(runbook) = &self.runbook_url {
            for a in &mut alerts {
                a["annotations"]["runbook_url"] = Value::String(runbook.clone());
            }
        }
        let mut first_error = None;
        let mut taken = false;
        for base in &self.urls {
            match self.post_one(base, &alerts).await {
                Ok(()) => taken = true,
                Err(e) => {
                    warn!(error = %e, "an Alertmanager did not take the alerts");
                    first_error.get_or_insert(e);
                }
            }
        }
        match (taken, first_error) {
            (true, _) | (false, None) => Ok(()),
            (false, Some(e)) => Err(e),
        }
    }

    async fn post_one(&self, base: &str, alerts: &[Value]) -> Result<(), AlertmanagerError> {
        let deadline = Instant::now() + self.timeout;
        let url = format!("{base}/api/v2/alerts");
        // Config refuses credentials inside the URL; a URL is still never shown with them.
        let shown_url = crate::base::net::redacted_url(&url).into_owned();
        let mut request = self.http.post(&url).json(alerts);
        request = match &self.auth {
            AlertmanagerAuth::None => request,
            AlertmanagerAuth::Basic { username, password } => {
                request.basic_auth(username, Some(password.expose()))
            }
            AlertmanagerAuth::Bearer(token) => request.bearer_auth(token.expose()),
        };
        let response = match tokio::time::timeout_at(deadline, request.send()).await {
            Ok(Ok(response)) => response,
            Ok(Err(e)) => {
                return Err(AlertmanagerError::Unreachable {
                    url: shown_url,
                    source: e.without_url(),
                });
            }
            Err(_) => {
                return Err(AlertmanagerError::Timeout {
                    url: shown_url,
                    within: self.timeout,
                });
            }
        };
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let body = body_prefix(response, BODY_READ_MAX, deadline).await;
        Err(AlertmanagerError::Refused {
            url: shown_url,
            status: status.as_u16(),
            body: crate::base::untrusted::shown(body.trim(), BODY_EXCERPT),
        })
    }
}

/// At most `max` bytes of an answer's body, as far as it came by `deadline`. The rest is left
/// unread: dropping the response closes the connection, whatever the peer still sends.
async fn body_prefix(mut response: reqwest::Response, max: usize, deadline: Instant) -> String {
    let mut body = Vec::new();
    while body.len() < max {
        match tokio::time::timeout_at(deadline, response.chunk()).await {
            Ok(Ok(Some(chunk))) => {
                let room = max - body.len();
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            // The end, a broken body or the deadline: what came is the excerpt.
            Ok(Ok(None) | Err(_)) | Err(_) => break,
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// Risky `[alertmanager]` settings, as (key, message): warned about when a config is taken
/// into use and by `validate-config`. `urls` as configured; `credentials` when basic or
/// bearer auth is set. A loopback `http://` URL is not warned about: it never leaves the host.
pub fn risks(urls: &[&str], credentials: bool, insecure: bool) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    if credentials {
        for url in urls {
            let Ok(parsed) = reqwest::Url::parse(url.trim()) else {
                continue;
            };
            if parsed.scheme() == "http" && !is_loopback(&parsed) {
                out.push((
                    "alertmanager.urls",
                    format!(
                        "holds {}, a plain http:// URL, while alertmanager.username and \
                         password_file (or bearer_token_file) are set: the credentials travel in \
                         clear with every post, for anything on the way to read and reuse; use \
                         https:// (with alertmanager.ca_file for a private CA)",
                        crate::base::net::redacted_url(url.trim())
                    ),
                ));
            }
        }
    }
    if insecure {
        out.push((
            "alertmanager.insecure",
            "is true: the Alertmanagers' certificates are not verified, so anything between this \
             host and them can pose as one, drop the alerts and read the credentials; set \
             alertmanager.ca_file to the CA that signed their certificates and remove insecure"
                .to_string(),
        ));
    }
    out
}

fn is_loopback(url: &reqwest::Url) -> bool {
    crate::base::net::is_loopback(url.host_str().unwrap_or_default())
}

/// One alert as the v2 API takes it.
pub fn alert(
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
    starts_at: Timestamp,
    ends_at: Timestamp,
) -> Value {
    json!({
        "labels": labels,
        "annotations": annotations,
        "startsAt": starts_at.to_string(),
        "endsAt": ends_at.to_string(),
    })
}

/// How long a posted alert stays active without being posted again: two intervals and a
/// half, so that one missed cycle (and a slow one) does not let it lapse, and two do.
pub fn active_for(interval: Duration) -> Duration {
    interval * 2 + interval / 2
}

/// The caps of what is posted to Alertmanager: those of the CloudStack alerts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FiringCaps {
    /// Alerts per cluster (`notify.alert_cap`), the last of them summing up the rest.
    pub per_cluster: usize,
    /// Alerts all the clusters of one tenant post (`notify.owner_alert_cap`).
    pub per_tenant: usize,
}

/// The open findings of the state that no `[[ignore]]` rule matches, as alerts active until
/// `ends_at`, under the caps CloudStack's alerts have: per cluster at most
/// `caps.per_cluster`, the oldest findings each their own and one alert summing up the rest;
/// per tenant at most `caps.per_tenant`. Findings a storm holds are one storm alert, so that
/// one tenant's fake node names are not that many alerts.
pub fn firing(state: &State, ends_at: Timestamp, caps: FiringCaps) -> Vec<Value> {
    let mut out = Vec::new();
    let mut used: HashMap<String, usize> = HashMap::new();
    for (id, c) in &state.clusters {
        let mut open: Vec<(Timestamp, String, Mismatch)> = c
            .vms
            .values()
            .chain(c.nodes.values())
            .filter(|r| r.ignored.is_none() && !r.held)
            .filter_map(|r| {
                let m = r.mismatch()?;
                Some((r.since, m.key().to_string(), m))
            })
            .collect();
        if open.is_empty() {
            continue;
        }
        // The oldest keep firing as newer ones come, so that the alerts posted stay the same.
        open.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        let tenant = c.tenant(id);
        let spent = used.entry(tenant).or_default();
        let cap = caps
            .per_cluster
            .max(1)
            .min(caps.per_tenant.saturating_sub(*spent));
        let each = if open.len() > cap {
            cap.saturating_sub(1)
        } else {
            open.len()
        };
        for (since, _, m) in &open[..each] {
            let labels =
                alertmanager_labels(id, &c.name, c.zone_id.as_deref(), c.owner.as_deref(), m);
            out.push(alert(
                &labels,
                &alertmanager_annotations(&c.name, m),
                *since,
                ends_at,
            ));
        }
        let rest = &open[each..];
        if !rest.is_empty() && cap > 0 {
            let rest: Vec<&Mismatch> = rest.iter().map(|(_, _, m)| m).collect();
            let cluster = LabelledCluster {
                id,
                name: &c.name,
                zone_id: c.zone_id.as_deref(),
                owner: c.owner.as_deref(),
            };
            let (labels, annotations) = alertmanager_summary(&cluster, &rest);
            let since = open[each].0;
            out.push(alert(&labels, &annotations, since, ends_at));
        }
        *spent += cap.min(open.len());
    }
    if let Some(storm) = &state.storm {
        let (labels, annotations) =
            alertmanager_storm(&storm.key, storm.since, storm.clusters, storm.checked);
        out.push(alert(&labels, &annotations, storm.since, ends_at));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    fn settings(url: String, timeout: Duration) -> AlertmanagerSettings {
        AlertmanagerSettings {
            urls: vec![url],
            auth: AlertmanagerAuth::None,
            ca_file: None,
            insecure: false,
            timeout,
            runbook_url: None,
        }
    }

    /// A hostile Alertmanager on 127.0.0.1: every request is answered HTTP 500 with a chunked
    /// body that starts with an explanation and never ends, written as fast as the connection
    /// takes it. Returns its URL and the count of body bytes it got out.
    async fn endless_error_body() -> (String, Arc<AtomicU64>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let sent = Arc::new(AtomicU64::new(0));
        let counter = sent.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let counter = counter.clone();
                tokio::spawn(async move {
                    let mut request = [0u8; 16 * 1024];
                    let _ = stream.read(&mut request).await;
                    let head = b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n";
                    let first = b"{\"error\":\"overloaded\"}";
                    let mut start = format!("{:x}\r\n", first.len()).into_bytes();
                    start.extend_from_slice(first);
                    start.extend_from_slice(b"\r\n");
                    if stream.write_all(head).await.is_err()
                        || stream.write_all(&start).await.is_err()
                    {
                        return;
                    }
                    let data = vec![b'x'; 64 * 1024];
                    let mut chunk = format!("{:x}\r\n", data.len()).into_bytes();
                    chunk.extend_from_slice(&data);
                    chunk.extend_from_slice(b"\r\n");
                    while stream.write_all(&chunk).await.is_ok() {
                        counter.fetch_add(data.len() as u64, Ordering::Relaxed);
                    }
                });
            }
        });
        (url, sent)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_endless_error_body_is_cut_to_a_prefix_well_within_the_deadline() {
        let (url, sent) = endless_error_body().await;
        let timeout = Duration::from_secs(10);
        let am = Alertmanager::new(&settings(url.clone(), timeout)).unwrap();
        let started = std::time::Instant::now();
        let error = am.post(&[json!({"labels": {}})]).await.unwrap_err();
        let took = started.elapsed();
        match &error {
            AlertmanagerError::Refused {
                url: shown,
                status,
                body,
            } => {
                assert_eq!(shown, &format!("{url}/api/v2/alerts"));
                assert_eq!(*status, 500);
                assert!(body.starts_with("{\"error\":\"overloaded\"}xxxx"), "{body}");
                assert_eq!(body.chars().count(), BODY_EXCERPT, "{body}");
            }
            other => panic!("{other}"),
        }
        // Not a refusal of the alerts: they stay queued and the cycle goes on.
        assert!(!error.is_refusal());
        assert!(took < timeout / 4, "took {took:?}");
        // The connection was closed after the prefix: the peer got out no more than the
        // sockets' buffers hold, where reading to the deadline took gigabytes.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let sent = sent.load(Ordering::Relaxed);
        assert!(sent < 32 << 20, "{sent} bytes sent");
    }

    #[tokio::test]
    async fn a_peer_that_never_answers_is_given_up_at_the_deadline() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        // Accepts and holds the connection without a byte of answer.
        let held = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            tokio::time::sleep(Duration::from_secs(30)).await;
            drop(stream);
        });
        let timeout = Duration::from_millis(500);
        let am = Alertmanager::new(&settings(url, timeout)).unwrap();
        let started = std::time::Instant::now();
        let error = am.post(&[json!({})]).await.unwrap_err();
        assert!(
            matches!(
                error,
                AlertmanagerError::Unreachable { .. } | AlertmanagerError::Timeout { .. }
            ),
            "{error}"
        );
        assert!(started.elapsed() < Duration::from_secs(3));
        held.abort();
    }

    #[test]
    fn risky_settings_are_named_with_their_fix() {
        let urls = [
            "http://am.example.com:9093",
            "http://127.0.0.1:9093",
            "https://am2.example.com",
        ];
        let risks = risks(&urls, true, true);
        let keys: Vec<&str> = risks.iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, ["alertmanager.urls", "alertmanager.insecure"]);
        assert!(
            risks[0]
                .1
                .starts_with("holds http://am.example.com:9093, a plain http:// URL, while"),
            "{}",
            risks[0].1
        );
        assert!(super::risks(&urls, false, false).is_empty());
    }
}
