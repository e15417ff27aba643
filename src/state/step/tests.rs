//! The dedupe rules, cycle by cycle, without I/O.
use super::*;
use crate::diff::{Subject, VmRef};

const T0: i64 = 1_800_000_000;

fn at(min: i64) -> Timestamp {
    Timestamp::from_unix(T0 + min * 60)
}

fn m(kind: MismatchKind, subject: &str) -> Mismatch {
    let subject = match kind {
        MismatchKind::NodeWithoutVm => Subject::Node(subject.to_string()),
        _ => Subject::Vm(VmRef {
            id: subject.to_string(),
            name: Some(format!("web-node-{subject}")),
            state: "Running".into(),
        }),
    };
    Mismatch { kind, subject }
}

fn with_state(mut m: Mismatch, state: &str) -> Mismatch {
    if let Subject::Vm(vm) = &mut m.subject {
        vm.state = state.into();
    }
    m
}

fn key(s: &str) -> FindingKey {
    FindingKey::parse(s).unwrap()
}

/// What a cycle observed of cluster `c1` (`web`).
fn cluster(coverage: Coverage, mismatches: Vec<Mismatch>) -> Observed {
    Observed {
        left_to_server: Default::default(),
        cluster: crate::snapshot::ClusterIdentity {
            id: "c1".into(),
            name: "web".into(),
            zone_id: Some("z1".into()),
            owner: None,
            owner_id: None,
        },
        blind_reason: None,
        listed: coverage != Coverage::None,
        ignored: Default::default(),
        coverage,
        mismatches,
        mapped: vec![("v1".into(), "web-control-1".into())],
        expected_vms: 3,
        db_ids: None,
    }
}

/// A cycle's observations; `_min` is when it started, for reading the tests.
fn report(clusters: Vec<Observed>, _min: i64) -> Vec<Observed> {
    clusters
}

const ON: StepSettings = StepSettings::ALL_ON;

/// The queued notifications, as short strings, and the outbox emptied (as if delivered).
fn drain(state: &mut State) -> Vec<String> {
    state
        .outbox
        .drain(..)
        .map(|o| match o.notification {
            // A finding's event is shown by its key (its description is tested apart).
            Notification::Event {
                level,
                key: Some(key),
                ..
            } => format!("event {level:?} {key}"),
            Notification::Event {
                level, description, ..
            } => format!("event {level:?}  {description}"),
            Notification::RaiseAlert { key, covers, .. } if covers.is_empty() => {
                format!("alert {key}")
            }
            Notification::RaiseAlert { covers, .. } => {
                format!("summary alert {}", covers.join(","))
            }
            Notification::ArchiveAlert { key, .. } => format!("archive {key}"),
            Notification::AddAnnotation { key, .. } => format!("annotate {key}"),
            Notification::RemoveAnnotation { key, .. } => format!("unannotate {key}"),
            Notification::ResolveAlertmanager { key, .. } => format!("am-resolve {key}"),
        })
        .collect()
}

use MismatchKind::*;

mod tenants;

#[test]
fn reported_once_then_silent() {
    let mut s = State::default();
    let r = report(vec![cluster(Coverage::Full, vec![m(UnmappedVm, "v2")])], 0);
    let out = step(&mut s, &r, &ON, at(0));
    assert_eq!(out.new, [("c1".to_string(), key("unmapped_vm:v2"))].into());
    assert_eq!(
        drain(&mut s),
        vec![
            "event Warn unmapped_vm:v2",
            "annotate unmapped_vm:v2",
            "alert unmapped_vm:v2"
        ]
    );
    for cycle in 1..4 {
        let out = step(&mut s, &report(r.clone(), cycle * 5), &ON, at(cycle * 5));
        assert!(out.new.is_empty());
        assert_eq!(drain(&mut s), Vec::<String>::new(), "cycle {cycle}");
        assert_eq!(out.open["c1"].len(), 1);
    }
    // It keeps the time it was first reported.
    assert_eq!(
        s.clusters["c1"].vms[&crate::diff::FindingKey::parse("unmapped_vm:v2").unwrap()].since,
        at(0)
    );
}

#[test]
fn resolved_then_back_is_reported_again() {
    let mut s = State::default();
    step(
        &mut s,
        &report(vec![cluster(Coverage::Full, vec![m(UnmappedVm, "v2")])], 0),
        &ON,
        at(0),
    );
    drain(&mut s);
    let out = step(
        &mut s,
        &report(vec![cluster(Coverage::Full, vec![])], 5),
        &ON,
        at(5),
    );
    assert!(out.open.is_empty());
    assert_eq!(
        drain(&mut s),
        vec![
            "archive unmapped_vm:v2",
            "unannotate unmapped_vm:v2",
            "event Info  The VM map of Kubernetes cluster web matches the VMs of the cluster in CloudStack again"
        ]
    );
    assert!(s.clusters["c1"].vms.is_empty());
    let out = step(
        &mut s,
        &report(vec![cluster(Coverage::Full, vec![m(UnmappedVm, "v2")])], 10),
        &ON,
        at(10),
    );
    assert_eq!(out.new.len(), 1);
    assert_eq!(drain(&mut s).len(), 3);
}

#[test]
fn only_new_mismatches_are_reported_when_the_set_changes() {
    let mut s = State::default();
    step(
        &mut s,
        &report(
            vec![cluster(
                Coverage::Full,
                vec![m(MappedVm, "v1"), m(UnmappedVm, "v2")],
            )],
            0,
        ),
        &ON,
        at(0),
    );
    drain(&mut s);
    let out = step(
        &mut s,
        &report(
            vec![cluster(
                Coverage::Full,
                vec![m(UnmappedVm, "v2"), m(UnmappedVm, "v3")],
            )],
            5,
        ),
        &ON,
        at(5),
    );
    assert_eq!(out.new, [("c1".to_string(), key("unmapped_vm:v3"))].into());
    // v1 resolved (no INFO: the VM side still has v2 and v3), v3 new.
    assert_eq!(
        drain(&mut s),
        vec![
            "event Warn unmapped_vm:v3",
            "archive mapped_vm:v1",
            "unannotate mapped_vm:v1",
            "annotate unmapped_vm:v3",
            "alert unmapped_vm:v3"
        ]
    );
}

#[test]
fn a_mapped_vm_keeps_its_key_from_destroyed_to_gone() {
    let mut s = State::default();
    let destroyed = with_state(m(MappedVm, "v1"), "Destroyed");
    step(
        &mut s,
        &report(vec![cluster(Coverage::Full, vec![destroyed.clone()])], 0),
        &ON,
        at(0),
    );
    drain(&mut s);
    for state in ["Expunging", "Expunged"] {
        let next = with_state(destroyed.clone(), state);
        let out = step(
            &mut s,
            &report(vec![cluster(Coverage::Full, vec![next])], 5),
            &ON,
            at(5),
        );
        assert!(out.new.is_empty(), "{state}");
        assert_eq!(drain(&mut s), Vec::<String>::new(), "{state}");
    }
    // Gone: remembered for the next cycle's probe while the finding is open.
    assert_eq!(s.clusters["c1"].vanished["v1"].how, VanishedHow::Expunged);
    assert_eq!(previous_maps(&s)["c1"].vanished.len(), 1);
}

#[test]
fn the_vms_remembered_by_database_id_are_kept_until_the_database_says_otherwise() {
    let ids = |pairs: &[(u64, &str)]| -> BTreeMap<u64, RememberedVm> {
        pairs
            .iter()
            .map(|&(n, id)| {
                let name = format!("web-node-{id}");
                (
                    n,
                    RememberedVm {
                        id: id.into(),
                        name,
                    },
                )
            })
            .collect()
    };
    let mut s = State::default();
    let observed = |coverage, db_ids: Option<BTreeMap<u64, RememberedVm>>| {
        let mut c = cluster(coverage, vec![]);
        c.db_ids = db_ids;
        report(vec![c], 0)
    };
    step(
        &mut s,
        &observed(Coverage::Full, Some(ids(&[(2, "v2")]))),
        &ON,
        at(0),
    );
    assert_eq!(previous_maps(&s)["c1"].db_ids, ids(&[(2, "v2")]));
    // Read through the API (no database, or it failed), or skipped: kept as it was.
    step(&mut s, &observed(Coverage::VmsOnly, None), &ON, at(5));
    step(
        &mut s,
        &observed(Coverage::None, Some(BTreeMap::new())),
        &ON,
        at(10),
    );
    assert_eq!(s.clusters["c1"].db_ids, ids(&[(2, "v2")]));
    // The database's word replaces it: a map row no longer holding the id forgets it.
    step(
        &mut s,
        &observed(Coverage::Full, Some(ids(&[(3, "v3")]))),
        &ON,
        at(15),
    );
    assert_eq!(s.clusters["c1"].db_ids, ids(&[(3, "v3")]));
    step(
        &mut s,
        &observed(Coverage::Full, Some(BTreeMap::new())),
        &ON,
        at(20),
    );
    assert!(previous_maps(&s)["c1"].db_ids.is_empty());
}

#[test]
fn sides_are_kept_separately() {
    let mut s = State::default();
    step(
        &mut s,
        &report(
            vec![cluster(
                Coverage::Full,
                vec![m(UnmappedVm, "v2"), m(VmNotANode, "v3")],
            )],
            0,
        ),
        &ON,
        at(0),
    );
    drain(&mut s);
    let out = step(
        &mut s,
        &report(vec![cluster(Coverage::Full, vec![m(UnmappedVm, "v2")])], 5),
        &ON,
        at(5),
    );
    assert_eq!(
        drain(&mut s),
        vec![
            "archive vm_not_a_node:v3",
            "unannotate vm_not_a_node:v3",
            "event Info  The VM map of Kubernetes cluster web matches the Kubernetes nodes of the cluster again"
        ]
    );
    assert_eq!(out.open["c1"], vec![m(UnmappedVm, "v2")]);
}

#[test]
fn partial_check_keeps_node_findings_and_compares_vms() {
    // Upstream scenario 5: SSH broken. The node finding is kept (neither cleared nor
    // reported again), a new VM-side finding is reported.
    let mut s = State::default();
    step(
        &mut s,
        &report(vec![cluster(Coverage::Full, vec![m(VmNotANode, "v3")])], 0),
        &ON,
        at(0),
    );
    drain(&mut s);
    let out = step(
        &mut s,
        &report(
            vec![cluster(Coverage::VmsOnly, vec![m(UnmappedVm, "v2")])],
            5,
        ),
        &ON,
        at(5),
    );
    assert_eq!(out.new, [("c1".to_string(), key("unmapped_vm:v2"))].into());
    assert_eq!(
        drain(&mut s),
        vec![
            "event Warn unmapped_vm:v2",
            "annotate unmapped_vm:v2",
            "alert unmapped_vm:v2"
        ]
    );
    assert_eq!(
        out.open["c1"],
        vec![m(UnmappedVm, "v2"), m(VmNotANode, "v3")]
    );
    // SSH back, both gone: two INFO events.
    step(
        &mut s,
        &report(vec![cluster(Coverage::Full, vec![])], 10),
        &ON,
        at(10),
    );
    let sent = drain(&mut s);
    assert_eq!(
        sent.iter().filter(|l| l.starts_with("event Info")).count(),
        2,
        "{sent:?}"
    );
}

#[test]
fn skipped_cluster_keeps_everything() {
    let mut s = State::default();
    step(
        &mut s,
        &report(vec![cluster(Coverage::Full, vec![m(UnmappedVm, "v2")])], 0),
        &ON,
        at(0),
    );
    drain(&mut s);
    let before = s.clusters["c1"].clone();
    let out = step(
        &mut s,
        &report(vec![cluster(Coverage::None, vec![])], 5),
        &ON,
        at(5),
    );
    assert_eq!(drain(&mut s), Vec::<String>::new());
    assert_eq!(s.clusters["c1"], before);
    assert_eq!(out.open["c1"], vec![m(UnmappedVm, "v2")]);
}

#[test]
fn alert_cap_gives_a_summary() {
    let mut s = State::default();
    let many: Vec<Mismatch> = (1..=8).map(|i| m(UnmappedVm, &format!("v{i}"))).collect();
    step(
        &mut s,
        &report(vec![cluster(Coverage::Full, many)], 0),
        &ON,
        at(0),
    );
    let sent = drain(&mut s);
    assert_eq!(
        sent.iter().filter(|l| l.starts_with("event Warn")).count(),
        8
    );
    // Annotations are capped like alerts: each is a CloudStack event too.
    assert_eq!(sent.iter().filter(|l| l.starts_with("annotate")).count(), 5);
    let alerts: Vec<&String> = sent.iter().filter(|l| l.contains("alert")).collect();
    assert_eq!(
        alerts,
        vec![
            "alert unmapped_vm:v1",
            "alert unmapped_vm:v2",
            "alert unmapped_vm:v3",
            "alert unmapped_vm:v4",
            "alert unmapped_vm:v5",
            "summary alert unmapped_vm:v6,unmapped_vm:v7,unmapped_vm:v8"
        ]
    );
}

/// Records summary alert `key` of cluster `c1`, covering v6 and v7, as its delivery does.
fn record_summary(s: &mut State, key: &str) {
    s.alerts.insert(
        crate::state::RecordKey::new("c1", key),
        crate::state::AlertRecord {
            alert_id: "a-9".into(),
            alert_type: 3009,
            zone_id: Some("z1".into()),
            covers: vec!["unmapped_vm:v6".into(), "unmapped_vm:v7".into()],
        },
    );
}

#[test]
fn summary_alert_is_archived_when_all_it_covers_resolve() {
    let mut s = State::default();
    let many: Vec<Mismatch> = (1..=7).map(|i| m(UnmappedVm, &format!("v{i}"))).collect();
    step(
        &mut s,
        &report(vec![cluster(Coverage::Full, many.clone())], 0),
        &ON,
        at(0),
    );
    // Delivery records the summary alert.
    let summary_key = format!("summary:{}", at(0).to_compact());
    record_summary(&mut s, &summary_key);
    drain(&mut s);
    // v7 resolves: v6 still open, the summary stays.
    step(
        &mut s,
        &report(vec![cluster(Coverage::Full, many[..6].to_vec())], 5),
        &ON,
        at(5),
    );
    assert!(!drain(&mut s).iter().any(|l| l.contains("summary")));
    // v6 resolves too: the summary is archived.
    step(
        &mut s,
        &report(vec![cluster(Coverage::Full, many[..5].to_vec())], 10),
        &ON,
        at(10),
    );
    assert!(drain(&mut s).contains(&format!("archive {summary_key}")));
}

#[test]
fn channels_off_queue_only_events() {
    let mut s = State::default();
    let off = StepSettings {
        alerts: false,
        annotations: false,
        alert_cap: 5,
        owner_alert_cap: 1000,
        blind_after: crate::config::DEFAULT_BLIND_AFTER,
        resolve_after: std::time::Duration::ZERO,
        owner_alerts_per_hour: 100_000,
        alert_types: 1000,
        storm: crate::config::StormThreshold::Off,
        alertmanager: false,
    };
    step(
        &mut s,
        &report(vec![cluster(Coverage::Full, vec![m(UnmappedVm, "v2")])], 0),
        &off,
        at(0),
    );
    assert_eq!(drain(&mut s), vec!["event Warn unmapped_vm:v2"]);
    step(
        &mut s,
        &report(vec![cluster(Coverage::Full, vec![])], 5),
        &off,
        at(5),
    );
    assert_eq!(
        drain(&mut s),
        vec![
            "event Info  The VM map of Kubernetes cluster web matches the VMs of the cluster in CloudStack again"
        ]
    );
}

#[test]
fn deleted_cluster_is_closed_but_an_empty_listing_is_not_trusted() {
    let mut s = State::default();
    step(
        &mut s,
        &report(vec![cluster(Coverage::Full, vec![m(UnmappedVm, "v2")])], 0),
        &ON,
        at(0),
    );
    drain(&mut s);
    // An empty cluster listing changes nothing.
    step(&mut s, &report(vec![], 5), &ON, at(5));
    assert_eq!(drain(&mut s), Vec::<String>::new());
    assert!(s.clusters.contains_key("c1"));
    // Another cluster listed, c1 gone: closed.
    let mut other = cluster(Coverage::Full, vec![]);
    other.cluster.id = "c2".into();
    step(&mut s, &report(vec![other], 10), &ON, at(10));
    assert_eq!(
        drain(&mut s),
        vec![
            "archive unmapped_vm:v2",
            "unannotate unmapped_vm:v2",
            "event Info  Kubernetes cluster web no longer exists; its 1 open VM map findings are closed"
        ]
    );
    assert!(!s.clusters.contains_key("c1"));
}

#[test]
fn state_round_trips_through_json() {
    let mut s = State::default();
    step(
        &mut s,
        &report(vec![cluster(Coverage::Full, vec![m(UnmappedVm, "v2")])], 0),
        &ON,
        at(0),
    );
    let text = serde_json::to_string_pretty(&s).unwrap();
    let back: State = serde_json::from_str(&text).unwrap();
    assert_eq!(back, s);
    assert!(text.contains("\"action\": \"raise_alert\""), "{text}");
}

#[test]
fn a_cluster_holds_at_most_alert_cap_alerts_and_one_summary() {
    let mut s = State::default();
    let settings = StepSettings {
        alerts: true,
        annotations: false,
        alert_cap: 2,
        owner_alert_cap: 1000,
        blind_after: crate::config::DEFAULT_BLIND_AFTER,
        resolve_after: std::time::Duration::ZERO,
        owner_alerts_per_hour: 100_000,
        alert_types: 1000,
        storm: crate::config::StormThreshold::Off,
        alertmanager: false,
    };
    let nodes = |range: std::ops::Range<u32>| -> Vec<Mismatch> {
        range
            .map(|i| m(NodeWithoutVm, &format!("fake-{i:02}")))
            .collect()
    };
    // Cycle 1: two alerts and a summary of the third.
    step(
        &mut s,
        &[cluster(Coverage::Full, nodes(0..3))],
        &settings,
        at(0),
    );
    let sent: Vec<String> = drain_recorded(&mut s);
    assert_eq!(
        sent,
        [
            "alert node_without_vm:fake-00",
            "alert node_without_vm:fake-01",
            "summary alert node_without_vm:fake-02",
        ]
    );
    // Cycle 2, three more: the cap is held, the summary still open: no alert at all.
    step(
        &mut s,
        &[cluster(Coverage::Full, nodes(0..6))],
        &settings,
        at(5),
    );
    assert_eq!(drain_recorded(&mut s), Vec::<String>::new());
    // Two findings resolve (their alerts are archived): room for two alerts again.
    let mut still: Vec<Mismatch> = nodes(2..6);
    still.extend(nodes(10..12));
    step(&mut s, &[cluster(Coverage::Full, still)], &settings, at(10));
    let sent = drain_recorded(&mut s);
    assert!(
        sent.contains(&"alert node_without_vm:fake-10".to_string())
            && sent.contains(&"alert node_without_vm:fake-11".to_string()),
        "{sent:?}"
    );
    assert_eq!(sent.iter().filter(|l| l.starts_with("alert ")).count(), 2);
}

#[test]
fn the_clusters_of_one_owner_hold_at_most_owner_alert_cap_alerts() {
    let mut s = State::default();
    let settings = StepSettings {
        annotations: false,
        alert_cap: 2,
        owner_alert_cap: 5,
        ..ON
    };
    let owned = |i: usize, owner: &str, findings: usize| {
        let mut o = nth(
            i,
            (0..findings)
                .map(|n| m(NodeWithoutVm, &format!("fake-{n}")))
                .collect(),
        );
        o.cluster.owner_id = Some(owner.to_string());
        o
    };
    // The tenant's four clusters, three findings each: two alerts and a summary would be
    // twelve; the owner's five go to the first clusters (the last summary names the rest).
    // Another owner's cluster is not held back by them.
    let mut observed: Vec<Observed> = (0..4).map(|i| owned(i, "account:d1/tenant", 3)).collect();
    observed.push(owned(9, "account:d2/other", 1));
    step(&mut s, &observed, &settings, at(0));
    let sent = drain_recorded(&mut s);
    assert_eq!(
        sent,
        [
            "alert node_without_vm:fake-0",
            "alert node_without_vm:fake-1",
            "summary alert node_without_vm:fake-2",
            "alert node_without_vm:fake-0",
            "summary alert node_without_vm:fake-1,node_without_vm:fake-2",
            "alert node_without_vm:fake-0",
        ],
        "{sent:?}"
    );
    let alerted =
        |s: &State, cluster: &str| s.alerts.keys().filter(|k| k.cluster_id == cluster).count();
    assert_eq!(
        (
            alerted(&s, "c00"),
            alerted(&s, "c01"),
            alerted(&s, "c02"),
            alerted(&s, "c03"),
            alerted(&s, "c09")
        ),
        (3, 2, 0, 0, 1)
    );
    // Every finding is still open and in the event log.
    assert_eq!(
        s.clusters.values().map(|c| c.nodes.len()).sum::<usize>(),
        13
    );
}

/// Like `drain`, for alerts only, recording each raised alert as delivery would.
fn drain_recorded(state: &mut State) -> Vec<String> {
    let mut out = Vec::new();
    for o in std::mem::take(&mut state.outbox) {
        match o.notification {
            Notification::RaiseAlert {
                cluster_id,
                key,
                covers,
                zone_id,
                ..
            } => {
                out.push(if covers.is_empty() {
                    format!("alert {key}")
                } else {
                    format!("summary alert {}", covers.join(","))
                });
                state.alerts.insert(
                    crate::state::RecordKey::new(&cluster_id, &key),
                    crate::state::AlertRecord {
                        alert_id: key.clone(),
                        alert_type: 3000,
                        zone_id,
                        covers,
                    },
                );
            }
            Notification::ArchiveAlert { cluster_id, key } => {
                state
                    .alerts
                    .remove(&crate::state::RecordKey::new(&cluster_id, &key));
            }
            _ => {}
        }
    }
    out
}

#[test]
fn nodes_unlisted_for_blind_after_are_one_finding_that_resolves_when_they_are_listed() {
    let mut s = State::default();
    let partial = |reason: &str| {
        let mut c = cluster(Coverage::VmsOnly, vec![]);
        c.blind_reason = Some(reason.into());
        c
    };
    // Compared fully at 0 with a node-side finding open.
    step(
        &mut s,
        &[cluster(Coverage::Full, vec![m(NodeWithoutVm, "stray")])],
        &ON,
        at(0),
    );
    drain(&mut s);
    // Unlisted from 5 on: within blind_after (30 min) nothing is said.
    for min in [5, 10, 20, 29] {
        let out = step(&mut s, &[partial("SSH refused")], &ON, at(min));
        assert!(out.new.is_empty(), "at {min}");
        assert_eq!(drain(&mut s), Vec::<String>::new(), "at {min}");
    }
    // 30 minutes after the last full comparison: one finding, whatever the reason says next.
    let out = step(&mut s, &[partial("SSH timed out")], &ON, at(30));
    assert_eq!(out.new, [("c1".to_string(), key("blind:nodes"))].into());
    assert_eq!(
        drain(&mut s),
        [
            "event Warn blind:nodes",
            "annotate blind:nodes",
            "alert blind:nodes"
        ]
    );
    let blind = &out.open["c1"];
    assert!(
        blind.iter().any(|m| m.subject
            == Subject::Blind {
                reason: "SSH timed out".into(),
                since: at(0)
            }),
        "{blind:?}"
    );
    // The node-side finding stays open, neither resolved nor reported again.
    assert!(blind.iter().any(|m| m.kind == NodeWithoutVm), "{blind:?}");
    for min in [35, 40] {
        let out = step(&mut s, &[partial("SSH refused")], &ON, at(min));
        assert!(out.new.is_empty());
        assert_eq!(drain(&mut s), Vec::<String>::new());
    }
    // Listed again: the blind finding resolves; the node side is judged again.
    step(
        &mut s,
        &[cluster(Coverage::Full, vec![m(NodeWithoutVm, "stray")])],
        &ON,
        at(45),
    );
    assert_eq!(
        drain(&mut s),
        [
            "archive blind:nodes",
            "unannotate blind:nodes",
            "event Info  The VM map of Kubernetes cluster web matches the VMs of the cluster in CloudStack again"
        ]
    );
}

#[test]
fn a_cluster_never_compared_is_blind_from_its_first_failure_and_after_two_cycles_at_least() {
    let mut s = State::default();
    let settings = StepSettings {
        blind_after: std::time::Duration::ZERO,
        resolve_after: std::time::Duration::ZERO,
        owner_alerts_per_hour: 100_000,
        alert_types: 1000,
        storm: crate::config::StormThreshold::Off,
        alertmanager: false,
        ..ON
    };
    let partial = cluster(Coverage::VmsOnly, vec![]);
    let out = step(&mut s, std::slice::from_ref(&partial), &settings, at(0));
    assert!(out.new.is_empty(), "one cycle is not enough");
    // A skipped cycle changes nothing.
    step(&mut s, &[cluster(Coverage::None, vec![])], &settings, at(5));
    let out = step(&mut s, std::slice::from_ref(&partial), &settings, at(10));
    assert_eq!(out.new, [("c1".to_string(), key("blind:nodes"))].into());
    assert!(out.open["c1"].iter().any(|m| m.subject
        == Subject::Blind {
            reason: "the nodes could not be listed".into(),
            since: at(0)
        }));
}

/// Cluster `c<i>` (`web<i>`) with the findings given.
fn nth(i: usize, mismatches: Vec<Mismatch>) -> Observed {
    Observed {
        left_to_server: Default::default(),
        cluster: crate::snapshot::ClusterIdentity {
            id: format!("c{i:02}"),
            name: format!("web{i:02}"),
            ..Default::default()
        },
        ..cluster(Coverage::Full, mismatches)
    }
}

const STORMY: StepSettings = StepSettings {
    storm: crate::config::StormThreshold::Clusters(3),
    alertmanager: false,
    ..ON
};

/// Clusters `0..n` each with `unmapped_vm:v<i>`, clusters `n..total` clean.
fn fleet(n: usize, total: usize) -> Vec<Observed> {
    (0..total)
        .map(|i| {
            let found = if i < n {
                vec![m(UnmappedVm, &format!("v{i}"))]
            } else {
                vec![]
            };
            nth(i, found)
        })
        .collect()
}

fn held_keys(s: &State) -> Vec<String> {
    s.clusters
        .iter()
        .flat_map(|(id, c)| {
            c.vms
                .iter()
                .chain(&c.nodes)
                .filter(|(_, r)| r.held)
                .map(move |(k, _)| format!("{id}/{k}"))
        })
        .collect()
}

#[test]
fn new_findings_in_more_clusters_than_the_threshold_are_one_storm_alert() {
    let mut s = State::default();
    let out = step(&mut s, &fleet(4, 6), &STORMY, at(0));
    assert_eq!(
        out.storm,
        Some(StormChange::Began {
            clusters: 4,
            checked: 6,
            threshold: 3,
            findings: 4
        })
    );
    assert_eq!(out.new.len(), 4);
    let storm_key = format!("storm:{}", at(0).to_compact().to_ascii_lowercase());
    let sent = drain(&mut s);
    assert_eq!(
        sent,
        vec![
            "event Warn unmapped_vm:v0".to_string(),
            "event Warn unmapped_vm:v1".to_string(),
            "event Warn unmapped_vm:v2".to_string(),
            "event Warn unmapped_vm:v3".to_string(),
            format!("alert {storm_key}"),
            format!("event Warn {storm_key}"),
        ]
    );
    assert_eq!(
        held_keys(&s),
        [
            "c00/unmapped_vm:v0",
            "c01/unmapped_vm:v1",
            "c02/unmapped_vm:v2",
            "c03/unmapped_vm:v3"
        ]
    );
    assert_eq!(s.storm.as_ref().unwrap().key, storm_key);
    // The findings are open and reported all the same.
    assert_eq!(out.open.len(), 4);
}

#[test]
fn the_storm_alert_names_counts_and_causes_once() {
    let mut s = State::default();
    let mut r = fleet(4, 6);
    r[0].mismatches
        .push(with_state(m(MappedVm, "d0"), "Destroyed"));
    r[1].mismatches
        .push(with_state(m(MappedVm, "d1"), "Destroyed"));
    step(&mut s, &r, &STORMY, at(0));
    let description = s
        .outbox
        .iter()
        .find_map(|o| match &o.notification {
            Notification::RaiseAlert { description, .. } => Some(description.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        description,
        format!(
            "Kubernetes cluster VM maps: 6 new findings in 4 of 6 checked clusters at once, more than notify.storm_clusters (3): unmapped_vm 4, mapped_vm 2. Most common: a VM named as a node is not in the map (4); a mapped VM is destroyed (2). A cause common to many clusters (storage, network, SSH, a template or an upgrade) is likely. Nothing was changed. Their alerts and annotations are held until no more than 3 clusters have findings not yet alerted; each finding is in the event log and the report now. [cks-drift cloud/storm:{}]",
            at(0).to_compact().to_ascii_lowercase()
        )
    );
}

#[test]
fn a_storm_lasts_while_too_many_clusters_hold_findings_then_tells_those_still_open() {
    let mut s = State::default();
    step(&mut s, &fleet(5, 8), &STORMY, at(0));
    drain(&mut s);
    let storm_key = format!("storm:{}", at(0).to_compact().to_ascii_lowercase());

    // Still 4 clusters hold findings (v0 resolved): the storm goes on, and a finding new in
    // it (v7) is held too, whatever the count of clusters it came in.
    let mut r = fleet(5, 8);
    r[0].mismatches.clear();
    r[7].mismatches.push(m(UnmappedVm, "v7"));
    let out = step(&mut s, &r, &STORMY, at(5));
    assert_eq!(out.storm, None);
    assert_eq!(
        drain(&mut s),
        vec![
            "event Info  The VM map of Kubernetes cluster web00 matches the VMs of the cluster in CloudStack again",
            "event Warn unmapped_vm:v7",
        ],
        "a held finding that resolves takes nothing back"
    );
    assert_eq!(held_keys(&s).len(), 5);

    // Two more resolve: 3 clusters hold findings, no more than the threshold. Those still open
    // are told one by one, the storm alert is archived.
    let mut r = fleet(5, 8);
    r[0].mismatches.clear();
    r[1].mismatches.clear();
    r[2].mismatches.clear();
    r[7].mismatches.push(m(UnmappedVm, "v7"));
    let out = step(&mut s, &r, &STORMY, at(10));
    let ended = s.outbox.last().map(|o| o.notification.clone());
    assert!(
        matches!(&ended, Some(Notification::Event { level: Level::Info, description, .. })
            if *description == format!("The storm of VM map findings that began at {} is over: of 6 findings held, 3 still open in 3 clusters were told one by one; the others resolved meanwhile and are not told", at(0))),
        "{ended:?}"
    );
    assert_eq!(
        out.storm,
        Some(StormChange::Ended {
            since: at(0),
            held: 6,
            released: 3
        })
    );
    let sent = drain(&mut s);
    assert_eq!(
        sent,
        vec![
            "event Info  The VM map of Kubernetes cluster web01 matches the VMs of the cluster in CloudStack again".to_string(),
            "event Info  The VM map of Kubernetes cluster web02 matches the VMs of the cluster in CloudStack again".to_string(),
            "annotate unmapped_vm:v3".to_string(),
            "alert unmapped_vm:v3".to_string(),
            "annotate unmapped_vm:v4".to_string(),
            "alert unmapped_vm:v4".to_string(),
            "annotate unmapped_vm:v7".to_string(),
            "alert unmapped_vm:v7".to_string(),
            format!("archive {storm_key}"),
            format!("event Info {storm_key}"),
        ]
    );
    assert!(s.storm.is_none());
    assert!(held_keys(&s).is_empty());
    // Told once: the next cycle sends nothing.
    step(&mut s, &r, &STORMY, at(15));
    assert_eq!(drain(&mut s), Vec::<String>::new());
}

#[test]
fn a_cluster_deleted_during_a_storm_takes_nothing_back() {
    let mut s = State::default();
    step(&mut s, &fleet(5, 7), &STORMY, at(0));
    drain(&mut s);
    let r: Vec<Observed> = fleet(5, 7).into_iter().skip(1).collect();
    step(&mut s, &r, &STORMY, at(5));
    assert_eq!(
        drain(&mut s),
        vec![
            "event Info  Kubernetes cluster web00 no longer exists; its 1 open VM map findings are closed"
        ]
    );
    assert!(s.storm.is_some(), "4 clusters hold findings, more than 3");
}

#[test]
fn a_percentage_is_of_the_checked_clusters_and_at_least_five() {
    use crate::config::StormThreshold::{Clusters, Off, Percent};
    assert_eq!(Percent(20).clusters(40), Some(8));
    assert_eq!(Percent(20).clusters(10), Some(5));
    assert_eq!(Percent(25).clusters(1000), Some(250));
    assert_eq!(Clusters(3).clusters(1000), Some(3));
    assert_eq!(Off.clusters(1000), None);

    // 20 % of 40 is 8: findings in 8 clusters are told one by one, in 9 they are a storm.
    let settings = StepSettings {
        storm: Percent(20),
        alertmanager: false,
        ..ON
    };
    let mut s = State::default();
    let out = step(&mut s, &fleet(8, 40), &settings, at(0));
    assert_eq!(out.storm, None);
    assert_eq!(drain(&mut s).len(), 8 * 3);
    let mut s = State::default();
    let out = step(&mut s, &fleet(9, 40), &settings, at(0));
    assert!(matches!(
        out.storm,
        Some(StormChange::Began {
            clusters: 9,
            checked: 40,
            threshold: 8,
            ..
        })
    ));
    // Skipped clusters are not checked ones.
    let mut r = fleet(9, 40);
    for c in &mut r[20..] {
        c.coverage = Coverage::None;
    }
    let mut s = State::default();
    let out = step(&mut s, &r, &settings, at(0));
    assert!(matches!(
        out.storm,
        Some(StormChange::Began {
            checked: 20,
            threshold: 5,
            ..
        })
    ));
}

#[test]
fn blind_clusters_make_a_storm_like_any_finding() {
    let settings = StepSettings {
        blind_after: std::time::Duration::ZERO,
        resolve_after: std::time::Duration::ZERO,
        owner_alerts_per_hour: 100_000,
        alert_types: 1000,
        ..STORMY
    };
    // A CloudStack-wide SSH failure: 5 of 8 clusters cannot be listed, for two cycles.
    let blind: Vec<Observed> = (0..8)
        .map(|i| Observed {
            coverage: if i < 5 {
                Coverage::VmsOnly
            } else {
                Coverage::Full
            },
            blind_reason: (i < 5).then(|| {
                format!("SSH to the control node is refused or unreachable (10.0.0.{i}:22: connection refused)")
            }),
            ..nth(i, vec![])
        })
        .collect();
    let mut s = State::default();
    step(&mut s, &blind, &settings, at(0));
    assert_eq!(drain(&mut s), Vec::<String>::new());
    let out = step(&mut s, &blind, &settings, at(5));
    assert!(
        matches!(
            out.storm,
            Some(StormChange::Began {
                clusters: 5,
                findings: 5,
                ..
            })
        ),
        "{:?}",
        out.storm
    );
    let description = s
        .outbox
        .iter()
        .find_map(|o| match &o.notification {
            Notification::RaiseAlert { description, .. } => Some(description.clone()),
            _ => None,
        })
        .unwrap();
    assert!(
        description.contains(
            ": blind 5. Most common: SSH to the control node is refused or unreachable (5). "
        ),
        "{description}"
    );
    let sent = drain(&mut s);
    assert_eq!(
        sent.iter().filter(|l| l.starts_with("alert")).count(),
        1,
        "{sent:?}"
    );
    assert!(!sent.iter().any(|l| l.starts_with("annotate")), "{sent:?}");
}

#[test]
fn storms_off_tell_every_finding() {
    let mut s = State::default();
    let out = step(&mut s, &fleet(30, 40), &ON, at(0));
    assert_eq!(out.storm, None);
    assert_eq!(drain(&mut s).len(), 30 * 3);
}

#[test]
fn a_state_with_held_findings_round_trips() {
    let mut s = State::default();
    step(&mut s, &fleet(4, 6), &STORMY, at(0));
    let text = serde_json::to_string(&s).unwrap();
    assert!(text.contains("\"held\":true"), "{text}");
    let back: State = serde_json::from_str(&text).unwrap();
    assert_eq!(back, s);
}

fn ignoring(mut c: Observed, key: &str) -> Observed {
    c.ignored.insert(
        crate::diff::FindingKey::parse(key).unwrap(),
        crate::state::ignore::Ignored {
            rule: 1,
            reason: "kept for forensics".into(),
        },
    );
    c
}

#[test]
fn an_ignored_finding_is_reported_not_alerted() {
    let mut s = State::default();
    let c = ignoring(
        cluster(Coverage::Full, vec![m(UnmappedVm, "v2")]),
        "unmapped_vm:v2",
    );
    let out = step(&mut s, std::slice::from_ref(&c), &ON, at(0));
    assert_eq!(out.new.len(), 1);
    let descriptions: Vec<String> = s
        .outbox
        .iter()
        .filter_map(|o| match &o.notification {
            Notification::Event {
                level, description, ..
            } => Some(format!("{level:?} {description}")),
            _ => None,
        })
        .collect();
    assert_eq!(
        descriptions,
        [
            "Info VM web-node-v2 (v2, Running) is named as a node of Kubernetes cluster web but is not one of its VMs in CloudStack; ignored by [[ignore]] rule 1: kept for forensics"
        ]
    );
    assert_eq!(drain(&mut s), vec!["event Info unmapped_vm:v2"]);
    assert_eq!(out.open["c1"].len(), 1, "still reported");
    // Kept and still ignored: nothing; resolved: nothing to take back.
    step(&mut s, &[c], &ON, at(5));
    assert_eq!(drain(&mut s), Vec::<String>::new());
    step(&mut s, &[cluster(Coverage::Full, vec![])], &ON, at(10));
    assert_eq!(
        drain(&mut s),
        vec![
            "event Info  The VM map of Kubernetes cluster web matches the VMs of the cluster in CloudStack again"
        ]
    );
}

#[test]
fn a_rule_that_starts_matching_takes_back_the_alert_and_one_that_stops_alerts_again() {
    let settings = StepSettings {
        alertmanager: true,
        ..ON
    };
    let mut s = State::default();
    let plain = cluster(Coverage::Full, vec![m(UnmappedVm, "v2")]);
    step(&mut s, std::slice::from_ref(&plain), &settings, at(0));
    assert_eq!(
        drain(&mut s),
        vec![
            "event Warn unmapped_vm:v2",
            "annotate unmapped_vm:v2",
            "alert unmapped_vm:v2"
        ]
    );
    // A rule is added (a reload): the alert is archived, the annotation removed, the
    // Alertmanager alert resolved; the finding stays open.
    let out = step(
        &mut s,
        &[ignoring(plain.clone(), "unmapped_vm:v2")],
        &settings,
        at(5),
    );
    assert_eq!(
        out.newly_ignored,
        [crate::state::step::IgnoreChange {
            cluster_id: "c1".to_string(),
            key: crate::diff::FindingKey::parse("unmapped_vm:v2").unwrap(),
            rule: crate::state::ignore::Ignored {
                rule: 1,
                reason: "kept for forensics".into()
            }
        }]
    );
    assert_eq!(
        drain(&mut s),
        vec![
            "am-resolve unmapped_vm:v2",
            "archive unmapped_vm:v2",
            "unannotate unmapped_vm:v2"
        ]
    );
    assert_eq!(out.open["c1"].len(), 1);
    assert!(
        s.clusters["c1"].vms[&crate::diff::FindingKey::parse("unmapped_vm:v2").unwrap()]
            .ignored
            .is_some()
    );
    assert_eq!(
        s.clusters["c1"].vms[&crate::diff::FindingKey::parse("unmapped_vm:v2").unwrap()].since,
        at(0)
    );
    // The rule expires: the finding is alerted like a new one (its first report kept).
    let out = step(&mut s, &[plain], &settings, at(10));
    assert_eq!(out.unignored.len(), 1);
    assert!(out.new.is_empty(), "not new: reported since the start");
    assert_eq!(
        drain(&mut s),
        vec!["annotate unmapped_vm:v2", "alert unmapped_vm:v2"]
    );
    // Resolved: its Alertmanager alert is resolved with the rest.
    step(
        &mut s,
        &[cluster(Coverage::Full, vec![])],
        &settings,
        at(15),
    );
    assert_eq!(
        drain(&mut s)[..3],
        [
            "am-resolve unmapped_vm:v2",
            "archive unmapped_vm:v2",
            "unannotate unmapped_vm:v2"
        ]
    );
}

#[test]
fn ignored_findings_do_not_make_a_storm() {
    let mut s = State::default();
    let r: Vec<Observed> = fleet(5, 8)
        .into_iter()
        .enumerate()
        .map(|(i, c)| ignoring(c, &format!("unmapped_vm:v{i}")))
        .collect();
    let out = step(&mut s, &r, &STORMY, at(0));
    assert_eq!(out.storm, None);
    assert!(s.storm.is_none());
}

#[test]
fn the_alertmanager_resolution_names_the_same_labels_as_the_alert() {
    let settings = StepSettings {
        alertmanager: true,
        ..ON
    };
    let mut s = State::default();
    let mut c = cluster(Coverage::Full, vec![m(UnmappedVm, "v2")]);
    c.cluster.owner = Some("tenant-a".into());
    step(&mut s, &[c], &settings, at(0));
    drain(&mut s);
    let firing = crate::notify::alertmanager::firing(
        &s,
        at(12),
        crate::notify::alertmanager::FiringCaps {
            per_cluster: 5,
            per_tenant: 100,
        },
    );
    step(&mut s, &[cluster(Coverage::Full, vec![])], &settings, at(5));
    let resolved = s
        .outbox
        .iter()
        .find_map(|o| match &o.notification {
            Notification::ResolveAlertmanager {
                labels,
                starts_at,
                ends_at,
                ..
            } => Some((labels.clone(), *starts_at, *ends_at)),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        serde_json::to_value(&resolved.0).unwrap(),
        firing[0]["labels"]
    );
    assert_eq!(
        firing[0]["labels"],
        serde_json::json!({
            "alertname": "KubernetesClusterVmMapDrift",
            "cluster": "web",
            "cluster_id": "c1",
            "key": "unmapped_vm:v2",
            "kind": "unmapped_vm",
            "owner": "tenant-a",
            "vm": "web-node-v2",
            "vm_id": "v2",
            "zone": "z1"
        })
    );
    assert_eq!((resolved.1, resolved.2), (at(0), at(5)));
    assert_eq!(firing[0]["endsAt"], at(12).to_string());
}

/// `observed` with the findings `keys` left to the server's own check.
fn left(mut observed: Observed, keys: &[&str]) -> Observed {
    observed.left_to_server = keys.iter().map(|k| key(k)).collect();
    observed
}

#[test]
fn findings_the_servers_own_check_alerts_get_only_their_event() {
    let mut s = State::default();
    let found = vec![m(UnmappedVm, "v2"), m(MapCount, "1/3")];
    let r = vec![left(cluster(Coverage::Full, found), &["unmapped_vm:v2"])];
    let out = step(&mut s, &r, &ON, at(0));
    assert_eq!(out.new.len(), 2);
    let sent = drain(&mut s);
    assert!(
        sent.contains(&"event Warn unmapped_vm:v2".to_string()),
        "{sent:?}"
    );
    assert!(
        !sent
            .iter()
            .any(|n| n.ends_with(" unmapped_vm:v2") && !n.starts_with("event"))
    );
    assert!(
        sent.contains(&"alert map_count:1/3".to_string()),
        "{sent:?}"
    );
    assert!(s.clusters["c1"].vms[&key("unmapped_vm:v2")].server);
    // Resolved: it had no alert or annotation to take back.
    let out = step(
        &mut s,
        &[cluster(Coverage::Full, vec![m(MapCount, "1/3")])],
        &ON,
        at(5),
    );
    assert!(out.new.is_empty());
    assert_eq!(drain(&mut s), Vec::<String>::new());
}

#[test]
fn switching_the_servers_check_on_hands_over_and_switching_it_off_alerts_again() {
    let mut s = State::default();
    let found = || vec![m(UnmappedVm, "v2"), m(NodeWithoutVm, "stray")];
    step(&mut s, &[cluster(Coverage::Full, found())], &ON, at(0));
    assert_eq!(drain(&mut s).len(), 6);
    // The server's check is switched on: cks-drift's alert and annotation of what it reports
    // are taken back, each said in the event log; the other finding keeps its own.
    let on = vec![left(cluster(Coverage::Full, found()), &["unmapped_vm:v2"])];
    let out = step(&mut s, &on, &ON, at(5));
    assert_eq!(
        out.handed_over,
        vec![("c1".to_string(), key("unmapped_vm:v2"))]
    );
    assert_eq!(
        drain(&mut s),
        vec![
            "archive unmapped_vm:v2",
            "unannotate unmapped_vm:v2",
            "event Info unmapped_vm:v2"
        ]
    );
    step(&mut s, &on, &ON, at(10));
    assert_eq!(drain(&mut s), Vec::<String>::new());
    // Switched off again: alerted and annotated anew, once.
    let off = vec![cluster(Coverage::Full, found())];
    let out = step(&mut s, &off, &ON, at(15));
    assert!(out.new.is_empty());
    assert_eq!(
        drain(&mut s),
        vec!["annotate unmapped_vm:v2", "alert unmapped_vm:v2"]
    );
    step(&mut s, &off, &ON, at(20));
    assert_eq!(drain(&mut s), Vec::<String>::new());
}

#[test]
fn a_summary_alert_whose_findings_are_all_handed_over_is_archived() {
    let mut s = State::default();
    let many: Vec<Mismatch> = (1..=7).map(|i| m(UnmappedVm, &format!("v{i}"))).collect();
    step(&mut s, &[cluster(Coverage::Full, many.clone())], &ON, at(0));
    let summary_key = format!("summary:{}", at(0).to_compact());
    record_summary(&mut s, &summary_key);
    drain(&mut s);
    // The server's check takes over v6 and v7 only: the summary goes with them.
    let r = vec![left(
        cluster(Coverage::Full, many.clone()),
        &["unmapped_vm:v6", "unmapped_vm:v7"],
    )];
    step(&mut s, &r, &ON, at(5));
    let sent = drain(&mut s);
    assert!(sent.contains(&format!("archive {summary_key}")), "{sent:?}");
    assert!(
        sent.contains(&"archive unmapped_vm:v6".to_string()),
        "{sent:?}"
    );
    assert!(
        !sent.contains(&"archive unmapped_vm:v5".to_string()),
        "{sent:?}"
    );
}

/// The marks of the WARN event lines `state`'s outbox holds, by key, then emptied.
fn after_takeover_marks(state: &mut State) -> Vec<(String, bool)> {
    std::mem::take(&mut state.outbox)
        .into_iter()
        .filter_map(|o| match o.notification {
            Notification::Event {
                level: Level::Warn,
                key,
                after_takeover,
                ..
            } => Some((key.unwrap_or_default(), after_takeover)),
            _ => None,
        })
        .collect()
}

#[test]
fn the_first_step_after_a_read_back_marks_its_new_findings_event_lines_and_no_later_one() {
    // A storm held the finding in the instance before: CloudStack kept no trace of it, so the
    // instance that read back what was reported meets it as new, and its line may be a repeat.
    let mut s = State {
        read_back: true,
        ..State::default()
    };
    let first = report(vec![cluster(Coverage::Full, vec![m(UnmappedVm, "v2")])], 0);
    step(&mut s, &first, &ON, at(0));
    assert_eq!(
        after_takeover_marks(&mut s),
        [("unmapped_vm:v2".to_string(), true)]
    );
    assert!(!s.read_back);
    // A finding first seen by this instance's later steps is its own.
    let later = report(
        vec![cluster(
            Coverage::Full,
            vec![m(UnmappedVm, "v2"), m(UnmappedVm, "v3")],
        )],
        5,
    );
    step(&mut s, &later, &ON, at(5));
    assert_eq!(
        after_takeover_marks(&mut s),
        [("unmapped_vm:v3".to_string(), false)]
    );
    // The mark survives a state written between the read-back and the step.
    let kept: State = serde_json::from_str(
        &serde_json::to_string(&State {
            read_back: true,
            ..State::default()
        })
        .unwrap(),
    )
    .unwrap();
    assert!(kept.read_back);
}

#[test]
fn a_cluster_whose_nodes_the_first_step_after_a_read_back_could_not_list_is_marked_when_met() {
    // After a read-back: c1's nodes could not be listed in the first step, and c3 was
    // skipped (its reads failed), so their node-named VMs are met only later, and may still
    // have been told before.
    let mut s = State {
        read_back: true,
        ..State::default()
    };
    let other = |id: &str, coverage, mismatches| {
        let mut c = cluster(coverage, mismatches);
        c.cluster.id = id.into();
        c
    };
    let first = vec![
        cluster(Coverage::VmsOnly, vec![]),
        other("c2", Coverage::Full, vec![]),
        other("c3", Coverage::None, vec![]),
    ];
    step(&mut s, &first, &ON, at(0));
    assert!(s.read_back);
    assert_eq!(s.read_back_seen, ["c2".to_string()].into());
    let second = vec![
        cluster(Coverage::Full, vec![m(UnmappedVm, "v2")]),
        other("c2", Coverage::Full, vec![m(UnmappedVm, "v9")]),
        other("c3", Coverage::None, vec![]),
    ];
    step(&mut s, &second, &ON, at(5));
    let mut marks = after_takeover_marks(&mut s);
    marks.sort();
    assert_eq!(
        marks,
        [
            ("unmapped_vm:v2".to_string(), true),
            ("unmapped_vm:v9".to_string(), false)
        ]
    );
    assert!(s.read_back, "c3 is still to be seen");
    let third = vec![
        cluster(Coverage::Full, vec![m(UnmappedVm, "v2")]),
        other("c2", Coverage::Full, vec![m(UnmappedVm, "v9")]),
        other("c3", Coverage::Full, vec![m(UnmappedVm, "v7")]),
    ];
    step(&mut s, &third, &ON, at(10));
    assert_eq!(
        after_takeover_marks(&mut s),
        [("unmapped_vm:v7".to_string(), true)]
    );
    // Every cluster seen: the read-back is over.
    assert!(!s.read_back && s.read_back_seen.is_empty());
}

#[test]
fn a_storm_alert_read_back_during_this_instances_own_storm_ends_with_it() {
    // This instance's storm began while its alert could not be delivered; another instance
    // raised its own storm alert meanwhile, read back when the lock came back here.
    let mut s = State::default();
    step(&mut s, &fleet(5, 8), &STORMY, at(0));
    drain(&mut s);
    s.alerts.insert(
        RecordKey::new(crate::state::STORM_SCOPE, "storm:20270115t080000z"),
        crate::state::AlertRecord {
            alert_id: "a-other".into(),
            alert_type: 3001,
            zone_id: None,
            covers: vec![],
        },
    );
    let out = step(&mut s, &fleet(0, 8), &STORMY, at(5));
    assert!(
        matches!(out.storm, Some(StormChange::Ended { .. })),
        "{out:?}"
    );
    let sent = drain(&mut s);
    let own = format!("archive storm:{}", at(0).to_compact().to_ascii_lowercase());
    assert!(sent.contains(&own), "{sent:#?}");
    assert!(
        sent.contains(&"archive storm:20270115t080000z".to_string()),
        "{sent:#?}"
    );
}
