//! The container image (`config/Containerfile`) run as a sidecar runs it: `podman run -d
//! --network host --read-only`, the config and the SSH key mounted read-only, the API keys as
//! podman secrets (files in /etc/cks-drift, never environment variables), the state folder a
//! host folder owned by the image's uid, the notify socket that a Quadlet unit's `Notify=true`
//! gives it, against the fake CloudStack and a real sshd control node on loopback addresses.
//! It checks READY=1, `/healthz`, `validate-config --connect` inside, that a planted drift is
//! alerted and logged, that a stop and a start send nothing again, that `podman stop` ends it
//! cleanly within its stop timeout, the Quadlet unit's health command, and prints the
//! container's peak memory.
//!
//! Ignored unless asked for: it needs podman, root and a built image, named by
//! `CKS_DRIFT_IMAGE`. `.ci/container` builds `cks-drift:ci` and runs
//!
//!     CKS_DRIFT_IMAGE=cks-drift:ci cargo test --locked --test it container:: -- --ignored

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::cloud::{API_KEY, SECRET_KEY, TestCloud, one_cluster};
use crate::support::sshd::free_port;

/// The uid and gid the image runs as (config/Containerfile).
const UID: u32 = 10001;
/// The stop timeout docs/service.md, the Containerfile and the Quadlet unit give it.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);
/// Deadline for anything the container should do within a few 1 s cycles.
const SOON: Duration = Duration::from_secs(30);

/// `podman ARGS`: exit code, stdout, stderr.
async fn podman(args: &[&str]) -> (i32, String, String) {
    podman_notifying(args, None).await
}

/// `podman ARGS` with `NOTIFY_SOCKET` set to `notify`, as systemd runs it for a Quadlet
/// unit with `Notify=true` (podman passes on the container's READY=1).
async fn podman_notifying(args: &[&str], notify: Option<&Path>) -> (i32, String, String) {
    let mut command = tokio::process::Command::new("podman");
    command.args(args).kill_on_drop(true);
    if let Some(socket) = notify {
        command.env("NOTIFY_SOCKET", socket);
    }
    let out = tokio::time::timeout(SOON, command.output())
        .await
        .unwrap_or_else(|_| panic!("podman {args:?} did not return within {SOON:?}"))
        .expect("run podman");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `podman ARGS` that must succeed: its stdout, trimmed.
async fn podman_ok(args: &[&str]) -> String {
    let (code, stdout, stderr) = podman(args).await;
    assert_eq!(code, 0, "podman {args:?}: {stderr}{stdout}");
    stdout.trim().to_string()
}

/// A container and the podman secrets made for it, removed on drop.
struct Container {
    name: String,
    secrets: Vec<String>,
    port: u16,
    http: reqwest::Client,
}

impl Container {
    async fn logs(&self) -> String {
        let (_, stdout, stderr) = podman(&["logs", &self.name]).await;
        format!("{stdout}{stderr}")
    }

    async fn inspect(&self, format: &str) -> String {
        podman_ok(&["inspect", "--format", format, &self.name]).await
    }

    /// GET `path` on the container's endpoint: status and body, or None while it is not
    /// listening.
    async fn get(&self, path: &str) -> Option<(u16, String)> {
        let response = self
            .http
            .get(format!("http://127.0.0.1:{}{path}", self.port))
            .send()
            .await
            .ok()?;
        let status = response.status().as_u16();
        Some((status, response.text().await.ok()?))
    }

    /// Completed cycles with outcome ok, as /metrics says (0 while it does not answer).
    async fn ok_cycles(&self) -> f64 {
        match self.get("/metrics").await {
            Some((200, text)) => sample(&text, "cks_drift_cycles_total{outcome=\"ok\"}"),
            _ => 0.0,
        }
    }

    /// Polls `cond` every 100 ms until it holds, or panics naming `what` with the logs.
    async fn wait_until<F, Fut>(&self, what: &str, mut cond: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let started = Instant::now();
        while !cond().await {
            if started.elapsed() > SOON {
                panic!(
                    "{what}: not within {SOON:?}; state: {}; logs:\n{}",
                    self.inspect("{{.State.Status}} exit {{.State.ExitCode}}")
                        .await,
                    self.logs().await
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn wait_healthy(&self) {
        self.wait_until("GET /healthz answers 200", || async {
            matches!(self.get("/healthz").await, Some((200, _)))
        })
        .await;
    }

    /// `podman stop`: how long it took; the exit code must be 0 and the time within the stop
    /// timeout (after which podman would have killed it).
    async fn stop(&self) -> Duration {
        let started = Instant::now();
        podman_ok(&[
            "stop",
            "--time",
            &STOP_TIMEOUT.as_secs().to_string(),
            &self.name,
        ])
        .await;
        let took = started.elapsed();
        let state = self.inspect("{{.State.Status}} {{.State.ExitCode}}").await;
        assert_eq!(state, "exited 0", "logs:\n{}", self.logs().await);
        assert!(
            took < STOP_TIMEOUT,
            "podman stop took {took:?}; logs:\n{}",
            self.logs().await
        );
        took
    }

    /// The running container's peak memory so far: its cgroup's (which counts the page cache
    /// of the files it read, the binary among them) and its process's peak RSS (VmHWM).
    async fn peak_memory(&self) -> (Option<u64>, u64) {
        let pid = self.inspect("{{.State.Pid}}").await;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let hwm_kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM");
        let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        let file = cgroups.lines().find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            // cgroup v1's memory controller, else the v2 hierarchy.
            if controllers.split(',').any(|c| c == "memory") {
                Some(format!(
                    "/sys/fs/cgroup/memory{path}/memory.max_usage_in_bytes"
                ))
            } else if controllers.is_empty() && !cgroups.contains(":memory:") {
                Some(format!("/sys/fs/cgroup{path}/memory.peak"))
            } else {
                None
            }
        });
        let cgroup = file.and_then(|f| std::fs::read_to_string(f).ok()?.trim().parse().ok());
        (cgroup, hwm_kib * 1024)
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = std::process::Command::new("podman")
            .args(["rm", "--force", "--time", "0", &self.name])
            .output();
        for secret in &self.secrets {
            let _ = std::process::Command::new("podman")
                .args(["secret", "rm", secret])
                .output();
        }
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

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// The harness's config with the container's paths: the keys as files (podman secrets) and
/// the SSH key in /etc/cks-drift, state and known_hosts in /var/lib/cks-drift, the
/// endpoint on `port`, a cycle every second.
fn container_config(cloud: &TestCloud, port: u16) -> String {
    // Writing the harness's config also writes the remote command's script, which the
    // control node's sshd runs on this host.
    let path = cloud.write_config();
    let mut config: toml::Table = std::fs::read_to_string(path).unwrap().parse().unwrap();
    fn table<'a>(config: &'a mut toml::Table, name: &str) -> &'a mut toml::Table {
        config
            .get_mut(name)
            .and_then(toml::Value::as_table_mut)
            .unwrap_or_else(|| panic!("[{name}] in the harness's config"))
    }
    let cloudstack = table(&mut config, "cloudstack");
    assert!(cloudstack.remove("api_key").is_some() && cloudstack.remove("secret_key").is_some());
    cloudstack.insert("api_key_file".into(), "/etc/cks-drift/api_key".into());
    cloudstack.insert("secret_key_file".into(), "/etc/cks-drift/secret_key".into());
    let ssh = table(&mut config, "ssh");
    ssh.insert("private_key".into(), "/etc/cks-drift/id_rsa".into());
    ssh.insert(
        "known_hosts".into(),
        "/var/lib/cks-drift/known_hosts".into(),
    );
    table(&mut config, "state").insert("path".into(), "/var/lib/cks-drift/state.json".into());
    table(&mut config, "check").insert("interval".into(), "1s".into());
    table(&mut config, "http").insert("listen".into(), format!("127.0.0.1:{port}").into());
    toml::to_string(&config).unwrap()
}

/// The Quadlet unit's health command (`HealthCmd=`, as podman receives it), for `port`.
fn quadlet_health_command(port: u16) -> String {
    let unit = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/cks-drift.container");
    let text = std::fs::read_to_string(&unit).unwrap();
    let command = text
        .lines()
        .find_map(|l| l.strip_prefix("HealthCmd="))
        .expect("HealthCmd= in config/cks-drift.container");
    assert!(command.contains("/127.0.0.1/9712 "), "{command}");
    command.replace("/127.0.0.1/9712 ", &format!("/127.0.0.1/{port} "))
}

/// A file owned by the image's uid with `mode`.
fn owned_file(path: &Path, contents: &[u8], mode: u32) -> PathBuf {
    std::fs::write(path, contents).unwrap();
    std::os::unix::fs::chown(path, Some(UID), Some(UID)).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    path.to_path_buf()
}

/// Lines of the event log in the state folder whose key is `key`.
fn events_of(state: &Path, key: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(state.join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["key"] == key)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs podman and an image: CKS_DRIFT_IMAGE=cks-drift:ci cargo test --test it container:: -- --ignored (.ci/container)"]
async fn the_image_runs_as_a_read_only_sidecar_and_keeps_its_state_across_a_restart() {
    let Some(image) = std::env::var("CKS_DRIFT_IMAGE")
        .ok()
        .filter(|v| !v.trim().is_empty())
    else {
        eprintln!(
            "SKIPPED: CKS_DRIFT_IMAGE names no image; build one and run e.g. \
             CKS_DRIFT_IMAGE=cks-drift:ci cargo test --test it container:: -- --ignored \
             (.ci/container does both)"
        );
        return;
    };

    let (cloud, id) = one_cluster().await;
    let port = free_port();
    let dir = cloud.dir.path().join("container");
    let state = dir.join("state");
    std::fs::create_dir_all(&state).unwrap();
    // The state folder belongs to the image's user, mode 0700, as docs/service.md ("As a
    // container sidecar") says to make it.
    std::os::unix::fs::chown(&state, Some(UID), Some(UID)).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();
    let config = dir.join("cks-drift.toml");
    std::fs::write(&config, container_config(&cloud, port)).unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
    // The SSH key: a copy the image's user owns, read-only (docs/service.md also shows an ACL).
    let key = owned_file(
        &dir.join("id_rsa"),
        &std::fs::read(cloud.dir.path().join("client_key")).unwrap(),
        0o400,
    );

    let name = format!("cks-drift-it-{}", std::process::id());
    let mut container = Container {
        name: name.clone(),
        secrets: Vec::new(),
        port,
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(3))
            .build()
            .unwrap(),
    };
    // Leftovers of an interrupted run with the same process id.
    let _ = podman(&["rm", "--force", "--time", "0", &name]).await;
    let mut secret_args = Vec::new();
    for (target, value) in [("api_key", API_KEY), ("secret_key", SECRET_KEY)] {
        let secret = format!("{name}-{target}");
        let _ = podman(&["secret", "rm", &secret]).await;
        let file = dir.join(format!("{target}.secret"));
        std::fs::write(&file, value).unwrap();
        podman_ok(&["secret", "create", &secret, &file.display().to_string()]).await;
        std::fs::remove_file(&file).unwrap();
        container.secrets.push(secret.clone());
        secret_args.push("--secret".to_string());
        // An absolute target: podman 4.3 cannot mount a secret into /run/secrets (its
        // default place) when the root is read-only.
        secret_args.push(format!(
            "{secret},type=mount,target=/etc/cks-drift/{target},uid={UID},gid={UID},mode=0400"
        ));
    }

    let volume =
        |host: &Path, inside: &str, options: &str| format!("{}:{inside}{options}", host.display());
    let health = quadlet_health_command(port);
    let mut args: Vec<String> = [
        "run",
        "--detach",
        "--name",
        &name,
        "--pull=never",
        "--network",
        "host",
        "--read-only",
        "--sdnotify=container",
        "--stop-timeout",
        &STOP_TIMEOUT.as_secs().to_string(),
        "--health-cmd",
        &health,
        "--health-interval",
        "disable",
        "--volume",
        &volume(&config, "/etc/cks-drift/cks-drift.toml", ":ro"),
        "--volume",
        &volume(&key, "/etc/cks-drift/id_rsa", ":ro"),
        "--volume",
        &volume(&state, "/var/lib/cks-drift", ""),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(secret_args);
    // The image's own command: run -c /etc/cks-drift/cks-drift.toml.
    args.push(image.clone());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // The notify socket systemd would give a Notify=true unit.
    let notify = dir.join("notify.sock");
    let socket = tokio::net::UnixDatagram::bind(&notify).unwrap();
    let notes = Arc::new(Mutex::new(Vec::<String>::new()));
    let listener = {
        let notes = notes.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            while let Ok(n) = socket.recv(&mut buf).await {
                let note = String::from_utf8_lossy(&buf[..n]).into_owned();
                notes.lock().unwrap().push(note);
            }
        })
    };
    let readies = || {
        notes
            .lock()
            .unwrap()
            .iter()
            .filter(|n| n.lines().any(|l| l == "READY=1"))
            .count()
    };
    let started = Instant::now();
    let (code, stdout, stderr) = podman_notifying(&args, Some(&notify)).await;
    assert_eq!(code, 0, "podman {args:?}: {stderr}{stdout}");
    container
        .wait_until("READY=1 on the notify socket", || async { readies() == 1 })
        .await;

    container.wait_healthy().await;
    let ready = started.elapsed();
    let (_, body) = container.get("/healthz").await.unwrap();
    assert!(body.starts_with("ok"), "{body}");
    container
        .wait_until("a first cycle", || async {
            container.ok_cycles().await >= 1.0
        })
        .await;
    assert_eq!(cloud.sim().call_count("generateAlert"), 0);

    // As the image and podman run it: uid 10001, a read-only root, no key in the environment.
    let pid = container.inspect("{{.State.Pid}}").await;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(
        status
            .lines()
            .any(|l| l.starts_with(&format!("Uid:\t{UID}\t{UID}\t"))),
        "{status}"
    );
    assert_eq!(
        container.inspect("{{.HostConfig.ReadonlyRootfs}}").await,
        "true"
    );
    let (code, _, stderr) = podman(&["exec", &name, "/bin/sh", "-c", "touch /usr/bin/x"]).await;
    assert!(
        code != 0 && stderr.contains("Read-only file system"),
        "{code} {stderr}"
    );
    let env = container.inspect("{{json .Config.Env}}").await;
    assert!(
        !env.contains("CKS_DRIFT_API_KEY") && !env.contains(API_KEY),
        "{env}"
    );

    // A worker's map row disappears while it runs: one alert, one annotation, one event, a
    // log line.
    let worker = cloud.unmap_last_worker(&id);
    let key = format!("unmapped_vm:{worker}");
    container
        .wait_until("the alert", || async { cloud.active_alerts().len() == 1 })
        .await;
    let after = container.ok_cycles().await;
    container
        .wait_until("two more cycles", || async {
            container.ok_cycles().await >= after + 2.0
        })
        .await;
    let alerts = cloud.sim().call_count("generateAlert");
    let annotations = cloud.sim().call_count("addAnnotation");
    assert_eq!((alerts, annotations), (1, 1));
    let logs = container.logs().await;
    let line = logs
        .lines()
        .find(|l| l.contains("unmapped_vm") && l.contains(&worker))
        .unwrap_or_else(|| panic!("no log line names {key}:\n{logs}"))
        .to_string();
    assert_eq!(events_of(&state, &key).len(), 1);
    // What it wrote is in the state folder, owned by its user.
    for file in ["state.json", "events.jsonl", "known_hosts"] {
        let meta = std::fs::metadata(state.join(file))
            .unwrap_or_else(|e| panic!("{file} in the state folder: {e}"));
        assert_eq!((meta.uid(), meta.gid()), (UID, UID), "{file}");
    }

    // The Quadlet unit's health command, run by podman in the image.
    let (code, stdout, stderr) = podman(&["healthcheck", "run", &name]).await;
    assert_eq!(code, 0, "HealthCmd {health}: {stdout}{stderr}");
    assert_eq!(
        container.inspect("{{.State.Health.Status}}").await,
        "healthy"
    );

    // The check docs/service.md ("As a container sidecar") runs, inside as the image's user:
    // the mounted key files and SSH key are readable and keep to the rule for files holding
    // secrets, the API and SSH answer.
    let (code, stdout, stderr) =
        podman(&["exec", &name, "cks-drift", "validate-config", "--connect"]).await;
    let said = format!("{stdout}{stderr}");
    assert_eq!(code, 0, "{said}");
    for ok in [
        "ok: cloudstack API: ",
        "ok: cloudstack key: ",
        "ok: ssh: cluster web, ",
    ] {
        assert!(said.lines().any(|l| l.starts_with(ok)), "{ok}… in\n{said}");
    }
    // The only warning: the fake CloudStack's plain http:// URL.
    let warnings: Vec<&str> = said.lines().filter(|l| l.starts_with("warning:")).collect();
    assert!(
        warnings.len() == 1 && warnings[0].starts_with("warning: cloudstack.url: is a plain http"),
        "{said}"
    );

    let (cgroup_before, rss_before) = container.peak_memory().await;
    let first_stop = container.stop().await;

    // Started again on the same state: nothing is sent again.
    podman_ok(&["start", &name]).await;
    container
        .wait_until("READY=1 again", || async { readies() == 2 })
        .await;
    container.wait_healthy().await;
    container
        .wait_until("two cycles after the start", || async {
            container.ok_cycles().await >= 2.0
        })
        .await;
    assert_eq!(cloud.sim().call_count("generateAlert"), alerts);
    assert_eq!(cloud.sim().call_count("addAnnotation"), annotations);
    assert_eq!(cloud.active_alerts().len(), 1);
    assert_eq!(events_of(&state, &key).len(), 1);
    let (_, metrics) = container.get("/metrics").await.unwrap();
    assert_eq!(
        sample(&metrics, "cks_drift_open_mismatches{kind=\"unmapped_vm\"}"),
        1.0
    );

    let (cgroup_after, rss_after) = container.peak_memory().await;
    let second_stop = container.stop().await;

    listener.abort();
    let cgroup = cgroup_before.max(cgroup_after);
    println!(
        "container {image}: /healthz 200 {ready:.1?} after podman run; podman stop took \
         {first_stop:.1?} and {second_stop:.1?} (timeout {STOP_TIMEOUT:?}), exit code 0"
    );
    println!("container {image}: the drift in `podman logs`: {line}");
    println!(
        "container {image}: peak memory {} charged to the container's cgroup (not counting \
         pages of the binary the host had cached already), peak RSS of cks-drift {} (VmHWM, \
         counting them)",
        cgroup.map_or("unknown".into(), mib),
        mib(rss_before.max(rss_after))
    );
}
