//! One hostile control node among ordinary ones: it lists N fake nodes (default 100,000) for
//! a cluster of 3 VMs. Prints the cycle's wall time, the process's peak memory and what became
//! of the clusters (`cargo bench --bench flood [-- N]`). The cloud is the simulated CloudStack
//! in memory (no latency), node listings are simulated (no sshd): what is measured is what the
//! checker does with the flood.
//!
//! `cargo bench --bench flood -- --ssh [N]`: N clusters (default 16) whose control nodes all
//! print 4 MiB of node lines at once, over real OpenSSH (one sshd on 127.0.0.1, started here
//! with keys made here), N listings in flight: the peak memory of reading them.

use std::collections::HashMap;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cks_drift::base::time::Timestamp;
use cks_drift::cks::endpoint_host;
use cks_drift::cloudstack::client::{Client, ClientOptions};
use cks_drift::config::{HostKeyPolicy, SshSettings};
use cks_drift::diff::Policy;
use cks_drift::engine::cycle::{ClusterStatus, CycleSettings, run_cycle};
use cks_drift::front::demo::SimTransport;
use cks_drift::remote::ssh::SshNodeLister;
use cks_drift::remote::{NodeListError, NodeListFuture, NodeLister, SshTarget};
use cks_drift::snapshot::Node;
use cks_drift_sim::{Sim, SimTime, World};

struct Listed(HashMap<String, Vec<Node>>);

impl NodeLister for Listed {
    fn list_nodes<'a>(&'a self, target: &'a SshTarget) -> NodeListFuture<'a> {
        let nodes = self.0.get(&target.host).cloned();
        Box::pin(async move {
            nodes.ok_or_else(|| NodeListError::Connect {
                host: target.host.clone(),
                port: target.port,
                source: std::io::ErrorKind::ConnectionRefused.into(),
            })
        })
    }
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

fn main() {
    if std::env::args().any(|a| a == "--ssh") {
        let clusters = std::env::args()
            .skip(1)
            .find_map(|a| a.parse().ok())
            .unwrap_or(16);
        return over_ssh(clusters);
    }
    let fake: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(100_000);
    let mut w = World::new(SimTime::from_unix(1_750_000_000));
    let owner = w.admin();
    let ids: Vec<String> = (0..100)
        .map(|i| w.add_cluster(&format!("c{i:03}"), owner.clone(), 1, 2, 0))
        .collect();
    w.advance(Duration::from_secs(3600));
    let now = Timestamp::from(w.now);
    let mut nodes = HashMap::new();
    for (k, id) in ids.iter().enumerate() {
        let c = w.cluster(id).unwrap();
        let mut names: Vec<Node> = c
            .map
            .iter()
            .map(|v| {
                let vm = w.vm(v).unwrap();
                Node {
                    name: vm.name.to_lowercase(),
                    system_uuid: Some(vm.system_uuid()),
                    provider_id: None,
                    ready: None,
                }
            })
            .collect();
        if k == 0 {
            names
                .extend((0..fake).map(|i| Node::named(format!("fake-node-{i:07}.tenant.example"))));
        }
        nodes.insert(endpoint_host(Some(&c.endpoint)).unwrap(), names);
    }
    let before = peak_rss_mib();
    let (report, wall) = one_cycle(w, Arc::new(Listed(nodes)), 8, "cloud", now);
    let checked = report
        .clusters
        .iter()
        .filter(|c| c.status == ClusterStatus::Checked)
        .count();
    let flooded = &report.clusters[0];
    println!("fake node lines on one cluster: {fake}");
    println!("cycle wall: {:.3} s", wall.as_secs_f64());
    println!(
        "peak RSS: {:.1} MiB (the world and the node lists built before the cycle: {before:.1} MiB)",
        peak_rss_mib()
    );
    println!(
        "clusters checked: {checked} of {}; findings: {}",
        report.clusters.len(),
        report
            .clusters
            .iter()
            .map(|c| c.mismatches.len())
            .sum::<usize>()
    );
    println!(
        "the flooded cluster: {} ({})",
        flooded.status.as_str(),
        flooded.reason.as_deref().unwrap_or("")
    );
}

/// Lists through the real SSH lister, on the port of the one sshd of the benchmark.
struct OnPort(SshNodeLister, u16);

impl NodeLister for OnPort {
    fn list_nodes<'a>(&'a self, target: &'a SshTarget) -> NodeListFuture<'a> {
        Box::pin(async move {
            let target = SshTarget {
                host: "127.0.0.1".into(),
                port: self.1,
                ..target.clone()
            };
            self.0.list_nodes(&target).await
        })
    }
}

/// `--ssh`: every control node prints 4 MiB of node lines at once.
fn over_ssh(clusters: usize) {
    let dir = tempfile::tempdir().expect("temp dir");
    let base = dir.path();
    let keygen = |name: &str, kind: &[&str]| {
        let ok = Command::new("ssh-keygen")
            .args(["-q", "-N", "", "-f"])
            .arg(base.join(name))
            .args(kind)
            .status()
            .expect("ssh-keygen")
            .success();
        assert!(ok, "ssh-keygen {name}");
    };
    keygen("host_ed25519", &["-t", "ed25519"]);
    keygen("client", &["-t", "ed25519"]);
    std::fs::copy(base.join("client.pub"), base.join("authorized_keys")).unwrap();
    // 4 MiB of node lines, as a control node that lists fake nodes would print them.
    let lines: String = (0..)
        .map(|i| format!("node/fake-node-{i:07}.tenant.example\n"))
        .take_while({
            let mut size = 0;
            move |l: &String| {
                size += l.len();
                size <= 4 * 1024 * 1024
            }
        })
        .collect();
    std::fs::write(base.join("nodes.txt"), lines).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = format!(
        "Port {port}\nListenAddress 127.0.0.1\nHostKey {b}/host_ed25519\nPidFile {b}/sshd.pid\n\
         UsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
         PermitRootLogin prohibit-password\nStrictModes no\nAuthorizedKeysFile {b}/authorized_keys\n\
         MaxStartups 100\nMaxSessions 100\n",
        b = base.display()
    );
    std::fs::write(base.join("sshd_config"), config).unwrap();
    std::fs::create_dir_all("/run/sshd").unwrap();
    let mut sshd = Command::new("/usr/sbin/sshd")
        .args(["-D", "-e", "-f"])
        .arg(base.join("sshd_config"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start sshd");
    let up = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < up, "sshd did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let settings = SshSettings {
        private_key: base.join("client"),
        user: "root".into(),
        known_hosts: base.join("known_hosts"),
        host_key_policy: HostKeyPolicy::AcceptNew,
        connect_timeout: Duration::from_secs(10),
        command_timeout: Duration::from_secs(60),
        command: format!("cat {}", base.join("nodes.txt").display()),
    };
    let lister = OnPort(SshNodeLister::new(&settings).expect("client key"), port);

    let mut w = World::new(SimTime::from_unix(1_750_000_000));
    let owner = w.admin();
    for i in 0..clusters {
        let id = w.add_cluster(&format!("c{i:03}"), owner.clone(), 1, 2, 0);
        // The benchmark's sshd lets root in (with the key made here).
        let first = w.cluster(&id).unwrap().map[0].clone();
        w.vm_mut(&first)
            .details
            .insert("controlNodeLoginUser".into(), "root".into());
    }
    w.advance(Duration::from_secs(3600));
    let now = Timestamp::from(w.now);
    let before = peak_rss_mib();
    let (report, wall) = one_cycle(w, Arc::new(lister), clusters, "root", now);
    let _ = sshd.kill();
    let _ = sshd.wait();
    println!("control nodes each printing 4 MiB of node lines, all at once: {clusters}");
    println!("cycle wall: {:.3} s", wall.as_secs_f64());
    println!(
        "peak RSS: {:.1} MiB (before the cycle: {before:.1} MiB)",
        peak_rss_mib()
    );
    let refused = report
        .clusters
        .iter()
        .filter(|c| c.node_failure == Some("output"))
        .count();
    println!(
        "clusters whose list was refused as too long: {refused} of {}; first reason: {}",
        report.clusters.len(),
        report.clusters[0].reason.as_deref().unwrap_or("")
    );
}

/// One cycle over the world `w` with `lister`, `concurrency` listings at a time: its report and
/// wall time.
fn one_cycle(
    w: World,
    lister: Arc<dyn NodeLister>,
    concurrency: usize,
    default_user: &str,
    now: Timestamp,
) -> (cks_drift::engine::cycle::CycleReport, Duration) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let api = Client::with_transport(
        Arc::new(SimTransport(Arc::new(Sim::new(w)))),
        ClientOptions::default(),
    );
    let settings = CycleSettings {
        policy: Policy::default(),
        concurrency,
        default_user: default_user.into(),
        node_deadline: Duration::from_secs(150),
        database: None,
    };
    let started = Instant::now();
    let report = runtime
        .block_on(run_cycle(&api, lister, &settings, &HashMap::new(), now))
        .unwrap();
    (report, started.elapsed())
}
