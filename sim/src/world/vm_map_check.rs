//! The management server's own VM map check, as apache/cloudstack PR 14666 describes it
//! (`KubernetesClusterVmMapChecker`, on the 4.22 branch; not merged): for each CloudManaged
//! cluster in Running or Alert, the map against the owner's VMs named as the cluster's nodes
//! and, when the nodes could be listed, against the Kubernetes nodes by name. Each mismatch
//! once: a WARN event `KUBERNETES.CLUSTER.VM.MAP.CHECK` and an alert of type 8
//! (`ALERT.USERVM`, which `AlertManagerImpl` never de-duplicates); at most 5 alerts and one
//! summing up the rest per cluster and run; an INFO event when a side matches again. The keys
//! reported are kept as the PR keeps them in cluster details.
//!
//! The PR's test report quotes the texts of four kinds; the text of a node without a VM and
//! of a mapped VM Destroyed or in Error are not quoted there and are written here in the same
//! form.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{SimAlert, SimCluster, SimEvent, SimVm, World, etcd_name_prefix, node_name_prefix};

/// The event type of the check.
pub const VM_MAP_CHECK_EVENT: &str = "KUBERNETES.CLUSTER.VM.MAP.CHECK";
/// `ALERT_TYPE_USERVM`.
const USERVM: i16 = 8;
/// The grace after a VM's creation (unmapped VMs) or last state change (not a node).
const GRACE: Duration = Duration::from_secs(15 * 60);
/// New mismatches of one cluster in one run that get an alert each.
const ALERT_CAP: usize = 5;

/// One mismatch: its key (as kept in the cluster details) and its text.
struct Found {
    key: String,
    text: String,
}

impl World {
    /// Runs the server's check once, if the server has it and it is on. `nodes` holds, per
    /// cluster id, the names `kubectl get nodes -o name` gave; a cluster without an entry could
    /// not be listed, and only its VM side is compared (its node side kept as it was).
    pub fn run_vm_map_check(&mut self, nodes: &BTreeMap<String, Vec<String>>) {
        if self.vm_map_check != Some(true) {
            return;
        }
        let checked: Vec<SimCluster> = self
            .clusters
            .iter()
            .filter(|c| !c.removed && (c.state == "Running" || c.state == "Alert"))
            .filter(|c| c.clustertype.as_deref().unwrap_or("CloudManaged") == "CloudManaged")
            .cloned()
            .collect();
        for c in checked {
            let (vm_side, named) = self.vm_side(&c);
            self.report_side(&c, "vm", vm_side, "the VMs of the cluster in CloudStack");
            if let Some(listed) = nodes.get(&c.id) {
                let node_side = self.node_side(&c, &named, listed);
                self.report_side(&c, "node", node_side, "the Kubernetes nodes of the cluster");
            }
        }
    }

    /// The map against the owner's VMs: mapped VMs gone or broken, and VMs named as nodes of
    /// the cluster that no cluster maps. Also returns the names of the cluster's VMs (mapped
    /// and named), which nodes are matched against.
    fn vm_side(&self, c: &SimCluster) -> (Vec<Found>, Vec<(String, SimVm)>) {
        let mut found = Vec::new();
        let mut named = Vec::new();
        for id in &c.map {
            let internal = self.vms.iter().position(|v| v.id == *id).map(|i| i + 1);
            let Some(vm) = self.vm(id).filter(|_| internal.is_some()) else {
                found.push(Found {
                    key: format!("MAPPED_VM:{id}"),
                    text: format!(
                        "VM with ID {id} is one of the VMs of Kubernetes cluster {} in \
                         CloudStack, but does not exist",
                        c.name
                    ),
                });
                continue;
            };
            let key = format!("MAPPED_VM:{}", internal.unwrap_or(0));
            if vm.removed || vm.state == "Expunging" {
                found.push(Found {
                    key,
                    text: format!(
                        "VM {} ({}) is one of the VMs of Kubernetes cluster {} in CloudStack, \
                         but has been or is being expunged",
                        vm.name, vm.id, c.name
                    ),
                });
            } else if vm.state == "Destroyed" || vm.state == "Error" {
                found.push(Found {
                    key,
                    text: format!(
                        "VM {} ({}) is one of the VMs of Kubernetes cluster {} in CloudStack, \
                         but is {}",
                        vm.name, vm.id, c.name, vm.state
                    ),
                });
            } else {
                named.push((vm.name.to_lowercase(), vm.clone()));
            }
        }
        let prefixes = [
            format!("{}-control-", node_name_prefix(&c.name, &c.id)),
            format!("{}-node-", node_name_prefix(&c.name, &c.id)),
            format!("{}-", etcd_name_prefix(&c.name, &c.id)),
        ];
        for (i, vm) in self.vms.iter().enumerate() {
            let candidate = vm.owner == c.owner
                && !vm.removed
                && !matches!(vm.state.as_str(), "Destroyed" | "Expunging" | "Error")
                && prefixes.iter().any(|p| vm.name.starts_with(p.as_str()));
            if !candidate || self.clusters.iter().any(|o| o.map.contains(&vm.id)) {
                continue;
            }
            named.push((vm.name.to_lowercase(), vm.clone()));
            if vm.created > self.now.minus(GRACE) {
                continue;
            }
            found.push(Found {
                key: format!("UNMAPPED_VM:{}", i + 1),
                text: format!(
                    "VM {} ({}, {}) is named as a node of Kubernetes cluster {} but is not one \
                     of its VMs in CloudStack",
                    vm.name, vm.id, vm.state, c.name
                ),
            });
        }
        (found, named)
    }

    /// The cluster's VMs against its nodes, by name (a node named by its VM's FQDN matches).
    fn node_side(
        &self,
        c: &SimCluster,
        named: &[(String, SimVm)],
        listed: &[String],
    ) -> Vec<Found> {
        let label = |n: &str| n.split('.').next().unwrap_or(n).to_lowercase();
        let nodes: Vec<String> = listed.iter().map(|n| label(n)).collect();
        let mut found = Vec::new();
        for (node, raw) in nodes.iter().zip(listed) {
            if !named.iter().any(|(name, _)| name == node) {
                found.push(Found {
                    key: format!("NODE_WITHOUT_VM:{node}"),
                    text: format!(
                        "Kubernetes node {raw} of Kubernetes cluster {} matches no VM of the \
                         cluster in CloudStack",
                        c.name
                    ),
                });
            }
        }
        for (name, vm) in named {
            let mapped = c.map.contains(&vm.id);
            let etcd = vm.isetcdnode == Some(true)
                || vm
                    .name
                    .starts_with(&format!("{}-", etcd_name_prefix(&c.name, &c.id)));
            if !mapped || etcd || vm.state != "Running" || vm.lastupdated > self.now.minus(GRACE) {
                continue;
            }
            if !nodes.contains(name) {
                let internal = self
                    .vms
                    .iter()
                    .position(|v| v.id == vm.id)
                    .map_or(0, |i| i + 1);
                found.push(Found {
                    key: format!("VM_NOT_A_NODE:{internal}"),
                    text: format!(
                        "VM {} ({}) of Kubernetes cluster {} is running but is not a \
                         Kubernetes node of the cluster",
                        vm.name, vm.id, c.name
                    ),
                });
            }
        }
        found
    }

    /// Reports what is new on one side of a cluster, and an INFO event when the side matches
    /// again; keeps the keys reported.
    fn report_side(&mut self, c: &SimCluster, side: &str, found: Vec<Found>, what: &str) {
        let detail = format!("{}/{side}", c.id);
        let before = self
            .vm_map_check_reported
            .remove(&detail)
            .unwrap_or_default();
        if found.is_empty() {
            if !before.is_empty() {
                let text = format!(
                    "The VM map of Kubernetes cluster {} matches {what} again",
                    c.name
                );
                self.check_event(c, "INFO", text);
            }
            return;
        }
        let keys: Vec<String> = found.iter().map(|f| f.key.clone()).collect();
        let new: Vec<&Found> = found.iter().filter(|f| !before.contains(&f.key)).collect();
        for (i, f) in new.iter().enumerate() {
            self.check_event(c, "WARN", f.text.clone());
            if i < ALERT_CAP {
                // The text is the alert's subject (its content, which `listAlerts` does not
                // show, adds "This is only reported, nothing was changed. ...").
                self.check_alert(c, f.text.clone());
            }
        }
        if new.len() > ALERT_CAP {
            let rest = new.len() - ALERT_CAP;
            self.check_alert(
                c,
                format!(
                    "{rest} more mismatches of the VM map of Kubernetes cluster {} were found; \
                     see the events of the cluster",
                    c.name
                ),
            );
        }
        self.vm_map_check_reported.insert(detail, keys);
    }

    fn check_event(&mut self, c: &SimCluster, level: &str, description: String) {
        let id = self.fresh_id();
        self.events.push(SimEvent {
            id,
            event_type: VM_MAP_CHECK_EVENT.to_string(),
            level: level.to_string(),
            description,
            resource_id: c.id.clone(),
            created: self.now,
        });
    }

    fn check_alert(&mut self, c: &SimCluster, description: String) {
        let id = self.fresh_id();
        self.alerts.push(SimAlert {
            id,
            alert_type: USERVM,
            name: "ALERT.USERVM".to_string(),
            description,
            zone_id: Some(c.zone_id.clone()),
            pod_id: None,
            sent: self.now,
            archived: false,
        });
    }
}
