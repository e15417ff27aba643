//! Storms: new findings in more clusters at once than `notify.storm_clusters` are one storm
//! alert; the findings' own alerts and annotations wait until the storm ends, and then only
//! those still open are sent.

use crate::support::cloud::{TestCloud, mismatches, world_now};

/// `count` clusters of one control node and one worker, and the cloud. The last one's
/// control node answers over SSH; the others' nodes are not listed (their maps are compared
/// with their VMs only), which keeps the test light.
async fn fleet(count: usize) -> (TestCloud, Vec<String>) {
    let mut world = world_now();
    let owner = world.admin();
    let ids: Vec<String> = (0..count)
        .map(|i| world.add_cluster(&format!("web{i:02}"), owner.clone(), 1, 1, 0))
        .collect();
    let mut cloud = TestCloud::start(world).await;
    cloud.control_node(&ids[count - 1]).await;
    (cloud, ids)
}

fn generated(cloud: &TestCloud) -> usize {
    cloud.sim().call_count("generateAlert")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn findings_in_30_of_40_clusters_are_one_storm_alert_then_the_10_still_open_one_each() {
    let (mut cloud, ids) = fleet(40).await;
    // 25 % of 40 checked clusters: more than 10 clusters with new findings is a storm.
    cloud.extra = "[notify]\nstorm_clusters = \"25%\"\n".into();
    let workers: Vec<String> = ids[..30]
        .iter()
        .map(|id| cloud.unmap_last_worker(id))
        .collect();

    let (run, report) = cloud.check_json(&[]).await;
    let found = mismatches(&report);
    assert_eq!(found.len(), 30, "{}", run.stderr);
    assert!(
        found
            .iter()
            .all(|(k, _, new)| k == "unmapped_vm" && *new == Some(true))
    );
    let alerts = cloud.active_alerts();
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    let storm = &alerts[0].description;
    assert!(
        storm.starts_with(
            "Kubernetes cluster VM maps: 30 new findings in 30 of 40 checked clusters at once, more than notify.storm_clusters (10): unmapped_vm 30. Most common: a VM named as a node is not in the map (30)."
        ),
        "{storm}"
    );
    assert!(storm.contains("[cks-drift cloud/storm:"), "{storm}");
    assert_eq!(cloud.sim().call_count("addAnnotation"), 0);
    assert!(
        run.stderr
            .contains("storm: new findings in more clusters at once"),
        "{}",
        run.stderr
    );
    // Every finding is in the event log all the same, and the storm once.
    let events = cloud.event_lines();
    assert_eq!(
        events.iter().filter(|e| e["kind"] == "unmapped_vm").count(),
        30
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| e["kind"] == "storm" && e["level"] == "WARN")
            .count(),
        1
    );

    // Still 30 clusters hold findings not alerted: the storm goes on, nothing more is sent.
    let (run, _) = cloud.check_json(&[]).await;
    assert_eq!(generated(&cloud), 1, "{}", run.stderr);

    // 20 clusters get their map row back: 10 hold findings, no more than 10. The storm ends;
    // the 10 still open get one alert and one annotation each, the 20 resolved none.
    for (id, worker) in ids[..20].iter().zip(&workers) {
        cloud.sim().with_world(|w| w.add_map_row(id, worker));
    }
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(mismatches(&report).len(), 10, "{}", run.stderr);
    let alerts = cloud.active_alerts();
    assert_eq!(alerts.len(), 10, "{alerts:?}");
    for worker in &workers[20..] {
        let key = format!("unmapped_vm:{worker}");
        assert_eq!(
            alerts
                .iter()
                .filter(|a| a.description.contains(&key))
                .count(),
            1,
            "{key}"
        );
    }
    assert_eq!(generated(&cloud), 11);
    assert_eq!(cloud.sim().call_count("addAnnotation"), 10);
    assert!(run.stderr.contains("the storm is over"), "{}", run.stderr);
    let ended = cloud
        .event_lines()
        .into_iter()
        .find(|e| e["kind"] == "storm" && e["level"] == "INFO")
        .expect("the storm's end is in the event log");
    assert!(
        ended["description"]
            .as_str()
            .unwrap()
            .contains("of 30 findings held, 10 still open in 10 clusters were told one by one"),
        "{ended}"
    );

    // Told once: nothing more is sent.
    cloud.check_json(&[]).await;
    assert_eq!(generated(&cloud), 11);
    assert_eq!(cloud.sim().call_count("addAnnotation"), 10);
}
