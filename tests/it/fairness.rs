//! What one tenant does changes what is told about that tenant alone: a storm of one tenant's
//! clusters holds back no one else's alerts, a finding that flaps is told once, and the caps
//! count the projects of a domain together, in CloudStack and in Alertmanager alike.

use cks_drift_sim::SimOwner;

use crate::support::alertmanager::Alertmanager;
use crate::support::cloud::{TestCloud, mismatches, world_now};

fn generated(cloud: &TestCloud) -> usize {
    cloud.sim().call_count("generateAlert")
}

/// Clusters of one control node and one worker: `evil` clusters of one account, and one of
/// another account (`honest`), whose control node answers over SSH.
async fn tenants(evil: usize) -> (TestCloud, Vec<String>, String) {
    let mut world = world_now();
    let d = world.root_domain_id().to_string();
    let evil_owner = world.add_account("evil", &d);
    let honest_owner = world.add_account("honest", &d);
    let ids: Vec<String> = (0..evil)
        .map(|i| world.add_cluster(&format!("evil{i:02}"), evil_owner.clone(), 1, 1, 0))
        .collect();
    let honest = world.add_cluster("honest", honest_owner, 1, 2, 0);
    let mut cloud = TestCloud::start(world).await;
    cloud.control_node(&honest).await;
    (cloud, ids, honest)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_of_one_tenants_clusters_holds_back_no_other_tenants_alert() {
    let (cloud, evil, honest) = tenants(6).await;
    // evil: an unmapped VM in each of its 6 clusters, left in place (more than max(5, 20 %)).
    for id in &evil {
        cloud.unmap_last_worker(id);
    }
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(mismatches(&report).len(), 6, "{}", run.stderr);
    assert_eq!(generated(&cloud), 1, "evil's own storm alert");
    assert_eq!(cloud.sim().call_count("addAnnotation"), 0);

    // honest's worker is destroyed: its alert and annotation come at the next cycle, while
    // evil's storm holds evil's findings.
    let worker = cloud.map(&honest).last().unwrap().clone();
    cloud
        .sim()
        .with_world(|w| w.set_vm_state(&worker, "Destroyed"));
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(mismatches(&report).len(), 7, "{}", run.stderr);
    let alerts = cloud.active_alerts();
    let honest_alerts: Vec<_> = alerts
        .iter()
        .filter(|a| a.description.contains(&worker))
        .collect();
    assert_eq!(honest_alerts.len(), 1, "{alerts:?}");
    assert_eq!(alerts.len(), 2, "the storm's and honest's: {alerts:?}");
    let annotated: Vec<String> = cloud.sim().with_world(|w| {
        w.annotations
            .iter()
            .filter(|a| !a.removed)
            .map(|a| a.entity_id.clone())
            .collect()
    });
    assert_eq!(annotated, std::slice::from_ref(&honest));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_of_many_tenants_still_holds() {
    let mut world = world_now();
    let d = world.root_domain_id().to_string();
    let ids: Vec<String> = (0..6)
        .map(|i| {
            let owner = world.add_account(&format!("t{i}"), &d);
            world.add_cluster(&format!("web{i}"), owner, 1, 1, 0)
        })
        .collect();
    let mut cloud = TestCloud::start(world).await;
    cloud.control_node(&ids[5]).await;
    for id in &ids {
        cloud.unmap_last_worker(id);
    }
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(mismatches(&report).len(), 6, "{}", run.stderr);
    let alerts = cloud.active_alerts();
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    assert!(
        alerts[0]
            .description
            .starts_with("Kubernetes cluster VM maps: 6 new findings in 6 of 6 checked clusters"),
        "{}",
        alerts[0].description
    );
    assert_eq!(cloud.sim().call_count("addAnnotation"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finding_that_flaps_is_alerted_and_annotated_once_then_resolved_after_resolve_after() {
    let mut world = world_now();
    let owner = world.admin();
    let honest = world.add_cluster("web", owner, 1, 2, 0);
    let mut cloud = TestCloud::start(world).await;
    cloud.control_node(&honest).await;
    // Longer than the six check runs below, which follow each other within a second or so;
    // the flapping's absences are each one run long.
    cloud.resolve_after = "20s".into();
    let worker = cloud.map(&honest).last().unwrap().clone();
    let started = std::time::Instant::now();
    for cycle in 0..6 {
        if cycle % 2 == 0 {
            cloud
                .sim()
                .with_world(|w| assert!(w.remove_map_row(&honest, &worker)));
        } else {
            cloud.sim().with_world(|w| w.add_map_row(&honest, &worker));
        }
        let (run, report) = cloud.check_json(&[]).await;
        assert_eq!(
            mismatches(&report).len(),
            1,
            "cycle {cycle}: {}",
            run.stderr
        );
    }
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "six cycles took {:?}: the flapping was not within resolve_after",
        started.elapsed()
    );
    assert_eq!(generated(&cloud), 1);
    assert_eq!(cloud.sim().call_count("addAnnotation"), 1);
    assert_eq!(cloud.sim().call_count("archiveAlerts"), 0);
    assert_eq!(cloud.sim().call_count("removeAnnotation"), 0);
    let warns = |cloud: &TestCloud| {
        cloud
            .event_lines()
            .iter()
            .filter(|e| e["kind"] == "unmapped_vm")
            .count()
    };
    assert_eq!(warns(&cloud), 1);

    // The row stays back: once absent for 20 s the finding resolves, once.
    tokio::time::sleep(std::time::Duration::from_secs(21)).await;
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(mismatches(&report).len(), 0, "{}", run.stderr);
    assert_eq!(cloud.sim().call_count("archiveAlerts"), 1);
    assert_eq!(cloud.sim().call_count("removeAnnotation"), 1);
    assert!(cloud.active_alerts().is_empty());
    let again = cloud
        .event_lines()
        .iter()
        .filter(|e| e["level"] == "INFO")
        .count();
    assert_eq!(again, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_projects_of_one_domain_share_one_cap_and_an_account_keeps_its_own() {
    let mut world = world_now();
    let d = world.root_domain_id().to_string();
    let projects: Vec<SimOwner> = (0..3)
        .map(|i| world.add_project(&format!("proj{i}")))
        .collect();
    let ids: Vec<String> = projects
        .iter()
        .enumerate()
        .map(|(i, p)| world.add_cluster(&format!("p{i}"), p.clone(), 1, 1, 0))
        .collect();
    let account = world.add_account("alice", &d);
    let alice = world.add_cluster("alice", account, 1, 1, 0);
    let mut cloud = TestCloud::start(world).await;
    cloud.control_node(&alice).await;
    cloud.extra = "[notify]\nowner_alert_cap = 2\nstorm_clusters = \"off\"\n".into();
    for id in ids.iter().chain([&alice]) {
        cloud.unmap_last_worker(id);
    }
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(mismatches(&report).len(), 4, "{}", run.stderr);
    let alerts = cloud.active_alerts();
    let of = |id: &str| {
        alerts
            .iter()
            .filter(|a| a.description.contains(&format!("[cks-drift {id}/")))
            .count()
    };
    // Three projects of ROOT are one tenant: 2 alerts between them; alice has her own.
    assert_eq!(ids.iter().map(|id| of(id)).sum::<usize>(), 2, "{alerts:?}");
    assert_eq!(of(&alice), 1, "{alerts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alertmanager_gets_a_clusters_fake_nodes_under_the_alert_cap() {
    let am = Alertmanager::start().await;
    let (mut cloud, _, honest) = tenants(0).await;
    cloud.extra = format!("[alertmanager]\nurls = [\"{}\"]\n", am.url());
    // 20 fake node names beside the real ones: 20 findings, 5 alerts (4 and a summary).
    let mut nodes: Vec<String> = cloud.node_names(&honest);
    nodes.extend((0..20).map(|i| format!("fake-{i:02}")));
    let names: Vec<&str> = nodes.iter().map(String::as_str).collect();
    cloud.node(&honest).kube.set_nodes(&names);
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(mismatches(&report).len(), 20, "{}", run.stderr);
    let alerts = am.alerts().await;
    assert_eq!(alerts.len(), 5, "{alerts:?}");
    let summary: Vec<_> = alerts
        .iter()
        .filter(|a| a["labels"]["kind"] == "summary")
        .collect();
    assert_eq!(summary.len(), 1, "{alerts:?}");
    assert_eq!(
        summary[0]["annotations"]["summary"],
        "16 more VM map findings in Kubernetes cluster honest: node_without_vm 16"
    );
}
