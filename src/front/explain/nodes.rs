//! The node lines: every listed node with the VM it matches, as the diff matches them, and
//! the rule that applied.

use std::collections::HashSet;

use super::NodeLine;
use crate::diff::identity::{Identity, host_label, identify};
use crate::diff::{Mismatch, Subject};
use crate::remote::Readiness;
use crate::snapshot::{ClusterSnapshot, NodeView, Vm};

/// For each listed node, how it matched a VM of the cluster (`(id, name)`), as the diff
/// matches them: by system UUID or provider ID where any node is a VM so, else by name.
/// `None` when the nodes were not listed.
#[allow(clippy::type_complexity)]
pub(super) fn node_matches(
    snap: &ClusterSnapshot,
) -> Option<Vec<(Identity, Option<(String, String)>)>> {
    let NodeView::Listed(nodes) = &snap.nodes else {
        return None;
    };
    let vms: Vec<&Vm> = snap.mapped.iter().chain(&snap.named).collect();
    let pairs: Vec<(&str, &str)> = vms
        .iter()
        .map(|vm| (vm.id.as_str(), vm.name.as_str()))
        .collect();
    let identity = identify(nodes, &pairs);
    let by_identity = identity.iter().any(|i| matches!(i, Identity::Is(_)));
    Some(
        nodes
            .iter()
            .zip(identity)
            .map(|(node, i)| {
                let vm = match i {
                    Identity::Is(k) => Some(vms[k]),
                    Identity::Unlisted | Identity::Foreign
                        if !by_identity || i == Identity::Unlisted =>
                    {
                        let label = host_label(&node.name);
                        vms.iter()
                            .copied()
                            .find(|vm| vm.name.eq_ignore_ascii_case(&label))
                    }
                    _ => None,
                };
                (i, vm.map(|vm| (vm.id.clone(), vm.name.clone())))
            })
            .collect(),
    )
}

/// Every listed node with the VM it matches and the rule that applied, or `None` when the
/// nodes were not listed.
pub(super) fn node_lines(
    snap: &ClusterSnapshot,
    found: &[Mismatch],
    findings: &HashSet<String>,
) -> Option<Vec<NodeLine>> {
    let NodeView::Listed(nodes) = &snap.nodes else {
        return None;
    };
    let matches = node_matches(snap)?;
    let gone: HashSet<String> = snap
        .vanished
        .iter()
        .filter_map(|v| v.name.as_ref())
        .map(|n| n.to_ascii_lowercase())
        .collect();
    Some(
        nodes
            .iter()
            .zip(matches)
            .map(|(node, (identity, vm))| {
                let conflict = found.iter().find_map(|m| match &m.subject {
                    Subject::Conflict { node: n, is, named } if *n == node.name => {
                        Some((is, named))
                    }
                    _ => None,
                });
                let without = format!("node_without_vm:{}", node.name);
                let (finding, verdict) = if let Some((is, named)) = conflict {
                    (
                        Some(format!("identity_conflict:{}", node.name)),
                        format!(
                            "finding identity_conflict: named like VM {} ({}), but its system \
                             UUID or provider ID is VM {} ({})",
                            named.name.as_deref().unwrap_or("?"),
                            named.id,
                            is.name.as_deref().unwrap_or("?"),
                            is.id
                        ),
                    )
                } else if findings.contains(&without) {
                    let why = match identity {
                        Identity::Foreign => {
                            "its system UUID or provider ID is no VM of the cluster"
                        }
                        Identity::Claims(_) => "the VM its system UUID names is another node's",
                        _ => "no VM of the cluster has its name",
                    };
                    (Some(without), format!("finding node_without_vm: {why}"))
                } else if let (Identity::Is(_), Some((_, name))) = (identity, &vm) {
                    let renamed = if name.eq_ignore_ascii_case(&host_label(&node.name)) {
                        ""
                    } else {
                        "; its name differs (a VM renamed in CloudStack, or a node renamed by its \
                         tenant), which is no finding"
                    };
                    (
                        None,
                        format!(
                            "is a VM of the cluster by its system UUID or provider ID{renamed}"
                        ),
                    )
                } else if vm.is_some() {
                    (None, "matches a VM of the cluster by name".to_string())
                } else if gone.contains(&host_label(&node.name)) {
                    (
                        None,
                        "named like a mapped VM that is gone (reported as mapped_vm)".to_string(),
                    )
                } else {
                    (None, "matches no VM of the cluster".to_string())
                };
                NodeLine {
                    name: node.name.clone(),
                    ready: node.ready.map(Readiness::as_str),
                    system_uuid: node.system_uuid.clone(),
                    provider_id: node.provider_id.clone(),
                    vm: vm.map(|(id, name)| format!("{name} ({id})")),
                    finding,
                    verdict,
                }
            })
            .collect(),
    )
}
