//! The storm breaker of the dedupe step: when new findings come in too many clusters at once,
//! one storm alert instead of theirs. Decided per tenant, so that one tenant alone never
//! holds back what is told about another.

use std::collections::{HashMap, HashSet};

use super::caps::{Budget, announce, catch_up};
use super::{Queue, StepSettings, StormChange};
use crate::base::time::Timestamp;
use crate::diff::Mismatch;
use crate::diff::wording::storm_description;
use crate::state::{Level, Notification, RecordKey, STORM_SCOPE, State, Storm};

/// The tenants a storm holds, given how many clusters of each have findings not yet told
/// (new in this step, or held): a tenant is held when its own such clusters, and one for each
/// other tenant that has any, exceed `threshold`. Another tenant's clusters count as one
/// however many there are, so no one tenant can put another in a storm by what it does to
/// its own clusters; a storm needs many tenants, or many clusters of the tenant it holds.
pub fn storm_tenants(counts: &HashMap<String, usize>, threshold: usize) -> HashSet<String> {
    let others = counts
        .values()
        .filter(|n| **n > 0)
        .count()
        .saturating_sub(1);
    counts
        .iter()
        .filter(|(_, n)| **n > 0 && **n + others > threshold)
        .map(|(t, _)| t.clone())
        .collect()
}

/// Clusters with findings not yet told (new in `told`, or held), counted by tenant.
fn waiting_by_tenant(state: &State, told: &[(String, Vec<Mismatch>)]) -> HashMap<String, usize> {
    let mut clusters: HashSet<&str> = told.iter().map(|(id, _)| id.as_str()).collect();
    for (id, c) in &state.clusters {
        if c.vms.values().chain(c.nodes.values()).any(|r| r.held) {
            clusters.insert(id.as_str());
        }
    }
    let mut counts: HashMap<String, usize> = HashMap::new();
    for id in clusters {
        *counts.entry(state.tenant_of(id)).or_default() += 1;
    }
    counts
}

/// Tells this step's new findings: each its annotation and alert, or, for the tenants a storm
/// holds (see [`storm_tenants`]), one storm alert while theirs are held. A tenant the storm no
/// longer holds has its held findings still open told one by one, as if new; the storm ends
/// once it holds no tenant.
pub(super) fn storm(
    q: &mut Queue<'_>,
    told: Vec<(String, Vec<Mismatch>)>,
    checked: usize,
    settings: &StepSettings,
    now: Timestamp,
) -> Option<StormChange> {
    let threshold = settings.storm.clusters(checked);
    let held_tenants = match threshold {
        Some(t) => storm_tenants(&waiting_by_tenant(q.state, &told), t),
        None => HashSet::new(),
    };
    let (hold, tell): (Vec<_>, Vec<_>) = told
        .into_iter()
        .partition(|(id, _)| held_tenants.contains(&q.state.tenant_of(id)));
    let mut change = None;
    if let Some(t) = threshold.filter(|_| !hold.is_empty()) {
        match q.state.storm.take() {
            None => {
                change = Some(begin_storm(q, &hold, checked, t, settings, now));
                if let Some(after) = q.state.storm.as_mut() {
                    after.alerted_tenants = held_tenants.len();
                }
            }
            // A storm that now holds twice the tenants it held when its alert was raised (one
            // tenant's own storm, then a cause common to many): its alert, which counted only
            // the first, is archived and raised anew for what it holds now.
            Some(before)
                if before.alerted_tenants > 0
                    && held_tenants.len() >= 2 * before.alerted_tenants =>
            {
                archive_storm_alert(q, &before, settings);
                change = Some(begin_storm(q, &hold, checked, t, settings, now));
                if let Some(after) = q.state.storm.as_mut() {
                    after.alerted_tenants = held_tenants.len();
                    after.since = before.since;
                    after.held = before.held;
                    after.released = before.released;
                    after.released_clusters = before.released_clusters;
                }
            }
            Some(before) => q.state.storm = Some(before),
        }
    }
    let mut budget = Budget::default();
    catch_up(q, &mut budget, &held_tenants, settings, now);
    for (id, new) in &tell {
        announce(q, &mut budget, id, new, settings, now);
    }
    let Some(mut storm) = q.state.storm.take() else {
        return change;
    };
    hold_findings(q.state, &hold, &mut storm);
    let release = release_held(q.state, &held_tenants);
    for (id, held) in &release {
        announce(q, &mut budget, id, held, settings, now);
    }
    let released: usize = release.iter().map(|(_, ms)| ms.len()).sum();
    storm.released += released;
    storm.released_clusters += release.len();
    if !held_tenants.is_empty() {
        q.state.storm = Some(storm);
        return change;
    }
    // Over: what is still open was told now or before; what resolved meanwhile never is.
    Some(end_storm(q, storm, settings, now))
}

/// Begins a storm of the findings `hold` in `checked` clusters, past `threshold`: its alert,
/// its event and its record.
fn begin_storm(
    q: &mut Queue<'_>,
    hold: &[(String, Vec<Mismatch>)],
    checked: usize,
    threshold: usize,
    settings: &StepSettings,
    now: Timestamp,
) -> StormChange {
    // Lowercase, so that its marker is written out (see `wording::marker_key`).
    let key = format!("storm:{}", now.to_compact().to_ascii_lowercase());
    let findings: Vec<&Mismatch> = hold.iter().flat_map(|(_, ms)| ms).collect();
    let description = storm_description(&key, hold.len(), checked, threshold, &findings);
    if settings.alerts {
        q.push(Notification::RaiseAlert {
            cluster_id: STORM_SCOPE.to_string(),
            zone_id: None,
            key: key.clone(),
            description: description.clone(),
            covers: vec![],
        });
    }
    q.push(storm_event(Level::Warn, &key, description, now));
    q.state.storm = Some(Storm {
        since: now,
        key,
        clusters: hold.len(),
        checked,
        held: 0,
        released: 0,
        released_clusters: 0,
        alerted_tenants: 0,
    });
    StormChange::Began {
        clusters: hold.len(),
        checked,
        threshold,
        findings: findings.len(),
    }
}

/// Holds the findings `hold` while `storm` lasts, counting them in it.
fn hold_findings(state: &mut State, hold: &[(String, Vec<Mismatch>)], storm: &mut Storm) {
    for (id, new) in hold {
        let Some(entry) = state.clusters.get_mut(id) else {
            continue;
        };
        for m in new {
            if let Some(r) = entry.side_mut(m.side()).get_mut(&m.key()) {
                r.held = true;
                storm.held += 1;
            }
        }
    }
}

/// Queues the archive of `storm`'s alert.
fn archive_storm_alert(q: &mut Queue<'_>, storm: &Storm, settings: &StepSettings) {
    let rk = RecordKey::new(STORM_SCOPE, &storm.key);
    if settings.alerts || q.state.alerts.contains_key(&rk) || q.pending.contains(&(rk, "alert")) {
        q.push(Notification::ArchiveAlert {
            cluster_id: STORM_SCOPE.to_string(),
            key: storm.key.clone(),
        });
    }
}

/// Ends `storm`: its alert archived, with any other storm alert recorded (another instance's,
/// read back while this one's storm was under way: it is the same storm), and its end logged.
fn end_storm(
    q: &mut Queue<'_>,
    storm: Storm,
    settings: &StepSettings,
    now: Timestamp,
) -> StormChange {
    archive_storm_alert(q, &storm, settings);
    let others: Vec<String> = q
        .state
        .alerts
        .keys()
        .filter(|rk| {
            rk.cluster_id == STORM_SCOPE && rk.key.starts_with("storm:") && rk.key != storm.key
        })
        .map(|rk| rk.key.clone())
        .collect();
    for key in others {
        q.push(Notification::ArchiveAlert {
            cluster_id: STORM_SCOPE.to_string(),
            key,
        });
    }
    let description = format!(
        "The storm of VM map findings that began at {} is over: of {} findings held, {} still \
         open in {} clusters were told one by one; the others resolved meanwhile and are not told",
        storm.since, storm.held, storm.released, storm.released_clusters
    );
    q.push(storm_event(Level::Info, &storm.key, description, now));
    StormChange::Ended {
        since: storm.since,
        held: storm.held,
        released: storm.released,
    }
}

/// Unholds the held findings of every tenant not in `still_held`, returning those still open
/// by cluster id.
fn release_held(state: &mut State, still_held: &HashSet<String>) -> Vec<(String, Vec<Mismatch>)> {
    let ids: Vec<String> = state
        .clusters
        .keys()
        .filter(|id| !still_held.contains(&state.tenant_of(id)))
        .cloned()
        .collect();
    let mut release: Vec<(String, Vec<Mismatch>)> = Vec::new();
    for id in ids {
        let Some(c) = state.clusters.get_mut(&id) else {
            continue;
        };
        let held: Vec<Mismatch> = c
            .vms
            .values_mut()
            .chain(c.nodes.values_mut())
            .filter(|r| r.held)
            .filter_map(|r| {
                r.held = false;
                r.mismatch()
            })
            .collect();
        if !held.is_empty() {
            release.push((id, held));
        }
    }
    release
}

/// A line of the event log about a storm: about no one cluster.
fn storm_event(level: Level, key: &str, description: String, now: Timestamp) -> Notification {
    Notification::Event {
        level,
        cluster_id: String::new(),
        cluster: String::new(),
        key: Some(key.to_string()),
        kind: Some("storm".to_string()),
        vm_id: None,
        vm_name: None,
        node: None,
        description,
        time: now,
        after_takeover: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(pairs: &[(&str, usize)]) -> HashMap<String, usize> {
        pairs.iter().map(|(t, n)| (t.to_string(), *n)).collect()
    }

    fn sorted(set: HashSet<String>) -> Vec<String> {
        let mut v: Vec<String> = set.into_iter().collect();
        v.sort();
        v
    }

    #[test]
    fn one_tenant_alone_makes_a_storm_of_its_own_findings_only() {
        let held = storm_tenants(&counts(&[("evil", 6), ("honest", 1)]), 5);
        assert_eq!(sorted(held), vec!["evil"]);
    }

    #[test]
    fn a_storm_of_many_tenants_holds_them_all() {
        let c: HashMap<String, usize> = (0..6).map(|i| (format!("t{i}"), 1)).collect();
        assert_eq!(storm_tenants(&c, 5).len(), 6);
        let c: HashMap<String, usize> = (0..5).map(|i| (format!("t{i}"), 1)).collect();
        assert!(storm_tenants(&c, 5).is_empty());
    }

    #[test]
    fn many_clusters_of_another_tenant_count_as_one() {
        // "a" sees its 2, and one for each of big, b and c: 5, not past 5.
        let held = storm_tenants(&counts(&[("big", 50), ("a", 2), ("b", 2), ("c", 1)]), 5);
        assert_eq!(sorted(held), vec!["big"]);
        let held = storm_tenants(&counts(&[("big", 50), ("a", 3), ("b", 2), ("c", 1)]), 5);
        assert_eq!(sorted(held), vec!["a", "big"]);
        let held = storm_tenants(&counts(&[("big", 50), ("a", 3), ("b", 3), ("c", 3)]), 5);
        assert_eq!(sorted(held), vec!["a", "b", "big", "c"]);
    }

    #[test]
    fn a_cloud_of_one_tenant_still_has_storms() {
        let held = storm_tenants(&counts(&[("admin", 6)]), 5);
        assert_eq!(sorted(held), vec!["admin"]);
        assert!(storm_tenants(&counts(&[("admin", 5)]), 5).is_empty());
    }
}
