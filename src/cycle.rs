//! One check cycle: read the clusters, their VM maps and the networks through the API, list
//! each checkable cluster's Kubernetes nodes over SSH (bounded concurrency) while the VMs are
//! read, read the clusters again, and compare the three views with the pure `diff`.
//!
//! Reading is all this module does: it never changes anything in CloudStack. Dedupe and
//! notifications act on its `CycleReport` afterwards.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::Semaphore;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::cloudstack::client::Client;
use crate::cloudstack::error::ApiError;
use crate::cloudstack::model::{KubernetesCluster, Network, VirtualMachine};
use crate::diff::{Mismatch, Policy, diff};
use crate::naming::{NameIndex, NodeRole};
use crate::remote::{NodeLister, SshTarget};
use crate::snapshot::{
    ClusterInfo, ClusterSnapshot, NodeView, Owner, VanishedHow, VanishedVm, Vm, VmState,
};
use crate::time::Timestamp;

/// What a cycle needs besides its sources.
#[derive(Debug, Clone)]
pub struct CycleSettings {
    pub policy: Policy,
    /// Node listings in flight at once.
    pub concurrency: usize,
    /// Login user when the first mapped VM has no `controlNodeLoginUser` detail.
    pub default_user: String,
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

/// Why a cluster was skipped; decides what dedupe may do with its earlier findings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipKind {
    /// By rule: its state or type is not checked.
    Rule,
    /// Its state or map changed while it was being checked.
    Changed,
    /// An API call for it failed.
    ApiFailed,
}

/// One cluster's result.
#[derive(Debug, Clone)]
pub struct ClusterOutcome {
    pub id: String,
    pub name: String,
    pub zone_id: Option<String>,
    pub status: ClusterStatus,
    pub skip: Option<SkipKind>,
    /// Why it was skipped or only partly checked.
    pub reason: Option<String>,
    /// Short label of the node-listing failure, for metrics (`connect`, `auth`, ...).
    pub node_failure: Option<&'static str>,
    pub mismatches: Vec<Mismatch>,
    /// The mapped VM ids (and names) as the API showed them, for the next cycle's probe.
    pub mapped: Vec<(String, String)>,
    /// `controlnodes + size + etcdnodes`.
    pub expected_vms: u32,
}

/// What one cycle saw.
#[derive(Debug, Clone)]
pub struct CycleReport {
    pub started: Timestamp,
    pub duration: Duration,
    pub clusters: Vec<ClusterOutcome>,
}

/// A cycle that could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum CycleError {
    #[error("cannot list {what}")]
    List {
        what: &'static str,
        #[source]
        source: ApiError,
    },
}

/// What the previous cycle saw of a cluster's map, to find rows the API stopped showing.
#[derive(Debug, Clone, Default)]
pub struct PreviousMap {
    /// Mapped VM ids with their last known names.
    pub vms: BTreeMap<String, String>,
    pub expected_vms: u32,
    /// Ids already known to be gone, kept while their finding is open.
    pub vanished: BTreeMap<String, (Option<String>, VanishedHow)>,
}

/// List every account's and project's resources, not only the caller's.
pub const ROOT_SCOPE: [(&str, &str); 2] = [("listall", "true"), ("projectid", "-1")];

/// Why a cluster's nodes are not listed when it has no endpoint.
pub const NO_ENDPOINT: &str = "the cluster has no endpoint address to reach its control node over SSH; CloudStack records one when the cluster first starts, so until then only its VM map and VMs are compared";

/// The owner of a cluster or VM: its project if it has one (project resources carry no
/// account), else its account in its domain.
fn owner(
    projectid: &Option<String>,
    domainid: &Option<String>,
    account: &Option<String>,
) -> Option<Owner> {
    match (projectid, domainid, account) {
        (Some(p), _, _) if !p.is_empty() => Some(Owner::Project {
            project_id: p.clone(),
        }),
        (_, Some(d), Some(a)) => Some(Owner::Account {
            domain_id: d.clone(),
            account: a.clone(),
        }),
        _ => None,
    }
}

fn owner_of_cluster(c: &KubernetesCluster) -> Option<Owner> {
    owner(&c.projectid, &c.domainid, &c.account)
}

fn owner_of_vm(vm: &VirtualMachine) -> Option<Owner> {
    owner(&vm.projectid, &vm.domainid, &vm.account)
}

fn to_vm(vm: &VirtualMachine, etcd_by_name: bool) -> Vm {
    Vm {
        id: vm.id.clone(),
        name: vm.name.clone(),
        state: VmState::parse(&vm.state),
        created: vm.created.as_deref().and_then(Timestamp::parse),
        last_updated: vm.lastupdated.as_deref().and_then(Timestamp::parse),
        etcd: vm.isetcdnode.unwrap_or(false) || etcd_by_name,
    }
}

fn cluster_info(c: &KubernetesCluster) -> ClusterInfo {
    ClusterInfo {
        id: c.id.clone(),
        name: c.name.clone(),
        zone_id: c.zoneid.clone(),
        state: c.state.clone(),
        owner: owner_of_cluster(c),
        control_nodes: c.controlnodes.or(c.masternodes).unwrap_or(1),
        size: c.size.unwrap_or(0),
        etcd_nodes: c.etcdnodes.unwrap_or(0),
    }
}

/// Why a cluster is not checked, if it is not: only CloudManaged clusters in Running or
/// Alert state are. Other states are operations under way or a stopped/failed cluster.
pub fn skip_reason(c: &KubernetesCluster) -> Option<String> {
    if c.clustertype.as_deref() == Some("ExternalManaged") {
        return Some("ExternalManaged cluster: its VMs are not managed by CloudStack".into());
    }
    match c.state.as_str() {
        "Running" | "Alert" => None,
        other => Some(format!(
            "state {other}: only Running and Alert clusters are checked"
        )),
    }
}

/// The SSH host from the cluster's `endpoint` (`https://<ip>:6443/`).
pub fn endpoint_host(endpoint: Option<&str>) -> Option<String> {
    let url = reqwest::Url::parse(endpoint?.trim()).ok()?;
    let host = url
        .host_str()?
        .trim_start_matches('[')
        .trim_end_matches(']');
    (!host.is_empty()).then(|| host.to_string())
}

/// Port 22 on Shared or ROUTED networks with one control node (CKS then reaches the control
/// VM directly); otherwise 2222, the public port forwarded to the first control node.
pub fn ssh_port(network: Option<&Network>, control_nodes: u32) -> u16 {
    let direct = network.is_some_and(|n| {
        n.network_type
            .as_deref()
            .is_some_and(|t| t.eq_ignore_ascii_case("Shared"))
            || n.networkmode
                .as_deref()
                .is_some_and(|m| m.eq_ignore_ascii_case("ROUTED"))
    });
    if direct && control_nodes <= 1 {
        22
    } else {
        2222
    }
}

/// Where CKS itself logs in to a cluster's control node: the host of its `endpoint`, the
/// port for its network (see [`ssh_port`]), and the first mapped VM's `controlNodeLoginUser`
/// detail, else `default_user`. `network` is the cluster's network, if it was listed.
pub fn ssh_target(
    c: &KubernetesCluster,
    network: Option<&Network>,
    default_user: &str,
) -> Result<SshTarget, &'static str> {
    let host = endpoint_host(c.endpoint.as_deref()).ok_or(NO_ENDPOINT)?;
    let user = c
        .virtualmachines
        .first()
        .and_then(|vm| vm.details.get("controlNodeLoginUser"))
        .filter(|u| !u.trim().is_empty())
        .cloned()
        .unwrap_or_else(|| default_user.to_string());
    Ok(SshTarget {
        host,
        port: ssh_port(network, cluster_info(c).control_nodes),
        user,
    })
}

/// What the second cluster read keeps of each cluster: its state and the ids of its map, to
/// notice an operation that ran during the check.
#[derive(Debug, serde::Deserialize)]
struct ClusterFingerprint {
    id: String,
    #[serde(default)]
    state: String,
    #[serde(default)]
    virtualmachines: Vec<MapRowId>,
}

#[derive(Debug, serde::Deserialize)]
struct MapRowId {
    id: String,
}

impl ClusterFingerprint {
    fn same_as(&self, c: &KubernetesCluster) -> bool {
        self.state == c.state
            && self
                .virtualmachines
                .iter()
                .map(|vm| vm.id.as_str())
                .eq(c.virtualmachines.iter().map(|vm| vm.id.as_str()))
    }
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
        // Of all VMs, only those named like a CKS node can be a cluster's, and only those
        // mapped last cycle are looked up by id: the rest (most VMs of a cloud) is dropped
        // while the pages are read.
        let known: HashSet<&str> = previous
            .values()
            .flat_map(|p| p.vms.keys().chain(p.vanished.keys()))
            .map(String::as_str)
            .collect();
        let keep = |vm: &VirtualMachine| {
            !crate::naming::split(&vm.name).is_empty() || known.contains(vm.id.as_str())
        };
        let vm_listing = async {
            api.list_where::<VirtualMachine, _>(
                "listVirtualMachines",
                "virtualmachine",
                &[("listall", "true"), ("projectid", "-1"), ("details", "min")],
                keep,
            )
            .await
            .map_err(|source| CycleError::List { what: "virtual machines", source })
        };
        // The clusters and the networks are all the node listings need: these start as soon
        // as both are read, while the VMs, the largest listing, are still being read.
        let inventory = async {
            let (clusters, networks) = tokio::join!(
                api.list::<KubernetesCluster>("listKubernetesClusters", "kubernetescluster", &ROOT_SCOPE),
                api.list::<Network>("listNetworks", "network", &ROOT_SCOPE),
            );
            let clusters = clusters.map_err(|source| CycleError::List { what: "Kubernetes clusters", source })?;
            let networks = networks.map_err(|source| CycleError::List { what: "networks", source })?;
            debug!(clusters = clusters.len(), networks = networks.len(), "listed");
            let checkable: Vec<usize> = (0..clusters.len()).filter(|&i| skip_reason(&clusters[i]).is_none()).collect();
            let node_views = list_nodes(&clusters, &networks, &checkable, lister, settings).await;
            Ok((clusters, checkable, node_views))
        };
        // Whichever fails first ends the cycle at once; the other is dropped, which aborts
        // the node listings still running.
        let (vms, (clusters, checkable, mut node_views)) = tokio::try_join!(vm_listing, inventory)?;
        debug!(vms_kept = vms.len(), "VMs listed");

        // Every VM id in any cluster's map, checked or not.
        let mut mapped_by: HashMap<&str, usize> = HashMap::new();
        for (i, c) in clusters.iter().enumerate() {
            for vm in &c.virtualmachines {
                mapped_by.entry(vm.id.as_str()).or_insert(i);
            }
        }

        let index = NameIndex::new(checkable.iter().filter_map(|&i| {
            let c = &clusters[i];
            owner_of_cluster(c).map(|o| (o, c.name.as_str(), c.id.as_str()))
        }));

        // The owner's VMs named as nodes of each checkable cluster, in one pass over the VMs.
        let mut named: HashMap<usize, Vec<Vm>> = HashMap::new();
        for vm in &vms {
            let Some(owner) = owner_of_vm(vm) else { continue };
            for (k, role) in index.lookup(&owner, &vm.name) {
                named.entry(checkable[k]).or_default().push(to_vm(vm, role == NodeRole::Etcd));
            }
        }
        let vm_by_id: HashMap<&str, &VirtualMachine> = vms.iter().map(|vm| (vm.id.as_str(), vm)).collect();

        // Read the clusters again: anything whose state or map changed meanwhile is not
        // reported this cycle (an operation ran during the check). Only the state and the
        // map's ids are compared, so only they are kept.
        let again = api
            .list::<ClusterFingerprint>("listKubernetesClusters", "kubernetescluster", &ROOT_SCOPE)
            .await
            .map_err(|source| CycleError::List { what: "Kubernetes clusters (second read)", source })?;
        let again: HashMap<&str, &ClusterFingerprint> = again.iter().map(|c| (c.id.as_str(), c)).collect();

        let mut outcomes = Vec::with_capacity(clusters.len());
        for (i, c) in clusters.iter().enumerate() {
            let info = cluster_info(c);
            let mapped_pairs: Vec<(String, String)> =
                c.virtualmachines.iter().map(|vm| (vm.id.clone(), vm.name.clone())).collect();
            let mut outcome = ClusterOutcome {
                id: c.id.clone(),
                name: c.name.clone(),
                zone_id: c.zoneid.clone(),
                status: ClusterStatus::Skipped,
                skip: None,
                reason: None,
                node_failure: None,
                mismatches: vec![],
                mapped: mapped_pairs,
                expected_vms: info.expected_vms(),
            };
            if let Some(reason) = skip_reason(c) {
                outcome.skip = Some(SkipKind::Rule);
                outcome.reason = Some(reason);
                outcomes.push(outcome);
                continue;
            }
            match again.get(c.id.as_str()) {
                None => {
                    outcome.skip = Some(SkipKind::Changed);
                    outcome.reason = Some("the cluster disappeared during the check".into());
                    outcomes.push(outcome);
                    continue;
                }
                Some(now_c) if !now_c.same_as(c) => {
                    outcome.skip = Some(SkipKind::Changed);
                    outcome.reason = Some(if now_c.state != c.state {
                        format!("its state changed from {} to {} during the check", c.state, now_c.state)
                    } else {
                        "its VM map changed during the check".to_string()
                    });
                    outcomes.push(outcome);
                    continue;
                }
                Some(_) => {}
            }

            let etcd_prefix = crate::naming::etcd_prefix(&c.name, &c.id);
            let is_etcd_name = |name: &str| {
                crate::naming::split(name)
                    .iter()
                    .any(|(p, r)| *r == NodeRole::Etcd && *p == etcd_prefix)
            };
            let mapped: Vec<Vm> =
                c.virtualmachines.iter().map(|vm| to_vm(vm, is_etcd_name(&vm.name))).collect();
            let named = named.remove(&i).unwrap_or_default();
            let mapped_elsewhere: BTreeSet<String> = named
                .iter()
                .filter(|vm| mapped_by.get(vm.id.as_str()).is_some_and(|&j| j != i))
                .map(|vm| vm.id.clone())
                .collect();

            let vanished = match probe_vanished(api, c, &info, previous.get(&c.id), &vm_by_id).await {
                Ok(v) => v,
                Err(e) => {
                    warn!(cluster = %c.name, error = %e, "cannot probe map rows the API stopped showing");
                    outcome.skip = Some(SkipKind::ApiFailed);
                    outcome.reason = Some(format!("an API call failed: {e}"));
                    outcomes.push(outcome);
                    continue;
                }
            };

            let (nodes, failure) = node_views.remove(&i).unwrap_or((
                NodeView::Unknown { reason: "the node listing did not finish".into() },
                Some("internal"),
            ));
            if let NodeView::Unknown { reason } = &nodes {
                outcome.status = ClusterStatus::Partial;
                outcome.reason = Some(format!("nodes not listed: {reason}"));
                outcome.node_failure = failure;
            } else {
                outcome.status = ClusterStatus::Checked;
            }
            let snap = ClusterSnapshot { cluster: info, mapped, named, mapped_elsewhere, vanished, nodes };
            outcome.mismatches = diff(&snap, &settings.policy, now);
            for m in &outcome.mismatches {
                debug!(cluster = %c.name, kind = m.kind.as_str(), key = %m.key(), "mismatch");
            }
            outcomes.push(outcome);
        }
        let report = CycleReport { started: now, duration: started_at.elapsed(), clusters: outcomes };
        info!(
            clusters = report.clusters.len(),
            mismatches = report.clusters.iter().map(|c| c.mismatches.len()).sum::<usize>(),
            seconds = report.duration.as_secs_f64(),
            "cycle done"
        );
        Ok(report)
    }
    .instrument(span)
    .await
}

/// A node view per checkable cluster (by index), with the failure label of listings that
/// failed. At most `settings.concurrency` listings run at once; dropping the future aborts
/// those still running.
async fn list_nodes(
    clusters: &[KubernetesCluster],
    networks: &[Network],
    checkable: &[usize],
    lister: Arc<dyn NodeLister>,
    settings: &CycleSettings,
) -> HashMap<usize, (NodeView, Option<&'static str>)> {
    let networks: HashMap<&str, &Network> = networks.iter().map(|n| (n.id.as_str(), n)).collect();
    let semaphore = Arc::new(Semaphore::new(settings.concurrency.max(1)));
    let mut listings = tokio::task::JoinSet::new();
    for &i in checkable {
        let c = &clusters[i];
        let network = c
            .networkid
            .as_deref()
            .and_then(|id| networks.get(id).copied());
        let target = ssh_target(c, network, &settings.default_user).map_err(str::to_string);
        let lister = lister.clone();
        let semaphore = semaphore.clone();
        let span = info_span!("cluster", cluster = %c.name, id = %c.id);
        listings.spawn(
                async move {
                    let target = match target {
                        Ok(t) => t,
                        Err(reason) => return (i, NodeView::Unknown { reason }, None),
                    };
                    let _permit = semaphore.acquire_owned().await;
                    match lister.list_nodes(&target).await {
                        Ok(nodes) => (i, NodeView::Listed(nodes), None),
                        Err(e) => {
                            warn!(host = %target.host, port = target.port, user = %target.user, error = %e, "cannot list the Kubernetes nodes; comparing the VM map with the VMs only");
                            (i, NodeView::Unknown { reason: e.to_string() }, Some(e.reason()))
                        }
                    }
                }
                .instrument(span),
            );
    }
    let mut node_views = HashMap::new();
    while let Some(joined) = listings.join_next().await {
        match joined {
            Ok((i, view, failure)) => {
                node_views.insert(i, (view, failure));
            }
            Err(e) => warn!(error = %e, "a node listing task failed"),
        }
    }
    node_views
}

/// Map rows the API stopped showing: ids mapped last cycle, gone from `virtualmachines` now,
/// while the cluster's expected size did not shrink (a scale-down removes rows legitimately).
/// Each is probed with `listVirtualMachines id=`: an empty list means expunged or unmanaged,
/// error 431 means no such VM. A VM the probe still finds only lost its map row; it is judged
/// like any other VM of the cluster.
async fn probe_vanished(
    api: &Client,
    c: &KubernetesCluster,
    info: &ClusterInfo,
    previous: Option<&PreviousMap>,
    listed: &HashMap<&str, &VirtualMachine>,
) -> Result<Vec<VanishedVm>, ApiError> {
    let Some(prev) = previous else {
        return Ok(vec![]);
    };
    let now_ids: BTreeSet<&str> = c.virtualmachines.iter().map(|vm| vm.id.as_str()).collect();
    // Gone rows can only stand for map entries the API does not show: at most
    // `expected - shown` of them. Beyond that the rows were deleted (a scale-down, a fix in
    // the database) and their findings resolve.
    let room = (info.expected_vms() as usize).saturating_sub(now_ids.len());
    let mut out = Vec::new();
    // Already known gone, finding still open: kept without probing again, unless the row
    // came back.
    for (id, (name, how)) in &prev.vanished {
        if !now_ids.contains(id.as_str()) && !listed.contains_key(id.as_str()) {
            out.push(VanishedVm {
                id: id.clone(),
                name: name.clone(),
                how: *how,
            });
        }
    }
    // A scale-down removes rows legitimately: nothing new is probed then.
    if info.expected_vms() >= prev.expected_vms {
        for (id, name) in &prev.vms {
            if out.len() >= room {
                break;
            }
            // Still mapped, already known, or the VM exists and only its row went.
            if now_ids.contains(id.as_str())
                || prev.vanished.contains_key(id)
                || listed.contains_key(id.as_str())
            {
                continue;
            }
            let scope = [
                ("id", id.as_str()),
                ("listall", "true"),
                ("projectid", "-1"),
            ];
            match api
                .list::<VirtualMachine>("listVirtualMachines", "virtualmachine", &scope)
                .await
            {
                Ok(found) if found.is_empty() => out.push(VanishedVm {
                    id: id.clone(),
                    name: Some(name.clone()),
                    how: VanishedHow::Expunged,
                }),
                Ok(_) => {}
                Err(e) if e.code() == Some(431) => out.push(VanishedVm {
                    id: id.clone(),
                    name: Some(name.clone()),
                    how: VanishedHow::DoesNotExist,
                }),
                Err(e) => return Err(e),
            }
        }
    }
    out.truncate(room);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(t: &str, mode: Option<&str>) -> Network {
        Network {
            id: "n".into(),
            name: None,
            network_type: Some(t.into()),
            networkmode: mode.map(Into::into),
            vpcid: None,
        }
    }

    use crate::cloudstack::client::ClientOptions;
    use crate::demo::SimTransport;
    use crate::diff::MismatchKind;
    use crate::remote::{NodeListError, NodeListFuture};
    use cks_drift_sim::{NodeRole as SimRole, Sim, SimTime, World};

    /// Node names per control-node host; any other host refuses the connection.
    struct FixedNodes(HashMap<String, Vec<String>>);

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
        }
    }

    /// The node names of a cluster's mapped VMs, keyed by its endpoint host.
    fn nodes_of(w: &World, cluster_id: &str) -> (String, Vec<String>) {
        let c = w.cluster(cluster_id).unwrap();
        let names = c
            .map
            .iter()
            .map(|id| w.vm(id).unwrap().name.to_lowercase())
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
        nodes_two.push("ghost".into());
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
                    .map(|m| (m.kind, m.vm_id.as_deref().or(m.node.as_deref())))
                    .collect();
                (c.name.as_str(), c.status, kinds)
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
        // 1206 VMs: three pages; the clusters twice and the networks once.
        assert_eq!(
            calls(&api),
            [
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
                ("listKubernetesClusters".to_string(), 2),
                ("listNetworks".to_string(), 1),
                ("listVirtualMachines".to_string(), 1),
            ]
        );
    }

    #[test]
    fn ssh_port_follows_cks() {
        assert_eq!(ssh_port(Some(&net("Isolated", None)), 1), 2222);
        assert_eq!(ssh_port(Some(&net("Shared", None)), 1), 22);
        assert_eq!(ssh_port(Some(&net("Shared", None)), 3), 2222);
        assert_eq!(ssh_port(Some(&net("Isolated", Some("ROUTED"))), 1), 22);
        assert_eq!(ssh_port(Some(&net("Isolated", Some("NATTED"))), 1), 2222);
        assert_eq!(ssh_port(None, 1), 2222);
    }

    #[test]
    fn endpoint_hosts() {
        assert_eq!(
            endpoint_host(Some("https://10.0.57.163:6443/")),
            Some("10.0.57.163".into())
        );
        assert_eq!(
            endpoint_host(Some("https://[fd00::5]:6443/")),
            Some("fd00::5".into())
        );
        assert_eq!(endpoint_host(Some("")), None);
        assert_eq!(endpoint_host(None), None);
    }

    #[test]
    fn ssh_targets_follow_cks() {
        let c: KubernetesCluster = serde_json::from_value(serde_json::json!({
            "id": "c", "name": "n", "state": "Running", "controlnodes": 1,
            "endpoint": "https://10.1.1.10:6443/",
            "virtualmachines": [{"id": "v1", "details": {"controlNodeLoginUser": "core"}}]
        }))
        .unwrap();
        assert_eq!(
            ssh_target(&c, Some(&net("Shared", None)), "cloud"),
            Ok(SshTarget {
                host: "10.1.1.10".into(),
                port: 22,
                user: "core".into()
            })
        );
        let mut plain = c.clone();
        plain.virtualmachines[0].details.clear();
        assert_eq!(
            ssh_target(&plain, None, "cloud"),
            Ok(SshTarget {
                host: "10.1.1.10".into(),
                port: 2222,
                user: "cloud".into()
            })
        );
        let mut no_endpoint = c;
        no_endpoint.endpoint = None;
        assert_eq!(ssh_target(&no_endpoint, None, "cloud"), Err(NO_ENDPOINT));
    }

    fn cluster(state: &str, ty: Option<&str>) -> KubernetesCluster {
        serde_json::from_value(serde_json::json!({
            "id": "c", "name": "n", "state": state, "clustertype": ty
        }))
        .unwrap()
    }

    #[test]
    fn which_clusters_are_checked() {
        assert_eq!(skip_reason(&cluster("Running", Some("CloudManaged"))), None);
        assert_eq!(skip_reason(&cluster("Alert", None)), None);
        for state in [
            "Scaling",
            "Starting",
            "Stopped",
            "Upgrading",
            "RemovingNodes",
            "Error",
            "Created",
        ] {
            assert_eq!(
                skip_reason(&cluster(state, None)),
                Some(format!(
                    "state {state}: only Running and Alert clusters are checked"
                ))
            );
        }
        assert_eq!(
            skip_reason(&cluster("Running", Some("ExternalManaged"))),
            Some("ExternalManaged cluster: its VMs are not managed by CloudStack".into())
        );
    }
}
