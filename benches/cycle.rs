//! Benchmark of full check cycles against the simulated CloudStack, with latency injected per
//! API call and per node listing, side by side with the sequential cron-style script an
//! operator would otherwise run.
//!
//! `cargo bench --bench cycle [SIZES...]` (default sizes: 100 500 2000 clusters). Every
//! measurement runs in a child process (this binary re-executed with `--child`), so each
//! size's peak RSS is its own. Tests of the cycle's behaviour do not belong here.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cks_drift::cloudstack::client::{Client, ClientOptions};
use cks_drift::cloudstack::model::KubernetesCluster;
use cks_drift::cycle::{ClusterStatus, CycleSettings, endpoint_host, run_cycle, ssh_port};
use cks_drift::diff::Policy;
use cks_drift::remote::{NodeListError, NodeListFuture, NodeLister, SshTarget};
use cks_drift::sim::{ClusterSpec, NetworkLayout, Sim, SimOwner, SimTransport, World};
use cks_drift::time::Timestamp;
use serde_json::{Value, json};

/// Latency added to every API call (before the simulator answers).
const API_LATENCY: Duration = Duration::from_millis(20);
/// Time of one node listing that answers.
const NODE_LISTING: Duration = Duration::from_millis(150);
/// Time until a refused SSH connection fails.
const REFUSED_AFTER: Duration = Duration::from_millis(1);
/// VMs that belong to no cluster.
const FREE_VMS: usize = 20_000;
/// Clusters whose control node answers SSH in the refusing world.
const ANSWERING: usize = 50;
/// `check.concurrency`'s default.
const CONCURRENCY: usize = 8;
/// The cron-style script runs for sizes up to this; beyond, its time is extrapolated.
const SCRIPT_MAX_CLUSTERS: usize = 500;
/// The simulated clock of every world.
const WORLD_NOW: i64 = 1_750_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Ssh {
    /// Every control node answers.
    Answers,
    /// About [`ANSWERING`] answer, the others refuse the connection.
    MostRefuse,
}

impl Ssh {
    fn name(self) -> &'static str {
        match self {
            Ssh::Answers => "answers",
            Ssh::MostRefuse => "most-refuse",
        }
    }

    fn parse(s: &str) -> Option<Ssh> {
        match s {
            "answers" => Some(Ssh::Answers),
            "most-refuse" => Some(Ssh::MostRefuse),
            _ => None,
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        let (mode, n, ssh) = match &args[1..] {
            [mode, n, ssh] => (mode.as_str(), n.parse().expect("cluster count"), ssh),
            _ => panic!("usage: --child cycle|script CLUSTERS answers|most-refuse"),
        };
        let ssh = Ssh::parse(ssh).expect("answers or most-refuse");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        let out = runtime.block_on(child(mode, n, ssh));
        println!("{out}");
        return;
    }
    // `cargo bench` passes `--bench`; sizes are the plain numbers.
    let mut sizes: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    if sizes.is_empty() {
        sizes = vec![100, 500, 2000];
    }
    parent(&sizes);
}

/// The world of `n` clusters: 3 to 5 VMs each (one control node; two or three workers; an
/// etcd node on every third), owned by 40 accounts in 4 domains and 10 projects, each on its
/// own isolated network, plus [`FREE_VMS`] VMs of the same owners in no cluster.
fn build_world(n: usize) -> World {
    let mut w = World::new(Timestamp::from_unix(WORLD_NOW));
    let mut owners: Vec<SimOwner> = Vec::new();
    for d in 0..4 {
        let domain = w.add_domain(&format!("dept{d}"));
        for a in 0..10 {
            owners.push(w.add_account(&format!("team{d}{a}"), &domain));
        }
    }
    for p in 0..10 {
        owners.push(w.add_project(&format!("proj{p}")));
    }
    for i in 0..n {
        let (workers, etcd) = match i % 3 {
            0 => (2, 0),
            1 => (3, 0),
            _ => (3, 1),
        };
        let mut spec = ClusterSpec::new(
            &format!("k8s{i:05}"),
            owners[i % owners.len()].clone(),
            1,
            workers,
            etcd,
        );
        spec.layout = NetworkLayout::Isolated;
        w.add_cluster_with(spec);
    }
    for i in 0..FREE_VMS {
        w.add_vm(
            &format!("app{i:06}"),
            owners[i % owners.len()].clone(),
            None,
        );
    }
    w
}

/// A node lister that lists nothing over the network: it sleeps as long as a listing takes
/// and answers the node names of the cluster behind the host, or refuses the connection.
struct SimulatedSsh {
    nodes: HashMap<String, Vec<String>>,
    /// `None`: every host answers.
    answering: Option<HashSet<String>>,
    attempts: AtomicU64,
    sessions: AtomicU64,
}

impl SimulatedSsh {
    fn new(world: &World, ssh: Ssh) -> SimulatedSsh {
        let mut nodes = HashMap::new();
        let mut hosts = Vec::new();
        for c in &world.clusters {
            let host = endpoint_host(Some(&c.endpoint)).expect("cluster endpoint");
            let names = c
                .map
                .iter()
                .filter_map(|id| world.vms.iter().find(|vm| &vm.id == id))
                .map(|vm| vm.name.to_lowercase())
                .collect();
            hosts.push(host.clone());
            nodes.insert(host, names);
        }
        let answering = match ssh {
            Ssh::Answers => None,
            Ssh::MostRefuse => {
                let step = (hosts.len() / ANSWERING).max(1);
                Some(hosts.into_iter().step_by(step).take(ANSWERING).collect())
            }
        };
        SimulatedSsh {
            nodes,
            answering,
            attempts: AtomicU64::new(0),
            sessions: AtomicU64::new(0),
        }
    }
}

impl NodeLister for SimulatedSsh {
    fn list_nodes<'a>(&'a self, target: &'a SshTarget) -> NodeListFuture<'a> {
        Box::pin(async move {
            self.attempts.fetch_add(1, Ordering::Relaxed);
            let answers = self
                .answering
                .as_ref()
                .is_none_or(|hosts| hosts.contains(&target.host));
            if !answers {
                tokio::time::sleep(REFUSED_AFTER).await;
                return Err(NodeListError::Connect {
                    host: target.host.clone(),
                    port: target.port,
                    source: std::io::ErrorKind::ConnectionRefused.into(),
                });
            }
            self.sessions.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(NODE_LISTING).await;
            Ok(self.nodes.get(&target.host).cloned().unwrap_or_default())
        })
    }
}

/// `VmHWM` or `VmRSS` of this process, in KiB.
fn proc_status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn calls_by_command(api: &Client) -> BTreeMap<String, u64> {
    let mut calls = BTreeMap::new();
    for (command, _outcome, n) in api.stats() {
        *calls.entry(command).or_insert(0) += n;
    }
    calls
}

/// One measurement in this process; returns its figures as one JSON object.
async fn child(mode: &str, n: usize, ssh: Ssh) -> Value {
    let world = build_world(n);
    let vms = world.vms.len();
    let networks = world.networks.len();
    let lister = Arc::new(SimulatedSsh::new(&world, ssh));
    let sim = Arc::new(Sim::new(world));
    sim.set_latency(API_LATENCY);
    let api = Client::with_transport(
        Arc::new(SimTransport(sim.clone())),
        ClientOptions::default(),
    );
    let rss_before = proc_status_kib("VmRSS");
    let started = Instant::now();
    let mut out = json!({});
    match mode {
        "cycle" => {
            let settings = CycleSettings {
                policy: Policy::default(),
                concurrency: CONCURRENCY,
                default_user: "cloud".to_string(),
            };
            let report = run_cycle(
                &api,
                lister.clone(),
                &settings,
                &HashMap::new(),
                Timestamp::from_unix(WORLD_NOW),
            )
            .await
            .expect("the cycle runs");
            let count = |s: ClusterStatus| report.clusters.iter().filter(|c| c.status == s).count();
            out["checked"] = json!(count(ClusterStatus::Checked));
            out["partial"] = json!(count(ClusterStatus::Partial));
            out["skipped"] = json!(count(ClusterStatus::Skipped));
            out["mismatches"] = json!(
                report
                    .clusters
                    .iter()
                    .map(|c| c.mismatches.len())
                    .sum::<usize>()
            );
        }
        "script" => {
            let (listed, answered) = cron_script(&api, lister.as_ref()).await;
            out["checked"] = json!(answered);
            out["partial"] = json!(listed - answered);
        }
        other => panic!("unknown mode {other}"),
    }
    let wall = started.elapsed();
    out["mode"] = json!(mode);
    out["ssh"] = json!(ssh.name());
    out["clusters"] = json!(n);
    out["vms"] = json!(vms);
    out["networks"] = json!(networks);
    out["wall_s"] = json!(wall.as_secs_f64());
    out["calls"] = json!(calls_by_command(&api));
    out["ssh_attempts"] = json!(lister.attempts.load(Ordering::Relaxed));
    out["ssh_sessions"] = json!(lister.sessions.load(Ordering::Relaxed));
    out["rss_before_kib"] = json!(rss_before);
    out["hwm_kib"] = json!(proc_status_kib("VmHWM"));
    out["page_concurrency"] = json!(PAGE_CONCURRENCY);
    out
}

/// Pages in flight per listing in the client.
const PAGE_CONCURRENCY: usize = 1;

/// What an operator would put in cron: list the clusters, then for each cluster in turn, list
/// its owner's VMs by keyword and run the node listing. Returns (clusters, listings that
/// answered).
async fn cron_script(api: &Client, lister: &dyn NodeLister) -> (usize, usize) {
    let clusters: Vec<KubernetesCluster> = api
        .list(
            "listKubernetesClusters",
            "kubernetescluster",
            &[("listall", "true"), ("projectid", "-1")],
        )
        .await
        .expect("list clusters");
    let mut answered = 0;
    for c in &clusters {
        let mut params: Vec<(&str, &str)> = vec![("keyword", &c.name), ("listall", "true")];
        match (&c.projectid, &c.account, &c.domainid) {
            (Some(p), _, _) => params.push(("projectid", p)),
            (None, Some(a), Some(d)) => {
                params.push(("account", a));
                params.push(("domainid", d));
            }
            _ => {}
        }
        let vms: Vec<cks_drift::cloudstack::model::VirtualMachine> = api
            .list("listVirtualMachines", "virtualmachine", &params)
            .await
            .expect("list VMs by keyword");
        assert!(!vms.is_empty(), "{} has VMs", c.name);
        let target = SshTarget {
            host: endpoint_host(c.endpoint.as_deref()).expect("endpoint"),
            port: ssh_port(None, c.controlnodes.unwrap_or(1)),
            user: "cloud".to_string(),
        };
        if lister.list_nodes(&target).await.is_ok() {
            answered += 1;
        }
    }
    (clusters.len(), answered)
}

fn run_child(mode: &str, n: usize, ssh: Ssh) -> Value {
    let exe = std::env::current_exe().expect("this binary's path");
    let output = Command::new(exe)
        .args(["--child", mode, &n.to_string(), ssh.name()])
        .stderr(Stdio::inherit())
        .output()
        .expect("run the measurement");
    assert!(
        output.status.success(),
        "{mode} {n} {} failed: {}",
        ssh.name(),
        output.status
    );
    let text = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(text.trim()).expect("the measurement's figures")
}

fn f(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or(0.0)
}

fn u(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or(0)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Round trips to read a listing of `rows` rows in pages of 500: the first page, then the
/// others `page_concurrency` at a time.
fn rounds(rows: u64, page_concurrency: u64) -> u64 {
    let pages = rows.div_ceil(500).max(1);
    1 + (pages - 1).div_ceil(page_concurrency.max(1))
}

/// The floor of a cycle, in seconds, and how it is made up.
fn floor(m: &Value) -> (f64, String) {
    let pc = u(m, "page_concurrency");
    let clusters = u(m, "clusters");
    let first = rounds(clusters, pc)
        .max(rounds(u(m, "vms"), pc))
        .max(rounds(u(m, "networks"), pc));
    let again = rounds(clusters, pc);
    let chain = first + again;
    let api = chain as f64 * API_LATENCY.as_secs_f64();
    let answering = u(m, "ssh_sessions");
    let refused = u(m, "ssh_attempts") - answering;
    let node_total = answering as f64 * NODE_LISTING.as_secs_f64()
        + refused as f64 * REFUSED_AFTER.as_secs_f64();
    let nodes = (node_total / CONCURRENCY as f64).max(if answering > 0 {
        NODE_LISTING.as_secs_f64()
    } else {
        0.0
    });
    (
        api + nodes,
        format!("{first}+{again} round trips x 20 ms + {nodes:.2} s of node listings"),
    )
}

fn calls_text(m: &Value) -> (u64, String) {
    let calls = m["calls"].as_object().cloned().unwrap_or_default();
    let total = calls.values().filter_map(Value::as_u64).sum();
    let parts: Vec<String> = calls
        .iter()
        .map(|(c, n)| format!("{}={}", c.trim_start_matches("list"), n))
        .collect();
    (total, parts.join(" "))
}

fn parent(sizes: &[usize]) {
    println!("cks-drift cycle benchmark ({})", Timestamp::now());
    println!(
        "API: the simulated CloudStack in process, {} ms injected per call, pages of 500; \
         node listings: simulated SSH (a node lister that sleeps {} ms, or refuses after {} ms; \
         no sshd); check.concurrency {CONCURRENCY}; {FREE_VMS} VMs in no cluster.",
        API_LATENCY.as_millis(),
        NODE_LISTING.as_millis(),
        REFUSED_AFTER.as_millis()
    );
    println!();
    let mut cycles = Vec::new();
    for &n in sizes {
        let m = run_child("cycle", n, Ssh::Answers);
        assert_eq!(u(&m, "checked") as usize, n, "every cluster checked: {m}");
        assert_eq!(u(&m, "mismatches"), 0, "a consistent world: {m}");
        cycles.push(m);
    }
    println!(
        "{:>8} {:>6} {:>8} {:>8} {:>6} {:>5} {:>6} {:>6} {:>8} {:>8}  calls by command / floor",
        "clusters", "VMs", "wall s", "floor s", "w/f", "calls", "budget", "ssh", "RSS MiB", "world"
    );
    for m in &cycles {
        let (fl, how) = floor(m);
        let (total, by) = calls_text(m);
        let budget = u(m, "vms").div_ceil(500) + u(m, "clusters").div_ceil(500) + 10;
        println!(
            "{:>8} {:>6} {:>8.2} {:>8.2} {:>6.2} {:>5} {:>6} {:>6} {:>8.1} {:>8.1}  {by} / {how}",
            u(m, "clusters"),
            u(m, "vms"),
            f(m, "wall_s"),
            fl,
            f(m, "wall_s") / fl,
            total,
            budget,
            u(m, "ssh_sessions"),
            mib(u(m, "hwm_kib")),
            mib(u(m, "rss_before_kib")),
        );
    }
    println!(
        "(RSS MiB: peak of the whole process, the simulated cloud included; world: RSS once \
         the simulated cloud was built, before the cycle)"
    );
    for pair in cycles.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let k = u(b, "clusters") as f64 / u(a, "clusters") as f64;
        println!(
            "growth {} -> {} clusters (x{k:.1}): wall x{:.2}, API calls x{:.2}",
            u(a, "clusters"),
            u(b, "clusters"),
            f(b, "wall_s") / f(a, "wall_s"),
            calls_text(b).0 as f64 / calls_text(a).0 as f64
        );
    }

    println!();
    println!(
        "side by side with the cron-style script (per cluster in turn: listVirtualMachines \
         keyword=<name> listall=true for the owner, then the node listing)"
    );
    println!(
        "{:>12} {:>8} {:>9} {:>9} {:>8} {:>6} {:>10}",
        "ssh", "clusters", "cycle s", "script s", "speedup", "calls", "script calls"
    );
    let mut per_cluster: HashMap<Ssh, f64> = HashMap::new();
    for ssh in [Ssh::Answers, Ssh::MostRefuse] {
        for (i, &n) in sizes.iter().enumerate() {
            let cycle = if ssh == Ssh::Answers {
                cycles[i].clone()
            } else {
                run_child("cycle", n, ssh)
            };
            let (script_s, script_calls, note) = if n <= SCRIPT_MAX_CLUSTERS {
                let s = run_child("script", n, ssh);
                per_cluster.insert(ssh, f(&s, "wall_s") / n as f64);
                (f(&s, "wall_s"), calls_text(&s).0.to_string(), "")
            } else {
                let per = per_cluster.get(&ssh).copied().unwrap_or(f64::NAN);
                // Answering clusters stay about 50 in the refusing world: scale the rest.
                let estimate = match ssh {
                    Ssh::Answers => per * n as f64,
                    Ssh::MostRefuse => extrapolate_refusing(per, n),
                };
                (estimate, format!("~{}", n + 1), " (extrapolated)")
            };
            println!(
                "{:>12} {:>8} {:>9.2} {:>9.2} {:>7.1}x {:>6} {:>10}{note}",
                ssh.name(),
                n,
                f(&cycle, "wall_s"),
                script_s,
                script_s / f(&cycle, "wall_s"),
                calls_text(&cycle).0,
                script_calls,
            );
        }
    }
}

/// The script's time for `n` clusters in the refusing world, from its time per cluster at
/// [`SCRIPT_MAX_CLUSTERS`] clusters: [`ANSWERING`] listings that answer, the rest refused.
fn extrapolate_refusing(per_cluster_at_max: f64, n: usize) -> f64 {
    let measured = per_cluster_at_max * SCRIPT_MAX_CLUSTERS as f64;
    let answered = ANSWERING as f64 * NODE_LISTING.as_secs_f64();
    let per_refusing = (measured - answered) / SCRIPT_MAX_CLUSTERS as f64;
    answered + per_refusing * n as f64
}
