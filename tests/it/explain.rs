//! `cks-drift explain`: one cluster's three views and the rule behind each finding, against
//! the fake CloudStack, a real sshd and the real kubectl; upstream's scenarios.

use cks_drift_sim::NodeRole;

use crate::support::cloud::{Run, TestCloud, binary, world_now};
use crate::support::kube_api::FakeNode;

async fn explain(cloud: &TestCloud, cluster: &str, json: bool) -> Run {
    let config = cloud.write_config();
    let mut cmd = tokio::process::Command::new(binary());
    cmd.arg("explain").arg(cluster).arg("-c").arg(&config);
    if json {
        cmd.args(["--format", "json"]);
    }
    let output = cmd.env_remove("RUST_LOG").output().await.unwrap();
    let run = Run::from(output);
    if std::env::var_os("CKS_DRIFT_SHOW_EXPLAIN").is_some() {
        println!("$ cks-drift explain {cluster}\n{}", run.stdout);
    }
    run
}

fn vm_name(cloud: &TestCloud, id: &str) -> String {
    cloud.sim().with_world(|w| w.vm(id).unwrap().name.clone())
}

/// The line after the one that starts with `  <head>`: the verdict of a VM or node.
fn verdict_of<'a>(text: &'a str, head: &str) -> &'a str {
    let mut lines = text.lines();
    lines
        .by_ref()
        .find(|l| l.starts_with(&format!("  {head}")))
        .unwrap_or_else(|| panic!("no line for {head} in\n{text}"));
    lines.next().unwrap().trim()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_upstream_scenario_is_explained() {
    let mut world = world_now();
    let owner = world.admin();
    let healthy = world.add_cluster("healthy", owner.clone(), 1, 1, 0);
    let unmapped = world.add_cluster("unmapped", owner.clone(), 1, 2, 0);
    let destroyed = world.add_cluster("destroyed", owner.clone(), 1, 2, 0);
    let kubelet = world.add_cluster("kubelet", owner.clone(), 1, 2, 0);
    let scaling = world.add_cluster("scaling", owner.clone(), 1, 1, 0);
    world.set_cluster_state(&scaling, "Scaling");
    let stray = world.add_node_vm(&healthy, NodeRole::Worker, false);
    let root = world.root_domain_id().to_string();
    let other = world.add_account("tenant-b", &root);
    let theirs = world.add_vm(
        &format!(
            "{}-node-18f00000001",
            cks_drift_sim::node_name_prefix("healthy", &healthy)
        ),
        other,
        None,
    );
    let mut cloud = TestCloud::start(world).await;
    for id in [&healthy, &unmapped, &destroyed, &kubelet] {
        cloud.control_node(id).await;
    }
    // Scenario 2: a worker's map row deleted.
    let lost = cloud.unmap_last_worker(&unmapped);
    // Scenario 3: a mapped VM destroyed.
    let dead = cloud.map(&destroyed)[1].clone();
    cloud
        .sim()
        .with_world(|w| w.set_vm_state(&dead, "Destroyed"));
    // Scenario 4: kubelet stopped, the node deleted from Kubernetes; and on another worker
    // the kubelet stopped too, so its node is still listed but Unknown.
    let k = cloud.map(&kubelet);
    let names: Vec<String> = k.iter().map(|v| vm_name(&cloud, v)).collect();
    cloud.node(&kubelet).kube.set_node_objects(vec![
        FakeNode::with_uuid(&names[0].to_lowercase(), &k[0]),
        FakeNode {
            ready: Some("Unknown".into()),
            ..FakeNode::with_uuid(&names[1].to_lowercase(), &k[1])
        },
    ]);

    // Scenario 1, with a young stray VM and another tenant's VM named like a node.
    let run = explain(&cloud, "healthy", false).await;
    assert_eq!(run.code, 0, "{run:?}");
    let text = &run.stdout;
    assert!(
        text.starts_with(&format!(
            "Kubernetes cluster healthy ({healthy}), Running, zone "
        )),
        "{text}"
    );
    assert!(
        text.contains("\nmap, VMs and Kubernetes nodes compared, at "),
        "{text}"
    );
    assert!(
        text.contains("\nMap: 2 rows, 2 expected (1 control + 1 workers + 0 etcd)\n"),
        "{text}"
    );
    let control = vm_name(&cloud, &cloud.map(&healthy)[0]);
    assert_eq!(verdict_of(text, &control), "matches its node");
    assert!(
        verdict_of(text, &vm_name(&cloud, &stray))
            .starts_with("not a finding yet: in no map, but created at "),
        "{text}"
    );
    assert!(
        verdict_of(text, &vm_name(&cloud, &theirs)).starts_with(
            "not this cluster's: named like one of its nodes, but owned by account tenant-b (domain "
        ) && verdict_of(text, &vm_name(&cloud, &theirs)).ends_with("), not by the cluster's owner"),
        "{text}"
    );
    let control_id = cloud.map(&healthy)[0].clone();
    assert!(
        text.contains(&format!(
            "\nKubernetes nodes: 2\n  {control}, Ready, system UUID {control_id} -> VM {control} ({control_id})\n      is a VM of the cluster by its system UUID or provider ID\n"
        )),
        "{text}"
    );
    assert!(text.contains("\nFindings: none\n"), "{text}");
    assert!(text.ends_with("Reported: no state file\n"), "{text}");

    // Scenario 2, by id.
    let run = explain(&cloud, &unmapped, false).await;
    let text = &run.stdout;
    assert_eq!(
        verdict_of(text, &vm_name(&cloud, &lost)),
        "finding unmapped_vm: named as a node of this cluster, owned by its owner, in no cluster's map"
    );
    assert!(
        text.contains(&format!(
            "\nFindings: 1\n  unmapped_vm:{lost} (not reported yet)\n"
        )),
        "{text}"
    );

    // Scenario 3.
    let text = explain(&cloud, "destroyed", false).await.stdout;
    assert_eq!(
        verdict_of(&text, &vm_name(&cloud, &dead)),
        "finding mapped_vm: mapped while Destroyed, so it cannot serve as a node"
    );

    // Scenario 4, after a check that reported it: the state file says since when and what
    // was sent.
    let run = cloud.check(&[]).await;
    assert_eq!(run.code, 1, "{run:?}");
    let text = explain(&cloud, "kubelet", false).await.stdout;
    assert!(
        verdict_of(&text, &names[2])
            .starts_with("finding vm_not_a_node: Running and mapped, no node is named "),
        "{text}"
    );
    assert!(
        text.contains(&format!("  vm_not_a_node:{} (reported since ", k[2])),
        "{text}"
    );
    // A node whose kubelet went silent is still the VM it is: readiness is shown, and the
    // rules do not read it.
    let silent = names[1].to_lowercase();
    assert!(
        text.contains(&format!(
            "\n  {silent}, Unknown, system UUID {} -> VM {} ({})\n      is a VM of the cluster",
            k[1], names[1], k[1]
        )),
        "{text}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&explain(&cloud, "kubelet", true).await.stdout).unwrap();
    let readiness: Vec<&serde_json::Value> = json["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| &n["ready"])
        .collect();
    assert_eq!(
        readiness,
        [&serde_json::json!("Ready"), &serde_json::json!("Unknown")]
    );
    assert!(
        text.contains(&format!("\n  vm_not_a_node:{} since ", k[2]))
            && text.contains(": alert, annotation\n"),
        "{text}"
    );

    // A node renamed by its tenant is still its VM by its system UUID; a node named like one
    // VM while its UUID is another's is a conflict.
    let d = cloud.map(&destroyed);
    let dn: Vec<String> = d
        .iter()
        .map(|v| vm_name(&cloud, v).to_lowercase())
        .collect();
    cloud.node(&destroyed).kube.set_node_objects(vec![
        FakeNode::with_uuid(&dn[0], &d[0]),
        FakeNode::with_uuid("my-favourite-node", &d[2]),
        FakeNode::with_uuid(&dn[1], &d[0]),
    ]);
    let text = explain(&cloud, "destroyed", false).await.stdout;
    assert_eq!(
        verdict_of(&text, "my-favourite-node"),
        "is a VM of the cluster by its system UUID or provider ID; its name differs (a VM renamed in CloudStack, or a node renamed by its tenant), which is no finding"
    );
    assert_eq!(
        verdict_of(&text, &format!("{}, Ready, system UUID {}", dn[1], d[0])),
        format!(
            "finding identity_conflict: named like VM {} ({}), but its system UUID or provider ID is VM {} ({})",
            vm_name(&cloud, &d[1]),
            d[1],
            vm_name(&cloud, &d[0]),
            d[0]
        )
    );

    // Scenario 7: skipped by rule.
    let text = explain(&cloud, "scaling", false).await.stdout;
    assert!(
        text.contains(
            "\nnot compared: state Scaling: only Running and Alert clusters are checked, at "
        ),
        "{text}"
    );

    // JSON: the same, for scripts.
    let run = explain(&cloud, "unmapped", true).await;
    let json: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(json["status"], "checked");
    assert_eq!(
        json["findings"][0]["key"],
        format!("unmapped_vm:{lost}").as_str()
    );
    let lost_line = json["vms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["id"] == lost.as_str())
        .unwrap();
    assert_eq!(lost_line["mapped"], false);
    assert_eq!(lost_line["role"], "worker");
    assert_eq!(lost_line["finding"], format!("unmapped_vm:{lost}").as_str());

    // Scenario 5: SSH to the control node broken. The map and the VMs are still compared;
    // the node finding reported in scenario 4 is kept, neither resolved nor found again.
    cloud.node_mut(&kubelet).sshd.take().unwrap().stop();
    let text = explain(&cloud, "kubelet", false).await.stdout;
    assert!(
        text.contains("\nmap and VMs compared; the nodes were not: "),
        "{text}"
    );
    assert!(text.contains("\nKubernetes nodes: not listed\n"), "{text}");
    assert_eq!(
        verdict_of(&text, &names[2]),
        "mapped and Running; not compared with the nodes (not listed)"
    );
    let kept = text
        .lines()
        .find(|l| l.starts_with(&format!("  vm_not_a_node:{} since ", k[2])))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        kept.ends_with(
            ": alert, annotation; kept: the nodes were not listed, so it is neither found again nor resolved"
        ),
        "{text}"
    );

    // Read-only: nothing was changed in CloudStack by explain (the check's calls aside).
    let calls = cloud.sim().state_changing_calls().len();
    explain(&cloud, "kubelet", false).await;
    assert_eq!(cloud.sim().state_changing_calls().len(), calls);
}

#[tokio::test]
async fn an_unknown_or_ambiguous_cluster_is_a_clear_error() {
    let mut world = world_now();
    let owner = world.admin();
    let a = world.add_cluster("twin", owner.clone(), 1, 1, 0);
    let b = world.add_cluster("twin", owner, 1, 1, 0);
    let mut cloud = TestCloud::start(world).await;
    cloud.control_node(&a).await;
    let run = explain(&cloud, "nope", false).await;
    assert_eq!(run.code, 2);
    assert_eq!(
        run.stderr,
        "cks-drift: no Kubernetes cluster is named or has the id \"nope\"; `cks-drift check` lists them\n"
    );
    let run = explain(&cloud, "twin", false).await;
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            == format!(
                "cks-drift: 2 Kubernetes clusters are named \"twin\" ({a}, {b}); give the id instead\n"
            )
            || run.stderr
                == format!(
                    "cks-drift: 2 Kubernetes clusters are named \"twin\" ({b}, {a}); give the id instead\n"
                ),
        "{}",
        run.stderr
    );
    assert_eq!(explain(&cloud, &b, false).await.code, 0);
}
