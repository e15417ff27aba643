//! The releases after 4.22.0 and a server with its own VM map check: default alert types,
//! `listAlertTypes`, `listConfigurations`, 4.23's key pairs and cluster listing, and the
//! check itself.

use super::*;

fn on(release: Release) -> World {
    let mut w = world();
    w.release = release;
    w
}

/// `generateAlert` of `t` under `name`, and its job's result once run.
fn generated(sim: &Sim, t: &str, name: &str) -> Value {
    let (status, v) = call(
        sim,
        "generateAlert",
        &[("type", t), ("name", name), ("description", "d")],
    );
    assert_eq!(status, 200, "{v}");
    let job = v["generatealertresponse"]["jobid"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, v) = call(sim, "queryAsyncJobResult", &[("jobid", &job)]);
    v["queryasyncjobresultresponse"].clone()
}

#[test]
fn generate_alert_refuses_each_releases_default_types_under_another_name() {
    for (release, t, ok) in [
        (Release::V4_22, 33, "ALERT.TYPE.EXTENSION.PATH.NOT.READY"),
        (Release::V4_22_1, 34, "ALERT.VR.PRIVATE.IFACE.MTU"),
        (
            Release::V4_23,
            34,
            "ALERT.S2S.VPN.GATEWAY.OBSOLETE.PARAMETERS",
        ),
    ] {
        let sim = Sim::new(on(release));
        let t = t.to_string();
        for (name, failed) in [("cks-drift", true), (ok, false)] {
            let r = &generated(&sim, &t, name);
            assert_eq!(
                r["jobstatus"],
                if failed { 2 } else { 1 },
                "{release:?} {name}: {r}"
            );
            if failed {
                let text = r["jobresult"]["errortext"].as_str().unwrap();
                assert!(
                    text.starts_with(&format!(
                        "There is a default alert having type {t} and name ALERT."
                    )),
                    "{text}"
                );
            }
        }
    }
    // Type 34 belongs to nobody on 4.22.0.
    let sim = Sim::new(on(Release::V4_22));
    assert_eq!(generated(&sim, "34", "x")["jobstatus"], 1);
}

#[test]
fn list_alert_types_is_unknown_before_4_19_1_and_lists_every_name_after() {
    let sim = Sim::new(on(Release::V4_19_0));
    let (status, v) = call(&sim, "listAlertTypes", &[]);
    assert_eq!(status, 401);
    assert_eq!(v["errorresponse"]["errortext"], UNAUTHORIZED_TEXT);
    let sim = Sim::new(on(Release::V4_22_1));
    let (status, v) = call(&sim, "listAlertTypes", &[]);
    assert_eq!(status, 200);
    let r = &v["listalerttypesresponse"];
    let rows = r["alerttype"].as_array().unwrap();
    assert_eq!(r["count"], rows.len());
    assert!(
        rows.iter()
            .any(|t| t["alerttypeid"] == 34 && t["name"] == "ALERT.VR.PRIVATE.IFACE.MTU")
    );
    assert!(rows.iter().all(|t| t.get("repetitionallowed").is_none()));
    let sim = Sim::new(on(Release::V4_23));
    let (_, v) = call(&sim, "listAlertTypes", &[]);
    assert!(v["listalerttypesresponse"]["alerttype"][0]["repetitionallowed"].is_boolean());
}

#[test]
fn list_configurations_shows_the_check_setting_only_where_the_check_exists() {
    let sim = Sim::new(world());
    let (status, v) = call(
        &sim,
        "listConfigurations",
        &[("name", VM_MAP_CHECK_SETTING)],
    );
    assert_eq!(status, 200);
    assert_eq!(v, json!({"listconfigurationsresponse": {}}));
    sim.with_world(|w| w.vm_map_check = Some(false));
    // `name` is matched with LIKE: a part of the name finds it too.
    let (_, v) = call(&sim, "listConfigurations", &[("name", "vm.map.check")]);
    let row = &v["listconfigurationsresponse"]["configuration"][0];
    assert_eq!(row["name"], VM_MAP_CHECK_SETTING);
    assert_eq!(row["value"], "false");
    assert_eq!(row["isdynamic"], true);
    // `name` is a STRING of the default length: 256 characters are refused before it runs.
    let long = "x".repeat(256);
    let (status, _) = call(&sim, "listConfigurations", &[("name", &long)]);
    assert_eq!(status, 431);
    let (_, v) = call(&sim, "listConfigurations", &[("name", "api.response")]);
    assert_eq!(
        v["listconfigurationsresponse"]["configuration"][0]["name"],
        "encode.api.response"
    );
}

#[test]
fn capabilities_gain_their_fields_release_by_release() {
    let field = |release: Release, name: &str| {
        let sim = Sim::new(on(release));
        let (_, v) = call(&sim, "listCapabilities", &[]);
        v["listcapabilitiesresponse"]["capability"]
            .get(name)
            .is_some()
    };
    assert!(!field(Release::V4_21, "additionalconfigenabled"));
    assert!(field(Release::V4_22, "additionalconfigenabled"));
    assert!(!field(Release::V4_22, "snapshotshowchainsize"));
    assert!(field(Release::V4_22_1, "snapshotshowchainsize"));
}

#[test]
fn on_4_23_get_user_answers_the_newest_key_and_a_key_pairs_rules_refuse_commands() {
    let mut w = on(Release::V4_23);
    w.caller_api_key = "old-key".into();
    w.caller_newer_api_key = Some("new-key".into());
    let sim = Sim::new(w);
    let (status, v) = call(&sim, "getUser", &[("userapikey", "old-key")]);
    assert_eq!(status, 200);
    assert_eq!(v["getuserresponse"]["user"]["apikey"], "new-key");
    assert_eq!(v["getuserresponse"]["user"]["roletype"], "Admin");
    sim.with_world(|w| w.caller_key_pair_allows = Some(vec!["listKubernetesClusters".into()]));
    let (status, _) = call(&sim, "listKubernetesClusters", &[]);
    assert_eq!(status, 200);
    let (status, v) = call(&sim, "getUser", &[("userapikey", "old-key")]);
    assert_eq!(status, 432);
    assert_eq!(
        v["errorresponse"]["errortext"],
        "The API [getUser] does not exist or is not available for the account admin."
    );
    assert_eq!(v["errorresponse"]["cserrorcode"], 9999);
    // The same rules mean nothing before 4.23.
    sim.with_world(|w| w.release = Release::V4_22_1);
    let (status, v) = call(&sim, "getUser", &[("userapikey", "old-key")]);
    assert_eq!(status, 200);
    assert_eq!(v["getuserresponse"]["user"]["apikey"], "old-key");
}

#[test]
fn on_4_23_a_clusters_vms_come_in_creation_order_and_a_vm_mapped_twice_fails_the_listing() {
    let mut w = on(Release::V4_23);
    let owner = w.admin();
    let c = w.add_cluster("prod", owner, 1, 2, 0);
    let map = w.cluster(&c).unwrap().map.clone();
    w.cluster_mut(&c).map = vec![map[2].clone(), map[0].clone(), map[1].clone()];
    let sim = Sim::new(w);
    let (_, v) = call(&sim, "listKubernetesClusters", &[]);
    let vms = &v["listkubernetesclustersresponse"]["kubernetescluster"][0]["virtualmachines"];
    assert_eq!(ids(vms), map);
    sim.with_world(|w| w.add_map_row(&c, &map[1]));
    let (status, v) = call(&sim, "listKubernetesClusters", &[]);
    assert_eq!(status, 530);
    let text = v["listkubernetesclustersresponse"]["errortext"]
        .as_str()
        .unwrap();
    assert!(text.starts_with("Duplicate key "), "{text}");
    // 4.22.1 lists the row twice, in map order.
    sim.with_world(|w| w.release = Release::V4_22_1);
    let (status, v) = call(&sim, "listKubernetesClusters", &[]);
    assert_eq!(status, 200);
    let vms = &v["listkubernetesclustersresponse"]["kubernetescluster"][0]["virtualmachines"];
    assert_eq!(
        ids(vms),
        vec![
            map[2].clone(),
            map[0].clone(),
            map[1].clone(),
            map[1].clone()
        ]
    );
}

#[test]
fn the_servers_own_check_reports_each_mismatch_once_and_says_when_it_matches_again() {
    let mut w = world();
    let owner = w.admin();
    let c = w.add_cluster("prod", owner, 1, 2, 0);
    let map = w.cluster(&c).unwrap().map.clone();
    let names: Vec<String> = map
        .iter()
        .map(|id| w.vm(id).unwrap().name.clone())
        .collect();
    w.now = w.now.plus(Duration::from_secs(3600));
    let listed = |names: &[String]| BTreeMap::from([(c.clone(), names.to_vec())]);

    // Absent or off: nothing.
    w.run_vm_map_check(&listed(&names[..2]));
    w.vm_map_check = Some(false);
    w.run_vm_map_check(&listed(&names[..2]));
    assert!(w.events.is_empty() && w.alerts.is_empty());

    w.vm_map_check = Some(true);
    w.run_vm_map_check(&listed(&names));
    assert!(w.events.is_empty(), "a matching cluster: {:?}", w.events);
    // A worker that is no node, and a node that is no VM.
    let mut nodes = names[..2].to_vec();
    nodes.push("stray".into());
    w.run_vm_map_check(&listed(&nodes));
    w.run_vm_map_check(&listed(&nodes));
    let texts: Vec<&str> = w.alerts.iter().map(|a| a.description.as_str()).collect();
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(
        texts
            .iter()
            .any(|t| t.contains(&format!("VM {} (", names[2]))
                && t.ends_with("is running but is not a Kubernetes node of the cluster"))
    );
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("Kubernetes node stray of Kubernetes cluster prod"))
    );
    assert!(
        w.alerts
            .iter()
            .all(|a| a.alert_type == 8 && a.name == "ALERT.USERVM")
    );
    assert!(
        w.events
            .iter()
            .all(|e| e.level == "WARN" && e.event_type == VM_MAP_CHECK_EVENT)
    );
    // Nodes not listed: the node side is kept, neither cleared nor told again.
    w.run_vm_map_check(&BTreeMap::new());
    assert_eq!(w.events.len(), 2);
    w.run_vm_map_check(&listed(&names));
    assert_eq!(w.events.last().unwrap().level, "INFO");
    assert_eq!(
        w.events.last().unwrap().description,
        "The VM map of Kubernetes cluster prod matches the Kubernetes nodes of the cluster again"
    );
    // A map row deleted: the VM is named as a node but mapped by nobody.
    w.cluster_mut(&c).map.pop();
    w.run_vm_map_check(&listed(&names));
    let last = w.alerts.last().unwrap().description.clone();
    assert!(
        last.ends_with(
            "is named as a node of Kubernetes cluster prod but is not one of its VMs in CloudStack"
        ),
        "{last}"
    );
}

#[test]
fn a_custom_role_without_get_user_is_refused_with_each_releases_text() {
    for (release, start) in [
        (
            Release::V4_16,
            "The API getUser does not exist or is not available for this account.",
        ),
        (
            Release::V4_19_1,
            "The API [getUser] does not exist or is not available for the account Account [",
        ),
        (
            Release::V4_22_1,
            "The API [getUser] does not exist or is not available for the account for user id [",
        ),
    ] {
        let mut w = on(release);
        w.caller_api_key = "k".into();
        w.caller_role_denies = vec!["getUser".into()];
        let sim = Sim::new(w);
        let (status, v) = call(&sim, "getUser", &[("userapikey", "k")]);
        assert_eq!(status, 432, "{release:?}");
        let text = v["errorresponse"]["errortext"].as_str().unwrap();
        assert!(text.starts_with(start), "{release:?}: {text}");
        let (status, _) = call(&sim, "listKubernetesClusters", &[]);
        assert_eq!(status, 200);
    }
}

#[test]
fn account_scoped_and_permission_shared_networks_are_listed_as_each_release_lists_them() {
    // (layout, owned by a project) → (listed by `listall=true`, by `listall=true projectid=-1`)
    // on each release, as `NetworkServiceImpl.searchForNetworks` builds its SQL.
    for release in Release::SUPPORTED {
        let all = release == Release::V4_19_1;
        let minus_one_all = all || release >= Release::V4_22;
        let mut cases = vec![
            (NetworkLayout::SharedOfOwner, false, (true, minus_one_all)),
            (NetworkLayout::SharedOfOwner, true, (all, true)),
        ];
        if release >= Release::V4_18 {
            cases.push((NetworkLayout::SharedByPermission, false, (true, true)));
        }
        for (layout, in_project, (plain, minus_one)) in cases {
            let mut w = on(release);
            let root = w.root_domain_id().to_string();
            let owner = if in_project {
                w.add_project("team")
            } else {
                w.add_account("alice", &root)
            };
            let c = w.add_cluster_with(ClusterSpec {
                layout,
                ..ClusterSpec::new("flat", owner, 1, 1, 0)
            });
            let network = w.cluster(&c).unwrap().network_id.clone();
            let sim = Sim::new(w);
            let listed = |params: &[(&str, &str)]| {
                let (_, v) = call(&sim, "listNetworks", params);
                v["listnetworksresponse"]["network"]
                    .as_array()
                    .is_some_and(|ns| ns.iter().any(|n| n["id"] == network.as_str()))
            };
            let what = format!("{release:?} {layout:?} project {in_project}");
            assert_eq!(listed(&[("listall", "true")]), plain, "{what}");
            assert_eq!(
                listed(&[("listall", "true"), ("projectid", "-1")]),
                minus_one,
                "{what}"
            );
        }
    }
}
