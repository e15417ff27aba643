//! A whole test cloud: the simulated CloudStack behind the fake HTTP API, one real sshd per
//! control node on its own loopback address at CKS's port 2222, the real kubectl against a
//! fake Kubernetes API per cluster, a config file, and a way to run the real binary.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;

use cks_drift_sim::{FakeCloudStack, Sim, SimTime, World};
use tempfile::TempDir;

use crate::support::kube_api::{FakeKubeApi, FakeNode};
use crate::support::sshd::{Sshd, fresh_loopback};

pub const API_KEY: &str = "it-api-key";
pub const SECRET_KEY: &str = "it-secret-key/+=";

/// One cluster's control node: its sshd and its Kubernetes API.
pub struct ControlNode {
    pub ip: Ipv4Addr,
    pub sshd: Option<Sshd>,
    pub kube: FakeKubeApi,
    pub command: String,
}

pub struct TestCloud {
    pub dir: TempDir,
    pub api: FakeCloudStack,
    pub nodes: Vec<(String, ControlNode)>,
    /// Extra TOML appended to the generated config (later keys are not allowed to repeat,
    /// so use `set` for the tables the harness writes).
    pub extra: String,
    pub grace_period: String,
    /// `check.resolve_after`: `0s` unless a test sets it, so that a finding undone is
    /// resolved at the next cycle.
    pub resolve_after: String,
    /// Extra lines of the `[check]` table.
    pub check_extra: String,
    /// Extra lines of the `[cloudstack]` table.
    pub cloudstack_extra: String,
}

impl TestCloud {
    /// A cloud over `world`; call `control_node` for every cluster whose nodes are listed.
    pub async fn start(world: World) -> TestCloud {
        let sim = Arc::new(Sim::new(world));
        // Keep async jobs quick: the client polls every 2 s by default, the sim answers at once.
        let api = FakeCloudStack::start(sim, API_KEY, SECRET_KEY).await;
        TestCloud {
            dir: tempfile::tempdir().expect("temp dir"),
            api,
            nodes: Vec::new(),
            extra: String::new(),
            grace_period: "15m".into(),
            resolve_after: "0s".into(),
            check_extra: String::new(),
            cloudstack_extra: String::new(),
        }
    }

    pub fn sim(&self) -> &Arc<Sim> {
        self.api.sim()
    }

    /// Gives the cluster a control node reachable like CKS reaches it: its `endpoint` host on
    /// a fresh loopback address, sshd on port 2222 there, login user `root` (the
    /// `controlNodeLoginUser` detail of its first mapped VM), and a Kubernetes API that lists
    /// every mapped VM as a node, with the system UUID its hypervisor gives it (on KVM, the
    /// world's default, its CloudStack UUID).
    pub async fn control_node(&mut self, cluster_id: &str) {
        self.control_node_on(cluster_id, 2222).await;
    }

    /// [`TestCloud::control_node`] with sshd on `port`: 22 for a single control node that
    /// CKS reaches directly (a Shared or ROUTED network).
    pub async fn control_node_on(&mut self, cluster_id: &str, port: u16) {
        self.control_node_at(cluster_id, fresh_loopback(), port)
            .await;
    }

    /// [`TestCloud::control_node`] on `ip:port`: an address another cluster held before.
    pub async fn control_node_at(&mut self, cluster_id: &str, ip: Ipv4Addr, port: u16) {
        self.sim().with_world(|w| {
            let c = w.cluster_mut(cluster_id);
            c.endpoint = format!("https://{ip}:6443/");
            if let Some(first) = c.map.first().cloned() {
                w.vm_mut(&first)
                    .details
                    .insert("controlNodeLoginUser".into(), "root".into());
            }
        });
        let kube = FakeKubeApi::start_with(self.node_objects(cluster_id)).await;
        let sshd = Sshd::start_at(ip, port);
        // One client key for every control node: the first sshd's, kept in the cloud's folder
        // so it outlives that sshd.
        let key = self.dir.path().join("client_key");
        if !key.exists() {
            std::fs::copy(sshd.client_key(), &key).unwrap();
            std::fs::copy(
                sshd.client_key().with_extension("pub"),
                key.with_extension("pub"),
            )
            .unwrap();
        }
        sshd.authorize(&key.with_extension("pub"));
        let node_dir = self.dir.path().join(format!("node-{ip}"));
        std::fs::create_dir_all(&node_dir).unwrap();
        let kubeconfig = kube.write_kubeconfig(&node_dir);
        let command = format!(
            "sudo -n /usr/bin/kubectl --kubeconfig {} --cache-dir {} get nodes {}",
            kubeconfig.display(),
            node_dir.join("cache").display(),
            cks_drift::remote::kubectl::LIST_ARGUMENTS
        );
        self.nodes.push((
            cluster_id.to_string(),
            ControlNode {
                ip,
                sshd: Some(sshd),
                kube,
                command,
            },
        ));
    }

    /// The un-archived alerts, as `listAlerts` shows them.
    pub fn active_alerts(&self) -> Vec<cks_drift_sim::SimAlert> {
        self.sim()
            .with_world(|w| w.active_alerts().into_iter().cloned().collect())
    }

    /// Deletes the map row of the cluster's last worker: an unmapped VM. Returns its id.
    pub fn unmap_last_worker(&self, cluster_id: &str) -> String {
        let worker = self.map(cluster_id).last().unwrap().clone();
        self.sim()
            .with_world(|w| assert!(w.remove_map_row(cluster_id, &worker)));
        worker
    }

    /// The Kubernetes nodes of the cluster's mapped VMs that are not etcd VMs: their names,
    /// lowercased, with the system UUIDs their guests see.
    pub fn node_objects(&self, cluster_id: &str) -> Vec<FakeNode> {
        self.sim().with_world(|w| {
            w.cluster(cluster_id)
                .unwrap()
                .map
                .iter()
                .filter_map(|id| w.vm(id))
                .filter(|vm| vm.isetcdnode != Some(true) && !vm.removed)
                .map(|vm| FakeNode::with_uuid(&vm.name.to_lowercase(), &vm.system_uuid()))
                .collect()
        })
    }

    /// Lists the cluster's nodes with `-o name` from now on, as the command of earlier
    /// releases does: names only.
    pub fn list_names_only(&mut self, cluster_id: &str) {
        let node = self.node_mut(cluster_id);
        node.command = node
            .command
            .replace(cks_drift::remote::kubectl::LIST_ARGUMENTS, "-o name");
    }

    /// The Kubernetes node names of the cluster's mapped VMs (their names, lowercased).
    pub fn node_names(&self, cluster_id: &str) -> Vec<String> {
        self.map(cluster_id)
            .iter()
            .map(|v| {
                self.sim()
                    .with_world(|w| w.vm(v).unwrap().name.to_lowercase())
            })
            .collect()
    }

    /// The VM ids of the cluster's map rows, in map order (the database's view, not the API's).
    pub fn map(&self, cluster_id: &str) -> Vec<String> {
        self.sim()
            .with_world(|w| w.cluster(cluster_id).unwrap().map.clone())
    }

    pub fn node(&self, cluster_id: &str) -> &ControlNode {
        &self
            .nodes
            .iter()
            .find(|(id, _)| id == cluster_id)
            .expect("control node")
            .1
    }

    pub fn node_mut(&mut self, cluster_id: &str) -> &mut ControlNode {
        &mut self
            .nodes
            .iter_mut()
            .find(|(id, _)| id == cluster_id)
            .expect("control node")
            .1
    }

    pub fn state_path(&self) -> PathBuf {
        self.dir.path().join("state/state.json")
    }

    pub fn event_log(&self) -> PathBuf {
        self.dir.path().join("state/events.jsonl")
    }

    pub fn event_lines(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.event_log())
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("event line is JSON"))
            .collect()
    }

    /// Writes the config and returns its path. Every control node uses the same client key
    /// (each test sshd authorizes its own; the first one's key is authorized on the others).
    pub fn write_config(&self) -> PathBuf {
        let key = self.client_key();
        // One command for all clusters: each control node's kubeconfig differs, so the
        // command reads the kubeconfig of the node it runs on, chosen by the address sshd
        // accepted the connection on.
        let command = self.dispatch_command();
        let text = format!(
            r#"[cloudstack]
url = "{url}"
api_key = "{API_KEY}"
secret_key = "{SECRET_KEY}"
timeout = "5s"
{cloudstack_extra}

[ssh]
private_key = "{key}"
user = "nobody-fallback"
known_hosts = "{known_hosts}"
host_key_policy = "accept-new"
connect_timeout = "3s"
command_timeout = "10s"
command = "{command}"

[check]
grace_period = "{grace}"
resolve_after = "{resolve_after}"
concurrency = 4
{check_extra}

[state]
path = "{state}"

[http]
listen = ""

{extra}"#,
            url = self.api.url(),
            key = key.display(),
            known_hosts = self.dir.path().join("known_hosts").display(),
            state = self.state_path().display(),
            grace = self.grace_period,
            resolve_after = self.resolve_after,
            check_extra = self.check_extra,
            cloudstack_extra = self.cloudstack_extra,
            extra = self.extra,
        );
        let path = self.dir.path().join("cks-drift.toml");
        std::fs::write(&path, text).unwrap();
        path
    }

    fn client_key(&self) -> PathBuf {
        self.dir.path().join("client_key")
    }

    /// A script that runs the kubectl command of the control node whose address the SSH
    /// connection came in on (`$SSH_CONNECTION`'s third field).
    fn dispatch_command(&self) -> String {
        let script = self.dir.path().join("list-nodes.sh");
        let mut body = String::from(
            "#!/bin/sh\nset -e\ncase \"$(echo $SSH_CONNECTION | cut -d' ' -f3)\" in\n",
        );
        for (_, n) in &self.nodes {
            body.push_str(&format!("  {}) exec {} ;;\n", n.ip, n.command));
        }
        body.push_str("  *) echo \"no control node at $SSH_CONNECTION\" >&2; exit 3 ;;\nesac\n");
        std::fs::write(&script, body).unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        script.display().to_string()
    }

    /// Runs `cks-drift check` with these arguments (after `-c <config>`).
    pub async fn check(&self, args: &[&str]) -> Run {
        let config = self.write_config();
        let output = tokio::process::Command::new(binary())
            .arg("check")
            .arg("-c")
            .arg(&config)
            .args(args)
            .env_remove("RUST_LOG")
            .output()
            .await
            .expect("run cks-drift");
        Run::from(output)
    }

    /// `check --format json` and its parsed report.
    pub async fn check_json(&self, extra: &[&str]) -> (Run, serde_json::Value) {
        let mut args = vec!["--format", "json"];
        args.extend_from_slice(extra);
        let run = self.check(&args).await;
        let json = serde_json::from_str(&run.stdout)
            .unwrap_or_else(|e| panic!("report is not JSON ({e}): {run:?}"));
        (run, json)
    }
}

/// The built binary.
pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_cks-drift"))
}

#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(o: Output) -> Self {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

/// A world whose clock is now (the binary compares with the real clock).
pub fn world_now() -> World {
    World::new(SimTime::now())
}

/// `(kind, key, new)` of each mismatch in a JSON report.
pub fn mismatches(report: &serde_json::Value) -> Vec<(String, String, Option<bool>)> {
    report["mismatches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["kind"].as_str().unwrap().to_string(),
                m["key"].as_str().unwrap().to_string(),
                m["new"].as_bool(),
            )
        })
        .collect()
}

/// `(name, status, reason)` of each cluster in a JSON report.
pub fn clusters(report: &serde_json::Value) -> Vec<(String, String, Option<String>)> {
    report["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
                c["reason"].as_str().map(str::to_string),
            )
        })
        .collect()
}

pub fn path_str(p: &Path) -> String {
    p.display().to_string()
}

/// A 1 control + 2 worker cluster `web` with its control node up, and its cloud.
pub async fn one_cluster() -> (TestCloud, String) {
    let mut world = world_now();
    let owner = world.admin();
    let id = world.add_cluster("web", owner, 1, 2, 0);
    let mut cloud = TestCloud::start(world).await;
    cloud.control_node(&id).await;
    (cloud, id)
}

/// The cycle reads clusters, networks and VMs at once and stops at the first that fails, so
/// an error common to every call (credentials, a wrong URL) may name any of the three:
/// whether `actual` is `expected(what, command)` for one of them.
pub fn from_any_listing(actual: &str, expected: impl Fn(&str, &str) -> String) -> bool {
    [
        ("Kubernetes clusters", "listKubernetesClusters"),
        ("virtual machines", "listVirtualMachines"),
        ("networks", "listNetworks"),
    ]
    .iter()
    .any(|(what, command)| expected(what, command) == actual)
}

/// `"x".to_string()`, short for tables of expected strings.
pub fn s(v: &str) -> String {
    v.to_string()
}

/// `stderr` without the warning every run against the plain-http fake CloudStack logs at
/// start (tested on its own), so that tests can compare the rest exactly.
pub fn without_plain_http_warning(stderr: &str) -> String {
    stderr
        .lines()
        .filter(|l| !l.contains("cloudstack.url is a plain http:// URL"))
        .map(|l| format!("{l}\n"))
        .collect()
}
