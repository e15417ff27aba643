//! `cks-drift check` end to end: the real binary against the fake CloudStack, real sshd on
//! CKS's port 2222 and the real kubectl. Upstream's test scenarios as the API shows them.

use std::time::Duration;

use cks_drift_sim::{ClusterSpec, NetworkLayout, NodeRole, SimTime, World};

use crate::support::cloud::{TestCloud, clusters, mismatches, one_cluster, s, world_now};

const HOUR: Duration = Duration::from_secs(3600);

fn vm_name(cloud: &TestCloud, vm_id: &str) -> String {
    cloud
        .sim()
        .with_world(|w| w.vm(vm_id).unwrap().name.clone())
}

#[tokio::test]
async fn healthy_cluster_matches() {
    // Upstream scenario 1.
    let (cloud, _) = one_cluster().await;
    let run = cloud.check(&["--no-notify"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.starts_with("cks-drift check at ")
            && run
                .stdout
                .contains(": 1 clusters (1 checked, 0 partial, 0 skipped), 0 mismatches\n"),
        "{}",
        run.stdout
    );
    // --no-notify neither creates nor locks the state file.
    assert!(!cloud.state_path().exists());
    assert!(!cloud.state_path().with_extension("json.lock").exists());
    // Read only: nothing changed in CloudStack.
    assert_eq!(cloud.sim().state_changing_calls(), vec![]);
}

#[tokio::test]
async fn deleted_map_row_is_an_unmapped_vm() {
    // Upstream scenario 2: a worker's map row deleted.
    let (cloud, id) = one_cluster().await;
    let worker = cloud.map(&id)[2].clone();
    cloud
        .sim()
        .with_world(|w| assert!(w.remove_map_row(&id, &worker)));
    let (run, report) = cloud.check_json(&["--no-notify"]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(
        mismatches(&report),
        vec![(s("unmapped_vm"), format!("unmapped_vm:{worker}"), None)]
    );
    let m = &report["mismatches"][0];
    let name = vm_name(&cloud, &worker);
    assert_eq!(m["vm_name"], name.as_str());
    assert_eq!(m["vm_state"], "Running");
    assert_eq!(
        m["reason"],
        format!(
            "VM {name} ({worker}, Running) is named as a node of Kubernetes cluster web \
             but is not one of its VMs in CloudStack"
        )
        .as_str()
    );
    // Its Kubernetes node matches the unmapped VM: no node finding.
    assert_eq!(clusters(&report), vec![(s("web"), s("checked"), None)]);
}

#[tokio::test]
async fn destroyed_then_expunging_mapped_vm() {
    // Upstream scenario 3 in the forms the API shows: a mapped VM Destroyed, then Expunging.
    let (cloud, id) = one_cluster().await;
    let worker = cloud.map(&id)[1].clone();
    cloud
        .sim()
        .with_world(|w| w.set_vm_state(&worker, "Destroyed"));
    let (run, report) = cloud.check_json(&["--no-notify"]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(
        mismatches(&report),
        vec![(s("mapped_vm"), format!("mapped_vm:{worker}"), None)]
    );
    assert!(
        report["mismatches"][0]["reason"]
            .as_str()
            .unwrap()
            .ends_with("in CloudStack, but is destroyed")
    );
    assert_eq!(report["mismatches"][0]["vm_state"], "Destroyed");

    cloud
        .sim()
        .with_world(|w| w.set_vm_state(&worker, "Expunging"));
    let (_, report) = cloud.check_json(&["--no-notify"]).await;
    assert_eq!(
        mismatches(&report),
        vec![(s("mapped_vm"), format!("mapped_vm:{worker}"), None)]
    );
    assert!(
        report["mismatches"][0]["reason"]
            .as_str()
            .unwrap()
            .ends_with("but has been or is being expunged")
    );
}

#[tokio::test]
async fn rows_for_removed_or_unknown_vms_show_nothing_through_the_api() {
    // Upstream scenario 3's stale rows: one for a VM expunged earlier, one for an id that
    // never existed. The API drops both rows, so on a cluster whose visible map is complete
    // they give no finding at all.
    let mut world = world_now();
    let owner = world.admin();
    let id = world.add_cluster("web", owner.clone(), 1, 2, 0);
    let other = world.add_cluster("old", owner, 1, 1, 0);
    let gone = world.cluster(&other).unwrap().map[1].clone();
    world.expunge_vm(&gone);
    let never = world.fresh_id();
    world.add_map_row(&id, &gone);
    world.add_map_row(&id, &never);
    world.set_cluster_state(&other, "Stopped");
    let mut cloud = TestCloud::start(world).await;
    cloud.control_node(&id).await;
    let (run, report) = cloud.check_json(&["--no-notify"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(mismatches(&report), vec![]);
    // But a map that shows fewer VMs than the cluster should have is reported.
    cloud.sim().with_world(|w| w.cluster_mut(&id).size = 3);
    let (run, report) = cloud.check_json(&["--no-notify"]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(
        mismatches(&report),
        vec![(s("map_count"), s("map_count:3/4"), None)]
    );
}

#[tokio::test]
async fn stopped_kubelet_is_a_vm_that_is_not_a_node() {
    // Upstream scenario 4: kubelet stopped and the node deleted from Kubernetes.
    let (cloud, id) = one_cluster().await;
    let ids = cloud.map(&id);
    let names: Vec<String> = ids.iter().map(|v| vm_name(&cloud, v)).collect();
    cloud.node(&id).kube.set_nodes(&[&names[0], &names[1]]);
    let (run, report) = cloud.check_json(&["--no-notify"]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(
        mismatches(&report),
        vec![(
            s("vm_not_a_node"),
            format!("vm_not_a_node:{}", ids[2]),
            None
        )]
    );
    assert_eq!(
        report["mismatches"][0]["reason"],
        format!(
            "VM {} ({}) of Kubernetes cluster web is running but is not a Kubernetes node \
             of the cluster",
            names[2], ids[2]
        )
        .as_str()
    );
}

#[tokio::test]
async fn node_without_vm_and_fqdn_nodes() {
    let (cloud, id) = one_cluster().await;
    let names: Vec<String> = cloud.map(&id).iter().map(|v| vm_name(&cloud, v)).collect();
    let fqdn = format!("{}.cluster.example", names[1]);
    cloud
        .node(&id)
        .kube
        .set_nodes(&[&names[0], &fqdn, &names[2], "manual-node"]);
    let (run, report) = cloud.check_json(&["--no-notify"]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(
        mismatches(&report),
        vec![(s("node_without_vm"), s("node_without_vm:manual-node"), None)]
    );
    assert_eq!(report["mismatches"][0]["node"], "manual-node");
}

#[tokio::test]
async fn ssh_failure_compares_vms_only_and_exits_3() {
    // Upstream scenario 5, first half: SSH broken; the VM side is still compared.
    let (mut cloud, id) = one_cluster().await;
    cloud.node_mut(&id).sshd.take().unwrap().stop();
    let (run, report) = cloud.check_json(&["--no-notify"]).await;
    assert_eq!(run.code, 3, "{run:?}");
    let c = &clusters(&report)[0];
    assert_eq!((c.0.as_str(), c.1.as_str()), ("web", "partial"));
    let reason = c.2.as_deref().unwrap();
    assert!(reason.starts_with("nodes not listed: "), "{reason}");
    assert!(reason.contains(&cloud.node(&id).ip.to_string()), "{reason}");
    // And with a VM-side drift, it is found all the same.
    let worker = cloud.map(&id)[2].clone();
    cloud.sim().with_world(|w| w.remove_map_row(&id, &worker));
    let (run, report) = cloud.check_json(&["--no-notify"]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(
        mismatches(&report),
        vec![(s("unmapped_vm"), format!("unmapped_vm:{worker}"), None)]
    );
}

#[tokio::test]
async fn kubectl_failure_is_named_in_the_report() {
    let (mut cloud, id) = one_cluster().await;
    cloud.node_mut(&id).kube.stop().await;
    let run = cloud.check(&["--no-notify"]).await;
    assert_eq!(run.code, 3, "{run:?}");
    assert!(
        run.stdout.contains("  partial  web (") && run.stdout.contains("refused"),
        "{}",
        run.stdout
    );
}

#[tokio::test]
async fn cluster_mid_operation_is_skipped_and_young_strays_wait() {
    // Upstream scenario 7: a cluster in Scaling is skipped; a stray VM named as a node is not
    // reported within its grace period.
    let mut world = world_now();
    let owner = world.admin();
    let scaling = world.add_cluster("ci", owner.clone(), 1, 1, 0);
    world.set_cluster_state(&scaling, "Scaling");
    let running = world.add_cluster("web", owner.clone(), 1, 1, 0);
    let stray = world.add_node_vm(&running, NodeRole::Worker, false);
    let external = world.add_cluster_with(ClusterSpec {
        clustertype: Some("ExternalManaged".into()),
        ..ClusterSpec::new("ext", owner, 1, 1, 0)
    });
    let _ = external;
    let mut cloud = TestCloud::start(world).await;
    cloud.control_node(&running).await;
    let (run, report) = cloud.check_json(&["--no-notify"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        clusters(&report),
        vec![
            (
                s("ci"),
                s("skipped"),
                Some(s(
                    "state Scaling: only Running and Alert clusters are checked"
                ))
            ),
            (s("web"), s("checked"), None),
            (
                s("ext"),
                s("skipped"),
                Some(s(
                    "ExternalManaged cluster: its VMs are not managed by CloudStack"
                ))
            ),
        ]
    );
    // 20 minutes later (its creation moved back), the stray is reported.
    cloud.sim().with_world(|w| {
        w.vm_mut(&stray).created = SimTime::now().minus(Duration::from_secs(20 * 60))
    });
    let (run, report) = cloud.check_json(&["--no-notify"]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(
        mismatches(&report),
        vec![(s("unmapped_vm"), format!("unmapped_vm:{stray}"), None)]
    );
}

#[tokio::test]
async fn vms_of_similar_clusters_and_other_owners_are_not_taken() {
    // web-2 and webapp are other clusters; a VM named like web's in another account is not
    // web's either.
    let mut world = world_now();
    let admin = world.admin();
    let web = world.add_cluster("web", admin.clone(), 1, 1, 0);
    let web2 = world.add_cluster("web-2", admin.clone(), 1, 1, 0);
    let webapp = world.add_cluster("webapp", admin, 1, 1, 0);
    for c in [&web2, &webapp] {
        world.set_cluster_state(c, "Stopped");
    }
    let domain = world.root_domain_id().to_string();
    let other = world.add_account("other", &domain);
    let prefix = world.cluster(&web).unwrap().name.clone();
    let foreign = world.add_vm(&format!("{prefix}-node-1a2c0000000"), other, None);
    world.vm_mut(&foreign).created = SimTime::now().minus(HOUR);
    let mut cloud = TestCloud::start(world).await;
    cloud.control_node(&web).await;
    let (run, report) = cloud.check_json(&["--no-notify"]).await;
    assert_eq!(run.code, 0, "{run:?} {report}");
}

#[tokio::test]
async fn project_clusters_are_seen_and_etcd_vms_are_not_nodes() {
    let mut world: World = world_now();
    let project = world.add_project("team");
    let id = world.add_cluster("proj", project, 1, 1, 1);
    let mut cloud = TestCloud::start(world).await;
    cloud.control_node(&id).await;
    let (run, report) = cloud.check_json(&["--no-notify"]).await;
    assert_eq!(run.code, 0, "{run:?} {report}");
    assert_eq!(clusters(&report), vec![(s("proj"), s("checked"), None)]);
}

#[tokio::test]
async fn shared_network_with_one_control_node_uses_port_22() {
    let mut world = world_now();
    let owner = world.admin();
    let id = world.add_cluster_with(ClusterSpec {
        layout: NetworkLayout::Shared,
        ..ClusterSpec::new("flat", owner, 1, 1, 0)
    });
    let mut cloud = TestCloud::start(world).await;
    cloud.control_node(&id).await;
    // The control node listens on 2222 only: on a Shared network CKS (and cks-drift) use 22.
    let run = cloud.check(&["--no-notify"]).await;
    assert_eq!(run.code, 3, "{run:?}");
    let reason = format!("{}:22", cloud.node(&id).ip);
    assert!(run.stdout.contains(&reason), "{}", run.stdout);
}

#[tokio::test]
async fn login_user_falls_back_to_ssh_user() {
    let (cloud, id) = one_cluster().await;
    let first = cloud.map(&id)[0].clone();
    cloud.sim().with_world(|w| {
        w.vm_mut(&first).details.remove("controlNodeLoginUser");
    });
    // ssh.user is "nobody-fallback" in the test config: authentication fails naming it.
    let run = cloud.check(&["--no-notify"]).await;
    assert_eq!(run.code, 3, "{run:?}");
    assert!(run.stdout.contains("nobody-fallback"), "{}", run.stdout);
}

#[tokio::test]
async fn bad_credentials_and_unreachable_api_exit_2() {
    let (cloud, _) = one_cluster().await;
    let config = cloud.write_config();
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace(crate::support::cloud::SECRET_KEY, "wrong");
    std::fs::write(&config, text).unwrap();
    let out = tokio::process::Command::new(crate::support::cloud::binary())
        .args(["check", "--no-notify", "-c"])
        .arg(&config)
        .output()
        .await
        .unwrap();
    let run = crate::support::cloud::Run::from(out);
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(run.stdout, "");
    let url = cloud.api.url();
    assert!(
        crate::support::cloud::from_any_listing(
            crate::support::cloud::without_plain_http_warning(&run.stderr).trim_end(),
            |what, command| format!(
                "cks-drift: cannot list {what}: cloudstack at {url} refused {command} with HTTP 401 (unable to verify user credentials and/or request signature); check cloudstack.api_key and cloudstack.secret_key (or CKS_DRIFT_API_KEY and CKS_DRIFT_SECRET_KEY), that this host's clock is right (requests expire), that the account and user are enabled, and that the key's role may call {command} (credentials)"
            ),
        ),
        "{}",
        run.stderr
    );
    assert_eq!(
        cloud.sim().calls().len(),
        0,
        "rejected requests never reach CloudStack's commands"
    );

    // Nothing listens: exit 2 naming the URL.
    let TestCloud { dir: _dir, api, .. } = cloud;
    drop(api);
    let out = tokio::process::Command::new(crate::support::cloud::binary())
        .args(["check", "--no-notify", "-c"])
        .arg(&config)
        .output()
        .await
        .unwrap();
    let run = crate::support::cloud::Run::from(out);
    assert_eq!(run.code, 2, "{run:?}");
    let address = url
        .trim_start_matches("http://")
        .trim_end_matches("/client/api")
        .to_string();
    assert!(
        crate::support::cloud::from_any_listing(
            &crate::support::cloud::without_plain_http_warning(&run.stderr),
            |what, _| format!(
                "cks-drift: cannot list {what}: cannot connect to {address} (cloudstack.url): Connection refused (os error 111); check that the management server is up, the host and port in cloudstack.url, and firewalls (TCP connect)\n"
            ),
        ),
        "{}",
        run.stderr
    );
}

#[tokio::test]
async fn one_tenants_slow_control_nodes_do_not_keep_anothers_cluster_unlisted() {
    // Eight clusters of one tenant whose control node answers in 8 s, ahead of alice's in the
    // API's order; 4 listings at a time, 13 s for all (half of a 20 s interval, at least
    // connect_timeout + command_timeout).
    let mut world = world_now();
    let root = world.root_domain_id().to_string();
    let slowpoke = world.add_account("slowpoke", &root);
    let alice = world.add_account("alice", &root);
    let slow: Vec<String> = (0..8)
        .map(|n| world.add_cluster(&format!("slow{n}"), slowpoke.clone(), 1, 1, 0))
        .collect();
    let honest = world.add_cluster("honest", alice, 1, 1, 0);
    let mut cloud = TestCloud::start(world).await;
    cloud.control_node(&slow[0]).await;
    cloud.control_node(&honest).await;
    let wait = cloud.dir.path().join("slow.sh");
    std::fs::write(&wait, "#!/bin/sh\nsleep 8\nexec \"$@\"\n").unwrap();
    std::fs::set_permissions(&wait, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let node = cloud.node_mut(&slow[0]);
    node.command = format!("{} {}", wait.display(), node.command);
    // The tenant's other clusters have their endpoint on the same slow node.
    let endpoint = format!("https://{}:6443/", node.ip);
    cloud.sim().with_world(|w| {
        for id in &slow[1..] {
            w.cluster_mut(id).endpoint = endpoint.clone();
            let first = w.cluster(id).unwrap().map[0].clone();
            w.vm_mut(&first)
                .details
                .insert("controlNodeLoginUser".into(), "root".into());
        }
    });
    cloud.check_extra = "interval = \"20s\"".into();
    let (run, report) = cloud.check_json(&["--no-notify"]).await;
    assert!(matches!(run.code, 1 | 3), "{run:?}");
    // alice's cluster takes a slot at once and is compared in full; the tenant's take every
    // other slot: four are listed (8 s each), and four more start as those end, to be cut
    // off by the deadline.
    let late = Some(s(
        "nodes not listed: the node listing did not finish within the cycle's deadline of 13s",
    ));
    let mut expected: Vec<(String, String, Option<String>)> = (0..8)
        .map(|n| match n {
            0..4 => (format!("slow{n}"), s("checked"), None),
            _ => (format!("slow{n}"), s("partial"), late.clone()),
        })
        .collect();
    expected.push((s("honest"), s("checked"), None));
    assert_eq!(clusters(&report), expected);
}

#[tokio::test]
async fn tenant_text_cannot_forge_log_lines_or_rewrite_the_terminal() {
    let mut world = world_now();
    let owner = world.admin();
    let name = "web\nERROR cks_drift: forged line\x1b[2J\u{9b}";
    let id = world.add_cluster(name, owner.clone(), 1, 2, 0);
    let healthy = world.add_cluster("ok", owner, 1, 1, 0);
    let mut cloud = TestCloud::start(world).await;
    cloud.control_node(&healthy).await;
    // Its control node refuses SSH: the failure is logged with the cluster's name.
    let ip = crate::support::sshd::fresh_loopback();
    cloud
        .sim()
        .with_world(|w| w.cluster_mut(&id).endpoint = format!("https://{ip}:6443/"));
    let run = cloud.check(&["--no-notify"]).await;
    assert_eq!(run.code, 3, "{run:?}");
    let shown = "web\\x0aERROR cks_drift: forged line\\x1b[2J\\x9b";
    for (what, out) in [("report", &run.stdout), ("log", &run.stderr)] {
        assert!(out.contains(shown), "{what}: {out}");
        assert!(
            !out.contains('\x1b') && !out.contains('\u{9b}'),
            "{what}: {out}"
        );
        assert!(
            !out.lines()
                .any(|l| l.starts_with("ERROR cks_drift: forged")),
            "{what}: {out}"
        );
    }
}

#[tokio::test]
async fn the_text_report_ends_with_what_was_sent() {
    let (cloud, id) = one_cluster().await;
    let run = cloud.check(&["--no-notify"]).await;
    assert!(
        run.stdout.ends_with("\n\nSent: nothing (--no-notify).\n"),
        "{}",
        run.stdout
    );
    let worker = cloud.map(&id)[1].clone();
    cloud
        .sim()
        .with_world(|w| w.set_vm_state(&worker, "Destroyed"));
    let run = cloud.check(&[]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stdout.ends_with(
            "\n\nSent: 1 event log line, 1 CloudStack alert raised or archived, 1 annotation \
             added or removed.\n"
        ),
        "{}",
        run.stdout
    );
    let run = cloud.check(&[]).await;
    assert!(
        run.stdout
            .ends_with("\n\nSent: nothing (no mismatch is new or resolved).\n"),
        "{}",
        run.stdout
    );
}
