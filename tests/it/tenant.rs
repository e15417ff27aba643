//! What a tenant can do to cks-drift from inside its own clusters, tried as a tenant would:
//! text it writes where cks-drift reads (annotations on its cluster, alerts that quote it).

use cks_drift_sim::{SimAlert, SimAnnotation, SimTime};

use crate::releases::one_cluster_on;
use crate::support::cloud::{TestCloud, mismatches, s};

/// An annotation the tenant's own user wrote on its cluster (tenants may annotate what they
/// own, never admin-only).
fn tenant_note(cloud: &TestCloud, cluster: &str, text: &str) {
    cloud.sim().with_world(|w| {
        let id = w.fresh_id();
        let created: SimTime = w.now;
        w.annotations.push(SimAnnotation {
            id,
            user_id: "alice-user".into(),
            username: "alice".into(),
            entity_type: "KUBERNETES_CLUSTER".into(),
            entity_id: cluster.to_string(),
            annotation: text.to_string(),
            admins_only: false,
            created,
            removed: false,
        })
    });
}

#[tokio::test]
async fn a_forged_marker_in_a_tenants_annotation_hides_nothing() {
    let (cloud, id) = one_cluster_on(cks_drift_sim::Release::NEWEST).await;
    let worker = cloud.unmap_last_worker(&id);
    let key = format!("unmapped_vm:{worker}");
    // The tenant writes the marker cks-drift puts on its own annotation, hoping the finding
    // counts as reported: on a fresh instance (no state: everything is read back), and in
    // every later cycle (where cks-drift looks for its annotation before adding it).
    tenant_note(&cloud, &id, &format!("notes [cks-drift {key}]"));
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(
        mismatches(&report),
        vec![(s("unmapped_vm"), key, Some(true))]
    );
    assert_eq!(cloud.active_alerts().len(), 1);
    assert_eq!(cloud.sim().call_count("addAnnotation"), 1);
    let ours: Vec<(bool, String)> = cloud.sim().with_world(|w| {
        w.annotations
            .iter()
            .filter(|a| !a.removed)
            .map(|a| (a.admins_only, a.username.clone()))
            .collect()
    });
    assert_eq!(ours, [(false, s("alice")), (true, s("admin"))]);
    // Resolved: cks-drift removes its own annotation, never the tenant's.
    cloud.sim().with_world(|w| w.add_map_row(&id, &worker));
    let (run, _) = cloud.check_json(&[]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let left: Vec<String> = cloud.sim().with_world(|w| {
        w.annotations
            .iter()
            .filter(|a| !a.removed)
            .map(|a| a.username.clone())
            .collect()
    });
    assert_eq!(left, [s("alice")]);
}

/// A built-in alert whose description ends in text the tenant chose: CloudStack's own alerts
/// quote a VM's or a cluster's name (`ALERT.USERVM`, type 8, names the VM it could not
/// restart), and the tenant names its VM like cks-drift's marker.
fn quoting_alert(cloud: &TestCloud, text: &str) -> String {
    cloud.sim().with_world(|w| {
        let id = w.fresh_id();
        let sent: SimTime = w.now;
        w.alerts.push(SimAlert {
            id: id.clone(),
            alert_type: 8,
            name: "ALERT.USERVM".into(),
            description: text.to_string(),
            zone_id: None,
            pod_id: None,
            sent,
            archived: false,
        });
        id
    })
}

#[tokio::test]
async fn an_alert_of_another_name_ending_in_a_marker_is_never_taken_for_ours() {
    let (cloud, id) = one_cluster_on(cks_drift_sim::Release::NEWEST).await;
    let worker = cloud.unmap_last_worker(&id);
    let key = format!("unmapped_vm:{worker}");
    let marker = format!("[cks-drift {id}/{key}]");
    let foreign = quoting_alert(&cloud, &format!("Unable to restart VM {marker}"));
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(
        mismatches(&report),
        vec![(s("unmapped_vm"), key.clone(), Some(true))]
    );
    // cks-drift raised its own alert beside the foreign one, which it left as it was.
    assert_eq!(cloud.sim().call_count("generateAlert"), 1);
    let alerts: Vec<(String, bool)> = cloud
        .active_alerts()
        .iter()
        .map(|a| (a.name.clone(), a.description.ends_with(&marker)))
        .collect();
    assert_eq!(
        alerts,
        [
            (s("KUBERNETES.CLUSTER.VM.MAP.CHECK"), true),
            (s("ALERT.USERVM"), true)
        ]
    );
    // Resolved: cks-drift archives its own alert, never the foreign one.
    cloud.sim().with_world(|w| w.add_map_row(&id, &worker));
    let (run, _) = cloud.check_json(&[]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let left: Vec<String> = cloud.active_alerts().iter().map(|a| a.id.clone()).collect();
    assert_eq!(left, [foreign]);
}
