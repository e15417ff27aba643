//! Alertmanager through its v2 API (`POST /api/v2/alerts`), as Prometheus sends to it: every
//! open finding is posted each cycle with an `endsAt` that outlasts one missed cycle and no
//! more, so an alert stays active while cks-drift runs and lapses soon after it stops; a
//! resolved finding is posted once more with `endsAt` set to when it resolved (through the
//! outbox, so an Alertmanager that is down gets it later). Every URL gets every alert: the
//! Alertmanagers of one cluster deduplicate among themselves.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use tracing::warn;

use crate::config::{AlertmanagerAuth, AlertmanagerSettings};
use crate::state::State;
use crate::time::Timestamp;
use crate::wording::{alertmanager_annotations, alertmanager_labels};

/// Longest answer body kept for an error message.
const BODY_EXCERPT: usize = 300;

/// Why Alertmanager did not take the alerts.
#[derive(Debug, thiserror::Error)]
pub enum AlertmanagerError {
    #[error("cannot reach Alertmanager at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("Alertmanager at {url} answered HTTP {status}: {body}")]
    Refused {
        url: String,
        status: u16,
        body: String,
    },
    #[error("cannot build the Alertmanager client: {0}")]
    Setup(String),
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
}

impl Alertmanager {
    pub fn new(settings: &AlertmanagerSettings) -> Result<Self, AlertmanagerError> {
        let http = crate::cloudstack::http::client_builder(
            settings.timeout,
            settings.ca_file.as_deref(),
            settings.insecure,
        )
        .map_err(|e| AlertmanagerError::Setup(format!("alertmanager.ca_file: {e}")))?
        .build()
        .map_err(|e| AlertmanagerError::Setup(e.to_string()))?;
        Ok(Alertmanager {
            http,
            urls: settings.urls.clone(),
            auth: settings.auth.clone(),
            runbook_url: settings.runbook_url.clone(),
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
        let url = format!("{base}/api/v2/alerts");
        let mut request = self.http.post(&url).json(alerts);
        request = match &self.auth {
            AlertmanagerAuth::None => request,
            AlertmanagerAuth::Basic { username, password } => {
                request.basic_auth(username, Some(password.expose()))
            }
            AlertmanagerAuth::Bearer(token) => request.bearer_auth(token.expose()),
        };
        let response = request
            .send()
            .await
            .map_err(|e| AlertmanagerError::Unreachable {
                url: url.clone(),
                reason: crate::error_chain::error_chain(&e.without_url()),
            })?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let body = response.text().await.unwrap_or_default();
        Err(AlertmanagerError::Refused {
            url,
            status: status.as_u16(),
            body: crate::untrusted::shown(body.trim(), BODY_EXCERPT),
        })
    }
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

/// Every open finding of the state that no `[[ignore]]` rule matches, as alerts active until
/// `ends_at`. Findings a storm holds are included: Alertmanager groups alerts itself.
pub fn firing(state: &State, ends_at: Timestamp) -> Vec<Value> {
    let mut out = Vec::new();
    for (id, c) in &state.clusters {
        for r in c.vms.values().chain(c.nodes.values()) {
            if r.ignored.is_some() {
                continue;
            }
            let Some(m) = r.mismatch() else {
                continue;
            };
            let labels =
                alertmanager_labels(id, &c.name, c.zone_id.as_deref(), c.owner.as_deref(), &m);
            let annotations = alertmanager_annotations(&c.name, &m);
            out.push(alert(&labels, &annotations, r.since, ends_at));
        }
    }
    out
}
