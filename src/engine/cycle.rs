//! One check cycle: fetch the inventory (`inventory`), assemble each cluster's snapshot from
//! it (`assemble`, pure) and compare the three views (`diff`, pure), into a `CycleReport`.
//!
//! Reading is all a cycle does: it never changes anything in CloudStack. Dedupe and
//! notifications act on its report afterwards.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tracing::{Instrument, debug, info, info_span};

use crate::base::time::Timestamp;
use crate::cloudstack::client::Client;
use crate::cloudstack::server_check::ServerCheck;
use crate::diff::{Mismatch, Policy, diff};
use crate::inventory::assemble::{Verdict, assemble};
use crate::remote::NodeLister;
use crate::snapshot::{ClusterIdentity, PreviousMap};

pub use crate::inventory::assemble::SkipKind;
pub use crate::inventory::{CycleError, MapSource};

/// What a cycle needs besides its sources.
#[derive(Debug, Clone)]
pub struct CycleSettings {
    pub policy: Policy,
    /// Node listings in flight at once.
    pub concurrency: usize,
    /// Login user when the first mapped VM has no `controlNodeLoginUser` detail.
    pub default_user: String,
    /// The node listings of one cycle end by then, finished or not: slow control nodes
    /// cannot stretch every cycle. Listings that failed last cycle go last.
    pub node_deadline: Duration,
    /// The CloudStack database, for the map rows the API hides; `None` probes them through
    /// the API.
    pub database: Option<crate::database::Database>,
}

/// How far a cluster was checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClusterStatus {
    /// All three views compared.
    Checked,
    /// The nodes could not be listed: only the map and the VMs were compared.
    Partial,
    /// Not compared (state, type, changed during the check, or an API failure).
    Skipped,
}

impl ClusterStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ClusterStatus::Checked => "checked",
            ClusterStatus::Partial => "partial",
            ClusterStatus::Skipped => "skipped",
        }
    }
}

/// One cluster's result.
#[derive(Debug, Clone)]
pub struct ClusterOutcome {
    /// Who it is, as assembled.
    pub cluster: ClusterIdentity,
    pub status: ClusterStatus,
    pub skip: Option<SkipKind>,
    /// Why it was skipped or only partly checked.
    pub reason: Option<String>,
    /// Short label of the node-listing failure, for metrics (`connect`, `auth`, ...).
    pub node_failure: Option<&'static str>,
    pub mismatches: Vec<Mismatch>,
    /// Open findings an `[[ignore]]` rule matches, by key: the rule's reason.
    pub ignored: std::collections::BTreeMap<crate::diff::FindingKey, String>,
    /// The mapped VM ids (and names) as the API showed them, for the next cycle's probe.
    pub mapped: Vec<(String, String)>,
    /// `controlnodes + size + etcdnodes`.
    pub expected_vms: u32,
    /// The mapped VMs to remember by their database id, when the database gave its hidden
    /// map rows (`PreviousMap::db_ids`).
    pub db_ids: Option<std::collections::BTreeMap<u64, crate::snapshot::RememberedVm>>,
    /// Of `mismatches`, those the management server's own check reports too where it runs
    /// (`diff::server_check`); once the engine has read the server's setting, those whose
    /// CloudStack alert and annotation are left to it (none where it does not run, or with
    /// `notify.defer_to_server_check = false`).
    pub left_to_server: std::collections::BTreeSet<crate::diff::FindingKey>,
    /// Of a cluster compared with findings, or only in part: its three views as this cycle
    /// saw them, for the status page (bounded, see [`Views`]).
    pub views: Option<Box<Views>>,
}

/// A cluster's three views as a cycle saw them: the map's VMs, the owner's other VMs named as
/// its nodes, and its Kubernetes nodes (`None`: not listed). At most [`VIEW_ROWS`] rows each,
/// with the count of those left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Views {
    pub mapped: Vec<VmCell>,
    pub named: Vec<VmCell>,
    pub nodes: Option<Vec<String>>,
    /// Rows left out of each view past [`VIEW_ROWS`].
    pub left_out: usize,
}

/// A VM in a view: id, host name, state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmCell {
    pub id: String,
    pub name: String,
    pub state: String,
}

/// The rows a view keeps: a cluster of CKS has a handful of VMs; a tenant's flood of fake
/// nodes is not kept past this.
pub const VIEW_ROWS: usize = 200;

impl Views {
    fn of(snapshot: &crate::snapshot::ClusterSnapshot) -> Views {
        let mut left_out = 0;
        let mut cells = |vms: &mut dyn Iterator<Item = &crate::snapshot::Vm>| -> Vec<VmCell> {
            let all: Vec<VmCell> = vms
                .map(|vm| VmCell {
                    id: vm.id.clone(),
                    name: vm.name.clone(),
                    state: vm.state.as_str().to_string(),
                })
                .collect();
            left_out += all.len().saturating_sub(VIEW_ROWS);
            all.into_iter().take(VIEW_ROWS).collect()
        };
        let mapped_ids: std::collections::HashSet<&str> =
            snapshot.mapped.iter().map(|vm| vm.id.as_str()).collect();
        let mapped = cells(&mut snapshot.mapped.iter());
        let named = cells(
            &mut snapshot
                .named
                .iter()
                .filter(|vm| !mapped_ids.contains(vm.id.as_str())),
        );
        let nodes = match &snapshot.nodes {
            crate::snapshot::NodeView::Listed(nodes) => {
                left_out += nodes.len().saturating_sub(VIEW_ROWS);
                Some(
                    nodes
                        .iter()
                        .take(VIEW_ROWS)
                        .map(|n| n.name.clone())
                        .collect(),
                )
            }
            crate::snapshot::NodeView::Unknown { .. } => None,
        };
        Views {
            mapped,
            named,
            nodes,
            left_out,
        }
    }
}

/// What one cycle saw.
#[derive(Debug, Clone)]
pub struct CycleReport {
    pub started: Timestamp,
    pub duration: Duration,
    pub clusters: Vec<ClusterOutcome>,
    /// Where the map rows the API hides came from.
    pub map_source: MapSource,
    /// The management server's own VM map check, as last read (`None`: never read).
    pub server_check: Option<ServerCheck>,
}

/// Runs one cycle. `previous` is what earlier cycles saw of each cluster's map (empty on the
/// first cycle); it lets the cycle probe map rows the API stopped showing.
pub async fn run_cycle(
    api: &Client,
    lister: Arc<dyn NodeLister>,
    settings: &CycleSettings,
    previous: &HashMap<String, PreviousMap>,
    now: Timestamp,
) -> Result<CycleReport, CycleError> {
    let started_at = Instant::now();
    let span = info_span!("cycle", started = %now);
    async move {
        let listing = crate::inventory::Listing {
            concurrency: settings.concurrency,
            default_user: &settings.default_user,
            deadline: settings.node_deadline,
            only: None,
        };
        let inventory =
            crate::inventory::fetch(api, lister, listing, previous, settings.database.as_ref())
                .await?;
        let map_source = inventory.map_source.clone();
        let clusters = assemble(inventory)
            .map(|a| outcome(a, &settings.policy, now))
            .collect();
        let report = CycleReport {
            started: now,
            duration: started_at.elapsed(),
            clusters,
            map_source,
            server_check: None,
        };
        info!(
            clusters = report.clusters.len(),
            mismatches = report
                .clusters
                .iter()
                .map(|c| c.mismatches.len())
                .sum::<usize>(),
            seconds = report.duration.as_secs_f64(),
            "cycle done"
        );
        Ok(report)
    }
    .instrument(span)
    .await
}

/// One assembled cluster, compared.
fn outcome(
    a: crate::inventory::assemble::Assembled,
    policy: &Policy,
    now: Timestamp,
) -> ClusterOutcome {
    let mut outcome = ClusterOutcome {
        cluster: a.cluster,
        status: ClusterStatus::Skipped,
        skip: None,
        reason: None,
        node_failure: None,
        mismatches: vec![],
        ignored: Default::default(),
        mapped: a.mapped,
        expected_vms: a.expected_vms,
        db_ids: a.db_ids,
        left_to_server: Default::default(),
        views: None,
    };
    match a.verdict {
        Verdict::Skipped { kind, reason } => {
            outcome.skip = Some(kind);
            outcome.reason = Some(reason);
        }
        Verdict::Compare { snapshot, partial } => {
            match partial {
                Some((reason, failure)) => {
                    outcome.status = ClusterStatus::Partial;
                    outcome.reason = Some(reason);
                    outcome.node_failure = failure;
                }
                None => outcome.status = ClusterStatus::Checked,
            }
            outcome.mismatches = diff(&snapshot, policy, now);
            outcome.left_to_server =
                crate::diff::server_check::reported_by_name(&snapshot, &outcome.mismatches);
            if !outcome.mismatches.is_empty() || outcome.status == ClusterStatus::Partial {
                outcome.views = Some(Box::new(Views::of(&snapshot)));
            }
            for m in &outcome.mismatches {
                let cluster = &outcome.cluster.name;
                debug!(cluster = %cluster, kind = m.kind.as_str(), key = %m.key(), "mismatch");
            }
        }
    }
    outcome
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::cks::endpoint_host;
    use crate::remote::SshTarget;

    use crate::cloudstack::client::ClientOptions;
    use crate::diff::MismatchKind;
    use crate::front::demo::SimTransport;
    use crate::remote::{NodeListError, NodeListFuture};
    use crate::snapshot::Node;
    use cks_drift_sim::{NodeRole as SimRole, Sim, SimTime, World};

    /// Nodes per control-node host; any other host refuses the connection.
    struct FixedNodes(HashMap<String, Vec<Node>>);

    impl NodeLister for FixedNodes {
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

    fn settings() -> CycleSettings {
        CycleSettings {
            policy: Policy::default(),
            concurrency: 2,
            default_user: "cloud".into(),
            node_deadline: std::time::Duration::from_secs(600),
            database: None,
        }
    }

    /// The nodes of a cluster's mapped VMs (their names and system UUIDs), keyed by its
    /// endpoint host.
    fn nodes_of(w: &World, cluster_id: &str) -> (String, Vec<Node>) {
        let c = w.cluster(cluster_id).unwrap();
        let names = c
            .map
            .iter()
            .map(|id| {
                let vm = w.vm(id).unwrap();
                Node {
                    name: vm.name.to_lowercase(),
                    system_uuid: Some(vm.system_uuid()),
                    provider_id: None,
                    ready: None,
                }
            })
            .collect();
        (endpoint_host(Some(&c.endpoint)).unwrap(), names)
    }

    fn calls(api: &Client) -> Vec<(String, u64)> {
        api.stats()
            .into_iter()
            .map(|(command, _, n)| (command, n))
            .collect()
    }

    /// A cluster's name, status and findings (kind, VM id or node name).
    type Found<'a> = (&'a str, ClusterStatus, Vec<(MismatchKind, Option<&'a str>)>);

    #[tokio::test]
    async fn a_cycle_finds_drift_among_many_unrelated_vms() {
        let mut w = World::new(SimTime::from_unix(1_750_000_000));
        let domain = w.add_domain("eng");
        let alice = w.add_account("alice", &domain);
        let one = w.add_cluster("one", alice.clone(), 1, 2, 0);
        let two = w.add_cluster("two", alice.clone(), 1, 1, 0);
        let stray = w.add_node_vm(&one, SimRole::Worker, false);
        for i in 0..1200 {
            w.add_vm(&format!("web{i}"), alice.clone(), None);
        }
        w.advance(Duration::from_secs(3600));
        let now = Timestamp::from(w.now);
        let (host_one, nodes_one) = nodes_of(&w, &one);
        let (host_two, mut nodes_two) = nodes_of(&w, &two);
        nodes_two.push(Node::named("ghost"));
        let lister = Arc::new(FixedNodes(HashMap::from([
            (host_one, nodes_one),
            (host_two, nodes_two),
        ])));
        let sim = Arc::new(Sim::new(w));
        let api = Client::with_transport(Arc::new(SimTransport(sim)), ClientOptions::default());

        let report = run_cycle(&api, lister, &settings(), &HashMap::new(), now)
            .await
            .unwrap();

        let found: Vec<Found> = report
            .clusters
            .iter()
            .map(|c| {
                let kinds = c
                    .mismatches
                    .iter()
                    .map(|m| (m.kind, m.vm().map(|v| v.id.as_str()).or(m.node())))
                    .collect();
                (c.cluster.name.as_str(), c.status, kinds)
            })
            .collect();
        assert_eq!(
            found,
            [
                (
                    "one",
                    ClusterStatus::Checked,
                    vec![(MismatchKind::UnmappedVm, Some(stray.as_str()))]
                ),
                (
                    "two",
                    ClusterStatus::Checked,
                    vec![(MismatchKind::NodeWithoutVm, Some("ghost"))]
                ),
            ]
        );
        // 1206 VMs: three pages; the clusters twice, the release once and, on 4.22, the
        // networks once.
        assert_eq!(
            calls(&api),
            [
                ("listCapabilities".to_string(), 1),
                ("listKubernetesClusters".to_string(), 2),
                ("listNetworks".to_string(), 1),
                ("listVirtualMachines".to_string(), 3),
            ]
        );
    }

    #[tokio::test]
    async fn a_vm_mapped_last_cycle_is_kept_whatever_its_name() {
        let mut w = World::new(SimTime::from_unix(1_750_000_000));
        let root = w.root_domain_id().to_string();
        let alice = w.add_account("alice", &root);
        let one = w.add_cluster("one", alice.clone(), 1, 2, 0);
        let (host, nodes) = nodes_of(&w, &one);
        let mut previous_vms = BTreeMap::new();
        for id in &w.cluster(&one).unwrap().map {
            previous_vms.insert(id.clone(), w.vm(id).unwrap().name.clone());
        }
        // A worker renamed by hand and taken out of the map: it no longer looks like a node,
        // but the listing shows it still exists, so no probe by id is needed.
        let renamed = w.cluster(&one).unwrap().map[2].clone();
        w.vm_mut(&renamed).name = "renamed-by-hand".into();
        w.remove_map_row(&one, &renamed);
        w.advance(Duration::from_secs(3600));
        let now = Timestamp::from(w.now);
        let lister = Arc::new(FixedNodes(HashMap::from([(host, nodes)])));
        let sim = Arc::new(Sim::new(w));
        let api = Client::with_transport(Arc::new(SimTransport(sim)), ClientOptions::default());
        let previous = HashMap::from([(
            one.clone(),
            PreviousMap {
                vms: previous_vms,
                expected_vms: 3,
                vanished: BTreeMap::new(),
                db_ids: BTreeMap::new(),
                nodes_failed: false,
                listed_at: None,
            },
        )]);

        let report = run_cycle(&api, lister, &settings(), &previous, now)
            .await
            .unwrap();

        assert_eq!(report.clusters[0].status, ClusterStatus::Checked);
        let vanished: Vec<&Mismatch> = report.clusters[0]
            .mismatches
            .iter()
            .filter(|m| m.kind == MismatchKind::MappedVm)
            .collect();
        assert_eq!(vanished, Vec::<&Mismatch>::new());
        assert_eq!(
            calls(&api),
            [
                ("listCapabilities".to_string(), 1),
                ("listKubernetesClusters".to_string(), 2),
                ("listNetworks".to_string(), 1),
                ("listVirtualMachines".to_string(), 1),
            ]
        );
    }

    /// Lists like `FixedNodes`, but never answers for the hosts in `stalls`.
    struct Stalling {
        nodes: FixedNodes,
        stalls: Vec<String>,
        /// Hosts in the order their listings started.
        started: std::sync::Mutex<Vec<String>>,
    }

    impl NodeLister for Stalling {
        fn list_nodes<'a>(&'a self, target: &'a SshTarget) -> NodeListFuture<'a> {
            self.started.lock().unwrap().push(target.host.clone());
            if self.stalls.contains(&target.host) {
                return Box::pin(std::future::pending());
            }
            self.nodes.list_nodes(target)
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalling_control_node_ends_at_the_deadline_and_goes_last_next_time() {
        let mut w = World::new(SimTime::from_unix(1_750_000_000));
        let root = w.root_domain_id().to_string();
        let alice = w.add_account("alice", &root);
        let slow = w.add_cluster("slow", alice.clone(), 1, 1, 0);
        let fine = w.add_cluster("fine", alice, 1, 1, 0);
        w.advance(Duration::from_secs(3600));
        let now = Timestamp::from(w.now);
        let (slow_host, slow_nodes) = nodes_of(&w, &slow);
        let (fine_host, fine_nodes) = nodes_of(&w, &fine);
        let lister = Arc::new(Stalling {
            nodes: FixedNodes(HashMap::from([
                (slow_host.clone(), slow_nodes),
                (fine_host.clone(), fine_nodes),
            ])),
            stalls: vec![slow_host.clone()],
            started: Default::default(),
        });
        let api = Client::with_transport(
            Arc::new(SimTransport(Arc::new(Sim::new(w)))),
            ClientOptions::default(),
        );
        let mut settings = settings();
        settings.concurrency = 1;
        settings.node_deadline = Duration::from_secs(40);

        // One listing at a time, the stalling one first: the other waits, and the deadline
        // ends both.
        let report = run_cycle(&api, lister.clone(), &settings, &HashMap::new(), now)
            .await
            .unwrap();
        let statuses: Vec<(&str, ClusterStatus, Option<&str>)> = report
            .clusters
            .iter()
            .map(|c| (c.cluster.name.as_str(), c.status, c.reason.as_deref()))
            .collect();
        let late =
            "nodes not listed: the node listing did not finish within the cycle's deadline of 40s";
        let waited = "nodes not listed: its turn did not come before the cycle's node-listing \
                      deadline; it is listed first next cycle";
        assert_eq!(
            statuses,
            [
                ("slow", ClusterStatus::Partial, Some(late)),
                ("fine", ClusterStatus::Partial, Some(waited)),
            ]
        );
        assert_eq!(report.clusters[0].node_failure, Some("timeout"));
        // Not started is not failed.
        assert_eq!(
            report.clusters[1].node_failure,
            Some(crate::inventory::NOT_STARTED)
        );

        // Next cycle the cluster that failed goes last: the other is checked.
        let previous = HashMap::from([(
            slow.clone(),
            PreviousMap {
                nodes_failed: true,
                ..Default::default()
            },
        )]);
        lister.started.lock().unwrap().clear();
        let report = run_cycle(&api, lister.clone(), &settings, &previous, now)
            .await
            .unwrap();
        assert_eq!(
            *lister.started.lock().unwrap(),
            [fine_host.clone(), slow_host.clone()]
        );
        assert_eq!(report.clusters[1].status, ClusterStatus::Checked);
        assert_eq!(report.clusters[0].status, ClusterStatus::Partial);
    }

    /// Lists like `FixedNodes`, each listing of a host in `slow` taking `delay`; records the
    /// hosts whose listing started.
    struct Slow {
        nodes: FixedNodes,
        slow: Vec<String>,
        delay: Duration,
        started: std::sync::Mutex<Vec<String>>,
    }

    impl NodeLister for Slow {
        fn list_nodes<'a>(&'a self, target: &'a SshTarget) -> NodeListFuture<'a> {
            self.started.lock().unwrap().push(target.host.clone());
            let delay = if self.slow.contains(&target.host) {
                self.delay
            } else {
                Duration::ZERO
            };
            Box::pin(async move {
                tokio::time::sleep(delay).await;
                self.nodes.list_nodes(target).await
            })
        }
    }

    /// Four clusters answering in 2.5 s (slow, not failing) ahead of six honest ones in the
    /// API's order, 2 listings at a time, 5 s for all, four cycles: which clusters' listings
    /// started in each cycle, and the state after them. The honest ones belong to
    /// `honest_owner`, the slow ones to "slowpoke".
    async fn four_cycles_behind_slow_clusters(
        honest_owner: &str,
    ) -> (Vec<Vec<bool>>, Vec<String>, crate::state::State) {
        let mut w = World::new(SimTime::from_unix(1_750_000_000));
        let root = w.root_domain_id().to_string();
        let tenant = w.add_account("slowpoke", &root);
        let honest = if honest_owner == "slowpoke" {
            tenant.clone()
        } else {
            w.add_account(honest_owner, &root)
        };
        let mut ids = Vec::new();
        for n in 0..4 {
            ids.push(w.add_cluster(&format!("slow{n}"), tenant.clone(), 1, 1, 0));
        }
        for n in 0..6 {
            ids.push(w.add_cluster(&format!("fine{n}"), honest.clone(), 1, 1, 0));
        }
        w.advance(Duration::from_secs(3600));
        let mut nodes = HashMap::new();
        let mut slow = Vec::new();
        for (n, id) in ids.iter().enumerate() {
            let (host, list) = nodes_of(&w, id);
            if n < 4 {
                slow.push(host.clone());
            }
            nodes.insert(host, list);
        }
        let hosts: Vec<String> = ids.iter().map(|id| nodes_of(&w, id).0).collect();
        let lister = Arc::new(Slow {
            nodes: FixedNodes(nodes),
            slow,
            delay: Duration::from_millis(2500),
            started: Default::default(),
        });
        let mut now = Timestamp::from(w.now);
        let api = Client::with_transport(
            Arc::new(SimTransport(Arc::new(Sim::new(w)))),
            ClientOptions::default(),
        );
        let mut settings = settings();
        settings.concurrency = 2;
        settings.node_deadline = Duration::from_secs(5);
        let step_settings = crate::state::step::StepSettings::ALL_ON;
        let mut state = crate::state::State::default();
        let mut listed_per_cycle: Vec<Vec<bool>> = Vec::new();
        for _ in 0..4 {
            lister.started.lock().unwrap().clear();
            let previous = crate::state::step::previous_maps(&state);
            let mut report = run_cycle(&api, lister.clone(), &settings, &previous, now)
                .await
                .unwrap();
            let started = lister.started.lock().unwrap().clone();
            listed_per_cycle.push(hosts.iter().map(|h| started.contains(h)).collect());
            let observed = crate::engine::observe(&mut report, &[], now);
            crate::state::step::step(&mut state, &observed, &step_settings, now);
            now = now.plus(Duration::from_secs(300));
        }
        (listed_per_cycle, ids, state)
    }

    #[tokio::test(start_paused = true)]
    async fn slow_clusters_cannot_keep_the_same_owners_others_unlisted() {
        let (listed_per_cycle, ids, state) = four_cycles_behind_slow_clusters("slowpoke").await;
        // One owner's clusters go oldest-listed first: the first cycle reaches the 4 slow
        // clusters only; the second the 6 others first; from then on every cluster is
        // listed at least every other cycle.
        assert_eq!(listed_per_cycle[0], [&[true; 4][..], &[false; 6]].concat());
        assert!(
            listed_per_cycle[1][4..].iter().all(|&l| l),
            "{listed_per_cycle:?}"
        );
        for pair in listed_per_cycle.windows(2) {
            for (n, (one, next)) in pair[0].iter().zip(&pair[1]).enumerate() {
                assert!(*one || *next, "cluster {n}: {listed_per_cycle:?}");
            }
        }
        // A cluster whose turn did not come is not a failed one.
        for id in &ids[4..] {
            assert!(!state.clusters[id].nodes_failed);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn slow_tenants_cannot_keep_other_owners_clusters_unlisted() {
        let (listed_per_cycle, _, _) = four_cycles_behind_slow_clusters("alice").await;
        // The slow tenant holds one of the 2 slots while alice's wait: all 6 of hers are
        // listed in every cycle, and the slow ones in the slots she leaves.
        assert_eq!(listed_per_cycle, vec![vec![true; 10]; 4]);
    }

    #[tokio::test]
    async fn a_node_list_far_longer_than_the_vms_is_not_compared() {
        let mut w = World::new(SimTime::from_unix(1_750_000_000));
        let root = w.root_domain_id().to_string();
        let alice = w.add_account("alice", &root);
        let flood = w.add_cluster("flood", alice.clone(), 1, 2, 0);
        let fine = w.add_cluster("fine", alice, 1, 1, 0);
        w.advance(Duration::from_secs(3600));
        let now = Timestamp::from(w.now);
        let (flood_host, mut flood_nodes) = nodes_of(&w, &flood);
        let (fine_host, fine_nodes) = nodes_of(&w, &fine);
        flood_nodes.extend((0..100_000).map(|i| Node::named(format!("fake-{i}"))));
        let lister = Arc::new(FixedNodes(HashMap::from([
            (flood_host, flood_nodes),
            (fine_host, fine_nodes),
        ])));
        let api = Client::with_transport(
            Arc::new(SimTransport(Arc::new(Sim::new(w)))),
            ClientOptions::default(),
        );
        let report = run_cycle(&api, lister, &settings(), &HashMap::new(), now)
            .await
            .unwrap();
        let flood = &report.clusters[0];
        assert_eq!(flood.status, ClusterStatus::Partial);
        assert_eq!(
            flood.reason.as_deref(),
            Some(
                "nodes not listed: the control node listed 100003 nodes, more than the 26 the \
                 cluster can have (twice its VMs and 20 more); the list is not compared"
            )
        );
        assert!(flood.mismatches.is_empty());
        assert_eq!(report.clusters[1].status, ClusterStatus::Checked);
        // Up to twice the VMs and 20 more are compared.
        assert!(!crate::inventory::assemble::implausible(26, 3));
        assert!(crate::inventory::assemble::implausible(27, 3));
    }
}
