//! The `cks-drift` binary as an operator meets it: `demo`, `validate-config` on good and bad
//! configs, `--connect` against the fake CloudStack and a real sshd, and the one-line
//! messages (with their exit codes) of the common failures.

use std::net::Ipv4Addr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cks_drift::base::time::Timestamp;
use cks_drift::front::demo::{START, Scenario};
use cks_drift_sim::{FakeCloudStack, Sim, SimTime, World};

use crate::support::cloud::{from_any_listing, without_plain_http_warning};
use crate::support::sshd::{KeyKind, Sshd, fresh_loopback, keygen};

const API_KEY: &str = "cli-api-key";
const SECRET: &str = "cli-secret-key";

/// How the binary ended.
#[derive(Debug)]
struct Outcome {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs the binary off the async runtime (the fake CloudStack serves on it meanwhile), with
/// no secret or log settings inherited from the environment.
async fn cks_drift(args: &[&str]) -> Outcome {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let output = assert_cmd::Command::cargo_bin("cks-drift")
            .expect("the cks-drift binary")
            .args(&args)
            .env_remove("CKS_DRIFT_API_KEY")
            .env_remove("CKS_DRIFT_SECRET_KEY")
            .env_remove("RUST_LOG")
            .output()
            .expect("run cks-drift");
        Outcome {
            code: output.status.code().expect("an exit code"),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    })
    .await
    .expect("the binary's runner")
}

/// What `validate-config` says of the fake CloudStack's plain http:// URL.
const PLAIN_HTTP_WARNING: &str = "warning: cloudstack.url: is a plain http:// URL: every request's \
     signature and the answers travel in clear, so anything on the way can read them, replay a \
     request within its expiry and forge answers; use https:// (with cloudstack.ca_file for a \
     private CA)";

/// The secret-file rule as `validate-config` states it when run as root.
const SECRET_FILE_RULE: &str = "a file holding a secret may be readable by the user cks-drift \
     and the group cks-drift (e.g. 0640 root:cks-drift, or an ACL entry for the user \
     cks-drift), never by anybody else";

fn lines(text: &str) -> Vec<&str> {
    text.lines().collect()
}

/// Writes `cks-drift.toml` into `dir` with `mode`.
fn write_config(dir: &Path, text: &str, mode: u32) -> PathBuf {
    let path = dir.join("cks-drift.toml");
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

/// A complete config for `url`, keeping every file in `dir`. `command` is written with Rust's
/// string escaping, which for quotes and backslashes is a TOML basic string's.
fn config_text(dir: &Path, url: &str, secret: &str, key: &Path, command: &str) -> String {
    let d = dir.display();
    format!(
        r#"[cloudstack]
url = "{url}"
api_key = "{API_KEY}"
secret_key = "{secret}"
timeout = "5s"

[ssh]
private_key = "{key}"
user = "root"
known_hosts = "{d}/known_hosts"
connect_timeout = "5s"
command_timeout = "5s"
command = {command:?}

[state]
path = "{d}/state.json"

[log]
level = "warn"
"#,
        key = key.display(),
    )
}

/// A cloud with one Running cluster `web` (1 control node, 1 worker) whose endpoint is
/// `https://<endpoint>:6443/` (none when `None`), logging in as root.
fn cloud(endpoint: Option<Ipv4Addr>) -> (Arc<Sim>, String, Vec<String>) {
    let mut w = World::new(SimTime::now());
    let owner = w.admin();
    let id = w.add_cluster("web", owner, 1, 1, 0);
    w.cluster_mut(&id).endpoint = match endpoint {
        Some(ip) => format!("https://{ip}:6443/"),
        None => String::new(),
    };
    let map = w.cluster(&id).unwrap().map.clone();
    w.vm_mut(&map[0])
        .details
        .insert("controlNodeLoginUser".into(), "root".into());
    let names = map
        .iter()
        .map(|vm| w.vm(vm).unwrap().name.clone())
        .collect();
    (Arc::new(Sim::new(w)), id, names)
}

/// `printf` of the node lines kubectl would print for `names`.
fn printf_nodes(names: &[String]) -> String {
    let lines: String = names.iter().map(|n| format!("node/{n}\\n")).collect();
    format!("printf '{lines}'")
}

#[tokio::test]
async fn demo_shows_three_cycles_and_exits_0() {
    let out = cks_drift(&["demo"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stderr, "");
    let expected = Scenario::build(Timestamp::parse(START).unwrap());
    let (destroyed_id, destroyed) = &expected.destroyed_vm;
    let (stray_id, stray) = &expected.stray_vm;
    let (idle_id, idle) = &expected.not_a_node_vm;
    let ghost = &expected.ghost_node;
    let ids: Vec<(String, String)> = expected.sim.with_world(|w| {
        w.clusters
            .iter()
            .map(|c| (c.name.clone(), c.id.clone()))
            .collect()
    });
    let id_of = |name: &str| ids.iter().find(|(n, _)| n == name).unwrap().1.clone();

    let parts: Vec<&str> = out.stdout.split("\nCycle ").collect();
    assert_eq!(parts.len(), 4, "{}", out.stdout);
    let (first, second, third) = (parts[1], parts[2], parts[3]);

    let first_lines = lines(first);
    assert_eq!(first_lines[0], "1 at 2026-05-04T09:00:00Z");
    for line in [
        "  cks-drift check at 2026-05-04T09:00:00Z: 5 clusters (3 checked, 0 partial, 2 skipped), 4 mismatches".to_string(),
        format!("    checked  web ({})", id_of("web")),
        format!("    skipped  ci ({}): state Scaling: only Running and Alert clusters are checked", id_of("ci")),
        format!("    skipped  edge ({}): ExternalManaged cluster: its VMs are not managed by CloudStack", id_of("edge")),
        format!("    checked  analytics ({})", id_of("analytics")),
        format!("    [new] db  mapped_vm  VM {destroyed} ({destroyed_id}, Destroyed)"),
        format!("              VM {destroyed} ({destroyed_id}) is one of the VMs of Kubernetes cluster db in CloudStack, but is destroyed"),
        format!("    [new] db  unmapped_vm  VM {stray} ({stray_id}, Running)"),
        format!("              VM {stray} ({stray_id}, Running) is named as a node of Kubernetes cluster db but is not one of its VMs in CloudStack"),
        format!("    [new] db  node_without_vm  node {ghost}"),
        format!("              Kubernetes node {ghost} of cluster db matches no VM of the cluster in CloudStack"),
        format!("    [new] db  vm_not_a_node  VM {idle} ({idle_id}, Running)"),
        format!("              VM {idle} ({idle_id}) of Kubernetes cluster db is running but is not a Kubernetes node of the cluster"),
        "4 event log lines written (events.jsonl):".to_string(),
        format!("  WARN db: VM {destroyed} ({destroyed_id}) is one of the VMs of Kubernetes cluster db in CloudStack, but is destroyed"),
        format!("  WARN db: Kubernetes node {ghost} of cluster db matches no VM of the cluster in CloudStack"),
        "4 CloudStack alerts raised (generateAlert, confirmed with listAlerts):".to_string(),
        "4 admin-only annotations added on the cluster (addAnnotation):".to_string(),
    ] {
        assert!(first_lines.contains(&line.as_str()), "missing {line:?} in cycle 1:\n{first}");
    }
    let alerts: Vec<&str> = first_lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("  type "))
        .collect();
    assert_eq!(alerts.len(), 4, "{first}");
    assert!(
        alerts[0].starts_with(&format!(
            "  type 3000: Kubernetes cluster db, VM {destroyed} ({destroyed_id}): VM {destroyed}"
        )),
        "{}",
        alerts[0]
    );
    assert!(
        alerts[0].ends_with(&format!(
            "[cks-drift {}/mapped_vm:{destroyed_id}]",
            id_of("db")
        )),
        "{}",
        alerts[0]
    );

    let second_lines = lines(second);
    assert_eq!(second_lines[0], "2 at 2026-05-04T09:05:00Z");
    assert!(
        second_lines.contains(
            &format!("          db  mapped_vm  VM {destroyed} ({destroyed_id}, Destroyed)")
                .as_str()
        ),
        "{second}"
    );
    assert!(
        second_lines
            .contains(&"No new mismatches; 4 still open, already reported: nothing was sent."),
        "{second}"
    );
    assert!(!second.contains("[new]"), "{second}");
    assert!(
        second.contains("The operator undoes the drift in db:"),
        "{second}"
    );

    let third_lines = lines(third);
    assert_eq!(third_lines[0], "3 at 2026-05-04T09:10:00Z");
    for line in [
        "  cks-drift check at 2026-05-04T09:10:00Z: 5 clusters (3 checked, 0 partial, 2 skipped), 0 mismatches".to_string(),
        "2 event log lines written (events.jsonl):".to_string(),
        "  INFO db: The VM map of Kubernetes cluster db matches the VMs of the cluster in CloudStack again".to_string(),
        "  INFO db: The VM map of Kubernetes cluster db matches the Kubernetes nodes of the cluster again".to_string(),
        "4 CloudStack alerts archived (archiveAlerts):".to_string(),
        format!("  type 3000: mapped_vm:{destroyed_id}"),
        format!("  type 3001: unmapped_vm:{stray_id}"),
        format!("  type 3002: node_without_vm:{ghost}"),
        format!("  type 3003: vm_not_a_node:{idle_id}"),
        "4 annotations removed (removeAnnotation):".to_string(),
        format!("  db: mapped_vm:{destroyed_id}"),
    ] {
        assert!(third_lines.contains(&line.as_str()), "missing {line:?} in cycle 3:\n{third}");
    }
    assert!(!third.contains("Mismatches"), "{third}");
}

/// A running `cks-drift demo --serve`: its process, the config it wrote, what it printed.
struct Served {
    process: std::process::Child,
    config: PathBuf,
    printed: String,
}

impl Served {
    async fn start() -> Served {
        use std::io::{BufRead, BufReader};
        // Started with SIGINT ignored, as a shell's background job starts it: the Ctrl-C of
        // `stop` must still be heard, however soon after the config line it comes.
        let mut process = std::process::Command::new("sh")
            .args(["-c", "trap '' INT; exec \"$0\" demo --serve"])
            .arg(crate::support::cloud::binary())
            .env_remove("RUST_LOG")
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start cks-drift demo --serve");
        let stdout = process.stdout.take().expect("its standard output");
        // Read up to the last line of the instructions, the config line on the way.
        let (config, printed) = tokio::task::spawn_blocking(move || {
            let mut printed = String::new();
            let mut config = None;
            for line in BufReader::new(stdout).lines() {
                let line = line.expect("read what it prints");
                printed.push_str(&line);
                printed.push('\n');
                if let Some(path) = line.strip_prefix("config") {
                    config = Some(PathBuf::from(path.trim()));
                }
                if line == "cluster matches, 2 when it cannot run." {
                    let config = config.unwrap_or_else(|| panic!("no config line in:\n{printed}"));
                    return (config, printed);
                }
            }
            panic!("no end of the instructions in:\n{printed}");
        })
        .await
        .unwrap();
        Served {
            process,
            config,
            printed,
        }
    }

    /// The address of `cluster`'s control node, as printed.
    fn control_node(&self, cluster: &str) -> String {
        self.printed
            .lines()
            .find(|l| l.starts_with("control node") && l.ends_with(&format!(": cluster {cluster}")))
            .and_then(|l| l.split_whitespace().nth(2))
            .unwrap_or_else(|| panic!("no control node of {cluster} in:\n{}", self.printed))
            .to_string()
    }

    /// Ctrl-C: it exits 0 and its folder is gone.
    async fn stop(mut self) {
        let interrupt = std::process::Command::new("kill")
            .args(["-INT", &self.process.id().to_string()])
            .status()
            .expect("run kill");
        assert!(interrupt.success());
        let status = tokio::task::spawn_blocking(move || self.process.wait())
            .await
            .unwrap()
            .expect("wait for it");
        assert!(status.success(), "{status:?}");
        assert!(
            !self.config.exists(),
            "its folder is removed: {}",
            self.config.display()
        );
    }
}

/// `demo --serve`: the demo's cloud served on loopback (its API over HTTP, each control node's
/// SSH), with a config the other commands run against as printed; a second one at the same
/// time takes other addresses; Ctrl-C stops each and removes its folder.
#[tokio::test]
async fn demo_serve_gives_a_cloud_that_check_explain_and_validate_config_run_against() {
    let served = Served::start().await;
    for cluster in ["web", "db", "analytics"] {
        assert!(
            served.control_node(cluster).ends_with(":2222"),
            "{}",
            served.printed
        );
    }
    let c = served.config.to_str().unwrap().to_string();
    // The commands as they run where the binary is: this one is built in the source tree, so
    // `cargo run --` there (a plain `cks-drift` is not on a clone's PATH), unless the tests
    // were built in another target folder.
    let tree = Path::new(env!("CARGO_MANIFEST_DIR"));
    let binary = crate::support::cloud::binary();
    let (p, place) = if binary == tree.join("target/debug/cks-drift") {
        (
            "cargo run --".to_string(),
            format!(", in {}", tree.display()),
        )
    } else {
        (binary.display().to_string(), String::new())
    };
    let instructions = format!(
        "db drifts four ways; web and analytics match; ci and edge are skipped. In another\n\
         terminal, as this user{place}:\n\n\
         \x20 {p} validate-config -c {c} --connect\n\
         \x20 {p} check -c {c} --no-notify\n\
         \x20 {p} explain -c {c} db\n\
         \x20 {p} check -c {c}   # raises alerts and annotations in the simulated cloud\n\
         \x20 {p} run -c {c}     # the service: a check every 5 minutes\n\n\
         check exits 1 when it finds mismatches (here, db's four), 0 when every checked\n\
         cluster matches, 2 when it cannot run.\n"
    );
    assert!(
        served.printed.ends_with(&format!("{c}\n\n{instructions}")),
        "{}",
        served.printed
    );
    let validate = cks_drift(&["validate-config", "-c", &c, "--connect"]).await;
    assert_eq!(validate.code, 0, "{validate:?}");
    let web = served.control_node("web");
    assert!(
        validate.stdout.contains(&format!(
            "ok: ssh: cluster web, cloud@{web}: ssh.command listed 3 nodes, 3 with a system UUID or provider ID; 3 of them Ready"
        )),
        "{validate:?}"
    );
    let check = cks_drift(&["check", "-c", &c, "--no-notify"]).await;
    assert_eq!(check.code, 1, "mismatches found: {check:?}");
    assert!(
        check
            .stdout
            .contains("5 clusters (3 checked, 0 partial, 2 skipped), 4 mismatches"),
        "{check:?}"
    );
    for kind in [
        "mapped_vm",
        "unmapped_vm",
        "node_without_vm",
        "vm_not_a_node",
    ] {
        assert!(
            check.stdout.contains(&format!("  db  {kind}  ")),
            "{kind}: {check:?}"
        );
    }
    let explain = cks_drift(&["explain", "-c", &c, "db"]).await;
    assert_eq!(explain.code, 0, "{explain:?}");
    assert!(explain.stdout.contains("\nFindings: 4\n"), "{explain:?}");
    // Alerts and annotations go to the served cloud, once.
    let first = cks_drift(&["check", "-c", &c]).await;
    assert_eq!(first.code, 1, "{first:?}");
    assert_eq!(first.stdout.matches("[new]").count(), 4, "{first:?}");
    let second = cks_drift(&["check", "-c", &c]).await;
    assert_eq!(second.code, 1, "{second:?}");
    assert!(!second.stdout.contains("[new]"), "{second:?}");

    let other = Served::start().await;
    assert_ne!(other.control_node("web"), web, "{}", other.printed);
    other.stop().await;
    served.stop().await;
}

#[tokio::test]
async fn validate_config_accepts_a_good_config() {
    let dir = tempfile::tempdir().unwrap();
    let key = keygen(&dir.path().join("id_rsa"), KeyKind::RsaPkcs1);
    let text = config_text(
        dir.path(),
        "https://cloud.example.com/client/api",
        SECRET,
        &key,
        cks_drift::config::DEFAULT_COMMAND,
    );
    let config = write_config(dir.path(), &text, 0o600);
    let out = cks_drift(&["validate-config", "-c", config.to_str().unwrap()]).await;
    assert_eq!(
        (out.code, out.stdout.as_str(), out.stderr.as_str()),
        (
            0,
            format!("config file {} is valid\n", config.display()).as_str(),
            ""
        )
    );
}

#[tokio::test]
async fn validate_config_lists_every_problem_with_its_key_and_a_fix() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let text = format!(
        r#"[cloudstack]
url = "cloud.example.com/client/api"
api_key = "AK"
secret_key = "SK"
timeout = "30"
insecure = true

[ssh]
private_key = "{d}"
host_key_policy = "yes"

[check]
grace_period = "1m"
concurency = 4

[notify]
alert_types = "10-20"
"#
    );
    let config = write_config(dir.path(), &text, 0o600);
    let out = cks_drift(&["validate-config", "-c", config.to_str().unwrap()]).await;
    assert_eq!(out.code, 2, "{out:?}");
    assert_eq!(out.stderr, "");
    let c = config.display();
    assert_eq!(
        lines(&out.stdout),
        [
            "error: check.concurency: is not a known key; did you mean check.concurrency? [check] takes enabled, interval, initial_delay, grace_period, concurrency, blind_after, resolve_after".to_string(),
            "error: cloudstack.url: \"cloud.example.com/client/api\" is not a URL (relative URL without a base); e.g. \"https://cloud.example.com/client/api\"".to_string(),
            "error: cloudstack.timeout: \"30\" has no unit; write e.g. \"30s\" or \"30m\"".to_string(),
            "error: ssh.host_key_policy: is \"yes\"; use \"strict\", \"accept-new\" or \"off\"".to_string(),
            "error: notify.alert_types: \"10-20\" overlaps CloudStack's own alert types (0-33 and those added later); use numbers above 100, e.g. \"3000-3999\"".to_string(),
            format!("error: ssh.private_key: cannot read {d}: Is a directory (os error 21)"),
            "warning: cloudstack.insecure: is true: the management server's certificate is not verified, so anything between this host and it can pose as CloudStack; set cloudstack.ca_file to the CA that signed its certificate and remove insecure".to_string(),
            "warning: check.grace_period: is \"1m\", under 5 minutes: VMs of a cluster being created, scaled or upgraded may be reported before the operation ends; use at least \"5m\" (the default is \"15m\")".to_string(),
            format!("config file {c}: 6 errors, 2 warnings; fix the errors and run validate-config again"),
        ]
    );
}

#[tokio::test]
async fn validate_config_with_only_warnings_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let key = keygen(&dir.path().join("id_ed25519"), KeyKind::Ed25519);
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let text = config_text(
        dir.path(),
        "https://cloud.example.com/client/api",
        SECRET,
        &key,
        "kubectl get nodes -o name | sort",
    )
    .replace("[cloudstack]\n", "[cloudstack]\ninsecure = true\n")
    .replace(
        "user = \"root\"",
        "user = \"root\"\nhost_key_policy = \"off\"",
    ) + "\n[check]\ngrace_period = \"2m\"\n";
    let config = write_config(dir.path(), &text, 0o644);
    let out = cks_drift(&["validate-config", "-c", config.to_str().unwrap()]).await;
    assert_eq!(out.code, 0, "{out:?}");
    let (c, k) = (config.display(), key.display());
    assert_eq!(
        lines(&out.stdout),
        [
            "warning: cloudstack.insecure: is true: the management server's certificate is not verified, so anything between this host and it can pose as CloudStack; set cloudstack.ca_file to the CA that signed its certificate and remove insecure".to_string(),
            "warning: ssh.host_key_policy: is \"off\": any host key is accepted, so a machine posing as a control node is trusted; use \"accept-new\" (the default) or \"strict\"".to_string(),
            "warning: check.grace_period: is \"2m\", under 5 minutes: VMs of a cluster being created, scaled or upgraded may be reported before the operation ends; use at least \"5m\" (the default is \"15m\")".to_string(),
            format!("warning: ssh.command: \"kubectl get nodes -o name | sort\" lists node names only (-o name): nodes are then matched to VMs by name, so a node its tenant renamed is not recognised and one named like another VM is not caught; list their system UUIDs and provider IDs too with \"kubectl get nodes {}\" (the default)", cks_drift::remote::kubectl::LIST_ARGUMENTS),
            "warning: ssh.command: \"kubectl get nodes -o name | sort\" uses shell syntax (a pipe or ||); it runs on the node as \"timeout 5s <command>\", so it must be a simple command (a program and its arguments): wrap anything else in sh -c '…' or in a script on the node".to_string(),
            format!("warning: cloudstack.api_key: {c} holds cloudstack.api_key inline and others may read it (mode 0644); {SECRET_FILE_RULE}: chmod o-rwx {c}, or move the key to cloudstack.api_key_file"),
            format!("warning: cloudstack.secret_key: {c} holds cloudstack.secret_key inline and others may read it (mode 0644); {SECRET_FILE_RULE}: chmod o-rwx {c}, or move the key to cloudstack.secret_key_file"),
            format!("warning: ssh.private_key: {k} is a private key and others may read it (mode 0644); {SECRET_FILE_RULE}: chmod o-rwx {k}"),
            format!("config file {c} is valid, with 8 warnings"),
        ]
    );
}

/// What `--connect` says of the fake's release and of the key's holder.
const RELEASE_OK: &str =
    "ok: cloudstack release: CloudStack 4.22.1.0: nothing is done differently on this release";
const KEY_OK: &str =
    "ok: cloudstack key: held by user admin of account admin, role Root Admin (type Admin)";
const ALERT_TYPES_OK: &str = "ok: cloudstack alert types: notify.alert_types 3000-3999 is clear \
     of CloudStack's 39 own alert types (0 to 34, as listAlertTypes lists them)";
const SERVER_CHECK_OK: &str = "ok: cloudstack VM map check: CloudStack has no VM map check of \
     its own: cks-drift alerts every mismatch";

/// `validate-config --connect` against `fake` with the config of `config_text` (SSH key `key`,
/// `ssh.command` `command`), in a new folder: the folder, the config and the run.
async fn validate_connect(
    fake: &FakeCloudStack,
    key: &Path,
    command: &str,
) -> (tempfile::TempDir, std::path::PathBuf, Outcome) {
    let dir = tempfile::tempdir().unwrap();
    let text = config_text(dir.path(), &fake.url(), SECRET, key, command);
    let config = write_config(dir.path(), &text, 0o600);
    let out = cks_drift(&[
        "validate-config",
        "-c",
        config.to_str().unwrap(),
        "--connect",
    ])
    .await;
    (dir, config, out)
}

#[tokio::test]
async fn validate_config_connect_reaches_the_api_and_a_control_node() {
    let sshd = Sshd::start_at(fresh_loopback(), 2222);
    let (sim, _, names) = cloud(Some(sshd.ip()));
    let fake = FakeCloudStack::start(sim, API_KEY, SECRET).await;
    let (dir, config, out) =
        validate_connect(&fake, sshd.client_key(), &printf_nodes(&names)).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        lines(&out.stdout),
        [
            PLAIN_HTTP_WARNING.to_string(),
            format!(
                "ok: cloudstack API: {} accepted the keys and answered listKubernetesClusters (1 cluster)",
                fake.url()
            ),
            RELEASE_OK.to_string(),
            KEY_OK.to_string(),
            ALERT_TYPES_OK.to_string(),
            SERVER_CHECK_OK.to_string(),
            format!(
                "ok: ssh: cluster web, root@{}:2222: ssh.command listed 2 nodes, by name only (none with a system UUID or provider ID): they are matched to VMs by name",
                sshd.ip()
            ),
            format!("config file {} is valid, with 1 warning", config.display()),
        ]
    );
    // accept-new learned the node's key.
    let learned = std::fs::read_to_string(dir.path().join("known_hosts")).unwrap();
    assert!(
        learned.starts_with(&format!("[{}]:2222 ", sshd.ip())),
        "{learned}"
    );
}

/// A cluster name forging a line of its own, as `--connect` would print it.
const FORGED_NAME: &str = "web\r\nok: ssh: all control nodes verified";

#[tokio::test]
async fn validate_config_connect_shows_a_cluster_name_escaped_on_its_line() {
    let sshd = Sshd::start_at(fresh_loopback(), 2222);
    let (sim, id, names) = cloud(Some(sshd.ip()));
    sim.with_world(|w| w.cluster_mut(&id).name = FORGED_NAME.into());
    let fake = FakeCloudStack::start(sim, API_KEY, SECRET).await;
    let (_dir, config, out) =
        validate_connect(&fake, sshd.client_key(), &printf_nodes(&names)).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        lines(&out.stdout)[6..],
        [
            format!(
                "ok: ssh: cluster web\\x0d\\x0aok: ssh: all control nodes verified, root@{}:2222: ssh.command listed 2 nodes, by name only (none with a system UUID or provider ID): they are matched to VMs by name",
                sshd.ip()
            ),
            format!("config file {} is valid, with 1 warning", config.display()),
        ]
    );
    assert!(!out.stdout.contains('\r'), "{out:?}");
}

#[tokio::test]
async fn validate_config_connect_shows_a_cluster_name_without_endpoint_escaped() {
    let (sim, id, _) = cloud(None);
    sim.with_world(|w| w.cluster_mut(&id).name = FORGED_NAME.into());
    let fake = FakeCloudStack::start(sim, API_KEY, SECRET).await;
    let dir = tempfile::tempdir().unwrap();
    let key = keygen(&dir.path().join("id_rsa"), KeyKind::RsaPkcs1);
    let text = config_text(dir.path(), &fake.url(), SECRET, &key, "true");
    let config = write_config(dir.path(), &text, 0o600);
    let out = cks_drift(&[
        "validate-config",
        "-c",
        config.to_str().unwrap(),
        "--connect",
    ])
    .await;
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        lines(&out.stdout)[6..],
        [
            format!(
                "warning: ssh: cluster web\\x0d\\x0aok: ssh: all control nodes verified ({id}): the cluster has no endpoint address to reach its control node over SSH; CloudStack records one when the cluster first starts, so until then only its VM map and VMs are compared; SSH was not tried"
            ),
            format!("config file {} is valid, with 2 warnings", config.display()),
        ]
    );
    assert!(!out.stdout.contains('\r'), "{out:?}");
}

#[tokio::test]
async fn validate_config_connect_shows_the_control_nodes_stderr_escaped() {
    let sshd = Sshd::start_at(fresh_loopback(), 2222);
    let (sim, _, _) = cloud(Some(sshd.ip()));
    let fake = FakeCloudStack::start(sim, API_KEY, SECRET).await;
    let dir = tempfile::tempdir().unwrap();
    // Clears the screen, retitles the terminal and returns to the start of the line to
    // write over what cks-drift printed.
    let command = r#"sh -c 'printf "\033[2J\033]0;owned\007\rok: ssh: all control nodes verified\n" >&2; exit 1'"#;
    let text = config_text(dir.path(), &fake.url(), SECRET, sshd.client_key(), command);
    let config = write_config(dir.path(), &text, 0o600);
    let out = cks_drift(&[
        "validate-config",
        "-c",
        config.to_str().unwrap(),
        "--connect",
    ])
    .await;
    assert_eq!(out.code, 2, "{out:?}");
    let ip = sshd.ip();
    assert_eq!(
        lines(&out.stdout)[6..],
        [
            format!(
                "error: ssh (kubectl): cluster web, root@{ip}:2222: command on {ip}:2222 exited with status 1: \\x1b[2J\\x1b]0;owned\\x07\\x0dok: ssh: all control nodes verified; run ssh.command by hand on the control node as the login user: it needs passwordless sudo (sudo -n) and kubectl at the path given"
            ),
            format!(
                "config file {}: 1 error, 1 warning; fix the errors and run validate-config again",
                config.display()
            ),
        ]
    );
    assert!(!out.stdout.contains(['\x1b', '\x07', '\r']), "{out:?}");
}

#[tokio::test]
async fn validate_config_connect_names_a_wrong_secret() {
    let (sim, _, _) = cloud(Some(Ipv4Addr::LOCALHOST));
    let fake = FakeCloudStack::start(sim.clone(), API_KEY, SECRET).await;
    let dir = tempfile::tempdir().unwrap();
    let key = keygen(&dir.path().join("id_rsa"), KeyKind::RsaPkcs1);
    let text = config_text(dir.path(), &fake.url(), "not-the-secret", &key, "true");
    let config = write_config(dir.path(), &text, 0o600);
    let out = cks_drift(&[
        "validate-config",
        "-c",
        config.to_str().unwrap(),
        "--connect",
    ])
    .await;
    assert_eq!(out.code, 2, "{out:?}");
    let url = fake.url();
    assert_eq!(
        lines(&out.stdout),
        [
            PLAIN_HTTP_WARNING.to_string(),
            format!(
                "error: cloudstack API (credentials): cloudstack at {url} refused listKubernetesClusters with HTTP 401 (unable to verify user credentials and/or request signature); check cloudstack.api_key and cloudstack.secret_key (or CKS_DRIFT_API_KEY and CKS_DRIFT_SECRET_KEY), that this host's clock is right (requests expire), that the account and user are enabled, and that the key's role may call listKubernetesClusters"
            ),
            format!(
                "config file {}: 1 error, 1 warning; fix the errors and run validate-config again",
                config.display()
            ),
        ]
    );
    // Refused at authentication: the simulated server never ran a command.
    assert_eq!(sim.calls().len(), 0);
}

#[tokio::test]
async fn validate_config_connect_names_a_changed_host_key() {
    let sshd = Sshd::start_at(fresh_loopback(), 2222);
    let (sim, _, _) = cloud(Some(sshd.ip()));
    let fake = FakeCloudStack::start(sim, API_KEY, SECRET).await;
    let dir = tempfile::tempdir().unwrap();
    // The key recorded for the node is not the one it presents (the node was rebuilt).
    let (known_hosts, host) = known_hosts_with_another_key(dir.path(), &sshd);
    let text = config_text(
        dir.path(),
        &fake.url(),
        SECRET,
        sshd.client_key(),
        "echo node/a",
    );
    let config = write_config(dir.path(), &text, 0o600);
    let out = cks_drift(&[
        "validate-config",
        "-c",
        config.to_str().unwrap(),
        "--connect",
    ])
    .await;
    assert_eq!(out.code, 2, "{out:?}");
    let (ip, kh) = (sshd.ip(), known_hosts.display());
    assert_eq!(
        lines(&out.stdout)[2..6],
        [RELEASE_OK, KEY_OK, ALERT_TYPES_OK, SERVER_CHECK_OK]
    );
    assert_eq!(
        lines(&out.stdout)[6],
        format!(
            "error: ssh (host key): cluster web, root@{ip}:2222: host key of {ip}:2222 (ssh-ed25519) does not match the one recorded at {kh}:1; if the node was rebuilt, remove the stale entry (ssh-keygen -R '{host}' -f {kh})"
        )
    );
}

#[tokio::test]
async fn validate_config_connect_does_not_try_ssh_without_an_endpoint() {
    let (sim, id, _) = cloud(None);
    let fake = FakeCloudStack::start(sim, API_KEY, SECRET).await;
    let dir = tempfile::tempdir().unwrap();
    let key = keygen(&dir.path().join("id_rsa"), KeyKind::RsaPkcs1);
    let text = config_text(dir.path(), &fake.url(), SECRET, &key, "true");
    let config = write_config(dir.path(), &text, 0o600);
    let out = cks_drift(&[
        "validate-config",
        "-c",
        config.to_str().unwrap(),
        "--connect",
    ])
    .await;
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(lines(&out.stdout)[0], PLAIN_HTTP_WARNING);
    assert_eq!(
        lines(&out.stdout)[2..],
        [
            RELEASE_OK.to_string(),
            KEY_OK.to_string(),
            ALERT_TYPES_OK.to_string(),
            SERVER_CHECK_OK.to_string(),
            format!(
                "warning: ssh: cluster web ({id}): the cluster has no endpoint address to reach its control node over SSH; CloudStack records one when the cluster first starts, so until then only its VM map and VMs are compared; SSH was not tried"
            ),
            format!("config file {} is valid, with 2 warnings", config.display()),
        ]
    );
}

#[tokio::test]
async fn a_missing_config_file_is_one_line_and_exit_2() {
    for command in ["check", "validate-config"] {
        let out = cks_drift(&[command, "-c", "/nonexistent/cks-drift.toml"]).await;
        assert_eq!(out.code, 2, "{command}: {out:?}");
        let message = "cannot read config file /nonexistent/cks-drift.toml: no such file; pass the right path with -c (the package installs /etc/cks-drift/cks-drift.toml; in a source tree, start from config/cks-drift.toml)";
        let (stream, expected) = match command {
            "check" => (&out.stderr, format!("cks-drift: {message}\n")),
            _ => (
                &out.stdout,
                format!(
                    "error: {message}\nconfig file /nonexistent/cks-drift.toml: 1 error, 0 warnings; fix the errors and run validate-config again\n"
                ),
            ),
        };
        assert_eq!(stream, &expected, "{command}");
    }
}

#[tokio::test]
async fn a_bad_url_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let key = keygen(&dir.path().join("id_rsa"), KeyKind::RsaPkcs1);
    let text = config_text(
        dir.path(),
        "cloud.example.com/client/api",
        SECRET,
        &key,
        "true",
    );
    let config = write_config(dir.path(), &text, 0o600);
    let out = cks_drift(&["check", "-c", config.to_str().unwrap(), "--no-notify"]).await;
    assert_eq!(out.code, 2, "{out:?}");
    assert_eq!(
        out.stderr,
        format!(
            "cks-drift: config file {}: cloudstack.url: \"cloud.example.com/client/api\" is not a URL (relative URL without a base); e.g. \"https://cloud.example.com/client/api\"\n",
            config.display()
        )
    );
}

#[tokio::test]
async fn a_url_that_is_not_the_api_is_named() {
    let (sim, _, _) = cloud(None);
    let fake = FakeCloudStack::start(sim, API_KEY, SECRET).await;
    let dir = tempfile::tempdir().unwrap();
    let key = keygen(&dir.path().join("id_rsa"), KeyKind::RsaPkcs1);
    let base = fake.url().trim_end_matches("/client/api").to_string();
    let address = base.trim_start_matches("http://").to_string();

    // The right server, the wrong path.
    let wrong_path = format!("{base}/client");
    let text = config_text(dir.path(), &wrong_path, SECRET, &key, "true");
    let config = write_config(dir.path(), &text, 0o600);
    let out = cks_drift(&["check", "-c", config.to_str().unwrap(), "--no-notify"]).await;
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        from_any_listing(
            &without_plain_http_warning(&out.stderr),
            |what, command| format!(
                "cks-drift: cannot list {what}: cloudstack command {command} got an unexpected HTTP 404 answer: (empty body); {wrong_path} does not answer as CloudStack's API: cloudstack.url must be the API endpoint, e.g. \"https://cloud.example.com/client/api\" (endpoint)\n"
            )
        ),
        "{}",
        out.stderr
    );

    // https:// to a port that speaks plain HTTP.
    let https = format!("https://{address}/client/api");
    let text = config_text(dir.path(), &https, SECRET, &key, "true");
    let config = write_config(dir.path(), &text, 0o600);
    let out = cks_drift(&["check", "-c", config.to_str().unwrap(), "--no-notify"]).await;
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        from_any_listing(&out.stderr, |what, _| format!(
            "cks-drift: cannot list {what}: TLS with {address} failed: received corrupt message of type InvalidContentType; if a private CA signed the management server's certificate, set cloudstack.ca_file to it; if the port speaks plain HTTP, use an http:// URL (TLS)\n"
        )),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn a_wrong_secret_is_one_line_and_exit_2() {
    let (sim, _, _) = cloud(None);
    let fake = FakeCloudStack::start(sim, API_KEY, SECRET).await;
    let dir = tempfile::tempdir().unwrap();
    let key = keygen(&dir.path().join("id_rsa"), KeyKind::RsaPkcs1);
    let text = config_text(dir.path(), &fake.url(), "not-the-secret", &key, "true");
    let config = write_config(dir.path(), &text, 0o600);
    let out = cks_drift(&["check", "-c", config.to_str().unwrap(), "--no-notify"]).await;
    assert_eq!(out.code, 2, "{out:?}");
    let url = fake.url();
    assert!(
        from_any_listing(
            &without_plain_http_warning(&out.stderr),
            |what, command| format!(
                "cks-drift: cannot list {what}: cloudstack at {url} refused {command} with HTTP 401 (unable to verify user credentials and/or request signature); check cloudstack.api_key and cloudstack.secret_key (or CKS_DRIFT_API_KEY and CKS_DRIFT_SECRET_KEY), that this host's clock is right (requests expire), that the account and user are enabled, and that the key's role may call {command} (credentials)\n"
            )
        ),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("not-the-secret"));
}

#[tokio::test]
async fn an_unreadable_key_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    // A directory: unreadable as a file even for root.
    let key = dir.path().join("keys");
    std::fs::create_dir(&key).unwrap();
    let text = config_text(
        dir.path(),
        "https://cloud.example.com/client/api",
        SECRET,
        &key,
        "true",
    );
    let config = write_config(dir.path(), &text, 0o600);
    let out = cks_drift(&["check", "-c", config.to_str().unwrap(), "--no-notify"]).await;
    assert_eq!(out.code, 2, "{out:?}");
    assert_eq!(
        out.stderr,
        format!(
            "cks-drift: ssh.private_key: cannot read {}: Is a directory (os error 21)\n",
            key.display()
        )
    );
}

#[tokio::test]
async fn a_changed_host_key_makes_the_cluster_partial_with_exit_3() {
    let sshd = Sshd::start_at(fresh_loopback(), 2222);
    let (sim, id, names) = cloud(Some(sshd.ip()));
    let fake = FakeCloudStack::start(sim, API_KEY, SECRET).await;
    let dir = tempfile::tempdir().unwrap();
    let (known_hosts, host) = known_hosts_with_another_key(dir.path(), &sshd);
    let text = config_text(
        dir.path(),
        &fake.url(),
        SECRET,
        sshd.client_key(),
        &printf_nodes(&names),
    );
    let config = write_config(dir.path(), &text, 0o600);
    let out = cks_drift(&["check", "-c", config.to_str().unwrap(), "--no-notify"]).await;
    assert_eq!(out.code, 3, "{out:?}");
    let (ip, kh) = (sshd.ip(), known_hosts.display());
    assert!(
        lines(&out.stdout).contains(&format!(
            "  partial  web ({id}): nodes not listed: host key of {ip}:2222 (ssh-ed25519) does not match the one recorded at {kh}:1; if the node was rebuilt, remove the stale entry (ssh-keygen -R '{host}' -f {kh})"
        ).as_str()),
        "{}",
        out.stdout
    );
}

#[tokio::test]
async fn a_cluster_without_endpoint_is_partial_with_exit_3() {
    let (sim, id, _) = cloud(None);
    let fake = FakeCloudStack::start(sim, API_KEY, SECRET).await;
    let dir = tempfile::tempdir().unwrap();
    let key = keygen(&dir.path().join("id_rsa"), KeyKind::RsaPkcs1);
    let text = config_text(dir.path(), &fake.url(), SECRET, &key, "true");
    let config = write_config(dir.path(), &text, 0o600);
    let out = cks_drift(&["check", "-c", config.to_str().unwrap(), "--no-notify"]).await;
    assert_eq!(out.code, 3, "{out:?}");
    assert!(
        lines(&out.stdout).contains(&format!(
            "  partial  web ({id}): nodes not listed: the cluster has no endpoint address to reach its control node over SSH; CloudStack records one when the cluster first starts, so until then only its VM map and VMs are compared"
        ).as_str()),
        "{}",
        out.stdout
    );
}

/// A known_hosts in `dir` that records another key for `sshd`'s host, as after a rebuild.
/// Returns its path and the host as written there.
fn known_hosts_with_another_key(
    dir: &std::path::Path,
    sshd: &Sshd,
) -> (std::path::PathBuf, String) {
    let other = keygen(&dir.join("other"), KeyKind::Ed25519);
    let other = std::fs::read_to_string(other.with_extension("pub")).unwrap();
    let other: Vec<&str> = other.split_whitespace().take(2).collect();
    let known_hosts = dir.join("known_hosts");
    let host = format!("[{}]:2222", sshd.ip());
    std::fs::write(&known_hosts, format!("{host} {}\n", other.join(" "))).unwrap();
    (known_hosts, host)
}

#[tokio::test]
async fn a_public_key_as_private_key_gets_one_message_that_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let key = keygen(&dir.path().join("id_ed25519"), KeyKind::Ed25519);
    let public = dir.path().join("id_ed25519.pub");
    // ssh-keygen writes the public half 0644: that is no secret, and no warning.
    assert_eq!(
        std::fs::metadata(&public).unwrap().permissions().mode() & 0o777,
        0o644
    );
    let text = config_text(
        dir.path(),
        "https://cloud.example.com/client/api",
        SECRET,
        &public,
        "true",
    );
    let config = write_config(dir.path(), &text, 0o600);
    let out = cks_drift(&["validate-config", "-c", config.to_str().unwrap()]).await;
    assert_eq!(out.code, 2, "{out:?}");
    assert_eq!(
        lines(&out.stdout),
        [
            format!(
                "error: ssh.private_key: {} is a public key; give its private half, usually {}",
                public.display(),
                key.display()
            ),
            format!(
                "config file {}: 1 error, 0 warnings; fix the errors and run validate-config again",
                config.display()
            ),
        ]
    );
}

#[tokio::test]
async fn a_secret_file_readable_by_another_group_is_warned_about_and_the_services_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let key = keygen(&dir.path().join("id_ed25519"), KeyKind::Ed25519);
    let text = config_text(
        dir.path(),
        "https://cloud.example.com/client/api",
        SECRET,
        &key,
        "true",
    )
    .replace(
        &format!("secret_key = \"{SECRET}\"\n"),
        &format!(
            "secret_key_file = \"{}/secret_key\"\n",
            dir.path().display()
        ),
    )
    .replace(&format!("api_key = \"{API_KEY}\"\n"), "");
    let config = write_config(dir.path(), &text, 0o600);
    let secret = dir.path().join("secret_key");
    std::fs::write(&secret, SECRET).unwrap();
    // 0640 with the group the check runs as (root's, here): the rule allows it.
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o640)).unwrap();
    let env_key = [("CKS_DRIFT_API_KEY", API_KEY)];
    let run = |env: [(&'static str, &'static str); 1]| {
        let config = config.clone();
        tokio::task::spawn_blocking(move || {
            assert_cmd::Command::cargo_bin("cks-drift")
                .unwrap()
                .args(["validate-config", "-c", config.to_str().unwrap()])
                .envs(env)
                .output()
                .unwrap()
        })
    };
    let out = run(env_key).await.unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("config file {} is valid\n", config.display())
    );
    // The same mode with a group of strangers: a warning with the rule and the fix.
    std::os::unix::fs::chown(&secret, None, Some(64123)).unwrap();
    let out = run(env_key).await.unwrap();
    let s = secret.display();
    assert_eq!(
        lines(&String::from_utf8_lossy(&out.stdout)),
        [
            format!(
                "warning: cloudstack.secret_key_file: {s} holds a secret and the group gid 64123 \
                 may read it (mode 0640); {SECRET_FILE_RULE}: chgrp cks-drift {s}, or chmod g-rwx \
                 {s} and give the user cks-drift an ACL entry"
            ),
            format!("config file {} is valid, with 1 warning", config.display()),
        ]
    );
}

/// Run as a user who may not read the config: the message names that user, not the
/// service's, and says what to do.
#[tokio::test]
async fn a_file_the_user_may_not_read_names_the_user() {
    // A folder everyone may enter, with a copy of the binary anyone may run: the build's own
    // folders may be closed to other users.
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let binary = dir.path().join("cks-drift");
    std::fs::copy(crate::support::cloud::binary(), &binary).unwrap();
    let key = keygen(&dir.path().join("id_ed25519"), KeyKind::Ed25519);
    let text = config_text(
        dir.path(),
        "https://cloud.example.com/client/api",
        SECRET,
        &key,
        "true",
    );
    let config = write_config(dir.path(), &text, 0o600);
    let out = tokio::task::spawn_blocking({
        let config = config.clone();
        move || {
            std::process::Command::new("setpriv")
                .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
                .arg(&binary)
                .args(["check", "--no-notify", "-c", config.to_str().unwrap()])
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let c = config.display();
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "cks-drift: cannot read config file {c}: permission denied for the user nobody; run \
             cks-drift as root or as the user cks-drift (sudo -u cks-drift cks-drift …), or give \
             nobody read access (setfacl -m u:nobody:r {c})\n"
        )
    );
}

#[tokio::test]
async fn version_names_the_commit() {
    let out = cks_drift(&["--version"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let expected = match head {
        Some(commit) => format!(
            "cks-drift {} (commit {commit})\n",
            env!("CARGO_PKG_VERSION")
        ),
        // A source tarball: the version alone.
        None => format!("cks-drift {}\n", env!("CARGO_PKG_VERSION")),
    };
    assert_eq!(out.stdout, expected);
}

#[tokio::test]
async fn generate_assets_writes_man_pages_and_completions_from_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let out = cks_drift(&["generate-assets", dir.path().to_str().unwrap()]).await;
    assert_eq!(out.code, 0, "{out:?}");
    let d = dir.path().display();
    assert_eq!(
        lines(&out.stdout),
        [
            format!("{d}/man/cks-drift.1"),
            format!("{d}/man/cks-drift-check.1"),
            format!("{d}/man/cks-drift-run.1"),
            format!("{d}/man/cks-drift-demo.1"),
            format!("{d}/man/cks-drift-explain.1"),
            format!("{d}/man/cks-drift-validate-config.1"),
            format!("{d}/completions/cks-drift.bash"),
            format!("{d}/completions/_cks-drift"),
            format!("{d}/completions/cks-drift.fish"),
        ]
    );
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
    let man = read("man/cks-drift.1");
    assert!(man.starts_with(".ie \\n(.g .ds Aq \\(aq"), "{man}");
    assert!(man.contains(".TH cks-drift 1"), "{man}");
    for command in ["check", "run", "demo", "explain", "validate\\-config"] {
        assert!(
            man.contains(&format!("cks\\-drift\\-{command}(1)")),
            "{command}: {man}"
        );
    }
    assert!(
        man.contains(".SH FILES") && man.contains(".SH \"EXIT STATUS\""),
        "{man}"
    );
    assert!(
        !man.contains("generate"),
        "the packaging command stays hidden: {man}"
    );
    let check = read("man/cks-drift-check.1");
    assert!(check.contains("\\-\\-no\\-notify"), "{check}");
    let bash = read("completions/cks-drift.bash");
    assert!(
        bash.contains("validate-config") && !bash.contains("generate-assets"),
        "{bash}"
    );
    assert!(read("completions/_cks-drift").starts_with("#compdef cks-drift"));
    assert!(read("completions/cks-drift.fish").contains("-l no-notify"));
}
