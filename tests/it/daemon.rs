//! `cks-drift run` end to end: the real binary with a 1 s interval against the fake
//! CloudStack, real sshd and the real kubectl, watched through `/metrics`, `/healthz`, a
//! notify socket standing in for systemd, the event log and the simulator's call log.
//!
//! These cover the wiring: signals, the notify socket, the endpoint (its port held by another
//! listener, or passed by `systemd-socket-activate`), the state lock, the systemd units, and a
//! real tick cancelled at the shutdown deadline. The scheduler's timing (spacing, overlap,
//! late cycles, reloads between ticks, check.enabled, the watchdog) is tested in process
//! under paused time, in `daemon::service::tests`.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cks_drift::diff::wording::alert_marker;
use tokio::net::UnixDatagram;
use tokio::task::JoinHandle;

use crate::refusals::SmallDisk;
use crate::support::cloud::{API_KEY, SECRET_KEY, TestCloud, binary, one_cluster};
use crate::support::sshd::free_port;

/// Deadline for anything the daemon should do within a few cycles.
const SOON: Duration = Duration::from_secs(20);

/// The daemon's config: the harness's, with `check` lines added to `[check]`, the endpoint
/// on `port`, and the remote command run through `wrapper` when given.
pub(crate) fn daemon_config(
    cloud: &TestCloud,
    port: u16,
    check: &str,
    wrapper: Option<&Path>,
) -> (PathBuf, String) {
    let path = cloud.write_config();
    let mut text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("[check]\n") && text.contains("listen = \"\"\n"));
    text = text
        .replace("[check]\n", &format!("[check]\n{check}\n"))
        .replace(
            "listen = \"\"\n",
            &format!("listen = \"127.0.0.1:{port}\"\n"),
        )
        // Slow commands in these tests are cut short by shutdown, not by this timeout.
        .replace("command_timeout = \"10s\"", "command_timeout = \"60s\"");
    if let Some(wrapper) = wrapper {
        text = text.replace(
            "command = \"",
            &format!("command = \"{} ", wrapper.display()),
        );
    }
    std::fs::write(&path, &text).unwrap();
    (path, text)
}

/// A shell script at `path` (made executable).
fn script(path: &Path, body: &str) -> PathBuf {
    std::fs::write(path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path.to_path_buf()
}

/// The running binary; killed on drop.
pub(crate) struct Daemon {
    child: Child,
    stderr: PathBuf,
    port: u16,
    notes: Arc<Mutex<Vec<String>>>,
    listener: JoinHandle<()>,
    http: reqwest::Client,
}

impl Daemon {
    /// Starts `cks-drift run -c config` with a notify socket in `dir`, and waits for READY=1.
    pub(crate) async fn start(dir: &Path, config: &Path, port: u16) -> Daemon {
        Daemon::start_with(dir, config, port, None).await
    }

    /// Like `start`, with systemd's watchdog period in `WATCHDOG_USEC` when given.
    async fn start_with(
        dir: &Path,
        config: &Path,
        port: u16,
        watchdog: Option<Duration>,
    ) -> Daemon {
        let mut daemon = Daemon::spawn(dir, config, port, watchdog, &[]);
        let started = Instant::now();
        while !daemon.notes().iter().any(|n| n.starts_with("READY=1\n")) {
            if let Some(status) = daemon.child.try_wait().unwrap() {
                panic!("cks-drift exited with {status}; log:\n{}", daemon.log());
            }
            if started.elapsed() > SOON {
                panic!("no READY=1 within {SOON:?}; log:\n{}", daemon.log());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        daemon
    }

    /// Starts `cks-drift run -c config`, through `launcher` (a command and its arguments, to
    /// which the binary and its arguments are added) when one is given.
    fn spawn(
        dir: &Path,
        config: &Path,
        port: u16,
        watchdog: Option<Duration>,
        launcher: &[String],
    ) -> Daemon {
        let socket_path = dir.join("notify.sock");
        let _ = std::fs::remove_file(&socket_path);
        let socket = UnixDatagram::bind(&socket_path).expect("bind the notify socket");
        let notes = Arc::new(Mutex::new(Vec::new()));
        let sink = notes.clone();
        let listener = tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            while let Ok(n) = socket.recv(&mut buf).await {
                let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                sink.lock().unwrap().push(text);
            }
        });
        let stderr = dir.join("daemon.log");
        let mut command = match launcher.split_first() {
            None => Command::new(binary()),
            Some((program, args)) => {
                let mut command = Command::new(program);
                command.args(args).arg(binary());
                command
            }
        };
        command
            .env_remove("WATCHDOG_USEC")
            .env_remove("WATCHDOG_PID");
        if let Some(period) = watchdog {
            command.env("WATCHDOG_USEC", period.as_micros().to_string());
        }
        let child = command
            .arg("run")
            .arg("-c")
            .arg(config)
            .env_remove("RUST_LOG")
            .env("NOTIFY_SOCKET", &socket_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("start cks-drift run");
        Daemon {
            child,
            stderr,
            port,
            notes,
            listener,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .build()
                .unwrap(),
        }
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// The datagrams received on the notify socket so far.
    fn notes(&self) -> Vec<String> {
        self.notes.lock().unwrap().clone()
    }

    fn watchdog_pings(&self) -> usize {
        self.notes().iter().filter(|n| *n == "WATCHDOG=1\n").count()
    }

    pub(crate) fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success(), "kill -{name}");
    }

    pub(crate) async fn get(&self, path: &str) -> (u16, String, String) {
        let response = self
            .http
            .get(format!("http://127.0.0.1:{}{path}", self.port))
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}\nlog:\n{}", self.log()));
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        (status, content_type, response.text().await.unwrap())
    }

    async fn metrics(&self) -> String {
        let (status, content_type, text) = self.get("/metrics").await;
        assert_eq!(status, 200);
        assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
        text
    }

    /// The value of the sample `series` (name and labels exactly as rendered).
    async fn metric(&self, series: &str) -> f64 {
        sample(&self.metrics().await, series)
    }

    pub(crate) async fn ok_cycles(&self) -> f64 {
        self.metric("cks_drift_cycles_total{outcome=\"ok\"}").await
    }

    /// Polls `cond` every 100 ms until it holds, or panics naming `what` with the log.
    pub(crate) async fn wait_until<F, Fut>(&self, what: &str, mut cond: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let started = Instant::now();
        while !cond().await {
            if started.elapsed() > SOON {
                panic!("{what}: not within {SOON:?}; log:\n{}", self.log());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits for the process to exit.
    async fn exit(&mut self) -> ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            if started.elapsed() > SOON {
                panic!("cks-drift did not exit; log:\n{}", self.log());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.listener.abort();
    }
}

fn sample(text: &str, series: &str) -> f64 {
    let prefix = format!("{series} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no sample {series} in\n{text}"))
        .parse()
        .unwrap()
}

/// `promtool check metrics` must be silent and exit 0.
pub(crate) fn promtool(text: &str) {
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
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool: {}: {said}\n{text}",
        out.status
    );
}

/// Sessions sshd accepted so far.
fn ssh_sessions(cloud: &TestCloud, cluster: &str) -> usize {
    let sshd = cloud.node(cluster).sshd.as_ref().expect("sshd");
    sshd.log().matches("Accepted publickey for root").count()
}

#[tokio::test]
async fn runs_every_interval_alerts_a_new_drift_once_and_stops_cleanly() {
    let (cloud, id) = one_cluster().await;
    let port = free_port();
    let (config, _) = daemon_config(&cloud, port, "interval = \"1s\"", None);
    let mut daemon = Daemon::start(cloud.dir.path(), &config, port).await;
    // READY comes after the endpoint is bound.
    let (status, _, body) = daemon.get("/healthz").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.starts_with("ok: "), "{body}");
    // Durations are logged as people write them.
    assert!(
        daemon
            .log()
            .contains("cks-drift is running interval=1s initial_delay=0s enabled=true\n"),
        "{}",
        daemon.log()
    );

    daemon
        .wait_until("two cycles", || async { daemon.ok_cycles().await >= 2.0 })
        .await;
    let text = daemon.metrics().await;
    promtool(&text);
    for line in [
        "cks_drift_check_enabled 1",
        "cks_drift_clusters{status=\"checked\"} 1",
        "cks_drift_clusters{status=\"partial\"} 0",
        "cks_drift_open_mismatches{kind=\"unmapped_vm\"} 0",
        "cks_drift_cycles_total{outcome=\"failed\"} 0",
        "cks_drift_notifications_pending 0",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
    }
    assert!(sample(&text, "cks_drift_last_success_timestamp_seconds") > 1.7e9);
    assert!(
        sample(
            &text,
            "cks_drift_api_requests_total{command=\"listKubernetesClusters\",outcome=\"ok\"}"
        ) >= 4.0
    );
    assert_eq!(cloud.sim().call_count("generateAlert"), 0);

    // A worker's map row disappears while the daemon runs.
    let worker = cloud
        .sim()
        .with_world(|w| w.cluster(&id).unwrap().map[2].clone());
    cloud
        .sim()
        .with_world(|w| assert!(w.remove_map_row(&id, &worker)));
    let key = format!("unmapped_vm:{worker}");
    daemon
        .wait_until("the alert", || async {
            cloud.sim().call_count("generateAlert") >= 1
        })
        .await;
    // Two more whole cycles after it: nothing is sent again.
    let after = daemon.ok_cycles().await;
    daemon
        .wait_until("two more cycles", || async {
            daemon.ok_cycles().await >= after + 2.0
        })
        .await;
    assert_eq!(cloud.sim().call_count("generateAlert"), 1);
    assert_eq!(cloud.sim().call_count("addAnnotation"), 1);
    let stored: Vec<String> = cloud.sim().with_world(|w| {
        w.active_alerts()
            .iter()
            .map(|a| a.description.clone())
            .collect()
    });
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert!(
        stored[0].ends_with(&alert_marker(&id, &key)),
        "{}",
        stored[0]
    );
    let warned: Vec<_> = cloud
        .event_lines()
        .into_iter()
        .filter(|e| e["key"] == key.as_str())
        .collect();
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert_eq!(warned[0]["level"], "WARN");

    let text = daemon.metrics().await;
    promtool(&text);
    for line in [
        "cks_drift_open_mismatches{kind=\"unmapped_vm\"} 1",
        "cks_drift_notifications_total{channel=\"alert\",outcome=\"delivered\"} 1",
        "cks_drift_notifications_total{channel=\"annotation\",outcome=\"delivered\"} 1",
        "cks_drift_notifications_total{channel=\"event_log\",outcome=\"delivered\"} 1",
        "cks_drift_api_requests_total{command=\"generateAlert\",outcome=\"ok\"} 1",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
    }
    let statuses: Vec<String> = daemon
        .notes()
        .into_iter()
        .filter(|n| n.starts_with("STATUS=last cycle "))
        .collect();
    assert!(
        statuses
            .last()
            .unwrap()
            .ends_with(": 1 clusters, 1 open mismatches, 0 pending notifications\n"),
        "{statuses:?}"
    );

    daemon.signal("TERM");
    let status = daemon.exit().await;
    assert_eq!(status.code(), Some(0), "log:\n{}", daemon.log());
    daemon
        .wait_until("STOPPING=1", || async {
            daemon.notes().iter().any(|n| n == "STOPPING=1\n")
        })
        .await;
    let notes = daemon.notes();
    assert_eq!(
        notes.first().map(String::as_str),
        Some("READY=1\nSTATUS=waiting for the first cycle\n")
    );
    assert_eq!(notes.last().map(String::as_str), Some("STOPPING=1\n"));
    // Without WATCHDOG_USEC there is no watchdog to ping.
    assert_eq!(daemon.watchdog_pings(), 0);
}

#[tokio::test]
async fn sighup_reloads_refuses_a_bad_config_and_turns_checking_off_and_on() {
    let (cloud, id) = one_cluster().await;
    let port = free_port();
    let (config, text) = daemon_config(&cloud, port, "interval = \"1s\"", None);
    let mut daemon = Daemon::start(cloud.dir.path(), &config, port).await;
    daemon
        .wait_until("a cycle", || async { daemon.ok_cycles().await >= 1.0 })
        .await;

    // An invalid file is refused; checking goes on with the config in force.
    std::fs::write(
        &config,
        text.replace("interval = \"1s\"", "interval = \"1\""),
    )
    .unwrap();
    daemon.signal("HUP");
    daemon
        .wait_until("the refusal", || async {
            daemon
                .log()
                .contains("the new config is refused; the old one stays in force")
        })
        .await;
    assert!(daemon.log().contains("check.interval: \"1\" has no unit"));
    let before = daemon.ok_cycles().await;
    daemon
        .wait_until("a cycle after the refusal", || async {
            daemon.ok_cycles().await >= before + 1.0
        })
        .await;

    // check.enabled = false. That no cycle runs then is shown in process
    // (daemon::service::tests); here the reload itself. The endpoint's address cannot
    // change without a restart: it stays where it is.
    let moved = text
        .replace("interval = \"1s\"", "interval = \"1s\"\nenabled = false")
        .replace(&format!(":{port}\""), &format!(":{}\"", free_port()));
    std::fs::write(&config, moved).unwrap();
    daemon.signal("HUP");
    daemon
        .wait_until("checking off", || async {
            daemon.metric("cks_drift_check_enabled").await == 0.0
        })
        .await;
    // A cycle that was running when the signal came finishes; give it time to, so that
    // the counts below are from before checking is on again.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let lists = cloud.sim().call_count("listKubernetesClusters");
    let sessions = ssh_sessions(&cloud, &id);
    let cycles = daemon.ok_cycles().await;
    let (status, _, body) = daemon.get("/healthz").await;
    assert_eq!(
        (status, body.as_str()),
        (200, "ok: checking is disabled (check.enabled = false)\n")
    );
    assert!(
        daemon
            .log()
            .contains("http.listen cannot change while running; restart to use the new address")
    );
    assert!(
        daemon
            .notes()
            .contains(&"STATUS=checking is disabled (check.enabled = false)\n".to_string())
    );

    // And on again.
    std::fs::write(&config, &text).unwrap();
    daemon.signal("HUP");
    daemon
        .wait_until("checking again", || async {
            daemon.ok_cycles().await >= cycles + 1.0
        })
        .await;
    assert!(cloud.sim().call_count("listKubernetesClusters") > lists);
    assert!(ssh_sessions(&cloud, &id) > sessions);
    assert_eq!(daemon.metric("cks_drift_check_enabled").await, 1.0);
    daemon.signal("TERM");
    assert_eq!(daemon.exit().await.code(), Some(0));
}

#[tokio::test]
async fn an_ignore_rule_added_by_sighup_archives_the_alert_of_an_alerted_finding() {
    let (cloud, id) = one_cluster().await;
    let worker = cloud.unmap_last_worker(&id);
    let port = free_port();
    let (config, text) = daemon_config(&cloud, port, "interval = \"1s\"", None);
    let mut daemon = Daemon::start(cloud.dir.path(), &config, port).await;
    daemon
        .wait_until("the alert", || async { cloud.active_alerts().len() == 1 })
        .await;
    let live = |cloud: &TestCloud| {
        cloud
            .sim()
            .with_world(|w| w.annotations.iter().filter(|a| !a.removed).count())
    };
    assert_eq!(live(&cloud), 1);
    std::fs::write(
        &config,
        format!("{text}\n[[ignore]]\nvm = \"{worker}\"\nreason = \"kept for forensics\"\n"),
    )
    .unwrap();
    daemon.signal("HUP");
    daemon
        .wait_until("the alert archived", || async {
            cloud.active_alerts().is_empty()
        })
        .await;
    daemon
        .wait_until("the annotation removed and the metric", || async {
            live(&cloud) == 0
                && daemon.metrics().await.contains(
                    "cks_drift_ignored_findings{rule=\"1\",reason=\"kept for forensics\"} 1",
                )
        })
        .await;
    assert!(
        daemon
            .log()
            .contains("[[ignore]] rule 1 matches this finding from now on; its alert and annotation are taken back"),
        "{}",
        daemon.log()
    );
    // Still reported: the finding is open in the state file, marked ignored.
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(cloud.state_path()).unwrap()).unwrap();
    assert_eq!(
        state["clusters"][&id]["vms"][format!("unmapped_vm:{worker}")]["ignored"]["reason"],
        "kept for forensics"
    );
    daemon.signal("TERM");
    assert_eq!(daemon.exit().await.code(), Some(0));
}

#[tokio::test]
async fn sigterm_mid_cycle_exits_0_with_a_valid_state_file() {
    let (cloud, id) = one_cluster().await;
    let dir = cloud.dir.path();
    let trace = dir.join("listings");
    let slow = dir.join("slow");
    // Listings hang once the flag file exists.
    let wrapper = script(
        &dir.join("hang.sh"),
        &format!(
            "echo start >> {t}\nif [ -e {s} ]; then sleep 30; fi\n\"$@\"\n",
            t = trace.display(),
            s = slow.display()
        ),
    );
    let port = free_port();
    let (config, _) = daemon_config(&cloud, port, "interval = \"1s\"", Some(&wrapper));
    let watchdog = Some(Duration::from_millis(400));
    let mut daemon = Daemon::start_with(dir, &config, port, watchdog).await;
    daemon
        .wait_until("a cycle", || async { daemon.ok_cycles().await >= 1.0 })
        .await;
    std::fs::write(&slow, "").unwrap();
    let listed = std::fs::read_to_string(&trace).unwrap().lines().count();
    daemon
        .wait_until("a hanging listing", || async {
            std::fs::read_to_string(&trace).unwrap().lines().count() > listed
        })
        .await;
    // The watchdog is pinged (every 200 ms) while the cycle hangs.
    let pings = daemon.watchdog_pings();
    daemon
        .wait_until("watchdog pings during the hang", || async {
            daemon.watchdog_pings() >= pings + 3
        })
        .await;
    let cycles = daemon.metrics().await;
    assert_eq!(
        sample(&cycles, "cks_drift_cycles_total{outcome=\"ok\"}")
            + sample(&cycles, "cks_drift_cycles_total{outcome=\"failed\"}"),
        (listed as f64),
        "no cycle ended during the hang"
    );
    daemon.signal("TERM");
    let status = daemon.exit().await;
    assert_eq!(status.code(), Some(0), "log:\n{}", daemon.log());
    let log = daemon.log();
    assert!(
        log.contains("the running cycle was cancelled at the shutdown deadline"),
        "{log}"
    );

    let state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(cloud.state_path()).unwrap()).unwrap();
    assert_eq!(state["version"], 2);
    assert!(state["clusters"].get(&id).is_some(), "{state}");
    // Only the state, its lock and the event log: no temporary file left behind.
    let mut names: Vec<String> = std::fs::read_dir(cloud.state_path().parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names.retain(|n| n != "events.jsonl");
    assert_eq!(names, ["state.json", "state.json.lock"]);
    assert!(daemon.notes().contains(&"STOPPING=1\n".to_string()));
}

#[tokio::test]
async fn healthz_turns_503_when_cycles_keep_failing() {
    let (cloud, _) = one_cluster().await;
    let port = free_port();
    let (config, text) = daemon_config(&cloud, port, "interval = \"1s\"", None);
    // Logs as JSON lines, for journald and log shippers.
    std::fs::write(&config, text + "\n[log]\nformat = \"json\"\n").unwrap();
    let mut daemon = Daemon::start(cloud.dir.path(), &config, port).await;
    daemon
        .wait_until("a successful cycle", || async {
            daemon
                .get("/healthz")
                .await
                .2
                .starts_with("ok: last cycle succeeded ")
        })
        .await;
    cloud.sim().fail_next_with_error(
        "listKubernetesClusters",
        10_000,
        530,
        "the database is down",
    );
    daemon
        .wait_until("503", || async { daemon.get("/healthz").await.0 == 503 })
        .await;
    let (_, content_type, body) = daemon.get("/healthz").await;
    assert_eq!(content_type, "text/plain; charset=utf-8");
    assert!(
        body.starts_with("last successful cycle ended ")
            && body.contains("more than 2 x check.interval + slack (3.0s); last cycle failed: cannot list Kubernetes clusters")
            && body.contains("the database is down")
            && body.ends_with('\n')
            && body.lines().count() == 1,
        "{body}"
    );
    let text = daemon.metrics().await;
    promtool(&text);
    assert!(sample(&text, "cks_drift_cycles_total{outcome=\"failed\"}") >= 1.0);
    assert!(
        sample(
            &text,
            "cks_drift_api_requests_total{command=\"listKubernetesClusters\",outcome=\"error\"}"
        ) >= 1.0
    );
    assert!(
        daemon
            .notes()
            .iter()
            .any(|n| n.starts_with("STATUS=last cycle ")
                && n.contains(" failed: cannot list Kubernetes clusters"))
    );
    daemon.signal("INT");
    assert_eq!(daemon.exit().await.code(), Some(0));

    let log = daemon.log();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let warning = lines
        .iter()
        .find(|l| l["message"] == "the cycle failed; the next one runs at the next interval")
        .unwrap_or_else(|| panic!("{log}"));
    assert_eq!(warning["level"], "WARN");
    assert!(
        warning["error"]
            .as_str()
            .unwrap()
            .contains("the database is down")
    );
    assert!(
        lines
            .iter()
            .any(|l| l["message"] == "stop requested" && l["signal"] == "SIGINT")
    );
    // The keys never reach the log.
    assert!(!log.contains(API_KEY) && !log.contains(SECRET_KEY));
}

/// A cycle that cannot reach CloudStack is explained in `run`'s log as `check` explains it: a
/// host name that does not resolve (`.invalid` never does, RFC 6761) names the setting and the
/// resolver, beside the raw error chain.
#[tokio::test]
async fn a_host_name_that_does_not_resolve_is_explained_in_the_log() {
    let (cloud, _) = one_cluster().await;
    let port = free_port();
    let (config, text) = daemon_config(&cloud, port, "interval = \"1s\"", None);
    let url = cloud.api.url();
    assert!(text.contains(&url));
    let text = text.replace(&url, "http://cks-drift-test.invalid/client/api");
    std::fs::write(&config, text + "\n[log]\nformat = \"json\"\n").unwrap();
    let mut daemon = Daemon::start(cloud.dir.path(), &config, port).await;
    daemon
        .wait_until("a failed cycle in the log", || async {
            daemon.log().contains("the cycle failed")
        })
        .await;
    daemon.signal("INT");
    assert_eq!(daemon.exit().await.code(), Some(0));
    let log = daemon.log();
    let warning: serde_json::Value = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .find(|l: &serde_json::Value| {
            l["message"] == "the cycle failed; the next one runs at the next interval"
        })
        .unwrap_or_else(|| panic!("{log}"));
    let explained = warning["explained"]
        .as_str()
        .unwrap_or_else(|| panic!("{warning}"));
    assert!(
        // Clusters and VMs are listed at once: either may fail first.
        explained.starts_with("cannot list ")
            && explained.contains(": cannot resolve cks-drift-test.invalid (cloudstack.url): ")
            && explained.ends_with(
                "; check the host name in cloudstack.url and this host's DNS resolver (DNS)"
            ),
        "{explained}"
    );
    assert!(warning["error"].as_str().is_some(), "{warning}");
}

#[tokio::test]
async fn a_second_instance_stops_at_the_state_lock_before_binding() {
    let (cloud, _) = one_cluster().await;
    let port = free_port();
    let (config, text) = daemon_config(&cloud, port, "interval = \"1h\"", None);
    let first = Daemon::start(cloud.dir.path(), &config, port).await;
    let other_port = free_port();
    let second_config = cloud.dir.path().join("second.toml");
    std::fs::write(
        &second_config,
        text.replace(&format!(":{port}\""), &format!(":{other_port}\"")),
    )
    .unwrap();
    let out = tokio::process::Command::new(binary())
        .args(["run", "-c"])
        .arg(&second_config)
        .env_remove("NOTIFY_SOCKET")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "is in use by another cks-drift (pid {})",
            first.child.id()
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("serving /metrics"), "{stderr}");
}

/// The allocator setting the performance figures are measured with is the one the service
/// and the container run with: the unit and the Containerfile give the same value.
#[test]
fn the_unit_and_the_container_give_glibc_the_same_mmap_threshold() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let unit = std::fs::read_to_string(root.join("config/cks-drift.service")).unwrap();
    let containerfile = std::fs::read_to_string(root.join("config/Containerfile")).unwrap();
    let from_unit: Vec<&str> = unit
        .lines()
        .filter_map(|l| l.strip_prefix("Environment=GLIBC_TUNABLES="))
        .collect();
    let from_image: Vec<&str> = containerfile
        .lines()
        .filter_map(|l| l.strip_prefix("ENV GLIBC_TUNABLES="))
        .collect();
    assert_eq!(from_unit, ["glibc.malloc.mmap_threshold=262144"], "{unit}");
    assert_eq!(from_image, from_unit, "{containerfile}");
}

#[test]
fn the_systemd_units_pass_systemd_analyze_verify() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let unit = std::fs::read_to_string(root.join("config/cks-drift.service")).unwrap();
    let socket = std::fs::read_to_string(root.join("config/cks-drift.socket")).unwrap();
    for line in [
        "Type=notify",
        "ExecStart=/usr/bin/cks-drift run -c /etc/cks-drift/cks-drift.toml",
        "ExecReload=/bin/kill -HUP $MAINPID",
        "Restart=on-failure",
        "User=cks-drift",
        "StateDirectory=cks-drift",
        "StateDirectoryMode=0700",
        "ProtectSystem=strict",
        "NoNewPrivileges=yes",
        "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
        "ProtectProc=invisible",
        "ProcSubset=pid",
        "RemoveIPC=yes",
        "After=network-online.target cloudstack-management.service cks-drift.socket",
        "Wants=network-online.target",
    ] {
        assert!(unit.lines().any(|l| l == line), "{line} missing");
    }
    // The socket unit holds the address the config ships with, as one listening socket.
    let shipped = std::fs::read_to_string(root.join("config/cks-drift.toml")).unwrap();
    let listen = shipped
        .lines()
        .find_map(|l| l.strip_prefix("listen = \""))
        .and_then(|l| l.strip_suffix('"'))
        .expect("http.listen in config/cks-drift.toml");
    for line in [
        &format!("ListenStream={listen}"),
        "Accept=no",
        "WantedBy=sockets.target",
    ] {
        assert!(socket.lines().any(|l| l == line), "{line} missing");
    }
    // verify checks that ExecStart is executable: point it at the built binary. It works
    // without a running systemd (it loads the unit files offline); it does not look up
    // User= or Group=. The socket unit is checked beside the service it starts.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cks-drift.socket"), &socket).unwrap();
    let verify = |text: &str, unit: &str| {
        std::fs::write(dir.path().join("cks-drift.service"), text).unwrap();
        let out = Command::new("systemd-analyze")
            .arg("verify")
            .arg(dir.path().join(unit))
            .output()
            .expect("run systemd-analyze (Debian package systemd)");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), said)
    };
    let local = unit.replace(
        "ExecStart=/usr/bin/cks-drift ",
        &format!("ExecStart={} ", binary().display()),
    );
    for checked in ["cks-drift.service", "cks-drift.socket"] {
        let (ok, said) = verify(&local, checked);
        assert!(
            ok && said.trim().is_empty(),
            "systemd-analyze verify {checked}:\n{said}"
        );
    }
    // The check does catch mistakes.
    let (_, said) = verify(
        &local.replace("ProtectHome=yes", "ProtectHome=yes\nProtectAll=yes"),
        "cks-drift.service",
    );
    assert!(said.contains("Unknown key 'ProtectAll'"), "{said}");
}

/// Whether the server closed `stream` (a read gives the end of the stream or an error).
async fn closed_by_server(stream: &mut tokio::net::TcpStream, within: Duration) -> bool {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 256];
    matches!(
        tokio::time::timeout(within, stream.read(&mut buf)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[tokio::test]
async fn half_sent_requests_cannot_hold_the_endpoint() {
    use tokio::io::AsyncWriteExt;
    let (cloud, _) = one_cluster().await;
    let port = free_port();
    let (config, _) = daemon_config(&cloud, port, "interval = \"1h\"", None);
    let daemon = Daemon::start(cloud.dir.path(), &config, port).await;
    // 200 clients that send half a request and wait.
    let mut stalled = Vec::new();
    for _ in 0..200 {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        stalled.push(s);
    }
    // Past the connection cap they are closed at once.
    let mut closed_at_once = 0;
    for s in &mut stalled {
        if closed_by_server(s, Duration::from_millis(50)).await {
            closed_at_once += 1;
        }
    }
    assert!(
        closed_at_once >= 200 - 32,
        "{closed_at_once} closed at once"
    );
    // The others at the header deadline, and the endpoint answers again.
    tokio::time::sleep(Duration::from_secs(6)).await;
    for s in &mut stalled {
        assert!(closed_by_server(s, Duration::from_secs(1)).await);
    }
    let (status, _, _) = daemon.get("/healthz").await;
    assert!(status == 200 || status == 503, "{status}");
}

/// `GET path` at 127.0.0.1:`port`: the status and body, or `None` when nothing answers HTTP
/// within 2 s (nothing listens, or a listener that is not cks-drift takes the connection and
/// says nothing).
async fn try_get(port: u16, path: &str) -> Option<(u16, String)> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let response = http
        .get(format!("http://127.0.0.1:{port}{path}"))
        .send()
        .await
        .ok()?;
    let status = response.status().as_u16();
    Some((status, response.text().await.ok()?))
}

#[tokio::test]
async fn a_port_held_by_another_listener_stops_no_cycle_and_is_served_once_freed() {
    let (cloud, id) = one_cluster().await;
    let port = free_port();
    let (config, _) = daemon_config(&cloud, port, "interval = \"1s\"", None);
    // Another user's listener holds the endpoint's address before the service starts.
    let squatter = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    let mut daemon = Daemon::start(cloud.dir.path(), &config, port).await;
    let worker = cloud
        .sim()
        .with_world(|w| w.cluster(&id).unwrap().map[2].clone());
    cloud
        .sim()
        .with_world(|w| assert!(w.remove_map_row(&id, &worker)));
    daemon
        .wait_until("the alert while the port is held", || async {
            cloud.sim().call_count("generateAlert") >= 1
        })
        .await;
    assert_eq!(try_get(port, "/healthz").await, None);
    let log = daemon.log();
    assert!(
        log.lines().any(|l| l.contains(
            "ERROR cks_drift::daemon::listen: cannot listen on http.listen; checking goes on without /metrics and /healthz \
             and the address is tried again, every 10 s at most: free the port, set http.listen \
             to another one, or run cks-drift from cks-drift.socket so that systemd holds the \
             port from boot"
        ) && l.contains(&format!("address=127.0.0.1:{port}"))
            && l.contains("Address already in use")),
        "{log}"
    );

    // The squatter goes: the same process serves the endpoint, with what it found meanwhile.
    drop(squatter);
    daemon
        .wait_until("the endpoint after the port was freed", || async {
            try_get(port, "/healthz")
                .await
                .is_some_and(|(s, _)| s == 200)
        })
        .await;
    let text = daemon.metrics().await;
    promtool(&text);
    for line in [
        "cks_drift_open_mismatches{kind=\"unmapped_vm\"} 1",
        "cks_drift_api_requests_total{command=\"generateAlert\",outcome=\"ok\"} 1",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
    }
    assert!(daemon.child.try_wait().unwrap().is_none());
    assert!(daemon.log().contains("http.listen is bound at last"));
    daemon.signal("TERM");
    assert_eq!(daemon.exit().await.code(), Some(0), "{}", daemon.log());
}

/// `systemd-socket-activate` (Debian package systemd) listening on `port` with `options`,
/// passing the notify socket `Daemon::spawn` makes in `dir`.
fn socket_activate(dir: &Path, port: u16, options: &[&str]) -> Vec<String> {
    let mut launcher = vec![
        "systemd-socket-activate".to_string(),
        "-l".to_string(),
        format!("127.0.0.1:{port}"),
        "-E".to_string(),
        format!("NOTIFY_SOCKET={}", dir.join("notify.sock").display()),
    ];
    launcher.extend(options.iter().map(|o| o.to_string()));
    launcher
}

#[tokio::test]
async fn the_endpoint_is_served_on_the_socket_systemd_passes() {
    let (cloud, _) = one_cluster().await;
    let port = free_port();
    let configured = free_port();
    let (config, _) = daemon_config(&cloud, configured, "interval = \"1s\"", None);
    let dir = cloud.dir.path();
    let launcher = socket_activate(dir, port, &["--fdname=cks-drift.socket"]);
    let mut daemon = Daemon::spawn(dir, &config, port, None, &launcher);
    // systemd-socket-activate starts cks-drift at the first connection, which cks-drift then
    // answers on the socket it was passed.
    daemon
        .wait_until("/healthz through the passed socket", || async {
            try_get(port, "/healthz")
                .await
                .is_some_and(|(s, _)| s == 200)
        })
        .await;
    daemon
        .wait_until("a cycle", || async { daemon.ok_cycles().await >= 1.0 })
        .await;
    promtool(&daemon.metrics().await);
    assert!(daemon.notes().iter().any(|n| n.starts_with("READY=1\n")));
    // http.listen is not bound: the passed socket took its place.
    assert_eq!(try_get(configured, "/healthz").await, None);
    let log = daemon.log();
    assert!(
        log.contains(&format!(
            "WARN cks_drift::daemon::listen: the endpoint is served on the socket systemd \
             passed, not on http.listen: set ListenStream= of cks-drift.socket to http.listen's \
             address (systemctl edit cks-drift.socket), or disable the socket unit \
             address=127.0.0.1:{port} http_listen=127.0.0.1:{configured}\n"
        )),
        "{log}"
    );
    daemon.signal("TERM");
    assert_eq!(daemon.exit().await.code(), Some(0), "{log}");
}

#[tokio::test]
async fn a_passed_socket_that_is_not_tcp_leaves_http_listen() {
    let (cloud, _) = one_cluster().await;
    let port = free_port();
    let configured = free_port();
    let (config, _) = daemon_config(&cloud, configured, "interval = \"1h\"", None);
    let dir = cloud.dir.path();
    let launcher = socket_activate(dir, port, &["--datagram"]);
    let daemon = Daemon::spawn(dir, &config, configured, None, &launcher);
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    daemon
        .wait_until("/healthz on http.listen", || async {
            // A datagram starts cks-drift; it is not read.
            let _ = udp.send_to(b"x", ("127.0.0.1", port));
            try_get(configured, "/healthz")
                .await
                .is_some_and(|(s, _)| s == 200)
        })
        .await;
    let log = daemon.log();
    assert!(
        log.contains(
            "ERROR cks_drift::daemon::listen: the socket systemd passed is not served; http.listen is used instead \
             error=the socket systemd passed (fd 3, unknown) is not a TCP stream socket: \
             ListenStream= in cks-drift.socket must be an address:port, e.g. 127.0.0.1:9712: \
             fd 3 is not a valid tcp socket\n"
        ),
        "{log}"
    );
}

#[tokio::test]
async fn validate_config_under_socket_activation_says_the_passed_socket_is_served() {
    let (cloud, _) = one_cluster().await;
    let port = free_port();
    let (config, _) = daemon_config(&cloud, free_port(), "", None);
    let child = tokio::process::Command::new("systemd-socket-activate")
        .args([
            "-l",
            &format!("127.0.0.1:{port}"),
            "--fdname=cks-drift.socket",
        ])
        .arg(binary())
        .args(["validate-config", "-c"])
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run systemd-socket-activate (Debian package systemd)");
    // It starts the command at the first connection.
    let started = Instant::now();
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            started.elapsed() < SOON,
            "systemd-socket-activate never listened"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let out = tokio::time::timeout(SOON, child.wait_with_output())
        .await
        .expect("validate-config within 20 s")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.lines().any(|l| l
            == "ok: http.listen: not used: `run` serves the socket systemd passes (fd 3, \
                cks-drift.socket) in its place"),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A state file that cannot be written (a full disk) shows in `cks_drift_state_write_failing`
/// and `cks_drift_state_write_failures_total`, and the gauge clears once it is written again.
#[tokio::test]
async fn a_full_disk_shows_in_the_state_file_metrics_until_there_is_room() {
    let (cloud, _) = one_cluster().await;
    let disk = SmallDisk::mount(cloud.state_path().parent().unwrap());
    let port = free_port();
    let (config, _) = daemon_config(&cloud, port, "interval = \"1s\"", None);
    let mut daemon = Daemon::start(cloud.dir.path(), &config, port).await;
    daemon
        .wait_until("a cycle", || async { daemon.ok_cycles().await >= 1.0 })
        .await;
    let failing = "cks_drift_state_write_failing";
    assert_eq!(daemon.metric(failing).await, 0.0);
    assert_eq!(
        daemon.metric("cks_drift_state_write_failures_total").await,
        0.0
    );
    disk.fill();
    daemon
        .wait_until("the state file failing", || async {
            daemon.metric(failing).await == 1.0
        })
        .await;
    let text = daemon.metrics().await;
    promtool(&text);
    assert!(
        sample(&text, "cks_drift_state_write_failures_total") >= 1.0,
        "{text}"
    );
    assert!(
        sample(&text, "cks_drift_cycles_total{outcome=\"failed\"}") >= 1.0,
        "{text}"
    );
    disk.free();
    daemon
        .wait_until("the state file written again", || async {
            daemon.metric(failing).await == 0.0
        })
        .await;
    daemon.signal("TERM");
    assert_eq!(daemon.exit().await.code(), Some(0), "{}", daemon.log());
}
