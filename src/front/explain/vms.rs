//! The VM lines: every VM of the cluster with the rule that applied to it, and the VMs named
//! like its nodes that someone else owns.

use std::collections::{BTreeSet, HashSet};

use super::nodes::node_matches;
use super::{Stranger, VmLine, owner_text};
use crate::cks::naming::{ClusterPrefixes, NodeRole};
use crate::diff::Policy;
use crate::inventory::{ClusterRecord, VmRow};
use crate::snapshot::{ClusterSnapshot, Vm, VmState};

fn role_text(role: NodeRole) -> &'static str {
    match role {
        NodeRole::Control => "control",
        NodeRole::Worker => "worker",
        NodeRole::Etcd => "etcd",
    }
}

/// A VM named like a node of the cluster but owned by someone else.
pub(super) fn stranger_line(s: &Stranger, prefixes: &ClusterPrefixes) -> VmLine {
    VmLine {
        id: s.vm.id.clone(),
        name: s.vm.name.clone(),
        state: s.vm.state.as_str().to_string(),
        created: s.vm.created,
        last_change: s.vm.last_updated,
        mapped: false,
        role: prefixes.role_of(&s.vm.name).map(role_text),
        finding: None,
        verdict: format!(
            "not this cluster's: named like one of its nodes, but owned by {}, not by the \
             cluster's owner",
            s.owner
        ),
    }
}

/// Every VM of the snapshot with the rule that applied to it, mapped ones first.
pub(super) fn vm_lines(
    snap: &ClusterSnapshot,
    prefixes: &ClusterPrefixes,
    findings: &HashSet<String>,
    policy: &Policy,
) -> Vec<VmLine> {
    let verdicts = VmVerdicts::new(snap, findings, policy);
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mapped_ids: HashSet<&str> = snap.mapped.iter().map(|v| v.id.as_str()).collect();
    let all = snap
        .mapped
        .iter()
        .map(|vm| (vm, true))
        .chain(snap.named.iter().map(|vm| (vm, false)));
    for (vm, mapped) in all {
        if !seen.insert(vm.id.as_str()) {
            continue;
        }
        let mapped = mapped || mapped_ids.contains(vm.id.as_str());
        let (finding, verdict) = if mapped {
            verdicts.mapped(vm)
        } else {
            verdicts.unmapped(vm)
        };
        out.push(VmLine {
            id: vm.id.clone(),
            name: vm.name.clone(),
            state: vm.state.as_str().to_string(),
            created: vm.created,
            last_change: vm.last_updated,
            mapped,
            role: prefixes.role_of(&vm.name).map(role_text),
            finding,
            verdict,
        });
    }
    out
}

/// What the verdict on a VM of the snapshot rests on. Each verdict is the finding's key,
/// when the VM is one, and the rule that applied, in words.
struct VmVerdicts<'a> {
    /// The keys of the diff's findings.
    findings: &'a HashSet<String>,
    /// The VM ids some node is, by identity or by name; `None` when the nodes were not
    /// listed.
    listed: Option<HashSet<String>>,
    /// The VMs another cluster's map lists.
    mapped_elsewhere: &'a BTreeSet<String>,
    /// The grace period, as the config writes it.
    grace: String,
}

impl<'a> VmVerdicts<'a> {
    fn new(snap: &'a ClusterSnapshot, findings: &'a HashSet<String>, policy: &Policy) -> Self {
        VmVerdicts {
            findings,
            listed: node_matches(snap).map(|m| {
                m.into_iter()
                    .filter_map(|(_, vm)| vm.map(|(id, _)| id))
                    .collect()
            }),
            mapped_elsewhere: &snap.mapped_elsewhere,
            grace: crate::base::duration::human_duration(policy.grace_period),
        }
    }

    /// The key of the finding `kind` about `vm`, when the diff made it.
    fn hit(&self, kind: &str, vm: &Vm) -> Option<String> {
        let key = format!("{kind}:{}", vm.id);
        self.findings.contains(&key).then_some(key)
    }

    /// A VM in the cluster's map.
    fn mapped(&self, vm: &Vm) -> (Option<String>, String) {
        let grace = &self.grace;
        if vm.state.is_dead() {
            (
                self.hit("mapped_vm", vm),
                format!(
                    "finding mapped_vm: mapped while {}, so it cannot serve as a node",
                    vm.state.as_str()
                ),
            )
        } else if let Some(f) = self.hit("vm_not_a_node", vm) {
            (
                Some(f),
                format!(
                    "finding vm_not_a_node: Running and mapped, no node is named {} and it has \
                     not changed for {grace}",
                    vm.name.to_ascii_lowercase()
                ),
            )
        } else if vm.etcd {
            (
                None,
                "not a finding: an etcd VM, never a Kubernetes node".to_string(),
            )
        } else if vm.state != VmState::Running {
            (
                None,
                format!(
                    "not a finding: {}, so it is not expected as a node",
                    vm.state.as_str()
                ),
            )
        } else {
            (None, self.running(vm))
        }
    }

    /// A mapped VM, Running and no finding: whether a node is it.
    fn running(&self, vm: &Vm) -> String {
        match &self.listed {
            None => "mapped and Running; not compared with the nodes (not listed)".to_string(),
            Some(nodes) if nodes.contains(&vm.id) => "matches its node".to_string(),
            Some(_) => {
                let settled = vm.created.into_iter().chain(vm.last_updated).max();
                format!(
                    "not a finding yet: no node is named {}, but it was created or changed at {} \
                     (within the grace period of {})",
                    vm.name.to_ascii_lowercase(),
                    settled.map_or("?".to_string(), |t| t.to_string()),
                    self.grace
                )
            }
        }
    }

    /// A VM named as a node of the cluster and owned by its owner, but not in its map.
    fn unmapped(&self, vm: &Vm) -> (Option<String>, String) {
        if self.mapped_elsewhere.contains(&vm.id) {
            (
                None,
                "not a finding: another cluster's map lists it".to_string(),
            )
        } else if vm.state.is_dead() {
            (
                None,
                format!(
                    "not a finding: {} and in no map, so it is not reported as unmapped",
                    vm.state.as_str()
                ),
            )
        } else if let Some(f) = self.hit("unmapped_vm", vm) {
            (
                Some(f),
                "finding unmapped_vm: named as a node of this cluster, owned by its owner, in no \
                 cluster's map"
                    .to_string(),
            )
        } else {
            let created = vm
                .created
                .or_else(|| crate::cks::naming::created_from_name(&vm.name));
            (
                None,
                format!(
                    "not a finding yet: in no map, but created at {} (within the grace period of \
                     {})",
                    created.map_or("?".to_string(), |t| t.to_string()),
                    self.grace
                ),
            )
        }
    }
}

/// The VMs named like a node of `c` whose owner is not the cluster's.
pub fn strangers(c: &ClusterRecord, vms: &[VmRow]) -> Vec<Stranger> {
    let prefixes = ClusterPrefixes::of(&c.info.name, &c.info.id);
    let owner = c.info.owner.as_ref();
    vms.iter()
        .filter(|vm| prefixes.role_of(&vm.name).is_some())
        .filter_map(|vm| {
            let theirs = vm.owner.as_deref();
            (theirs != owner).then(|| Stranger {
                vm: Vm {
                    id: vm.id.to_string(),
                    name: vm.name.to_string(),
                    state: vm.state(),
                    created: vm.created(),
                    last_updated: vm.last_updated(),
                    etcd: false,
                },
                owner: owner_text(theirs),
            })
        })
        .collect()
}
