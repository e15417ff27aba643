//! A finding as the JSON report of `check` and the endpoint's API (`/api/v1/findings`) write
//! it: one shape, documented in `docs/commands.md`, so that a script reads either the same way.

use serde::Serialize;

use crate::diff::wording;
use crate::diff::{Mismatch, MismatchKind, Subject};
use crate::engine::cycle::ClusterOutcome;

/// One open finding, as the JSON report writes it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FindingRow {
    pub cluster_id: String,
    pub cluster: String,
    pub kind: MismatchKind,
    pub key: String,
    pub vm_id: Option<String>,
    pub vm_name: Option<String>,
    pub vm_state: Option<String>,
    pub node: Option<String>,
    /// For `identity_conflict`: the VM the node's name is (`vm_*` is the VM it is).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub named_vm_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub named_vm_name: Option<String>,
    pub reason: String,
    /// First reported by this cycle; `None` without a state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new: Option<bool>,
    /// The `[[ignore]]` rule that matches it (`rule <n>: <reason>`): reported, not alerted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignored: Option<String>,
    /// CloudStack's own VM map check alerts it: cks-drift raises no CloudStack alert or
    /// annotation for it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub left_to_server: bool,
}

impl FindingRow {
    /// The row of `m`, an open finding of cluster `c`; `new` tells whether this cycle first
    /// reported it, when the check keeps a state.
    pub fn of(c: &ClusterOutcome, m: &Mismatch, new: Option<bool>) -> FindingRow {
        let key = m.key();
        FindingRow {
            cluster_id: c.cluster.id.clone(),
            cluster: c.cluster.name.clone(),
            kind: m.kind,
            vm_id: m.vm().map(|v| v.id.clone()),
            vm_name: m.vm().and_then(|v| v.name.clone()),
            vm_state: vm_state(m),
            node: m.node().map(str::to_string),
            named_vm_id: m.named_vm().map(|v| v.id.clone()),
            named_vm_name: m.named_vm().and_then(|v| v.name.clone()),
            reason: wording::reason(&c.cluster.name, m),
            new,
            ignored: c.ignored.get(&key).cloned(),
            left_to_server: c.left_to_server.contains(&key),
            key: key.to_string(),
        }
    }
}

/// The JSON report's `vm_state`: the VM's state, or `<shown>/<expected>` for a count.
fn vm_state(m: &Mismatch) -> Option<String> {
    match &m.subject {
        Subject::Vm(vm) | Subject::Conflict { is: vm, .. } => Some(vm.state.clone()),
        Subject::MapRows { shown, expected } => Some(format!("{shown}/{expected}")),
        Subject::Blind { since, .. } => Some(format!("since {since}")),
        Subject::Node(_) => None,
    }
}
