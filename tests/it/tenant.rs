//! What a tenant can do to cks-drift from inside its own clusters, tried as a tenant would:
//! text it writes where cks-drift reads (annotations on its cluster).

use cks_drift_sim::{SimAnnotation, SimTime};

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
