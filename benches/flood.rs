//! One hostile control node among ordinary ones: it lists N fake nodes (default 100,000) for
//! a cluster of 3 VMs. Prints the cycle's wall time, the process's peak memory and what became
//! of the clusters (`cargo bench --bench flood [-- N]`). The cloud is the simulated CloudStack
//! in memory (no latency), node listings are simulated (no sshd): what is measured is what the
//! checker does with the flood.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cks_drift::cks::endpoint_host;
use cks_drift::cloudstack::client::{Client, ClientOptions};
use cks_drift::cycle::{ClusterStatus, CycleSettings, run_cycle};
use cks_drift::demo::SimTransport;
use cks_drift::diff::Policy;
use cks_drift::remote::{NodeListError, NodeListFuture, NodeLister, SshTarget};
use cks_drift::snapshot::Node;
use cks_drift::time::Timestamp;
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
        concurrency: 8,
        default_user: "cloud".into(),
        node_deadline: Duration::from_secs(150),
        database: None,
    };
    let started = Instant::now();
    let report = runtime
        .block_on(run_cycle(
            &api,
            Arc::new(Listed(nodes)),
            &settings,
            &HashMap::new(),
            now,
        ))
        .unwrap();
    let wall = started.elapsed();
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
