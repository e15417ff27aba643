//! Delivery of queued notifications: the event log, CloudStack alerts and admin-only
//! annotations on the cluster. What to send was decided by the dedupe step and written to
//! the state's outbox before anything is sent; an item leaves the outbox only once
//! delivered, so an outage or a crash delays a notification but never loses it.
//!
//! Every alert and annotation text ends with a marker (see `wording`), which lets delivery
//! find what CloudStack already stored after a crash, so nothing is sent twice; an event line
//! carries its item's id and is not written again when the log's last lines hold it. A refusal
//! that cannot change (error 431) ends the item visibly and holds nothing else back.

pub mod alertmanager;
pub mod alerts;
pub mod event_log;
mod messages;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;

use tracing::{debug, error, info, warn};

use crate::cloudstack::client::Client;
use crate::cloudstack::error::ApiError;
use crate::cloudstack::limits::{ALERT_DESCRIPTION_LENGTH, ANNOTATION_LENGTH};
use crate::cloudstack::model::Annotation;
use crate::database::lock::Lock;
use crate::diff::wording::{alert_marker, annotation_marker, marked_key, marker_key, remarked};
use crate::state::{Notification, Outgoing, RecordKey, State};
use messages::{ENDED_BEFORE_SENT, NOT_DELIVERED, REFUSED};

/// What delivery needs to know.
#[derive(Debug, Clone)]
pub struct DeliverySettings {
    pub event_log: PathBuf,
    pub alert_types: std::ops::RangeInclusive<u32>,
    /// With `[alertmanager]`: where findings are also alerts.
    pub alertmanager: Option<std::sync::Arc<alertmanager::Alertmanager>>,
}

/// Notifications delivered between two writes of the state.
const SAVE_EVERY: usize = 50;

/// Outcome counts of one delivery pass, by (channel, outcome): `delivered`, `refused` (for
/// good, dropped) or `failed` (kept).
pub type DeliveryCounts = BTreeMap<(&'static str, &'static str), u64>;

#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error(transparent)]
    EventLog(#[from] event_log::EventLogError),
    #[error(transparent)]
    Alert(#[from] alerts::AlertError),
    /// `addAnnotation` succeeded without naming the annotation it made.
    #[error("addAnnotation answered without an annotation id")]
    AnnotationWithoutId,
    #[error(transparent)]
    Alertmanager(#[from] alertmanager::AlertmanagerError),
}

impl DeliveryError {
    /// CloudStack refused the request for good; sending it again cannot help.
    pub fn is_refusal(&self) -> bool {
        match self {
            DeliveryError::Api(e) => e.is_refusal(),
            DeliveryError::Alertmanager(e) => e.is_refusal(),
            _ => false,
        }
    }
}

/// Delivers the outbox in order.
///
/// - Delivered: the item leaves the outbox; `save` is called every [`SAVE_EVERY`] finished
///   items and at the end, so a crash repeats at most one batch, which the marker check
///   then recognises, and the event log's last [`SAVE_EVERY`] lines for event lines.
/// - Refused by CloudStack for good (error 431: see [`ApiError::is_refusal`]): the item ends
///   with one ERROR naming the finding and what CloudStack said, and is counted `refused`.
///   It holds nothing back.
/// - Failed otherwise (an outage, a timeout, an error that may pass): the item stays queued
///   with its error and attempt count, and later items of the same finding on the same
///   channel wait behind it (an archive must not overtake its raise). Other channels of the
///   finding, and everything else, go on.
///
/// - A raise or an annotation whose own take-back is queued behind it (the finding ended
///   before it reached CloudStack) only records what CloudStack already has; it creates
///   nothing that would be taken back at once.
///
/// With a `lock`, it is confirmed before each item; once it is not, nothing more is sent.
///
/// Nothing more is sent once `save` fails: what was sent since the last good write could
/// otherwise be sent again after a crash. The error is returned.
pub async fn deliver<E>(
    api: &Client,
    settings: &DeliverySettings,
    state: &mut State,
    save: &mut (dyn FnMut(&State) -> Result<(), E> + Send),
    lock: Option<&Lock>,
) -> (DeliveryCounts, Option<E>) {
    let mut counts = DeliveryCounts::new();
    let mut blocked: HashSet<(RecordKey, &'static str)> = HashSet::new();
    let mut alerts = alerts::AlertDesk::new(settings.alert_types.clone());
    let mut event_tail: Option<event_log::Tail> = None;
    // The outbox is compacted in place: `[0, kept)` stays queued, `[kept, next)` is done,
    // `[next, ..)` is still to try. Done items are dropped, and the state saved, once per
    // batch: a crash repeats at most one batch, which the markers recognise, and the event
    // log's end (read once, at the first event) for event lines.
    let taken_back = last_take_backs(&state.outbox);
    let mut kept = 0;
    let mut next = 0;
    let mut done = 0;
    while next < state.outbox.len() {
        // With several instances, only the one holding the lock sends, and it makes sure
        // before each item: one that lost it leaves the rest queued.
        if let Some(lock) = lock
            && !lock.confirm().await
        {
            warn!(
                left = state.outbox.len() - next,
                "this instance no longer holds the lock; nothing more is sent"
            );
            break;
        }
        let item = state.outbox[next].clone();
        let channel = item.notification.channel();
        let lane = item.notification.subject().map(|s| (s, channel));
        let finished = if lane.as_ref().is_some_and(|l| blocked.contains(l)) {
            false
        } else {
            let ended = lane
                .as_ref()
                .and_then(|l| taken_back.get(l))
                .is_some_and(|&last| last > item.id);
            let delivered = deliver_one(
                api,
                settings,
                state,
                &mut alerts,
                &mut event_tail,
                &item,
                ended,
            )
            .await;
            match delivered {
                Ok(()) => {
                    debug!(id = item.id, channel, "notification delivered");
                    *counts.entry((channel, "delivered")).or_default() += 1;
                    true
                }
                Err(e) => {
                    let outcome = not_delivered(&item, &e, &mut state.outbox[next]);
                    if outcome == "failed"
                        && let Some(l) = lane
                    {
                        blocked.insert(l);
                    }
                    *counts.entry((channel, outcome)).or_default() += 1;
                    outcome == "refused"
                }
            }
        };
        if finished {
            done += 1;
        } else {
            state.outbox.swap(kept, next);
            kept += 1;
        }
        next += 1;
        if done >= SAVE_EVERY {
            state.outbox.drain(kept..next);
            next = kept;
            done = 0;
            if let Err(e) = save(state) {
                return (counts, Some(e));
            }
        }
    }
    state.outbox.drain(kept..next);
    if done > 0
        && let Err(e) = save(state)
    {
        return (counts, Some(e));
    }
    (counts, None)
}

/// Logs an item not delivered and returns its outcome: `refused` (for good: it ends) or
/// `failed` (it stays queued, with its attempt and error recorded in `queued`).
fn not_delivered(item: &Outgoing, e: &DeliveryError, queued: &mut Outgoing) -> &'static str {
    let channel = item.notification.channel();
    let message = crate::base::error_chain::error_chain(e);
    if e.is_refusal() {
        let (cluster_id, key) = item.notification.finding();
        error!(
            id = item.id,
            channel,
            action = item.notification.action(),
            cluster_id,
            key,
            attempts = item.attempts + 1,
            error = %message,
            "{REFUSED}"
        );
        return "refused";
    }
    warn!(
        id = item.id,
        channel,
        attempts = item.attempts + 1,
        error = %message,
        "{NOT_DELIVERED}"
    );
    queued.attempts += 1;
    queued.last_error = Some(message);
    "failed"
}

/// The id of the last take-back (an archive, a removal) queued for each finding and channel.
/// Ids grow in the order items were queued.
fn last_take_backs(outbox: &[Outgoing]) -> HashMap<(RecordKey, &'static str), u64> {
    let mut last = HashMap::new();
    for o in outbox {
        let n = &o.notification;
        if matches!(
            n,
            Notification::ArchiveAlert { .. } | Notification::RemoveAnnotation { .. }
        ) && let Some(subject) = n.subject()
        {
            last.insert((subject, n.channel()), o.id);
        }
    }
    last
}

/// Delivers one item. With `ended` (its own take-back is queued behind it: the finding ended
/// before the alert or annotation reached CloudStack), a raise or an annotation only records
/// what CloudStack already stored, from a delivery cut short, for its take-back to remove; it
/// creates nothing that would be taken back at once. This is also what keeps an instance that
/// comes back with such an item from its last term from alerting a finding again that another
/// instance alerted and archived meanwhile.
async fn deliver_one(
    api: &Client,
    settings: &DeliverySettings,
    state: &mut State,
    alerts: &mut alerts::AlertDesk,
    event_tail: &mut Option<event_log::Tail>,
    item: &Outgoing,
    ended: bool,
) -> Result<(), DeliveryError> {
    let n = &item.notification;
    match n {
        Notification::Event { .. } => {
            let tail = match event_tail {
                Some(tail) => tail,
                None => event_tail.insert(event_log::Tail::read(&settings.event_log, SAVE_EVERY)?),
            };
            event_log::append(&settings.event_log, item.id, n, tail)?;
            Ok(())
        }
        Notification::RaiseAlert {
            cluster_id,
            zone_id,
            key,
            description,
            covers,
        } => {
            if ended {
                let found = alerts::find_stored(api, cluster_id, zone_id.as_deref(), key).await?;
                match found {
                    Some(mut record) => {
                        record.covers = covers.clone();
                        state.alerts.insert(RecordKey::new(cluster_id, key), record);
                    }
                    None => info!(id = item.id, cluster_id, key, "{ENDED_BEFORE_SENT}"),
                }
                return Ok(());
            }
            let description = remarked(
                description,
                &alert_marker(cluster_id, key),
                ALERT_DESCRIPTION_LENGTH,
            );
            let record = alerts
                .raise(
                    api,
                    state,
                    cluster_id,
                    zone_id.as_deref(),
                    key,
                    &description,
                )
                .await?;
            let mut record = record;
            record.covers = covers.clone();
            state.alerts.insert(RecordKey::new(cluster_id, key), record);
            Ok(())
        }
        Notification::ArchiveAlert { cluster_id, key } => {
            let rk = RecordKey::new(cluster_id, key);
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
            match add_annotation(api, cluster_id, key, text, !ended).await? {
                Some(id) => {
                    state
                        .annotations
                        .insert(RecordKey::new(cluster_id, key), id);
                }
                None => info!(id = item.id, cluster_id, key, "{ENDED_BEFORE_SENT}"),
            }
            Ok(())
        }
        Notification::RemoveAnnotation { cluster_id, key } => {
            let rk = RecordKey::new(cluster_id, key);
            let Some(id) = state.annotations.get(&rk).cloned() else {
                return Ok(());
            };
            remove_annotation(api, cluster_id, &id).await?;
            state.annotations.remove(&rk);
            Ok(())
        }
        Notification::ResolveAlertmanager {
            labels,
            annotations,
            starts_at,
            ends_at,
            ..
        } => {
            // Alertmanager taken out of the config since: nothing to resolve there.
            let Some(am) = &settings.alertmanager else {
                return Ok(());
            };
            let resolved = alertmanager::alert(labels, annotations, *starts_at, *ends_at);
            Ok(am.post(&[resolved]).await?)
        }
    }
}

/// Removes one annotation this daemon added. One already removed (by hand, or with its
/// cluster: destroying a cluster removes its annotations) is done: CloudStack answers 530
/// for it (`AnnotationManagerImpl.removeAnnotation` finds no row), so a 530 is taken as
/// "gone" once the cluster's annotations, listed, no longer hold it. (`listAnnotations id=`
/// cannot tell: it answers an empty list unless `userid` is the creator's.) A 530 for
/// another reason (the database down) leaves it listed, and the item is tried again.
async fn remove_annotation(api: &Client, cluster_id: &str, id: &str) -> Result<(), ApiError> {
    let refused = match api.request("removeAnnotation", &[("id", id)]).await {
        Ok(_) => return Ok(()),
        Err(e) if e.code() == Some(530) => e,
        Err(e) => return Err(e),
    };
    match cluster_annotations(api, cluster_id).await {
        Ok(listed) if !listed.iter().any(|a| a.id == id) => Ok(()),
        _ => Err(refused),
    }
}

/// The annotations on the cluster that cks-drift wrote, newest first: the API key's user's own
/// (`annotationfilter=self`) and admin-only. Anyone else's text, a tenant's with a forged
/// marker included, is never taken for cks-drift's.
async fn cluster_annotations(api: &Client, cluster_id: &str) -> Result<Vec<Annotation>, ApiError> {
    api.list_where(
        "listAnnotations",
        "annotation",
        &[
            ("entitytype", "KUBERNETES_CLUSTER"),
            ("entityid", cluster_id),
            ("annotationfilter", "self"),
        ],
        Annotation::ours,
    )
    .await
}

/// Adds the annotation unless one with its marker is already on the cluster (a delivery
/// interrupted after CloudStack stored it; older releases wrote the cluster id in the marker
/// too, which [`marked_key`] reads past). Returns the annotation id; none when there was none
/// and `create` is false.
async fn add_annotation(
    api: &Client,
    cluster_id: &str,
    key: &str,
    text: &str,
    create: bool,
) -> Result<Option<String>, DeliveryError> {
    let tag = marker_key(key);
    let existing = cluster_annotations(api, cluster_id).await?;
    if let Some(a) = existing
        .iter()
        .find(|a| a.annotation.as_deref().and_then(marked_key) == Some(tag.as_str()))
    {
        return Ok(Some(a.id.clone()));
    }
    if !create {
        return Ok(None);
    }
    // Queued texts are fitted again: a text queued by an older release may be too long.
    let text = remarked(text, &annotation_marker(key), ANNOTATION_LENGTH);
    let answer = api
        .request(
            "addAnnotation",
            &[
                ("annotation", text.as_str()),
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
        .map(|id| Some(id.to_string()))
        .ok_or(DeliveryError::AnnotationWithoutId)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::time::Timestamp;
    use crate::config::{CloudStackSettings, Secret};
    use crate::state::{Level, Outgoing};

    /// An outbox of `n` event lines, as the state file holds it.
    fn events(n: u64) -> State {
        let mut state = State::default();
        for id in 1..=n {
            state.outbox.push(Outgoing {
                id,
                attempts: 0,
                last_error: None,
                notification: Notification::Event {
                    level: Level::Warn,
                    cluster_id: "c-1".into(),
                    cluster: "web".into(),
                    key: Some(format!("unmapped_vm:v-{id}")),
                    kind: Some("unmapped_vm".into()),
                    vm_id: None,
                    vm_name: None,
                    node: None,
                    description: "a VM named as a node is not in the map".into(),
                    time: Timestamp::parse("2026-11-30T10:00:00Z").unwrap(),
                    after_takeover: false,
                },
            });
        }
        state.next_id = n + 1;
        state
    }

    #[tokio::test]
    async fn a_batch_delivered_again_after_a_crash_writes_no_event_line_twice() {
        let dir = tempfile::tempdir().unwrap();
        let settings = DeliverySettings {
            event_log: dir.path().join("events.jsonl"),
            alert_types: 3000..=3999,
            alertmanager: None,
        };
        // Events need no CloudStack: a client of a port where nothing listens.
        let api = Client::new(&CloudStackSettings {
            url: "http://127.0.0.1:9/client/api".into(),
            api_key: Secret::new("k"),
            secret_key: Secret::new("s"),
            timeout: std::time::Duration::from_secs(1),
            ca_file: None,
            insecure: false,
            page_size: 500,
        })
        .unwrap();
        let saved = events(3);
        // The first run delivers the batch and is killed before the state is written: the
        // state file still holds the whole outbox.
        let mut running = saved.clone();
        let mut killed = |_: &State| -> Result<(), ()> { Err(()) };
        let (counts, error) = deliver(&api, &settings, &mut running, &mut killed, None).await;
        assert_eq!(counts[&("event_log", "delivered")], 3);
        assert!(error.is_some());
        // The restart delivers the same batch again.
        let mut restarted = saved.clone();
        let mut save = |_: &State| -> Result<(), ()> { Ok(()) };
        let (counts, error) = deliver(&api, &settings, &mut restarted, &mut save, None).await;
        assert_eq!(counts[&("event_log", "delivered")], 3);
        assert!(error.is_none() && restarted.outbox.is_empty());
        let text = std::fs::read_to_string(&settings.event_log).unwrap();
        assert_eq!(text.lines().count(), 3, "{text}");
        let ids: Vec<u64> = text
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        assert_eq!(ids, [1, 2, 3], "{text}");
    }
}
