//! Benchmark of full check cycles against the simulated CloudStack, with latency injected per
//! API call and per node listing, side by side with the sequential cron-style script an
//! operator would otherwise run.
//!
//! `cargo bench --bench cycle [SIZES...] [--concurrency N]` (default sizes: 100 500 1000
//! 2000 clusters). With `--database`, each size runs with and without the CloudStack
//! database (a private MariaDB server holding the same world) and only that comparison is
//! printed. With `--real-ssh`, each size also runs with its node listings going to real
//! OpenSSH servers on loopback addresses (one sshd per answering control node, the other
//! control nodes' addresses refusing the connection), and only that comparison is printed.
//! With `--binary`, the real `cks-drift check` binary runs against the same world with real
//! SSH, as an operator would run it, and its own peak RSS is printed (`CKS_DRIFT_BIN` names
//! another binary than the one this benchmark was built with, e.g. the release build). Each
//! measurement takes two child processes (this binary re-executed with
//! `--child`): one serves the simulated cloud over HTTP on 127.0.0.1, the other runs the
//! checker against it through the real client, so the peak RSS measured is the checker's
//! alone and each size's is its own. The checker's process gets the environment
//! `config/cks-drift.service` gives the daemon (its `Environment=` lines: glibc's malloc
//! settings), as the service and the container run it; `--glibc-defaults` runs it without.
//! Tests of the cycle's behaviour do not belong here.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cks_drift::base::time::Timestamp;
use cks_drift::cks::{endpoint_host, ssh_port};
use cks_drift::cloudstack::client::Client;
use cks_drift::cloudstack::model::{KubernetesCluster, VirtualMachine};
use cks_drift::config::{
    CloudStackSettings, DatabaseSettings, HostKeyPolicy, Secret, SshSettings, parse_database_url,
};
use cks_drift::database::Database;
use cks_drift::diff::Policy;
use cks_drift::engine::cycle::{ClusterStatus, CycleSettings, MapSource, run_cycle};
use cks_drift::remote::{NodeListError, NodeListFuture, NodeLister, SshNodeLister, SshTarget};
use cks_drift::snapshot::Node;
use cks_drift_sim::mariadb::{PrivateMariaDb, Schema};
use cks_drift_sim::{ClusterSpec, FakeCloudStack, NetworkLayout, Sim, SimOwner, SimTime, World};
use serde_json::{Value, json};

/// The key pair the simulated cloud accepts.
const API_KEY: &str = "bench-api-key";
const SECRET_KEY: &str = "bench-secret-key";

/// Latency added to every API call (before the simulator answers).
const API_LATENCY: Duration = Duration::from_millis(20);
/// Time of one node listing that answers.
const NODE_LISTING: Duration = Duration::from_millis(150);
/// Time until a refused SSH connection fails.
const REFUSED_AFTER: Duration = Duration::from_millis(1);
/// VMs that belong to no cluster, at least; a world has at least [`VMS_PER_CLUSTER`] VMs per
/// cluster in all.
const FREE_VMS: usize = 20_000;
/// VMs per cluster in the whole world, at least (10,000 clusters: 150,000 VMs).
const VMS_PER_CLUSTER: usize = 15;
/// Clusters whose control node answers SSH in the refusing world.
const ANSWERING: usize = 50;
/// `check.concurrency` unless `--concurrency N` says otherwise (the configuration's default
/// is 8; a cloud of thousands of clusters wants more).
const DEFAULT_CONCURRENCY: usize = 32;
/// The cron-style script runs for sizes up to this; beyond, its time is extrapolated.
const SCRIPT_MAX_CLUSTERS: usize = 500;
/// The simulated clock of every world.
const WORLD_NOW: i64 = 1_750_000_000;
/// The CloudStack release the simulated cloud answers as (`--cloudstack 4.19.0`), passed to
/// its process in this variable; the newest when unset.
const RELEASE_VAR: &str = "CKS_DRIFT_BENCH_CLOUDSTACK";
/// `--cloudstack`, for the simulated cloud's processes.
static RELEASE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
/// The systemd unit the packages install: its `Environment=` lines are the checker's.
const UNIT: &str = include_str!("../config/cks-drift.service");
/// `--glibc-defaults`: the checker runs without the unit's environment.
static GLIBC_DEFAULTS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The variables `config/cks-drift.service` sets for the daemon.
fn unit_environment() -> Vec<(&'static str, &'static str)> {
    UNIT.lines()
        .filter_map(|line| line.strip_prefix("Environment="))
        .filter_map(|pair| pair.split_once('='))
        .collect()
}

/// Gives a checker's process the unit's environment, or takes it away (`--glibc-defaults`).
fn as_the_service_runs(command: &mut Command) -> &mut Command {
    for (name, value) in unit_environment() {
        if GLIBC_DEFAULTS.load(Ordering::Relaxed) {
            command.env_remove(name);
        } else {
            command.env(name, value);
        }
    }
    command
}

/// What [`as_the_service_runs`] gives, for the benchmark's header.
fn environment_line() -> String {
    if GLIBC_DEFAULTS.load(Ordering::Relaxed) {
        "Checker's environment: glibc's defaults (--glibc-defaults), not the unit's.".to_string()
    } else {
        let pairs: Vec<String> = unit_environment()
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        format!(
            "Checker's environment: as config/cks-drift.service sets it ({}).",
            pairs.join(" ")
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Ssh {
    /// Every control node answers.
    Answers,
    /// About [`ANSWERING`] answer, the others refuse the connection.
    MostRefuse,
    /// Real SSH: about [`ANSWERING`] control nodes answer from an OpenSSH server of their
    /// own on a loopback address, the others' addresses refuse the connection.
    Real,
}

impl Ssh {
    fn name(self) -> &'static str {
        match self {
            Ssh::Answers => "answers",
            Ssh::MostRefuse => "most-refuse",
            Ssh::Real => "real",
        }
    }

    fn parse(s: &str) -> Option<Ssh> {
        match s {
            "answers" => Some(Ssh::Answers),
            "most-refuse" => Some(Ssh::MostRefuse),
            "real" => Some(Ssh::Real),
            _ => None,
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        let runtime = |workers: usize| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .enable_all()
                .build()
                .expect("tokio runtime")
        };
        let cores = std::thread::available_parallelism().map_or(2, usize::from);
        match &args[1..] {
            [mode, n, ssh, nodes, rest @ ..] if mode == "serve" => {
                let ssh = Ssh::parse(ssh).expect("answers, most-refuse or real");
                let with_db = rest.first().map(String::as_str) == Some("db");
                // The simulator answers under one lock, blocking the thread that waits for
                // it; more threads than cores keep the injected latencies running meanwhile,
                // as a management server's request threads do.
                runtime(4 * cores).block_on(serve(
                    n.parse().expect("cluster count"),
                    ssh,
                    nodes,
                    with_db,
                ));
            }
            [mode, c, url, nodes] => {
                // The checker runs as the daemon does: one worker thread per core.
                let concurrency = c.parse().expect("concurrency");
                let out = runtime(cores).block_on(measure(mode, concurrency, url, nodes));
                println!("{out}");
            }
            _ => panic!(
                "usage: --child serve CLUSTERS SSH NODES [db] | --child cycle|cycle-db|script CONCURRENCY URL NODES"
            ),
        }
        return;
    }
    // `cargo bench` passes `--bench`; sizes are the plain numbers.
    let mut concurrency = DEFAULT_CONCURRENCY;
    let mut sizes: Vec<usize> = Vec::new();
    let mut database = false;
    let mut real_ssh = false;
    let mut binary = false;
    let mut concurrency_given = false;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        if arg == "--database" {
            database = true;
        } else if arg == "--real-ssh" {
            real_ssh = true;
        } else if arg == "--binary" {
            binary = true;
        } else if arg == "--glibc-defaults" {
            GLIBC_DEFAULTS.store(true, Ordering::Relaxed);
        } else if arg == "--cloudstack" {
            let name = args.next().expect("--cloudstack RELEASE, e.g. 4.19.0");
            cks_drift_sim::Release::from_name(name)
                .unwrap_or_else(|| panic!("--cloudstack {name}: not a release of the fake"));
            RELEASE.set(name.clone()).expect("--cloudstack once");
        } else if arg == "--concurrency" {
            concurrency_given = true;
            concurrency = args
                .next()
                .and_then(|c| c.parse().ok())
                .expect("--concurrency N");
        } else if let Ok(n) = arg.parse() {
            sizes.push(n);
        }
    }
    if sizes.is_empty() {
        sizes = vec![100, 500, 1000, 2000];
    }
    println!("{}", environment_line());
    if binary {
        // The configured default, and the benchmark's.
        let concurrencies = if concurrency_given {
            vec![concurrency]
        } else {
            vec![8, DEFAULT_CONCURRENCY]
        };
        the_binary(&sizes, &concurrencies);
    } else if database {
        with_and_without_database(&sizes, concurrency);
    } else if real_ssh {
        real_and_simulated_ssh(&sizes, concurrency);
    } else {
        parent(&sizes, concurrency);
    }
}

/// The world of `n` clusters: 3 to 5 VMs each (one control node; two or three workers; an
/// etcd node on every third), owned by 40 accounts in 4 domains and 10 projects, each on its
/// own isolated network, plus VMs of the same owners in no cluster: [`FREE_VMS`], or more
/// where it takes more for [`VMS_PER_CLUSTER`] VMs per cluster in all.
fn build_world(n: usize) -> World {
    let mut w = World::new(SimTime::from_unix(WORLD_NOW));
    if let Ok(name) = std::env::var(RELEASE_VAR) {
        w.release = cks_drift_sim::Release::from_name(&name).expect("a release of the fake");
    }
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
    let free = FREE_VMS.max((VMS_PER_CLUSTER * n).saturating_sub(w.vms.len()));
    for i in 0..free {
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
}

/// Counts the listings a lister was asked for, and those that answered.
struct Counted {
    inner: Box<dyn NodeLister>,
    attempts: AtomicU64,
    sessions: AtomicU64,
}

impl Counted {
    fn new(inner: Box<dyn NodeLister>) -> Counted {
        Counted {
            inner,
            attempts: AtomicU64::new(0),
            sessions: AtomicU64::new(0),
        }
    }
}

impl NodeLister for Counted {
    fn list_nodes<'a>(&'a self, target: &'a SshTarget) -> NodeListFuture<'a> {
        Box::pin(async move {
            self.attempts.fetch_add(1, Ordering::Relaxed);
            let listed = self.inner.list_nodes(target).await;
            if listed.is_ok() {
                self.sessions.fetch_add(1, Ordering::Relaxed);
            }
            listed
        })
    }
}

/// What the simulated SSH needs to know of a world: each control node's node names, and
/// which control nodes answer (`null`: all).
fn ssh_view(world: &World, ssh: Ssh) -> Value {
    let vm_names: HashMap<&str, &str> = world
        .vms
        .iter()
        .map(|vm| (vm.id.as_str(), vm.name.as_str()))
        .collect();
    let mut nodes = serde_json::Map::new();
    let mut hosts = Vec::new();
    for c in &world.clusters {
        let host = endpoint_host(Some(&c.endpoint)).expect("cluster endpoint");
        let names: Vec<String> = c
            .map
            .iter()
            .filter_map(|id| vm_names.get(id.as_str()))
            .map(|name| name.to_lowercase())
            .collect();
        hosts.push(host.clone());
        nodes.insert(host, json!(names));
    }
    let answering = match ssh {
        Ssh::Answers => Value::Null,
        Ssh::MostRefuse | Ssh::Real => json!(answering_hosts(&hosts)),
    };
    json!({ "nodes": nodes, "answering": answering })
}

/// The control nodes that answer in a refusing world: [`ANSWERING`] of them, spread evenly.
fn answering_hosts(hosts: &[String]) -> Vec<String> {
    let step = (hosts.len() / ANSWERING).max(1);
    hosts
        .iter()
        .step_by(step)
        .take(ANSWERING)
        .cloned()
        .collect()
}

impl SimulatedSsh {
    fn from_view(view: &Value) -> SimulatedSsh {
        let nodes = view["nodes"]
            .as_object()
            .expect("nodes")
            .iter()
            .map(|(host, names)| {
                let names = names
                    .as_array()
                    .expect("names")
                    .iter()
                    .filter_map(|n| n.as_str().map(str::to_string))
                    .collect();
                (host.clone(), names)
            })
            .collect();
        let answering = view["answering"].as_array().map(|hosts| {
            hosts
                .iter()
                .filter_map(|h| h.as_str().map(str::to_string))
                .collect()
        });
        SimulatedSsh { nodes, answering }
    }
}

impl NodeLister for SimulatedSsh {
    fn list_nodes<'a>(&'a self, target: &'a SshTarget) -> NodeListFuture<'a> {
        Box::pin(async move {
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
            tokio::time::sleep(NODE_LISTING).await;
            let names = self.nodes.get(&target.host).cloned().unwrap_or_default();
            Ok(names.into_iter().map(Node::named).collect())
        })
    }
}

/// User and system CPU time of this process, in seconds (`/proc/self/stat`, in ticks of
/// 1/100 s).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("read /proc/self/stat");
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15, i.e. 12 and 13 after the command name.
    (ticks(11) + ticks(12)) as f64 / 100.0
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

/// The simulated cloud of `n` clusters over HTTP, with [`API_LATENCY`] per call: writes what
/// the simulated SSH needs to `nodes`, prints the API's URL and the world's size as one JSON
/// line, serves until its standard input closes, then prints the CPU time it used.
async fn serve(n: usize, ssh: Ssh, nodes: &str, with_db: bool) {
    let mut world = build_world(n);
    // Real SSH: every control node on a loopback address of its own, an sshd on those that
    // answer; it lives until the end of this process.
    let sshd = (ssh == Ssh::Real).then(|| RealSsh::start(&mut world));
    // Real SSH needs no node lists in the checker's process: the servers have them.
    let view = match &sshd {
        Some(sshd) => json!({ "nodes": {}, "answering": null, "real": sshd.settings() }),
        None => ssh_view(&world, ssh),
    };
    std::fs::write(nodes, view.to_string()).expect("write the node view");
    drop(view);
    let (vms, networks) = (world.vms.len(), world.networks.len());
    // The database holds the same world; its SELECTs are counted while the checker runs.
    let db = with_db.then(|| {
        let db = PrivateMariaDb::start(Schema::Newest);
        db.mirror(&world);
        db
    });
    let selects = |db: &PrivateMariaDb| -> u64 {
        let row = db.sql("SHOW GLOBAL STATUS LIKE 'Com_select'");
        row.split_whitespace()
            .nth(1)
            .and_then(|v| v.parse().ok())
            .expect("Com_select")
    };
    let selects_before = db.as_ref().map(selects);
    let built = cpu_seconds();
    let sim = Arc::new(Sim::new(world));
    sim.set_latency(API_LATENCY);
    let server = FakeCloudStack::start(sim, API_KEY, SECRET_KEY).await;
    println!(
        "{}",
        json!({
            "url": server.url(),
            "vms": vms,
            "networks": networks,
            "db_url": db.as_ref().map(PrivateMariaDb::url),
            "db_password": db.as_ref().map(|d| d.password().to_string()),
        })
    );
    tokio::task::spawn_blocking(|| {
        let mut rest = Vec::new();
        std::io::stdin().read_to_end(&mut rest)
    })
    .await
    .expect("wait for the end")
    .expect("read standard input");
    let db_selects = db
        .as_ref()
        .zip(selects_before)
        .map(|(db, before)| selects(db) - before);
    println!(
        "{}",
        json!({ "server_cpu_s": cpu_seconds() - built, "db_selects": db_selects })
    );
    drop(sshd);
}

/// The port sshd listens on for CKS clusters on isolated networks.
const CKS_SSH_PORT: u16 = 2222;
/// The user the real-SSH listings log in as: a system user whose login shell is `/bin/sh`, so
/// that each listing runs the script and not the machine's own shell start-up files (root's
/// `.bashrc` may take longer than the listing itself).
const BENCH_USER: &str = "cks-drift-bench";

/// Creates [`BENCH_USER`] unless it exists: no home, `/bin/sh`, and `*` as its password
/// field (sshd without PAM refuses a locked `!` account).
fn ensure_bench_user() {
    let exists = Command::new("getent")
        .args(["passwd", BENCH_USER])
        .stdout(Stdio::null())
        .status()
        .expect("run getent")
        .success();
    if !exists {
        let status = Command::new("useradd")
            .args(["--system", "--no-create-home", "--home-dir", "/nonexistent"])
            .args(["--shell", "/bin/sh", "--password", "*", BENCH_USER])
            .status()
            .expect("run useradd (the real-SSH benchmark runs as root)");
        assert!(status.success(), "useradd {BENCH_USER} failed");
    }
}

/// OpenSSH servers on loopback for the control nodes of a world that answer (see
/// [`answering_hosts`]): one sshd each, on the control node's own address in 127.99.0.0/16
/// and CKS's port 2222. The other control nodes get addresses of their own too, where
/// nothing listens: the kernel refuses those connections. All servers share one host key and
/// one authorized PKCS#1 RSA key (what CloudStack generates for CKS). The remote command is a
/// script that prints the node lines kubectl would print (`LIST_ARGUMENTS` columns: name,
/// readiness, system UUID, provider ID) for the control node the connection came in on, from
/// `$SSH_CONNECTION`; running a real kubectl per listing would measure kubectl, not the
/// checker. Stopped on drop.
struct RealSsh {
    dir: tempfile::TempDir,
    servers: Vec<std::process::Child>,
}

impl RealSsh {
    fn start(world: &mut World) -> RealSsh {
        let dir = tempfile::tempdir().expect("temporary directory");
        let base = dir.path().to_path_buf();
        // The login user reads the script and authorized_keys from here.
        std::fs::set_permissions(&base, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("open the directory to the login user");
        for (i, c) in world.clusters.iter_mut().enumerate() {
            let ip = std::net::Ipv4Addr::new(127, 99, (i / 250 + 1) as u8, (i % 250 + 1) as u8);
            c.endpoint = format!("https://{ip}:6443/");
        }
        let hosts: Vec<String> = world
            .clusters
            .iter()
            .map(|c| endpoint_host(Some(&c.endpoint)).expect("cluster endpoint"))
            .collect();
        let answering = answering_hosts(&hosts);
        // CKS logs in as the first mapped VM's `controlNodeLoginUser`.
        ensure_bench_user();
        let firsts: Vec<String> = world
            .clusters
            .iter()
            .zip(&hosts)
            .filter(|(_, h)| answering.contains(h))
            .filter_map(|(c, _)| c.map.first().cloned())
            .collect();
        for id in firsts {
            world
                .vm_mut(&id)
                .details
                .insert("controlNodeLoginUser".into(), BENCH_USER.into());
        }
        let keygen = |name: &str, args: &[&str]| {
            let status = Command::new("ssh-keygen")
                .args(["-q", "-N", "", "-C", "cks-drift-bench", "-f"])
                .arg(base.join(name))
                .args(args)
                .stdin(Stdio::null())
                .status()
                .expect("run ssh-keygen");
            assert!(status.success(), "ssh-keygen {name} failed");
        };
        keygen("host_ed25519", &["-t", "ed25519"]);
        keygen("client_rsa", &["-m", "PEM", "-t", "rsa", "-b", "2048"]);
        std::fs::copy(base.join("client_rsa.pub"), base.join("authorized_keys"))
            .expect("write authorized_keys");
        let host_key = std::fs::read_to_string(base.join("host_ed25519.pub")).expect("host key");
        let host_key: Vec<&str> = host_key.split_whitespace().take(2).collect();
        let known_hosts: String = answering
            .iter()
            .map(|h| format!("[{h}]:{CKS_SSH_PORT} {}\n", host_key.join(" ")))
            .collect();
        std::fs::write(base.join("known_hosts"), known_hosts).expect("write known_hosts");

        // What each answering control node's kubectl would print: its cluster's nodes (the
        // mapped VMs but etcd nodes), with the system UUIDs their guests see.
        let vms: HashMap<&str, &cks_drift_sim::SimVm> =
            world.vms.iter().map(|vm| (vm.id.as_str(), vm)).collect();
        let mut script =
            String::from("#!/bin/sh\ncase \"$(echo $SSH_CONNECTION | cut -d' ' -f3)\" in\n");
        for (c, host) in world.clusters.iter().zip(&hosts) {
            if !answering.contains(host) {
                continue;
            }
            script.push_str(&format!("  {host}) printf '%s\\n'"));
            for vm in c.map.iter().filter_map(|id| vms.get(id.as_str())) {
                if vm.isetcdnode != Some(true) && !vm.removed {
                    script.push_str(&format!(
                        " '{}   True   {}   <none>'",
                        vm.name.to_lowercase(),
                        vm.system_uuid()
                    ));
                }
            }
            script.push_str(" ;;\n");
        }
        script.push_str("  *) echo \"no control node at $SSH_CONNECTION\" >&2; exit 3 ;;\nesac\n");
        let command = base.join("list-nodes.sh");
        std::fs::write(&command, script).expect("write the node-listing script");
        std::fs::set_permissions(
            &command,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .expect("make the script executable");

        // sshd refuses to start without its privilege-separation directory.
        std::fs::create_dir_all("/run/sshd").expect("create /run/sshd");
        let mut servers = Vec::new();
        for (i, host) in answering.iter().enumerate() {
            let config = format!(
                "Port {CKS_SSH_PORT}\n\
                 ListenAddress {host}\n\
                 HostKey {base}/host_ed25519\n\
                 PidFile {base}/sshd-{i}.pid\n\
                 UsePAM no\n\
                 PasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\n\
                 StrictModes no\n\
                 AuthorizedKeysFile {base}/authorized_keys\n\
                 PubkeyAcceptedAlgorithms rsa-sha2-512,rsa-sha2-256,ssh-ed25519\n\
                 LogLevel ERROR\n",
                base = base.display()
            );
            let path = base.join(format!("sshd-{i}.conf"));
            std::fs::write(&path, config).expect("write sshd_config");
            let server = Command::new("/usr/sbin/sshd")
                .args(["-D", "-f"])
                .arg(&path)
                .arg("-E")
                .arg(base.join(format!("sshd-{i}.log")))
                .stdin(Stdio::null())
                .spawn()
                .expect("start sshd (as root, from openssh-server)");
            servers.push(server);
        }
        let started = Instant::now();
        for host in &answering {
            let addr: std::net::SocketAddr =
                format!("{host}:{CKS_SSH_PORT}").parse().expect("address");
            while std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
                assert!(
                    started.elapsed() < Duration::from_secs(20),
                    "sshd is not listening on {addr}"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        RealSsh { dir, servers }
    }

    /// The checker's `[ssh]` settings for these servers.
    fn settings(&self) -> Value {
        let base = self.dir.path();
        json!({
            "private_key": base.join("client_rsa"),
            "known_hosts": base.join("known_hosts"),
            "command": base.join("list-nodes.sh"),
        })
    }
}

impl Drop for RealSsh {
    fn drop(&mut self) {
        for server in &mut self.servers {
            let _ = server.kill();
            let _ = server.wait();
        }
    }
}

/// One measurement of the checker (`cycle`) or of the cron-style script (`script`) against the
/// API at `url`; returns its figures as one JSON object.
async fn measure(mode: &str, concurrency: usize, url: &str, nodes: &str) -> Value {
    // `BENCH_LOG=cks_drift=debug` shows what the checker does, with timestamps, on stderr.
    if let Ok(filter) = std::env::var("BENCH_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .init();
    }
    let rss_start = proc_status_kib("VmRSS");
    let view: Value = serde_json::from_str(&std::fs::read_to_string(nodes).expect("node view"))
        .expect("node view JSON");
    // Real SSH logs in as the benchmark's user; the simulated SSH takes anyone.
    let (inner, default_user): (Box<dyn NodeLister>, &str) = match view.get("real") {
        Some(real) => {
            let path = |key: &str| std::path::PathBuf::from(real[key].as_str().expect("path"));
            let ssh = SshSettings {
                private_key: path("private_key"),
                user: BENCH_USER.to_string(),
                known_hosts: path("known_hosts"),
                host_key_policy: HostKeyPolicy::Strict,
                connect_timeout: Duration::from_secs(10),
                command_timeout: Duration::from_secs(20),
                command: path("command").display().to_string(),
            };
            let lister = SshNodeLister::new(&ssh).expect("the bench's client key");
            (Box::new(lister), BENCH_USER)
        }
        None => (Box::new(SimulatedSsh::from_view(&view)), "cloud"),
    };
    let lister = Arc::new(Counted::new(inner));
    drop(view);
    let settings = CloudStackSettings {
        url: url.to_string(),
        api_key: Secret::new(API_KEY),
        secret_key: Secret::new(SECRET_KEY),
        timeout: Duration::from_secs(60),
        ca_file: None,
        insecure: false,
        page_size: 500,
    };
    let api = Client::new(&settings).expect("API client");
    let started = Instant::now();
    let mut out = json!({});
    match mode {
        "cycle" | "cycle-db" => {
            let database = (mode == "cycle-db").then(|| {
                let url = std::env::var("BENCH_DB_URL").expect("BENCH_DB_URL");
                let (host, port, user, name) = parse_database_url(&url).expect("database URL");
                Database::new(&DatabaseSettings {
                    url,
                    host,
                    port,
                    user,
                    name,
                    password: Secret::new(
                        std::env::var("BENCH_DB_PASSWORD").expect("BENCH_DB_PASSWORD"),
                    ),
                    tls: false,
                    ca_file: None,
                    tls_server_name: None,
                    connect_timeout: Duration::from_secs(10),
                    query_timeout: Duration::from_secs(60),
                    lock_interval: Duration::from_secs(5),
                })
            });
            let settings = CycleSettings {
                policy: Policy::default(),
                concurrency,
                default_user: default_user.to_string(),
                node_deadline: std::time::Duration::from_secs(600),
                database,
            };
            // As a tick runs it: the cycle, and beside it whether CloudStack runs its own VM
            // map check (one `listConfigurations` a cycle).
            let previous = HashMap::new();
            let (report, _server_check) = tokio::join!(
                run_cycle(
                    &api,
                    lister.clone(),
                    &settings,
                    &previous,
                    Timestamp::from_unix(WORLD_NOW),
                ),
                api.server_check(),
            );
            let report = report.expect("the cycle runs");
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
            out["map_source"] = json!(match &report.map_source {
                MapSource::Api => "api".to_string(),
                MapSource::Database {
                    clusters, vms_read, ..
                } => format!(
                    "database ({clusters} clusters{})",
                    if *vms_read { ", VMs too" } else { "" }
                ),
                MapSource::DatabaseFailed { error } => format!("database failed: {error}"),
            });
            if let MapSource::Database { rows, .. } = &report.map_source {
                out["db_rows"] = json!(rows);
            }
        }
        "script" => {
            let (listed, answered) = cron_script(&api, lister.as_ref()).await;
            out["checked"] = json!(answered);
            out["partial"] = json!(listed - answered);
        }
        other => panic!("unknown mode {other}"),
    }
    out["wall_s"] = json!(started.elapsed().as_secs_f64());
    out["cpu_s"] = json!(cpu_seconds());
    out["mode"] = json!(mode);
    out["calls"] = json!(calls_by_command(&api));
    out["ssh_attempts"] = json!(lister.attempts.load(Ordering::Relaxed));
    out["ssh_sessions"] = json!(lister.sessions.load(Ordering::Relaxed));
    out["rss_start_kib"] = json!(rss_start);
    out["hwm_kib"] = json!(proc_status_kib("VmHWM"));
    out["page_concurrency"] = json!(api.options().page_concurrency);
    out["concurrency"] = json!(concurrency);
    out
}

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
        let vms: Vec<VirtualMachine> = api
            .list("listVirtualMachines", "virtualmachine", &params)
            .await
            .expect("list VMs by keyword");
        assert!(!vms.is_empty(), "{} has VMs", c.name);
        let target = SshTarget {
            cluster_id: c.id.clone(),
            host: endpoint_host(c.endpoint.as_deref()).expect("endpoint"),
            port: ssh_port(None, c.controlnodes.unwrap_or(1)),
            user: "cloud".to_string(),
            max_nodes: cks_drift::remote::MAX_NODES,
        };
        if lister.list_nodes(&target).await.is_ok() {
            answered += 1;
        }
    }
    (clusters.len(), answered)
}

/// The simulated cloud's process (this binary, `--child serve`): it prints the world (its URL,
/// sizes and database) on its first line, serves until its stdin closes, then prints its CPU
/// time and exits.
struct ServerChild {
    child: std::process::Child,
    out: BufReader<std::process::ChildStdout>,
    world: Value,
}

impl ServerChild {
    fn start(n: usize, ssh: Ssh, nodes: &std::path::Path, db_arg: &str) -> ServerChild {
        let exe = std::env::current_exe().expect("this binary's path");
        let mut child = Command::new(exe)
            .args(["--child", "serve", &n.to_string(), ssh.name()])
            .arg(nodes)
            .arg(db_arg)
            .env(
                RELEASE_VAR,
                RELEASE
                    .get()
                    .map_or(cks_drift_sim::Release::NEWEST.name(), |r| r),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the simulated cloud");
        let mut out = BufReader::new(child.stdout.take().expect("server stdout"));
        let mut line = String::new();
        out.read_line(&mut line).expect("server's first line");
        let world = serde_json::from_str(line.trim()).expect("server's URL and world");
        ServerChild { child, out, world }
    }

    /// Stops serving; the CPU time the server spent serving.
    fn stop(mut self) -> Value {
        drop(self.child.stdin.take());
        let mut line = String::new();
        self.out.read_line(&mut line).expect("server's last line");
        assert!(
            self.child.wait().expect("server exit").success(),
            "the server failed"
        );
        serde_json::from_str(line.trim()).expect("server's CPU time")
    }
}

/// One measurement: a server process for the world, a checker process against it.
fn run_child(mode: &str, n: usize, ssh: Ssh, concurrency: usize) -> Value {
    let exe = std::env::current_exe().expect("this binary's path");
    let dir = tempfile::tempdir().expect("temporary directory");
    let nodes = dir.path().join("nodes.json");
    let db_arg = if mode == "cycle-db" { "db" } else { "-" };
    let server = ServerChild::start(n, ssh, &nodes, db_arg);
    let world = &server.world;
    let nodes = nodes.to_str().expect("UTF-8 path");
    let url = world["url"].as_str().expect("URL");

    let mut command = Command::new(&exe);
    if let (Some(db_url), Some(password)) =
        (world["db_url"].as_str(), world["db_password"].as_str())
    {
        command
            .env("BENCH_DB_URL", db_url)
            .env("BENCH_DB_PASSWORD", password);
    }
    let output = as_the_service_runs(&mut command)
        .args(["--child", mode, &concurrency.to_string(), url, nodes])
        .stderr(Stdio::inherit())
        .output()
        .expect("run the measurement");
    let world = world.clone();
    let server_cpu = server.stop();
    assert!(
        output.status.success(),
        "{mode} {n} {} failed: {}",
        ssh.name(),
        output.status
    );
    let text = String::from_utf8_lossy(&output.stdout);
    let mut m: Value = serde_json::from_str(text.trim()).expect("the measurement's figures");
    m["ssh"] = json!(ssh.name());
    m["clusters"] = json!(n);
    m["vms"] = world["vms"].clone();
    m["networks"] = world["networks"].clone();
    m["server_cpu_s"] = server_cpu["server_cpu_s"].clone();
    m["db_selects"] = server_cpu["db_selects"].clone();
    m
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

/// The floor of a cycle, in seconds, and how it is made up. The cycle's chains of dependent
/// steps: the clusters and networks (read together), then the node listings; the VMs, read
/// alongside from the start; then, once both are done, the clusters again. Each listing
/// takes its first page, then its other pages `page_concurrency` at a time; the node
/// listings take `listings x time / concurrency` (and at least one listing's time).
fn floor(m: &Value) -> (f64, String) {
    let pc = u(m, "page_concurrency");
    let latency = API_LATENCY.as_secs_f64();
    let clusters = u(m, "clusters");
    let first = rounds(clusters, pc).max(rounds(u(m, "networks"), pc));
    let vms = rounds(u(m, "vms"), pc);
    let again = rounds(clusters, pc);
    let answering = u(m, "ssh_sessions");
    let refused = u(m, "ssh_attempts") - answering;
    let node_total = answering as f64 * NODE_LISTING.as_secs_f64()
        + refused as f64 * REFUSED_AFTER.as_secs_f64();
    let nodes = if m["ssh"] == "real" {
        // Real listings take what they take; the floor counts the API alone.
        0.0
    } else {
        (node_total / u(m, "concurrency") as f64).max(if answering > 0 {
            NODE_LISTING.as_secs_f64()
        } else {
            REFUSED_AFTER.as_secs_f64()
        })
    };
    let before_again = (first as f64 * latency + nodes).max(vms as f64 * latency);
    (
        before_again + again as f64 * latency,
        format!("max({first} x 20 ms + nodes {nodes:.2} s, VMs {vms} x 20 ms) + {again} x 20 ms"),
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

fn parent(sizes: &[usize], concurrency: usize) {
    println!("cks-drift cycle benchmark, {}", Timestamp::now());
    println!(
        "API: the simulated CloudStack served over HTTP on 127.0.0.1 by another process, read \
         through the real client; {} ms injected per call, pages of 500. \
         Node listings: simulated SSH, no sshd (a node lister that sleeps {} ms, or refuses \
         after {} ms). check.concurrency {concurrency}. Worlds: N clusters of 3-5 VMs plus \
         {FREE_VMS} VMs in no cluster.",
        API_LATENCY.as_millis(),
        NODE_LISTING.as_millis(),
        REFUSED_AFTER.as_millis()
    );
    println!();
    let mut cycles = Vec::new();
    for &n in sizes {
        let m = run_child("cycle", n, Ssh::Answers, concurrency);
        assert_eq!(u(&m, "checked") as usize, n, "every cluster checked: {m}");
        assert_eq!(u(&m, "mismatches"), 0, "a consistent world: {m}");
        cycles.push(m);
    }
    println!(
        "{:>8} {:>6} {:>7} {:>7} {:>5} {:>5} {:>6} {:>5} {:>7} {:>5} {:>9}",
        "clusters",
        "VMs",
        "wall s",
        "floor s",
        "w/f",
        "calls",
        "budget",
        "ssh",
        "RSS MiB",
        "CPU s",
        "srv CPU s"
    );
    for m in &cycles {
        let (fl, _) = floor(m);
        let (total, _) = calls_text(m);
        println!(
            "{:>8} {:>6} {:>7.2} {:>7.2} {:>5.2} {:>5} {:>6} {:>5} {:>7.1} {:>5.2} {:>9.2}",
            u(m, "clusters"),
            u(m, "vms"),
            f(m, "wall_s"),
            fl,
            f(m, "wall_s") / fl,
            total,
            budget(m),
            u(m, "ssh_sessions"),
            mib(u(m, "hwm_kib")),
            f(m, "cpu_s"),
            f(m, "server_cpu_s"),
        );
    }
    println!();
    for m in &cycles {
        println!(
            "{:>8} clusters: calls {}; floor {}",
            u(m, "clusters"),
            calls_text(m).1,
            floor(m).1
        );
    }
    println!(
        "RSS MiB: peak (VmHWM) of the checker's process, which holds the client, the cycle and \
         the simulated node lister, not the simulated cloud. CPU s: the checker's CPU time \
         (start-up included). srv CPU s: CPU time of the simulated cloud's process while it \
         served (building the world not included). budget: ceil(VMs/500) + \
         2 x ceil(clusters/500) + ceil(networks/500) + 10."
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

    if let Some(last) = cycles.last() {
        let (fl, _) = floor(last);
        let wf = f(last, "wall_s") / fl;
        let calls = calls_text(last).0;
        let rss = mib(u(last, "hwm_kib"));
        let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
        println!(
            "targets at {} clusters / {} VMs: wall/floor {wf:.2} <= 1.5 {}; API calls {calls} <= \
             {} {}; peak RSS {rss:.1} MiB < 48 {}",
            u(last, "clusters"),
            u(last, "vms"),
            verdict(wf <= 1.5),
            budget(last),
            verdict(calls <= budget(last)),
            verdict(rss < 48.0)
        );
    }

    println!();
    println!(
        "Side by side with the cron-style script (clusters listed once, then per cluster in \
         turn: listVirtualMachines keyword=<name> listall=true of the owner, then the node \
         listing), same world, same latency:"
    );
    println!(
        "{:>12} {:>8} {:>8} {:>9} {:>8} {:>6} {:>7}",
        "ssh", "clusters", "cycle s", "script s", "speedup", "calls", "script"
    );
    let mut per_cluster: HashMap<Ssh, f64> = HashMap::new();
    for ssh in [Ssh::Answers, Ssh::MostRefuse] {
        for (i, &n) in sizes.iter().enumerate() {
            let cycle = if ssh == Ssh::Answers {
                cycles[i].clone()
            } else {
                run_child("cycle", n, ssh, concurrency)
            };
            let (script_s, script_calls, note) = if n <= SCRIPT_MAX_CLUSTERS {
                let s = run_child("script", n, ssh, concurrency);
                per_cluster.insert(ssh, f(&s, "wall_s") / n as f64);
                (f(&s, "wall_s"), calls_text(&s).0.to_string(), "")
            } else {
                let per = per_cluster.get(&ssh).copied().unwrap_or(f64::NAN);
                let estimate = match ssh {
                    Ssh::Answers => per * n as f64,
                    Ssh::MostRefuse | Ssh::Real => extrapolate_refusing(per, n),
                };
                (
                    estimate,
                    format!("~{}", n + 1),
                    " (script extrapolated from its 500-cluster run)",
                )
            };
            println!(
                "{:>12} {:>8} {:>8.2} {:>9.2} {:>7.1}x {:>6} {:>7}{note}",
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

/// One cycle per size without and with the database: wall time, API calls, database
/// queries, where the hidden map rows came from, and peak RSS.
fn with_and_without_database(sizes: &[usize], concurrency: usize) {
    println!(
        "cks-drift cycle benchmark, with and without [database], {}",
        Timestamp::now()
    );
    println!(
        "API as in the main benchmark ({} ms per call); the database: a private MariaDB server \
         on 127.0.0.1 holding the same world. check.concurrency {concurrency}.",
        API_LATENCY.as_millis()
    );
    println!(
        "{:>8} {:>9} {:>7} {:>5} {:>8} {:>8} {:>8} {:>7}  map rows read from",
        "clusters", "database", "wall s", "calls", "VM pages", "DB query", "DB rows", "RSS MiB"
    );
    for &n in sizes {
        for mode in ["cycle", "cycle-db"] {
            let m = run_child(mode, n, Ssh::Answers, concurrency);
            assert_eq!(u(&m, "checked") as usize, n, "every cluster checked: {m}");
            assert_eq!(u(&m, "mismatches"), 0, "a consistent world: {m}");
            let or_dash = |v: &Value| v.as_u64().map_or("-".to_string(), |q| q.to_string());
            println!(
                "{:>8} {:>9} {:>7.2} {:>5} {:>8} {:>8} {:>8} {:>7.1}  {}",
                n,
                if mode == "cycle" { "no" } else { "yes" },
                f(&m, "wall_s"),
                calls_text(&m).0,
                m["calls"]["listVirtualMachines"].as_u64().unwrap_or(0),
                or_dash(&m["db_selects"]),
                or_dash(&m["db_rows"]),
                mib(u(&m, "hwm_kib")),
                m["map_source"].as_str().unwrap_or("?"),
            );
        }
    }
    println!(
        "DB query: SELECTs the database server counted (Com_select) during the cycle: the \
         driver's read of the session's settings at login, the schema check, the map query, \
         the clusters' owners and their VMs named like nodes. DB rows: rows the cycle read \
         (map, owners, VMs). VM pages: listVirtualMachines calls."
    );
}

/// Per size: one cycle with simulated SSH where every control node answers, one with
/// simulated SSH where [`ANSWERING`] answer and the others refuse, and one with real SSH in
/// the same shape (see [`RealSsh`]): wall time, floor, API calls, listings and peak RSS.
fn real_and_simulated_ssh(sizes: &[usize], concurrency: usize) {
    println!(
        "cks-drift cycle benchmark, real and simulated SSH, {}",
        Timestamp::now()
    );
    println!(
        "API as in the main benchmark ({} ms per call, pages of 500). Simulated SSH: a lister \
         that sleeps {} ms (or refuses after {} ms). Real SSH: OpenSSH sshd on 127.99.x.y:{} for \
         {ANSWERING} control nodes, nothing listening on the others' addresses; the remote \
         command is a script printing the node lines. check.concurrency {concurrency}.",
        API_LATENCY.as_millis(),
        NODE_LISTING.as_millis(),
        REFUSED_AFTER.as_millis(),
        CKS_SSH_PORT,
    );
    println!(
        "{:>8} {:>7} {:>18} {:>7} {:>7} {:>5} {:>6} {:>7} {:>7} {:>5}",
        "clusters",
        "VMs",
        "SSH",
        "wall s",
        "floor s",
        "calls",
        "budget",
        "answers",
        "RSS MiB",
        "CPU s"
    );
    for &n in sizes {
        for (ssh, label) in [
            (Ssh::Answers, "simulated, all"),
            (Ssh::MostRefuse, "simulated, 50"),
            (Ssh::Real, "real sshd, 50"),
        ] {
            let m = run_child("cycle", n, ssh, concurrency);
            assert_eq!(
                u(&m, "checked") + u(&m, "partial"),
                n as u64,
                "every cluster: {m}"
            );
            assert_eq!(u(&m, "mismatches"), 0, "a consistent world: {m}");
            if ssh == Ssh::Real {
                assert_eq!(
                    u(&m, "ssh_sessions") as usize,
                    ANSWERING.min(n),
                    "every sshd answered: {m}"
                );
            }
            println!(
                "{:>8} {:>7} {:>18} {:>7.2} {:>7.2} {:>5} {:>6} {:>7} {:>7.1} {:>5.2}",
                n,
                u(&m, "vms"),
                label,
                f(&m, "wall_s"),
                floor(&m).0,
                calls_text(&m).0,
                budget(&m),
                u(&m, "ssh_sessions"),
                mib(u(&m, "hwm_kib")),
                f(&m, "cpu_s"),
            );
        }
    }
    println!(
        "RSS MiB: peak (VmHWM) of the checker's process, read from /proc/self/status at the \
         end of its cycle. floor s: for real SSH, the API's chain alone."
    );
}

/// `--binary`: the `cks-drift` binary itself, `check -c CONFIG` as an operator runs it
/// (notifying, with a state file), against the world with real SSH; its peak RSS is what
/// GNU time reads from `wait4` (`ru_maxrss`) when it exits: the whole process, from start-up
/// to the printed report, not the cycle alone.
fn the_binary(sizes: &[usize], concurrencies: &[usize]) {
    let binary = std::env::var_os("CKS_DRIFT_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_cks-drift").into());
    println!(
        "cks-drift check, the binary {}, real SSH, {}",
        binary.display(),
        Timestamp::now()
    );
    println!(
        "API as in the main benchmark ({} ms per call, pages of 500); OpenSSH sshd on \
         127.99.x.y:{CKS_SSH_PORT} for {ANSWERING} control nodes, nothing listening on the \
         others' addresses.",
        API_LATENCY.as_millis(),
    );
    println!(
        "{:>8} {:>7} {:>11} {:>7} {:>7} {:>4}",
        "clusters", "VMs", "concurrency", "wall s", "RSS MiB", "exit"
    );
    for &n in sizes {
        let dir = tempfile::tempdir().expect("temporary directory");
        let nodes = dir.path().join("nodes.json");
        let server = ServerChild::start(n, Ssh::Real, &nodes, "-");
        let world = server.world.clone();
        let view: Value =
            serde_json::from_str(&std::fs::read_to_string(&nodes).expect("the SSH settings"))
                .expect("SSH settings JSON");
        let real = &view["real"];
        for &concurrency in concurrencies {
            let run = dir.path().join(format!("run-{concurrency}"));
            std::fs::create_dir(&run).expect("run directory");
            let config = run.join("cks-drift.toml");
            let text = format!(
                r#"[cloudstack]
url = "{url}"
api_key = "{API_KEY}"
secret_key = "{SECRET_KEY}"
timeout = "60s"

[ssh]
private_key = "{key}"
user = "{BENCH_USER}"
known_hosts = "{known_hosts}"
host_key_policy = "strict"
command = "{command}"

[check]
concurrency = {concurrency}

[state]
path = "{state}"

[notify]
event_log = "{events}"

[http]
listen = ""
"#,
                url = world["url"].as_str().expect("URL"),
                key = real["private_key"].as_str().expect("key path"),
                known_hosts = real["known_hosts"].as_str().expect("known_hosts path"),
                command = real["command"].as_str().expect("command path"),
                state = run.join("state.json").display(),
                events = run.join("events.jsonl").display(),
            );
            // The keys are inline: the file is the owner's alone.
            std::fs::write(&config, text).expect("write the config");
            std::fs::set_permissions(&config, std::os::unix::fs::PermissionsExt::from_mode(0o600))
                .expect("restrict the config");
            let figures = run.join("time.txt");
            let status = as_the_service_runs(&mut Command::new("/usr/bin/time"))
                .arg("-o")
                .arg(&figures)
                .args(["-f", "%M %e"])
                .arg(&binary)
                .args(["check", "-c"])
                .arg(&config)
                .stdout(std::fs::File::create(run.join("report.txt")).expect("report file"))
                .stderr(std::fs::File::create(run.join("log.txt")).expect("log file"))
                .status()
                .expect("run cks-drift under /usr/bin/time (Debian package time)");
            let text = std::fs::read_to_string(&figures).expect("GNU time's figures");
            // GNU time writes "Command exited with non-zero status N" first when it did.
            let last = text.lines().last().unwrap_or_default();
            let mut fields = last.split_whitespace();
            let kib: u64 = fields
                .next()
                .and_then(|v| v.parse().ok())
                .expect("maximum RSS");
            let wall: f64 = fields
                .next()
                .and_then(|v| v.parse().ok())
                .expect("elapsed time");
            let code = status.code().unwrap_or(-1);
            assert!(
                (0..=1).contains(&code) || code == 3,
                "cks-drift check exited {code}: see {}",
                run.join("log.txt").display()
            );
            println!(
                "{:>8} {:>7} {:>11} {:>7.2} {:>7.1} {:>4}",
                n,
                world["vms"],
                concurrency,
                wall,
                mib(kib),
                code
            );
        }
        server.stop();
    }
    println!(
        "RSS MiB: the binary's peak RSS (GNU time's %M, from wait4). exit: cks-drift's exit \
         code (3: some clusters could only be compared in part, here those whose control node \
         refuses SSH)."
    );
}

/// One call per page of 500 of each listing a cycle needs, and 10 for probes and retries:
/// the VMs (the only way to find VMs named like nodes that no map lists), the clusters twice
/// (their maps, then the read after the node listings that keeps an operation run meanwhile
/// from passing for drift) and the networks (each single-control-node cluster's SSH port).
/// An earlier budget counted the clusters once and no networks, which a cloud of 10,000
/// isolated networks went 30 calls over: every one of those pages is needed.
fn budget(m: &Value) -> u64 {
    u(m, "vms").div_ceil(500)
        + 2 * u(m, "clusters").div_ceil(500)
        + u(m, "networks").div_ceil(500)
        + 10
}

/// The script's time for `n` clusters in the refusing world, from its time per cluster at
/// [`SCRIPT_MAX_CLUSTERS`] clusters: [`ANSWERING`] listings that answer, the rest refused.
fn extrapolate_refusing(per_cluster_at_max: f64, n: usize) -> f64 {
    let measured = per_cluster_at_max * SCRIPT_MAX_CLUSTERS as f64;
    let answered = ANSWERING as f64 * NODE_LISTING.as_secs_f64();
    let per_refusing = (measured - answered) / SCRIPT_MAX_CLUSTERS as f64;
    answered + per_refusing * n as f64
}
