//! The comparison of a cluster's three views: a pure function from a `ClusterSnapshot`, the
//! policy and the current time to the list of mismatches. No clock, network or environment.
//!
//! Semantics follow the in-server check proposed upstream (apache/cloudstack PR 14666), with
//! one addition an API client needs: map rows the API hides can only show as a count gap.

use std::collections::HashSet;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::snapshot::{ClusterSnapshot, NodeView, VanishedHow, Vm, VmState};
use crate::time::Timestamp;

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
    /// A Kubernetes node that matches no VM of the cluster.
    NodeWithoutVm,
    /// A mapped Running VM that is not a Kubernetes node.
    VmNotANode,
    /// The map lists fewer VMs than the cluster should have, and no unmapped VM explains it.
    MapCount,
}

impl MismatchKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MismatchKind::MappedVm => "mapped_vm",
            MismatchKind::UnmappedVm => "unmapped_vm",
            MismatchKind::NodeWithoutVm => "node_without_vm",
            MismatchKind::VmNotANode => "vm_not_a_node",
            MismatchKind::MapCount => "map_count",
        }
    }

    /// Which comparison found it: the map against the VMs, or against the Kubernetes nodes.
    pub fn side(self) -> Side {
        match self {
            MismatchKind::MappedVm | MismatchKind::UnmappedVm | MismatchKind::MapCount => Side::Vms,
            MismatchKind::NodeWithoutVm | MismatchKind::VmNotANode => Side::Nodes,
        }
    }

    pub const ALL: [MismatchKind; 5] = [
        MismatchKind::MappedVm,
        MismatchKind::UnmappedVm,
        MismatchKind::NodeWithoutVm,
        MismatchKind::VmNotANode,
        MismatchKind::MapCount,
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

/// One mismatch in one cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mismatch {
    pub kind: MismatchKind,
    pub vm_id: Option<String>,
    pub vm_name: Option<String>,
    pub vm_state: Option<String>,
    pub node: Option<String>,
    /// One line for a person.
    pub reason: String,
}

impl Mismatch {
    /// The dedupe key: stable while the same thing stays wrong. A mapped VM keeps its key as
    /// it goes from Destroyed to Expunging to gone.
    pub fn key(&self) -> String {
        let subject = match self.kind {
            MismatchKind::NodeWithoutVm => self.node.clone().unwrap_or_default(),
            MismatchKind::MapCount => self.vm_state.clone().unwrap_or_default(),
            _ => self.vm_id.clone().unwrap_or_default(),
        };
        format!("{}:{subject}", self.kind.as_str())
    }

    pub fn side(&self) -> Side {
        self.kind.side()
    }

    fn vm(kind: MismatchKind, vm: &Vm, reason: String) -> Self {
        Mismatch {
            kind,
            vm_id: Some(vm.id.clone()),
            vm_name: Some(vm.name.clone()),
            vm_state: Some(vm.state.as_str().to_string()),
            node: None,
            reason,
        }
    }
}

/// The first DNS label, lowercased: a node registered under its VM's FQDN matches the VM.
fn host_label(name: &str) -> String {
    name.split('.').next().unwrap_or(name).to_ascii_lowercase()
}

/// Compares the three views of one cluster. The result is sorted by kind, then subject.
pub fn diff(snap: &ClusterSnapshot, policy: &Policy, now: Timestamp) -> Vec<Mismatch> {
    let cluster = &snap.cluster.name;
    let cutoff = now.minus(policy.grace_period);
    let mut out = Vec::new();

    // A VM listed twice in `virtualmachines` is one mapped VM.
    let mut seen = HashSet::new();
    let mapped: Vec<&Vm> = snap
        .mapped
        .iter()
        .filter(|vm| seen.insert(vm.id.as_str()))
        .collect();
    let mapped_ids: HashSet<&str> = mapped.iter().map(|vm| vm.id.as_str()).collect();

    for vm in &mapped {
        let what = match vm.state {
            VmState::Destroyed => "is destroyed",
            VmState::Expunging => "has been or is being expunged",
            VmState::Error => "is in Error state",
            _ => continue,
        };
        let reason = format!(
            "VM {} ({}) is one of the VMs of Kubernetes cluster {cluster} in CloudStack, but {what}",
            vm.name, vm.id
        );
        out.push(Mismatch::vm(MismatchKind::MappedVm, vm, reason));
    }

    for gone in &snap.vanished {
        let (state, what) = match gone.how {
            VanishedHow::Expunged => ("Expunged", "has been expunged or unmanaged"),
            VanishedHow::DoesNotExist => ("Missing", "does not exist"),
        };
        let subject = match &gone.name {
            Some(name) => format!("VM {name} ({})", gone.id),
            None => format!("VM with ID {}", gone.id),
        };
        out.push(Mismatch {
            kind: MismatchKind::MappedVm,
            vm_id: Some(gone.id.clone()),
            vm_name: gone.name.clone(),
            vm_state: Some(state.to_string()),
            node: None,
            reason: format!(
                "{subject} is one of the VMs of Kubernetes cluster {cluster} in CloudStack, but {what}"
            ),
        });
    }

    // Named as a node of this cluster, alive, and mapped by no cluster.
    let unmapped: Vec<&Vm> = snap
        .named
        .iter()
        .filter(|vm| {
            !mapped_ids.contains(vm.id.as_str())
                && !snap.mapped_elsewhere.contains(&vm.id)
                && !vm.state.is_dead()
        })
        .collect();
    for vm in &unmapped {
        let created = vm
            .created
            .or_else(|| crate::naming::created_from_name(&vm.name));
        if created.is_some_and(|t| t > cutoff) {
            continue;
        }
        let reason = format!(
            "VM {} ({}, {}) is named as a node of Kubernetes cluster {cluster} but is not one of its VMs in CloudStack",
            vm.name,
            vm.id,
            vm.state.as_str()
        );
        out.push(Mismatch::vm(MismatchKind::UnmappedVm, vm, reason));
    }

    // The API drops map rows whose VM was removed or never existed: only a count shows them.
    // Unmapped VMs (of any age) explain missing rows, as do vanished VMs already reported.
    let expected = snap.cluster.expected_vms() as usize;
    let shown = mapped.len() + snap.vanished.len();
    if shown + unmapped.len() < expected {
        let missing = expected - shown;
        out.push(Mismatch {
            kind: MismatchKind::MapCount,
            vm_id: None,
            vm_name: None,
            vm_state: Some(format!("{shown}/{expected}")),
            node: None,
            reason: format!(
                "Kubernetes cluster {cluster} should have {expected} VMs (control nodes + size + etcd nodes) but its VM map shows {shown}: {missing} map rows are missing or point to removed VMs"
            ),
        });
    }

    if let NodeView::Listed(nodes) = &snap.nodes {
        let vm_labels: HashSet<String> = mapped
            .iter()
            .copied()
            .chain(snap.named.iter())
            .map(|vm| vm.name.to_ascii_lowercase())
            .chain(
                snap.vanished
                    .iter()
                    .filter_map(|v| v.name.as_ref())
                    .map(|n| n.to_ascii_lowercase()),
            )
            .collect();
        let node_labels: HashSet<String> = nodes.iter().map(|n| host_label(n)).collect();

        let mut reported = HashSet::new();
        for node in nodes {
            let node = node.to_ascii_lowercase();
            if vm_labels.contains(&host_label(&node)) || !reported.insert(node.clone()) {
                continue;
            }
            out.push(Mismatch {
                kind: MismatchKind::NodeWithoutVm,
                vm_id: None,
                vm_name: None,
                vm_state: None,
                reason: format!(
                    "Kubernetes node {node} of cluster {cluster} matches no VM of the cluster in CloudStack"
                ),
                node: Some(node),
            });
        }

        for vm in &mapped {
            if vm.state != VmState::Running || vm.etcd {
                continue;
            }
            if node_labels.contains(&vm.name.to_ascii_lowercase()) {
                continue;
            }
            let settled = vm.created.into_iter().chain(vm.last_updated).max();
            if settled.is_some_and(|t| t > cutoff) {
                continue;
            }
            let reason = format!(
                "VM {} ({}) of Kubernetes cluster {cluster} is running but is not a Kubernetes node of the cluster",
                vm.name, vm.id
            );
            out.push(Mismatch::vm(MismatchKind::VmNotANode, vm, reason));
        }
    }

    out.sort_by_key(|m| (m.kind, m.key()));
    out
}

#[cfg(test)]
mod tests;
