//! What a real CloudStack refuses, end to end with the default notification settings: texts
//! that fit every parameter, alerts and annotations that operators (or a cluster's
//! destruction) took away first, refusals that end an item without holding others back, and
//! nothing sent while the state file cannot be written.

use std::path::{Path, PathBuf};
use std::process::Command;

use cks_drift::diff::wording::{alert_marker, annotation_marker};

use crate::support::cloud::{Run, TestCloud, mismatches, one_cluster, world_now};

/// `(entity id, text)` of every annotation not removed.
fn annotations(cloud: &TestCloud) -> Vec<(String, String)> {
    cloud.sim().with_world(|w| {
        w.annotations
            .iter()
            .filter(|a| !a.removed)
            .map(|a| (a.entity_id.clone(), a.annotation.clone()))
            .collect()
    })
}

fn outbox(cloud: &TestCloud) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(cloud.state_path()).unwrap();
    let state: serde_json::Value = serde_json::from_str(&text).unwrap();
    state["outbox"].as_array().unwrap().clone()
}

/// The lines of a run's log at a level.
fn log_lines<'a>(run: &'a Run, level: &str) -> Vec<&'a str> {
    run.stderr
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some(level))
        .collect()
}

fn assert_delivered_cleanly(cloud: &TestCloud, run: &Run) {
    assert!(
        !run.stderr.contains("not delivered") && !run.stderr.contains("refused"),
        "{}",
        run.stderr
    );
    assert_eq!(outbox(cloud), Vec::<serde_json::Value>::new());
}

/// A cluster name of 255 UTF-16 units (CloudStack's default parameter length) with
/// characters outside the Basic Multilingual Plane.
fn long_cluster_name() -> String {
    let mut name = String::from("Équipe données ");
    while name.encode_utf16().count() + 2 <= 255 {
        name.push('🚀');
    }
    while name.encode_utf16().count() < 255 {
        name.push('x');
    }
    name
}

/// A node name of 253 characters, the longest DNS name.
fn long_node_name() -> String {
    format!(
        "{}.{}.{}.{}",
        "n".repeat(63),
        "o".repeat(63),
        "d".repeat(63),
        "e".repeat(61)
    )
}

#[tokio::test]
async fn every_upstream_finding_gets_its_alert_and_annotation_with_the_default_config() {
    let mut world = world_now();
    let owner = world.admin();
    let unmapped = world.add_cluster("scenario-2", owner.clone(), 1, 2, 0);
    let destroyed = world.add_cluster("scenario-3", owner.clone(), 1, 2, 0);
    let not_a_node = world.add_cluster("scenario-4", owner.clone(), 1, 2, 0);
    let long = world.add_cluster(&long_cluster_name(), owner, 1, 2, 0);
    let mut cloud = TestCloud::start(world).await;
    for id in [&unmapped, &destroyed, &not_a_node, &long] {
        cloud.control_node(id).await;
    }
    // Scenario 2: a worker's map row deleted.
    cloud.unmap_last_worker(&unmapped);
    // Scenario 3 as the API shows it: mapped VMs Destroyed and Expunging.
    let map = cloud.map(&destroyed);
    cloud.sim().with_world(|w| {
        w.set_vm_state(&map[1], "Destroyed");
        w.set_vm_state(&map[2], "Expunging");
    });
    // Scenario 4: kubelet stopped and the node deleted.
    let names: Vec<String> = cloud
        .map(&not_a_node)
        .iter()
        .map(|v| cloud.sim().with_world(|w| w.vm(v).unwrap().name.clone()))
        .collect();
    cloud
        .node(&not_a_node)
        .kube
        .set_nodes(&[&names[0], &names[1]]);
    // A node with the longest name a node can have, in the cluster with the longest name.
    let mut nodes: Vec<String> = cloud.node_names(&long);
    nodes.push(long_node_name());
    let refs: Vec<&str> = nodes.iter().map(String::as_str).collect();
    cloud.node(&long).kube.set_nodes(&refs);

    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(run.code, 1, "{run:?}");
    let found = mismatches(&report);
    assert_eq!(found.len(), 5, "{found:?}");
    assert_delivered_cleanly(&cloud, &run);
    assert_eq!(cloud.active_alerts().len(), 5);
    assert_eq!(annotations(&cloud).len(), 5);

    // Scenario 3's gone VM, seen mapped in the cycle before: expunged now.
    let gone = cloud.map(&not_a_node)[1].clone();
    cloud.sim().with_world(|w| w.expunge_vm(&gone));
    let (run, report) = cloud.check_json(&[]).await;
    assert_delivered_cleanly(&cloud, &run);
    let found: Vec<(String, String)> = report["mismatches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["cluster_id"].as_str().unwrap().to_string(),
                m["key"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(found.contains(&(not_a_node.clone(), format!("mapped_vm:{gone}"))));
    let alerts = cloud.active_alerts();
    let notes = annotations(&cloud);
    assert_eq!(alerts.len(), found.len(), "{alerts:#?}");
    assert_eq!(notes.len(), found.len(), "{notes:#?}");
    for (cluster_id, key) in &found {
        let alert = alerts
            .iter()
            .filter(|a| a.description.ends_with(&alert_marker(cluster_id, key)))
            .count();
        assert_eq!(alert, 1, "one alert for {key}: {alerts:#?}");
        let note = notes
            .iter()
            .filter(|(e, t)| e == cluster_id && t.ends_with(&annotation_marker(key)))
            .count();
        assert_eq!(note, 1, "one annotation for {key}: {notes:#?}");
    }
    // The long node is named in its annotation (cut), and whole in its alert.
    let node = long_node_name();
    let (_, note) = notes.iter().find(|(e, _)| e == &long).unwrap();
    assert!(note.contains(&node[..100]), "{note}");
    assert!(alerts.iter().any(|a| a.description.contains(&node)));
}

#[tokio::test]
async fn an_alert_archived_by_hand_is_done_and_a_finding_that_comes_back_is_alerted_again() {
    let (cloud, id) = one_cluster().await;
    let worker = cloud.unmap_last_worker(&id);
    cloud.check_json(&[]).await;
    assert_eq!(cloud.active_alerts().len(), 1);
    // An operator archives it in the UI.
    cloud
        .sim()
        .with_world(|w| w.alerts.iter_mut().for_each(|a| a.archived = true));
    // Resolved: archiving it again is refused with 530, which means it is done.
    cloud.sim().with_world(|w| w.add_map_row(&id, &worker));
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(mismatches(&report), vec![]);
    assert_delivered_cleanly(&cloud, &run);
    assert_eq!(cloud.sim().call_count("archiveAlerts"), 1);
    // Back again: one new alert.
    cloud.unmap_last_worker(&id);
    let (run, _) = cloud.check_json(&[]).await;
    assert_delivered_cleanly(&cloud, &run);
    assert_eq!(cloud.active_alerts().len(), 1);
    assert_eq!(cloud.sim().call_count("generateAlert"), 2);
}

#[tokio::test]
async fn a_cluster_deleted_with_open_findings_ends_its_items() {
    let mut world = world_now();
    let owner = world.admin();
    let web = world.add_cluster("web", owner.clone(), 1, 2, 0);
    let db = world.add_cluster("db", owner, 1, 1, 0);
    let mut cloud = TestCloud::start(world).await;
    cloud.control_node(&web).await;
    cloud.control_node(&db).await;
    cloud.unmap_last_worker(&web);
    let names: Vec<String> = cloud.node_names(&web);
    cloud
        .node(&web)
        .kube
        .set_nodes(&[&names[0], &names[1], "stray"]);
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(mismatches(&report).len(), 2, "{report}");
    assert_delivered_cleanly(&cloud, &run);
    assert_eq!(annotations(&cloud).len(), 2);
    // One of its alerts archived by hand, then the cluster destroyed: CloudStack removes
    // its annotations with it.
    cloud.sim().with_world(|w| {
        w.alerts[0].archived = true;
        w.destroy_cluster(&web);
    });
    assert_eq!(annotations(&cloud), vec![]);
    let (run, _) = cloud.check_json(&[]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_delivered_cleanly(&cloud, &run);
    assert_eq!(cloud.active_alerts(), vec![]);
    let text = std::fs::read_to_string(cloud.state_path()).unwrap();
    let state: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(state["alerts"], serde_json::json!({}));
    assert_eq!(state["annotations"], serde_json::json!({}));
    assert!(state["clusters"].get(&web).is_none());
    // Nothing is tried again.
    let removals = cloud.sim().call_count("removeAnnotation");
    cloud.check_json(&[]).await;
    assert_eq!(cloud.sim().call_count("removeAnnotation"), removals);
}

#[tokio::test]
async fn a_refused_annotation_ends_with_one_error_and_the_alert_still_goes_out() {
    let (cloud, id) = one_cluster().await;
    let worker = cloud.unmap_last_worker(&id);
    let key = format!("unmapped_vm:{worker}");
    let text = "Unable to execute API command addannotation due to invalid value. Value greater than max allowed length 255 for param: annotation";
    cloud
        .sim()
        .fail_next_with_error("addAnnotation", 1, 431, text);
    let (run, _) = cloud.check_json(&[]).await;
    assert_eq!(run.code, 1, "{run:?}");
    let errors = log_lines(&run, "ERROR");
    assert_eq!(errors.len(), 1, "{}", run.stderr);
    assert!(
        errors[0].contains("CloudStack refused the notification for good")
            && errors[0].contains("channel=\"annotation\"")
            && errors[0].contains(&format!("cluster_id=\"{id}\""))
            && errors[0].contains(&format!("key=\"{key}\""))
            && errors[0].contains(text),
        "{}",
        errors[0]
    );
    assert_eq!(outbox(&cloud), Vec::<serde_json::Value>::new());
    assert_eq!(cloud.active_alerts().len(), 1);
    assert_eq!(annotations(&cloud), vec![]);
    // Ended for good: not tried again, and the finding resolves cleanly.
    cloud.sim().with_world(|w| w.add_map_row(&id, &worker));
    let (run, _) = cloud.check_json(&[]).await;
    assert_delivered_cleanly(&cloud, &run);
    assert_eq!(cloud.sim().call_count("addAnnotation"), 1);
    assert_eq!(cloud.sim().call_count("removeAnnotation"), 0);
    assert_eq!(cloud.active_alerts(), vec![]);
}

#[tokio::test]
async fn a_failing_annotation_does_not_hold_back_the_alert_of_its_finding() {
    let (cloud, id) = one_cluster().await;
    cloud.unmap_last_worker(&id);
    cloud
        .sim()
        .fail_next_with_error("addAnnotation", 1, 530, "database is busy");
    let (run, _) = cloud.check_json(&[]).await;
    assert!(run.stderr.contains("not delivered"), "{}", run.stderr);
    assert_eq!(cloud.active_alerts().len(), 1);
    let left = outbox(&cloud);
    assert_eq!(left.len(), 1, "{left:#?}");
    assert_eq!(left[0]["action"], "add_annotation");
    let (run, _) = cloud.check_json(&[]).await;
    assert_delivered_cleanly(&cloud, &run);
    assert_eq!(annotations(&cloud).len(), 1);
    assert_eq!(cloud.sim().call_count("generateAlert"), 1);
}

/// A small tmpfs mounted over a folder, unmounted on drop: a disk that can be filled.
pub(crate) struct SmallDisk {
    path: PathBuf,
}

impl SmallDisk {
    pub(crate) fn mount(path: &Path) -> SmallDisk {
        SmallDisk::mount_sized(path, "256k")
    }

    /// A disk of `size` (`mount -o size=`).
    pub(crate) fn mount_sized(path: &Path, size: &str) -> SmallDisk {
        std::fs::create_dir_all(path).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(path)
            .status()
            .expect("run mount");
        assert!(status.success(), "mount tmpfs on {}", path.display());
        SmallDisk {
            path: path.to_path_buf(),
        }
    }

    /// Fills the disk to the last byte.
    pub(crate) fn fill(&self) {
        let filler = self.path.join("filler");
        let _ = Command::new("dd")
            .args(["if=/dev/zero", "bs=4k"])
            .arg(format!("of={}", filler.display()))
            .output();
    }

    pub(crate) fn free(&self) {
        std::fs::remove_file(self.path.join("filler")).unwrap();
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.path).status();
    }
}

#[tokio::test]
async fn a_full_disk_and_an_api_failure_send_nothing() {
    let (mut cloud, id) = one_cluster().await;
    let disk = SmallDisk::mount(cloud.state_path().parent().unwrap());
    let events = cloud.dir.path().join("events.jsonl");
    cloud.extra = format!("[notify]\nevent_log = \"{}\"\n", events.display());
    // A first run with nothing to report: the state exists (nothing to read back later).
    cloud.check_json(&[]).await;
    cloud.unmap_last_worker(&id);
    // The first run decides and records the finding, but CloudStack is unwell: the alert
    // and the annotation stay queued.
    cloud
        .sim()
        .fail_next_with_error("generateAlert", 1, 530, "down");
    cloud
        .sim()
        .fail_next_with_error("listAnnotations", 1, 530, "down");
    cloud.check_json(&[]).await;
    assert_eq!(outbox(&cloud).len(), 2);
    let lines = std::fs::read_to_string(&events).unwrap().lines().count();
    // Now the disk is full and the API fails the cycle: the queued items are not sent.
    disk.fill();
    cloud
        .sim()
        .fail_next_with_error("listKubernetesClusters", 1, 530, "down");
    let run = cloud.check(&[]).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr
            .contains("cannot write the state file; nothing is sent this cycle"),
        "{}",
        run.stderr
    );
    assert_eq!(cloud.sim().call_count("generateAlert"), 1);
    assert_eq!(cloud.sim().call_count("addAnnotation"), 0);
    assert_eq!(
        std::fs::read_to_string(&events).unwrap().lines().count(),
        lines
    );
    // Space again: everything goes out, once.
    disk.free();
    let (run, _) = cloud.check_json(&[]).await;
    assert_delivered_cleanly(&cloud, &run);
    assert_eq!(cloud.active_alerts().len(), 1);
    assert_eq!(annotations(&cloud).len(), 1);
    assert_eq!(cloud.sim().call_count("generateAlert"), 2);
}

#[tokio::test]
async fn a_lost_state_file_is_read_back_from_cloudstack_and_nothing_is_alerted_again() {
    let (cloud, id) = one_cluster().await;
    let worker = cloud.unmap_last_worker(&id);
    let names: Vec<String> = cloud.node_names(&id);
    let worker_name = cloud
        .sim()
        .with_world(|w| w.vm(&worker).unwrap().name.to_lowercase());
    let mut nodes: Vec<&str> = names.iter().map(String::as_str).collect();
    nodes.extend([worker_name.as_str(), "stray"]);
    cloud.node(&id).kube.set_nodes(&nodes);
    let (_, report) = cloud.check_json(&[]).await;
    assert_eq!(mismatches(&report).len(), 2, "{report}");
    assert_eq!(cloud.active_alerts().len(), 2);
    assert_eq!(annotations(&cloud).len(), 2);

    // The state volume is lost; the instance starts again, first with CloudStack failing the
    // read back: nothing is decided or sent then.
    std::fs::remove_file(cloud.state_path()).unwrap();
    cloud
        .sim()
        .fail_next_with_error("listAlerts", 1, 530, "the database is down");
    let (run, _) = cloud.check_json(&[]).await;
    assert!(
        run.stderr
            .contains("cannot read back from CloudStack what was reported"),
        "{}",
        run.stderr
    );
    assert_eq!(cloud.sim().call_count("generateAlert"), 2);
    assert!(!cloud.state_path().exists());
    let (run, report) = cloud.check_json(&[]).await;
    assert!(
        run.stderr
            .contains("what was reported was read back from CloudStack"),
        "{}",
        run.stderr
    );
    let found = mismatches(&report);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found.iter().all(|(_, _, new)| *new == Some(false)),
        "{found:?}"
    );
    assert_eq!(cloud.sim().call_count("generateAlert"), 2);
    assert_eq!(cloud.sim().call_count("addAnnotation"), 2);
    assert_delivered_cleanly(&cloud, &run);

    // Both resolve later: the alerts are archived, the annotations removed.
    cloud.sim().with_world(|w| w.add_map_row(&id, &worker));
    cloud.node(&id).kube.set_nodes(&nodes[..nodes.len() - 1]);
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(mismatches(&report), vec![]);
    assert_delivered_cleanly(&cloud, &run);
    assert_eq!(cloud.active_alerts(), vec![]);
    assert_eq!(annotations(&cloud), vec![]);
}
