//! The CloudStack database as a source and a lock, against a private MariaDB server holding
//! CloudStack's tables, filled from the same world as the fake CloudStack: the exact map
//! (upstream scenario 3), the same findings as the API where the API sees, a database that
//! fails for a cycle, and several `run` instances (the management servers) sharing one lock.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cks_drift_sim::NodeRole;
use cks_drift_sim::mariadb::{PrivateMariaDb, Schema, ServerTls};

use crate::support::cloud::{TestCloud, binary, mismatches, one_cluster, world_now};
use crate::support::pki::TestCa;

/// Long enough for a few cycles of a small cloud.
pub(crate) const SOON: Duration = Duration::from_secs(30);

/// Points the cloud's config at `db` (its password in a file), asking for the lock often.
pub(crate) fn use_database(cloud: &mut TestCloud, db: &PrivateMariaDb) {
    let password = cloud.dir.path().join("db_password");
    std::fs::write(&password, db.password()).unwrap();
    cloud.extra.push_str(&format!(
        "[database]\nurl = \"{}\"\npassword_file = \"{}\"\nlock_interval = \"300ms\"\nconnect_timeout = \"2s\"\nquery_timeout = \"5s\"\n",
        db.url(),
        password.display()
    ));
}

/// The database rewritten from the fake CloudStack's world: both describe one cloud.
pub(crate) fn mirror(cloud: &TestCloud, db: &PrivateMariaDb) {
    cloud.sim().with_world(|w| db.mirror(w));
}

fn kinds_and_keys(report: &serde_json::Value) -> Vec<(String, String)> {
    mismatches(report)
        .into_iter()
        .map(|(kind, key, _)| (kind, key))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn map_rows_of_an_expunged_vm_and_of_a_vm_that_never_existed_are_named() {
    let db = PrivateMariaDb::start(Schema::Newest);
    let (mut cloud, id) = one_cluster().await;
    // Scenario 3 of the upstream check: a row pointing at the VM of a node removed from
    // another cluster, since expunged, and a row pointing at a VM id that does not exist.
    let (expunged, expunged_name) = cloud.sim().with_world(|w| {
        let owner = w.admin();
        // Scaled down from two workers to one: the removed node's row went with it.
        let other = w.add_cluster("old", owner, 1, 2, 0);
        let vm = w.cluster(&other).unwrap().map[2].clone();
        assert!(w.remove_map_row(&other, &vm));
        w.cluster_mut(&other).size = 1;
        w.expunge_vm(&vm);
        w.add_map_row(&id, &vm);
        w.add_map_row(&id, "5d1c0000-dead-4000-8000-00000000beef");
        (vm.clone(), w.vm(&vm).unwrap().name.clone())
    });
    mirror(&cloud, &db);

    // Without a database the same world invents nothing: the API shows neither row.
    let (run, report) = cloud.check_json(&["--no-notify"]).await;
    assert_eq!(kinds_and_keys(&report), vec![], "{}", run.stderr);

    use_database(&mut cloud, &db);
    let (run, report) = cloud.check_json(&["--no-notify"]).await;
    let missing_id = cks_drift_sim::mariadb::vm_db_id(
        &cloud.sim().with_world(|w| w.clone()),
        "5d1c0000-dead-4000-8000-00000000beef",
    );
    let mut expected = vec![
        ("mapped_vm".to_string(), format!("mapped_vm:{expunged}")),
        ("mapped_vm".to_string(), format!("mapped_vm:{missing_id}")),
    ];
    expected.sort();
    assert_eq!(kinds_and_keys(&report), expected, "{}", run.stderr);
    let reasons: Vec<&str> = report["mismatches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["reason"].as_str().unwrap())
        .collect();
    assert!(
        reasons.iter().any(|r| r.starts_with(&format!(
            "VM {expunged_name} ({expunged}) is one of the VMs"
        )) && r.ends_with("has been expunged or unmanaged")),
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r
            .starts_with(&format!("VM with ID {missing_id} is one of the VMs"))
            && r.ends_with("does not exist")),
        "{reasons:?}"
    );
}

/// One check from the database's rows as they are, after the `vm_instance` row of `purged`
/// (if any) is deleted as CloudStack 4.20+'s purge deletes it (`ResourceCleanupServiceImpl`,
/// `purgeExpungedResources`): the map row keeps its `vm_id`. Returns the report's findings:
/// kind, key and reason.
async fn check_purged(
    cloud: &TestCloud,
    db: &PrivateMariaDb,
    purged: Option<&str>,
) -> Vec<(String, String, String)> {
    mirror(cloud, db);
    if let Some(uuid) = purged {
        db.sql(&format!("DELETE FROM vm_instance WHERE uuid = '{uuid}'"));
    }
    let (run, report) = cloud.check_json(&[]).await;
    assert!(!run.stderr.contains("cannot read"), "{}", run.stderr);
    assert!(
        !run.stderr.contains("differs from the API"),
        "{}",
        run.stderr
    );
    findings(&report)
}

/// A mapped worker destroyed, then expunged (its row removed; unless `see_expunged` is false:
/// CloudStack's offering-triggered purge runs about 3 minutes after the expunge, so a cycle
/// may never see that stage), then purged (its `vm_instance` row deleted), then its map row
/// deleted: one finding under one key, one event and one alert, until the map row goes.
async fn a_purged_vm_keeps_its_key(see_expunged: bool) {
    let db = PrivateMariaDb::start(Schema::Newest);
    let (mut cloud, id) = one_cluster().await;
    let (vm, name) = cloud.sim().with_world(|w| {
        let vm = w.cluster(&id).unwrap().map[2].clone();
        w.set_vm_state(&vm, "Destroyed");
        (vm.clone(), w.vm(&vm).unwrap().name.clone())
    });
    use_database(&mut cloud, &db);
    let key = format!("mapped_vm:{vm}");
    // The one finding, as the report gives it: kind, key and reason.
    let told = |what: &str| {
        let reason = format!(
            "VM {name} ({vm}) is one of the VMs of Kubernetes cluster web in CloudStack, but {what}"
        );
        [("mapped_vm".to_string(), key.clone(), reason)]
    };

    let found = check_purged(&cloud, &db, None).await;
    assert_eq!(found, told("is destroyed"));
    assert_eq!(cloud.sim().call_count("generateAlert"), 1);

    cloud.sim().with_world(|w| w.expunge_vm(&vm));
    if see_expunged {
        let found = check_purged(&cloud, &db, None).await;
        assert_eq!(found, told("has been expunged or unmanaged"));
    }
    // Purged: the map row names no VM any more, but the VM it named is remembered. Twice,
    // as the next cycles see it.
    for _ in 0..2 {
        let found = check_purged(&cloud, &db, Some(&vm)).await;
        assert_eq!(found, told("does not exist"));
    }
    assert_eq!(cloud.sim().call_count("generateAlert"), 1);
    assert_eq!(cloud.sim().call_count("archiveAlerts"), 0);
    assert_eq!(cloud.active_alerts().len(), 1);
    let events: Vec<serde_json::Value> = cloud
        .event_lines()
        .into_iter()
        .filter(|e| e["kind"] == "mapped_vm")
        .collect();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        (&events[0]["key"], &events[0]["level"]),
        (&key.as_str().into(), &"WARN".into())
    );

    // The cluster is scaled down to the workers it has: the VM's node and map row are
    // deleted. The finding resolves, its alert is archived, and the VM's database id is
    // forgotten.
    cloud.sim().with_world(|w| {
        assert!(w.remove_map_row(&id, &vm));
        w.cluster_mut(&id).size = 1;
    });
    let nodes = cloud.node_names(&id);
    let nodes: Vec<&str> = nodes.iter().map(String::as_str).collect();
    cloud.node(&id).kube.set_nodes(&nodes);
    assert_eq!(check_purged(&cloud, &db, Some(&vm)).await, []);
    assert_eq!(cloud.sim().call_count("generateAlert"), 1);
    assert_eq!(cloud.active_alerts().len(), 0);
    let state = std::fs::read_to_string(cloud.state_path()).unwrap();
    assert!(!state.contains(&vm), "{state}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vm_purged_after_it_was_expunged_keeps_its_key_and_its_one_alert() {
    a_purged_vm_keeps_its_key(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vm_purged_before_a_cycle_saw_it_expunged_keeps_its_key_and_its_one_alert() {
    a_purged_vm_keeps_its_key(false).await;
}

/// Every finding of a report, with the words it is told in: what must not depend on where the
/// VMs were read.
fn findings(report: &serde_json::Value) -> Vec<(String, String, String)> {
    let mut out: Vec<(String, String, String)> = report["mismatches"]
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
        .collect();
    out.sort();
    out
}

/// A `check` through the API alone and one with the database, on one world and from one
/// state (the file is put back between them): the same findings, told in the same words; the
/// API's VM listing is not called with the database. Returns the findings.
async fn both_ways(cloud: &mut TestCloud, db: &PrivateMariaDb) -> Vec<(String, String, String)> {
    mirror(cloud, db);
    let extra = cloud.extra.clone();
    let state = std::fs::read(cloud.state_path()).ok();
    cloud.sim().clear_calls();
    let (run, api_only) = cloud.check_json(&[]).await;
    assert!(
        cloud.sim().call_count("listVirtualMachines") > 0,
        "{}",
        run.stderr
    );
    match &state {
        Some(bytes) => std::fs::write(cloud.state_path(), bytes).unwrap(),
        None => std::fs::remove_file(cloud.state_path()).unwrap(),
    }
    use_database(cloud, db);
    cloud.sim().clear_calls();
    let (run, with_db) = cloud.check_json(&[]).await;
    cloud.extra = extra;
    assert_eq!(
        cloud.sim().call_count("listVirtualMachines"),
        0,
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("cannot read"), "{}", run.stderr);
    assert!(
        !run.stderr.contains("differs from the API"),
        "{}",
        run.stderr
    );
    let expected = findings(&api_only);
    assert_eq!(findings(&with_db), expected, "{}", run.stderr);
    expected
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn where_the_api_sees_the_database_gives_the_same_findings() {
    let db = PrivateMariaDb::start(Schema::V4_16);
    let mut world = world_now();
    let owner = world.admin();
    let web = world.add_cluster("web", owner.clone(), 1, 3, 0);
    let api = world.add_cluster("api", owner, 1, 2, 0);
    // A project's cluster, and a tenant of another domain whose cluster has a worker
    // outside its map.
    let project = world.add_project("shop");
    let shop = world.add_cluster("shop", project, 1, 1, 0);
    let domain = world.add_domain("tenants");
    let tenant = world.add_account("tenant", &domain);
    let tenants = world.add_cluster("tweb", tenant.clone(), 1, 1, 0);
    let stray = world.add_node_vm(&tenants, NodeRole::Worker, false);
    world.vm_mut(&stray).created = world.now.minus(Duration::from_secs(3600));
    // The tenant's VM named like a node of the admin's `web`: not the admin's, no finding.
    let lookalike = format!(
        "web-node-{:011x}",
        world.now.minus(Duration::from_secs(7200)).unix() * 1000
    );
    world.add_vm(&lookalike, tenant, None);
    // A destroyed mapped VM, a deleted map row (an unmapped VM), a VM that is no node, and
    // a node without a VM.
    let destroyed = world.cluster(&web).unwrap().map[1].clone();
    world.set_vm_state(&destroyed, "Destroyed");
    let unmapped = world.cluster(&api).unwrap().map[2].clone();
    assert!(world.remove_map_row(&api, &unmapped));
    let mut cloud = TestCloud::start(world).await;
    for id in [&web, &api, &shop, &tenants] {
        cloud.control_node(id).await;
    }
    // The last worker of `web` is no node; a node has no VM.
    let mut web_nodes = cloud.node_names(&web);
    web_nodes.pop();
    web_nodes.push("stray-node".into());
    let nodes: Vec<&str> = web_nodes.iter().map(String::as_str).collect();
    cloud.node(&web).kube.set_nodes(&nodes);

    let first = both_ways(&mut cloud, &db).await;
    let mut kinds: Vec<&str> = first.iter().map(|(k, _, _)| k.as_str()).collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "mapped_vm",
            "node_without_vm",
            "unmapped_vm",
            "unmapped_vm",
            "vm_not_a_node"
        ],
        "{first:#?}"
    );
    assert!(
        first
            .iter()
            .any(|(_, key, _)| key == &format!("unmapped_vm:{stray}"))
    );

    // From the state that cycle left: the project's worker leaves the map and is renamed by
    // hand (no longer named like a node: known only as mapped before), and the destroyed VM
    // is expunged (the API's probe finds it gone, the database shows its row).
    let renamed = cloud.sim().with_world(|w| {
        let vm = w.cluster(&shop).unwrap().map[1].clone();
        assert!(w.remove_map_row(&shop, &vm));
        w.vm_mut(&vm).name = "by-hand".into();
        w.expunge_vm(&destroyed);
        vm
    });
    let second = both_ways(&mut cloud, &db).await;
    assert_ne!(second, first);
    assert!(
        !second.iter().any(|(_, key, _)| key.ends_with(&renamed)),
        "a renamed VM is no node of the cluster: {second:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_fails_for_a_cycle_invents_resolves_and_loses_nothing() {
    let db = PrivateMariaDb::start(Schema::Newest);
    let (mut cloud, id) = one_cluster().await;
    cloud
        .sim()
        .with_world(|w| w.add_map_row(&id, "5d1c0000-dead-4000-8000-00000000beef"));
    mirror(&cloud, &db);
    use_database(&mut cloud, &db);
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(mismatches(&report).len(), 1, "{}", run.stderr);
    assert_eq!(cloud.sim().call_count("generateAlert"), 1);

    // The map query fails (its grant is gone); the lock needs none and stays.
    db.sql("REVOKE SELECT ON cloud.kubernetes_cluster_vm_map FROM 'cksdrift'@'127.0.0.1'");
    let (run, report) = cloud.check_json(&[]).await;
    assert!(
        run.stderr.contains(
            "cannot read the VM map and the VMs from the database; this cycle reads them through the API alone"
        ),
        "{}",
        run.stderr
    );
    assert_eq!(
        run.stderr.matches("cannot read the VM map").count(),
        1,
        "{}",
        run.stderr
    );
    let found = mismatches(&report);
    assert_eq!(found.len(), 1, "{found:?}\n{}", run.stderr);
    assert_eq!(found[0].2, Some(false));
    assert_eq!(cloud.sim().call_count("generateAlert"), 1);
    assert_eq!(cloud.sim().call_count("archiveAlerts"), 0);
    assert_eq!(cloud.active_alerts().len(), 1);

    db.sql("GRANT SELECT ON cloud.kubernetes_cluster_vm_map TO 'cksdrift'@'127.0.0.1'");
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(mismatches(&report).len(), 1, "{}", run.stderr);
    assert_eq!(cloud.sim().call_count("generateAlert"), 1);

    // The row is deleted: the finding resolves and its alert is archived.
    cloud
        .sim()
        .with_world(|w| assert!(w.remove_map_row(&id, "5d1c0000-dead-4000-8000-00000000beef")));
    mirror(&cloud, &db);
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(mismatches(&report).len(), 0, "{}", run.stderr);
    assert_eq!(cloud.active_alerts().len(), 0);
}

/// A `cks-drift run` instance: one management server's.
pub(crate) struct Instance {
    child: Child,
    log: PathBuf,
    pub(crate) port: u16,
}

impl Instance {
    /// Starts `run` with the cloud's config, its own state file and HTTP port, and a short
    /// interval.
    pub(crate) fn start(cloud: &TestCloud, name: &str) -> Instance {
        let port = free_port();
        let config = cloud.write_config();
        let text = std::fs::read_to_string(&config).unwrap();
        let state = cloud.dir.path().join(format!("{name}/state.json"));
        std::fs::create_dir_all(state.parent().unwrap()).unwrap();
        let text = text
            .replace(
                &format!("path = \"{}\"", cloud.state_path().display()),
                &format!("path = \"{}\"", state.display()),
            )
            .replace("listen = \"\"", &format!("listen = \"127.0.0.1:{port}\""))
            .replace("[check]\n", "[check]\ninterval = \"2s\"\n");
        let config = cloud.dir.path().join(format!("{name}.toml"));
        std::fs::write(&config, text).unwrap();
        let log = cloud.dir.path().join(format!("{name}.log"));
        let child = Command::new(binary())
            .arg("run")
            .arg("-c")
            .arg(&config)
            .env_remove("RUST_LOG")
            .env_remove("NOTIFY_SOCKET")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start cks-drift run");
        Instance { child, log, port }
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `/healthz` status and body, or `None` while the endpoint does not answer.
    pub(crate) async fn health(&self) -> Option<(u16, String)> {
        let r = reqwest::get(format!("http://127.0.0.1:{}/healthz", self.port))
            .await
            .ok()?;
        Some((r.status().as_u16(), r.text().await.ok()?))
    }

    pub(crate) async fn role(&self) -> Option<&'static str> {
        let text = reqwest::get(format!("http://127.0.0.1:{}/metrics", self.port))
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        if text.contains("cks_drift_role{role=\"active\"} 1") {
            Some("active")
        } else if text.contains("cks_drift_role{role=\"standby\"} 1") {
            Some("standby")
        } else {
            None
        }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.kill();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Polls `cond` every 100 ms until it holds, or panics naming `what`.
pub(crate) async fn wait_for<F, Fut>(what: &str, within: Duration, logs: &[&Instance], mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !cond().await {
        if started.elapsed() > within {
            let logs: Vec<String> = logs.iter().map(|i| i.log()).collect();
            panic!(
                "{what}: not within {within:?}; logs:\n{}",
                logs.join("\n----\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The index of the active instance, once one is active and the other stands by.
async fn active_of(instances: &[Instance; 2]) -> usize {
    let started = Instant::now();
    loop {
        match (instances[0].role().await, instances[1].role().await) {
            (Some("active"), Some("standby")) => return 0,
            (Some("standby"), Some("active")) => return 1,
            _ => {}
        }
        assert!(
            started.elapsed() < SOON,
            "no single active instance; logs:\n{}\n----\n{}",
            instances[0].log(),
            instances[1].log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_management_servers_alert_once_and_the_standby_takes_over() {
    let db = PrivateMariaDb::start(Schema::Newest);
    let (mut cloud, id) = one_cluster().await;
    let worker = cloud.unmap_last_worker(&id);
    mirror(&cloud, &db);
    use_database(&mut cloud, &db);
    let mut instances = [
        Instance::start(&cloud, "ms1"),
        Instance::start(&cloud, "ms2"),
    ];

    let active = active_of(&instances).await;
    let standby = 1 - active;
    {
        let [a, b] = &instances;
        wait_for("the drift alerted", SOON, &[a, b], || async {
            cloud.active_alerts().len() == 1
        })
        .await;
    }
    // A few more cycles: nothing more.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(cloud.sim().call_count("generateAlert"), 1);
    assert_eq!(cloud.sim().call_count("addAnnotation"), 1);
    let (status, text) = instances[standby].health().await.unwrap();
    assert_eq!(
        (status, text.trim()),
        (
            200,
            "standby: another instance holds the lock in the CloudStack database"
        )
    );
    assert!(
        instances[standby]
            .log()
            .contains("another instance holds the lock: this one stands by"),
        "{}",
        instances[standby].log()
    );
    // Its status page says so, in a browser, and the active one's shows the finding.
    let standby_url = format!("http://127.0.0.1:{}/", instances[standby].port);
    let active_url = format!("http://127.0.0.1:{}/", instances[active].port);
    let shot = crate::status_page::artifact("standby-page.png");
    let (standby_dom, active_dom) = tokio::task::spawn_blocking(move || {
        (
            crate::status_page::chromium(
                &standby_url,
                &[format!("--screenshot={}", shot.display())],
            ),
            crate::status_page::chromium(&active_url, &[]),
        )
    })
    .await
    .unwrap();
    assert!(
        standby_dom.contains("standby: another instance holds the lock in the CloudStack database"),
        "{standby_dom}"
    );
    assert!(
        standby_dom.contains("No cycle has run yet."),
        "{standby_dom}"
    );
    assert!(
        active_dom.contains("active: this instance holds the lock"),
        "{active_dom}"
    );
    assert!(active_dom.contains(&worker), "{active_dom}");

    // The active server dies: the other takes over within one interval (2 s) and its lock
    // attempt (0.3 s), reads back what was reported, and re-alerts nothing.
    instances[active].kill();
    let killed_at = Instant::now();
    {
        let s = &instances[standby];
        wait_for("the standby takes over", SOON, &[s], || async {
            s.role().await == Some("active")
        })
        .await;
    }
    assert!(
        killed_at.elapsed() < Duration::from_secs(2) + Duration::from_millis(1500),
        "took over after {:?}",
        killed_at.elapsed()
    );
    {
        let s = &instances[standby];
        wait_for("a cycle after the takeover", SOON, &[s], || async {
            s.log()
                .contains("what was reported was read back from CloudStack")
                && s.log().contains("cycle done")
        })
        .await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        cloud.sim().call_count("generateAlert"),
        1,
        "{}",
        instances[standby].log()
    );
    assert_eq!(cloud.sim().call_count("addAnnotation"), 1);

    // A drift after the takeover is alerted once; the first one resolves and is archived.
    cloud.sim().with_world(|w| w.add_map_row(&id, &worker));
    mirror(&cloud, &db);
    let mut nodes = cloud.node_names(&id);
    nodes.push("stray".into());
    let refs: Vec<&str> = nodes.iter().map(String::as_str).collect();
    cloud.node(&id).kube.set_nodes(&refs);
    {
        let s = &instances[standby];
        wait_for(
            "the new drift alerted, the old one archived",
            SOON,
            &[s],
            || async {
                let alerts = cloud.active_alerts();
                alerts.len() == 1 && alerts[0].description.contains("stray")
            },
        )
        .await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(cloud.sim().call_count("generateAlert"), 2);
    assert_eq!(cloud.active_alerts().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_that_loses_the_lock_mid_cycle_sends_nothing() {
    let db = PrivateMariaDb::start(Schema::Newest);
    let (mut cloud, id) = one_cluster().await;
    cloud.unmap_last_worker(&id);
    mirror(&cloud, &db);
    use_database(&mut cloud, &db);
    // Slow API answers keep the cycle running while the lock's connection is cut.
    cloud.sim().set_latency(Duration::from_millis(400));
    let cut = async {
        let started = Instant::now();
        loop {
            let holder = db.sql("SELECT IFNULL(IS_USED_LOCK('cks-drift.cloud'), 0)");
            let holder = holder.trim().to_string();
            if holder != "0" {
                // The cycle is under way (the lock is taken before it starts).
                tokio::time::sleep(Duration::from_millis(300)).await;
                db.sql(&format!("KILL {holder}"));
                return;
            }
            assert!(started.elapsed() < SOON, "the check never took the lock");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let (run, ()) = tokio::join!(cloud.check(&["--format", "json"]), cut);
    assert!(
        run.stderr.contains("not the active instance"),
        "{}",
        run.stderr
    );
    assert_eq!(cloud.sim().call_count("generateAlert"), 0);
    assert_eq!(cloud.sim().call_count("addAnnotation"), 0);
}

/// `validate-config --connect` with the cloud's config: its standard output.
pub(crate) async fn validate(cloud: &TestCloud) -> (i32, Vec<String>) {
    let config = cloud.write_config();
    let out = tokio::process::Command::new(binary())
        .args(["validate-config", "-c"])
        .arg(&config)
        .arg("--connect")
        .env_remove("RUST_LOG")
        .output()
        .await
        .expect("run cks-drift");
    let stdout = String::from_utf8_lossy(&out.stdout);
    (
        out.status.code().unwrap_or(-1),
        stdout
            .lines()
            .filter(|l| l.contains("database"))
            .map(str::to_string)
            .collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_config_connect_checks_the_login_the_schema_the_grants_and_the_lock() {
    let db = PrivateMariaDb::start(Schema::V4_16);
    let (mut cloud, _) = one_cluster().await;
    mirror(&cloud, &db);
    let base_extra = cloud.extra.clone();
    use_database(&mut cloud, &db);
    let (code, lines) = validate(&cloud).await;
    let at = format!("127.0.0.1:{}/cloud", db.port());
    assert_eq!(code, 0, "{lines:?}");
    assert_eq!(
        lines,
        [
            format!("ok: database: cksdrift@{at}: logged in"),
            "ok: database: schema of CloudStack 4.16 or later; the VM map query read 3 rows of 1 clusters"
                .to_string(),
            "ok: database (lock): the lock can be taken and released".to_string(),
        ]
    );

    // A user that may write is warned about; a wrong password is an error naming the fix.
    db.sql(
        "CREATE USER 'wide'@'127.0.0.1' IDENTIFIED BY 'wide-pw'; \
         GRANT SELECT, INSERT, UPDATE ON cloud.* TO 'wide'@'127.0.0.1'",
    );
    let password = cloud.dir.path().join("wide_password");
    std::fs::write(&password, "wide-pw").unwrap();
    cloud.extra = format!(
        "{base_extra}[database]\nurl = \"mysql://wide@{at}\"\npassword_file = \"{}\"\n",
        password.display()
    );
    let (code, lines) = validate(&cloud).await;
    assert_eq!(code, 0, "{lines:?}");
    assert!(
        lines.iter().any(|l| l
            == "warning: database: wide may also INSERT, UPDATE: cks-drift only reads, so give it a user with SELECT on kubernetes_cluster, kubernetes_cluster_vm_map and vm_instance alone (see docs/database.md)"),
        "{lines:?}"
    );
    std::fs::write(&password, "not-the-password").unwrap();
    let (code, lines) = validate(&cloud).await;
    assert_eq!(code, 2, "{lines:?}");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with(&format!(
            "error: database: cannot connect to the database at {at}: error 1045 (28000): Access denied for user 'wide'"
        )) && lines[0].ends_with("check database.url, the password (database.password_file or CKS_DRIFT_DB_PASSWORD) and that the user may log in from this host"),
        "{lines:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_whose_holder_went_silent_is_free_after_a_few_intervals() {
    use cks_drift::config::{DatabaseSettings, Secret, parse_database_url};
    use cks_drift::database::Database;
    use cks_drift::database::lock::{Holder, Lock, idle_timeout};
    let db = PrivateMariaDb::start(Schema::Newest);
    let (host, port, user, name) = parse_database_url(&db.url()).unwrap();
    let settings = DatabaseSettings {
        url: db.url(),
        host,
        port,
        user,
        name,
        password: Secret::new(db.password()),
        tls: false,
        ca_file: None,
        tls_server_name: None,
        connect_timeout: Duration::from_secs(5),
        query_timeout: Duration::from_secs(5),
        lock_interval: Duration::from_secs(1),
    };
    // A holder whose host is lost: its connection stays open on the server's side, and it
    // never confirms again (no `keep` runs).
    let lost = Lock::new(Database::new(&settings), settings.lock_interval);
    assert!(lost.try_acquire().await.unwrap());
    let other = Lock::new(Database::new(&settings), settings.lock_interval);
    assert!(!other.try_acquire().await.unwrap());
    // Both connect as one user: the standby sees the holder is one of its own, by its
    // connection and the address it comes from, and says so in its term.
    let Some(Holder::SameUser { connection, host }) = other.holder() else {
        panic!(
            "the holder is not seen as this user's: {:?}",
            other.holder()
        );
    };
    assert!(connection > 0);
    let host = host.expect("PROCESSLIST shows the holder's host");
    assert!(
        host.starts_with("127.0.0.1:") || host.starts_with("localhost"),
        "{host}"
    );
    assert_eq!(
        other.term().holder,
        Some(format!("database connection {connection} from {host}"))
    );
    // The server ends the silent connection after the lock connection's idle timeout (not
    // its own 8 hours), and the lock with it.
    assert_eq!(
        idle_timeout(settings.lock_interval),
        Duration::from_secs(10)
    );
    let started = Instant::now();
    loop {
        if other.try_acquire().await.unwrap() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(25),
            "the lock is still held by the silent connection"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(
        started.elapsed() >= Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    drop(lost);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_held_by_another_database_user_is_made_visible() {
    let db = PrivateMariaDb::start(Schema::Newest);
    let (mut cloud, _id) = one_cluster().await;
    mirror(&cloud, &db);
    use_database(&mut cloud, &db);
    // Any account on the database server may take the lock's name.
    let mut squatter = db.spawn_as_root(
        "SELECT GET_LOCK(LEFT(CONCAT('cks-drift.', DATABASE()), 64), 0); SELECT SLEEP(600);",
    );
    wait_for("the squatter's lock", SOON, &[], || async {
        db.sql("SELECT IS_USED_LOCK(LEFT(CONCAT('cks-drift.', DATABASE()), 64)) IS NOT NULL")
            .trim()
            == "1"
    })
    .await;
    let ms1 = Instance::start(&cloud, "ms1");
    let metrics = |i: &Instance| {
        let url = format!("http://127.0.0.1:{}/metrics", i.port);
        async move {
            match reqwest::get(url).await {
                Ok(r) => r.text().await.unwrap_or_default(),
                Err(_) => String::new(),
            }
        }
    };
    wait_for("the held_elsewhere gauge", SOON, &[&ms1], || async {
        metrics(&ms1)
            .await
            .contains("\ncks_drift_lock_held_elsewhere 1\n")
    })
    .await;
    assert_eq!(ms1.role().await, Some("standby"));
    assert!(
        ms1.log()
            .contains("by a connection of another database user: it may be no instance of cks-drift, and then none checks"),
        "{}",
        ms1.log()
    );
    // The squatter goes: the instance takes the lock, and the gauge is 0 again.
    let _ = squatter.kill();
    let _ = squatter.wait();
    wait_for("the lock taken", SOON, &[&ms1], || async {
        ms1.role().await == Some("active")
    })
    .await;
    assert!(
        metrics(&ms1)
            .await
            .contains("\ncks_drift_lock_held_elsewhere 0\n")
    );
}

/// The table, key and access type MariaDB plans for `vm_instance` in the node VMs query.
fn node_vms_plan(db: &PrivateMariaDb) -> (String, String) {
    db.sql("ANALYZE TABLE vm_instance, kubernetes_cluster, kubernetes_cluster_vm_map");
    let sql = cks_drift::database::statements::node_vms(cks_drift::database::vms::MAX_VM_ROWS + 1);
    let plan = db.sql(&format!("EXPLAIN {sql}"));
    let row = plan
        .lines()
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .find(|cols| cols.get(2) == Some(&"v"))
        .unwrap_or_else(|| panic!("no row for vm_instance in the plan:\n{plan}"));
    // id, select_type, table, type, possible_keys, key, ...
    (row[3].to_string(), row[5].to_string())
}

#[test]
fn the_node_vms_query_uses_the_account_index_whatever_its_name() {
    let db = PrivateMariaDb::start(Schema::Newest);
    // One owner of a cluster among 40 tenants of 50 VMs each: a plan that reads every
    // tenant's VMs would be a full scan or the `removed`/`type` index.
    let mut world = world_now();
    let owner = world.admin();
    world.add_cluster("k8s", owner, 1, 2, 0);
    let domain = world.add_domain("tenants");
    for t in 0..40 {
        let tenant = world.add_account(&format!("tenant{t}"), &domain);
        for v in 0..50 {
            world.add_vm(&format!("app{t}-{v}"), tenant.clone(), None);
        }
    }
    db.mirror(&world);

    // As CloudStack's create-schema.sql makes it since 3.0: the foreign key's index.
    assert_eq!(
        node_vms_plan(&db),
        ("ref".to_string(), "fk_vm_instance__account_id".to_string())
    );
    // As a database created by 2.2's create-schema.sql may still name it.
    db.sql(
        "ALTER TABLE vm_instance \
         RENAME INDEX fk_vm_instance__account_id TO i_vm_instance__account_id",
    );
    assert_eq!(
        node_vms_plan(&db),
        ("ref".to_string(), "i_vm_instance__account_id".to_string())
    );
    // Without it the plan reads other tenants' rows: what the two checks above rule out.
    db.sql("ALTER TABLE vm_instance DROP INDEX i_vm_instance__account_id");
    let (access, key) = node_vms_plan(&db);
    assert!(
        access != "ref" || !key.contains("account_id"),
        "{access} {key}"
    );
}

/// Creates `user`@127.0.0.1 with `grants` (each `GRANT ... ON ...` without its `TO`) and points
/// the config at it instead of the reader.
fn use_user(
    cloud: &mut TestCloud,
    base_extra: &str,
    db: &PrivateMariaDb,
    user: &str,
    grants: &[&str],
) {
    let mut sql = format!("CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY '{user}-pw';");
    for g in grants {
        sql.push_str(&format!("GRANT {g} TO '{user}'@'127.0.0.1';"));
    }
    db.sql(&sql);
    let password = cloud.dir.path().join(format!("{user}_password"));
    std::fs::write(&password, format!("{user}-pw")).unwrap();
    cloud.extra = format!(
        "{base_extra}[database]\nurl = \"mysql://{user}@127.0.0.1:{}/cloud\"\npassword_file = \"{}\"\n",
        db.port(),
        password.display()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn column_grants_give_no_false_warning_and_a_column_they_hide_is_named_as_a_grant() {
    let db = PrivateMariaDb::start(Schema::V4_16);
    let (mut cloud, _) = one_cluster().await;
    mirror(&cloud, &db);
    let base_extra = cloud.extra.clone();
    // Exactly the columns cks-drift reads, granted column by column.
    use_user(
        &mut cloud,
        &base_extra,
        &db,
        "narrow",
        &[
            "SELECT (`id`, `uuid`, `removed`, `account_id`) ON cloud.kubernetes_cluster",
            "SELECT (`id`, `cluster_id`, `vm_id`, `control_node`) ON cloud.kubernetes_cluster_vm_map",
            "SELECT (`id`, `uuid`, `name`, `state`, `removed`, `type`, `created`, `update_time`, \
             `account_id`) ON cloud.vm_instance",
        ],
    );
    let at = format!("127.0.0.1:{}/cloud", db.port());
    let (code, lines) = validate(&cloud).await;
    assert_eq!(code, 0, "{lines:?}");
    assert_eq!(
        lines,
        [
            format!("ok: database: narrow@{at}: logged in"),
            "ok: database: schema of CloudStack 4.16 or later; the VM map query read 3 rows of 1 clusters"
                .to_string(),
            "ok: database (lock): the lock can be taken and released".to_string(),
        ]
    );

    db.sql("REVOKE SELECT (`update_time`) ON cloud.vm_instance FROM 'narrow'@'127.0.0.1'");
    let (code, lines) = validate(&cloud).await;
    assert_eq!(code, 2, "{lines:?}");
    assert_eq!(
        lines,
        [
            format!("ok: database: narrow@{at}: logged in"),
            "error: database: the column update_time of vm_instance is not visible to this user: \
             its grant on the table names columns, and not this one; as an administrator, run \
             GRANT SELECT ON `cloud`.`vm_instance` TO 'narrow'@'127.0.0.1';"
                .to_string(),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_older_than_4_16_is_refused_by_its_release() {
    let db = PrivateMariaDb::start(Schema::V4_16);
    // Back to 4.15: schema-41520to41600.sql renamed master_node_count, added the autoscaling
    // columns and the map's control_node.
    db.sql(
        "ALTER TABLE kubernetes_cluster CHANGE control_node_count master_node_count bigint \
         NOT NULL DEFAULT 0, DROP COLUMN autoscaling_enabled, DROP COLUMN minsize, \
         DROP COLUMN maxsize; ALTER TABLE kubernetes_cluster_vm_map DROP COLUMN control_node",
    );
    let (mut cloud, _) = one_cluster().await;
    use_database(&mut cloud, &db);
    let (code, lines) = validate(&cloud).await;
    assert_eq!(code, 2, "{lines:?}");
    assert_eq!(
        lines[1],
        "error: database: the tables are those of CloudStack 4.14 or 4.15 (kubernetes_cluster_vm_map \
         has no column control_node, added by 4.16): cks-drift reads the database of 4.16 or \
         later; upgrade CloudStack, or remove [database] to read everything through the API",
        "{lines:?}"
    );
}

/// The test MariaDB's TLS from server certificate `name` of `ca` (see [`TestCa::server`]).
fn server_tls(ca: &TestCa, name: &str, cn: &str, alt_names: &[&str]) -> ServerTls {
    let (cert, key) = ca.server(name, cn, alt_names);
    ServerTls { cert, key }
}

/// [`use_database`] with more `[database]` lines.
fn use_database_with(cloud: &mut TestCloud, db: &PrivateMariaDb, lines: &str) {
    use_database(cloud, db);
    cloud.extra.push_str(lines);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_to_a_server_without_tls_says_so_and_how_to_turn_it_off() {
    let db = PrivateMariaDb::start(Schema::V4_16);
    let (mut cloud, _) = one_cluster().await;
    use_database_with(&mut cloud, &db, "tls = true\n");
    let (code, lines) = validate(&cloud).await;
    assert_eq!(code, 2, "{lines:?}");
    assert_eq!(
        lines,
        [format!(
            "error: database: cannot connect to the database at 127.0.0.1:{}/cloud with TLS: the \
             server offers no TLS; MariaDB ships with TLS off (SHOW VARIABLES LIKE 'have_ssl' \
             says DISABLED): give the server ssl_cert and ssl_key (see docs/database.md, TLS to \
             the database), or set database.tls = false if the network to the database is \
             trusted (TLS is on by default for a host other than loopback)",
            db.port()
        )]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_a_certificate_that_names_no_host_says_so_in_validate_and_in_runs_log() {
    let (mut cloud, _) = one_cluster().await;
    let certs = cloud.dir.path().join("certs");
    std::fs::create_dir(&certs).unwrap();
    let ca = TestCa::new(&certs);
    // As MySQL's auto-generated server certificate: a CN and no subjectAltName.
    let tls = server_tls(
        &ca,
        "cn-only",
        "MySQL_Server_8.0.36_Auto_Generated_Server_Certificate",
        &[],
    );
    let db = PrivateMariaDb::start_with(Schema::V4_16, Some(tls));
    mirror(&cloud, &db);
    use_database_with(
        &mut cloud,
        &db,
        &format!("ca_file = \"{}\"\n", ca.path("ca.pem").display()),
    );
    let (code, lines) = validate(&cloud).await;
    assert_eq!(code, 2, "{lines:?}");
    let expected = format!(
        "cannot connect to the database at 127.0.0.1:{}/cloud with TLS: the server's certificate \
         names no host (it has no subjectAltName, and its subject's CN is not read); MySQL's \
         auto-generated certificates are like this. Give the server a certificate with \
         subjectAltName DNS:<its host name> (or IP:<its address>), signed by the CA in \
         database.ca_file, or set database.tls = false if the network to the database is trusted",
        db.port()
    );
    assert_eq!(lines, [format!("error: database: {expected}")]);

    // `run` stands by, and its log says why the lock cannot be asked for.
    let instance = Instance::start(&cloud, "ms1");
    wait_for("the TLS failure in run's log", SOON, &[&instance], || {
        let log = instance.log();
        let seen = log.contains("cannot ask for the lock") && log.contains(&expected);
        async move { seen }
    })
    .await;
    assert_eq!(instance.role().await, Some("standby"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_an_unknown_ca_or_another_name_says_which_setting_fixes_it() {
    let (mut cloud, _) = one_cluster().await;
    let base_extra = cloud.extra.clone();
    let certs = cloud.dir.path().join("certs");
    std::fs::create_dir(&certs).unwrap();
    let ca = TestCa::new(&certs);
    let tls = server_tls(&ca, "named", "db.example.test", &["DNS:db.example.test"]);
    let db = PrivateMariaDb::start_with(Schema::V4_16, Some(tls));
    mirror(&cloud, &db);
    let at = format!("127.0.0.1:{}/cloud", db.port());

    // No CA file: the webpki roots do not know the private CA.
    use_database_with(&mut cloud, &db, "tls = true\n");
    let (code, lines) = validate(&cloud).await;
    assert_eq!(code, 2, "{lines:?}");
    assert_eq!(
        lines,
        [format!(
            "error: database: cannot connect to the database at {at} with TLS: the server's \
             certificate is signed by a CA that cks-drift does not know; set database.ca_file to \
             the PEM of the CA that signed the server's certificate (MySQL's auto-generated one \
             is ca.pem in its data directory), or database.tls = false if the network to the \
             database is trusted"
        )]
    );

    // The CA, but the URL's host is an address the certificate does not hold.
    let ca_line = format!("ca_file = \"{}\"\n", ca.path("ca.pem").display());
    cloud.extra = base_extra.clone();
    use_database_with(&mut cloud, &db, &ca_line);
    let (code, lines) = validate(&cloud).await;
    assert_eq!(code, 2, "{lines:?}");
    assert_eq!(
        lines,
        [format!(
            "error: database: cannot connect to the database at {at} with TLS: the server's \
             certificate is for db.example.test and not for 127.0.0.1; write that host in \
             database.url, or set database.tls_server_name = \"db.example.test\" (the \
             certificate is checked against it; the connection still goes to the URL's host)"
        )]
    );

    // The fix it names works.
    cloud.extra = base_extra;
    use_database_with(
        &mut cloud,
        &db,
        &format!("{ca_line}tls_server_name = \"db.example.test\"\n"),
    );
    let (code, lines) = validate(&cloud).await;
    assert_eq!(code, 0, "{lines:?}");
    assert_eq!(lines[0], format!("ok: database: cksdrift@{at}: logged in"));
}
