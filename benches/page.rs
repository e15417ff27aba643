//! The status page's cost: one real cycle over a simulated cloud of 2,000 clusters with 500
//! open findings (one VM unmapped in each of 500 clusters), stepped into a state, then the
//! view the daemon keeps built from it and the page, a cluster's page and the API rendered
//! from that view, as `GET /`, `/clusters/<id>` and `/api/v1/findings` render them. Prints
//! the time and the bytes of each. Rendering reads the view alone: no call goes to CloudStack
//! (counted). `cargo bench --bench page [-- CLUSTERS FINDINGS]`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cks_drift::base::time::Timestamp;
use cks_drift::cks::endpoint_host;
use cks_drift::cloudstack::client::{Client, ClientOptions};
use cks_drift::daemon::status::{Standby, View, api, page};
use cks_drift::diff::Policy;
use cks_drift::engine::Tick;
use cks_drift::engine::cycle::{CycleSettings, run_cycle};
use cks_drift::front::demo::SimTransport;
use cks_drift::remote::{NodeListError, NodeListFuture, NodeLister, SshTarget};
use cks_drift::snapshot::Node;
use cks_drift::state::State;
use cks_drift::state::step::{StepSettings, step};
use cks_drift_sim::{Sim, SimTime, World};

const WORLD_NOW: i64 = 1_750_000_000;

/// One answer rendered from the view.
type Render<'a> = Box<dyn FnMut() -> String + 'a>;

/// Each cluster's nodes (its mapped VMs), by the host of its endpoint.
struct Nodes(HashMap<String, Vec<Node>>);

impl NodeLister for Nodes {
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

/// The process's resident memory (`VmRSS`), KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn timed<T>(runs: u32, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut out = f();
    let started = Instant::now();
    for _ in 0..runs {
        out = f();
    }
    (started.elapsed() / runs, out)
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let clusters = args.first().copied().unwrap_or(2000);
    let drifting = args.get(1).copied().unwrap_or(500).min(clusters);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();

    let mut world = World::new(SimTime::from_unix(WORLD_NOW));
    let root = world.root_domain_id().to_string();
    let mut ids = Vec::new();
    for n in 0..clusters {
        let owner = world.add_account(&format!("tenant-{}", n % 50), &root);
        ids.push(world.add_cluster(&format!("c{n}"), owner, 1, 2, 0));
    }
    let mut nodes = HashMap::new();
    for id in &ids {
        let c = world.cluster(id).unwrap();
        let listed = c
            .map
            .iter()
            .map(|vm| Node::named(world.vm(vm).unwrap().name.to_lowercase()))
            .collect();
        nodes.insert(endpoint_host(Some(&c.endpoint)).unwrap(), listed);
    }
    for id in ids.iter().take(drifting) {
        let worker = world.cluster(id).unwrap().map.last().unwrap().clone();
        world.remove_map_row(id, &worker);
    }
    let sim = Arc::new(Sim::new(world));
    let api = Client::with_transport(
        Arc::new(SimTransport(sim.clone())),
        ClientOptions::default(),
    );
    let settings = CycleSettings {
        policy: Policy::default(),
        concurrency: 32,
        default_user: "cloud".into(),
        node_deadline: Duration::from_secs(600),
        database: None,
    };
    let now = Timestamp::from_unix(WORLD_NOW);
    let mut report = runtime
        .block_on(run_cycle(
            &api,
            Arc::new(Nodes(nodes)),
            &settings,
            &HashMap::new(),
            now,
        ))
        .expect("the cycle runs");
    let mut state = State::default();
    let observed = cks_drift::engine::observe(&mut report, &[], now);
    let step_settings = StepSettings {
        alerts: true,
        annotations: true,
        alert_cap: 5,
        owner_alert_cap: 100,
        blind_after: Duration::from_secs(1800),
        resolve_after: Duration::from_secs(900),
        owner_alerts_per_hour: 20,
        alert_types: 1000,
        storm: cks_drift::config::StormThreshold::Off,
        alertmanager: false,
    };
    let stepped = step(&mut state, &observed, &step_settings, now);
    for c in &mut report.clusters {
        c.mismatches = stepped.open.get(&c.cluster.id).cloned().unwrap_or_default();
    }
    let tick = Tick {
        report: Ok(report),
        new: Some(stepped.new),
        delivered: Default::default(),
        pending: state.outbox.len(),
        state_error: None,
        blind: Vec::new(),
        storm: None,
        ignored: Default::default(),
        standings: cks_drift::state::standing::standings(&state),
        state_write_attempted: false,
    };
    let calls = sim.calls().len();

    // What one view costs held: ten held at once, from the process's resident memory.
    let before = rss_kib();
    let held: Vec<View> = (0..10)
        .map(|_| View::of(&tick, &[]).expect("a view"))
        .collect();
    let per_view_kib = rss_kib().saturating_sub(before) / held.len() as u64;
    drop(held);
    let (build, view) = timed(10, || View::of(&tick, &[]).expect("a view"));
    let who = Standby {
        standby: false,
        lock_node: None,
        holder: None,
        checking_enabled: true,
    };
    let interval = Duration::from_secs(300);
    let drifted = &ids[0];
    println!(
        "cks-drift status page: {} clusters, {} open findings (one cycle over the simulated cloud, \
         stepped into a state)",
        view.clusters.len(),
        view.findings.len()
    );
    println!("{:<44} {:>10} {:>10}", "", "time", "bytes");
    println!(
        "{:<44} {:>8.2}ms {:>10}",
        "view kept after the tick (its RSS)",
        build.as_secs_f64() * 1e3,
        format!("{per_view_kib} KiB")
    );
    let rows: [(&str, Render); 5] = [
        (
            "GET / (100 findings a page)",
            Box::new(|| page::status(Some(&view), &who, interval, 1, 100)),
        ),
        (
            "GET /?per_page=500",
            Box::new(|| page::status(Some(&view), &who, interval, 1, 500)),
        ),
        (
            "GET /clusters/<id> (with a finding)",
            Box::new(|| page::cluster(&view, &who, drifted, interval).unwrap()),
        ),
        (
            "GET /api/v1/findings?per_page=500",
            Box::new(|| {
                api::findings(Some(&view), Some("per_page=500"))
                    .unwrap()
                    .to_string()
            }),
        ),
        (
            "GET /api/v1/clusters?per_page=500",
            Box::new(|| {
                api::clusters(Some(&view), Some("per_page=500"))
                    .unwrap()
                    .to_string()
            }),
        ),
    ];
    for (what, mut render) in rows {
        let (took, body) = timed(20, &mut render);
        println!(
            "{what:<44} {:>8.2}ms {:>10}",
            took.as_secs_f64() * 1e3,
            body.len()
        );
    }
    println!(
        "calls to CloudStack while rendering: {}",
        sim.calls().len() - calls
    );
}
