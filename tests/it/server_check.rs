//! Beside CloudStack's own VM map check (apache/cloudstack PR 14666), as the fake answers a
//! release that carries it: the mismatches it alerts itself get one alert in CloudStack (its
//! own), cks-drift's alerts for them are taken back when the check is switched on and raised
//! again when it is switched off, and `validate-config --connect` says which it is.

use std::collections::BTreeMap;

use cks_drift_sim::{Release, VM_MAP_CHECK_EVENT};

use crate::releases::{one_cluster_on, validate_connect};
use crate::support::cloud::{TestCloud, without_plain_http_warning};

/// Runs the server's own check once, with every VM of the cluster that is not `not_a_node`
/// listed as a node by its name.
fn server_checks(cloud: &TestCloud, cluster: &str) {
    cloud.sim().with_world(|w| {
        let c = w.cluster(cluster).unwrap().clone();
        let names: Vec<String> = w
            .vms
            .iter()
            .filter(|v| v.name.starts_with(&c.name) && !v.removed)
            .map(|v| v.name.clone())
            .collect();
        w.now = w.now.plus(std::time::Duration::from_secs(3600));
        w.run_vm_map_check(&BTreeMap::from([(c.id.clone(), names)]));
    });
}

fn open_annotations(cloud: &TestCloud) -> usize {
    cloud
        .sim()
        .with_world(|w| w.annotations.iter().filter(|a| !a.removed).count())
}

#[tokio::test]
async fn with_the_servers_check_on_each_mismatch_it_reports_holds_its_alert_alone() {
    let (cloud, id) = one_cluster_on(Release::V4_22_1).await;
    cloud.sim().with_world(|w| w.vm_map_check = Some(true));
    let worker = cloud.unmap_last_worker(&id);
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(report["server_check"], "on");
    let found = &report["mismatches"][0];
    assert_eq!(found["key"], format!("unmapped_vm:{worker}"));
    assert_eq!(found["left_to_server"], true);
    assert_eq!(cloud.sim().call_count("generateAlert"), 0);
    assert_eq!(cloud.sim().call_count("addAnnotation"), 0);
    assert!(
        run.stderr.contains("CloudStack runs its own VM map check"),
        "{}",
        run.stderr
    );
    // The event log has it all the same.
    let log = std::fs::read_to_string(cloud.event_log()).unwrap();
    assert!(
        log.contains("CloudStack's own VM map check alerts it"),
        "{log}"
    );
    // The server reports it itself: one alert for the one mismatch.
    server_checks(&cloud, &id);
    let alerts = cloud.active_alerts();
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    assert_eq!(alerts[0].alert_type, 8);
    assert!(
        cloud
            .sim()
            .with_world(|w| w.events.iter().all(|e| e.event_type == VM_MAP_CHECK_EVENT))
    );
    // Later cycles send nothing more.
    let (run, _) = cloud.check_json(&[]).await;
    assert_eq!(run.code, 1);
    assert_eq!(cloud.sim().call_count("generateAlert"), 0);
}

#[tokio::test]
async fn switching_the_servers_check_on_hands_over_and_off_takes_back() {
    let (cloud, id) = one_cluster_on(Release::V4_22_1).await;
    cloud.sim().with_world(|w| w.vm_map_check = Some(false));
    cloud.unmap_last_worker(&id);
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(report["server_check"], "off");
    assert_eq!(cloud.active_alerts().len(), 1);
    assert_eq!(open_annotations(&cloud), 1);

    // Switched on: cks-drift's alert is archived and its annotation removed, said in the
    // event log; the server's check alerts it on its next run.
    cloud.sim().with_world(|w| w.vm_map_check = Some(true));
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(report["mismatches"][0]["left_to_server"], true);
    assert_eq!(cloud.active_alerts().len(), 0);
    assert_eq!(open_annotations(&cloud), 0);
    let log = std::fs::read_to_string(cloud.event_log()).unwrap();
    assert!(
        log.contains("alerts it from now on, so cks-drift's alert is archived"),
        "{log}"
    );
    server_checks(&cloud, &id);
    assert_eq!(cloud.active_alerts().len(), 1);

    // Switched off: cks-drift alerts it again, once.
    cloud.sim().with_world(|w| w.vm_map_check = Some(false));
    for _ in 0..2 {
        let (run, report) = cloud.check_json(&[]).await;
        assert_eq!(run.code, 1, "{run:?}");
        assert!(report["mismatches"][0].get("left_to_server").is_none());
    }
    assert_eq!(cloud.sim().call_count("generateAlert"), 2);
    assert_eq!(cloud.sim().call_count("addAnnotation"), 2);
    assert_eq!(open_annotations(&cloud), 1);
}

#[tokio::test]
async fn defer_to_server_check_false_keeps_cks_drifts_alerts_and_says_they_come_twice() {
    let (mut cloud, id) = one_cluster_on(Release::V4_22_1).await;
    cloud.sim().with_world(|w| w.vm_map_check = Some(true));
    cloud.extra = "[notify]\ndefer_to_server_check = false\n".into();
    cloud.unmap_last_worker(&id);
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(report["mismatches"][0].get("left_to_server").is_none());
    assert_eq!(cloud.active_alerts().len(), 1);
    let run = validate_connect(&cloud).await;
    let stdout = without_plain_http_warning(&run.stdout);
    assert!(
        stdout.contains("warning: cloudstack VM map check: CloudStack runs its own VM map check and notify.defer_to_server_check is false"),
        "{stdout}"
    );
}
