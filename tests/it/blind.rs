//! Clusters whose nodes cannot be listed for `check.blind_after`: one `blind` finding naming
//! why, alerted once, resolved when the nodes are listed again; a changed host key says so.

use std::time::Duration;

use crate::support::cloud::{TestCloud, mismatches, one_cluster};
use crate::support::sshd::Sshd;

/// `(kind, key, new)` of the blind finding, if the report has one.
fn blind(report: &serde_json::Value) -> Option<(String, String, Option<bool>)> {
    mismatches(report)
        .into_iter()
        .find(|(k, _, _)| k == "blind")
}

/// Two checks `blind_after` apart: what makes a cluster blind.
async fn two_checks(cloud: &TestCloud) -> serde_json::Value {
    let (run, _) = cloud.check_json(&[]).await;
    // Mismatches (1) or a cluster only partly checked (3); never a failed run (2).
    assert!(matches!(run.code, 1 | 3), "{}", run.stderr);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (_, report) = cloud.check_json(&[]).await;
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_unlisted_for_blind_after_are_one_alert_that_resolves_and_node_findings_stay() {
    let (mut cloud, id) = one_cluster().await;
    cloud.check_extra = "blind_after = \"1s\"".into();
    // A node-side finding open before the blindness.
    let mut nodes = cloud.node_names(&id);
    nodes.push("stray".into());
    let refs: Vec<&str> = nodes.iter().map(String::as_str).collect();
    cloud.node(&id).kube.set_nodes(&refs);
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(mismatches(&report).len(), 1, "{}", run.stderr);
    assert_eq!(cloud.sim().call_count("generateAlert"), 1);

    // SSH refuses the key from now on.
    let keys = cloud
        .node(&id)
        .sshd
        .as_ref()
        .unwrap()
        .dir()
        .join("authorized_keys");
    let aside = keys.with_extension("aside");
    std::fs::rename(&keys, &aside).unwrap();
    let report = two_checks(&cloud).await;
    assert_eq!(
        blind(&report),
        Some(("blind".into(), "blind:nodes".into(), Some(true))),
        "{report}"
    );
    let alerts = cloud.active_alerts();
    assert_eq!(alerts.len(), 2, "{alerts:?}");
    let text = &alerts
        .iter()
        .find(|a| a.description.contains("blind:nodes"))
        .unwrap()
        .description;
    assert!(
        text.contains("have not been listed since")
            && text.contains("SSH authentication was refused"),
        "{text}"
    );
    // The node-side finding is kept, neither resolved nor alerted again; nothing more is sent.
    let (_, report) = cloud.check_json(&[]).await;
    let found = mismatches(&report);
    assert!(
        found.contains(&(
            "node_without_vm".into(),
            "node_without_vm:stray".into(),
            Some(false)
        )),
        "{found:?}"
    );
    assert_eq!(blind(&report).unwrap().2, Some(false));
    assert_eq!(cloud.sim().call_count("generateAlert"), 2);
    assert_eq!(cloud.sim().call_count("archiveAlerts"), 0);

    // SSH answers again: the blind finding resolves and its alert is archived.
    std::fs::rename(&aside, &keys).unwrap();
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(blind(&report), None, "{}", run.stderr);
    let alerts = cloud.active_alerts();
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    assert!(alerts[0].description.contains("stray"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_host_key_is_named_with_what_to_verify() {
    let (mut cloud, id) = one_cluster().await;
    cloud.check_extra = "blind_after = \"1s\"".into();
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(mismatches(&report), vec![], "{}", run.stderr);
    // The control node comes back with new host keys (a rebuilt node, or one posing as it).
    let node = cloud.node_mut(&id);
    let ip = node.ip;
    node.sshd.take().unwrap().stop();
    let sshd = Sshd::start_at(ip, 2222);
    sshd.authorize(&cloud.dir.path().join("client_key"));
    cloud.node_mut(&id).sshd = Some(sshd);
    let report = two_checks(&cloud).await;
    assert_eq!(blind(&report).map(|b| b.2), Some(Some(true)), "{report}");
    let alerts = cloud.active_alerts();
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    assert!(
        alerts[0]
            .description
            .contains("the SSH host key of the control node changed")
            && alerts[0].description.contains("ssh.known_hosts"),
        "{}",
        alerts[0].description
    );
}
