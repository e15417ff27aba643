//! `cks-drift demo`: the real engine tick (cycle, dedupe, notifications through the API
//! client) against a built-in simulated CloudStack and built-in node lists, for three cycles:
//! the drift found, nothing new, the drift undone. No network, and no file outside a
//! temporary folder.
//!
//! Only the scenario and its printing live here: checking, dedupe and delivery are the
//! engine's, exactly as `check` and `run` use them. The client reaches the simulated
//! CloudStack (the `cks-drift-sim` crate) through `sim_transport`.

mod invocation;
mod serve;
mod sim_transport;

pub use serve::serve;
pub use sim_transport::SimTransport;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use cks_drift_sim::{
    ClusterSpec, NetworkLayout, NodeRole, Sim, SimTime, World, cks_hex, node_name_prefix,
};

use crate::base::time::Timestamp;
use crate::cloudstack::client::{Client, ClientOptions};
use crate::diff::Policy;
use crate::engine::cycle::{CycleError, CycleSettings};
use crate::engine::{Engine, Store, Tick};
use crate::front::report;
use crate::notify::DeliverySettings;
use crate::remote::{NodeListError, NodeListFuture, NodeLister, Readiness, SshTarget};
use crate::snapshot::Node;
use crate::state::file::{StateError, StateFile};
use crate::state::step::StepSettings;

/// The simulated clock at the first cycle.
pub const START: &str = "2026-05-04T09:00:00Z";
/// Time between two cycles.
const INTERVAL: Duration = Duration::from_secs(5 * 60);
const DAY: Duration = Duration::from_secs(86_400);
/// The CloudStack UUID of the VM of db's node whose VM was expunged: no VM has it now.
const EXPUNGED_VM_UUID: &str = "3f0c1b9e-2d4a-4e6f-8a1b-5c7d9e0f2a4b";

/// Why the demo could not run to its end.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("cannot create a temporary folder for the demo's state and event log")]
    TempDir(#[source] std::io::Error),
    #[error("cannot open the demo's state file")]
    State(#[source] StateError),
    #[error("cycle {cycle} could not run")]
    Cycle {
        cycle: u32,
        #[source]
        source: CycleError,
    },
    /// The cycle ran but its state could not be written.
    #[error("cycle {cycle} could not run")]
    CycleState {
        cycle: u32,
        #[source]
        source: StateError,
    },
    #[error("cannot read the demo's event log {}", path.display())]
    EventLog {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Kubernetes node lists by control node host (the cluster's endpoint), as kubectl would
/// print them there.
#[derive(Default)]
pub struct DemoNodes {
    lists: Mutex<HashMap<String, Vec<Node>>>,
}

impl DemoNodes {
    pub fn set(&self, host: &str, nodes: Vec<Node>) {
        self.lists
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(host.to_string(), nodes);
    }

    fn get(&self, host: &str) -> Option<Vec<Node>> {
        self.lists
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(host)
            .cloned()
    }
}

impl NodeLister for DemoNodes {
    fn list_nodes<'a>(&'a self, target: &'a SshTarget) -> NodeListFuture<'a> {
        let answer = self
            .get(&target.host)
            .ok_or_else(|| NodeListError::Connect {
                host: target.host.clone(),
                port: target.port,
                source: std::io::Error::new(
                    std::io::ErrorKind::ConnectionRefused,
                    "no such control node in the demo",
                ),
            });
        Box::pin(async move { answer })
    }
}

/// The built-in cloud and what the demo changes in it.
pub struct Scenario {
    pub sim: Arc<Sim>,
    pub nodes: Arc<DemoNodes>,
    /// `(name, what it is)` of every cluster, in creation order.
    pub clusters: Vec<(String, String)>,
    db_host: String,
    /// `(id, name)` of the mapped VM of db that is destroyed.
    pub destroyed_vm: (String, String),
    /// `(id, name)` of the VM named as a node of db that no map holds.
    pub stray_vm: (String, String),
    /// The Kubernetes node of db without a VM.
    pub ghost_node: String,
    /// `(id, name)` of the mapped, running VM of db that is not a node.
    pub not_a_node_vm: (String, String),
}

fn vm_names(w: &World, cluster_id: &str) -> Vec<(String, String)> {
    w.cluster(cluster_id)
        .map(|c| c.map.clone())
        .unwrap_or_default()
        .iter()
        .filter_map(|id| w.vm(id))
        .map(|vm| (vm.id.clone(), vm.name.clone()))
        .collect()
}

/// The node a VM's kubelet registers: the VM's name, lowercased, and the system UUID its
/// hypervisor gives it (on KVM, the VM's CloudStack UUID).
fn node_of(w: &World, vm_id: &str) -> Node {
    let vm = w.vm(vm_id);
    Node {
        name: vm.map(|v| v.name.to_lowercase()).unwrap_or_default(),
        system_uuid: vm.map(|v| v.system_uuid().to_lowercase()),
        provider_id: None,
        ready: Some(Readiness::Ready),
    }
}

fn endpoint_of(w: &World, cluster_id: &str) -> String {
    let endpoint = w.cluster(cluster_id).map(|c| c.endpoint.clone());
    crate::cks::endpoint_host(endpoint.as_deref()).unwrap_or_default()
}

impl Scenario {
    /// Five clusters at `now`: `web` (healthy), `db` (drifting four ways), `ci` (scaling,
    /// skipped), `edge` (ExternalManaged, skipped) and `analytics` (project-owned, on a Shared
    /// network, healthy). Every node list is as kubectl would print it.
    pub fn build(now: Timestamp) -> Scenario {
        Scenario::build_with(now, NetworkLayout::Shared)
    }

    /// [`Scenario::build`] with analytics on a network of the given layout: served over real
    /// SSH (`demo --serve`), its control node answers on port 2222 like the others', as
    /// port 22 is the machine's own.
    pub fn build_with(now: Timestamp, analytics_layout: NetworkLayout) -> Scenario {
        let now = SimTime::from(now);
        let mut w = World::new(now);
        let engineering = w.add_domain("engineering");
        let web_team = w.add_account("web-team", &engineering);
        let db_team = w.add_account("db-team", &engineering);
        let analytics_project = w.add_project("analytics");

        let web = w.add_cluster("web", web_team.clone(), 1, 2, 0);
        let db = w.add_cluster("db", db_team.clone(), 1, 3, 0);
        let mut ci = ClusterSpec::new("ci", web_team, 1, 1, 0);
        ci.state = "Scaling".into();
        w.add_cluster_with(ci);
        let mut edge = ClusterSpec::new("edge", db_team, 0, 0, 0);
        edge.clustertype = Some("ExternalManaged".into());
        w.add_cluster_with(edge);
        let mut analytics = ClusterSpec::new("analytics", analytics_project, 1, 1, 0);
        analytics.layout = analytics_layout;
        analytics.age = 90 * DAY;
        let analytics = w.add_cluster_with(analytics);

        let nodes = Arc::new(DemoNodes::default());
        for id in [&web, &analytics] {
            let list = vm_names(&w, id)
                .iter()
                .map(|(vm, _)| node_of(&w, vm))
                .collect();
            nodes.set(&endpoint_of(&w, id), list);
        }

        // The drift in db. Its map: control, then three workers.
        let db_vms = vm_names(&w, &db);
        let destroyed_vm = db_vms[1].clone();
        let not_a_node_vm = db_vms[2].clone();
        w.set_vm_state(&destroyed_vm.0, "Destroyed");
        // A worker left over from a failed scale-out three hours ago: named as a node, in no
        // map.
        w.now = now.minus(Duration::from_secs(3 * 3600));
        let stray_id = w.add_node_vm(&db, NodeRole::Worker, false);
        w.now = now;
        let stray_vm = (
            stray_id.clone(),
            w.vm(&stray_id).map(|v| v.name.clone()).unwrap_or_default(),
        );
        // A node whose VM was expunged weeks ago; the node object stayed, with that VM's UUID.
        let ghost_node = format!(
            "{}-node-{}",
            node_name_prefix("db", &db),
            cks_hex(now.minus(40 * DAY), 0)
        );
        let db_host = endpoint_of(&w, &db);
        let mut db_nodes: Vec<Node> = db_vms
            .iter()
            .filter(|(id, _)| *id != not_a_node_vm.0)
            .map(|(id, _)| node_of(&w, id))
            .collect();
        db_nodes.push(Node {
            name: ghost_node.clone(),
            system_uuid: Some(EXPUNGED_VM_UUID.to_string()),
            provider_id: None,
            // Its VM is gone, so its kubelet stopped posting status long ago.
            ready: Some(Readiness::Unknown),
        });
        nodes.set(&db_host, db_nodes);

        let clusters = descriptions(analytics_layout);
        w.caller_api_key = DEMO_API_KEY.to_string();
        Scenario {
            sim: Arc::new(Sim::new(w)),
            nodes,
            clusters,
            db_host,
            destroyed_vm,
            stray_vm,
            ghost_node,
            not_a_node_vm,
        }
    }

    /// The drift, one line each.
    pub fn drift(&self) -> Vec<String> {
        vec![
            format!(
                "VM {} is in the map but was destroyed (Kubernetes still lists it, NotReady)",
                self.destroyed_vm.1
            ),
            format!(
                "VM {} is named as a node of db but is in no map: left over from a failed \
                 scale-out 3 hours ago",
                self.stray_vm.1
            ),
            format!(
                "Kubernetes node {} has no VM: the VM was expunged 40 days ago, the node object \
                 stayed",
                self.ghost_node
            ),
            format!(
                "VM {} is in the map and Running, but its kubelet stopped: it is not a node",
                self.not_a_node_vm.1
            ),
        ]
    }

    /// Undoes the drift as an operator would, and says what was done.
    pub fn undo(&self) -> Vec<String> {
        self.sim.with_world(|w| {
            w.set_vm_state(&self.destroyed_vm.0, "Running");
            w.expunge_vm(&self.stray_vm.0);
        });
        let mut nodes = self.nodes.get(&self.db_host).unwrap_or_default();
        nodes.retain(|n| n.name != self.ghost_node);
        nodes.push(self.sim.with_world(|w| node_of(w, &self.not_a_node_vm.0)));
        self.nodes.set(&self.db_host, nodes);
        vec![
            format!("recovered and started VM {}", self.destroyed_vm.1),
            format!("expunged the stray VM {}", self.stray_vm.1),
            format!("kubectl delete node {}", self.ghost_node),
            format!(
                "restarted kubelet on {}: it is a node again",
                self.not_a_node_vm.1
            ),
        ]
    }
}

/// Each cluster's name and what it is, in creation order.
fn descriptions(analytics_layout: NetworkLayout) -> Vec<(String, String)> {
    vec![
        (
            "web".into(),
            "account web-team, 1 control node + 2 workers".into(),
        ),
        (
            "db".into(),
            "account db-team, 1 control node + 3 workers: drifting, see below".into(),
        ),
        (
            "ci".into(),
            "account web-team, state Scaling: skipped while an operation runs".into(),
        ),
        (
            "edge".into(),
            "ExternalManaged: skipped, CloudStack does not manage its VMs".into(),
        ),
        (
            "analytics".into(),
            match analytics_layout {
                NetworkLayout::Shared => {
                    "project analytics, Shared network (SSH on port 22), 1 + 1"
                }
                _ => "project analytics, 1 control node + 1 worker",
            }
            .into(),
        ),
    ]
}

/// One alert or annotation as CloudStack holds it.
#[derive(Debug, Clone, PartialEq)]
struct Stored {
    id: String,
    /// Archived (alerts) or removed (annotations).
    gone: bool,
    /// `type 3000` for an alert, the cluster name for an annotation.
    label: String,
    text: String,
}

impl Stored {
    /// The mismatch key in the text's closing marker.
    fn key(&self) -> &str {
        crate::diff::wording::marked_key(&self.text).unwrap_or(&self.text)
    }
}

/// What CloudStack holds of the demo's notifications, in creation order, to show what a
/// tick changed.
#[derive(Default)]
struct Seen {
    alerts: Vec<Stored>,
    annotations: Vec<Stored>,
}

impl Seen {
    fn read(sim: &Sim) -> Seen {
        sim.with_world(|w| Seen {
            alerts: w
                .alerts
                .iter()
                .map(|a| Stored {
                    id: a.id.clone(),
                    gone: a.archived,
                    label: format!("type {}", a.alert_type),
                    text: a.description.clone(),
                })
                .collect(),
            annotations: w
                .annotations
                .iter()
                .map(|a| Stored {
                    id: a.id.clone(),
                    gone: a.removed,
                    label: w
                        .cluster(&a.entity_id)
                        .map(|c| c.name.clone())
                        .unwrap_or_else(|| a.entity_id.clone()),
                    text: a.annotation.clone(),
                })
                .collect(),
        })
    }
}

/// Entries of `after` that are new (and present), and those that went since `before`.
fn changes<'a>(before: &[Stored], after: &'a [Stored]) -> (Vec<&'a Stored>, Vec<&'a Stored>) {
    let was = |s: &Stored| before.iter().find(|b| b.id == s.id);
    let added = after
        .iter()
        .filter(|s| !s.gone && was(s).is_none())
        .collect();
    let gone = after
        .iter()
        .filter(|s| s.gone && was(s).is_some_and(|b| !b.gone))
        .collect();
    (added, gone)
}

/// The key the demo's engine presents to the simulated cloud (`getUser` finds its user).
const DEMO_API_KEY: &str = "demo-api-key";

/// The demo's engine over the scenario, keeping its state and event log in `dir`.
fn engine(scenario: &Scenario, dir: &Path, now: Timestamp) -> Result<Engine, DemoError> {
    let (file, state, _) =
        StateFile::open(&dir.join("state.json"), now).map_err(DemoError::State)?;
    let options = ClientOptions {
        // The simulator runs jobs at once; there is no reason to wait between polls.
        async_poll_interval: Duration::from_millis(1),
        async_deadline: Duration::from_secs(5),
        ..ClientOptions::default()
    };
    let api = Client::with_transport(Arc::new(SimTransport(scenario.sim.clone())), options)
        .with_endpoint("(simulated CloudStack)");
    Ok(Engine {
        api: Arc::new(api),
        lister: scenario.nodes.clone(),
        cycle: CycleSettings {
            policy: Policy::default(),
            concurrency: 4,
            default_user: "cloud".into(),
            node_deadline: std::time::Duration::from_secs(600),
            database: None,
        },
        step: StepSettings {
            alerts: true,
            annotations: true,
            alert_cap: 5,
            owner_alert_cap: 100,
            blind_after: crate::config::DEFAULT_BLIND_AFTER,
            // Three cycles show a finding's whole life: it resolves at the first cycle
            // without it (`check.resolve_after = "0s"`), not 15 minutes later.
            resolve_after: std::time::Duration::ZERO,
            owner_alerts_per_hour: 20,
            alert_types: 1000,
            storm: crate::config::DEFAULT_STORM_CLUSTERS,
            alertmanager: false,
        },
        delivery: DeliverySettings {
            event_log: dir.join("events.jsonl"),
            alert_types: 3000..=3999,
            alertmanager: None,
        },
        ignore: Vec::new(),
        alertmanager_active_for: std::time::Duration::from_secs(750),
        store: Some(Store {
            file,
            state,
            recover: false,
        }),
        lock: None,
        term_seen: 0,
        server_check: None,
        defer_to_server_check: true,
        api_key: crate::config::Secret::new(DEMO_API_KEY),
        caller_checked: false,
    })
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| {
            if l.is_empty() {
                String::new()
            } else {
                format!("  {l}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The event log lines written since `from` bytes, as `LEVEL cluster: description`.
fn new_events(path: &Path, from: &mut usize) -> Result<Vec<String>, DemoError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(source) => {
            return Err(DemoError::EventLog {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let fresh = text.get(*from..).unwrap_or("");
    *from = text.len();
    Ok(fresh
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
            let field = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string();
            format!(
                "{:<4} {}: {}",
                field("level"),
                field("cluster"),
                field("description")
            )
        })
        .collect())
}

/// What one tick sent, read back from the event log and the simulated CloudStack.
fn describe(tick: &Tick, before: &Seen, after: &Seen, events: &[String]) -> String {
    let mut out = String::new();
    let open: usize = tick
        .report
        .as_ref()
        .map(|r| r.clusters.iter().map(|c| c.mismatches.len()).sum())
        .unwrap_or(0);
    let (raised, archived) = changes(&before.alerts, &after.alerts);
    let (added, removed) = changes(&before.annotations, &after.annotations);
    if events.is_empty()
        && raised.is_empty()
        && archived.is_empty()
        && added.is_empty()
        && removed.is_empty()
    {
        let _ = writeln!(
            out,
            "No new mismatches; {open} still open, already reported: nothing was sent."
        );
    }
    let mut section = |title: &str, lines: Vec<String>| {
        if lines.is_empty() {
            return;
        }
        let _ = writeln!(out, "{} {title}:", lines.len());
        for l in lines {
            let _ = writeln!(out, "  {l}");
        }
        out.push('\n');
    };
    section("event log lines written (events.jsonl)", events.to_vec());
    section(
        "CloudStack alerts raised (generateAlert, confirmed with listAlerts)",
        raised
            .iter()
            .map(|a| format!("{}: {}", a.label, a.text))
            .collect(),
    );
    section(
        "admin-only annotations added on the cluster (addAnnotation)",
        added
            .iter()
            .map(|a| format!("{}: {}", a.label, a.text))
            .collect(),
    );
    section(
        "CloudStack alerts archived (archiveAlerts)",
        archived
            .iter()
            .map(|a| format!("{}: {}", a.label, a.key()))
            .collect(),
    );
    section(
        "annotations removed (removeAnnotation)",
        removed
            .iter()
            .map(|a| format!("{}: {}", a.label, a.key()))
            .collect(),
    );
    if tick.pending > 0 {
        let _ = writeln!(
            out,
            "{} notifications could not be delivered and stay queued.",
            tick.pending
        );
    }
    out.trim_end().to_string() + "\n"
}

/// Runs the three cycles, printing to `out`.
pub async fn run(out: &mut dyn Write) -> Result<(), DemoError> {
    let dir = tempfile::Builder::new()
        .prefix("cks-drift-demo-")
        .tempdir()
        .map_err(DemoError::TempDir)?;
    let start = Timestamp::parse(START).expect("START is a timestamp");
    let scenario = Scenario::build(start);
    let mut engine = engine(&scenario, dir.path(), start)?;
    let event_log = dir.path().join("events.jsonl");
    let mut log_offset = 0;

    let mut text = String::new();
    let _ = writeln!(
        text,
        "cks-drift demo: the real check cycle, dedupe and notifications against a simulated \
         CloudStack\n(in memory: no network; state and event log in a temporary folder, removed \
         at the end).\n\nKubernetes clusters in the simulated cloud:"
    );
    let width = scenario
        .clusters
        .iter()
        .map(|(n, _)| n.len())
        .max()
        .unwrap_or(0);
    for (name, what) in &scenario.clusters {
        let _ = writeln!(text, "  {name:<width$}  {what}");
    }
    let _ = writeln!(text, "\nThe drift in db:");
    for line in scenario.drift() {
        let _ = writeln!(text, "  - {line}");
    }
    let _ = out.write_all(text.as_bytes());

    let mut now = start;
    for cycle in 1..=3u32 {
        let mut text = String::new();
        if cycle == 3 {
            let _ = writeln!(text, "\nThe operator undoes the drift in db:");
            for line in scenario.undo() {
                let _ = writeln!(text, "  - {line}");
            }
        }
        if cycle > 1 {
            now = now.plus(INTERVAL);
            scenario.sim.with_world(|w| w.now = now.into());
        }
        let title = format!("Cycle {cycle} at {now}");
        let _ = writeln!(text, "\n{title}\n{}\n", "=".repeat(title.len()));
        let before = Seen::read(&scenario.sim);
        let tick = match engine.tick(now).await {
            Tick {
                report: Err(source),
                ..
            } => return Err(DemoError::Cycle { cycle, source }),
            Tick {
                state_error: Some(source),
                ..
            } => return Err(DemoError::CycleState { cycle, source }),
            tick => tick,
        };
        let Ok(report) = &tick.report else {
            unreachable!("a failed cycle returned above")
        };
        let _ = writeln!(
            text,
            "{}\n",
            indent(&report::to_text(report, tick.new.as_ref()))
        );
        let after = Seen::read(&scenario.sim);
        let events = new_events(&event_log, &mut log_offset)?;
        text.push_str(&describe(&tick, &before, &after, &events));
        let _ = out.write_all(text.as_bytes());
    }
    let _ = out.write_all(
        b"\nDone: the drift was reported once, not again while it lasted, and closed when it \
          was undone.\nAgainst your own cloud: edit /etc/cks-drift/cks-drift.toml (the package \
          installs it; from a source tree, copy config/cks-drift.toml there), then\n  \
          cks-drift validate-config --connect\n  \
          cks-drift check\nWithout a cloud: cks-drift demo --serve serves this one for them to run \
          against.\n(from a source tree without the package: cargo run -- in place of \
          cks-drift)\n",
    );
    Ok(())
}

#[cfg(test)]
mod tests;
