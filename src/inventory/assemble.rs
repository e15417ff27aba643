//! Builds each cluster's snapshot from a cycle's inventory: which VMs are its map, which of
//! its owner's VMs are named as its nodes, which of those another cluster maps, its gone map
//! rows and its node view. Pure: no clock, no I/O; the rules come from `cks` and `naming`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::cks::naming::{NameIndex, NodeRole};
use crate::inventory::{ClusterRecord, Inventory, NodeListing, Reread, VmId, VmRow};
use crate::snapshot::{ClusterIdentity, ClusterSnapshot, NodeView, RememberedVm, VanishedVm, Vm};

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

/// What became of one cluster.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Skipped {
        kind: SkipKind,
        reason: String,
    },
    /// Ready for the comparison. `partial` is why the nodes could not be listed, with the
    /// failure label for metrics, when they could not.
    Compare {
        snapshot: Box<ClusterSnapshot>,
        partial: Option<(String, Option<&'static str>)>,
    },
}

/// One cluster of the inventory, assembled.
#[derive(Debug, Clone, PartialEq)]
pub struct Assembled {
    pub cluster: ClusterIdentity,
    /// The mapped VM ids (and names) as the API showed them.
    pub mapped: Vec<(String, String)>,
    /// `controlnodes + size + etcdnodes`.
    pub expected_vms: u32,
    /// The mapped VMs to remember by their database id, when its hidden map rows came from
    /// the database (`None`: what was remembered stays).
    pub db_ids: Option<BTreeMap<u64, RememberedVm>>,
    pub verdict: Verdict,
}

fn to_vm(vm: &VmRow, etcd_by_name: bool) -> Vm {
    Vm {
        id: vm.id.to_string(),
        name: vm.name.to_string(),
        state: vm.state(),
        created: vm.created(),
        last_updated: vm.last_updated(),
        etcd: vm.etcd || etcd_by_name,
    }
}

/// Whether a node list is far longer than the cluster's VMs: not a comparison to trust. A
/// control node is the tenant's machine, and 100,000 fake node lines would otherwise be
/// 100,000 findings, notifications and alerts. Real clusters add nodes beyond their VMs only
/// by hand, a few at a time.
pub fn implausible(nodes: usize, vms: usize) -> bool {
    nodes > crate::remote::node_bound(vms)
}

/// Every cluster of the inventory, in its order, skipped with a reason or with its snapshot.
///
/// One at a time: each cluster's named VMs are picked out as indexes into the VM listing, and
/// copied into its snapshot only when its turn comes; each cluster's inventory is dropped as
/// its snapshot is made, so a cycle never holds the whole inventory and every snapshot at
/// once.
pub fn assemble(inventory: Inventory) -> impl Iterator<Item = Assembled> {
    let Inventory {
        clusters,
        vms,
        nodes,
        again,
        vanished,
        mut db_ids,
        map_source: _,
    } = inventory;
    // The index of names is dropped before the map of mapped ids is built: not both at once.
    let named = named_nodes(&clusters, &vms);
    let elsewhere = mapped_elsewhere(&clusters, &vms, &named);
    let mut parts = Parts {
        vms,
        named,
        elsewhere,
        nodes,
        again,
        vanished,
    };
    clusters.into_iter().enumerate().map(move |(i, c)| {
        let verdict = parts.verdict(i, &c);
        assembled(&c, verdict, db_ids.remove(&i))
    })
}

/// The owner's VMs named as nodes of each checkable cluster, in one pass over the VMs: their
/// indexes in `vms`, and whether they are named as etcd nodes.
fn named_nodes(clusters: &[ClusterRecord], vms: &[VmRow]) -> HashMap<usize, Vec<(usize, bool)>> {
    let checkable: Vec<usize> = (0..clusters.len())
        .filter(|&i| clusters[i].skip.is_none())
        .collect();
    let mut named: HashMap<usize, Vec<(usize, bool)>> = HashMap::new();
    // Owners compare by value; the VMs' are shared, so they are looked up as they are.
    let index = NameIndex::new(checkable.iter().filter_map(|&i| {
        let c = &clusters[i].info;
        c.owner
            .clone()
            .map(|o| (Arc::new(o), c.name.as_str(), c.id.as_str()))
    }));
    for (v, vm) in vms.iter().enumerate() {
        let Some(owner) = &vm.owner else {
            continue;
        };
        for (k, role) in index.lookup(owner, &vm.name) {
            named
                .entry(checkable[k])
                .or_default()
                .push((v, role == NodeRole::Etcd));
        }
    }
    named
}

/// Of the VMs named as nodes of each cluster, the ids of those another cluster maps.
fn mapped_elsewhere(
    clusters: &[ClusterRecord],
    vms: &[VmRow],
    named: &HashMap<usize, Vec<(usize, bool)>>,
) -> HashMap<usize, BTreeSet<String>> {
    // Every VM id in any cluster's map, checked or not.
    let mut mapped_by: HashMap<&VmId, usize> = HashMap::new();
    for (i, c) in clusters.iter().enumerate() {
        for vm in &c.map {
            mapped_by.entry(&vm.id).or_insert(i);
        }
    }
    // Of those, the VMs another cluster maps.
    let mut elsewhere: HashMap<usize, BTreeSet<String>> = HashMap::new();
    for (&i, list) in named {
        let ids: BTreeSet<String> = list
            .iter()
            .map(|&(v, _)| &vms[v].id)
            .filter(|id| mapped_by.get(id).is_some_and(|&j| j != i))
            .map(VmId::to_string)
            .collect();
        if !ids.is_empty() {
            elsewhere.insert(i, ids);
        }
    }
    elsewhere
}

/// What the clusters' verdicts are made from, by cluster index: each cluster's share is taken
/// out when its turn comes.
struct Parts {
    vms: Vec<VmRow>,
    named: HashMap<usize, Vec<(usize, bool)>>,
    elsewhere: HashMap<usize, BTreeSet<String>>,
    nodes: HashMap<usize, NodeListing>,
    again: Vec<Reread>,
    vanished: HashMap<usize, Result<Vec<VanishedVm>, String>>,
}

impl Parts {
    /// Cluster `i` skipped with a reason, or its snapshot.
    fn verdict(&mut self, i: usize, c: &ClusterRecord) -> Verdict {
        let skipped = |kind, reason: String| Verdict::Skipped { kind, reason };
        if let Some(reason) = &c.skip {
            return skipped(SkipKind::Rule, reason.clone());
        }
        match &self.again[i] {
            Reread::Gone => skipped(
                SkipKind::Changed,
                "the cluster disappeared during the check".into(),
            ),
            Reread::StateChanged(now) => skipped(
                SkipKind::Changed,
                format!(
                    "its state changed from {} to {now} during the check",
                    c.info.state
                ),
            ),
            Reread::MapChanged => skipped(
                SkipKind::Changed,
                "its VM map changed during the check".to_string(),
            ),
            Reread::Same => match self.vanished.remove(&i) {
                Some(Err(e)) => skipped(SkipKind::ApiFailed, format!("an API call failed: {e}")),
                gone => self.compare(i, c, gone.and_then(Result::ok).unwrap_or_default()),
            },
        }
    }

    /// The snapshot of cluster `i`, whose gone map rows are `vanished`.
    fn compare(&mut self, i: usize, c: &ClusterRecord, vanished: Vec<VanishedVm>) -> Verdict {
        let info = &c.info;
        let etcd_prefix = crate::cks::naming::etcd_prefix(&info.name, &info.id);
        let is_etcd_name = |name: &str| {
            crate::cks::naming::split(name)
                .iter()
                .any(|(p, r)| *r == NodeRole::Etcd && *p == etcd_prefix)
        };
        let mapped: Vec<Vm> = c
            .map
            .iter()
            .map(|vm| to_vm(vm, is_etcd_name(&vm.name)))
            .collect();
        let named: Vec<Vm> = self
            .named
            .remove(&i)
            .unwrap_or_default()
            .into_iter()
            .map(|(v, etcd)| to_vm(&self.vms[v], etcd))
            .collect();
        let mapped_elsewhere = self.elsewhere.remove(&i).unwrap_or_default();
        let listing = self.nodes.remove(&i).map_or_else(
            || {
                let reason = "the node listing did not finish".into();
                (NodeView::Unknown { reason }, Some("internal"))
            },
            |(held, failure)| (held.unfold(), failure),
        );
        let vms = (info.expected_vms() as usize)
            .max(mapped.len())
            .max(named.len());
        let (view, failure) = plausible(listing, vms);
        let partial = match &view {
            NodeView::Unknown { reason } => Some((format!("nodes not listed: {reason}"), failure)),
            NodeView::Listed(_) => None,
        };
        Verdict::Compare {
            snapshot: Box::new(ClusterSnapshot {
                cluster: info.clone(),
                mapped,
                named,
                mapped_elsewhere,
                vanished,
                nodes: view,
            }),
            partial,
        }
    }
}

/// A node listing as it is compared: one far longer than the cluster's `vms` VMs is not.
fn plausible(
    listing: (NodeView, Option<&'static str>),
    vms: usize,
) -> (NodeView, Option<&'static str>) {
    match listing {
        (NodeView::Listed(list), _) if implausible(list.len(), vms) => (
            NodeView::Unknown {
                reason: format!(
                    "the control node listed {} nodes for a cluster of {vms} \
                     VMs; a list that much longer is not compared",
                    list.len()
                ),
            },
            Some("output"),
        ),
        listing => listing,
    }
}

fn assembled(
    c: &ClusterRecord,
    verdict: Verdict,
    db_ids: Option<BTreeMap<u64, RememberedVm>>,
) -> Assembled {
    let info = &c.info;
    Assembled {
        cluster: ClusterIdentity::new(info, c.owner_name.clone()),
        mapped: c
            .map
            .iter()
            .map(|vm| (vm.id.to_string(), vm.name.to_string()))
            .collect(),
        expected_vms: info.expected_vms(),
        db_ids,
        verdict,
    }
}
