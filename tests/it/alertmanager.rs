//! Findings as alerts in a real Alertmanager: labels, kept active across cycles, resolved
//! with the finding; a silence for one cluster; an Alertmanager down for a cycle loses
//! nothing; a hostile one that answers without end holds no cycle.

use crate::support::alertmanager::{Alertmanager, endless_error_body};
use crate::support::cloud::{TestCloud, mismatches, one_cluster, world_now};

/// Two clusters `web` and `db`, each with a worker whose map row is lost, and the cloud
/// pointed at the Alertmanager at `am_url`.
async fn two_drifting(am_url: &str) -> (TestCloud, Vec<String>, Vec<String>) {
    let mut world = world_now();
    let owner = world.admin();
    let ids = vec![
        world.add_cluster("web", owner.clone(), 1, 2, 0),
        world.add_cluster("db", owner, 1, 2, 0),
    ];
    let mut cloud = TestCloud::start(world).await;
    for id in &ids {
        cloud.control_node(id).await;
    }
    let workers = ids.iter().map(|id| cloud.unmap_last_worker(id)).collect();
    cloud.extra = format!(
        "[alertmanager]\nurls = [\"{am_url}\"]\nrunbook_url = \"https://wiki.example.com/cks-drift\"\n"
    );
    (cloud, ids, workers)
}

/// The active alerts' labels, by `key`.
async fn active(am: &Alertmanager) -> Vec<serde_json::Value> {
    am.alerts()
        .await
        .into_iter()
        .filter(|a| a["status"]["state"] == "active")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn findings_are_alerts_with_labels_kept_active_and_resolved() {
    let am = Alertmanager::start().await;
    let (cloud, ids, workers) = two_drifting(&am.url()).await;
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(mismatches(&report).len(), 2, "{}", run.stderr);
    let alerts = am.alerts().await;
    assert_eq!(alerts.len(), 2, "{alerts:?}");
    let web = alerts
        .iter()
        .find(|a| a["labels"]["cluster"] == "web")
        .unwrap();
    let vm_name = cloud
        .sim()
        .with_world(|w| w.vm(&workers[0]).unwrap().name.clone());
    let zone = cloud
        .sim()
        .with_world(|w| w.cluster(&ids[0]).unwrap().zone_id.clone());
    assert_eq!(
        web["labels"],
        serde_json::json!({
            "alertname": "KubernetesClusterVmMapDrift",
            "cluster": "web",
            "cluster_id": ids[0],
            "key": format!("unmapped_vm:{}", workers[0]),
            "kind": "unmapped_vm",
            "owner": "admin",
            "vm": vm_name,
            "vm_id": workers[0],
            "zone": zone,
        })
    );
    assert_eq!(web["status"]["state"], "active");
    assert_eq!(
        web["annotations"]["runbook_url"],
        "https://wiki.example.com/cks-drift"
    );
    assert_eq!(
        web["annotations"]["reason"],
        "a VM named as a node is not in the map"
    );
    assert!(
        web["annotations"]["summary"]
            .as_str()
            .unwrap()
            .starts_with("unmapped_vm in Kubernetes cluster web: VM "),
        "{web}"
    );
    let ends = web["endsAt"].as_str().unwrap().to_string();

    // The next cycle sends them again: still active, the same alerts, a later endsAt.
    cloud.check_json(&[]).await;
    let again = active(&am).await;
    assert_eq!(again.len(), 2);
    let web_again = again
        .iter()
        .find(|a| a["labels"]["cluster"] == "web")
        .unwrap();
    assert_eq!(web_again["fingerprint"], web["fingerprint"]);
    assert!(web_again["endsAt"].as_str().unwrap() >= ends.as_str());

    // web's row comes back: its alert is resolved, db's stays.
    cloud
        .sim()
        .with_world(|w| w.add_map_row(&ids[0], &workers[0]));
    let (run, _) = cloud.check_json(&[]).await;
    let left = active(&am).await;
    assert_eq!(left.len(), 1, "{}\n{left:?}", run.stderr);
    assert_eq!(left[0]["labels"]["cluster"], "db");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silence_for_one_cluster_silences_exactly_that_cluster() {
    let am = Alertmanager::start().await;
    let (cloud, _, _) = two_drifting(&am.url()).await;
    am.silence("cluster", "db").await;
    cloud.check_json(&[]).await;
    let alerts = am.alerts().await;
    let state = |cluster: &str| {
        alerts
            .iter()
            .find(|a| a["labels"]["cluster"] == cluster)
            .map(|a| a["status"]["state"].as_str().unwrap().to_string())
    };
    assert_eq!(state("web").as_deref(), Some("active"));
    assert_eq!(state("db").as_deref(), Some("suppressed"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alertmanager_down_for_a_cycle_loses_nothing() {
    let mut am = Alertmanager::start().await;
    let (cloud, ids, workers) = two_drifting(&am.url()).await;
    am.stop();
    // Down: the findings are found, alerted in CloudStack, and Alertmanager's share waits.
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(mismatches(&report).len(), 2);
    assert!(
        run.stderr.contains(
            "the open findings were not sent to Alertmanager; they are sent again next cycle"
        ),
        "{}",
        run.stderr
    );
    assert_eq!(cloud.active_alerts().len(), 2);
    // web resolves while it is still down: the resolution stays queued.
    cloud
        .sim()
        .with_world(|w| w.add_map_row(&ids[0], &workers[0]));
    cloud.check_json(&[]).await;
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(cloud.state_path()).unwrap()).unwrap();
    let queued: Vec<&serde_json::Value> = state["outbox"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["action"] == "resolve_alertmanager")
        .collect();
    assert_eq!(queued.len(), 1, "{state}");
    assert_eq!(queued[0]["labels"]["cluster"], "web");

    // Back: db's alert is active again, web's resolution is delivered and leaves the outbox.
    am.restart().await;
    cloud.check_json(&[]).await;
    let alerts = am.alerts().await;
    let active: Vec<&serde_json::Value> = alerts
        .iter()
        .filter(|a| a["status"]["state"] == "active")
        .collect();
    assert_eq!(active.len(), 1, "{alerts:?}");
    assert_eq!(active[0]["labels"]["cluster"], "db");
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(cloud.state_path()).unwrap()).unwrap();
    assert_eq!(state["outbox"], serde_json::json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alertmanager_streaming_an_endless_error_body_holds_no_cycle() {
    let hostile = endless_error_body().await;
    let (mut cloud, _, _) = two_drifting(&hostile).await;
    cloud.extra.push_str("timeout = \"10s\"\n");
    // Two cycles: each reads a prefix of the answer, says so, and goes on.
    for cycle in 0..2 {
        let started = std::time::Instant::now();
        let (run, report) = cloud.check_json(&[]).await;
        let took = started.elapsed();
        assert_eq!(mismatches(&report).len(), 2, "{}", run.stderr);
        assert!(
            run.stderr.contains(&format!(
                "Alertmanager at {hostile}/api/v2/alerts answered HTTP 500: {{\"error\":\"overloaded\"}}xxxx"
            )),
            "{}",
            run.stderr
        );
        assert!(
            run.stderr.contains("they are sent again next cycle"),
            "{}",
            run.stderr
        );
        // The answer is not read to the deadline (alertmanager.timeout).
        assert!(
            took < std::time::Duration::from_secs(10),
            "cycle {cycle} took {took:?}"
        );
    }
    // CloudStack's alerts went out all the same.
    assert_eq!(cloud.active_alerts().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn risky_alertmanager_settings_are_warned_about_at_start() {
    use std::os::unix::fs::PermissionsExt;
    let (mut cloud, _) = one_cluster().await;
    let password = cloud.dir.path().join("am_password");
    std::fs::write(&password, "pw\n").unwrap();
    std::fs::set_permissions(&password, std::fs::Permissions::from_mode(0o600)).unwrap();
    // TEST-NET-1: nothing answers there, and the deadline is short.
    cloud.extra = format!(
        "[alertmanager]\nurls = [\"http://192.0.2.1:9093\"]\nusername = \"cks\"\npassword_file = \"{}\"\ninsecure = true\ntimeout = \"200ms\"\n",
        password.display()
    );
    let run = cloud.check(&[]).await;
    for warning in [
        "alertmanager.urls holds http://192.0.2.1:9093, a plain http:// URL, while alertmanager.username and password_file (or bearer_token_file) are set",
        "alertmanager.insecure is true: the Alertmanagers' certificates are not verified",
    ] {
        assert!(run.stderr.contains(warning), "{warning}\n{}", run.stderr);
    }
}
