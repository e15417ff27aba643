//! Reporting each mismatch once, over several runs of `cks-drift check` (each a restart):
//! the state file, CloudStack alerts with its suppression, annotations, the event log, and
//! nothing lost when a notification or the API fails.

use std::collections::BTreeSet;
use std::time::Duration;

use cks_drift::base::time::Timestamp;
use cks_drift::front::demo::SimTransport;
use cks_drift::state::file::StateFile;
use cks_drift_sim::{NodeRole, Sim, SimAlert, SimTime};

use crate::support::cloud::{Run, TestCloud, mismatches, one_cluster, s, world_now};

fn annotations(cloud: &TestCloud) -> Vec<String> {
    cloud.sim().with_world(|w| {
        w.annotations
            .iter()
            .filter(|a| !a.removed)
            .map(|a| a.annotation.clone())
            .collect()
    })
}

/// `(level, key or description)` of each event line.
fn events(cloud: &TestCloud) -> Vec<(String, String)> {
    cloud
        .event_lines()
        .iter()
        .map(|e| {
            let level = e["level"].as_str().unwrap().to_string();
            let what = e["key"]
                .as_str()
                .or(e["description"].as_str())
                .unwrap()
                .to_string();
            (level, what)
        })
        .collect()
}

fn assert_only_own_writes(cloud: &TestCloud) {
    let allowed: BTreeSet<&str> = [
        "generateAlert",
        "archiveAlerts",
        "addAnnotation",
        "removeAnnotation",
    ]
    .into();
    for call in cloud.sim().state_changing_calls() {
        assert!(
            allowed.contains(call.command.as_str()),
            "cks-drift called {}",
            call.command
        );
    }
}

fn state(cloud: &TestCloud) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(cloud.state_path()).unwrap()).unwrap()
}

#[tokio::test]
async fn reported_once_then_resolved_with_info_and_clean_up() {
    // Upstream scenario 2 over several cycles, each a new process.
    let (cloud, id) = one_cluster().await;
    let worker = cloud.unmap_last_worker(&id);
    let key = format!("unmapped_vm:{worker}");

    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(
        mismatches(&report),
        vec![(s("unmapped_vm"), key.clone(), Some(true))]
    );
    let alerts = cloud.active_alerts();
    assert_eq!(alerts.len(), 1);
    assert_eq!(alerts[0].alert_type, 3000);
    assert_eq!(alerts[0].name, "KUBERNETES.CLUSTER.VM.MAP.CHECK");
    let cluster_zone = cloud
        .sim()
        .with_world(|w| w.cluster(&id).unwrap().zone_id.clone());
    assert_eq!(alerts[0].zone_id.as_deref(), Some(cluster_zone.as_str()));
    let vm_name = cloud
        .sim()
        .with_world(|w| w.vm(&worker).unwrap().name.clone());
    assert!(
        alerts[0].description.starts_with(&format!(
            "Kubernetes cluster web, VM {vm_name} ({worker}): "
        )),
        "{}",
        alerts[0].description
    );
    assert!(alerts[0].description.contains("Nothing was changed."));
    assert!(
        alerts[0]
            .description
            .ends_with(&format!("[cks-drift {id}/{key}]"))
    );
    let notes = annotations(&cloud);
    assert_eq!(notes.len(), 1);
    assert!(
        notes[0].contains(&vm_name) && notes[0].contains(&worker),
        "{}",
        notes[0]
    );
    assert!(cloud.sim().with_world(|w| w.annotations[0].admins_only));
    assert_eq!(events(&cloud), vec![(s("WARN"), key.clone())]);

    // Later cycles: still open, not new, nothing sent again.
    for _ in 0..2 {
        let (run, report) = cloud.check_json(&[]).await;
        assert_eq!(run.code, 1, "{run:?}");
        assert_eq!(
            mismatches(&report),
            vec![(s("unmapped_vm"), key.clone(), Some(false))]
        );
    }
    assert_eq!(cloud.sim().call_count("generateAlert"), 1);
    assert_eq!(cloud.sim().call_count("addAnnotation"), 1);
    assert_eq!(events(&cloud).len(), 1);
    let text = cloud.check(&[]).await.stdout;
    assert!(
        text.contains(&format!(
            "        web  unmapped_vm  VM {vm_name} ({worker}, Running)"
        )),
        "{text}"
    );

    // Undone: INFO, the alert archived, the annotation removed.
    cloud.sim().with_world(|w| w.add_map_row(&id, &worker));
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(mismatches(&report), vec![]);
    assert_eq!(
        events(&cloud).last().unwrap(),
        &(
            s("INFO"),
            s(
                "The VM map of Kubernetes cluster web matches the VMs of the cluster in CloudStack again"
            )
        )
    );
    assert_eq!(cloud.active_alerts(), vec![]);
    assert_eq!(annotations(&cloud), Vec::<String>::new());
    assert_eq!(state(&cloud)["clusters"][&id]["vms"], serde_json::json!({}));

    // Back again: reported again.
    cloud.unmap_last_worker(&id);
    let (_, report) = cloud.check_json(&[]).await;
    assert_eq!(
        mismatches(&report),
        vec![(s("unmapped_vm"), key, Some(true))]
    );
    assert_eq!(cloud.sim().call_count("generateAlert"), 2);
    assert_only_own_writes(&cloud);
}

#[tokio::test]
async fn a_mapped_vm_keeps_one_key_from_destroyed_to_gone() {
    let (cloud, id) = one_cluster().await;
    let (run, _) = cloud.check_json(&[]).await; // remembers the map
    assert_eq!(run.code, 0, "{run:?}");
    let worker = cloud.map(&id)[1].clone();
    let key = format!("mapped_vm:{worker}");
    cloud
        .sim()
        .with_world(|w| w.set_vm_state(&worker, "Destroyed"));
    let (_, report) = cloud.check_json(&[]).await;
    assert_eq!(
        mismatches(&report),
        vec![(s("mapped_vm"), key.clone(), Some(true))]
    );

    cloud
        .sim()
        .with_world(|w| w.set_vm_state(&worker, "Expunging"));
    let (_, report) = cloud.check_json(&[]).await;
    assert_eq!(
        mismatches(&report),
        vec![(s("mapped_vm"), key.clone(), Some(false))]
    );

    // Expunged: the API drops its map row and no longer lists the VM. The remembered id is
    // probed (empty list) and it stays the same mismatch; its node is gone too.
    cloud.sim().with_world(|w| w.expunge_vm(&worker));
    let names: Vec<String> = cloud.sim().with_world(|w| {
        w.cluster(&id)
            .unwrap()
            .map
            .iter()
            .filter_map(|v| w.vm(v))
            .filter(|v| !v.removed)
            .map(|v| v.name.clone())
            .collect()
    });
    cloud
        .node(&id)
        .kube
        .set_nodes(&names.iter().map(String::as_str).collect::<Vec<_>>());
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(
        mismatches(&report),
        vec![(s("mapped_vm"), key.clone(), Some(false))]
    );
    assert_eq!(report["mismatches"][0]["vm_state"], "Expunged");
    assert!(
        report["mismatches"][0]["reason"]
            .as_str()
            .unwrap()
            .ends_with("but has been expunged or unmanaged")
    );
    assert_eq!(cloud.sim().call_count("generateAlert"), 1);
    // The probe: listVirtualMachines id=<uuid>.
    assert!(
        cloud
            .sim()
            .calls()
            .iter()
            .any(|c| c.command == "listVirtualMachines" && c.params.get("id") == Some(&worker))
    );

    // Its map row deleted at last, and the cluster's size with it: the remembered row no
    // longer fits in the map (shown rows + gone rows > expected), so it is resolved.
    cloud.sim().with_world(|w| {
        w.remove_map_row(&id, &worker);
        w.cluster_mut(&id).size = 1;
    });
    let (run, _) = cloud.check_json(&[]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(cloud.active_alerts(), vec![]);
}

#[tokio::test]
async fn a_remembered_map_row_whose_vm_never_existed() {
    let (cloud, id) = one_cluster().await;
    cloud.check_json(&[]).await;
    // The VM row disappears from the database entirely: its uuid is unknown (error 431).
    let worker = cloud.map(&id)[2].clone();
    cloud.sim().with_world(|w| w.vms.retain(|v| v.id != worker));
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(run.code, 1, "{run:?}");
    let found = mismatches(&report);
    assert!(
        found.contains(&(s("mapped_vm"), format!("mapped_vm:{worker}"), Some(true))),
        "{found:?}"
    );
    let m = report["mismatches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["kind"] == "mapped_vm")
        .unwrap();
    assert_eq!(m["vm_state"], "Missing");
    assert!(
        m["reason"]
            .as_str()
            .unwrap()
            .ends_with("but does not exist")
    );
    // No map_count: the vanished row explains the gap.
    assert!(!found.iter().any(|f| f.0 == "map_count"), "{found:?}");
}

#[tokio::test]
async fn ssh_broken_keeps_node_findings() {
    // Upstream scenario 5.
    let (mut cloud, id) = one_cluster().await;
    let ids = cloud.map(&id);
    let names: Vec<String> = cloud
        .sim()
        .with_world(|w| ids.iter().map(|v| w.vm(v).unwrap().name.clone()).collect());
    cloud.node(&id).kube.set_nodes(&[&names[0], &names[1]]);
    let (_, report) = cloud.check_json(&[]).await;
    let node_key = format!("vm_not_a_node:{}", ids[2]);
    assert_eq!(
        mismatches(&report),
        vec![(s("vm_not_a_node"), node_key.clone(), Some(true))]
    );

    // SSH broken; the node rejoins meanwhile; a map row is deleted.
    cloud.node_mut(&id).sshd.take().unwrap().stop();
    cloud
        .node(&id)
        .kube
        .set_nodes(&[&names[0], &names[1], &names[2]]);
    let worker = cloud.unmap_last_worker(&id);
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(
        mismatches(&report),
        vec![
            (
                s("unmapped_vm"),
                format!("unmapped_vm:{worker}"),
                Some(true)
            ),
            (s("vm_not_a_node"), node_key.clone(), Some(false)),
        ]
    );
    assert_eq!(report["clusters"][0]["status"], "partial");
    assert_eq!(cloud.sim().call_count("archiveAlerts"), 0);
    assert_eq!(events(&cloud).iter().filter(|e| e.0 == "INFO").count(), 0);

    // SSH back, row restored: both sides match again.
    let ip = cloud.node(&id).ip;
    let sshd = crate::support::sshd::Sshd::start_at(ip, 2222);
    sshd.authorize(&cloud.dir.path().join("client_key.pub"));
    // A new sshd has new host keys: a rebuilt node. accept-new refuses it, so forget the old.
    std::fs::remove_file(cloud.dir.path().join("known_hosts")).unwrap();
    cloud.node_mut(&id).sshd = Some(sshd);
    cloud.sim().with_world(|w| w.add_map_row(&id, &worker));
    let (run, _) = cloud.check_json(&[]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let infos: Vec<String> = events(&cloud)
        .into_iter()
        .filter(|e| e.0 == "INFO")
        .map(|e| e.1)
        .collect();
    assert_eq!(
        infos,
        vec![
            s(
                "The VM map of Kubernetes cluster web matches the VMs of the cluster in CloudStack again"
            ),
            s(
                "The VM map of Kubernetes cluster web matches the Kubernetes nodes of the cluster again"
            ),
        ]
    );
    assert_eq!(cloud.active_alerts(), vec![]);
}

#[tokio::test]
async fn cluster_mid_operation_keeps_its_findings() {
    let (cloud, id) = one_cluster().await;
    let worker = cloud.unmap_last_worker(&id);
    cloud.check_json(&[]).await;
    // A scale starts: the cluster is skipped, its finding kept (not resolved, not re-sent).
    cloud.sim().with_world(|w| {
        w.set_cluster_state(&id, "Scaling");
        w.add_map_row(&id, &worker);
    });
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(report["clusters"][0]["status"], "skipped");
    assert_eq!(
        mismatches(&report),
        vec![(
            s("unmapped_vm"),
            format!("unmapped_vm:{worker}"),
            Some(false)
        )]
    );
    assert_eq!(cloud.sim().call_count("archiveAlerts"), 0);
    assert_eq!(events(&cloud).len(), 1);
}

#[tokio::test]
async fn two_mismatches_in_one_zone_both_land_despite_suppression() {
    let (cloud, id) = one_cluster().await;
    let ids = cloud.map(&id);
    cloud.sim().with_world(|w| {
        w.set_vm_state(&ids[1], "Error");
        w.set_vm_state(&ids[2], "Destroyed");
    });
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(mismatches(&report).len(), 2);
    let mut types: Vec<i16> = cloud.active_alerts().iter().map(|a| a.alert_type).collect();
    types.sort();
    assert_eq!(types, vec![3000, 3001]);
    // One resolves: only its alert is archived.
    cloud
        .sim()
        .with_world(|w| w.set_vm_state(&ids[1], "Running"));
    cloud.check_json(&[]).await;
    let left = cloud.active_alerts();
    assert_eq!(left.len(), 1);
    assert!(
        left[0]
            .description
            .ends_with(&format!("mapped_vm:{}]", ids[2]))
    );
}

#[tokio::test]
async fn an_alert_the_daemon_did_not_raise_is_left_alone() {
    let (cloud, id) = one_cluster().await;
    // Someone else's un-archived alert holds type 3000 in the zone.
    cloud.sim().with_world(|w| {
        let zone = w.cluster(&id).unwrap().zone_id.clone();
        let now = w.now;
        w.alerts.push(SimAlert {
            id: "foreign-alert".into(),
            alert_type: 3000,
            name: "SOMETHING.ELSE".into(),
            description: "not ours".into(),
            zone_id: Some(zone),
            pod_id: None,
            sent: now,
            archived: false,
        });
    });
    let worker = cloud.unmap_last_worker(&id);
    cloud.check_json(&[]).await;
    let ours: Vec<i16> = cloud
        .active_alerts()
        .iter()
        .filter(|a| a.id != "foreign-alert")
        .map(|a| a.alert_type)
        .collect();
    assert_eq!(ours, vec![3001]);
    cloud.sim().with_world(|w| w.add_map_row(&id, &worker));
    cloud.check_json(&[]).await;
    let left: Vec<String> = cloud.active_alerts().iter().map(|a| a.id.clone()).collect();
    assert_eq!(left, vec![s("foreign-alert")]);
    for call in cloud
        .sim()
        .calls()
        .iter()
        .filter(|c| c.command == "archiveAlerts")
    {
        assert_ne!(
            call.params.get("ids").map(String::as_str),
            Some("foreign-alert")
        );
        assert!(
            !call.params.contains_key("type"),
            "archives by type would touch other alerts"
        );
    }
}

#[tokio::test]
async fn alert_cap_sums_up_the_rest() {
    let mut world = world_now();
    let owner = world.admin();
    let id = world.add_cluster("web", owner, 1, 1, 0);
    let mut strays = Vec::new();
    for _ in 0..7 {
        let vm = world.add_node_vm(&id, NodeRole::Worker, false);
        world.vm_mut(&vm).created = SimTime::now().minus(Duration::from_secs(3600));
        strays.push(vm);
    }
    let mut cloud = TestCloud::start(world).await;
    cloud.control_node(&id).await;
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(mismatches(&report).len(), 7);
    let alerts = cloud.active_alerts();
    assert_eq!(alerts.len(), 6, "{alerts:#?}");
    let summaries: Vec<&SimAlert> = alerts
        .iter()
        .filter(|a| {
            a.description
                .contains("2 more VM map mismatches found at once")
        })
        .collect();
    assert_eq!(summaries.len(), 1);
    // Annotations are capped like alerts (each is a CloudStack event); the event log has all.
    assert_eq!(annotations(&cloud).len(), 5);
    assert_eq!(events(&cloud).len(), 7);
    // The nodes of the strays are not Kubernetes nodes here; no node finding is expected.

    // The state is lost, then the strays are mapped: the summary, read back from CloudStack
    // with the findings it names, is archived with them.
    std::fs::remove_file(cloud.state_path()).unwrap();
    cloud.sim().with_world(|w| {
        for vm in &strays {
            w.add_map_row(&id, vm);
        }
    });
    let (run, _) = cloud.check_json(&[]).await;
    assert_eq!(
        cloud.active_alerts(),
        Vec::<SimAlert>::new(),
        "{}",
        run.stderr
    );
}

#[tokio::test]
async fn api_outage_resolves_nothing_and_invents_nothing() {
    let (cloud, id) = one_cluster().await;
    let worker = cloud.unmap_last_worker(&id);
    cloud.check_json(&[]).await;
    let before = std::fs::read(cloud.state_path()).unwrap();
    // The drift is undone, but the API fails: nothing may be resolved.
    cloud.sim().with_world(|w| w.add_map_row(&id, &worker));
    cloud.sim().fail_next(
        "listVirtualMachines",
        20,
        503,
        "<html>Service Unavailable</html>",
    );
    let run = cloud.check(&[]).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("cannot list virtual machines"),
        "{}",
        run.stderr
    );
    assert_eq!(std::fs::read(cloud.state_path()).unwrap(), before);
    assert_eq!(cloud.active_alerts().len(), 1);
    assert_eq!(events(&cloud).len(), 1);
}

/// Fails `listVirtualMachines id=…` (the probe of a vanished map row); passes the rest.
struct FailingProbe(SimTransport);

impl cks_drift::cloudstack::transport::Transport for FailingProbe {
    fn send(
        &self,
        request: cks_drift::cloudstack::request::ApiRequest,
    ) -> cks_drift::cloudstack::transport::TransportFuture<'_> {
        if request.command == "listVirtualMachines" && request.params.iter().any(|(k, _)| k == "id")
        {
            let body = concat!(
                r#"{"listvirtualmachinesresponse":{"uuidList":[],"#,
                r#""errorcode":530,"errortext":"database down"}}"#
            );
            return Box::pin(async {
                Ok(cks_drift::cloudstack::transport::RawResponse {
                    status: 530,
                    body: body.into(),
                }
                .into())
            });
        }
        self.0.send(request)
    }
}

/// Lists every node a test asks for, whatever the target.
struct FixedNodes(Vec<cks_drift::snapshot::Node>);

impl cks_drift::remote::NodeLister for FixedNodes {
    fn list_nodes<'a>(
        &'a self,
        _: &'a cks_drift::remote::SshTarget,
    ) -> cks_drift::remote::NodeListFuture<'a> {
        Box::pin(async move { Ok(self.0.clone()) })
    }
}

#[tokio::test]
async fn a_failed_probe_skips_the_cluster_and_keeps_its_state() {
    use cks_drift::cloudstack::client::{Client, ClientOptions};
    use cks_drift::engine::cycle::{ClusterStatus, CycleSettings, SkipKind, run_cycle};
    use cks_drift::engine::observe;
    use cks_drift::state::State;
    use cks_drift::state::step::{StepSettings, previous_maps, step};
    use std::sync::Arc;

    let mut world = world_now();
    let owner = world.admin();
    let id = world.add_cluster("web", owner, 1, 2, 0);
    let names: Vec<String> = world
        .cluster(&id)
        .unwrap()
        .map
        .iter()
        .map(|v| world.vm(v).unwrap().name.clone())
        .collect();
    let sim = Arc::new(Sim::new(world));
    let api = Client::with_transport(
        Arc::new(FailingProbe(SimTransport(sim.clone()))),
        ClientOptions::default(),
    );
    let lister = Arc::new(FixedNodes(
        names
            .into_iter()
            .map(cks_drift::snapshot::Node::named)
            .collect(),
    ));
    let settings = CycleSettings {
        policy: Default::default(),
        concurrency: 2,
        default_user: "cloud".into(),
        node_deadline: std::time::Duration::from_secs(600),
        database: None,
    };
    let on = StepSettings {
        alerts: true,
        annotations: true,
        alert_cap: 5,
        owner_alert_cap: 1000,
        blind_after: cks_drift::config::DEFAULT_BLIND_AFTER,
        resolve_after: std::time::Duration::ZERO,
        owner_alerts_per_hour: 100_000,
        alert_types: 1000,
        storm: cks_drift::config::StormThreshold::Off,
        alertmanager: false,
    };
    let mut state = State::default();

    let now = Timestamp::now();
    let report = run_cycle(&api, lister.clone(), &settings, &previous_maps(&state), now)
        .await
        .unwrap();
    step(
        &mut state,
        &observe(&mut report.clone(), &[], now),
        &on,
        now,
    );
    let before = state.clone();

    let worker = sim.with_world(|w| w.cluster(&id).unwrap().map[2].clone());
    sim.with_world(|w| w.expunge_vm(&worker));
    let report = run_cycle(&api, lister, &settings, &previous_maps(&state), now)
        .await
        .unwrap();
    let c = &report.clusters[0];
    assert_eq!(c.status, ClusterStatus::Skipped);
    assert_eq!(c.skip, Some(SkipKind::ApiFailed));
    assert!(
        c.reason
            .as_deref()
            .unwrap()
            .starts_with("an API call failed: "),
        "{:?}",
        c.reason
    );
    assert!(c.mismatches.is_empty());
    step(
        &mut state,
        &observe(&mut report.clone(), &[], now),
        &on,
        now,
    );
    assert_eq!(
        state, before,
        "a cluster whose probe failed keeps its state and sends nothing"
    );
    assert_eq!(cks_drift::front::report::exit_code(&report), 3);
}

#[tokio::test]
async fn a_failed_alert_is_delivered_exactly_once_later() {
    let (cloud, id) = one_cluster().await;
    cloud.unmap_last_worker(&id);
    cloud
        .sim()
        .fail_next_with_error("generateAlert", 1, 530, "Failed to generate an alert");
    let (run, _) = cloud.check_json(&[]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("notification not delivered"),
        "{}",
        run.stderr
    );
    assert_eq!(cloud.active_alerts(), vec![]);
    assert_eq!(annotations(&cloud).len(), 1);
    assert_eq!(state(&cloud)["outbox"].as_array().unwrap().len(), 1);
    cloud.check_json(&[]).await;
    assert_eq!(cloud.active_alerts().len(), 1);
    assert_eq!(state(&cloud)["outbox"], serde_json::json!([]));
    cloud.check_json(&[]).await;
    assert_eq!(cloud.active_alerts().len(), 1);
    assert_eq!(cloud.sim().call_count("generateAlert"), 2); // the failed one and the good one
    assert_eq!(annotations(&cloud).len(), 1);
    assert_eq!(events(&cloud).len(), 1);
}

/// One cluster, a first run with nothing to report (the state exists: nothing to read back
/// later), then a worker unmapped and a run that decides and records everything while
/// CloudStack refuses the writes: the alert and the annotation stay queued. Returns the
/// cloud, the cluster's id and the unmapped worker.
async fn a_drift_left_queued() -> (TestCloud, String, String) {
    let (cloud, id) = one_cluster().await;
    cloud.check_json(&[]).await;
    let worker = cloud.unmap_last_worker(&id);
    refuse_the_next_writes(&cloud);
    cloud.check_json(&[]).await;
    (cloud, id, worker)
}

/// Stores in CloudStack, as `stored-before-crash`, the alert queued in the state: it was
/// delivered, and the process died before its record was written.
fn store_the_queued_alert(cloud: &TestCloud, cluster_id: &str) {
    let outbox = state(cloud)["outbox"].as_array().unwrap().clone();
    let description = outbox
        .iter()
        .find(|o| o["action"] == "raise_alert")
        .unwrap()["description"]
        .as_str()
        .unwrap()
        .to_string();
    cloud.sim().with_world(|w| {
        let zone = w.cluster(cluster_id).unwrap().zone_id.clone();
        let now = w.now;
        w.alerts.push(SimAlert {
            id: "stored-before-crash".into(),
            alert_type: 3000,
            name: "KUBERNETES.CLUSTER.VM.MAP.CHECK".into(),
            description,
            zone_id: Some(zone),
            pod_id: None,
            sent: now,
            archived: false,
        });
    });
}

#[tokio::test]
async fn a_crash_between_state_write_and_send_delivers_once() {
    // The outbox holds the alert and the annotation, as if the process died right after the
    // state was written.
    let (cloud, id, worker) = a_drift_left_queued().await;
    let outbox = state(&cloud)["outbox"].as_array().unwrap().clone();
    assert_eq!(outbox.len(), 2, "{outbox:#?}");
    // Worse: the alert did reach CloudStack before the crash, only its record was lost.
    store_the_queued_alert(&cloud, &id);
    cloud.check_json(&[]).await;
    cloud.check_json(&[]).await;
    let alerts = cloud.active_alerts();
    assert_eq!(alerts.len(), 1, "{alerts:#?}");
    assert_eq!(alerts[0].id, "stored-before-crash");
    // Never generated again after the first run's failed attempt: the marker found the
    // stored one.
    assert_eq!(cloud.sim().call_count("generateAlert"), 1);
    assert_eq!(annotations(&cloud).len(), 1);
    assert_eq!(state(&cloud)["outbox"], serde_json::json!([]));
    // And the recorded alert is the one archived on resolution.
    cloud.sim().with_world(|w| w.add_map_row(&id, &worker));
    cloud.check_json(&[]).await;
    assert_eq!(cloud.active_alerts(), vec![]);
}

/// Refuses the next alert and the next annotation (530: the database down), so that a run
/// decides and records both and leaves them queued.
fn refuse_the_next_writes(cloud: &TestCloud) {
    let sim = cloud.sim();
    sim.fail_next_with_error("generateAlert", 1, 530, "down");
    sim.fail_next_with_error("listAnnotations", 1, 530, "down");
}

#[tokio::test]
async fn a_drift_that_ends_before_its_alert_reaches_cloudstack_is_not_alerted_after() {
    let (cloud, id, worker) = a_drift_left_queued().await;
    assert_eq!(state(&cloud)["outbox"].as_array().unwrap().len(), 2);
    // The drift ends before CloudStack takes writes again: the archive and the removal are
    // queued behind the raise and the annotation.
    cloud.sim().with_world(|w| w.add_map_row(&id, &worker));
    let (run, _) = cloud.check_json(&[]).await;
    assert!(
        run.stderr
            .contains("the finding ended before this reached CloudStack"),
        "{}",
        run.stderr
    );
    // Nothing was created only to be taken back: one failed generateAlert, no annotation.
    assert_eq!(cloud.sim().call_count("generateAlert"), 1);
    assert_eq!(cloud.sim().call_count("addAnnotation"), 0);
    assert_eq!(cloud.sim().call_count("archiveAlerts"), 0);
    assert_eq!(cloud.sim().with_world(|w| w.alerts.len()), 0);
    assert_eq!(state(&cloud)["outbox"], serde_json::json!([]));
    // The event log tells the drift and its end.
    let told = events(&cloud);
    assert_eq!(told.len(), 2, "{told:?}");
    assert_eq!(
        told[0],
        ("WARN".to_string(), format!("unmapped_vm:{worker}"))
    );
    assert_eq!(told[1].0, "INFO");
    assert!(told[1].1.contains("matches"), "{told:?}");
    // If it comes back, it is alerted as new, once.
    cloud.unmap_last_worker(&id);
    cloud.check_json(&[]).await;
    assert_eq!(cloud.active_alerts().len(), 1);
    assert_eq!(annotations(&cloud).len(), 1);
}

#[tokio::test]
async fn an_alert_stored_before_a_crash_for_a_drift_that_ended_since_is_archived() {
    let (cloud, id, worker) = a_drift_left_queued().await;
    // The alert reached CloudStack before a crash lost its record.
    store_the_queued_alert(&cloud, &id);
    cloud.sim().with_world(|w| w.add_map_row(&id, &worker));
    cloud.check_json(&[]).await;
    // Found by its marker, recorded, and archived by the item queued behind it.
    assert_eq!(cloud.active_alerts(), vec![]);
    let archived = cloud.sim().with_world(|w| {
        w.alerts
            .iter()
            .map(|a| (a.id.clone(), a.archived))
            .collect::<Vec<_>>()
    });
    assert_eq!(archived, [("stored-before-crash".to_string(), true)]);
    assert_eq!(cloud.sim().call_count("generateAlert"), 1);
    assert_eq!(state(&cloud)["outbox"], serde_json::json!([]));
    assert_eq!(state(&cloud)["alerts"], serde_json::json!({}));
}

#[tokio::test]
async fn a_corrupt_state_file_is_moved_aside() {
    let (cloud, id) = one_cluster().await;
    cloud.unmap_last_worker(&id);
    std::fs::create_dir_all(cloud.state_path().parent().unwrap()).unwrap();
    std::fs::write(cloud.state_path(), b"{\"version\":1,\"clusters\":{").unwrap();
    let (run, _) = cloud.check_json(&[]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("moved aside"), "{}", run.stderr);
    let moved: Vec<_> = std::fs::read_dir(cloud.state_path().parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("state.json.corrupt-"))
        .collect();
    assert_eq!(moved.len(), 1);
    assert_eq!(state(&cloud)["version"], 2);
}

#[tokio::test]
async fn a_second_instance_is_refused() {
    let (cloud, _) = one_cluster().await;
    let (_held, _, _) = StateFile::open(&cloud.state_path(), Timestamp::now()).unwrap();
    let run: Run = cloud.check(&[]).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(
        run.stderr.trim_end(),
        format!(
            "cks-drift: state file {} is in use by another cks-drift (pid {}); stop it or point state.path elsewhere, or check without notifying (cks-drift check --no-notify neither uses nor locks the state file)",
            cloud.state_path().display(),
            std::process::id()
        )
    );
    assert_eq!(cloud.sim().calls().len(), 0, "nothing ran before the lock");
    // What the message offers works while the lock is held.
    let run: Run = cloud.check(&["--no-notify"]).await;
    assert_eq!(run.code, 0, "{run:?}");
}

#[tokio::test]
async fn no_notify_sends_nothing_and_changes_no_state() {
    let (cloud, id) = one_cluster().await;
    cloud.unmap_last_worker(&id);
    cloud.check_json(&[]).await;
    let before = std::fs::read(cloud.state_path()).unwrap();
    cloud.sim().clear_calls();
    let vm = cloud.map(&id)[1].clone();
    cloud.sim().with_world(|w| w.set_vm_state(&vm, "Error"));
    let (run, _) = cloud.check_json(&["--no-notify"]).await;
    assert_eq!(run.code, 1);
    assert_eq!(cloud.sim().state_changing_calls(), vec![]);
    assert_eq!(std::fs::read(cloud.state_path()).unwrap(), before);
}
