//! The pure dedupe step: what a cycle observed of each cluster and the previous state in; the
//! new state, the notifications to send and the keys first reported out. No clock, I/O or
//! randomness; it knows the diff's types and its own, not the cycle that fed it.
//!
//! Rules (as upstream): per cluster, the VM side and the node side are kept separately; a
//! mismatch is reported once, and again only after it went away and came back; when a side
//! matches again, its entry is cleared and an INFO event says so. A cluster only partly
//! checked keeps its node side; a skipped cluster keeps everything.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::base::time::Timestamp;
use crate::config::StormThreshold;
use crate::diff::wording::reason;
use crate::diff::{FindingKey, GONE_EXPUNGED, GONE_MISSING, Mismatch, MismatchKind, Side, Subject};
use crate::snapshot::{ClusterIdentity, PreviousMap, RememberedVm, VanishedHow};
use crate::state::{
    ClusterState, Level, Notification, Outgoing, RecordKey, Reported, State, VanishedRecord,
};

/// How much of a cluster a cycle compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coverage {
    /// The map, the VMs and the Kubernetes nodes.
    Full,
    /// The map and the VMs: the nodes could not be listed.
    VmsOnly,
    /// Nothing: skipped.
    None,
}

/// What a cycle observed of one cluster, as the step needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    /// Who it is, carried whole from the cycle.
    pub cluster: ClusterIdentity,
    pub coverage: Coverage,
    /// What the comparison found (empty when skipped).
    pub mismatches: Vec<Mismatch>,
    /// The mapped VM ids (and names) as the API showed them, for the next cycle's probe.
    pub mapped: Vec<(String, String)>,
    /// `controlnodes + size + etcdnodes`.
    pub expected_vms: u32,
    /// The mapped VMs to remember by their database id, when the database gave its hidden
    /// map rows; `None` keeps what was remembered.
    pub db_ids: Option<BTreeMap<u64, RememberedVm>>,
    /// Why the nodes could not be listed, in plain words (with `VmsOnly`).
    pub blind_reason: Option<String>,
    /// Whether a listing of its nodes ran this cycle (started, whatever its outcome); not
    /// when the cycle's listing deadline came before its turn.
    pub listed: bool,
    /// Findings of `mismatches` an `[[ignore]]` rule matches, by key.
    pub ignored: BTreeMap<FindingKey, crate::state::ignore::Ignored>,
    /// Findings of `mismatches` the management server's own VM map check alerts itself:
    /// they raise no CloudStack alert or annotation here (`notify.defer_to_server_check`).
    pub left_to_server: BTreeSet<FindingKey>,
}

/// `(cluster id, key)` of the findings first reported by a step.
pub type NewKeys = HashSet<(String, FindingKey)>;

/// Which channels are on, and the alert cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepSettings {
    pub alerts: bool,
    pub annotations: bool,
    /// New mismatches of one cluster in one cycle that get an alert each; the rest share one.
    pub alert_cap: usize,
    /// Alerts all the clusters of one owner hold at once, summaries included.
    pub owner_alert_cap: usize,
    /// How long a cluster's nodes may go unlisted (and at least two cycles) before that is a
    /// finding of its own.
    pub blind_after: std::time::Duration,
    /// How long a finding must stay absent before it counts as gone.
    pub resolve_after: std::time::Duration,
    /// Alerts (and, apart, annotations) raised for one tenant's clusters in any hour.
    pub owner_alerts_per_hour: usize,
    /// How many alert types `notify.alert_types` holds: a quarter of them is kept for
    /// tenants holding fewer than `alert_cap` alerts.
    pub alert_types: usize,
    /// How many clusters with new findings in one cycle make a storm.
    pub storm: StormThreshold,
    /// Resolve findings' Alertmanager alerts through the outbox.
    pub alertmanager: bool,
}

#[cfg(test)]
impl StepSettings {
    /// Alerts and annotations on, a cap of 5, no storm and no Alertmanager: what the tests of
    /// a step use.
    pub(crate) const ALL_ON: StepSettings = StepSettings {
        alerts: true,
        annotations: true,
        alert_cap: 5,
        owner_alert_cap: 1000,
        blind_after: crate::config::DEFAULT_BLIND_AFTER,
        resolve_after: std::time::Duration::ZERO,
        owner_alerts_per_hour: 100_000,
        alert_types: 1000,
        storm: crate::config::StormThreshold::Off,
        alertmanager: false,
    };
}

/// A storm that began or ended in a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StormChange {
    Began {
        /// Clusters with new findings, of `checked`, against the threshold.
        clusters: usize,
        checked: usize,
        threshold: usize,
        findings: usize,
    },
    Ended {
        since: Timestamp,
        /// Findings held while it lasted, and those still open, now told one by one.
        held: usize,
        released: usize,
    },
}

/// What a step decided besides the new state.
#[derive(Debug, Default, PartialEq)]
pub struct StepOutcome {
    /// Mismatches first reported by this cycle.
    pub new: NewKeys,
    /// Every open mismatch per cluster id after the step (kept ones included).
    pub open: BTreeMap<String, Vec<Mismatch>>,
    pub storm: Option<StormChange>,
    /// Findings an `[[ignore]]` rule matched until now and no longer does (it expired or was
    /// removed), with the rule that did. They are told now, as new.
    pub unignored: Vec<IgnoreChange>,
    /// Findings an `[[ignore]]` rule matches from now on, whose alert and annotation are
    /// taken back.
    pub newly_ignored: Vec<IgnoreChange>,
    /// `(cluster id, key)` of findings left to the server's own check from now on, whose
    /// alert and annotation are taken back.
    pub handed_over: Vec<(String, FindingKey)>,
}

/// A finding an `[[ignore]]` rule started or stopped matching.
#[derive(Debug, Clone, PartialEq)]
pub struct IgnoreChange {
    pub cluster_id: String,
    pub key: FindingKey,
    pub rule: crate::state::ignore::Ignored,
}

fn side_text(side: Side) -> &'static str {
    match side {
        Side::Vms => "the VMs of the cluster in CloudStack",
        Side::Nodes => "the Kubernetes nodes of the cluster",
    }
}

/// The map memory the next cycle's probe needs, per cluster id.
pub fn previous_maps(state: &State) -> HashMap<String, PreviousMap> {
    state
        .clusters
        .iter()
        .map(|(id, c)| {
            let vanished = c
                .vanished
                .iter()
                .filter(|(vm, _)| {
                    let key = FindingKey::new(MismatchKind::MappedVm, vm.as_str());
                    c.vms.contains_key(&key)
                })
                .map(|(vm, r)| (vm.clone(), (r.name.clone(), r.how)))
                .collect();
            (
                id.clone(),
                PreviousMap {
                    vms: c.map.clone(),
                    expected_vms: c.expected_vms,
                    vanished,
                    db_ids: c.db_ids.clone(),
                    nodes_failed: c.nodes_failed,
                    listed_at: c.listed_at,
                },
            )
        })
        .collect()
}

/// `(subject, channel)` of every queued notification. `close` asks it once per resolved
/// finding, so it is kept up to date as notifications are queued rather than found by
/// scanning the outbox each time (which made resolving many findings quadratic).
type Pending = HashSet<(RecordKey, &'static str)>;

fn pending_index(state: &State) -> Pending {
    state
        .outbox
        .iter()
        .filter_map(|o| Some((o.notification.subject()?, o.notification.channel())))
        .collect()
}

struct Queue<'a> {
    state: &'a mut State,
    pending: &'a mut Pending,
}

impl Queue<'_> {
    fn push(&mut self, n: Notification) {
        if let Some(subject) = n.subject() {
            self.pending.insert((subject, n.channel()));
        }
        let id = self.state.next_id;
        self.state.next_id += 1;
        self.state.outbox.push(Outgoing {
            id,
            attempts: 0,
            last_error: None,
            notification: n,
        });
    }
}

fn event(
    level: Level,
    cluster_id: &str,
    cluster: &str,
    m: Option<&Mismatch>,
    description: String,
    now: Timestamp,
) -> Notification {
    let vm = m.and_then(Mismatch::vm);
    Notification::Event {
        level,
        cluster_id: cluster_id.to_string(),
        cluster: cluster.to_string(),
        key: m.map(|m| m.key().to_string()),
        kind: m.map(|m| m.kind.as_str().to_string()),
        vm_id: vm.map(|v| v.id.clone()),
        vm_name: vm.and_then(|v| v.name.clone()),
        node: m.and_then(Mismatch::node).map(str::to_string),
        description,
        time: now,
        after_takeover: false,
    }
}

/// The blind finding of a cluster whose nodes have gone unlisted for `blind_after` and at
/// least two cycles, keeping count in `entry`: since the last full comparison, or since the
/// first failure of a cluster never compared. A skipped cluster changes nothing.
fn blind_finding(
    entry: &mut ClusterState,
    c: &Observed,
    blind_after: std::time::Duration,
    now: Timestamp,
) -> Option<Mismatch> {
    match c.coverage {
        Coverage::None => None,
        Coverage::Full => {
            entry.compared_at = Some(now);
            entry.unseen_since = None;
            entry.unseen_cycles = 0;
            None
        }
        Coverage::VmsOnly => {
            entry.unseen_cycles = entry.unseen_cycles.saturating_add(1);
            let since = *entry
                .unseen_since
                .get_or_insert(entry.compared_at.unwrap_or(now));
            (entry.unseen_cycles >= 2 && since <= now.minus(blind_after)).then(|| Mismatch {
                kind: MismatchKind::Blind,
                subject: Subject::Blind {
                    reason: c
                        .blind_reason
                        .clone()
                        .unwrap_or_else(|| "the nodes could not be listed".into()),
                    since,
                },
            })
        }
    }
}

/// Applies what one cycle observed to the state and queues the notifications it calls for.
/// An empty observation is not taken as "every cluster is gone" (a key that lost its rights
/// sees nothing).
pub fn step(
    state: &mut State,
    observed: &[Observed],
    settings: &StepSettings,
    now: Timestamp,
) -> StepOutcome {
    let mut outcome = StepOutcome::default();
    let seen: HashSet<&str> = observed.iter().map(|c| c.cluster.id.as_str()).collect();
    let mut pending = pending_index(state);
    // The new findings of each cluster, in cluster order: told after every cluster is stepped,
    // once it is known whether they make a storm.
    let mut told: Vec<(String, Vec<Mismatch>)> = Vec::new();

    for c in observed {
        let tell = step_cluster(state, &mut pending, &mut outcome, c, settings, now);
        if !tell.is_empty() {
            told.push((c.cluster.id.clone(), tell));
        }
    }

    // Clusters that no longer exist: close what was open for them.
    if !observed.is_empty() {
        close_gone(state, &mut pending, &seen, settings, now);
    }

    let checked = observed
        .iter()
        .filter(|c| c.coverage != Coverage::None)
        .count();
    caps::forget_old_raises(state, now);
    let mut q = Queue {
        state,
        pending: &mut pending,
    };
    outcome.storm = storm::storm(&mut q, told, checked, settings, now);
    note_seen_since_read_back(state, observed);
    outcome
}

/// Only a cluster's first step with its nodes listed after a read-back can meet findings the
/// instance before told: a cluster skipped, or whose nodes could not be listed, then is met
/// later. The read-back is over once every cluster listed was seen so.
fn note_seen_since_read_back(state: &mut State, observed: &[Observed]) {
    if !state.read_back {
        return;
    }
    for c in observed.iter().filter(|c| c.coverage == Coverage::Full) {
        state.read_back_seen.insert(c.cluster.id.clone());
    }
    let all_seen = observed
        .iter()
        .all(|c| state.read_back_seen.contains(&c.cluster.id));
    if all_seen {
        state.read_back = false;
        state.read_back_seen.clear();
    }
}

/// Steps one observed cluster: its findings against those reported before, the events of the
/// new ones, and what was sent for those no longer open taken back. Returns its findings to
/// announce once the storm is decided.
fn step_cluster(
    state: &mut State,
    pending: &mut Pending,
    outcome: &mut StepOutcome,
    c: &Observed,
    settings: &StepSettings,
    now: Timestamp,
) -> Vec<Mismatch> {
    let mut entry = state.clusters.remove(&c.cluster.id).unwrap_or_default();
    entry.name = c.cluster.name.clone();
    entry.zone_id = c.cluster.zone_id.clone().or(entry.zone_id);
    entry.owner = c.cluster.owner.clone().or(entry.owner);
    entry.owner_id = c.cluster.owner_id.clone().or(entry.owner_id.take());

    let blind = blind_finding(&mut entry, c, settings.blind_after, now);
    let changes = compare_sides(
        &mut entry,
        c,
        blind.as_ref(),
        outcome,
        settings.resolve_after,
        now,
    );
    remember_map(&mut entry, c, now);

    let mut q = Queue { state, pending };
    let tell = tell_new(
        &mut q,
        c,
        &changes.new,
        changes.unignored,
        &mut outcome.new,
        now,
    );
    take_back(
        &mut q,
        &c.cluster.id,
        &entry,
        &changes.resolved,
        settings,
        now,
    );
    hand_over(&mut q, c, &changes.handed_over, settings, now);
    outcome.handed_over.extend(
        changes
            .handed_over
            .iter()
            .map(|(k, _)| (c.cluster.id.clone(), k.clone())),
    );
    if settings.alerts && !(changes.resolved.is_empty() && changes.handed_over.is_empty()) {
        // A summary alert no finding of cks-drift's own holds open any more is archived.
        let open: BTreeSet<String> = entry
            .vms
            .iter()
            .chain(entry.nodes.iter())
            .filter(|(_, r)| !r.server)
            .map(|(k, _)| k.to_string())
            .collect();
        summaries::archive_summaries(&mut q, &c.cluster.id, &open);
    }
    for side in changes.matches_again {
        let description = format!(
            "The VM map of Kubernetes cluster {} matches {} again",
            c.cluster.name,
            side_text(side)
        );
        q.push(event(
            Level::Info,
            &c.cluster.id,
            &c.cluster.name,
            None,
            description,
            now,
        ));
    }

    let open = open_findings(&entry);
    if !open.is_empty() {
        outcome.open.insert(c.cluster.id.clone(), open);
    }
    state.clusters.insert(c.cluster.id.clone(), entry);
    tell
}

/// What became of one cluster's findings in a step, side by side.
#[derive(Default)]
struct Changes<'a> {
    /// Findings not reported before.
    new: Vec<&'a Mismatch>,
    /// Kept findings to tell now (an `[[ignore]]` rule stopped matching them).
    unignored: Vec<Mismatch>,
    /// Findings whose notifications are taken back, by key: resolved, or newly ignored.
    resolved: Vec<(FindingKey, Reported)>,
    /// Kept findings the server's own check alerts from now on, with their record before:
    /// their alert and annotation are taken back, their Alertmanager alert stays.
    handed_over: Vec<(FindingKey, Reported)>,
    /// The sides that had findings and have none now.
    matches_again: Vec<Side>,
}

/// Replaces the findings of each side the cycle compared with those it found (`blind`
/// included), each carried over from its record before where it had one; a finding it did
/// not find stays open until it has been absent for `resolve_after`.
fn compare_sides<'a>(
    entry: &mut ClusterState,
    c: &'a Observed,
    blind: Option<&'a Mismatch>,
    outcome: &mut StepOutcome,
    resolve_after: std::time::Duration,
    now: Timestamp,
) -> Changes<'a> {
    let sides: &[Side] = match c.coverage {
        Coverage::Full => &[Side::Vms, Side::Nodes],
        Coverage::VmsOnly => &[Side::Vms],
        Coverage::None => &[],
    };
    let mut changes = Changes::default();
    for &side in sides {
        let fresh: BTreeMap<FindingKey, &Mismatch> = c
            .mismatches
            .iter()
            .chain(blind)
            .filter(|m| m.side() == side)
            .map(|m| (m.key(), m))
            .collect();
        let prev = std::mem::take(entry.side_mut(side));
        let mut next = BTreeMap::new();
        for (key, r) in &prev {
            if fresh.contains_key(key) {
                continue;
            }
            // Absent, but not for `resolve_after` yet: still open, so that a finding that
            // goes away and comes back is told once.
            let absent_since = r.absent_since.unwrap_or(now);
            if absent_since > now.minus(resolve_after) {
                let mut kept = r.clone();
                kept.absent_since = Some(absent_since);
                next.insert(key.clone(), kept);
            } else {
                changes.resolved.push((key.clone(), r.clone()));
            }
        }
        for (key, m) in fresh {
            let r = changes.reported(outcome, c, &key, m, prev.get(&key), now);
            next.insert(key, r);
        }
        if next.is_empty() && !prev.is_empty() {
            changes.matches_again.push(side);
        }
        *entry.side_mut(side) = next;
    }
    changes
}

impl<'a> Changes<'a> {
    /// The record of open finding `m`, under `key`: new, or carried over from `prev`, its
    /// record before. Notes a finding new, or one an `[[ignore]]` rule stopped or started
    /// matching.
    fn reported(
        &mut self,
        outcome: &mut StepOutcome,
        c: &Observed,
        key: &FindingKey,
        m: &'a Mismatch,
        prev: Option<&Reported>,
        now: Timestamp,
    ) -> Reported {
        let ignored = c.ignored.get(key).cloned();
        let mut r = Reported::new(m, now);
        match prev {
            Some(p) => {
                r.since = p.since;
                r.held = p.held;
                r.deferred = p.deferred;
                match (&p.ignored, &ignored) {
                    (Some(rule), None) => {
                        outcome.unignored.push(IgnoreChange {
                            cluster_id: c.cluster.id.clone(),
                            key: key.clone(),
                            rule: rule.clone(),
                        });
                        self.unignored.push(m.clone());
                    }
                    (None, Some(rule)) => {
                        outcome.newly_ignored.push(IgnoreChange {
                            cluster_id: c.cluster.id.clone(),
                            key: key.clone(),
                            rule: rule.clone(),
                        });
                        // What was sent for it is taken back (a held one had nothing).
                        self.resolved.push((key.clone(), p.clone()));
                        r.held = false;
                    }
                    _ => {}
                }
                let server = c.left_to_server.contains(key);
                if server && !p.server && p.ignored.is_none() && ignored.is_none() {
                    self.handed_over.push((key.clone(), p.clone()));
                    r.held = false;
                    r.deferred = false;
                } else if p.server && !server && ignored.is_none() && p.ignored.is_none() {
                    // The server's check was switched off (or no longer reports it): told
                    // now, as new.
                    self.unignored.push(m.clone());
                }
            }
            None => self.new.push(m),
        }
        r.server = c.left_to_server.contains(key);
        r.ignored = ignored;
        r
    }
}

/// Keeps what the next cycle's probe needs: when the nodes were listed and whether that
/// failed, and, of a cluster compared, its map, the mapped VMs found gone and, when the
/// database gave its rows, the mapped VMs it names by their database id.
fn remember_map(entry: &mut ClusterState, c: &Observed, now: Timestamp) {
    if c.listed {
        entry.listed_at = Some(now);
        entry.nodes_failed = c.coverage == Coverage::VmsOnly;
    }
    if c.coverage != Coverage::None {
        entry.map = c.mapped.iter().cloned().collect();
        entry.expected_vms = c.expected_vms;
        if let Some(ids) = &c.db_ids {
            entry.db_ids.clone_from(ids);
        }
        entry.vanished = c
            .mismatches
            .iter()
            .filter(|m| m.kind == MismatchKind::MappedVm)
            .filter_map(|m| {
                let vm = m.vm()?;
                let how = match vm.state.as_str() {
                    GONE_EXPUNGED => VanishedHow::Expunged,
                    GONE_MISSING => VanishedHow::DoesNotExist,
                    _ => return None,
                };
                Some((
                    vm.id.clone(),
                    VanishedRecord {
                        name: vm.name.clone(),
                        how,
                    },
                ))
            })
            .collect();
    }
}

/// Queues the event of each finding first reported and notes its key in `new_keys`. Returns
/// the findings to announce: `unignored`, then the new ones no `[[ignore]]` rule matches.
fn tell_new(
    q: &mut Queue<'_>,
    c: &Observed,
    new: &[&Mismatch],
    unignored: Vec<Mismatch>,
    new_keys: &mut NewKeys,
    now: Timestamp,
) -> Vec<Mismatch> {
    let mut tell: Vec<Mismatch> = unignored
        .into_iter()
        .filter(|m| !c.left_to_server.contains(&m.key()))
        .collect();
    for m in new {
        let key = m.key();
        new_keys.insert((c.cluster.id.clone(), key.clone()));
        // A finding an `[[ignore]]` rule matches is reported (INFO, with the rule's
        // reason), never alerted.
        match c.ignored.get(&key) {
            Some(rule) => q.push(event(
                Level::Info,
                &c.cluster.id,
                &c.cluster.name,
                Some(m),
                format!(
                    "{}; ignored by [[ignore]] rule {}: {}",
                    reason(&c.cluster.name, m),
                    rule.rule,
                    rule.reason
                ),
                now,
            )),
            None if c.left_to_server.contains(&key) => q.push(event(
                Level::Warn,
                &c.cluster.id,
                &c.cluster.name,
                Some(m),
                format!("{}; {LEFT_TO_SERVER}", reason(&c.cluster.name, m)),
                now,
            )),
            None => {
                let mut line = event(
                    Level::Warn,
                    &c.cluster.id,
                    &c.cluster.name,
                    Some(m),
                    reason(&c.cluster.name, m),
                    now,
                );
                if let Notification::Event { after_takeover, .. } = &mut line {
                    *after_takeover =
                        q.state.read_back && !q.state.read_back_seen.contains(&c.cluster.id);
                }
                q.push(line);
                tell.push((*m).clone());
            }
        }
    }
    tell
}

/// What the event log adds to a finding the server's own check alerts.
const LEFT_TO_SERVER: &str = "CloudStack's own VM map check alerts it, so cks-drift raises no \
     CloudStack alert or annotation for it (notify.defer_to_server_check)";

/// Takes back the alert and annotation of findings the server's own check alerts from now on
/// (`(key, record before)`), each with an INFO event; their Alertmanager alert stays.
fn hand_over(
    q: &mut Queue<'_>,
    c: &Observed,
    findings: &[(FindingKey, Reported)],
    settings: &StepSettings,
    now: Timestamp,
) {
    for (key, r) in findings {
        let Some(m) = r.mismatch() else {
            continue;
        };
        // A held finding had nothing sent but its event.
        if !r.held {
            close(q, &c.cluster.id, &key.to_string(), settings);
        }
        let description = format!(
            "{}; CloudStack's own VM map check alerts it from now on, so cks-drift's alert is \
             archived and its annotation removed",
            reason(&c.cluster.name, &m)
        );
        q.push(event(
            Level::Info,
            &c.cluster.id,
            &c.cluster.name,
            Some(&m),
            description,
            now,
        ));
    }
}

/// Takes back what was sent for findings no longer open (`(key, record)`): their
/// Alertmanager alerts, alerts and annotations.
fn take_back(
    q: &mut Queue<'_>,
    cluster_id: &str,
    entry: &ClusterState,
    findings: &[(FindingKey, Reported)],
    settings: &StepSettings,
    now: Timestamp,
) {
    for (key, r) in findings {
        // A held finding had nothing sent but its event, an ignored one nothing at all.
        if r.ignored.is_none() {
            resolve_alertmanager(q, cluster_id, entry, r, settings, now);
            // One the server's own check alerts had its alert and annotation taken back.
            if !r.held && !r.server {
                close(q, cluster_id, &key.to_string(), settings);
            }
        }
    }
}

/// Every open finding of a cluster, sorted by kind, then key.
fn open_findings(entry: &ClusterState) -> Vec<Mismatch> {
    let mut open: Vec<Mismatch> = entry
        .vms
        .values()
        .chain(entry.nodes.values())
        .filter_map(Reported::mismatch)
        .collect();
    open.sort_by_key(|m| (m.kind, m.key()));
    open
}

/// Closes what was open for the clusters of the state the cycle did not see, and forgets them.
fn close_gone(
    state: &mut State,
    pending: &mut Pending,
    seen: &HashSet<&str>,
    settings: &StepSettings,
    now: Timestamp,
) {
    let gone: Vec<String> = state
        .clusters
        .keys()
        .filter(|id| !seen.contains(id.as_str()))
        .cloned()
        .collect();
    for id in gone {
        let entry = state.clusters.remove(&id).unwrap_or_default();
        let keys: Vec<(FindingKey, Reported)> = entry
            .vms
            .iter()
            .chain(entry.nodes.iter())
            .map(|(k, r)| (k.clone(), r.clone()))
            .collect();
        let mut q = Queue { state, pending };
        take_back(&mut q, &id, &entry, &keys, settings, now);
        if settings.alerts {
            summaries::archive_summaries(&mut q, &id, &BTreeSet::new());
        }
        if !keys.is_empty() {
            let description = format!(
                "Kubernetes cluster {} no longer exists; its {} open VM map findings are closed",
                entry.name,
                keys.len()
            );
            q.push(event(Level::Info, &id, &entry.name, None, description, now));
        }
    }
}

/// Queues the resolution of a finding's Alertmanager alert: the same labels, `endsAt` now.
fn resolve_alertmanager(
    q: &mut Queue<'_>,
    cluster_id: &str,
    entry: &ClusterState,
    r: &Reported,
    settings: &StepSettings,
    now: Timestamp,
) {
    if !settings.alertmanager {
        return;
    }
    let Some(m) = r.mismatch() else {
        return;
    };
    q.push(Notification::ResolveAlertmanager {
        cluster_id: cluster_id.to_string(),
        key: m.key().to_string(),
        labels: crate::diff::wording::alertmanager_labels(
            cluster_id,
            &entry.name,
            entry.zone_id.as_deref(),
            entry.owner.as_deref(),
            &m,
        ),
        annotations: crate::diff::wording::alertmanager_annotations(&entry.name, &m),
        starts_at: r.since,
        ends_at: now,
    });
}

fn close(q: &mut Queue<'_>, cluster_id: &str, key: &str, settings: &StepSettings) {
    // Archive and remove even when the channel was turned off since: what this daemon
    // raised, it takes back. Delivery skips what was never recorded.
    let rk = RecordKey::new(cluster_id, key);
    let raised = q.state.alerts.contains_key(&rk) || q.pending.contains(&(rk.clone(), "alert"));
    if raised || settings.alerts {
        q.push(Notification::ArchiveAlert {
            cluster_id: cluster_id.to_string(),
            key: key.to_string(),
        });
    }
    let annotated =
        q.state.annotations.contains_key(&rk) || q.pending.contains(&(rk.clone(), "annotation"));
    if annotated || settings.annotations {
        q.push(Notification::RemoveAnnotation {
            cluster_id: cluster_id.to_string(),
            key: key.to_string(),
        });
    }
}

mod caps;
mod storm;
mod summaries;
#[cfg(test)]
mod tests;
