//! Which findings the management server's own VM map check reports too (apache/cloudstack
//! PR 14666, where a release carries it): it compares by names, as `kubectl get nodes -o
//! name` gives them, so of cks-drift's findings it reports every finding of the VM side that
//! the map and the VMs show (`mapped_vm`, `unmapped_vm`), a node whose name (or the first
//! label of it, for a node registered under its VM's FQDN) is no VM's of the cluster, and a
//! mapped VM whose name is no node's. What cks-drift finds beyond that (by identity, a blind
//! cluster, `map_count`) the server does not report. Pure.

use std::collections::{BTreeSet, HashSet};

use super::identity::host_label;
use super::{FindingKey, Mismatch, MismatchKind};
use crate::snapshot::{ClusterSnapshot, NodeView};

/// The keys of `mismatches` (found in `snapshot`) that the server's check reports itself.
pub fn reported_by_name(
    snapshot: &ClusterSnapshot,
    mismatches: &[Mismatch],
) -> BTreeSet<FindingKey> {
    let vm_names: HashSet<String> = snapshot
        .mapped
        .iter()
        .chain(&snapshot.named)
        .map(|vm| vm.name.to_ascii_lowercase())
        .collect();
    let node_names: HashSet<String> = match &snapshot.nodes {
        NodeView::Listed(nodes) => nodes.iter().map(|n| host_label(&n.name)).collect(),
        NodeView::Unknown { .. } => HashSet::new(),
    };
    mismatches
        .iter()
        .filter(|m| match m.kind {
            MismatchKind::MappedVm | MismatchKind::UnmappedVm => true,
            MismatchKind::NodeWithoutVm => m
                .node()
                .is_some_and(|node| !vm_names.contains(&host_label(node))),
            MismatchKind::VmNotANode => m
                .vm()
                .and_then(|vm| vm.name.as_deref())
                .is_some_and(|name| !node_names.contains(&name.to_ascii_lowercase())),
            MismatchKind::MapCount | MismatchKind::Blind | MismatchKind::IdentityConflict => false,
        })
        .map(Mismatch::key)
        .collect()
}
