//! Which VM of a cluster each Kubernetes node is by identity rather than by name: its system
//! UUID, which on KVM is the VM's CloudStack UUID, or the VM id in its provider ID where the
//! CloudStack cloud provider runs. A node's name is what its kubelet chose; its identity is
//! what the hypervisor gave the machine.
//!
//! Pure. Only the VMs the caller passes (the cluster's own) are candidates, so a node never
//! claims a VM outside its cluster. What a node that is no VM, or is one VM while named like
//! another, means is the diff's to decide.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use crate::snapshot::Node;

/// The first DNS label of a node name, lowercased: a node registered under its VM's FQDN
/// is named like the VM.
pub fn host_label(name: &str) -> String {
    name.split('.').next().unwrap_or(name).to_ascii_lowercase()
}

/// The VM id a provider ID names: the last path segment of `<provider>://<path>`.
///
/// The CloudStack cloud provider (apache/cloudstack-kubernetes-provider) sets
/// `cloudstack:///<vm uuid>` (`getInstanceProviderID` in cloudstack/cloudstack_instances.go:
/// `fmt.Sprintf("%s:///%s", ProviderName, instance.Id)`, with `ProviderName = "cloudstack"` in
/// cloudstack/cloudstack.go); its earlier releases registered as `external-cloudstack`
/// (`ProviderName` in the top-level cloudstack.go). Any provider's ID whose last segment is a
/// VM id of the cluster names that VM; any other names none.
pub fn provider_vm_id(provider_id: &str) -> Option<&str> {
    let (_, path) = provider_id.split_once("://")?;
    path.rsplit('/').next().filter(|id| !id.is_empty())
}

/// What a node is by its identity, among a cluster's VMs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identity {
    /// It is this VM (an index into the candidates): its system UUID is the VM's id, or else
    /// its provider ID names the VM, and no other node is that VM.
    Is(usize),
    /// It claims this VM, but another node is it: a VM is at most one node's, and of several
    /// nodes that claim it the one named like it keeps it (else the first listed). A copied
    /// UUID cannot hide a node.
    Claims(usize),
    /// It lists a system UUID or provider ID of a kind that names the cluster's VMs (some
    /// node's does), but neither is a VM of the cluster.
    Foreign,
    /// It lists neither (an `-o name` command, or an empty system UUID), or only of a kind
    /// that names none of the cluster's VMs: system UUIDs that are not CloudStack's UUIDs (as
    /// on VMware), the bare `external-cloudstack` of cloud provider releases that set no id.
    Unlisted,
}

/// What each node is by identity, in order, among `vms` (`(id, name)` pairs; an id listed
/// twice is the first). Ids compare case-insensitively.
pub fn identify(nodes: &[Node], vms: &[(&str, &str)]) -> Vec<Identity> {
    let mut index: HashMap<String, usize> = HashMap::with_capacity(vms.len());
    for (k, (id, _)) in vms.iter().enumerate() {
        index.entry(id.to_ascii_lowercase()).or_insert(k);
    }
    let lookup = |id: &str| index.get(&id.to_ascii_lowercase()).copied();
    let claims: Vec<Option<usize>> = nodes
        .iter()
        .map(|node| {
            node.system_uuid.as_deref().and_then(lookup).or_else(|| {
                node.provider_id
                    .as_deref()
                    .and_then(provider_vm_id)
                    .and_then(lookup)
            })
        })
        .collect();
    // Each kind of identity counts where it works in this cluster: system UUIDs where some
    // node's names a VM of the cluster (KVM, not VMware), provider IDs where some node's does
    // (after an upgrade of the cloud provider, a cluster can hold both kinds of node).
    let uuids_work = nodes
        .iter()
        .any(|n| n.system_uuid.as_deref().and_then(lookup).is_some());
    let providers_work = nodes.iter().any(|n| {
        n.provider_id
            .as_deref()
            .and_then(provider_vm_id)
            .and_then(lookup)
            .is_some()
    });
    let lists_working = |node: &Node| {
        (uuids_work && node.system_uuid.is_some())
            || (providers_work
                && node
                    .provider_id
                    .as_deref()
                    .and_then(provider_vm_id)
                    .is_some())
    };
    let named_like =
        |i: usize, k: usize| host_label(&nodes[i].name) == vms[k].1.to_ascii_lowercase();
    let mut holder: HashMap<usize, usize> = HashMap::new();
    for (i, claim) in claims.iter().enumerate() {
        let Some(k) = *claim else {
            continue;
        };
        match holder.entry(k) {
            Entry::Vacant(e) => {
                e.insert(i);
            }
            Entry::Occupied(mut e) => {
                if !named_like(*e.get(), k) && named_like(i, k) {
                    e.insert(i);
                }
            }
        }
    }
    nodes
        .iter()
        .zip(&claims)
        .enumerate()
        .map(|(i, (node, claim))| match *claim {
            Some(k) if holder.get(&k) == Some(&i) => Identity::Is(k),
            Some(k) => Identity::Claims(k),
            None if lists_working(node) => Identity::Foreign,
            None => Identity::Unlisted,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str = "0f9e8d7c-6b5a-4c3d-2e1f-0a9b8c7d6e5f";
    const V2: &str = "5d1c00c8-7a2b-4c3d-8e9f-0a1b2c3d4e5f";

    fn node(name: &str, uuid: Option<&str>, provider: Option<&str>) -> Node {
        Node::identified(name, uuid, provider)
    }

    const VMS: [(&str, &str); 2] = [(V1, "web-node-1"), (V2, "web-node-2")];

    #[test]
    fn provider_ids_name_their_last_segment() {
        assert_eq!(provider_vm_id(&format!("cloudstack:///{V1}")), Some(V1));
        assert_eq!(
            provider_vm_id(&format!("external-cloudstack:///{V1}")),
            Some(V1)
        );
        assert_eq!(
            provider_vm_id("kind://docker/kind/kind-worker"),
            Some("kind-worker")
        );
        assert_eq!(provider_vm_id("cloudstack:///"), None);
        assert_eq!(provider_vm_id("cloudstack:///x/"), None);
        assert_eq!(provider_vm_id(V1), None);
    }

    #[test]
    fn host_labels() {
        assert_eq!(host_label("Web-Node-1.k8s.example.com"), "web-node-1");
        assert_eq!(host_label("web-node-1"), "web-node-1");
    }

    use Identity::*;

    #[test]
    fn a_node_is_the_vm_its_uuid_is_whatever_its_name() {
        let nodes = [
            node("renamed-by-tenant", Some(&V2.to_uppercase()), None),
            node("web-node-1", Some(V1), None),
        ];
        assert_eq!(identify(&nodes, &VMS), [Is(1), Is(0)]);
    }

    #[test]
    fn the_provider_id_counts_when_the_uuid_is_no_vm() {
        let nodes = [
            node(
                "a",
                Some("4230b1d7-0000-0000-0000-000000000000"),
                Some(&format!("cloudstack:///{V2}")),
            ),
            node(
                "b",
                None,
                Some(&format!("external-cloudstack:///{}", V1.to_uppercase())),
            ),
            node("c", Some(V1), Some(&format!("cloudstack:///{V2}"))),
        ];
        // The system UUID wins over the provider ID; `b` and `c` both are V1 by then, and
        // neither is named like it, so the first listed keeps it. `a` is V2.
        assert_eq!(identify(&nodes, &VMS), [Is(1), Is(0), Claims(0)]);
    }

    #[test]
    fn nodes_with_no_identity_or_another_clusters_uuid_are_no_vm() {
        let nodes = [
            node("web-node-1", None, None),
            node(
                "web-node-2",
                Some("00000000-0000-0000-0000-000000000000"),
                Some("cloudstack:///elsewhere"),
            ),
            node("web-node-3", None, Some("kind://docker/kind/web-node-3")),
            // Both kinds name a VM of this cluster here.
            node("x", Some(V2), Some(&format!("cloudstack:///{V2}"))),
        ];
        assert_eq!(identify(&nodes, &VMS), [Unlisted, Foreign, Foreign, Is(1)]);
        // Where no node's identity names a VM of the cluster, none is judged by it.
        assert_eq!(identify(&nodes[..3], &VMS), [Unlisted, Unlisted, Unlisted]);
    }

    /// After an upgrade of the cloud provider: the control node by its provider ID
    /// (`external-cloudstack://<uuid>`), the workers with the bare `external-cloudstack` and
    /// VMware system UUIDs, which name no VM of the cluster. System UUIDs do not work here, so
    /// the workers list nothing that counts, and are matched by name.
    #[test]
    fn each_kind_of_identity_counts_only_where_it_names_the_clusters_vms() {
        let vmware = "4230b1d7-0000-0000-0000-000000000000";
        let nodes = [
            node(
                "web-control",
                Some(vmware),
                Some(&format!("external-cloudstack://{V1}")),
            ),
            node(
                "web-node-2",
                Some("4230b1d7-1111-0000-0000-000000000000"),
                Some("external-cloudstack"),
            ),
            node(
                "planted",
                Some("4230b1d7-2222-0000-0000-000000000000"),
                Some("external-cloudstack"),
            ),
            // A provider ID of the working kind that names no VM is foreign.
            node(
                "other",
                None,
                Some("external-cloudstack://4230b1d7-3333-0000-0000-000000000000"),
            ),
        ];
        assert_eq!(identify(&nodes, &VMS), [Is(0), Unlisted, Unlisted, Foreign]);
    }

    #[test]
    fn of_two_nodes_with_one_uuid_the_one_named_like_the_vm_keeps_it() {
        let nodes = [
            node("copy", Some(V1), None),
            node("web-node-1.k8s.example.com", Some(V1), None),
            node("another-copy", Some(V1), None),
        ];
        assert_eq!(identify(&nodes, &VMS), [Claims(0), Is(0), Claims(0)]);
    }

    #[test]
    fn a_vm_listed_twice_is_one_candidate() {
        let vms = [(V1, "web-node-1"), (V2, "web-node-2"), (V1, "web-node-1")];
        let nodes = [node("x", Some(V1), None)];
        assert_eq!(identify(&nodes, &vms), [Is(0)]);
    }
}
