//! Identity before names, with the real kubectl against the fake Kubernetes API: a node is
//! the VM its system UUID is, whatever its name; a node named like one VM while its UUID is
//! another's is one `identity_conflict`, alerted once; where no UUID is a VM of the cluster,
//! nodes are matched by name exactly as with names alone.

use crate::support::cloud::{TestCloud, mismatches, one_cluster, world_now};
use crate::support::kube_api::FakeNode;

/// `(kind, key, reason)` of each mismatch in a JSON report.
fn findings(report: &serde_json::Value) -> Vec<(String, String, String)> {
    report["mismatches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["kind"].as_str().unwrap().to_string(),
                m["key"].as_str().unwrap().to_string(),
                m["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Cluster `web` (a control node, two workers) on VMware, whose system UUIDs are not the VMs'
/// ids, with its control node answering.
async fn vmware_cluster() -> (TestCloud, String) {
    let mut world = world_now();
    world.hypervisor = "VMware".into();
    let owner = world.admin();
    let id = world.add_cluster("web", owner, 1, 2, 0);
    let mut cloud = TestCloud::start(world).await;
    cloud.control_node(&id).await;
    (cloud, id)
}

/// The keys of the mismatches in a JSON report, in its order.
fn keys(report: &serde_json::Value) -> Vec<String> {
    findings(report)
        .into_iter()
        .map(|(_, key, _)| key)
        .collect()
}

/// `(id, name)` of the cluster's mapped VMs, in map order.
fn vms(cloud: &TestCloud, cluster_id: &str) -> Vec<(String, String)> {
    let ids = cloud.map(cluster_id);
    cloud.sim().with_world(|w| {
        ids.iter()
            .map(|id| (id.clone(), w.vm(id).unwrap().name.to_lowercase()))
            .collect()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_renamed_by_its_tenant_matches_its_vm_by_uuid() {
    let (mut cloud, id) = one_cluster().await;
    let vms = vms(&cloud, &id);
    let mut nodes = cloud.node_objects(&id);
    assert_eq!(nodes[1].system_uuid.as_deref(), Some(vms[1].0.as_str()));
    nodes[1].name = "gpu-worker-a".into();
    cloud.node(&id).kube.set_node_objects(nodes);

    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(findings(&report), vec![]);

    // The command of earlier releases lists names only: the same cluster drifts by name.
    cloud.list_names_only(&id);
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(
        mismatches(&report),
        vec![
            (
                "node_without_vm".to_string(),
                "node_without_vm:gpu-worker-a".to_string(),
                Some(true)
            ),
            (
                "vm_not_a_node".to_string(),
                format!("vm_not_a_node:{}", vms[1].0),
                Some(true)
            ),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflicting_node_is_one_finding_alerted_once_until_it_resolves() {
    let (cloud, id) = one_cluster().await;
    let vms = vms(&cloud, &id);
    let (w1, w2) = (&vms[1], &vms[2]);
    // The second worker is stopped (its node is gone); the first worker's node took its name.
    cloud.sim().with_world(|w| w.set_vm_state(&w2.0, "Stopped"));
    let mut nodes = cloud.node_objects(&id);
    nodes.retain(|n| n.name != w2.1);
    nodes[1].name = w2.1.clone();
    cloud.node(&id).kube.set_node_objects(nodes.clone());

    let key = format!("identity_conflict:{}", w2.1);
    let reason = format!(
        "Kubernetes node {} of cluster web is named like VM {} ({}) but is VM {} ({}) by its system UUID or provider ID",
        w2.1, w2.1, w2.0, w1.1, w1.0
    );
    for cycle in 0..3 {
        let (run, report) = cloud.check_json(&[]).await;
        assert_eq!(run.code, 1, "cycle {cycle}: {run:?}");
        assert_eq!(
            findings(&report),
            vec![("identity_conflict".to_string(), key.clone(), reason.clone())],
            "cycle {cycle}"
        );
        let m = &report["mismatches"][0];
        assert_eq!(m["new"], cycle == 0, "cycle {cycle}");
        assert_eq!(m["node"], w2.1.as_str());
        assert_eq!(
            (&m["vm_id"], &m["vm_name"]),
            (&w1.0.clone().into(), &w1.1.clone().into())
        );
        assert_eq!(
            (&m["named_vm_id"], &m["named_vm_name"]),
            (&w2.0.clone().into(), &w2.1.clone().into())
        );
        assert_eq!(cloud.sim().call_count("generateAlert"), 1, "cycle {cycle}");
    }
    let alerts = cloud.active_alerts();
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    assert!(
        alerts[0].description.starts_with(&format!(
            "Kubernetes cluster web, node {}: {reason}. Nothing was changed.",
            w2.1
        )) && alerts[0]
            .description
            .ends_with(&format!("[cks-drift {id}/{key}]")),
        "{}",
        alerts[0].description
    );
    let events: Vec<serde_json::Value> = cloud
        .event_lines()
        .into_iter()
        .filter(|e| e["key"] == key.as_str())
        .collect();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["node"], w2.1.as_str());
    // The state file keeps both VMs of the finding.
    let state = std::fs::read_to_string(cloud.state_path()).unwrap();
    assert!(
        state.contains(&format!("\"named_vm_id\":\"{}\"", w2.0)),
        "{state}"
    );

    // The tenant gives the node its own name back: the finding resolves, its alert is archived.
    nodes[1].name = w1.1.clone();
    cloud.node(&id).kube.set_node_objects(nodes);
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(findings(&report), vec![]);
    assert_eq!(cloud.active_alerts(), vec![]);
    assert_eq!(cloud.sim().call_count("generateAlert"), 1);
}

/// Hypervisors whose system UUID is not the CloudStack UUID: the report is the one the same
/// nodes give by name alone, findings, reasons and exit code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_world_whose_uuids_match_no_vm_is_compared_by_names_as_before() {
    let mut world = world_now();
    world.hypervisor = "VMware".into();
    let owner = world.admin();
    let id = world.add_cluster("web", owner, 1, 2, 0);
    let mut cloud = TestCloud::start(world).await;
    cloud.control_node(&id).await;
    let vms = vms(&cloud, &id);
    let mut nodes = cloud.node_objects(&id);
    for (node, (vm_id, _)) in nodes.iter().zip(&vms) {
        let uuid = node.system_uuid.as_deref().unwrap().to_lowercase();
        assert_ne!(&uuid, vm_id);
    }
    // The first worker's node renamed, the second's gone, and a machine CloudStack does not
    // know.
    nodes[1].name = "gpu-worker-a".into();
    nodes.truncate(2);
    nodes.push(FakeNode::with_uuid(
        "manual-node",
        "4230B1D7-0000-0000-0000-000000000000",
    ));
    cloud.node(&id).kube.set_node_objects(nodes);

    let (run, by_uuid) = cloud.check_json(&["--no-notify"]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(
        keys(&by_uuid),
        [
            "node_without_vm:gpu-worker-a".to_string(),
            "node_without_vm:manual-node".to_string(),
            format!("vm_not_a_node:{}", vms[1].0),
            format!("vm_not_a_node:{}", vms[2].0),
        ]
    );

    cloud.list_names_only(&id);
    let (run, by_name) = cloud.check_json(&["--no-notify"]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(findings(&by_name), findings(&by_uuid));
}

/// The cloud provider's releases v1.1.0 and v1.1.1 set the bare provider ID
/// `external-cloudstack` (no VM id). On a hypervisor whose system UUIDs are not the VMs', the
/// listing is compared by names and a planted node is found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bare_provider_ids_on_vmware_are_compared_by_names_and_a_planted_node_is_found() {
    let (cloud, id) = vmware_cluster().await;
    let mut nodes = cloud.node_objects(&id);
    for node in &mut nodes {
        node.provider_id = Some("external-cloudstack".into());
    }
    let mut planted = FakeNode::with_uuid("planted-node", "4230B1D7-0000-0000-0000-00000000beef");
    planted.provider_id = Some("external-cloudstack".into());
    nodes.push(planted);
    cloud.node(&id).kube.set_node_objects(nodes);

    let (run, report) = cloud.check_json(&["--no-notify"]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(report["clusters"][0]["status"], "checked", "{report}");
    assert_eq!(keys(&report), ["node_without_vm:planted-node".to_string()]);
}

/// After an upgrade of the cloud provider, the control node is identified by its provider ID
/// (`external-cloudstack://<vm uuid>`, v1.2.0 on) while the workers still carry the bare
/// string and VMware system UUIDs: each node is judged by what works in its cluster, and the
/// workers, named like their VMs, are their VMs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_of_both_provider_id_forms_has_no_false_finding() {
    let (cloud, id) = vmware_cluster().await;
    let vms = vms(&cloud, &id);
    let mut nodes = cloud.node_objects(&id);
    nodes[0].provider_id = Some(format!("external-cloudstack://{}", vms[0].0));
    for node in &mut nodes[1..] {
        node.provider_id = Some("external-cloudstack".into());
    }
    cloud.node(&id).kube.set_node_objects(nodes.clone());

    let (run, report) = cloud.check_json(&["--no-notify"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(findings(&report), vec![]);

    // A node named like no VM, with a VMware UUID and the bare string, is still no VM.
    let mut planted = FakeNode::with_uuid("planted-node", "4230B1D7-0000-0000-0000-00000000beef");
    planted.provider_id = Some("external-cloudstack".into());
    nodes.push(planted);
    cloud.node(&id).kube.set_node_objects(nodes);
    let (run, report) = cloud.check_json(&["--no-notify"]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(keys(&report), ["node_without_vm:planted-node".to_string()]);
}
