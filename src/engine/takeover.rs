//! What was reported, read back from CloudStack itself: when cks-drift starts without a state
//! (a lost volume, a new host), or takes the lock over from another instance, its own
//! un-archived alerts and its own annotations still say which findings were reported, by
//! their markers. Reading them back before the first dedupe step means nothing is alerted
//! twice, and what resolved meanwhile is still archived and removed.
//!
//! A state kept from an earlier term may also hold findings another instance has resolved
//! since: one whose alert and annotation are both gone from CloudStack is forgotten, so that
//! if it is still (or again) there, it is reported once more, as new.
//!
//! Only what the markers say is rebuilt. A key written as a digest (a long node name) cannot
//! be read back: its alert and annotation are recorded under the digest, which no finding
//! has, so the next cycle archives and removes them and reports that finding once more.
//! Summary alerts are left alone. A storm alert means a storm is under way: it goes on, its
//! findings (read back as never told) are held again, and it ends as storms do, archiving
//! every storm alert recorded (one read back during this instance's own storm included).

use std::collections::{BTreeMap, HashSet};

use tracing::info;

use crate::base::time::Timestamp;
use crate::cloudstack::client::Client;
use crate::cloudstack::error::ApiError;
use crate::cloudstack::model::{Alert, Annotation};
use crate::diff::wording::{marked_key, marker_parts};
use crate::diff::{FindingKey, Mismatch, MismatchKind, Subject, VmRef};
use crate::notify::alerts::{ALERT_NAME, is_ours};
use crate::state::{AlertRecord, Notification, RecordKey, Reported, STORM_SCOPE, State, Storm};

/// What was read back.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    pub alerts: usize,
    pub annotations: usize,
    pub findings: usize,
    /// Findings of the state whose alert and annotation CloudStack no longer has.
    pub forgotten: usize,
    /// Findings with an annotation but no alert of their own (another instance stopped between
    /// the two): their alert is raised at the next step, if they are still open.
    pub owed_alerts: usize,
}

/// Drops from `state` the alert and annotation records CloudStack no longer has (ids not in
/// `alerts` and `notes`), and the findings that had records and now have none: another
/// instance resolved them. What is still queued for them now has no record left, and
/// [`forget_unconfirmed`], which follows, drops it. Findings never alerted nor annotated (the
/// event log only) stay. Returns how many findings were forgotten.
fn forget_resolved(state: &mut State, alerts: &HashSet<&str>, notes: &HashSet<&str>) -> usize {
    let gone_alerts: Vec<RecordKey> = state
        .alerts
        .iter()
        .filter(|(_, r)| !alerts.contains(r.alert_id.as_str()))
        .map(|(k, _)| k.clone())
        .collect();
    let gone_notes: Vec<RecordKey> = state
        .annotations
        .iter()
        .filter(|(_, id)| !notes.contains(id.as_str()))
        .map(|(k, _)| k.clone())
        .collect();
    for k in &gone_alerts {
        state.alerts.remove(k);
    }
    for k in &gone_notes {
        state.annotations.remove(k);
    }
    let mut forgotten = HashSet::new();
    for record in gone_alerts.iter().chain(&gone_notes) {
        if state.alerts.contains_key(record) || state.annotations.contains_key(record) {
            continue;
        }
        let Some(key) = FindingKey::parse(&record.key) else {
            continue;
        };
        let Some(c) = state.clusters.get_mut(&record.cluster_id) else {
            continue;
        };
        if c.side_mut(key.kind.side()).remove(&key).is_some() {
            forgotten.insert(record.clone());
        }
    }
    forgotten.len()
}

/// Whether `n` reports a finding to CloudStack: an alert raised, an annotation added.
fn reports(n: &Notification) -> bool {
    matches!(
        n,
        Notification::RaiseAlert { .. } | Notification::AddAnnotation { .. }
    )
}

/// Forgets the findings whose alert or annotation is still queued from an earlier term while
/// CloudStack holds neither (read back just before): whether another instance reported them
/// and took them back meanwhile cannot be told, as archived alerts are not listed. What is
/// queued for them is dropped, and the next step reports those still open as new (their event
/// line then marked `after_takeover`), so that nothing is raised for a finding that ended
/// meanwhile with nothing left to take it back. Returns how many were forgotten.
fn forget_unconfirmed(state: &mut State) -> usize {
    let unconfirmed: HashSet<RecordKey> = state
        .outbox
        .iter()
        .filter(|o| reports(&o.notification))
        .filter_map(|o| o.notification.subject())
        .filter(|rk| !state.alerts.contains_key(rk) && !state.annotations.contains_key(rk))
        .filter(|rk| FindingKey::parse(&rk.key).is_some())
        .collect();
    state.outbox.retain(|o| {
        !(reports(&o.notification)
            && o.notification
                .subject()
                .is_some_and(|s| unconfirmed.contains(&s)))
    });
    let mut forgotten = 0;
    for rk in &unconfirmed {
        let (Some(key), Some(c)) = (
            FindingKey::parse(&rk.key),
            state.clusters.get_mut(&rk.cluster_id),
        ) else {
            continue;
        };
        if c.side_mut(key.kind.side()).remove(&key).is_some() {
            forgotten += 1;
        }
    }
    forgotten
}

/// The cluster id and key of an alert description's marker, `[cks-drift <cluster>/<key>]`.
fn alert_marker_parts(description: &str) -> Option<(&str, FindingKey)> {
    let (cluster, key) = marker_parts(description)?;
    Some((cluster?, FindingKey::parse(key)?))
}

/// A summary alert's cluster, key and the findings it names, from its description
/// (`… found at once (<key>, <key>, …). … [cks-drift <cluster>/summary:<time>]`). The list may
/// have been cut to fit: what does not read as a key is left out, and a summary whose list
/// gives none covers its own key, which no finding has, so that it is archived at the next
/// cycle of its cluster.
fn summary_marker_parts(description: &str) -> Option<(&str, &str, Vec<String>)> {
    let (cluster, key) = match marker_parts(description)? {
        (Some(cluster), key) if key.starts_with("summary:") && cluster != STORM_SCOPE => {
            (cluster, key)
        }
        _ => return None,
    };
    let list = description
        .split_once(" found at once (")
        .map_or("", |(_, rest)| {
            rest.split_once(')').map_or(rest, |(l, _)| l)
        });
    let mut covers: Vec<String> = list
        .split(", ")
        .filter_map(FindingKey::parse)
        .map(|k| k.to_string())
        .collect();
    if covers.is_empty() {
        covers.push(key.to_string());
    }
    Some((cluster, key, covers))
}

/// The key of a storm alert's marker, `[cks-drift cloud/storm:<time>]`.
fn storm_marker_key(description: &str) -> Option<&str> {
    match marker_parts(description)? {
        (Some(STORM_SCOPE), key) if key.starts_with("storm:") => Some(key),
        _ => None,
    }
}

/// The finding a key stands for, as far as the key tells: the VM's name and state, not in it,
/// stay unknown until the next cycle sees it.
fn finding(key: &FindingKey) -> Option<Mismatch> {
    let subject = match key.kind {
        MismatchKind::NodeWithoutVm => Subject::Node(key.subject.clone()),
        MismatchKind::IdentityConflict => {
            let unknown = || VmRef {
                id: String::new(),
                name: None,
                state: String::new(),
            };
            Subject::Conflict {
                node: key.subject.clone(),
                is: unknown(),
                named: unknown(),
            }
        }
        MismatchKind::Blind => Subject::Blind {
            reason: String::new(),
            since: Timestamp::from_unix(0),
        },
        MismatchKind::MapCount => {
            let (shown, expected) = key.subject.split_once('/')?;
            Subject::MapRows {
                shown: shown.parse().ok()?,
                expected: expected.parse().ok()?,
            }
        }
        _ => Subject::Vm(VmRef {
            id: key.subject.clone(),
            name: None,
            state: String::new(),
        }),
    };
    Some(Mismatch {
        kind: key.kind,
        subject,
    })
}

/// Records `key` of `cluster` as reported since `since`, unless it already is.
fn remember(state: &mut State, cluster: &str, key: &FindingKey, since: Timestamp) -> bool {
    let Some(m) = finding(key) else {
        return false;
    };
    let entry = state.clusters.entry(cluster.to_string()).or_default();
    let side = entry.side_mut(key.kind.side());
    if side.contains_key(key) {
        return false;
    }
    side.insert(key.clone(), Reported::new(&m, since));
    true
}

/// Reads this daemon's un-archived alerts and its annotations on Kubernetes clusters back into
/// `state`: their records, and the findings they stand for as reported.
pub async fn recover(
    api: &Client,
    state: &mut State,
    now: Timestamp,
) -> Result<Recovered, ApiError> {
    let mut got = Recovered::default();
    let (alerts, notes) = read_ours(api).await?;
    got.forgotten = forget_resolved(
        state,
        &alerts.iter().map(|a| a.id.as_str()).collect(),
        &notes.iter().map(|n| n.id.as_str()).collect(),
    );
    for a in &alerts {
        recover_alert(state, a, now, &mut got);
    }
    recover_annotations(state, &notes, now, &mut got);
    got.forgotten += forget_unconfirmed(state);
    got.owed_alerts = owe_alerts(state);
    state.read_back = true;
    state.read_back_seen.clear();
    info!(
        alerts = got.alerts,
        annotations = got.annotations,
        findings = got.findings,
        forgotten = got.forgotten,
        owed_alerts = got.owed_alerts,
        "what was reported was read back from CloudStack"
    );
    Ok(got)
}

/// This daemon's un-archived alerts, and its annotations on Kubernetes clusters.
async fn read_ours(api: &Client) -> Result<(Vec<Alert>, Vec<Annotation>), ApiError> {
    // Only alerts with cks-drift's name: the marker ending a description can be a tenant's
    // text (see `alerts::is_ours`).
    let alerts: Vec<Alert> = api
        .list_where("listAlerts", "alert", &[("name", ALERT_NAME)], is_ours)
        .await?;
    // Only what cks-drift wrote: the key's user's own admin-only annotations. A tenant's
    // annotation that ends with a forged marker must not make its drift count as reported.
    let notes: Vec<Annotation> = api
        .list_where(
            "listAnnotations",
            "annotation",
            &[
                ("entitytype", "KUBERNETES_CLUSTER"),
                ("annotationfilter", "self"),
                ("keyword", "[cks-drift "),
            ],
            Annotation::ours,
        )
        .await?;
    Ok((alerts, notes))
}

/// The record of alert `a`, covering `covers` (a summary's findings; none for the others).
fn alert_record(a: &Alert, covers: Vec<String>) -> AlertRecord {
    AlertRecord {
        alert_id: a.id.clone(),
        alert_type: a.r#type.and_then(|t| u32::try_from(t).ok()).unwrap_or(0),
        zone_id: a.zoneid.clone(),
        covers,
    }
}

/// Reads one alert back by its marker: a storm's, a summary's or a finding's. An alert
/// without one is left alone.
fn recover_alert(state: &mut State, a: &Alert, now: Timestamp, got: &mut Recovered) {
    let Some(description) = a.description.as_deref() else {
        return;
    };
    let since = a.sent.as_deref().and_then(Timestamp::parse).unwrap_or(now);
    if let Some(key) = storm_marker_key(description) {
        // A storm under way: it goes on, and ends as storms do.
        state
            .alerts
            .insert(RecordKey::new(STORM_SCOPE, key), alert_record(a, vec![]));
        if state.storm.is_none() {
            state.storm = Some(Storm {
                since,
                key: key.to_string(),
                clusters: 0,
                checked: 0,
                held: 0,
                released: 0,
                released_clusters: 0,
                alerted_tenants: 0,
            });
        }
        got.alerts += 1;
        return;
    }
    if let Some((cluster, key, covers)) = summary_marker_parts(description) {
        // A summary: archived once none of the findings it names is open. Its marker
        // holds its key as a digest; a record the state kept is the same alert.
        if state.alerts.values().any(|r| r.alert_id == a.id) {
            return;
        }
        state
            .alerts
            .insert(RecordKey::new(cluster, key), alert_record(a, covers));
        got.alerts += 1;
        return;
    }
    let Some((cluster, key)) = alert_marker_parts(description) else {
        return;
    };
    if remember(state, cluster, &key, since) {
        got.findings += 1;
    }
    state
        .alerts
        .insert(RecordKey::finding(cluster, &key), alert_record(a, vec![]));
    got.alerts += 1;
}

/// Marks the open findings that CloudStack holds an annotation of but no alert for (an
/// annotation is not an alert: another instance may have stopped, or lost the lock, between
/// the two) as waiting for their alert, which the next step raises if they are still open
/// (`deferred`, as for a tenant's budget). Not those a recorded summary alert names, those a
/// storm holds, an `[[ignore]]` rule matches or CloudStack's own check alerts. Returns how many.
fn owe_alerts(state: &mut State) -> usize {
    let covered: HashSet<RecordKey> = state
        .alerts
        .iter()
        .flat_map(|(rk, r)| {
            r.covers
                .iter()
                .map(move |key| RecordKey::new(&rk.cluster_id, key))
        })
        .collect();
    let mut owed = 0;
    let State {
        clusters,
        alerts,
        annotations,
        ..
    } = state;
    for (id, c) in clusters.iter_mut() {
        for (key, r) in c.vms.iter_mut().chain(c.nodes.iter_mut()) {
            let rk = RecordKey::finding(id, key);
            let owes = annotations.contains_key(&rk)
                && !alerts.contains_key(&rk)
                && !covered.contains(&rk)
                && !r.held
                && !r.server
                && r.ignored.is_none();
            if owes && !r.deferred {
                r.deferred = true;
                owed += 1;
            }
        }
    }
    owed
}

/// Reads the annotations back by their markers, cluster by cluster: each finding as reported
/// since `now`, and its annotation's record.
fn recover_annotations(
    state: &mut State,
    notes: &[Annotation],
    now: Timestamp,
    got: &mut Recovered,
) {
    let mut by_cluster: BTreeMap<&str, Vec<(&Annotation, FindingKey)>> = BTreeMap::new();
    for n in notes {
        let (Some(cluster), Some(key)) = (
            n.entityid.as_deref(),
            n.annotation
                .as_deref()
                .and_then(marked_key)
                .and_then(FindingKey::parse),
        ) else {
            continue;
        };
        by_cluster.entry(cluster).or_default().push((n, key));
    }
    for (cluster, found) in by_cluster {
        for (n, key) in found {
            if remember(state, cluster, &key, now) {
                got.findings += 1;
            }
            state
                .annotations
                .insert(RecordKey::finding(cluster, &key), n.id.clone());
            got.annotations += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alert_markers_give_the_cluster_and_the_key() {
        let (c, k) = alert_marker_parts(
            "Kubernetes cluster web, VM a (v1): … [cks-drift 5d1c-1/unmapped_vm:v1]",
        )
        .unwrap();
        assert_eq!((c, k.to_string().as_str()), ("5d1c-1", "unmapped_vm:v1"));
        let (_, k) = alert_marker_parts("x [cks-drift c1/map_count:3/5]").unwrap();
        assert_eq!(k.to_string(), "map_count:3/5");
        // A summary, a digest, another text: nothing to read back.
        assert!(alert_marker_parts("x [cks-drift c1/summary:20270115T080000Z]").is_none());
        assert!(alert_marker_parts("x [cks-drift c1/node_without_vm:#0123456789ab]").is_some());
        assert!(alert_marker_parts("no marker").is_none());
        assert_eq!(
            storm_marker_key("x [cks-drift cloud/storm:20270115T080000Z]"),
            Some("storm:20270115T080000Z")
        );
        assert_eq!(storm_marker_key("x [cks-drift c1/unmapped_vm:v1]"), None);
        assert_eq!(storm_marker_key("x [cks-drift cloud/summary:2027]"), None);
        assert_eq!(summary_marker_parts("x [cks-drift cloud/storm:2027]"), None);
        assert_eq!(
            summary_marker_parts("x [cks-drift c1/unmapped_vm:v1]"),
            None
        );
    }

    #[test]
    fn summaries_give_the_findings_they_name() {
        let m = |node: &str| Mismatch {
            kind: MismatchKind::NodeWithoutVm,
            subject: Subject::Node(node.into()),
        };
        let (a, b) = (m("fake-1"), m("fake-2"));
        let text = crate::diff::wording::summary_description(
            "web",
            "c1",
            "summary:20270115T080000Z",
            &[&a, &b],
        );
        assert_eq!(
            summary_marker_parts(&text),
            Some((
                "c1",
                crate::diff::wording::marked_key(&text).unwrap(),
                vec![
                    "node_without_vm:fake-1".to_string(),
                    "node_without_vm:fake-2".to_string()
                ]
            ))
        );
        // A list cut to fit names what it still can; one that names nothing covers itself.
        assert_eq!(
            summary_marker_parts(
                "… found at once (node_without_vm:fake-1, node_wi… [cks-drift c1/summary:2027]"
            ),
            Some((
                "c1",
                "summary:2027",
                vec!["node_without_vm:fake-1".to_string()]
            ))
        );
        assert_eq!(
            summary_marker_parts("x [cks-drift c1/summary:2027]").map(|(_, _, c)| c),
            Some(vec!["summary:2027".to_string()])
        );
    }

    #[test]
    fn keys_give_findings_on_their_side() {
        let mut state = State::default();
        let now = Timestamp::from_unix(1_800_000_000);
        for key in ["unmapped_vm:v1", "node_without_vm:stray", "map_count:2/3"] {
            assert!(remember(
                &mut state,
                "c1",
                &FindingKey::parse(key).unwrap(),
                now
            ));
        }
        assert!(!remember(
            &mut state,
            "c1",
            &FindingKey::parse("unmapped_vm:v1").unwrap(),
            now
        ));
        let c = &state.clusters["c1"];
        assert_eq!(
            c.vms.keys().collect::<Vec<_>>(),
            ["map_count:2/3", "unmapped_vm:v1"]
        );
        assert_eq!(
            c.nodes.keys().collect::<Vec<_>>(),
            ["node_without_vm:stray"]
        );
        assert_eq!(
            c.vms[&crate::diff::FindingKey::parse("map_count:2/3").unwrap()].shown,
            Some(2)
        );
    }

    /// The record of alert `id` of type 3000, covering `covers` (a summary's).
    fn record(id: &str, covers: Vec<String>) -> AlertRecord {
        AlertRecord {
            alert_id: id.into(),
            alert_type: 3000,
            zone_id: None,
            covers,
        }
    }

    #[test]
    fn findings_resolved_by_another_instance_are_forgotten() {
        let mut state = State::default();
        let now = Timestamp::from_unix(1_800_000_000);
        for key in [
            "unmapped_vm:v1",
            "unmapped_vm:v2",
            "unmapped_vm:v3",
            "map_count:2/3",
        ] {
            remember(&mut state, "c1", &FindingKey::parse(key).unwrap(), now);
        }

        // v1: alert and annotation gone. v2: the alert gone, its annotation still there.
        // v3: never alerted nor annotated (the event log only). map_count: both gone.
        state
            .alerts
            .insert("c1/unmapped_vm:v1".into(), record("a1", vec![]));
        state
            .annotations
            .insert("c1/unmapped_vm:v1".into(), "n1".into());
        state
            .alerts
            .insert("c1/unmapped_vm:v2".into(), record("a2", vec![]));
        state
            .annotations
            .insert("c1/unmapped_vm:v2".into(), "n2".into());
        state
            .alerts
            .insert("c1/map_count:2/3".into(), record("a4", vec![]));
        let alerts = HashSet::new();
        let notes = HashSet::from(["n2"]);
        assert_eq!(forget_resolved(&mut state, &alerts, &notes), 2);
        assert_eq!(
            state.clusters["c1"].vms.keys().collect::<Vec<_>>(),
            ["unmapped_vm:v2", "unmapped_vm:v3"]
        );
        assert!(state.alerts.is_empty());
        assert_eq!(
            state.annotations.keys().collect::<Vec<_>>(),
            ["c1/unmapped_vm:v2"]
        );
    }

    /// The raise of `key`'s alert, as queued.
    fn raise(cluster: &str, key: &str) -> Notification {
        Notification::RaiseAlert {
            cluster_id: cluster.into(),
            zone_id: None,
            key: key.into(),
            description: "…".into(),
            covers: vec![],
        }
    }

    /// The annotation of `key` on cluster c1, as queued.
    fn annotate(key: &str) -> Notification {
        Notification::AddAnnotation {
            cluster_id: "c1".into(),
            key: key.into(),
            text: "…".into(),
        }
    }

    /// An item of the outbox, as queued.
    fn queued(id: u64, notification: Notification) -> crate::state::Outgoing {
        crate::state::Outgoing {
            id,
            attempts: 1,
            last_error: Some("530".into()),
            notification,
        }
    }

    #[test]
    fn what_was_queued_for_a_finding_another_instance_resolved_is_not_sent() {
        let mut state = State::default();
        let now = Timestamp::from_unix(1_800_000_000);
        for key in ["unmapped_vm:v1", "unmapped_vm:v2"] {
            remember(&mut state, "c1", &FindingKey::parse(key).unwrap(), now);
        }
        // v1 was annotated; its alert's delivery failed and stayed queued. Another instance
        // took over, alerted it, and archived and removed both when it ended. v2's alert is
        // still in CloudStack; its annotation's delivery failed and stays queued.
        state
            .annotations
            .insert("c1/unmapped_vm:v1".into(), "n1".into());
        state
            .alerts
            .insert("c1/unmapped_vm:v2".into(), record("a2", vec![]));
        state.outbox = vec![
            queued(1, raise("c1", "unmapped_vm:v1")),
            queued(2, raise("c1", "unmapped_vm:v2")),
            queued(3, annotate("unmapped_vm:v2")),
            queued(4, annotate("unmapped_vm:v1")),
        ];
        // As the read-back does them: the records CloudStack no longer has, then what is
        // queued for findings left with none.
        assert_eq!(
            forget_resolved(&mut state, &HashSet::from(["a2"]), &HashSet::new()),
            1
        );
        assert_eq!(forget_unconfirmed(&mut state), 0);
        assert_eq!(
            state.outbox.iter().map(|o| o.id).collect::<Vec<_>>(),
            [2, 3]
        );
        assert_eq!(
            state.clusters["c1"].vms.keys().collect::<Vec<_>>(),
            ["unmapped_vm:v2"]
        );
    }

    #[test]
    fn a_finding_whose_first_report_is_still_queued_is_forgotten_with_it() {
        let mut state = State::default();
        let now = Timestamp::from_unix(1_800_000_000);
        for key in ["unmapped_vm:v1", "unmapped_vm:v2", "unmapped_vm:v3"] {
            remember(&mut state, "c1", &FindingKey::parse(key).unwrap(), now);
        }
        // v1: its alert and annotation were refused and stayed queued when this instance
        // stopped. v2: its alert is in CloudStack (read back), its annotation queued. v3: the
        // event log only. A storm alert's raise is no finding's.
        state
            .alerts
            .insert("c1/unmapped_vm:v2".into(), record("a2", vec![]));
        state.outbox = vec![
            queued(1, annotate("unmapped_vm:v1")),
            queued(2, raise("c1", "unmapped_vm:v1")),
            queued(3, annotate("unmapped_vm:v2")),
            queued(4, raise(STORM_SCOPE, "storm:20270115t080000z")),
        ];
        assert_eq!(forget_unconfirmed(&mut state), 1);
        assert_eq!(
            state.outbox.iter().map(|o| o.id).collect::<Vec<_>>(),
            [3, 4]
        );
        assert_eq!(
            state.clusters["c1"].vms.keys().collect::<Vec<_>>(),
            ["unmapped_vm:v2", "unmapped_vm:v3"]
        );
    }

    #[test]
    fn a_finding_read_back_from_its_annotation_alone_is_owed_its_alert() {
        let mut state = State::default();
        let now = Timestamp::from_unix(1_800_000_000);
        for key in [
            "unmapped_vm:v1",
            "unmapped_vm:v2",
            "unmapped_vm:v3",
            "unmapped_vm:v4",
        ] {
            remember(&mut state, "c1", &FindingKey::parse(key).unwrap(), now);
            state
                .annotations
                .insert(format!("c1/{key}").as_str().into(), format!("n-{key}"));
        }

        // v1 has its alert; a summary names v2; v3 is held by a storm; v4 has none.
        state
            .alerts
            .insert("c1/unmapped_vm:v1".into(), record("a1", vec![]));
        state.alerts.insert(
            "c1/summary:x".into(),
            record("a2", vec!["unmapped_vm:v2".into()]),
        );
        let v3 = FindingKey::parse("unmapped_vm:v3").unwrap();
        state
            .clusters
            .get_mut("c1")
            .unwrap()
            .vms
            .get_mut(&v3)
            .unwrap()
            .held = true;
        assert_eq!(owe_alerts(&mut state), 1);
        let deferred: Vec<String> = state.clusters["c1"]
            .vms
            .iter()
            .filter(|(_, r)| r.deferred)
            .map(|(k, _)| k.to_string())
            .collect();
        assert_eq!(deferred, ["unmapped_vm:v4"]);
    }
}
