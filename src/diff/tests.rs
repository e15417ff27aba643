//! Table tests of `diff`: every case upstream reports, and the cases it must not report.

use std::collections::BTreeSet;

use super::*;
use crate::diff::wording::reason;
use crate::snapshot::{ClusterInfo, Node, Owner, VanishedVm};

const NOW: i64 = 1_800_000_000;
const HOUR: i64 = 60;

/// Nodes known by their names only, as an `-o name` command lists them.
fn listed(names: &[&str]) -> NodeView {
    NodeView::Listed(names.iter().map(|n| Node::named(*n)).collect())
}

/// A VM created `age` minutes ago, last changed `changed` minutes ago.
fn vm(id: &str, name: &str, state: &str, age: i64, changed: i64) -> Vm {
    Vm {
        id: id.into(),
        name: name.into(),
        state: VmState::parse(state),
        created: Some(Timestamp::from_unix(NOW - age * 60)),
        last_updated: Some(Timestamp::from_unix(NOW - changed * 60)),
        etcd: false,
    }
}

fn old(id: &str, name: &str, state: &str) -> Vm {
    vm(id, name, state, 10 * HOUR, 10 * HOUR)
}

fn snapshot(
    control: u32,
    size: u32,
    mapped: Vec<Vm>,
    named: Vec<Vm>,
    nodes: Option<&[&str]>,
) -> ClusterSnapshot {
    ClusterSnapshot {
        cluster: ClusterInfo {
            id: "c-1".into(),
            name: "web".into(),
            zone_id: Some("z-1".into()),
            state: "Running".into(),
            owner: Some(Owner::Account {
                domain_id: "d".into(),
                account: "a".into(),
            }),
            control_nodes: control,
            size,
            etcd_nodes: 0,
        },
        mapped,
        named,
        mapped_elsewhere: BTreeSet::new(),
        vanished: vec![],
        nodes: match nodes {
            Some(n) => listed(n),
            None => NodeView::Unknown {
                reason: "ssh failed".into(),
            },
        },
    }
}

/// A healthy 1+2 cluster: all VMs mapped, named and nodes.
fn healthy() -> ClusterSnapshot {
    let vms = vec![
        old("v1", "web-control-1803b55c32d", "Running"),
        old("v2", "web-node-1803b55f08c", "Running"),
        old("v3", "web-node-1803b55f99a", "Running"),
    ];
    snapshot(
        1,
        2,
        vms.clone(),
        vms,
        Some(&[
            "web-control-1803b55c32d",
            "web-node-1803b55f08c",
            "web-node-1803b55f99a",
        ]),
    )
}

fn run(snap: &ClusterSnapshot) -> Vec<(MismatchKind, String)> {
    diff(snap, &Policy::default(), Timestamp::from_unix(NOW))
        .into_iter()
        .map(|m| (m.kind, m.key().to_string()))
        .collect()
}

use MismatchKind::*;

#[test]
fn healthy_cluster_has_no_mismatch() {
    assert_eq!(run(&healthy()), vec![]);
}

#[test]
fn mapped_vm_destroyed_expunging_error() {
    for (state, words) in [
        ("Destroyed", "is destroyed"),
        ("Expunging", "has been or is being expunged"),
        ("Error", "is in Error state"),
    ] {
        let mut s = healthy();
        s.mapped[2].state = VmState::parse(state);
        s.named[2].state = VmState::parse(state);
        let found = diff(&s, &Policy::default(), Timestamp::from_unix(NOW));
        assert_eq!(found.len(), 1, "{state}: {found:?}");
        let m = &found[0];
        assert_eq!(
            (m.kind, m.key().to_string()),
            (MappedVm, "mapped_vm:v3".to_string()),
            "{state}"
        );
        assert_eq!(m.vm().map(|v| v.state.as_str()), Some(state));
        assert_eq!(
            reason("web", m),
            format!(
                "VM web-node-1803b55f99a (v3) is one of the VMs of Kubernetes cluster web in CloudStack, but {words}"
            )
        );
    }
}

#[test]
fn mapped_vm_keeps_its_key_through_destroyed_expunging_gone() {
    let mut s = healthy();
    s.mapped[2].state = VmState::Destroyed;
    let k1 = run(&s);
    s.mapped[2].state = VmState::Expunging;
    let k2 = run(&s);
    // Expunged: the API lists it neither in the map nor among the owner's VMs.
    let gone = s.mapped.remove(2);
    s.named.remove(2);
    s.vanished.push(VanishedVm {
        id: gone.id,
        name: Some(gone.name),
        how: VanishedHow::Expunged,
    });
    let k3 = run(&s);
    assert_eq!(k1, vec![(MappedVm, "mapped_vm:v3".to_string())]);
    assert_eq!(k1, k2);
    // Gone: same key. Its Kubernetes node is still listed and matches the name the VM had,
    // so the one cause is not reported twice.
    assert_eq!(k3, vec![(MappedVm, "mapped_vm:v3".to_string())]);
}

#[test]
fn vanished_vm_that_never_existed() {
    let mut s = healthy();
    s.mapped.remove(2);
    s.named.remove(2);
    s.vanished.push(VanishedVm {
        id: "999999".into(),
        name: None,
        how: VanishedHow::DoesNotExist,
    });
    let found = diff(&s, &Policy::default(), Timestamp::from_unix(NOW));
    let kinds: Vec<_> = found
        .iter()
        .map(|m| (m.kind, m.key().to_string()))
        .collect();
    // The node web-node-1803b55f99a now has no VM; no map_count, the vanished row explains it.
    assert_eq!(
        kinds,
        vec![
            (MappedVm, "mapped_vm:999999".to_string()),
            (
                NodeWithoutVm,
                "node_without_vm:web-node-1803b55f99a".to_string()
            )
        ]
    );
    assert_eq!(
        reason("web", &found[0]),
        "VM with ID 999999 is one of the VMs of Kubernetes cluster web in CloudStack, but does not exist"
    );
    assert_eq!(found[0].vm().map(|v| v.state.as_str()), Some("Missing"));
}

#[test]
fn unmapped_vm_is_reported_after_grace_only() {
    let mut s = healthy();
    // Its map row was deleted: the API no longer lists it in the map.
    s.mapped.remove(1);
    assert_eq!(run(&s), vec![(UnmappedVm, "unmapped_vm:v2".to_string())]);
    let m = &diff(&s, &Policy::default(), Timestamp::from_unix(NOW))[0];
    assert_eq!(
        reason("web", m),
        "VM web-node-1803b55f08c (v2, Running) is named as a node of Kubernetes cluster web but is not one of its VMs in CloudStack"
    );

    // Created 10 minutes ago: still within the 15-minute grace, and it explains the gap.
    let mut young = healthy();
    young.mapped.remove(1);
    young.named[1] = vm("v2", "web-node-1803b55f08c", "Running", 10, 10);
    assert_eq!(run(&young), vec![]);

    // Exactly at the boundary (15 minutes) it is reported.
    young.named[1] = vm("v2", "web-node-1803b55f08c", "Running", 15, 15);
    assert_eq!(
        run(&young),
        vec![(UnmappedVm, "unmapped_vm:v2".to_string())]
    );
}

#[test]
fn unmapped_vms_that_must_not_be_reported() {
    for state in ["Destroyed", "Expunging", "Error"] {
        let mut s = healthy();
        s.named.push(old("v9", "web-node-1803b560000", state));
        assert_eq!(run(&s), vec![], "{state}");
    }
    // Mapped by another cluster (a cluster renamed onto the same prefix, say).
    let mut s = healthy();
    s.named.push(old("v9", "web-node-1803b560000", "Running"));
    s.mapped_elsewhere.insert("v9".into());
    assert_eq!(run(&s), vec![]);
}

#[test]
fn stopped_unmapped_vm_is_reported() {
    let mut s = healthy();
    s.named.push(old("v9", "web-node-1803b560000", "Stopped"));
    assert_eq!(run(&s), vec![(UnmappedVm, "unmapped_vm:v9".to_string())]);
}

#[test]
fn unmapped_vm_without_created_uses_the_name_time() {
    let mut s = healthy();
    // 0x1a2c0000000 ms is far in the past relative to NOW; the VM has no `created`.
    let mut v = old("v9", "web-node-1a2c0000000", "Running");
    v.created = None;
    s.named.push(v);
    assert_eq!(run(&s), vec![(UnmappedVm, "unmapped_vm:v9".to_string())]);
}

#[test]
fn node_without_vm() {
    let mut s = healthy();
    s.nodes = listed(&[
        "web-control-1803b55c32d",
        "web-node-1803b55f08c",
        "web-node-1803b55f99a",
        "stray-node",
    ]);
    let found = diff(&s, &Policy::default(), Timestamp::from_unix(NOW));
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].key().to_string(), "node_without_vm:stray-node");
    assert_eq!(found[0].node(), Some("stray-node"));
    assert_eq!(
        reason("web", &found[0]),
        "Kubernetes node stray-node of cluster web matches no VM of the cluster in CloudStack"
    );
}

#[test]
fn fqdn_and_case_insensitive_node_names_match() {
    let mut s = healthy();
    s.nodes = listed(&[
        "web-control-1803b55c32d.cluster.local",
        "WEB-NODE-1803B55F08C",
        "web-node-1803b55f99a.example.com",
    ]);
    assert_eq!(run(&s), vec![]);
}

#[test]
fn old_era_uppercase_vm_names_match_lowercase_nodes() {
    let vms = vec![
        old("v1", "Prod-control-1803b55c32d", "Running"),
        old("v2", "Prod-node-1803b55f08c", "Running"),
    ];
    let mut s = snapshot(
        1,
        1,
        vms.clone(),
        vms,
        Some(&["prod-control-1803b55c32d", "prod-node-1803b55f08c"]),
    );
    s.cluster.name = "Prod".into();
    assert_eq!(run(&s), vec![]);
}

#[test]
fn node_of_an_unmapped_vm_is_not_also_a_node_without_vm() {
    // Upstream scenario 2: only the unmapped VM is reported.
    let mut s = healthy();
    s.mapped.remove(2);
    assert_eq!(run(&s), vec![(UnmappedVm, "unmapped_vm:v3".to_string())]);
}

#[test]
fn running_vm_that_is_not_a_node() {
    let mut s = healthy();
    s.nodes = listed(&["web-control-1803b55c32d", "web-node-1803b55f08c"]);
    let found = diff(&s, &Policy::default(), Timestamp::from_unix(NOW));
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].key().to_string(), "vm_not_a_node:v3");
    assert_eq!(
        reason("web", &found[0]),
        "VM web-node-1803b55f99a (v3) of Kubernetes cluster web is running but is not a Kubernetes node of the cluster"
    );
}

#[test]
fn not_a_node_cases_that_must_not_be_reported() {
    let names = ["web-control-1803b55c32d", "web-node-1803b55f08c"];
    // Recently started (last state change 5 minutes ago): still joining.
    let mut s = healthy();
    s.mapped[2] = vm("v3", "web-node-1803b55f99a", "Running", 10 * HOUR, 5);
    s.nodes = listed(&names);
    assert_eq!(run(&s), vec![]);
    // Recently created.
    s.mapped[2] = vm("v3", "web-node-1803b55f99a", "Running", 3, 3);
    assert_eq!(run(&s), vec![]);
    // Stopped VMs are not "not a node".
    s.mapped[2] = old("v3", "web-node-1803b55f99a", "Stopped");
    assert_eq!(run(&s), vec![]);
    // etcd VMs are never nodes.
    s.mapped[2] = old("v3", "web-etcd-1-1803b55f99a", "Running");
    s.mapped[2].etcd = true;
    assert_eq!(run(&s), vec![]);
}

#[test]
fn nodes_unknown_compares_vms_only() {
    let mut s = healthy();
    s.nodes = NodeView::Unknown {
        reason: "ssh failed".into(),
    };
    s.mapped.remove(1);
    assert_eq!(run(&s), vec![(UnmappedVm, "unmapped_vm:v2".to_string())]);
    // A Running mapped VM can't be judged "not a node" without the node list.
    let mut s = healthy();
    s.nodes = NodeView::Unknown {
        reason: "ssh failed".into(),
    };
    assert_eq!(run(&s), vec![]);
}

#[test]
fn cluster_with_no_nodes_flags_every_running_vm() {
    let mut s = healthy();
    s.nodes = listed(&[]);
    assert_eq!(
        run(&s),
        vec![
            (VmNotANode, "vm_not_a_node:v1".to_string()),
            (VmNotANode, "vm_not_a_node:v2".to_string()),
            (VmNotANode, "vm_not_a_node:v3".to_string()),
        ]
    );
}

#[test]
fn duplicate_map_entries_are_one_vm() {
    let mut s = healthy();
    let dup = s.mapped[2].clone();
    s.mapped.push(dup.clone());
    assert_eq!(run(&s), vec![]);
    // Even when the duplicate is destroyed, it is reported once.
    s.mapped[2].state = VmState::Destroyed;
    s.mapped[3].state = VmState::Destroyed;
    assert_eq!(run(&s), vec![(MappedVm, "mapped_vm:v3".to_string())]);
}

#[test]
fn more_map_entries_than_expected_is_not_a_mismatch() {
    let mut s = healthy();
    s.cluster.size = 1;
    assert_eq!(run(&s), vec![]);
}

#[test]
fn fewer_map_entries_than_expected_is_map_count() {
    // Upstream scenario 3 through the API: rows for removed or unknown VMs are dropped, so
    // only the count shows them.
    let mut s = healthy();
    s.cluster.size = 4; // expects 5, the map shows 3
    let found = diff(&s, &Policy::default(), Timestamp::from_unix(NOW));
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].key().to_string(), "map_count:3/5");
    assert_eq!(
        reason("web", &found[0]),
        "Kubernetes cluster web should have 5 VMs (control nodes + size + etcd nodes) but its VM map shows 3: 2 map rows are missing or point to removed VMs"
    );
    // One unmapped VM explains one of the two missing rows only.
    s.named.push(old("v9", "web-node-1803b560000", "Running"));
    assert_eq!(
        run(&s),
        vec![
            (UnmappedVm, "unmapped_vm:v9".to_string()),
            (MapCount, "map_count:3/5".to_string())
        ]
    );
    // Two explain both.
    s.named.push(old("v8", "web-node-1803b560001", "Running"));
    assert_eq!(
        run(&s),
        vec![
            (UnmappedVm, "unmapped_vm:v8".to_string()),
            (UnmappedVm, "unmapped_vm:v9".to_string())
        ]
    );
}

#[test]
fn etcd_nodes_count_in_the_expected_total() {
    let mut s = healthy();
    s.cluster.etcd_nodes = 1;
    assert_eq!(run(&s), vec![(MapCount, "map_count:3/4".to_string())]);
    let mut e = old("v4", "web-etcd-1-1803b55f000", "Running");
    e.etcd = true;
    s.mapped.push(e.clone());
    s.named.push(e);
    assert_eq!(run(&s), vec![]);
}

#[test]
fn results_are_sorted_and_deterministic() {
    let mut s = healthy();
    s.mapped[0].state = VmState::Error;
    s.mapped.remove(2);
    s.nodes = listed(&["zz", "aa", "aa"]);
    assert_eq!(
        run(&s),
        vec![
            (MappedVm, "mapped_vm:v1".to_string()),
            (UnmappedVm, "unmapped_vm:v3".to_string()),
            (NodeWithoutVm, "node_without_vm:aa".to_string()),
            (NodeWithoutVm, "node_without_vm:zz".to_string()),
            (VmNotANode, "vm_not_a_node:v2".to_string()),
        ]
    );
}

#[test]
fn finding_keys_have_one_string_form() {
    let keys = [
        FindingKey::new(IdentityConflict, "web-node-1"),
        FindingKey::new(MapCount, "3/5"),
        FindingKey::new(MappedVm, "v1"),
        FindingKey::new(NodeWithoutVm, "stray"),
        FindingKey::new(UnmappedVm, "v2"),
        FindingKey::new(VmNotANode, "v3"),
    ];
    let strings: Vec<String> = keys.iter().map(ToString::to_string).collect();
    assert_eq!(
        strings,
        [
            "identity_conflict:web-node-1",
            "map_count:3/5",
            "mapped_vm:v1",
            "node_without_vm:stray",
            "unmapped_vm:v2",
            "vm_not_a_node:v3"
        ]
    );
    // They order as their string form does, and read back.
    let mut sorted = keys.to_vec();
    sorted.sort();
    assert_eq!(sorted, keys);
    for (k, s) in keys.iter().zip(&strings) {
        assert_eq!(FindingKey::parse(s).as_ref(), Some(k));
    }
    assert_eq!(FindingKey::parse("summary:20270115T080000Z"), None);
    assert_eq!(FindingKey::parse("no colon"), None);
}

/// Nodes with their system UUIDs (`None`: not listed).
fn identified(nodes: &[(&str, Option<&str>)]) -> NodeView {
    NodeView::Listed(
        nodes
            .iter()
            .map(|(name, uuid)| Node::identified(name, *uuid, None))
            .collect(),
    )
}

const CONTROL: &str = "web-control-1803b55c32d";
const WORKER_2: &str = "web-node-1803b55f08c";
const WORKER_3: &str = "web-node-1803b55f99a";

#[test]
fn nodes_with_their_vms_uuids_match() {
    let mut s = healthy();
    s.nodes = identified(&[
        (CONTROL, Some("v1")),
        (WORKER_2, Some("V2")),
        (WORKER_3, Some("v3")),
    ]);
    assert_eq!(run(&s), vec![]);
}

#[test]
fn a_node_renamed_by_its_tenant_matches_by_uuid() {
    let mut s = healthy();
    s.nodes = identified(&[
        (CONTROL, Some("v1")),
        ("gpu-worker.tenant.example", Some("v2")),
        (WORKER_3, Some("v3")),
    ]);
    assert_eq!(run(&s), vec![]);
    // Listed by name only, it is no VM's node, and its VM is not a node.
    s.nodes = listed(&[CONTROL, "gpu-worker.tenant.example", WORKER_3]);
    assert_eq!(
        run(&s),
        vec![
            (
                NodeWithoutVm,
                "node_without_vm:gpu-worker.tenant.example".to_string()
            ),
            (VmNotANode, "vm_not_a_node:v2".to_string()),
        ]
    );
}

#[test]
fn a_vm_renamed_in_cloudstack_whose_node_kept_the_old_name_is_no_finding() {
    let mut s = healthy();
    s.mapped[1].name = "web-gpu-1".into();
    // No longer named like a node of the cluster: only the map holds it.
    s.named.remove(1);
    s.nodes = identified(&[
        (CONTROL, Some("v1")),
        (WORKER_2, Some("v2")),
        (WORKER_3, Some("v3")),
    ]);
    assert_eq!(run(&s), vec![]);
}

#[test]
fn a_node_named_like_one_vm_with_anothers_uuid_is_an_identity_conflict() {
    let mut s = healthy();
    // The tenant swapped the names of two nodes.
    s.nodes = identified(&[
        (CONTROL, Some("v1")),
        (WORKER_2, Some("v3")),
        (WORKER_3, Some("v2")),
    ]);
    let found = diff(&s, &Policy::default(), Timestamp::from_unix(NOW));
    assert_eq!(
        found
            .iter()
            .map(|m| m.key().to_string())
            .collect::<Vec<_>>(),
        [
            "identity_conflict:web-node-1803b55f08c",
            "identity_conflict:web-node-1803b55f99a"
        ]
    );
    let m = &found[1];
    assert_eq!(m.kind, IdentityConflict);
    assert_eq!(m.side(), Side::Nodes);
    assert_eq!(m.node(), Some(WORKER_3));
    assert_eq!(m.vm().map(|v| v.id.as_str()), Some("v2"));
    assert_eq!(m.named_vm().map(|v| v.id.as_str()), Some("v3"));
    assert_eq!(
        reason("web", m),
        "Kubernetes node web-node-1803b55f99a of cluster web is named like VM web-node-1803b55f99a (v3) but is VM web-node-1803b55f08c (v2) by its system UUID or provider ID"
    );
}

#[test]
fn a_conflicting_node_leaves_the_vm_it_is_named_like_without_a_node() {
    let mut s = healthy();
    s.nodes = identified(&[(CONTROL, Some("v1")), (WORKER_3, Some("v2"))]);
    assert_eq!(
        run(&s),
        vec![
            (VmNotANode, "vm_not_a_node:v3".to_string()),
            (
                IdentityConflict,
                "identity_conflict:web-node-1803b55f99a".to_string()
            ),
        ]
    );
}

#[test]
fn a_node_named_like_a_vm_another_node_is_has_no_vm() {
    let mut s = healthy();
    // v3's node was renamed; a machine whose UUID is no VM of the cluster took v3's name.
    s.nodes = identified(&[
        (CONTROL, Some("v1")),
        (WORKER_2, Some("v2")),
        ("renamed", Some("v3")),
        (WORKER_3, Some("4230b1d7-0000-0000-0000-000000000000")),
    ]);
    assert_eq!(
        run(&s),
        vec![(
            NodeWithoutVm,
            "node_without_vm:web-node-1803b55f99a".to_string()
        )]
    );
}

#[test]
fn a_copied_uuid_does_not_hide_a_node() {
    let mut s = healthy();
    s.nodes = identified(&[
        (CONTROL, Some("v1")),
        (WORKER_2, Some("v2")),
        (WORKER_3, Some("v3")),
        ("intruder", Some("v2")),
    ]);
    assert_eq!(
        run(&s),
        vec![(NodeWithoutVm, "node_without_vm:intruder".to_string())]
    );
}

#[test]
fn where_nodes_are_vms_by_uuid_a_foreign_uuid_is_no_vm_whatever_its_name() {
    let mut s = healthy();
    // A machine outside the cluster registered under v3's name while v3's kubelet is down.
    s.nodes = identified(&[
        (CONTROL, Some("v1")),
        (WORKER_2, Some("v2")),
        (WORKER_3, Some("4230b1d7-0000-0000-0000-000000000000")),
    ]);
    assert_eq!(
        run(&s),
        vec![
            (
                NodeWithoutVm,
                "node_without_vm:web-node-1803b55f99a".to_string()
            ),
            (VmNotANode, "vm_not_a_node:v3".to_string()),
        ]
    );
    // A node that lists no identity at all is still matched by its name.
    s.nodes = identified(&[
        (CONTROL, Some("v1")),
        (WORKER_2, Some("v2")),
        (WORKER_3, None),
    ]);
    assert_eq!(run(&s), vec![]);
}

#[test]
fn a_copied_uuid_under_another_vms_name_is_an_identity_conflict() {
    let mut s = healthy();
    s.nodes = identified(&[
        (CONTROL, Some("v1")),
        (WORKER_2, Some("v2")),
        (WORKER_3, Some("v2")),
    ]);
    let found = diff(&s, &Policy::default(), Timestamp::from_unix(NOW));
    assert_eq!(
        found
            .iter()
            .map(|m| (m.kind, m.key().to_string()))
            .collect::<Vec<_>>(),
        [
            (VmNotANode, "vm_not_a_node:v3".to_string()),
            (
                IdentityConflict,
                "identity_conflict:web-node-1803b55f99a".to_string()
            ),
        ]
    );
    assert_eq!(found[1].vm().map(|v| v.id.as_str()), Some("v2"));
    assert_eq!(found[1].named_vm().map(|v| v.id.as_str()), Some("v3"));
}

#[test]
fn the_provider_id_is_an_identity_too() {
    let mut s = healthy();
    s.nodes = NodeView::Listed(vec![
        Node::named(CONTROL),
        Node::identified(
            "renamed",
            Some("4230b1d7-0000-0000-0000-000000000000"),
            Some("cloudstack:///v2"),
        ),
        Node::identified(WORKER_3, None, Some("external-cloudstack:///V3")),
    ]);
    assert_eq!(run(&s), vec![]);
}

#[test]
fn a_uuid_outside_the_cluster_claims_nothing() {
    let mut s = healthy();
    // Another cluster's (or owner's) VM: the node is matched by its name, like any other.
    s.nodes = identified(&[
        (CONTROL, Some("v1")),
        (WORKER_2, Some("v2")),
        (WORKER_3, Some("v3")),
        ("stray", Some("vm-of-another-owner")),
    ]);
    assert_eq!(
        run(&s),
        vec![(NodeWithoutVm, "node_without_vm:stray".to_string())]
    );
}

#[test]
fn the_node_of_a_gone_vm_matches_it_by_uuid() {
    let mut s = healthy();
    let gone = s.mapped.remove(2);
    s.named.remove(2);
    s.vanished.push(VanishedVm {
        id: gone.id,
        name: Some(gone.name),
        how: VanishedHow::Expunged,
    });
    s.nodes = identified(&[
        (CONTROL, Some("v1")),
        (WORKER_2, Some("v2")),
        ("renamed", Some("v3")),
    ]);
    assert_eq!(run(&s), vec![(MappedVm, "mapped_vm:v3".to_string())]);
}

/// Hypervisors whose system UUID is not the CloudStack UUID: every finding is as by names.
#[test]
fn uuids_that_match_no_vm_change_nothing() {
    let cases: Vec<(ClusterSnapshot, Vec<&str>)> = vec![
        (healthy(), vec![CONTROL, WORKER_2, WORKER_3]),
        (healthy(), vec![CONTROL, WORKER_2, WORKER_3, "stray"]),
        (healthy(), vec![CONTROL, "renamed", WORKER_3]),
        (healthy(), vec![]),
        (healthy(), vec![CONTROL, WORKER_3, WORKER_3]),
    ];
    for (mut s, names) in cases {
        s.nodes = listed(&names);
        let by_name = run(&s);
        let foreign: Vec<String> = (0..names.len())
            .map(|i| format!("4230b1d7-0000-0000-0000-{i:012}"))
            .collect();
        let with: Vec<(&str, Option<&str>)> = names
            .iter()
            .zip(&foreign)
            .map(|(n, u)| (*n, Some(u.as_str())))
            .collect();
        s.nodes = identified(&with);
        assert_eq!(run(&s), by_name, "{names:?}");
    }
}

/// The keys of `s`'s findings that CloudStack's own check, comparing by names, reports too.
fn by_name(s: &ClusterSnapshot) -> Vec<String> {
    let found = diff(s, &Policy::default(), Timestamp::from_unix(NOW));
    server_check::reported_by_name(s, &found)
        .into_iter()
        .map(|k| k.to_string())
        .collect()
}

#[test]
fn the_servers_own_check_reports_what_names_show_and_nothing_identity_alone_finds() {
    let mut s = healthy();
    s.mapped.pop();
    s.nodes = listed(&[
        "web-control-1803b55c32d",
        "web-node-1803b55f08c",
        "stray-node",
    ]);
    assert_eq!(
        by_name(&s),
        ["node_without_vm:stray-node", "unmapped_vm:v3"]
    );
    // Names swapped between two nodes: only identity tells, so the server reports nothing.
    let mut s = healthy();
    s.nodes = identified(&[
        (CONTROL, Some("v1")),
        (WORKER_2, Some("v3")),
        (WORKER_3, Some("v2")),
    ]);
    assert_eq!(run(&s).len(), 2);
    assert_eq!(by_name(&s), Vec::<String>::new());
    // A map short of a VM that nothing explains is cks-drift's own.
    let mut s = healthy();
    s.mapped.pop();
    s.named.pop();
    s.nodes = listed(&["web-control-1803b55c32d", "web-node-1803b55f08c"]);
    assert!(run(&s).iter().any(|(k, _)| *k == MapCount));
    assert_eq!(by_name(&s), Vec::<String>::new());
}
