//! The lock on a Galera node, against a real single-node Galera cluster (MariaDB with
//! galera-4, `wsrep_on = ON`): `GET_LOCK` there is the node's alone, so `validate-config
//! --connect`, `check` and `run` name the node and warn; a lone server gets none of it.

use cks_drift_sim::mariadb::{GALERA_CLUSTER, GALERA_NODE, PrivateMariaDb, Schema};

use crate::daemon::promtool;
use crate::database::{Instance, SOON, mirror, use_database, validate, wait_for};
use crate::support::cloud::one_cluster;

/// How the warning about the node starts: the node, named, and its cluster of one.
fn galera_node() -> String {
    format!("Galera node {GALERA_NODE} (host ")
}

/// The warning's reason and fix, after the node's description.
const LOCAL: &str = ": GET_LOCK is local to that node, so an instance connected to another \
     node of the cluster holds the lock too and alerts every mismatch again. Make every \
     instance reach the same node";

/// `/metrics` of `instance`, empty while it does not answer.
async fn metrics(instance: &Instance) -> String {
    let url = format!("http://127.0.0.1:{}/metrics", instance.port);
    match reqwest::get(url).await {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_config_connect_names_the_galera_node_and_warns_that_the_lock_is_local() {
    let db = PrivateMariaDb::start_galera(Schema::V4_16);
    let (mut cloud, _) = one_cluster().await;
    mirror(&cloud, &db);
    use_database(&mut cloud, &db);
    let (code, lines) = validate(&cloud).await;
    // A warning, not an error: one instance on one node, or several through one node, is fine.
    assert_eq!(code, 0, "{lines:?}");
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert_eq!(
        lines[2],
        "ok: database (lock): the lock can be taken and released"
    );
    let warning = &lines[3];
    assert!(
        warning.starts_with(&format!(
            "warning: database (lock): the lock is taken on {}",
            galera_node()
        )) && warning.contains(&format!(") of cluster {GALERA_CLUSTER}, 1 node{LOCAL}")),
        "{warning}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_and_run_on_a_galera_node_name_it_in_the_log_healthz_and_metrics() {
    let db = PrivateMariaDb::start_galera(Schema::Newest);
    let (mut cloud, id) = one_cluster().await;
    cloud.unmap_last_worker(&id);
    mirror(&cloud, &db);
    use_database(&mut cloud, &db);

    // `check` takes the lock for its cycle: it warns as `run` does.
    let run = cloud.check(&["--format", "json"]).await;
    assert!(
        run.stderr
            .contains(&format!("the lock is taken on {}", galera_node()))
            && run.stderr.contains(LOCAL),
        "{}",
        run.stderr
    );

    let ms1 = Instance::start(&cloud, "ms1");
    wait_for("the lock taken", SOON, &[&ms1], || async {
        ms1.role().await == Some("active")
    })
    .await;
    let log = ms1.log();
    let held = log
        .lines()
        .find(|l| l.contains("this instance holds the lock: it checks and notifies"))
        .unwrap_or_else(|| panic!("no line of the lock taken in\n{log}"));
    assert!(
        held.contains(&format!("node={}", galera_node()))
            && held.contains(&format!("of cluster {GALERA_CLUSTER}, 1 node")),
        "{held}"
    );
    assert!(
        log.lines().any(|l| l.contains("WARN")
            && l.contains(&format!("the lock is taken on {}", galera_node()))
            && l.contains(LOCAL)),
        "{log}"
    );

    let (status, text) = ms1.health().await.unwrap();
    assert_eq!(status, 200, "{text}");
    let text = text.trim();
    assert!(
        text.starts_with("ok: ")
            && text.contains(&format!("; the lock is local to {}", galera_node()))
            && text.ends_with(&format!("of cluster {GALERA_CLUSTER}, 1 node")),
        "{text}"
    );

    let exposition = metrics(&ms1).await;
    let series = format!(
        "\ncks_drift_database_lock_node_info{{kind=\"galera\",node=\"{GALERA_NODE}\",\
         cluster=\"{GALERA_CLUSTER}\"}} 1\n"
    );
    assert!(exposition.contains(&series), "{exposition}");
    promtool(&exposition);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_server_is_named_a_server_and_nothing_is_warned() {
    let db = PrivateMariaDb::start(Schema::Newest);
    let (mut cloud, _) = one_cluster().await;
    mirror(&cloud, &db);
    use_database(&mut cloud, &db);
    let (code, lines) = validate(&cloud).await;
    assert_eq!(code, 0, "{lines:?}");
    assert!(!lines.iter().any(|l| l.contains("warning")), "{lines:?}");

    let ms1 = Instance::start(&cloud, "ms1");
    wait_for("the lock taken", SOON, &[&ms1], || async {
        ms1.role().await == Some("active")
    })
    .await;
    let log = ms1.log();
    assert!(
        log.lines()
            .any(|l| l.contains("this instance holds the lock") && l.contains("node=server ")),
        "{log}"
    );
    assert!(!log.contains("GET_LOCK is local"), "{log}");
    let (status, text) = ms1.health().await.unwrap();
    assert_eq!(status, 200, "{text}");
    assert!(!text.contains("the lock is local"), "{text}");
    let exposition = metrics(&ms1).await;
    assert!(
        exposition.contains("\ncks_drift_database_lock_node_info{kind=\"server\",node=\""),
        "{exposition}"
    );
    assert!(!exposition.contains("kind=\"galera\""), "{exposition}");
    promtool(&exposition);
}
