//! CloudStack alerts through `generateAlert`, working around CloudStack's own de-duplication:
//! the server silently drops an API-generated alert while an un-archived alert with the same
//! type and zone exists, and still reports success. So each open mismatch gets a type of its
//! own from `notify.alert_types`, the stored alert is confirmed with `listAlerts`, and it is
//! archived when the mismatch resolves. Only alerts this daemon recorded are ever archived.

use std::collections::HashSet;
use std::ops::RangeInclusive;

use tracing::warn;

use crate::cloudstack::client::Client;
use crate::cloudstack::error::ApiError;
use crate::cloudstack::model::Alert;
use crate::diff::wording::alert_marker;
use crate::notify::DeliveryError;
use crate::notify::messages::ALERT_NOT_STORED;
use crate::state::{AlertRecord, State};

/// The `name` of every alert this daemon raises.
pub const ALERT_NAME: &str = "KUBERNETES.CLUSTER.VM.MAP.CHECK";

/// Types tried for one alert before giving up for this cycle.
const TYPE_ATTEMPTS: usize = 3;

/// Why an alert could not be raised, apart from CloudStack's own errors.
#[derive(Debug, thiserror::Error)]
pub enum AlertError {
    /// Every type of `notify.alert_types` is held by an un-archived alert.
    #[error(
        "no free alert type left in notify.alert_types ({start}-{end}): every type is held by \
         an un-archived alert; archive old alerts or widen the range"
    )]
    NoFreeType { start: u32, end: u32 },
    /// `generateAlert` succeeded but `listAlerts` never showed the alert.
    #[error("CloudStack did not store the alert for {key} under {attempts} different types")]
    NotStored { key: String, attempts: usize },
}

/// Picks alert types for one delivery pass. The un-archived alerts are listed once per pass.
/// `listAlerts` does not say which zone an alert is in, so a type held in any zone counts as
/// taken: the range is wide enough for that.
pub struct AlertDesk {
    range: RangeInclusive<u32>,
    in_use: Option<HashSet<u32>>,
}

impl AlertDesk {
    pub fn new(range: RangeInclusive<u32>) -> Self {
        AlertDesk {
            range,
            in_use: None,
        }
    }

    /// Raises the alert (or finds it already stored) and returns its record.
    pub async fn raise(
        &mut self,
        api: &Client,
        state: &State,
        cluster_id: &str,
        zone_id: Option<&str>,
        key: &str,
        description: &str,
    ) -> Result<AlertRecord, DeliveryError> {
        let tag = alert_marker(cluster_id, key);
        // Stored by an earlier delivery that was cut short?
        if let Some(r) = find_stored(api, cluster_id, zone_id, key).await? {
            return Ok(r);
        }
        if self.in_use.is_none() {
            let all: Vec<Alert> = api.list("listAlerts", "alert", &[]).await?;
            let mut used: HashSet<u32> = all
                .iter()
                .filter_map(|a| a.r#type)
                .filter_map(|t| u32::try_from(t).ok())
                .filter(|t| self.range.contains(t))
                .collect();
            used.extend(state.alerts.values().map(|r| r.alert_type));
            self.in_use = Some(used);
        }
        let in_use = self.in_use.as_mut().expect("filled above");
        for _ in 0..TYPE_ATTEMPTS {
            let Some(t) = self.range.clone().find(|t| !in_use.contains(t)) else {
                return Err(AlertError::NoFreeType {
                    start: *self.range.start(),
                    end: *self.range.end(),
                }
                .into());
            };
            in_use.insert(t);
            let type_text = t.to_string();
            let mut params = vec![
                ("type", type_text.as_str()),
                ("name", ALERT_NAME),
                ("description", description),
            ];
            if let Some(z) = zone_id {
                params.push(("zoneid", z));
            }
            api.request_async("generateAlert", &params).await?;
            let stored: Vec<Alert> = api
                .list(
                    "listAlerts",
                    "alert",
                    &[("name", ALERT_NAME), ("type", type_text.as_str())],
                )
                .await?;
            if let Some(a) = stored.iter().find(|a| has_tag(a, &tag)) {
                return Ok(record(a, zone_id));
            }
            warn!(alert_type = t, key, "{ALERT_NOT_STORED}");
        }
        Err(AlertError::NotStored {
            key: key.to_string(),
            attempts: TYPE_ATTEMPTS,
        }
        .into())
    }
}

/// Finds the alert already stored (by an earlier delivery cut short) and returns its
/// record; none when CloudStack does not have it.
pub async fn find_stored(
    api: &Client,
    cluster_id: &str,
    zone_id: Option<&str>,
    key: &str,
) -> Result<Option<AlertRecord>, DeliveryError> {
    let tag = alert_marker(cluster_id, key);
    let found: Vec<Alert> = api
        .list(
            "listAlerts",
            "alert",
            &[("name", ALERT_NAME), ("keyword", tag.as_str())],
        )
        .await?;
    Ok(found
        .iter()
        .find(|a| has_tag(a, &tag))
        .map(|a| record(a, zone_id)))
}

/// The record of alert `a`, raised in `zone_id`.
fn record(a: &Alert, zone_id: Option<&str>) -> AlertRecord {
    AlertRecord {
        alert_id: a.id.clone(),
        alert_type: a.r#type.unwrap_or_default() as u32,
        zone_id: zone_id.map(str::to_string),
        covers: vec![],
    }
}

/// Whether `a` is cks-drift's alert for the finding `tag` marks. The name is checked as well
/// as the marker: an alert's description can end in text a tenant chose (a built-in alert
/// quotes a VM's or a cluster's name), so a marker alone proves nothing, while the name is
/// set by whoever calls `generateAlert`, which only a root admin may.
fn has_tag(a: &Alert, tag: &str) -> bool {
    is_ours(a) && a.description.as_deref().is_some_and(|d| d.ends_with(tag))
}

/// Whether `a` carries the name cks-drift gives its alerts, exactly as it wrote it
/// (`listAlerts name=` compares without regard to case, as MySQL does).
pub fn is_ours(a: &Alert) -> bool {
    a.name.as_deref() == Some(ALERT_NAME)
}

/// Archives one alert this daemon recorded. An alert an operator archived or deleted
/// meanwhile is done: CloudStack answers 431 for a deleted id (the UUID list no longer
/// resolves) and 530 for an archived one (`AlertDaoImpl.archiveAlert` selects only
/// un-archived rows, and `ArchiveAlertsCmd` fails when fewer rows than ids were archived).
/// A 530 is taken as "archived" once `listAlerts`, which lists only un-archived alerts, no
/// longer shows it; a 530 for another reason leaves it listed, and the item is tried again.
pub async fn archive(api: &Client, alert_id: &str) -> Result<(), ApiError> {
    let refused = match api.request("archiveAlerts", &[("ids", alert_id)]).await {
        Ok(_) => return Ok(()),
        Err(e) if e.code() == Some(431) => return Ok(()),
        Err(e) if e.code() == Some(530) => e,
        Err(e) => return Err(e),
    };
    let listed: Vec<Alert> = match api.list("listAlerts", "alert", &[("id", alert_id)]).await {
        Ok(listed) => listed,
        Err(e) if e.code() == Some(431) => return Ok(()),
        Err(_) => return Err(refused),
    };
    if listed.iter().any(|a| a.id == alert_id) {
        Err(refused)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alert(name: &str, description: &str) -> Alert {
        Alert {
            id: "a1".into(),
            r#type: Some(8),
            name: Some(name.into()),
            description: Some(description.into()),
            zoneid: None,
            sent: None,
        }
    }

    #[test]
    fn only_an_alert_with_our_name_and_the_marker_is_ours() {
        let tag = alert_marker("c1", "unmapped_vm:v1");
        let text = format!("VM web-node-2 {tag}");
        assert!(has_tag(&alert(ALERT_NAME, &text), &tag));
        // A built-in alert quoting a tenant's VM name that ends in the marker.
        assert!(!has_tag(&alert("ALERT.USERVM", &text), &tag));
        // `listAlerts name=` matches whatever the case; the match does not.
        assert!(!has_tag(&alert(&ALERT_NAME.to_lowercase(), &text), &tag));
        assert!(!has_tag(&alert(ALERT_NAME, "VM web-node-2"), &tag));
        let nameless = Alert {
            name: None,
            ..alert(ALERT_NAME, &text)
        };
        assert!(!is_ours(&nameless));
    }
}
