//! Telling a cluster's new findings within the budgets that keep one tenant from taking what
//! others need: per cluster (`notify.alert_cap`), per tenant at once
//! (`notify.owner_alert_cap`) and in any hour (`notify.owner_alerts_per_hour`), and the share
//! of `notify.alert_types` kept for tenants holding few alerts.

use std::collections::{HashMap, HashSet};

use super::summaries::has_open_summary;
use super::{Queue, StepSettings};
use crate::base::time::Timestamp;
use crate::diff::wording::{alert_description, annotation_text, summary_description};
use crate::diff::{FindingKey, Mismatch};
use crate::state::{Notification, RecordKey, State};

/// The window `notify.owner_alerts_per_hour` counts over.
pub const HOUR: std::time::Duration = std::time::Duration::from_secs(3600);

/// What is held now, counted once per step when first needed and kept up to date as alerts
/// and annotations are queued: alerts and annotations by tenant, and alerts in all (an alert
/// type held in any zone is not given again: `notify::alerts`).
#[derive(Default)]
pub(super) struct Budget {
    counts: Option<Counts>,
}

#[derive(Default)]
struct Counts {
    alerts: HashMap<String, usize>,
    annotations: HashMap<String, usize>,
    all_alerts: usize,
}

/// Which of a tenant's holdings a budget is asked about.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Channel {
    Alert,
    Annotation,
}

impl Budget {
    fn counts(&mut self, state: &State) -> &mut Counts {
        self.counts.get_or_insert_with(|| count(state))
    }

    /// How many more of `channel` the tenant's clusters may hold now: the cap at once less
    /// what they hold, and the hourly figure less what was raised for them in the last hour.
    fn tenant_room(
        &mut self,
        state: &State,
        tenant: &str,
        channel: Channel,
        settings: &StepSettings,
    ) -> usize {
        let counts = self.counts(state);
        let (held, raised) = match channel {
            Channel::Alert => (
                counts.alerts.get(tenant).copied().unwrap_or(0),
                state.raised.get(tenant).map_or(0, |r| r.alerts.len()),
            ),
            Channel::Annotation => (
                counts.annotations.get(tenant).copied().unwrap_or(0),
                state.raised.get(tenant).map_or(0, |r| r.annotations.len()),
            ),
        };
        let at_once = settings.owner_alert_cap.saturating_sub(held);
        let in_hour = settings.owner_alerts_per_hour.saturating_sub(raised);
        at_once.min(in_hour)
    }

    /// How many alert types the tenant may take: a quarter of `notify.alert_types` is kept
    /// for tenants holding fewer than `alert_cap` alerts, who may take it up to that many.
    fn types_room(&mut self, state: &State, tenant: &str, settings: &StepSettings) -> usize {
        let counts = self.counts(state);
        let held = counts.alerts.get(tenant).copied().unwrap_or(0);
        let free = settings.alert_types.saturating_sub(counts.all_alerts);
        let beyond_reserve = free.saturating_sub(settings.alert_types / 4);
        let few = settings.alert_cap.saturating_sub(held).min(free);
        beyond_reserve.max(few)
    }

    fn add(&mut self, state: &mut State, tenant: &str, channel: Channel, n: usize, now: Timestamp) {
        if n == 0 {
            return;
        }
        let counts = self.counts(state);
        let times = state.raised.entry(tenant.to_string()).or_default();
        match channel {
            Channel::Alert => {
                *counts.alerts.entry(tenant.to_string()).or_default() += n;
                counts.all_alerts += n;
                times.alerts.extend(std::iter::repeat_n(now, n));
            }
            Channel::Annotation => {
                *counts.annotations.entry(tenant.to_string()).or_default() += n;
                times.annotations.extend(std::iter::repeat_n(now, n));
            }
        }
    }
}

/// Alerts and annotations held (recorded, or queued to be raised), by tenant, and alerts in
/// all.
fn count(state: &State) -> Counts {
    let mut alerts: HashSet<RecordKey> = state.alerts.keys().cloned().collect();
    let mut annotations: HashSet<RecordKey> = state.annotations.keys().cloned().collect();
    for o in &state.outbox {
        match &o.notification {
            Notification::RaiseAlert {
                cluster_id, key, ..
            } => {
                alerts.insert(RecordKey::new(cluster_id, key));
            }
            Notification::AddAnnotation {
                cluster_id, key, ..
            } => {
                annotations.insert(RecordKey::new(cluster_id, key));
            }
            _ => {}
        }
    }
    let tenant = |rk: &RecordKey| {
        state
            .clusters
            .contains_key(&rk.cluster_id)
            .then(|| state.tenant_of(&rk.cluster_id))
    };
    let mut counts = Counts {
        all_alerts: alerts.len(),
        ..Counts::default()
    };
    for rk in &alerts {
        if let Some(t) = tenant(rk) {
            *counts.alerts.entry(t).or_default() += 1;
        }
    }
    for rk in &annotations {
        if let Some(t) = tenant(rk) {
            *counts.annotations.entry(t).or_default() += 1;
        }
    }
    counts
}

/// Forgets what was raised more than an hour before `now`.
pub(super) fn forget_old_raises(state: &mut State, now: Timestamp) {
    let since = now.minus(HOUR);
    state.raised.retain(|_, r| {
        r.alerts.retain(|t| *t > since);
        r.annotations.retain(|t| *t > since);
        !r.alerts.is_empty() || !r.annotations.is_empty()
    });
}

/// Queues the annotation and the alert of each finding told for the first time: a cluster
/// holds at most `alert_cap` alerts of its own findings at once, and one summary for the
/// rest, so that a tenant who makes findings every cycle (fake nodes) cannot take the alert
/// types every other cluster needs; and at most `alert_cap` annotations, each of which is
/// a CloudStack event too (the summary alert names the rest). All the clusters of one tenant
/// hold at most `owner_alert_cap` alerts (summaries included) and as many annotations, and
/// are raised at most `owner_alerts_per_hour` of each in any hour; past either, findings are
/// in the event log and the report, the tenant's last alert summing up the rest of the
/// cluster, and an alert that did not fit waits for room (`catch_up`).
pub(super) fn announce(
    q: &mut Queue<'_>,
    budget: &mut Budget,
    cluster_id: &str,
    new: &[Mismatch],
    settings: &StepSettings,
    now: Timestamp,
) {
    annotate(q, budget, cluster_id, new, settings, now);
    alert(q, budget, cluster_id, new, settings, now);
}

/// The annotations of `new`, within the cluster's and the tenant's room.
fn annotate(
    q: &mut Queue<'_>,
    budget: &mut Budget,
    cluster_id: &str,
    new: &[Mismatch],
    settings: &StepSettings,
    now: Timestamp,
) {
    if !settings.annotations {
        return;
    }
    let tenant = q.state.tenant_of(cluster_id);
    let (_, annotated) = holding(q, cluster_id, new);
    let room = settings
        .alert_cap
        .max(1)
        .saturating_sub(annotated)
        .min(budget.tenant_room(q.state, &tenant, Channel::Annotation, settings));
    let n = room.min(new.len());
    for m in &new[..n] {
        q.push(Notification::AddAnnotation {
            cluster_id: cluster_id.to_string(),
            key: m.key().to_string(),
            text: annotation_text(m),
        });
    }
    budget.add(q.state, &tenant, Channel::Annotation, n, now);
}

/// The alerts of `new`, within the cluster's and the tenant's room, the last one summing up
/// the rest; what the tenant's budget alone leaves without an alert waits for room
/// (`deferred`).
fn alert(
    q: &mut Queue<'_>,
    budget: &mut Budget,
    cluster_id: &str,
    new: &[Mismatch],
    settings: &StepSettings,
    now: Timestamp,
) {
    let Some(entry) = q.state.clusters.get(cluster_id) else {
        return;
    };
    let (name, zone_id) = (entry.name.clone(), entry.zone_id.clone());
    let tenant = q.state.tenant_of(cluster_id);
    let (alerted, _) = holding(q, cluster_id, new);
    if !settings.alerts || new.is_empty() {
        return;
    }
    let tenant_room = budget
        .tenant_room(q.state, &tenant, Channel::Alert, settings)
        .min(budget.types_room(q.state, &tenant, settings));
    let cluster_room = settings.alert_cap.max(1).saturating_sub(alerted);
    let mut cap = cluster_room.min(tenant_room);
    let summary = new.len() > cap && !has_open_summary(q.state, cluster_id);
    if summary && cap == tenant_room {
        // The tenant's last type goes to the summary, which names every finding left.
        cap = cap.saturating_sub(1);
    }
    let summary = summary && tenant_room > 0;
    if !summary && new.len() > cap && tenant_room < cluster_room {
        // The tenant's budget, not the cluster's cap, leaves these without an alert.
        defer(q.state, cluster_id, &new[cap..]);
    }
    let raised = cap.min(new.len()) + usize::from(summary);
    budget.add(q.state, &tenant, Channel::Alert, raised, now);
    for m in new.iter().take(cap) {
        q.push(Notification::RaiseAlert {
            cluster_id: cluster_id.to_string(),
            zone_id: zone_id.clone(),
            key: m.key().to_string(),
            description: alert_description(&name, cluster_id, m),
            covers: vec![],
        });
    }
    if summary {
        let rest: Vec<&Mismatch> = new[cap.min(new.len())..].iter().collect();
        let key = format!("summary:{}", now.to_compact());
        q.push(Notification::RaiseAlert {
            cluster_id: cluster_id.to_string(),
            zone_id,
            description: summary_description(&name, cluster_id, &key, &rest),
            covers: rest.iter().map(|m| m.key().to_string()).collect(),
            key,
        });
    }
}

/// Marks `findings` of the cluster as waiting for their tenant's room.
fn defer(state: &mut State, cluster_id: &str, findings: &[Mismatch]) {
    let Some(entry) = state.clusters.get_mut(cluster_id) else {
        return;
    };
    for m in findings {
        if let Some(r) = entry.side_mut(m.side()).get_mut(&m.key()) {
            r.deferred = true;
        }
    }
}

/// Raises the alerts of findings that waited for their tenant's budget, now that it has room
/// (oldest cluster id first); the tenants a storm holds wait for the storm.
pub(super) fn catch_up(
    q: &mut Queue<'_>,
    budget: &mut Budget,
    held_tenants: &HashSet<String>,
    settings: &StepSettings,
    now: Timestamp,
) {
    if !settings.alerts {
        return;
    }
    let waiting: Vec<(String, Vec<Mismatch>)> = q
        .state
        .clusters
        .iter_mut()
        .filter_map(|(id, c)| {
            let found: Vec<Mismatch> = c
                .vms
                .values_mut()
                .chain(c.nodes.values_mut())
                .filter(|r| r.deferred && !r.held && !r.server && r.ignored.is_none())
                .filter_map(|r| {
                    r.deferred = false;
                    r.mismatch()
                })
                .collect();
            (!found.is_empty()).then(|| (id.clone(), found))
        })
        .collect();
    for (id, found) in waiting {
        if held_tenants.contains(&q.state.tenant_of(&id)) {
            defer(q.state, &id, &found);
            continue;
        }
        alert(q, budget, &id, &found, settings, now);
    }
}

/// How many of the cluster's findings told before (not in `new`) hold an alert, and an
/// annotation, now (recorded, or queued).
fn holding(q: &Queue<'_>, cluster_id: &str, new: &[Mismatch]) -> (usize, usize) {
    let Some(entry) = q.state.clusters.get(cluster_id) else {
        return (0, 0);
    };
    let new_keys: HashSet<FindingKey> = new.iter().map(Mismatch::key).collect();
    let mut alerted = 0;
    let mut annotated = 0;
    for k in entry.vms.keys().chain(entry.nodes.keys()) {
        if new_keys.contains(k) {
            continue;
        }
        let rk = RecordKey::finding(cluster_id, k);
        if q.state.alerts.contains_key(&rk) || q.pending.contains(&(rk.clone(), "alert")) {
            alerted += 1;
        }
        if q.state.annotations.contains_key(&rk) || q.pending.contains(&(rk, "annotation")) {
            annotated += 1;
        }
    }
    (alerted, annotated)
}
