//! What one tenant can do to what is told about another: storms, flapping, the hourly and
//! at-once budgets, the alert types kept for tenants holding few, and Alertmanager's caps.
use super::*;

/// Cluster `i` of `tenant` with findings `node_without_vm:<name>` for each of `nodes`.
fn owned(i: usize, tenant: &str, nodes: &[&str]) -> Observed {
    {
        let mut o = nth(i, nodes.iter().map(|n| m(NodeWithoutVm, n)).collect());
        o.cluster.owner_id = Some(tenant.to_string());
        o
    }
}

const PERCENT: StepSettings = StepSettings {
    storm: crate::config::DEFAULT_STORM_CLUSTERS,
    ..ON
};

#[test]
fn one_tenant_with_findings_in_many_clusters_holds_back_only_its_own() {
    let mut s = State::default();
    // evil: 6 clusters with a fake node each (more than max(5, 20 % of 7)); honest: 1 clean.
    let mut observed: Vec<Observed> = (0..6).map(|i| owned(i, "account:d/evil", &["x"])).collect();
    observed.push(owned(9, "account:d/honest", &[]));
    let out = step(&mut s, &observed, &PERCENT, at(0));
    assert!(matches!(
        out.storm,
        Some(StormChange::Began { clusters: 6, .. })
    ));
    drain(&mut s);

    // honest's worker is destroyed: told at once, while evil's storm goes on.
    observed[6] = owned(9, "account:d/honest", &["w1"]);
    let out = step(&mut s, &observed, &PERCENT, at(5));
    assert_eq!(out.storm, None);
    assert_eq!(
        drain(&mut s),
        [
            "event Warn node_without_vm:w1",
            "annotate node_without_vm:w1",
            "alert node_without_vm:w1"
        ]
    );
    assert!(s.storm.is_some(), "evil's own findings stay held");
    assert_eq!(held_keys(&s).len(), 6);
}

#[test]
fn a_storm_of_many_tenants_still_holds_them_all_then_tells_them() {
    let mut s = State::default();
    let observed: Vec<Observed> = (0..6)
        .map(|i| owned(i, &format!("account:d/t{i}"), &["x"]))
        .collect();
    let out = step(&mut s, &observed, &PERCENT, at(0));
    assert!(matches!(
        out.storm,
        Some(StormChange::Began { clusters: 6, .. })
    ));
    assert_eq!(held_keys(&s).len(), 6);
    drain(&mut s);
    // Three tenants' findings resolve: 3 clusters hold, one tenant each, no storm left.
    let mut later = observed.clone();
    for c in &mut later[..3] {
        c.mismatches.clear();
    }
    let out = step(&mut s, &later, &PERCENT, at(5));
    assert!(matches!(
        out.storm,
        Some(StormChange::Ended {
            held: 6,
            released: 3,
            ..
        })
    ));
    let sent = drain(&mut s);
    let told = sent
        .iter()
        .filter(|l| *l == "alert node_without_vm:x")
        .count();
    assert_eq!(told, 3, "{sent:?}");
}

#[test]
fn a_storm_that_lets_one_tenant_go_tells_its_findings_and_goes_on() {
    let mut s = State::default();
    // big: 6 clusters; a, b: 1 each. big is in its own storm; a and b see 1 + 2 others.
    let mut observed: Vec<Observed> = (0..6).map(|i| owned(i, "account:d/big", &["x"])).collect();
    observed.push(owned(7, "account:d/a", &["y"]));
    observed.push(owned(8, "account:d/b", &["z"]));
    step(&mut s, &observed, &PERCENT, at(0));
    let sent = drain(&mut s);
    assert!(
        sent.contains(&"alert node_without_vm:y".to_string()),
        "{sent:?}"
    );
    assert!(
        sent.contains(&"alert node_without_vm:z".to_string()),
        "{sent:?}"
    );
    assert_eq!(held_keys(&s).len(), 6);
    // big's findings drop to 3 clusters: 3 + 2 others, not past 5. Its findings still open
    // are told, the storm ends.
    for c in &mut observed[3..6] {
        c.mismatches.clear();
    }
    let out = step(&mut s, &observed, &PERCENT, at(5));
    assert!(matches!(
        out.storm,
        Some(StormChange::Ended { released: 3, .. })
    ));
    assert_eq!(held_keys(&s).len(), 0);
}

#[test]
fn a_finding_that_flaps_within_resolve_after_is_told_once_and_resolved_after_it() {
    let settings = StepSettings {
        resolve_after: std::time::Duration::from_secs(10 * 60),
        ..ON
    };
    let mut s = State::default();
    let present = || vec![cluster(Coverage::Full, vec![m(NodeWithoutVm, "fake")])];
    let absent = || vec![cluster(Coverage::Full, vec![])];
    let mut sent = Vec::new();
    // Six cycles 5 minutes apart, the finding there every other one.
    for cycle in 0..6 {
        let r = if cycle % 2 == 0 { present() } else { absent() };
        let out = step(&mut s, &r, &settings, at(cycle * 5));
        assert_eq!(
            out.open["c1"].len(),
            1,
            "cycle {cycle}: open until resolved"
        );
        sent.extend(drain(&mut s));
    }
    assert_eq!(
        sent,
        [
            "event Warn node_without_vm:fake",
            "annotate node_without_vm:fake",
            "alert node_without_vm:fake"
        ]
    );
    // Absent from 25 on: still open at 30, resolved at 35 (10 minutes).
    step(&mut s, &absent(), &settings, at(30));
    assert_eq!(drain(&mut s), Vec::<String>::new());
    let out = step(&mut s, &absent(), &settings, at(35));
    assert!(out.open.is_empty());
    assert_eq!(
        drain(&mut s),
        [
            "archive node_without_vm:fake",
            "unannotate node_without_vm:fake",
            "event Info  The VM map of Kubernetes cluster web matches the Kubernetes nodes of the cluster again"
        ]
    );
}

#[test]
fn resolve_after_zero_resolves_at_the_first_cycle_without_it() {
    let mut s = State::default();
    step(
        &mut s,
        &[cluster(Coverage::Full, vec![m(UnmappedVm, "v2")])],
        &ON,
        at(0),
    );
    drain(&mut s);
    let out = step(&mut s, &[cluster(Coverage::Full, vec![])], &ON, at(5));
    assert!(out.open.is_empty());
    assert_eq!(drain(&mut s)[0], "archive unmapped_vm:v2");
}

#[test]
fn one_tenant_is_raised_at_most_owner_alerts_per_hour_alerts_and_annotations() {
    let settings = StepSettings {
        owner_alerts_per_hour: 4,
        alert_cap: 10,
        ..ON
    };
    let mut s = State::default();
    let mut alerts = 0;
    let mut annotations = 0;
    // A tenant flapping new fake nodes every 5 minutes for an hour: 2 new each cycle.
    for cycle in 0..12 {
        let names = [format!("a{cycle}"), format!("b{cycle}")];
        let r = vec![owned(0, "account:d/evil", &[&names[0], &names[1]])];
        step(&mut s, &r, &settings, at(cycle * 5));
        for line in drain_recorded_all(&mut s) {
            if line.starts_with("alert") || line.starts_with("summary") {
                alerts += 1;
            } else if line.starts_with("annotate") {
                annotations += 1;
            }
        }
    }
    assert_eq!((alerts, annotations), (4, 4));
    // Another tenant is not held back by it.
    let r = vec![
        owned(0, "account:d/evil", &["c"]),
        owned(1, "account:d/honest", &["h"]),
    ];
    step(&mut s, &r, &settings, at(60));
    let sent = drain_recorded_all(&mut s);
    assert!(
        sent.contains(&"alert node_without_vm:h".to_string()),
        "{sent:?}"
    );
    // An hour after its first alerts, the tenant may be raised alerts again.
    assert!(
        sent.contains(&"alert node_without_vm:c".to_string()),
        "{sent:?}"
    );
}

#[test]
fn a_tenant_holds_at_most_owner_alert_cap_annotations_too() {
    let settings = StepSettings {
        owner_alert_cap: 3,
        alert_cap: 2,
        ..ON
    };
    let mut s = State::default();
    let r: Vec<Observed> = (0..4)
        .map(|i| owned(i, "account:d/evil", &["x", "y"]))
        .collect();
    step(&mut s, &r, &settings, at(0));
    let annotations = s
        .outbox
        .iter()
        .filter(|o| o.notification.channel() == "annotation")
        .count();
    assert_eq!(annotations, 3);
}

#[test]
fn a_quarter_of_the_alert_types_is_kept_for_tenants_holding_few() {
    let settings = StepSettings {
        alert_types: 8,
        alert_cap: 2,
        ..ON
    };
    let mut s = State::default();
    // big takes types until only the quarter kept (2) is free: 6 of its 10 findings'.
    let r: Vec<Observed> = (0..5)
        .map(|i| owned(i, "account:d/big", &["x", "y"]))
        .collect();
    step(&mut s, &r, &settings, at(0));
    drain_recorded_all(&mut s);
    assert_eq!(s.alerts.len(), 6);
    // A tenant holding none still gets its alerts, up to alert_cap, from the kept quarter.
    let mut r2 = r.clone();
    r2.push(owned(7, "account:d/small", &["s1", "s2", "s3"]));
    step(&mut s, &r2, &settings, at(5));
    let sent = drain_recorded_all(&mut s);
    assert_eq!(
        sent,
        [
            "annotate node_without_vm:s1",
            "annotate node_without_vm:s2",
            "alert node_without_vm:s1",
            "summary alert node_without_vm:s2,node_without_vm:s3"
        ]
    );
}

#[test]
fn projects_of_one_domain_are_one_tenant() {
    use crate::snapshot::Owner;
    let p = |id: &str| Owner::Project {
        project_id: id.into(),
        domain_id: Some("d1".into()),
    };
    assert_eq!(p("p1").key(), p("p2").key());
    let a = Owner::Account {
        domain_id: "d1".into(),
        account: "alice".into(),
    };
    assert_ne!(a.key(), p("p1").key());
}

#[test]
fn alertmanager_gets_the_caps_of_cloudstack_alerts_and_no_held_finding() {
    use crate::notify::alertmanager::{FiringCaps, firing};
    let mut s = State::default();
    let fakes: Vec<String> = (0..30).map(|i| format!("fake-{i:02}")).collect();
    let names: Vec<&str> = fakes.iter().map(String::as_str).collect();
    let mut r: Vec<Observed> = (0..3).map(|i| owned(i, "account:d/evil", &names)).collect();
    r.push(owned(9, "account:d/honest", &["h"]));
    step(&mut s, &r, &ON, at(0));
    let caps = FiringCaps {
        per_cluster: 5,
        per_tenant: 8,
    };
    let alerts = firing(&s, at(12), caps);
    let kinds = |cluster: &str| -> Vec<String> {
        alerts
            .iter()
            .filter(|a| a["labels"]["cluster_id"] == cluster)
            .map(|a| a["labels"]["key"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    // evil: 5 for its first cluster (4 and a summary), 3 for its second (2 and a summary),
    // none for its third; honest: its one.
    assert_eq!(kinds("c00").len(), 5);
    assert_eq!(kinds("c00")[4], "summary");
    assert_eq!(kinds("c01").len(), 3);
    assert_eq!(kinds("c02").len(), 0);
    assert_eq!(kinds("c09"), ["node_without_vm:h"]);
    assert_eq!(alerts.len(), 9);

    // A storm's findings are one storm alert.
    let mut s = State::default();
    let observed: Vec<Observed> = (0..6)
        .map(|i| owned(i, &format!("account:d/t{i}"), &["x"]))
        .collect();
    step(&mut s, &observed, &PERCENT, at(0));
    let alerts = firing(&s, at(12), caps);
    assert_eq!(alerts.len(), 1);
    assert_eq!(alerts[0]["labels"]["kind"], "storm");
}

/// Like `drain`, recording each raised alert and annotation as delivery would.
fn drain_recorded_all(state: &mut State) -> Vec<String> {
    let annotations: Vec<(crate::state::RecordKey, String)> = state
        .outbox
        .iter()
        .filter_map(|o| match &o.notification {
            Notification::AddAnnotation {
                cluster_id, key, ..
            } => Some((crate::state::RecordKey::new(cluster_id, key), key.clone())),
            _ => None,
        })
        .collect();
    let mut out: Vec<String> = annotations
        .iter()
        .map(|(rk, key)| {
            state.annotations.insert(rk.clone(), key.clone());
            format!("annotate {key}")
        })
        .collect();
    out.extend(drain_recorded(state));
    out
}

#[test]
fn a_storm_of_one_tenant_that_widens_to_many_is_alerted_anew() {
    let mut s = State::default();
    let mut observed: Vec<Observed> = (0..6).map(|i| owned(i, "account:d/evil", &["x"])).collect();
    observed.extend((10..16).map(|i| owned(i, &format!("account:d/t{i}"), &[])));
    let out = step(&mut s, &observed, &PERCENT, at(0));
    assert!(matches!(
        out.storm,
        Some(StormChange::Began { clusters: 6, .. })
    ));
    let first = s.storm.as_ref().unwrap().key.clone();
    drain(&mut s);
    // A cause common to six more tenants: the storm now holds them too, and says so.
    for c in &mut observed[6..] {
        c.mismatches = vec![m(UnmappedVm, &format!("v{}", c.cluster.id))];
    }
    let out = step(&mut s, &observed, &PERCENT, at(5));
    assert!(matches!(
        out.storm,
        Some(StormChange::Began { clusters: 6, .. })
    ));
    let second = s.storm.as_ref().unwrap().key.clone();
    assert_ne!(first, second);
    let sent: Vec<String> = drain(&mut s)
        .into_iter()
        .filter(|l| l.contains("storm:"))
        .collect();
    assert_eq!(
        sent,
        [
            format!("archive {first}"),
            format!("alert {second}"),
            format!("event Warn {second}")
        ]
    );
    assert_eq!(held_keys(&s).len(), 12);
    assert_eq!(s.storm.as_ref().unwrap().since, at(0));
    // The same tenants in the next step: nothing more.
    step(&mut s, &observed, &PERCENT, at(10));
    assert_eq!(drain(&mut s), Vec::<String>::new());
}

#[test]
fn findings_past_the_hourly_budget_are_alerted_once_it_has_room() {
    let settings = StepSettings {
        owner_alerts_per_hour: 2,
        annotations: false,
        ..ON
    };
    let mut s = State::default();
    let a = owned(0, "account:d/t", &["a1", "a2"]);
    step(&mut s, std::slice::from_ref(&a), &settings, at(0));
    assert_eq!(
        drain_recorded(&mut s),
        ["alert node_without_vm:a1", "alert node_without_vm:a2"]
    );
    // Another cluster of the tenant: no room left this hour; its finding waits.
    let observed = vec![a.clone(), owned(1, "account:d/t", &["b1"])];
    step(&mut s, &observed, &settings, at(5));
    assert_eq!(drain_recorded(&mut s), Vec::<String>::new());
    assert!(
        s.clusters["c01"].nodes[&crate::diff::FindingKey::parse("node_without_vm:b1").unwrap()]
            .deferred
    );
    step(&mut s, &observed, &settings, at(30));
    assert_eq!(drain_recorded(&mut s), Vec::<String>::new());
    // An hour after the first alerts: it is raised, once.
    step(&mut s, &observed, &settings, at(60));
    assert_eq!(drain_recorded(&mut s), ["alert node_without_vm:b1"]);
    assert!(
        !s.clusters["c01"].nodes[&crate::diff::FindingKey::parse("node_without_vm:b1").unwrap()]
            .deferred
    );
    step(&mut s, &observed, &settings, at(65));
    assert_eq!(drain_recorded(&mut s), Vec::<String>::new());
}
