//! A fault campaign: three `cks-drift run` instances (one MariaDB for the lock and the map,
//! the fake CloudStack, a real sshd per control node) under a schedule of overlapping faults
//! and drifts drawn from a seed, then a quiet period, then invariants checked on the whole
//! history (see `history`). `CKS_DRIFT_CAMPAIGN_SEED` and `CKS_DRIFT_CAMPAIGN_EVENTS` replay
//! or lengthen one (docs/contributing.md).

mod history;
mod schedule;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use cks_drift_sim::mariadb::{PrivateMariaDb, Schema};
use cks_drift_sim::{FakeCloudStack, NodeRole, Sim};

use crate::database::{mirror, use_database};
use crate::refusals::SmallDisk;
use crate::support::cloud::{API_KEY, SECRET_KEY, TestCloud, binary, world_now};
use crate::support::kube_api::FakeNode;
use crate::support::sshd::{free_port, signal};

use history::{Drift, History, Lifecycle};
use schedule::{Event, Shape, Step};

/// Running clusters, each of its own owner (an account), plus the spare one.
const CLUSTERS: usize = 6;
/// The interval of every instance: short, so that a campaign sees many cycles.
const INTERVAL: &str = "1s";
/// After the schedule: long enough for every instance to settle (the blind, resolve and
/// storm rules included), and for a queued notification to go out.
const QUIET: Duration = Duration::from_secs(25);
/// The lock connection's idle timeout (three lock intervals, at least 10 s): a pause longer
/// than this has the lock taken over.
const LONG_PAUSE: Duration = Duration::from_secs(12);
/// The seed CI's short campaign replays.
const FIXED_SEED: u64 = 0x5eed_0001;

/// About 60 events from a fixed seed: the campaign CI runs every time. With the schedules
/// drawn before node names were swapped, this seed found that an instance taking over wrote
/// again the event lines of findings a storm held (kept as
/// `the_first_step_after_a_read_back_marks_its_new_findings_event_lines_and_no_later_one`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_campaign_from_a_fixed_seed_keeps_every_invariant() {
    campaign(seed_from_env().unwrap_or(FIXED_SEED), events_from_env(60)).await;
}

/// The same with a fresh seed, printed first: each run tries another schedule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_campaign_from_a_fresh_seed_keeps_every_invariant() {
    let seed = seed_from_env().unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    });
    campaign(seed, events_from_env(60)).await;
}

fn seed_from_env() -> Option<u64> {
    let text = std::env::var("CKS_DRIFT_CAMPAIGN_SEED").ok()?;
    let text = text.trim();
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    Some(parsed.unwrap_or_else(|_| panic!("CKS_DRIFT_CAMPAIGN_SEED={text}: not a number")))
}

fn events_from_env(default: usize) -> usize {
    std::env::var("CKS_DRIFT_CAMPAIGN_EVENTS")
        .ok()
        .map(|n| {
            n.trim()
                .parse()
                .expect("CKS_DRIFT_CAMPAIGN_EVENTS: a number")
        })
        .unwrap_or(default)
}

/// Runs one campaign and panics with its summary if an invariant is broken.
async fn campaign(seed: u64, events: usize) {
    let shape = Shape {
        instances: 3,
        clusters: CLUSTERS + 1,
        spare: CLUSTERS,
        long_pause: LONG_PAUSE,
    };
    let steps = schedule::draw(seed, events, shape);
    println!(
        "campaign seed {seed:#x} ({} events; replay with CKS_DRIFT_CAMPAIGN_SEED={seed:#x} \
         CKS_DRIFT_CAMPAIGN_EVENTS={events})",
        steps.len()
    );
    let mut run = Campaign::start().await;
    let started = Instant::now();
    for step in &steps {
        let at = started + step.at;
        tokio::time::sleep_until(at.into()).await;
        run.apply(step).await;
    }
    tokio::time::sleep(QUIET).await;
    let history = run.finish().await;
    let violations = history.violations();
    let summary = history.summary(seed, &steps, &violations);
    println!("{summary}");
    if !violations.is_empty() {
        let kept = history.keep(
            &Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("campaign-{seed:#x}")),
            &summary,
        );
        println!(
            "logs, event logs and state files kept in {}",
            kept.display()
        );
    }
    assert!(violations.is_empty(), "{summary}");
}

/// One instance: its process, its own API front over the shared simulator (so that its
/// calls can be told from the others'), and its state folder on a disk of its own.
struct Instance {
    name: String,
    config: PathBuf,
    log: PathBuf,
    dir: PathBuf,
    front: FakeCloudStack,
    /// The port of its status page and metrics.
    listen: u16,
    disk: SmallDisk,
    child: Option<Child>,
    paused: bool,
}

impl Instance {
    async fn create(cloud: &TestCloud, name: &str) -> Instance {
        let front = FakeCloudStack::start(cloud.sim().clone(), API_KEY, SECRET_KEY).await;
        let dir = cloud.dir.path().join(name);
        let disk = SmallDisk::mount_sized(&dir, "4m");
        let listen = free_port();
        let config_text = std::fs::read_to_string(cloud.write_config())
            .unwrap()
            .replace(&cloud.api.url(), &front.url())
            .replace(
                &format!("path = \"{}\"", cloud.state_path().display()),
                &format!("path = \"{}\"", dir.join("state.json").display()),
            )
            .replace("EVENT_LOG", &dir.join("events.jsonl").display().to_string())
            .replace("listen = \"\"", &format!("listen = \"127.0.0.1:{listen}\""));
        let config = cloud.dir.path().join(format!("{name}.toml"));
        std::fs::write(&config, config_text).unwrap();
        let mut instance = Instance {
            name: name.to_string(),
            config,
            log: cloud.dir.path().join(format!("{name}.log")),
            dir,
            front,
            listen,
            disk,
            child: None,
            paused: false,
        };
        instance.spawn();
        instance
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = Command::new(binary())
            .arg("run")
            .arg("-c")
            .arg(&self.config)
            .env_remove("RUST_LOG")
            .env_remove("NOTIFY_SOCKET")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start cks-drift run");
        self.child = Some(child);
        self.paused = false;
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.paused = false;
    }

    fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if self.paused
            && let Some(pid) = self.pid()
        {
            signal(pid, "CONT");
        }
        self.kill();
    }
}

/// The cloud, the database, the instances, and what the schedule did to them.
struct Campaign {
    cloud: TestCloud,
    db: PrivateMariaDb,
    db_up: bool,
    instances: Vec<Instance>,
    /// The clusters' ids; the last is the spare one.
    ids: Vec<String>,
    /// Per cluster: the Kubernetes nodes its machines are, stray ones aside.
    machines: Vec<Vec<FakeNode>>,
    /// Per cluster: a node that is no VM, while one is planted.
    stray: Vec<Option<String>>,
    /// Per cluster: the node left out, while one is.
    gone: Vec<Option<String>>,
    /// Per cluster: whether its first two workers' nodes have swapped names.
    swapped: Vec<bool>,
    /// Per cluster: the worker whose map row is deleted, while one is.
    unmapped: Vec<Option<String>>,
    /// The storm's VMs, while it lasts.
    storm: Vec<(usize, String)>,
    deleted: Vec<bool>,
    drifts: Vec<Drift>,
    lifecycle: Vec<Lifecycle>,
    applied: Vec<(SystemTime, Step)>,
}

impl Campaign {
    async fn start() -> Campaign {
        let mut world = world_now();
        let domain = world.add_domain("tenants");
        let mut ids = Vec::new();
        for c in 0..=CLUSTERS {
            let owner = world.add_account(&format!("tenant{c}"), &domain);
            ids.push(world.add_cluster(&format!("k8s{c}"), owner, 1, 2, 0));
        }
        world.set_cluster_state(&ids[CLUSTERS], "Starting");
        let mut cloud = TestCloud::start(world).await;
        for id in &ids {
            cloud.control_node(id).await;
        }
        let machines = ids.iter().map(|id| cloud.node_objects(id)).collect();
        let db = PrivateMariaDb::start(Schema::Newest);
        mirror(&cloud, &db);
        use_database(&mut cloud, &db);
        cloud.grace_period = "0s".into();
        cloud.resolve_after = "1s".into();
        cloud.check_extra = format!("interval = \"{INTERVAL}\"\nblind_after = \"3s\"\n");
        cloud
            .extra
            .push_str("\n[notify]\nstorm_clusters = 3\nevent_log = \"EVENT_LOG\"\n\n[log]\nformat = \"json\"\n");
        let mut instances = Vec::new();
        for name in ["ms1", "ms2", "ms3"] {
            instances.push(Instance::create(&cloud, name).await);
        }
        let n = ids.len();
        Campaign {
            cloud,
            db,
            db_up: true,
            instances,
            ids,
            machines,
            stray: vec![None; n],
            gone: vec![None; n],
            swapped: vec![false; n],
            unmapped: vec![None; n],
            storm: Vec::new(),
            deleted: vec![false; n],
            drifts: Vec::new(),
            lifecycle: Vec::new(),
            applied: Vec::new(),
        }
    }

    fn sim(&self) -> &Arc<Sim> {
        self.cloud.sim()
    }

    /// The database follows the world, while it runs (it is rewritten when it is back).
    fn mirror(&self) {
        if self.db_up {
            mirror(&self.cloud, &self.db);
        }
    }

    fn open(&mut self, cluster: usize, kind: &'static str, token: String) {
        self.drifts.push(Drift {
            cluster: self.ids[cluster].clone(),
            kind,
            token,
            opened: SystemTime::now(),
            closed: None,
        });
    }

    fn close(&mut self, token: &str) {
        let now = SystemTime::now();
        for d in self.drifts.iter_mut().filter(|d| d.token == token) {
            d.closed.get_or_insert(now);
        }
    }

    /// The cluster's Kubernetes nodes as they stand: its machines, less the one gone, plus
    /// the stray one.
    fn publish_nodes(&mut self, c: usize) {
        let mut nodes: Vec<FakeNode> = self.machines[c]
            .iter()
            .filter(|n| Some(&n.name) != self.gone[c].as_ref())
            .cloned()
            .collect();
        if self.swapped[c] {
            let (a, b) = (nodes[1].name.clone(), nodes[2].name.clone());
            nodes[1].name = b;
            nodes[2].name = a;
        }
        if let Some(stray) = &self.stray[c] {
            nodes.push(FakeNode::named(stray));
        }
        let id = self.ids[c].clone();
        self.cloud.node(&id).kube.set_node_objects(nodes);
    }

    fn note(&mut self, instance: usize, what: &'static str) {
        self.lifecycle.push(Lifecycle {
            instance: self.instances[instance].front.port(),
            what,
            at: SystemTime::now(),
        });
    }

    async fn apply(&mut self, step: &Step) {
        self.applied.push((SystemTime::now(), *step));
        match step.event {
            Event::Kill(i) => {
                self.instances[i].kill();
                self.note(i, "killed");
            }
            Event::Restart(i) => {
                self.instances[i].spawn();
                self.note(i, "started");
            }
            Event::Pause(i) => {
                if let Some(pid) = self.instances[i].pid() {
                    signal(pid, "STOP");
                    self.instances[i].paused = true;
                    self.note(i, "paused");
                }
            }
            Event::Resume(i) => {
                if let Some(pid) = self.instances[i].pid() {
                    signal(pid, "CONT");
                    self.instances[i].paused = false;
                    self.note(i, "resumed");
                }
            }
            Event::DatabaseDown => {
                self.db.kill();
                self.db_up = false;
            }
            Event::DatabaseUp => {
                self.db.restart();
                self.db_up = true;
                self.mirror();
            }
            Event::ApiOutage => self.sim().set_outage(Some((
                503,
                "<html><body>503 Service Unavailable</body></html>",
            ))),
            Event::ApiBack => self.sim().set_outage(None),
            Event::ApiSlow => self.sim().set_latency(Duration::from_secs(6)),
            Event::ApiFast => self.sim().set_latency(Duration::ZERO),
            Event::WritesRefused => self
                .sim()
                .refuse_writes(Some((530, "Internal error executing command."))),
            Event::WritesAccepted => self.sim().refuse_writes(None),
            Event::SshRefused(c) => self.ssh(c, |s| s.refuse()),
            Event::SshBack(c) => self.ssh(c, |s| s.answer_again()),
            Event::SshHang(c) => self.ssh(c, |s| s.hang()),
            Event::SshUnhang(c) => self.ssh(c, |s| s.unhang()),
            Event::DiskFull(i) => self.instances[i].disk.fill(),
            Event::DiskFreed(i) => self.instances[i].disk.free(),
            event => self.change_world(event),
        }
    }

    fn ssh(&mut self, c: usize, f: impl FnOnce(&mut crate::support::sshd::Sshd)) {
        let id = self.ids[c].clone();
        if let Some(sshd) = self.cloud.node_mut(&id).sshd.as_mut() {
            f(sshd);
        }
    }

    /// Drifts planted and removed, clusters created, scaled, deleted.
    fn change_world(&mut self, event: Event) {
        match event {
            Event::Unmap(c) => {
                let id = self.ids[c].clone();
                let worker = self.cloud.unmap_last_worker(&id);
                self.unmapped[c] = Some(worker.clone());
                self.open(c, "unmapped_vm", worker);
            }
            Event::Remap(c) => {
                if let Some(worker) = self.unmapped[c].take() {
                    let id = self.ids[c].clone();
                    self.sim().with_world(|w| w.add_map_row(&id, &worker));
                    self.close(&worker);
                }
            }
            Event::StrayNode(c) => {
                let name = format!("stray-{c}-{}", self.drifts.len());
                self.stray[c] = Some(name.clone());
                self.publish_nodes(c);
                self.open(c, "node_without_vm", name);
            }
            Event::StrayGone(c) => {
                if let Some(name) = self.stray[c].take() {
                    self.publish_nodes(c);
                    self.close(&name);
                }
            }
            Event::NodeGone(c) => {
                let id = self.ids[c].clone();
                let first_worker = self.cloud.map(&id)[1].clone();
                let name = self
                    .sim()
                    .with_world(|w| w.vm(&first_worker).unwrap().name.to_lowercase());
                self.gone[c] = Some(name);
                self.publish_nodes(c);
                self.open(c, "vm_not_a_node", first_worker);
            }
            Event::NodeBack(c) => {
                if self.gone[c].take().is_some() {
                    self.publish_nodes(c);
                    let id = self.ids[c].clone();
                    let first_worker = self.cloud.map(&id)[1].clone();
                    self.close(&first_worker);
                }
            }
            Event::Swap(c) => {
                self.swapped[c] = true;
                self.publish_nodes(c);
                // Each node is named like the other's VM: the finding is keyed by its name.
                for k in [1, 2] {
                    let name = self.machines[c][k].name.clone();
                    self.open(c, "identity_conflict", name);
                }
            }
            Event::Unswap(c) => {
                if std::mem::take(&mut self.swapped[c]) {
                    self.publish_nodes(c);
                    for k in [1, 2] {
                        let name = self.machines[c][k].name.clone();
                        self.close(&name);
                    }
                }
            }
            Event::VmError(c) => {
                let id = self.ids[c].clone();
                let first_worker = self.cloud.map(&id)[1].clone();
                self.sim()
                    .with_world(|w| w.set_vm_state(&first_worker, "Error"));
                self.open(c, "mapped_vm", first_worker);
            }
            Event::VmRunning(c) => {
                let id = self.ids[c].clone();
                let first_worker = self.cloud.map(&id)[1].clone();
                self.sim()
                    .with_world(|w| w.set_vm_state(&first_worker, "Running"));
                self.close(&first_worker);
            }
            Event::Scaling(c) => {
                let id = self.ids[c].clone();
                self.sim()
                    .with_world(|w| w.set_cluster_state(&id, "Scaling"));
            }
            Event::Scaled(c) => {
                let id = self.ids[c].clone();
                // As CKS scales: the VM and its map row are written while the cluster is
                // Scaling (and reach the database), then the cluster is Running again. The API
                // and the database are one in CloudStack; here the database follows the world.
                let vm = self.sim().with_world(|w| {
                    let vm = w.add_node_vm(&id, NodeRole::Worker, true);
                    w.cluster_mut(&id).size += 1;
                    vm
                });
                self.mirror();
                self.sim()
                    .with_world(|w| w.set_cluster_state(&id, "Running"));
                let node = self.sim().with_world(|w| {
                    let v = w.vm(&vm).unwrap();
                    FakeNode::with_uuid(&v.name.to_lowercase(), &v.system_uuid())
                });
                self.machines[c].push(node);
                self.publish_nodes(c);
            }
            Event::Created(c) => {
                let id = self.ids[c].clone();
                self.sim()
                    .with_world(|w| w.set_cluster_state(&id, "Running"));
            }
            Event::Deleted(c) => {
                let id = self.ids[c].clone();
                self.sim().with_world(|w| w.destroy_cluster(&id));
                self.deleted[c] = true;
                let open: Vec<String> = self
                    .drifts
                    .iter()
                    .filter(|d| d.cluster == id && d.closed.is_none())
                    .map(|d| d.token.clone())
                    .collect();
                for token in open {
                    self.close(&token);
                }
            }
            Event::StormOn => {
                for c in 0..CLUSTERS {
                    if self.deleted[c] {
                        continue;
                    }
                    let id = self.ids[c].clone();
                    let vm = self
                        .sim()
                        .with_world(|w| w.add_node_vm(&id, NodeRole::Worker, false));
                    self.storm.push((c, vm.clone()));
                    self.open(c, "unmapped_vm", vm);
                }
            }
            Event::StormOff => {
                for (_, vm) in std::mem::take(&mut self.storm) {
                    self.sim().with_world(|w| w.expunge_vm(&vm));
                    self.close(&vm);
                }
            }
            other => unreachable!("{other:?} is not a change of the world"),
        }
        self.mirror();
    }

    /// Stops the instances and gathers what everybody wrote, their metrics first.
    async fn finish(mut self) -> History {
        let http = reqwest::Client::new();
        let mut metrics = BTreeMap::new();
        for instance in &self.instances {
            let url = format!("http://127.0.0.1:{}/metrics", instance.listen);
            let text = match http.get(&url).send().await {
                Ok(answer) => answer.text().await.unwrap_or_default(),
                Err(e) => format!("# not scraped: {e}"),
            };
            metrics.insert(instance.front.port(), text);
        }
        let fronts: BTreeMap<u16, String> = self
            .instances
            .iter()
            .map(|i| (i.front.port(), i.name.clone()))
            .collect();
        let mut logs = BTreeMap::new();
        let mut event_logs = BTreeMap::new();
        let mut state_files = BTreeMap::new();
        for instance in &mut self.instances {
            if instance.paused
                && let Some(pid) = instance.pid()
            {
                signal(pid, "CONT");
                instance.paused = false;
            }
            instance.kill();
            // Killed one after the other: another may take the lock in between.
            self.lifecycle.push(Lifecycle {
                instance: instance.front.port(),
                what: "killed",
                at: SystemTime::now(),
            });
            logs.insert(
                instance.front.port(),
                std::fs::read_to_string(&instance.log).unwrap_or_default(),
            );
            event_logs.insert(
                instance.front.port(),
                read_or_empty(&instance.dir.join("events.jsonl")),
            );
            state_files.insert(
                instance.front.port(),
                std::fs::read_to_string(instance.dir.join("state.json")).ok(),
            );
        }
        let (alerts, annotations) = self
            .sim()
            .with_world(|w| (w.alerts.clone(), w.annotations.clone()));
        let clusters = self.sim().with_world(|w| {
            self.ids
                .iter()
                .map(|id| {
                    (
                        id.clone(),
                        w.cluster(id).map(|c| c.name.clone()).unwrap_or_default(),
                    )
                })
                .collect()
        });
        History {
            fronts,
            calls: self.sim().calls(),
            alerts,
            annotations,
            drifts: self.drifts,
            lifecycle: self.lifecycle,
            applied: self.applied,
            logs,
            event_logs,
            state_files,
            metrics,
            clusters,
        }
    }
}

fn read_or_empty(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}
