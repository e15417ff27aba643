use std::io::Write as _;
use std::process::{Command, Stdio};

use super::*;
use crate::base::time::Timestamp;
use crate::cloudstack::client::ClientOptions;
use crate::cloudstack::request::ApiRequest;
use crate::cloudstack::retry::RetryPolicy;
use crate::cloudstack::transport::{RawResponse, Transport, TransportFuture};
use crate::diff::{Mismatch, Subject, VmRef};
use crate::engine::cycle::{ClusterOutcome, CycleError, CycleReport};
use crate::notify::DeliveryCounts;

/// Runs `promtool check metrics` on `text`: Ok when it is silent and exits 0.
fn promtool(text: &str) -> Result<(), String> {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool (Debian package prometheus)");
    child
        .stdin
        .take()
        .expect("promtool stdin")
        .write_all(text.as_bytes())
        .expect("write to promtool");
    let out = child.wait_with_output().expect("wait for promtool");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() && said.trim().is_empty() {
        Ok(())
    } else {
        Err(format!("promtool: {}: {said}", out.status))
    }
}

/// Answers `listZones` with an empty list and everything else with CloudStack error 431.
struct Canned;

impl Transport for Canned {
    fn send(&self, request: ApiRequest) -> TransportFuture<'_> {
        Box::pin(async move {
            let key = format!("{}response", request.command.to_lowercase());
            Ok(if request.command == "listZones" {
                RawResponse {
                    status: 200,
                    body: format!("{{\"{key}\":{{}}}}"),
                }
            } else {
                RawResponse {
                    status: 431,
                    body: format!(
                        "{{\"{key}\":{{\"errorcode\":431,\"cserrorcode\":4350,\"errortext\":\"no\"}}}}"
                    ),
                }
            }
            .into())
        })
    }
}

fn client() -> Arc<Client> {
    let options = ClientOptions {
        retry: RetryPolicy {
            attempts: 1,
            ..RetryPolicy::default()
        },
        ..ClientOptions::default()
    };
    Arc::new(Client::with_transport(Arc::new(Canned), options))
}

async fn call(client: &Client, command: &str, times: usize) {
    for _ in 0..times {
        let _ = client.request(command, &[]).await;
    }
}

fn mismatch(kind: MismatchKind, vm: &str) -> Mismatch {
    Mismatch {
        kind,
        subject: Subject::Vm(VmRef {
            id: vm.into(),
            name: None,
            state: "Running".into(),
        }),
    }
}

fn cluster(
    id: &str,
    status: ClusterStatus,
    failure: Option<&'static str>,
    mismatches: Vec<Mismatch>,
) -> ClusterOutcome {
    ClusterOutcome {
        cluster: crate::snapshot::ClusterIdentity {
            id: id.into(),
            name: id.into(),
            zone_id: None,
            owner: None,
            owner_id: None,
        },
        ignored: Default::default(),
        db_ids: None,
        left_to_server: Default::default(),
        views: None,
        status,
        skip: None,
        reason: None,
        node_failure: failure,
        mismatches,
        mapped: vec![],
        expected_vms: 0,
    }
}

fn tick(
    report: Result<CycleReport, CycleError>,
    delivered: DeliveryCounts,
    pending: usize,
) -> Tick {
    Tick {
        report,
        new: None,
        delivered,
        pending,
        state_error: None,
        state_write_attempted: true,
        blind: Vec::new(),
        storm: None,
        ignored: Default::default(),
        standings: Default::default(),
    }
}

fn report(clusters: Vec<ClusterOutcome>) -> Result<CycleReport, CycleError> {
    Ok(CycleReport {
        started: Timestamp::from_unix(1_767_225_600),
        duration: Duration::from_secs(1),
        clusters,
        map_source: Default::default(),
        server_check: None,
    })
}

fn failed_report() -> Result<CycleReport, CycleError> {
    Err(CycleError::List {
        what: "Kubernetes clusters",
        source: crate::cloudstack::error::ApiError::Unauthorized {
            url: "u".into(),
            command: "listKubernetesClusters".into(),
        },
    })
}

fn at(secs: f64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs_f64(secs)
}

const HEADERS: [(&str, &str); 22] = [
    ("cks_drift_check_enabled", "gauge"),
    ("cks_drift_role", "gauge"),
    ("cks_drift_lock_held_elsewhere", "gauge"),
    ("cks_drift_database_lock_node_info", "gauge"),
    ("cks_drift_map_reads_total", "counter"),
    ("cks_drift_cycles_total", "counter"),
    ("cks_drift_cycle_duration_seconds", "gauge"),
    ("cks_drift_last_success_timestamp_seconds", "gauge"),
    ("cks_drift_state_write_failing", "gauge"),
    ("cks_drift_state_write_failures_total", "counter"),
    ("cks_drift_clusters", "gauge"),
    ("cks_drift_open_mismatches", "gauge"),
    ("cks_drift_api_requests_total", "counter"),
    ("cks_drift_ssh_failures_total", "counter"),
    ("cks_drift_notifications_total", "counter"),
    ("cks_drift_blind_seconds", "gauge"),
    ("cks_drift_storm", "gauge"),
    ("cks_drift_storm_held_findings", "gauge"),
    ("cks_drift_server_check", "gauge"),
    ("cks_drift_findings_left_to_server", "gauge"),
    ("cks_drift_ignored_findings", "gauge"),
    ("cks_drift_notifications_pending", "gauge"),
];

/// The sample lines only (HELP and TYPE checked separately).
fn samples(text: &str) -> Vec<&str> {
    text.lines().filter(|l| !l.starts_with('#')).collect()
}

#[test]
fn a_fresh_daemon_shows_every_family_with_zeroes() {
    let metrics = Metrics::new(true);
    let text = metrics.render();
    assert_eq!(
        samples(&text),
        [
            "cks_drift_check_enabled 1",
            "cks_drift_role{role=\"active\"} 1",
            "cks_drift_role{role=\"standby\"} 0",
            "cks_drift_lock_held_elsewhere 0",
            "cks_drift_map_reads_total{source=\"api\"} 0",
            "cks_drift_map_reads_total{source=\"database\"} 0",
            "cks_drift_map_reads_total{source=\"database_failed\"} 0",
            "cks_drift_cycles_total{outcome=\"ok\"} 0",
            "cks_drift_cycles_total{outcome=\"failed\"} 0",
            "cks_drift_last_success_timestamp_seconds 0",
            "cks_drift_state_write_failing 0",
            "cks_drift_state_write_failures_total 0",
            "cks_drift_clusters{status=\"checked\"} 0",
            "cks_drift_clusters{status=\"partial\"} 0",
            "cks_drift_clusters{status=\"skipped\"} 0",
            "cks_drift_open_mismatches{kind=\"mapped_vm\"} 0",
            "cks_drift_open_mismatches{kind=\"unmapped_vm\"} 0",
            "cks_drift_open_mismatches{kind=\"node_without_vm\"} 0",
            "cks_drift_open_mismatches{kind=\"vm_not_a_node\"} 0",
            "cks_drift_open_mismatches{kind=\"map_count\"} 0",
            "cks_drift_open_mismatches{kind=\"blind\"} 0",
            "cks_drift_open_mismatches{kind=\"identity_conflict\"} 0",
            "cks_drift_ssh_failures_total{reason=\"auth\"} 0",
            "cks_drift_ssh_failures_total{reason=\"command\"} 0",
            "cks_drift_ssh_failures_total{reason=\"connect\"} 0",
            "cks_drift_ssh_failures_total{reason=\"host_key\"} 0",
            "cks_drift_ssh_failures_total{reason=\"internal\"} 0",
            "cks_drift_ssh_failures_total{reason=\"output\"} 0",
            "cks_drift_ssh_failures_total{reason=\"timeout\"} 0",
            "cks_drift_notifications_total{channel=\"alert\",outcome=\"delivered\"} 0",
            "cks_drift_notifications_total{channel=\"alert\",outcome=\"failed\"} 0",
            "cks_drift_notifications_total{channel=\"alert\",outcome=\"refused\"} 0",
            "cks_drift_notifications_total{channel=\"alertmanager\",outcome=\"delivered\"} 0",
            "cks_drift_notifications_total{channel=\"alertmanager\",outcome=\"failed\"} 0",
            "cks_drift_notifications_total{channel=\"alertmanager\",outcome=\"refused\"} 0",
            "cks_drift_notifications_total{channel=\"annotation\",outcome=\"delivered\"} 0",
            "cks_drift_notifications_total{channel=\"annotation\",outcome=\"failed\"} 0",
            "cks_drift_notifications_total{channel=\"annotation\",outcome=\"refused\"} 0",
            "cks_drift_notifications_total{channel=\"event_log\",outcome=\"delivered\"} 0",
            "cks_drift_notifications_total{channel=\"event_log\",outcome=\"failed\"} 0",
            "cks_drift_notifications_total{channel=\"event_log\",outcome=\"refused\"} 0",
            "cks_drift_storm 0",
            "cks_drift_storm_held_findings 0",
            "cks_drift_notifications_pending 0",
        ]
    );
    // Every family has HELP then TYPE, in this order, even while it has no sample yet.
    let headers: Vec<(String, String)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| {
            let (name, kind) = l.split_once(' ').unwrap();
            (name.to_string(), kind.to_string())
        })
        .collect();
    let expected: Vec<(String, String)> = HEADERS
        .iter()
        .map(|(n, k)| (n.to_string(), k.to_string()))
        .collect();
    assert_eq!(headers, expected);
    for (name, _) in HEADERS {
        let help = format!("# HELP {name} ");
        let ty = format!("# TYPE {name} ");
        let h = text
            .find(&help)
            .unwrap_or_else(|| panic!("no HELP for {name}"));
        assert!(text[h..].starts_with(&help));
        let next = text[h..].lines().nth(1).unwrap();
        assert!(next.starts_with(&ty), "{name}: {next}");
    }
    promtool(&text).unwrap();
}

#[tokio::test]
async fn a_tick_shows_its_figures() {
    let metrics = Metrics::new(true);
    let api = client();
    metrics.track_api_client(api.clone());
    call(&api, "listZones", 2).await;
    call(&api, "listHosts", 1).await;

    let delivered: DeliveryCounts = [
        (("alert", "delivered"), 2),
        (("event_log", "delivered"), 3),
        (("annotation", "failed"), 1),
    ]
    .into_iter()
    .collect();
    let t = tick(
        report(vec![
            cluster(
                "a",
                ClusterStatus::Checked,
                None,
                vec![
                    mismatch(MismatchKind::UnmappedVm, "v1"),
                    mismatch(MismatchKind::UnmappedVm, "v2"),
                ],
            ),
            cluster(
                "b",
                ClusterStatus::Partial,
                Some("auth"),
                vec![mismatch(MismatchKind::MappedVm, "v3")],
            ),
            cluster("c", ClusterStatus::Partial, Some("timeout"), vec![]),
            cluster("d", ClusterStatus::Skipped, None, vec![]),
        ]),
        delivered,
        1,
    );
    let mut t = t;
    t.storm = Some((Timestamp::from_unix(1_767_225_000), 7));
    t.ignored = [((2, "kept for forensics".to_string()), 3)].into();
    metrics.record_tick(&t, Duration::from_millis(1500), at(1_767_225_601.25));
    let text = metrics.render();
    assert_eq!(
        samples(&text),
        [
            "cks_drift_check_enabled 1",
            "cks_drift_role{role=\"active\"} 1",
            "cks_drift_role{role=\"standby\"} 0",
            "cks_drift_lock_held_elsewhere 0",
            "cks_drift_map_reads_total{source=\"api\"} 1",
            "cks_drift_map_reads_total{source=\"database\"} 0",
            "cks_drift_map_reads_total{source=\"database_failed\"} 0",
            "cks_drift_cycles_total{outcome=\"ok\"} 1",
            "cks_drift_cycles_total{outcome=\"failed\"} 0",
            "cks_drift_cycle_duration_seconds 1.5",
            "cks_drift_last_success_timestamp_seconds 1767225601.25",
            "cks_drift_state_write_failing 0",
            "cks_drift_state_write_failures_total 0",
            "cks_drift_clusters{status=\"checked\"} 1",
            "cks_drift_clusters{status=\"partial\"} 2",
            "cks_drift_clusters{status=\"skipped\"} 1",
            "cks_drift_open_mismatches{kind=\"mapped_vm\"} 1",
            "cks_drift_open_mismatches{kind=\"unmapped_vm\"} 2",
            "cks_drift_open_mismatches{kind=\"node_without_vm\"} 0",
            "cks_drift_open_mismatches{kind=\"vm_not_a_node\"} 0",
            "cks_drift_open_mismatches{kind=\"map_count\"} 0",
            "cks_drift_open_mismatches{kind=\"blind\"} 0",
            "cks_drift_open_mismatches{kind=\"identity_conflict\"} 0",
            "cks_drift_api_requests_total{command=\"listHosts\",outcome=\"error\"} 1",
            "cks_drift_api_requests_total{command=\"listZones\",outcome=\"ok\"} 2",
            "cks_drift_ssh_failures_total{reason=\"auth\"} 1",
            "cks_drift_ssh_failures_total{reason=\"command\"} 0",
            "cks_drift_ssh_failures_total{reason=\"connect\"} 0",
            "cks_drift_ssh_failures_total{reason=\"host_key\"} 0",
            "cks_drift_ssh_failures_total{reason=\"internal\"} 0",
            "cks_drift_ssh_failures_total{reason=\"output\"} 0",
            "cks_drift_ssh_failures_total{reason=\"timeout\"} 1",
            "cks_drift_notifications_total{channel=\"alert\",outcome=\"delivered\"} 2",
            "cks_drift_notifications_total{channel=\"alert\",outcome=\"failed\"} 0",
            "cks_drift_notifications_total{channel=\"alert\",outcome=\"refused\"} 0",
            "cks_drift_notifications_total{channel=\"alertmanager\",outcome=\"delivered\"} 0",
            "cks_drift_notifications_total{channel=\"alertmanager\",outcome=\"failed\"} 0",
            "cks_drift_notifications_total{channel=\"alertmanager\",outcome=\"refused\"} 0",
            "cks_drift_notifications_total{channel=\"annotation\",outcome=\"delivered\"} 0",
            "cks_drift_notifications_total{channel=\"annotation\",outcome=\"failed\"} 1",
            "cks_drift_notifications_total{channel=\"annotation\",outcome=\"refused\"} 0",
            "cks_drift_notifications_total{channel=\"event_log\",outcome=\"delivered\"} 3",
            "cks_drift_notifications_total{channel=\"event_log\",outcome=\"failed\"} 0",
            "cks_drift_notifications_total{channel=\"event_log\",outcome=\"refused\"} 0",
            "cks_drift_storm 1",
            "cks_drift_storm_held_findings 7",
            "cks_drift_ignored_findings{rule=\"2\",reason=\"kept for forensics\"} 3",
            "cks_drift_notifications_pending 1",
        ]
    );
    promtool(&text).unwrap();
}

#[test]
fn a_failed_tick_counts_and_keeps_what_the_last_cycle_saw() {
    let metrics = Metrics::new(true);
    let ok = tick(
        report(vec![cluster(
            "a",
            ClusterStatus::Checked,
            None,
            vec![mismatch(MismatchKind::MapCount, "v")],
        )]),
        DeliveryCounts::new(),
        0,
    );
    metrics.record_tick(&ok, Duration::from_secs(2), at(1000.0));
    let failed = tick(
        failed_report(),
        [(("event_log", "delivered"), 1)].into_iter().collect(),
        4,
    );
    metrics.record_tick(&failed, Duration::from_millis(250), at(2000.0));
    let text = metrics.render();
    let lines = samples(&text);
    for expected in [
        "cks_drift_cycles_total{outcome=\"ok\"} 1",
        "cks_drift_cycles_total{outcome=\"failed\"} 1",
        "cks_drift_cycle_duration_seconds 0.25",
        "cks_drift_last_success_timestamp_seconds 1000",
        "cks_drift_clusters{status=\"checked\"} 1",
        "cks_drift_open_mismatches{kind=\"map_count\"} 1",
        "cks_drift_notifications_total{channel=\"event_log\",outcome=\"delivered\"} 1",
        "cks_drift_notifications_pending 4",
    ] {
        assert!(lines.contains(&expected), "{expected} missing in\n{text}");
    }

    // A state that could not be written fails the tick too, though the cycle ran.
    let mut unwritten = tick(report(vec![]), DeliveryCounts::new(), 0);
    unwritten.state_error = Some(crate::state::file::StateError::Locked {
        path: "/s".into(),
        holder: None,
    });
    assert_eq!(CycleOutcome::of(&unwritten), CycleOutcome::Failed);
    metrics.record_tick(&unwritten, Duration::from_secs(1), at(3000.0));
    let text = metrics.render();
    assert!(text.contains("\ncks_drift_cycles_total{outcome=\"failed\"} 2\n"));
    assert!(text.contains("\ncks_drift_last_success_timestamp_seconds 1000\n"));
}

/// The state file gauge follows the last attempt to write it; the counter counts each failure.
#[test]
fn a_state_file_that_cannot_be_written_shows_until_it_is_written() {
    let state = |metrics: &Metrics| -> Vec<String> {
        samples(&metrics.render())
            .into_iter()
            .filter(|l| l.starts_with("cks_drift_state_write_"))
            .map(str::to_string)
            .collect()
    };
    let unwritten = || {
        let mut t = tick(report(vec![]), DeliveryCounts::new(), 0);
        t.state_error = Some(crate::state::file::StateError::Io {
            action: "write",
            path: "/s".into(),
            source: std::io::Error::from(std::io::ErrorKind::StorageFull),
        });
        t
    };
    let metrics = Metrics::new(true);
    metrics.record_tick(&unwritten(), Duration::from_secs(1), at(1000.0));
    metrics.record_tick(&unwritten(), Duration::from_secs(1), at(2000.0));
    assert_eq!(
        state(&metrics),
        [
            "cks_drift_state_write_failing 1",
            "cks_drift_state_write_failures_total 2"
        ]
    );
    promtool(&metrics.render()).unwrap();
    // A tick that ended before writing (standing by, say) does not clear it.
    let mut standby = tick(Err(CycleError::Standby), DeliveryCounts::new(), 0);
    standby.state_write_attempted = false;
    metrics.record_tick(&standby, Duration::from_secs(1), at(3000.0));
    assert_eq!(
        state(&metrics),
        [
            "cks_drift_state_write_failing 1",
            "cks_drift_state_write_failures_total 2"
        ]
    );
    // A failed cycle whose state was written clears it: the file is writable again.
    let written = tick(failed_report(), DeliveryCounts::new(), 0);
    metrics.record_tick(&written, Duration::from_secs(1), at(4000.0));
    assert_eq!(
        state(&metrics),
        [
            "cks_drift_state_write_failing 0",
            "cks_drift_state_write_failures_total 2"
        ]
    );
}

#[tokio::test]
async fn api_totals_survive_a_new_client() {
    let metrics = Metrics::new(false);
    let first = client();
    metrics.track_api_client(first.clone());
    call(&first, "listZones", 3).await;
    assert!(
        metrics
            .render()
            .contains("\ncks_drift_api_requests_total{command=\"listZones\",outcome=\"ok\"} 3\n")
    );
    // A reload builds a new client whose own counts start at zero.
    let second = client();
    call(&second, "listZones", 1).await;
    metrics.track_api_client(second.clone());
    call(&second, "listZones", 1).await;
    // The old client is no longer read: its later calls are not counted twice or at all.
    call(&first, "listZones", 5).await;
    let text = metrics.render();
    assert!(
        text.contains("\ncks_drift_api_requests_total{command=\"listZones\",outcome=\"ok\"} 5\n"),
        "{text}"
    );
    assert!(text.contains("\ncks_drift_check_enabled 0\n"));
}

#[tokio::test]
async fn label_values_are_escaped() {
    assert_eq!(escape_label_value(r#"a"b\c"#), r#"a\"b\\c"#);
    assert_eq!(escape_label_value("line\nbreak"), "line\\nbreak");
    assert_eq!(escape_label_value("plain-ü"), "plain-ü");
    let metrics = Metrics::new(true);
    let api = client();
    metrics.track_api_client(api.clone());
    call(&api, "odd\"com\\mand\n", 1).await;
    let text = metrics.render();
    assert!(
        text.contains(
            "\ncks_drift_api_requests_total{command=\"odd\\\"com\\\\mand\\n\",outcome=\"error\"} 1\n"
        ),
        "{text}"
    );
    promtool(&text).unwrap();
}

#[test]
fn the_node_the_lock_is_held_on_is_shown_while_it_is() {
    use crate::database::topology::Node;
    let metrics = Metrics::new(true);
    let galera = Node::from_variables(
        &[
            ("hostname", "db1"),
            ("wsrep_on", "ON"),
            ("wsrep_node_name", "node\"1"),
            ("wsrep_cluster_name", "cloud"),
            ("wsrep_cluster_size", "3"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .into(),
    );
    metrics.set_lock_node(Some(&galera));
    let text = metrics.render();
    let info = |text: &str| -> Vec<String> {
        samples(text)
            .into_iter()
            .filter(|l| l.starts_with("cks_drift_database_lock_node_info"))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(
        info(&text),
        [
            "cks_drift_database_lock_node_info{kind=\"galera\",node=\"node\\\"1\",\
             cluster=\"cloud\"} 1"
        ]
    );
    promtool(&text).unwrap();
    let server = Node::from_variables(&[("hostname".to_string(), "db2".to_string())].into());
    metrics.set_lock_node(Some(&server));
    let text = metrics.render();
    assert_eq!(
        info(&text),
        ["cks_drift_database_lock_node_info{kind=\"server\",node=\"db2\",cluster=\"\"} 1"]
    );
    promtool(&text).unwrap();
    metrics.set_lock_node(None);
    assert_eq!(info(&metrics.render()), Vec::<String>::new());
}

#[test]
fn floats_use_the_formats_spelling() {
    assert_eq!(Float(f64::INFINITY).to_string(), "+Inf");
    assert_eq!(Float(f64::NEG_INFINITY).to_string(), "-Inf");
    assert_eq!(Float(f64::NAN).to_string(), "NaN");
    assert_eq!(Float(0.001).to_string(), "0.001");
    assert_eq!(Float(1e21).to_string(), "1000000000000000000000");
}

#[test]
fn the_promtool_check_can_fail() {
    // What prometheus-client's OpenMetrics output looks like to promtool 2.42: a counter
    // whose samples lack their HELP. The check above would let no such text through.
    let bad = "# TYPE x counter\nx_total 1\n";
    let err = promtool(bad).unwrap_err();
    assert!(err.contains("x_total"), "{err}");
    let unescaped = "# HELP y y\n# TYPE y gauge\ny{l=\"a\"b\"} 1\n";
    assert!(promtool(unescaped).is_err());
}
