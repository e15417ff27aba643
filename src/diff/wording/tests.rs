use super::*;
use crate::cloudstack::limits::{KEYWORD_LENGTH, is_refused_control, java_len};
use crate::diff::{Subject, VmRef};

fn vm_finding(kind: MismatchKind, name: &str, id: &str, state: &str) -> Mismatch {
    Mismatch {
        kind,
        subject: Subject::Vm(VmRef {
            id: id.into(),
            name: Some(name.into()),
            state: state.into(),
        }),
    }
}

fn node_finding(node: &str) -> Mismatch {
    Mismatch {
        kind: MismatchKind::NodeWithoutVm,
        subject: Subject::Node(node.into()),
    }
}

/// Node `node`, named like VM `v2` (named `node`), is VM `is_id` (named `is_name`).
fn conflict_finding(node: &str, is_id: &str, is_name: &str) -> Mismatch {
    Mismatch {
        kind: MismatchKind::IdentityConflict,
        subject: Subject::Conflict {
            node: node.into(),
            is: VmRef {
                id: is_id.into(),
                name: Some(is_name.into()),
                state: "Running".into(),
            },
            named: VmRef {
                id: "v2".into(),
                name: Some(node.into()),
                state: "Running".into(),
            },
        },
    }
}

const CLUSTER_ID: &str = "8d1f0e8a-6b3c-4c55-9f41-0a2b3c4d5e6f";
const VM_ID: &str = "0f9e8d7c-6b5a-4c3d-2e1f-0a9b8c7d6e5f";

/// Every finding the diff can produce, with the longest names it can hold: VM names are host
/// names (63), node names DNS names (253). Cluster names (255 UTF-16 units of anything) come
/// with [`hostile_cluster_name`].
fn longest_findings() -> Vec<Mismatch> {
    let vm = format!("{}-control-18c3f2a1b0d", "a".repeat(43));
    assert_eq!(vm.len(), 63);
    let node = format!(
        "{}.{}.{}.{}",
        "n".repeat(63),
        "o".repeat(63),
        "d".repeat(63),
        "e".repeat(61)
    );
    assert_eq!(node.len(), 253);
    let mut out = Vec::new();
    for state in ["Destroyed", "Expunging", "Error", "Expunged", "Missing"] {
        out.push(vm_finding(MismatchKind::MappedVm, &vm, VM_ID, state));
    }
    out.push(vm_finding(
        MismatchKind::UnmappedVm,
        &vm,
        VM_ID,
        "Expunging",
    ));
    out.push(vm_finding(MismatchKind::VmNotANode, &vm, VM_ID, "Running"));
    out.push(node_finding(&node));
    // A node named like one VM (under the longest FQDN) whose UUID is another's.
    out.push(Mismatch {
        kind: MismatchKind::IdentityConflict,
        subject: Subject::Conflict {
            node: format!("{vm}.{}", &node[..253 - 64]),
            is: VmRef {
                id: VM_ID.into(),
                name: Some(vm.replace("control", "node-00")),
                state: "Running".into(),
            },
            named: VmRef {
                id: CLUSTER_ID.into(),
                name: Some(vm.clone()),
                state: "Running".into(),
            },
        },
    });
    out.push(Mismatch {
        kind: MismatchKind::MapCount,
        subject: Subject::MapRows {
            shown: 1000,
            expected: 1003,
        },
    });
    // The longest blind reason: the host key's advice with 200 characters of tenant detail.
    out.push(Mismatch {
        kind: MismatchKind::Blind,
        subject: Subject::Blind {
            reason: blind_reason(Some("host_key"), Some(&"k\x1b".repeat(200))),
            since: crate::base::time::Timestamp::from_unix(1_800_000_000),
        },
    });
    out
}

/// A 255-unit cluster name with characters outside the BMP, control characters and
/// CloudStack's LIKE wildcards.
fn hostile_cluster_name() -> String {
    let mut name = String::from("prod\n\x1b[2Jé_%");
    while java_len(&name) + 2 <= 255 {
        name.push('😀');
    }
    while java_len(&name) < 255 {
        name.push('x');
    }
    assert_eq!(java_len(&name), 255);
    name
}

#[test]
fn the_longest_texts_fit_cloudstack_and_keep_their_marker() {
    let cluster = hostile_cluster_name();
    for m in longest_findings() {
        let key = m.key().to_string();
        let d = alert_description(&cluster, CLUSTER_ID, &m);
        assert!(java_len(&d) <= 999, "{} units: {d}", java_len(&d));
        assert!(d.ends_with(&alert_marker(CLUSTER_ID, &key)), "{d}");
        assert!(
            d.starts_with("Kubernetes cluster prod\\x0a\\x1b[2Jé_%"),
            "{d}"
        );
        let a = annotation_text(&m);
        assert!(java_len(&a) <= 255, "{} units: {a}", java_len(&a));
        assert!(a.ends_with(&annotation_marker(&key)), "{a}");
        for text in [&d, &a] {
            assert!(!text.chars().any(is_refused_control), "{text}");
            assert!(text.chars().all(|c| c.len_utf16() == 1), "{text}");
        }
        // The marker is searched for with `keyword`.
        assert!(java_len(&alert_marker(CLUSTER_ID, &key)) <= KEYWORD_LENGTH);
        assert!(java_len(&annotation_marker(&key)) <= KEYWORD_LENGTH);
        // The annotation still names what a person must look at.
        match &m.subject {
            Subject::Vm(vm) => assert!(a.contains(vm.name.as_deref().unwrap()), "{a}"),
            Subject::Node(node) => assert!(a.contains(&node[..100]), "{a}"),
            Subject::Conflict { node, .. } => assert!(a.contains(&node[..100]), "{a}"),
            Subject::MapRows { .. } => assert!(a.contains("shows 1000 of 1003 VMs"), "{a}"),
            Subject::Blind { .. } => assert!(a.contains("have not been listed since"), "{a}"),
        }
    }
    let all = longest_findings();
    let rest: Vec<&Mismatch> = all.iter().collect();
    let s = summary_description(&cluster, CLUSTER_ID, "summary:20261130T100000Z", &rest);
    assert!(java_len(&s) <= 999);
    assert!(s.ends_with(&alert_marker(CLUSTER_ID, "summary:20261130T100000Z")));

    // The storm alert, with every kind and blind reasons that differ in their detail only.
    let mut storm: Vec<Mismatch> = longest_findings();
    for i in 0..50 {
        storm.push(Mismatch {
            kind: MismatchKind::Blind,
            subject: Subject::Blind {
                reason: blind_reason(
                    Some("connect"),
                    Some(&format!("10.1.1.{i}:22: {}", "x".repeat(180))),
                ),
                since: crate::base::time::Timestamp::from_unix(1_800_000_000),
            },
        });
    }
    let refs: Vec<&Mismatch> = storm.iter().collect();
    let d = storm_description("storm:20261130t100000z", 2000, 10_000, 2000, &refs);
    assert!(java_len(&d) <= 999, "{} units: {d}", java_len(&d));
    assert!(
        d.ends_with("[cks-drift cloud/storm:20261130t100000z]"),
        "{d}"
    );
    assert!(!d.chars().any(is_refused_control), "{d}");
    // The detail of a reason is cut: 50 refused connections are one cause.
    assert!(
        d.contains("Most common: SSH to the control node is refused or unreachable (50); "),
        "{d}"
    );
}

/// The figures docs/how-it-checks.md gives: the longest length each text can reach.
#[test]
fn longest_lengths() {
    let cluster = hostile_cluster_name();
    let findings = longest_findings();
    let longest_alert = findings
        .iter()
        .map(|m| java_len(&alert_description(&cluster, CLUSTER_ID, m)))
        .max()
        .unwrap();
    let longest_annotation = findings
        .iter()
        .map(|m| java_len(&annotation_text(m)))
        .max()
        .unwrap();
    let longest_alert_marker = findings
        .iter()
        .map(|m| java_len(&alert_marker(CLUSTER_ID, &m.key().to_string())))
        .max()
        .unwrap();
    let longest_annotation_marker = findings
        .iter()
        .map(|m| java_len(&annotation_marker(&m.key().to_string())))
        .max()
        .unwrap();
    assert_eq!(
        (
            longest_alert,
            longest_annotation,
            longest_alert_marker,
            longest_annotation_marker
        ),
        (999, 255, 99, 62)
    );
}

#[test]
fn texts_read_well_for_ordinary_names() {
    let m = vm_finding(MismatchKind::MappedVm, "web-node-v1", "v1", "Destroyed");
    assert_eq!(
        alert_description("web", "c1", &m),
        "Kubernetes cluster web, VM web-node-v1 (v1): VM web-node-v1 (v1) is one of the VMs of Kubernetes cluster web in CloudStack, but is destroyed. Nothing was changed. Check whether the VM was destroyed or expunged on purpose, and the cluster's VM map (kubernetes_cluster_vm_map) that still lists it. [cks-drift c1/mapped_vm:v1]"
    );
    assert_eq!(
        annotation_text(&m),
        "VM web-node-v1 in the VM map of this cluster is destroyed. Nothing was changed. Check the VM map row. [cks-drift mapped_vm:v1]"
    );
    assert_eq!(
        annotation_text(&node_finding("stray")),
        "Kubernetes node stray matches no VM of this cluster. Nothing was changed. Check the node with kubectl. [cks-drift node_without_vm:stray]"
    );
    let m = conflict_finding("web-node-b", "v1", "web-node-a");
    assert_eq!(
        annotation_text(&m),
        "Kubernetes node web-node-b is named like VM web-node-b but is VM web-node-a by its system UUID or provider ID. Nothing was changed. Check which machine the node is. [cks-drift identity_conflict:web-node-b]"
    );
    assert_eq!(
        alert_description("web", "c1", &m),
        "Kubernetes cluster web, node web-node-b: Kubernetes node web-node-b of cluster web is named like VM web-node-b (v2) but is VM web-node-a (v1) by its system UUID or provider ID. Nothing was changed. Check the node's system UUID and provider ID with kubectl on the control node (kubectl get node <name> -o yaml): a node its tenant renamed to another VM's name, or a machine posing as that VM. The node is matched to the VM it is, not to the one it is named like. [cks-drift c1/identity_conflict:web-node-b]"
    );
}

#[test]
fn long_or_odd_keys_are_digested_in_markers() {
    assert_eq!(marker_key("unmapped_vm:abc-1"), "unmapped_vm:abc-1");
    let long = format!("node_without_vm:{}", "n".repeat(253));
    let k = marker_key(&long);
    assert!(k.starts_with("node_without_vm:#"), "{k}");
    assert_eq!(k.len(), "node_without_vm:#".len() + 12);
    assert_eq!(k, marker_key(&long), "stable");
    assert_ne!(k, marker_key(&format!("{long}x")));
    assert!(marker_key("node_without_vm:a b").starts_with("node_without_vm:#"));
    assert!(marker_key("node_without_vm:A").starts_with("node_without_vm:#"));
}

#[test]
fn marked_key_reads_both_markers() {
    assert_eq!(
        marked_key("text [cks-drift c1/mapped_vm:v1]"),
        Some("mapped_vm:v1")
    );
    assert_eq!(
        marked_key("text [cks-drift mapped_vm:v1]"),
        Some("mapped_vm:v1")
    );
    assert_eq!(marked_key("no marker"), None);
    assert_eq!(
        marked_key("text [cks-drift c1/map_count:3/5]"),
        Some("map_count:3/5")
    );
    assert_eq!(
        marked_key("text [cks-drift map_count:3/5]"),
        Some("map_count:3/5")
    );
}

#[test]
fn a_text_queued_by_an_older_release_is_remarked_and_fitted() {
    let old = format!(
        "{}. Nothing was changed. Check. [cks-drift c1/node_without_vm:{}]",
        "x".repeat(200),
        "n".repeat(100)
    );
    let key = format!("node_without_vm:{}", "n".repeat(100));
    let t = remarked(&old, &annotation_marker(&key), 255);
    assert!(java_len(&t) <= 255);
    assert!(t.ends_with(&annotation_marker(&key)));
    assert!(t.starts_with("xxxx"));
    assert!(!t.contains("[cks-drift c1/"));
}

#[test]
fn reasons_name_the_cluster_and_what_was_found() {
    let cases = [
        (
            conflict_finding("web-node-b", "v1", "web-node-a"),
            "Kubernetes node web-node-b of cluster web is named like VM web-node-b (v2) but is VM web-node-a (v1) by its system UUID or provider ID",
        ),
        (
            vm_finding(MismatchKind::MappedVm, "web-node-a", "v1", "Destroyed"),
            "VM web-node-a (v1) is one of the VMs of Kubernetes cluster web in CloudStack, but is destroyed",
        ),
        (
            vm_finding(MismatchKind::MappedVm, "web-node-a", "v1", "Expunging"),
            "VM web-node-a (v1) is one of the VMs of Kubernetes cluster web in CloudStack, but has been or is being expunged",
        ),
        (
            vm_finding(MismatchKind::MappedVm, "web-node-a", "v1", "Error"),
            "VM web-node-a (v1) is one of the VMs of Kubernetes cluster web in CloudStack, but is in Error state",
        ),
        (
            vm_finding(MismatchKind::MappedVm, "web-node-a", "v1", "Expunged"),
            "VM web-node-a (v1) is one of the VMs of Kubernetes cluster web in CloudStack, but has been expunged or unmanaged",
        ),
        (
            Mismatch {
                kind: MismatchKind::MappedVm,
                subject: Subject::Vm(VmRef {
                    id: "v9".into(),
                    name: None,
                    state: "Missing".into(),
                }),
            },
            "VM with ID v9 is one of the VMs of Kubernetes cluster web in CloudStack, but does not exist",
        ),
        (
            vm_finding(MismatchKind::UnmappedVm, "web-node-b", "v2", "Running"),
            "VM web-node-b (v2, Running) is named as a node of Kubernetes cluster web but is not one of its VMs in CloudStack",
        ),
        (
            vm_finding(MismatchKind::VmNotANode, "web-node-c", "v3", "Running"),
            "VM web-node-c (v3) of Kubernetes cluster web is running but is not a Kubernetes node of the cluster",
        ),
        (
            node_finding("stray"),
            "Kubernetes node stray of cluster web matches no VM of the cluster in CloudStack",
        ),
        (
            Mismatch {
                kind: MismatchKind::MapCount,
                subject: Subject::MapRows {
                    shown: 3,
                    expected: 5,
                },
            },
            "Kubernetes cluster web should have 5 VMs (control nodes + size + etcd nodes) but its VM map shows 3: 2 map rows are missing or point to removed VMs",
        ),
    ];
    for (m, expected) in cases {
        assert_eq!(reason("web", &m), expected);
    }
}
