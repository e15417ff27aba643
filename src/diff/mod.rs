//! The comparison of a cluster's three views: a pure function from a `ClusterSnapshot`, the
//! policy and the current time to the list of mismatches. No clock, network or environment.
//!
//! Semantics follow the in-server check proposed upstream (apache/cloudstack PR 14666), with
//! two additions: map rows the API hides can only show as a count gap, and a node is matched to
//! a VM by its identity (system UUID or provider ID, see `identity`) before its name.

pub mod identity;
pub mod server_check;
pub mod wording;

use std::collections::HashSet;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::base::time::Timestamp;
use crate::diff::identity::{Identity, host_label, identify};
use crate::snapshot::{ClusterSnapshot, Node, NodeView, VanishedHow, VanishedVm, Vm, VmState};

/// What the comparison may tolerate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Unmapped VMs younger than this, and mapped Running VMs whose creation or last state
    /// change is more recent, are not reported: an operation may still be under way.
    pub grace_period: Duration,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            grace_period: Duration::from_secs(15 * 60),
        }
    }
}

/// The kinds of mismatch, as the JSON report names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MismatchKind {
    /// A mapped VM that is Destroyed, Expunging, in Error, expunged or missing.
    MappedVm,
    /// A VM named as a node of the cluster that no cluster maps.
    UnmappedVm,
    /// A Kubernetes node that matches no VM of the cluster, by identity or by name.
    NodeWithoutVm,
    /// A mapped Running VM that is not a Kubernetes node.
    VmNotANode,
    /// The map lists fewer VMs than the cluster should have, and no unmapped VM explains it.
    MapCount,
    /// The Kubernetes nodes could not be listed for `check.blind_after`: the node side has
    /// not been compared since (decided by the dedupe step, which knows since when).
    Blind,
    /// A Kubernetes node named like one VM of the cluster while its system UUID (or provider
    /// ID) is another's.
    IdentityConflict,
}

impl MismatchKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MismatchKind::MappedVm => "mapped_vm",
            MismatchKind::UnmappedVm => "unmapped_vm",
            MismatchKind::NodeWithoutVm => "node_without_vm",
            MismatchKind::VmNotANode => "vm_not_a_node",
            MismatchKind::MapCount => "map_count",
            MismatchKind::Blind => "blind",
            MismatchKind::IdentityConflict => "identity_conflict",
        }
    }

    /// Which comparison found it: the map against the VMs, or against the Kubernetes nodes.
    pub fn side(self) -> Side {
        match self {
            // A blind cluster is judged while its node side is frozen, like the VM side.
            MismatchKind::MappedVm
            | MismatchKind::UnmappedVm
            | MismatchKind::MapCount
            | MismatchKind::Blind => Side::Vms,
            MismatchKind::NodeWithoutVm
            | MismatchKind::VmNotANode
            | MismatchKind::IdentityConflict => Side::Nodes,
        }
    }

    pub const ALL: [MismatchKind; 7] = [
        MismatchKind::MappedVm,
        MismatchKind::UnmappedVm,
        MismatchKind::NodeWithoutVm,
        MismatchKind::VmNotANode,
        MismatchKind::MapCount,
        MismatchKind::Blind,
        MismatchKind::IdentityConflict,
    ];
}

/// The two sides whose findings are kept (and cleared) separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// The map against the cluster's VMs in CloudStack.
    Vms,
    /// The map against the Kubernetes nodes.
    Nodes,
}

/// A VM a finding is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmRef {
    pub id: String,
    /// Its host name; unknown for a map row whose VM vanished before cks-drift saw it named.
    pub name: Option<String>,
    /// Its state as CloudStack names it, or, for a mapped VM the API no longer shows,
    /// [`GONE_EXPUNGED`] or [`GONE_MISSING`].
    pub state: String,
}

/// The state of a mapped VM whose row the API hides and whose probe found it removed.
pub const GONE_EXPUNGED: &str = "Expunged";
/// The state of a mapped VM whose row the API hides and whose id never existed.
pub const GONE_MISSING: &str = "Missing";

/// What a finding is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    Vm(VmRef),
    /// A Kubernetes node, by its (lowercased) name.
    Node(String),
    /// The count of map rows the API shows, against the count the cluster should have.
    MapRows {
        shown: u32,
        expected: u32,
    },
    /// The cluster's node listing, failing since `since` with `reason`.
    Blind {
        reason: String,
        since: Timestamp,
    },
    /// A Kubernetes node (by its lowercased name) that `is` a VM of the cluster by its system
    /// UUID or provider ID while its name is that of VM `named`.
    Conflict {
        node: String,
        is: VmRef,
        named: VmRef,
    },
}

/// The subject of every blind finding's key: one per cluster, whatever the reason.
pub const BLIND_SUBJECT: &str = "nodes";

/// One mismatch in one cluster: its kind and what it is about. Its wording for people is
/// written in `wording`, once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub kind: MismatchKind,
    pub subject: Subject,
}

impl Mismatch {
    /// The dedupe key: stable while the same thing stays wrong. A mapped VM keeps its key as
    /// it goes from Destroyed to Expunging to gone.
    pub fn key(&self) -> FindingKey {
        let subject = match &self.subject {
            Subject::Vm(vm) => vm.id.clone(),
            Subject::Node(node) | Subject::Conflict { node, .. } => node.clone(),
            Subject::MapRows { shown, expected } => format!("{shown}/{expected}"),
            Subject::Blind { .. } => BLIND_SUBJECT.to_string(),
        };
        FindingKey {
            kind: self.kind,
            subject,
        }
    }

    pub fn side(&self) -> Side {
        self.kind.side()
    }

    /// The VM it is about, if any: for an identity conflict, the VM the node is.
    pub fn vm(&self) -> Option<&VmRef> {
        match &self.subject {
            Subject::Vm(vm) | Subject::Conflict { is: vm, .. } => Some(vm),
            _ => None,
        }
    }

    /// The node it is about, if any.
    pub fn node(&self) -> Option<&str> {
        match &self.subject {
            Subject::Node(node) | Subject::Conflict { node, .. } => Some(node),
            _ => None,
        }
    }

    /// For an identity conflict, the VM the node's name is.
    pub fn named_vm(&self) -> Option<&VmRef> {
        match &self.subject {
            Subject::Conflict { named, .. } => Some(named),
            _ => None,
        }
    }

    fn vm_finding(kind: MismatchKind, vm: &Vm) -> Self {
        Mismatch {
            kind,
            subject: Subject::Vm(vm_ref(vm)),
        }
    }
}

/// The key of a finding: its kind and its subject (a VM id, a node name, or
/// `<shown>/<expected>` for a count). Its one string form, `<kind>:<subject>`, is for the
/// state file and the markers; it orders as that string does.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FindingKey {
    pub kind: MismatchKind,
    pub subject: String,
}

impl FindingKey {
    pub fn new(kind: MismatchKind, subject: impl Into<String>) -> Self {
        FindingKey {
            kind,
            subject: subject.into(),
        }
    }

    /// Reads the string form; `None` for anything else (a summary alert's key, say).
    pub fn parse(s: &str) -> Option<FindingKey> {
        let (kind, subject) = s.split_once(':')?;
        let kind = MismatchKind::ALL.into_iter().find(|k| k.as_str() == kind)?;
        Some(FindingKey::new(kind, subject))
    }
}

impl std::fmt::Display for FindingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.kind.as_str(), self.subject)
    }
}

/// Compares with a string form, as written in the state file and the markers.
impl PartialEq<str> for FindingKey {
    fn eq(&self, s: &str) -> bool {
        s.split_once(':')
            .is_some_and(|(kind, subject)| kind == self.kind.as_str() && subject == self.subject)
    }
}

/// Written as its string form: the key of a state file's record.
impl Serialize for FindingKey {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl Ord for FindingKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        // No kind's name is a prefix of another's, so this is the order of the string form.
        (self.kind.as_str(), &self.subject).cmp(&(other.kind.as_str(), &other.subject))
    }
}

impl PartialOrd for FindingKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

fn vm_ref(vm: &Vm) -> VmRef {
    VmRef {
        id: vm.id.clone(),
        name: Some(vm.name.clone()),
        state: vm.state.as_str().to_string(),
    }
}

fn gone_state(how: VanishedHow) -> &'static str {
    match how {
        VanishedHow::Expunged => GONE_EXPUNGED,
        VanishedHow::DoesNotExist => GONE_MISSING,
    }
}

/// Compares the three views of one cluster. The result is sorted by kind, then subject.
pub fn diff(snap: &ClusterSnapshot, policy: &Policy, now: Timestamp) -> Vec<Mismatch> {
    let cutoff = now.minus(policy.grace_period);
    let mut out = Vec::new();

    // A VM listed twice in `virtualmachines` is one mapped VM.
    let mut seen = HashSet::new();
    let mapped: Vec<&Vm> = snap
        .mapped
        .iter()
        .filter(|vm| seen.insert(vm.id.as_str()))
        .collect();

    dead_mapped_vms(snap, &mapped, &mut out);
    let unmapped = unmapped_vms(snap, &mapped);
    for vm in &unmapped {
        let created = vm
            .created
            .or_else(|| crate::cks::naming::created_from_name(&vm.name));
        if created.is_some_and(|t| t > cutoff) {
            continue;
        }
        out.push(Mismatch::vm_finding(MismatchKind::UnmappedVm, vm));
    }
    out.extend(map_count(snap, &mapped, &unmapped));

    if let NodeView::Listed(nodes) = &snap.nodes {
        let matching = NodeMatching::new(snap, &mapped, nodes);
        matching.nodes_without_vm(nodes, &mut out);
        matching.vms_not_nodes(&mapped, cutoff, &mut out);
    }

    out.sort_by_key(|m| (m.kind, m.key()));
    out
}

/// A `mapped_vm` finding for each mapped VM that is dead, and each whose row the API hides
/// and a probe found gone.
fn dead_mapped_vms(snap: &ClusterSnapshot, mapped: &[&Vm], out: &mut Vec<Mismatch>) {
    for vm in mapped {
        if vm.state.is_dead() {
            out.push(Mismatch::vm_finding(MismatchKind::MappedVm, vm));
        }
    }
    for gone in &snap.vanished {
        out.push(Mismatch {
            kind: MismatchKind::MappedVm,
            subject: Subject::Vm(gone_ref(gone)),
        });
    }
}

/// A gone map row, as a finding names its VM.
fn gone_ref(gone: &VanishedVm) -> VmRef {
    VmRef {
        id: gone.id.clone(),
        name: gone.name.clone(),
        state: gone_state(gone.how).to_string(),
    }
}

/// The VMs named as a node of this cluster, alive, and mapped by no cluster (of any age).
fn unmapped_vms<'a>(snap: &'a ClusterSnapshot, mapped: &[&Vm]) -> Vec<&'a Vm> {
    let mapped_ids: HashSet<&str> = mapped.iter().map(|vm| vm.id.as_str()).collect();
    snap.named
        .iter()
        .filter(|vm| {
            !mapped_ids.contains(vm.id.as_str())
                && !snap.mapped_elsewhere.contains(&vm.id)
                && !vm.state.is_dead()
        })
        .collect()
}

/// The API drops map rows whose VM was removed or never existed: only a count shows them.
/// Unmapped VMs (of any age) explain missing rows, as do vanished VMs already reported.
fn map_count(snap: &ClusterSnapshot, mapped: &[&Vm], unmapped: &[&Vm]) -> Option<Mismatch> {
    let expected = snap.cluster.expected_vms() as usize;
    let shown = mapped.len() + snap.vanished.len();
    (shown + unmapped.len() < expected).then_some(Mismatch {
        kind: MismatchKind::MapCount,
        subject: Subject::MapRows {
            shown: shown as u32,
            expected: expected as u32,
        },
    })
}

/// Whether a node whose identity says `i` is matched by its name, `by_identity` telling
/// whether some node is a VM of the cluster by its identity.
fn matched_by_name(by_identity: bool, i: &Identity) -> bool {
    !by_identity || *i == Identity::Unlisted
}

/// Which VM of the cluster each listed node is: by identity where some node is one by
/// identity, else by name.
struct NodeMatching {
    /// The VMs a node may be named like: mapped, and named as nodes of the cluster.
    live: Vec<VmRef>,
    /// The VMs a node may be: `live`, and those gone from the map.
    candidates: Vec<VmRef>,
    /// Of each node, in the listing's order, what its identity says.
    identity: Vec<Identity>,
    /// Whether some node is a VM of the cluster by its identity.
    by_identity: bool,
    /// The (lowercased) ids of the VMs a node is by its identity.
    held: HashSet<String>,
    /// The (lowercased) names of the VMs no node is by its identity.
    vm_labels: HashSet<String>,
    /// The host labels of the nodes matched by name.
    node_labels: HashSet<String>,
}

impl NodeMatching {
    fn new(snap: &ClusterSnapshot, mapped: &[&Vm], nodes: &[Node]) -> Self {
        // The VMs a node may be: mapped, named as nodes of the cluster, and gone from the map
        // (a node left behind by a gone VM is its `mapped_vm` finding, not one of its own).
        let live: Vec<VmRef> = mapped
            .iter()
            .copied()
            .chain(snap.named.iter())
            .map(vm_ref)
            .collect();
        let candidates: Vec<VmRef> = live
            .iter()
            .cloned()
            .chain(snap.vanished.iter().map(gone_ref))
            .collect();
        let pairs: Vec<(&str, &str)> = candidates
            .iter()
            .map(|vm| (vm.id.as_str(), vm.name.as_deref().unwrap_or("")))
            .collect();
        let identity = identify(nodes, &pairs);
        // Where no node is a VM of the cluster by its identity (a hypervisor whose system
        // UUID is not the CloudStack UUID, an `-o name` command), every node is matched by
        // name, as before identities were listed. Where some are, a node that lists an
        // identity is judged by it, and only one that lists none is matched by name.
        let by_identity = identity.iter().any(|i| matches!(i, Identity::Is(_)));
        let held: HashSet<String> = identity
            .iter()
            .filter_map(|i| match i {
                Identity::Is(k) => Some(candidates[*k].id.to_ascii_lowercase()),
                _ => None,
            })
            .collect();
        // A VM that a node is by identity is matched by no other node's name.
        let vm_labels: HashSet<String> = candidates
            .iter()
            .filter(|vm| !held.contains(&vm.id.to_ascii_lowercase()))
            .filter_map(|vm| vm.name.as_deref())
            .map(str::to_ascii_lowercase)
            .collect();
        let node_labels: HashSet<String> = nodes
            .iter()
            .zip(&identity)
            .filter(|(_, i)| matched_by_name(by_identity, i))
            .map(|(node, _)| host_label(&node.name))
            .collect();
        NodeMatching {
            live,
            candidates,
            identity,
            by_identity,
            held,
            vm_labels,
            node_labels,
        }
    }

    /// Whether a node whose identity says `i` is matched by its name.
    fn by_name(&self, i: &Identity) -> bool {
        matched_by_name(self.by_identity, i)
    }

    /// A `node_without_vm` finding for each node that is no VM of the cluster, and an
    /// `identity_conflict` for each that is one VM while named like another.
    fn nodes_without_vm(&self, nodes: &[Node], out: &mut Vec<Mismatch>) {
        let mut reported = HashSet::new();
        for (node, found) in nodes.iter().zip(&self.identity) {
            let name = node.name.to_ascii_lowercase();
            let label = host_label(&name);
            match *found {
                Identity::Is(k) | Identity::Claims(k) => {
                    let is = &self.candidates[k];
                    if let Some(named) = self.named_otherwise(is, &label) {
                        if reported.insert(name.clone()) {
                            out.push(Mismatch {
                                kind: MismatchKind::IdentityConflict,
                                subject: Subject::Conflict {
                                    node: name,
                                    is: is.clone(),
                                    named: named.clone(),
                                },
                            });
                        }
                        continue;
                    }
                    if matches!(found, Identity::Is(_)) {
                        continue;
                    }
                    // It claims a VM another node is, and is named like no other VM: no VM.
                }
                _ if self.by_name(found) && self.vm_labels.contains(&label) => continue,
                // Named like no VM; or, where other nodes are VMs by identity, one whose
                // identity is no VM of the cluster, whatever its name: no VM.
                _ => {}
            }
            if !reported.insert(name.clone()) {
                continue;
            }
            out.push(Mismatch {
                kind: MismatchKind::NodeWithoutVm,
                subject: Subject::Node(name),
            });
        }
    }

    /// The VM a node whose identity says it `is` one VM is named like, when that is another.
    fn named_otherwise(&self, is: &VmRef, label: &str) -> Option<&VmRef> {
        let named = self.live.iter().find(|vm| {
            vm.name
                .as_deref()
                .is_some_and(|n| n.eq_ignore_ascii_case(label))
        });
        let named_like_it = is
            .name
            .as_deref()
            .is_some_and(|n| n.eq_ignore_ascii_case(label));
        named.filter(|_| !named_like_it)
    }

    /// A `vm_not_a_node` finding for each mapped Running VM, settled past the grace period,
    /// that no node is.
    fn vms_not_nodes(&self, mapped: &[&Vm], cutoff: Timestamp, out: &mut Vec<Mismatch>) {
        for vm in mapped {
            if vm.state != VmState::Running || vm.etcd {
                continue;
            }
            if self.held.contains(&vm.id.to_ascii_lowercase())
                || self.node_labels.contains(&vm.name.to_ascii_lowercase())
            {
                continue;
            }
            let settled = vm.created.into_iter().chain(vm.last_updated).max();
            if settled.is_some_and(|t| t > cutoff) {
                continue;
            }
            out.push(Mismatch::vm_finding(MismatchKind::VmNotANode, vm));
        }
    }
}

#[cfg(test)]
mod tests;
