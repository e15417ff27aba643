//! Table tests of `diff`: every case upstream reports, and the cases it must not report.

use std::collections::BTreeSet;

use super::*;
use crate::snapshot::{ClusterInfo, Owner, VanishedVm};
use crate::wording::reason;

const NOW: i64 = 1_800_000_000;
const HOUR: i64 = 60;

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
            Some(n) => NodeView::Listed(n.iter().map(|s| s.to_string()).collect()),
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
    s.nodes = NodeView::Listed(vec![
        "web-control-1803b55c32d".into(),
        "web-node-1803b55f08c".into(),
        "web-node-1803b55f99a".into(),
        "stray-node".into(),
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
    s.nodes = NodeView::Listed(vec![
        "web-control-1803b55c32d.cluster.local".into(),
        "WEB-NODE-1803B55F08C".into(),
        "web-node-1803b55f99a.example.com".into(),
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
    s.nodes = NodeView::Listed(vec![
        "web-control-1803b55c32d".into(),
        "web-node-1803b55f08c".into(),
    ]);
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
    let listed = ["web-control-1803b55c32d", "web-node-1803b55f08c"];
    // Recently started (last state change 5 minutes ago): still joining.
    let mut s = healthy();
    s.mapped[2] = vm("v3", "web-node-1803b55f99a", "Running", 10 * HOUR, 5);
    s.nodes = NodeView::Listed(listed.iter().map(|n| n.to_string()).collect());
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
    s.nodes = NodeView::Listed(vec![]);
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
    s.nodes = NodeView::Listed(vec!["zz".into(), "aa".into(), "aa".into()]);
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
