//! Every supported CloudStack release, as the fake answers it (`cks_drift_sim::Release`): the
//! check cycle over several pages of clusters, a cluster reached directly on a zone-wide
//! Shared (or ROUTED) network, dedupe over several runs, the read-back of a lost state, and
//! `validate-config --connect`.

use cks_drift_sim::{ClusterSpec, NetworkLayout, Release, World};

use crate::support::cloud::{
    Run, TestCloud, binary, clusters, mismatches, s, without_plain_http_warning, world_now,
};

fn world_on(release: Release) -> World {
    let mut world = world_now();
    world.release = release;
    world
}

/// A 1 control + 2 worker cluster `web` of a tenant (account `alice`), its control node up,
/// on `release`.
pub async fn one_cluster_on(release: Release) -> (TestCloud, String) {
    let mut world = world_on(release);
    let root = world.root_domain_id().to_string();
    let tenant = world.add_account("alice", &root);
    let id = world.add_cluster("web", tenant, 1, 2, 0);
    let mut cloud = TestCloud::start(world).await;
    cloud.control_node(&id).await;
    (cloud, id)
}

pub async fn validate_connect(cloud: &TestCloud) -> Run {
    let config = cloud.write_config();
    let output = tokio::process::Command::new(binary())
        .args(["validate-config", "--connect", "-c"])
        .arg(&config)
        .env_remove("RUST_LOG")
        .output()
        .await
        .expect("run cks-drift");
    Run::from(output)
}

#[tokio::test]
async fn every_page_of_clusters_is_checked_on_every_release() {
    for release in Release::SUPPORTED {
        // Five clusters on pages of two: 4.16 to 4.19.0 answer `count` = 2 on every full
        // page, which once ended the list after the first.
        let mut world = world_on(release);
        let root = world.root_domain_id().to_string();
        let tenant = world.add_account("alice", &root);
        let ids: Vec<String> = (1..=5)
            .map(|n| world.add_cluster(&format!("c{n}"), tenant.clone(), 1, 1, 0))
            .collect();
        let last = ids.last().unwrap().clone();
        let worker = world.cluster(&last).unwrap().map[1].clone();
        assert!(world.remove_map_row(&last, &worker));
        let mut cloud = TestCloud::start(world).await;
        cloud.control_node(&ids[0]).await;
        cloud.cloudstack_extra = "page_size = 2".into();
        let (run, report) = cloud.check_json(&["--no-notify"]).await;
        let name = release.name();
        let names: Vec<String> = clusters(&report).into_iter().map(|c| c.0).collect();
        assert_eq!(names, ["c1", "c2", "c3", "c4", "c5"], "{name}: {run:?}");
        assert_eq!(
            mismatches(&report),
            vec![(s("unmapped_vm"), format!("unmapped_vm:{worker}"), None)],
            "{name}"
        );
        // Pages of two: 1, 2 and the short page 3, each time.
        let mut pages: Vec<String> = cloud
            .sim()
            .calls()
            .into_iter()
            .filter(|c| c.command == "listKubernetesClusters")
            .map(|c| c.params["page"].clone())
            .collect();
        pages.sort();
        assert_eq!(pages, ["1", "1", "2", "2", "3", "3"], "{name}");
    }
}

#[tokio::test]
async fn a_full_last_page_of_clusters_is_followed_by_an_empty_one() {
    for release in [Release::V4_19_0, Release::V4_22] {
        let mut world = world_on(release);
        let owner = world.admin();
        let ids: Vec<String> = (1..=4)
            .map(|n| world.add_cluster(&format!("c{n}"), owner.clone(), 1, 1, 0))
            .collect();
        let mut cloud = TestCloud::start(world).await;
        cloud.control_node(&ids[0]).await;
        cloud.cloudstack_extra = "page_size = 2".into();
        let (run, report) = cloud.check_json(&["--no-notify"]).await;
        assert_eq!(clusters(&report).len(), 4, "{}: {run:?}", release.name());
        let pages = cloud
            .sim()
            .calls()
            .into_iter()
            .filter(|c| c.command == "listKubernetesClusters")
            .count();
        assert_eq!(pages, 6, "{}", release.name());
    }
}

#[tokio::test]
async fn a_single_control_cluster_reached_directly_is_listed_over_port_22_on_every_release() {
    for release in Release::SUPPORTED {
        // (layout, owned by a project)
        let mut layouts = vec![
            (NetworkLayout::Shared, false),
            // Account-scoped Shared networks: listed as their owner's Isolated ones are.
            (NetworkLayout::SharedOfOwner, false),
            (NetworkLayout::SharedOfOwner, true),
        ];
        // ROUTED networks exist from 4.20 on.
        if release >= Release::V4_20 {
            layouts.push((NetworkLayout::Routed, false));
        }
        // Network permissions exist from 4.17 on.
        if release >= Release::V4_18 {
            layouts.push((NetworkLayout::SharedByPermission, false));
        }
        for (layout, in_project) in layouts {
            let mut world = world_on(release);
            let root = world.root_domain_id().to_string();
            let tenant = if in_project {
                world.add_project("team")
            } else {
                world.add_account("alice", &root)
            };
            let id = world.add_cluster_with(ClusterSpec {
                layout,
                ..ClusterSpec::new("flat", tenant, 1, 1, 0)
            });
            let mut cloud = TestCloud::start(world).await;
            cloud.control_node_on(&id, 22).await;
            let (run, report) = cloud.check_json(&["--no-notify"]).await;
            let what = format!("{} {layout:?} project {in_project}", release.name());
            assert_eq!(run.code, 0, "{what}: {run:?}");
            assert_eq!(
                clusters(&report),
                vec![(s("flat"), s("checked"), None)],
                "{what}"
            );
            // Before 4.22 the networks are listed twice: with projectid=-1 (project networks
            // only there) and without.
            let listings = cloud.sim().call_count("listNetworks");
            let expected = if release >= Release::V4_22 { 1 } else { 2 };
            assert_eq!(listings, expected, "{what}");
        }
    }
}

#[tokio::test]
async fn a_finding_is_reported_once_and_resolved_on_every_release() {
    for release in Release::SUPPORTED {
        let name = release.name();
        let (cloud, id) = one_cluster_on(release).await;
        let worker = cloud.unmap_last_worker(&id);
        let key = format!("unmapped_vm:{worker}");
        for new in [true, false] {
            let (run, report) = cloud.check_json(&[]).await;
            assert_eq!(run.code, 1, "{name}: {run:?}");
            assert_eq!(
                mismatches(&report),
                vec![(s("unmapped_vm"), key.clone(), Some(new))],
                "{name}"
            );
        }
        assert_eq!(cloud.sim().call_count("generateAlert"), 1, "{name}");
        assert_eq!(cloud.sim().call_count("addAnnotation"), 1, "{name}");
        assert_eq!(cloud.active_alerts().len(), 1, "{name}");
        cloud.sim().with_world(|w| w.add_map_row(&id, &worker));
        let (run, report) = cloud.check_json(&[]).await;
        assert_eq!(run.code, 0, "{name}: {run:?}");
        assert_eq!(mismatches(&report), vec![], "{name}");
        assert_eq!(cloud.active_alerts(), vec![], "{name}");
        let open_notes = cloud
            .sim()
            .with_world(|w| w.annotations.iter().filter(|a| !a.removed).count());
        assert_eq!(open_notes, 0, "{name}");
    }
}

#[tokio::test]
async fn a_lost_state_is_read_back_on_every_release() {
    for release in Release::SUPPORTED {
        let name = release.name();
        let (cloud, id) = one_cluster_on(release).await;
        cloud.unmap_last_worker(&id);
        let (run, _) = cloud.check_json(&[]).await;
        assert_eq!(run.code, 1, "{name}: {run:?}");
        std::fs::remove_file(cloud.state_path()).unwrap();
        let (run, report) = cloud.check_json(&[]).await;
        assert!(
            run.stderr
                .contains("what was reported was read back from CloudStack"),
            "{name}: {}",
            run.stderr
        );
        let found = mismatches(&report);
        assert_eq!(found.len(), 1, "{name}: {found:?}");
        assert_eq!(found[0].2, Some(false), "{name}");
        assert_eq!(cloud.sim().call_count("generateAlert"), 1, "{name}");
        assert_eq!(cloud.sim().call_count("addAnnotation"), 1, "{name}");
    }
}

#[tokio::test]
async fn validate_config_connect_names_the_release_on_every_release() {
    for release in Release::SUPPORTED {
        let name = release.name();
        let (cloud, _) = one_cluster_on(release).await;
        let run = validate_connect(&cloud).await;
        assert_eq!(run.code, 0, "{name}: {run:?}");
        let stdout = without_plain_http_warning(&run.stdout);
        let line = stdout
            .lines()
            .find(|l| l.starts_with("ok: cloudstack release: "))
            .unwrap_or_else(|| panic!("{name}: {stdout}"));
        let expected = format!("ok: cloudstack release: CloudStack {}", release.version());
        assert!(line.starts_with(&expected), "{name}: {line}");
        assert_eq!(
            line.contains("projectid=-1 leaves accounts' own networks out"),
            release < Release::V4_22,
            "{name}: {line}"
        );
        assert_eq!(
            line.contains("rows of the page as its count"),
            release < Release::V4_19_1,
            "{name}: {line}"
        );
        assert!(
            stdout.contains("ok: ssh: cluster web, root@"),
            "{name}: {stdout}"
        );
    }
}

#[tokio::test]
async fn validate_config_connect_refuses_a_release_before_4_16() {
    let (cloud, _) = one_cluster_on(Release::V4_15).await;
    let run = validate_connect(&cloud).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stdout.contains(
            "error: cloudstack release: CloudStack 4.15.2.0 is older than 4.16.0, the oldest release cks-drift supports"
        ),
        "{}",
        run.stdout
    );
    // Nothing past the refusal is tried.
    assert!(!run.stdout.contains("ok: ssh"), "{}", run.stdout);
}

#[tokio::test]
async fn a_key_whose_role_is_not_of_type_admin_is_refused_with_the_reason() {
    let (cloud, id) = one_cluster_on(Release::V4_20).await;
    cloud.unmap_last_worker(&id);
    cloud
        .sim()
        .with_world(|w| w.caller_role_type = "DomainAdmin".into());
    let reason = "the API key's user admin has a role of type DomainAdmin; cks-drift needs a role of type Admin (any name)";
    let run = validate_connect(&cloud).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stdout
            .contains(&format!("error: cloudstack key: {reason}")),
        "{}",
        run.stdout
    );
    // A cycle is not run: its report would miss other domains' clusters and could not read
    // back cks-drift's own annotations.
    let run = cloud.check(&[]).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains(reason), "{}", run.stderr);
    assert_eq!(cloud.sim().call_count("listKubernetesClusters"), 1);
    assert_eq!(cloud.sim().call_count("generateAlert"), 0);
}

#[tokio::test]
async fn answers_url_encoded_by_encode_api_response_are_refused_at_once() {
    let (cloud, id) = one_cluster_on(Release::V4_22).await;
    cloud.unmap_last_worker(&id);
    cloud.sim().set_encode_api_response(true);
    let run = validate_connect(&cloud).await;
    assert_eq!(run.code, 2, "{run:?}");
    let said = "CloudStack URL-encodes its answers (the global setting encode.api.response is true), so names and markers cannot be compared; set encode.api.response to false and restart the management servers";
    assert!(
        run.stdout
            .contains(&format!("error: cloudstack answers: {said}")),
        "{}",
        run.stdout
    );
    let run = cloud.check(&[]).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains(said), "{}", run.stderr);
    // Nothing compared, nothing sent.
    assert_eq!(cloud.sim().call_count("generateAlert"), 0);
    assert_eq!(cloud.sim().call_count("addAnnotation"), 0);
}

#[tokio::test]
async fn a_custom_role_without_get_user_is_warned_about_and_checking_goes_on() {
    let (cloud, id) = one_cluster_on(Release::V4_22_1).await;
    cloud.unmap_last_worker(&id);
    cloud
        .sim()
        .with_world(|w| w.caller_role_denies = vec!["getUser".into()]);
    let run = validate_connect(&cloud).await;
    assert_eq!(run.code, 0, "{run:?}");
    let line = run
        .stdout
        .lines()
        .find(|l| l.starts_with("warning: cloudstack key: cannot tell the type of the key's role"))
        .unwrap_or_else(|| panic!("{}", run.stdout));
    // CloudStack's own words say which command the role lacks.
    assert!(
        line.contains(
            "The API [getUser] does not exist or is not available for the account for user id ["
        ),
        "{line}"
    );
    let run = cloud.check(&[]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr
            .contains("cannot ask CloudStack who holds the API key"),
        "{}",
        run.stderr
    );
    assert_eq!(cloud.active_alerts().len(), 1);
}

#[tokio::test]
async fn on_4_23_a_key_pair_whose_rules_leave_out_a_command_fails_the_cycle_naming_it() {
    let (cloud, id) = one_cluster_on(Release::V4_23).await;
    cloud.unmap_last_worker(&id);
    let allowed: Vec<String> = cks_drift_sim::COMMANDS
        .iter()
        .filter(|c| **c != "listNetworks")
        .map(|c| c.to_string())
        .collect();
    cloud
        .sim()
        .with_world(|w| w.caller_key_pair_allows = Some(allowed));
    let run = cloud.check(&[]).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains(
            "The API [listNetworks] does not exist or is not available for the account admin."
        ),
        "{}",
        run.stderr
    );
    assert_eq!(cloud.sim().call_count("generateAlert"), 0);
}

#[tokio::test]
async fn on_4_23_a_vm_mapped_twice_fails_the_cluster_listing_and_nothing_is_cleared() {
    let (cloud, id) = one_cluster_on(Release::V4_23).await;
    cloud.unmap_last_worker(&id);
    let (run, _) = cloud.check_json(&[]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(cloud.active_alerts().len(), 1);
    let control = cloud.map(&id)[0].clone();
    cloud.sim().with_world(|w| w.add_map_row(&id, &control));
    let run = cloud.check(&[]).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("Duplicate key"), "{}", run.stderr);
    // CloudStack's error decides nothing: the finding stays alerted and annotated.
    assert_eq!(cloud.active_alerts().len(), 1);
    let open_notes = cloud
        .sim()
        .with_world(|w| w.annotations.iter().filter(|a| !a.removed).count());
    assert_eq!(open_notes, 1);
    cloud.sim().with_world(|w| {
        let map = &mut w.cluster_mut(&id).map;
        map.pop();
    });
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(report["mismatches"][0]["new"], false);
    assert_eq!(cloud.sim().call_count("generateAlert"), 1);
}

#[tokio::test]
async fn a_finding_read_back_from_its_annotation_alone_gets_its_alert_once() {
    let (cloud, id) = one_cluster_on(Release::NEWEST).await;
    cloud.unmap_last_worker(&id);
    let (run, _) = cloud.check_json(&[]).await;
    assert_eq!(run.code, 1, "{run:?}");
    // The instance that raised them stopped between its annotation and its alert: here, the
    // alert is gone and so is the state.
    cloud.sim().with_world(|w| {
        for a in &mut w.alerts {
            a.archived = true;
        }
    });
    std::fs::remove_file(cloud.state_path()).unwrap();
    for _ in 0..2 {
        let (run, _) = cloud.check_json(&[]).await;
        assert_eq!(run.code, 1, "{run:?}");
    }
    // Alerted again once, annotated once in all.
    assert_eq!(cloud.active_alerts().len(), 1);
    assert_eq!(cloud.sim().call_count("generateAlert"), 2);
    assert_eq!(cloud.sim().call_count("addAnnotation"), 1);
}
