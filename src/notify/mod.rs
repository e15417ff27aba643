//! Delivery of queued notifications: the event log, CloudStack alerts and admin-only
//! annotations on the cluster. What to send was decided by the dedupe step and written to
//! the state's outbox before anything is sent; an item leaves the outbox only once
//! delivered, so an outage or a crash delays a notification but never loses it.
//!
//! Every alert and annotation text ends with a marker (`[cks-drift <cluster>/<key>]`), which
//! lets delivery find what CloudStack already stored after a crash, so nothing is sent twice.

pub mod alerts;
pub mod event_log;

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

use tracing::{debug, warn};

use crate::cloudstack::client::Client;
use crate::cloudstack::error::ApiError;
use crate::cloudstack::model::Annotation;
use crate::state::step::marker;
use crate::state::{Notification, State, record_key};

/// What delivery needs to know.
#[derive(Debug, Clone)]
pub struct DeliverySettings {
    pub event_log: PathBuf,
    pub alert_types: std::ops::RangeInclusive<u32>,
}

/// Outcome counts of one delivery pass, by (channel, outcome): `delivered` or `failed`.
pub type DeliveryCounts = BTreeMap<(&'static str, &'static str), u64>;

#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error(transparent)]
    EventLog(#[from] event_log::EventLogError),
    #[error("{0}")]
    Alert(String),
}

/// Delivers the outbox in order. A failed item stays queued (with its error and attempt
/// count), and later items about the same cluster and key wait behind it. `save` is called
/// after every delivered item, so a crash repeats at most the item in flight, which the
/// marker check then recognises.
pub async fn deliver(
    api: &Client,
    settings: &DeliverySettings,
    state: &mut State,
    save: &mut (dyn FnMut(&State) + Send),
) -> DeliveryCounts {
    let mut counts = DeliveryCounts::new();
    let mut blocked: HashSet<String> = HashSet::new();
    let mut alerts = alerts::AlertDesk::new(settings.alert_types.clone());
    let mut i = 0;
    while i < state.outbox.len() {
        let item = state.outbox[i].clone();
        let subject = item.notification.subject();
        if subject.as_ref().is_some_and(|s| blocked.contains(s)) {
            i += 1;
            continue;
        }
        let channel = item.notification.channel();
        let result = deliver_one(api, settings, state, &mut alerts, &item.notification).await;
        match result {
            Ok(()) => {
                debug!(id = item.id, channel, "notification delivered");
                state.outbox.remove(i);
                *counts.entry((channel, "delivered")).or_default() += 1;
                save(state);
            }
            Err(e) => {
                let message = crate::cli::error_chain(&e);
                warn!(id = item.id, channel, attempts = item.attempts + 1, error = %message, "notification not delivered; it stays queued for the next cycle");
                let queued = &mut state.outbox[i];
                queued.attempts += 1;
                queued.last_error = Some(message);
                if let Some(s) = subject {
                    blocked.insert(s);
                }
                *counts.entry((channel, "failed")).or_default() += 1;
                i += 1;
            }
        }
    }
    counts
}

async fn deliver_one(
    api: &Client,
    settings: &DeliverySettings,
    state: &mut State,
    alerts: &mut alerts::AlertDesk,
    n: &Notification,
) -> Result<(), DeliveryError> {
    match n {
        Notification::Event { .. } => Ok(event_log::append(&settings.event_log, n)?),
        Notification::RaiseAlert {
            cluster_id,
            zone_id,
            key,
            description,
            covers,
        } => {
            let record = alerts
                .raise(api, state, cluster_id, zone_id.as_deref(), key, description)
                .await?;
            let mut record = record;
            record.covers = covers.clone();
            state.alerts.insert(record_key(cluster_id, key), record);
            Ok(())
        }
        Notification::ArchiveAlert { cluster_id, key } => {
            let rk = record_key(cluster_id, key);
            let Some(record) = state.alerts.get(&rk) else {
                return Ok(());
            };
            alerts::archive(api, &record.alert_id).await?;
            state.alerts.remove(&rk);
            Ok(())
        }
        Notification::AddAnnotation {
            cluster_id,
            key,
            text,
        } => {
            let id = add_annotation(api, cluster_id, key, text).await?;
            state.annotations.insert(record_key(cluster_id, key), id);
            Ok(())
        }
        Notification::RemoveAnnotation { cluster_id, key } => {
            let rk = record_key(cluster_id, key);
            let Some(id) = state.annotations.get(&rk).cloned() else {
                return Ok(());
            };
            match api
                .request("removeAnnotation", &[("id", id.as_str())])
                .await
            {
                Ok(_) => {}
                // Already gone (removed by hand, or with its cluster).
                Err(e) if e.code() == Some(431) => {}
                Err(e) => return Err(e.into()),
            }
            state.annotations.remove(&rk);
            Ok(())
        }
    }
}

/// Adds the annotation unless one with this marker is already on the cluster (a delivery
/// interrupted after CloudStack stored it). Returns the annotation id.
async fn add_annotation(
    api: &Client,
    cluster_id: &str,
    key: &str,
    text: &str,
) -> Result<String, DeliveryError> {
    let tag = marker(cluster_id, key);
    let existing: Vec<Annotation> = api
        .list(
            "listAnnotations",
            "annotation",
            &[
                ("entitytype", "KUBERNETES_CLUSTER"),
                ("entityid", cluster_id),
                ("annotationfilter", "all"),
            ],
        )
        .await?;
    if let Some(a) = existing
        .iter()
        .find(|a| a.annotation.as_deref().is_some_and(|t| t.ends_with(&tag)))
    {
        return Ok(a.id.clone());
    }
    let answer = api
        .request(
            "addAnnotation",
            &[
                ("annotation", text),
                ("entitytype", "KUBERNETES_CLUSTER"),
                ("entityid", cluster_id),
                ("adminsonly", "true"),
            ],
        )
        .await?;
    answer
        .get("annotation")
        .and_then(|a| a.get("id"))
        .and_then(|id| id.as_str())
        .map(str::to_string)
        .ok_or_else(|| {
            DeliveryError::Alert("addAnnotation answered without an annotation id".into())
        })
}
