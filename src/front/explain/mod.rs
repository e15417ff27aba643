//! `cks-drift explain CLUSTER`: one cluster's three views side by side for an operator's
//! triage at the terminal: its map rows, its VMs with their state and times, its Kubernetes
//! nodes, which rule made each finding or why a thing is not one, and what has been reported
//! and when (from the state file). Read-only: it sends nothing and takes no lock.
//!
//! The findings are the diff's own (`diff::diff` on the same snapshot a cycle builds); this
//! module only says, for every VM and node, which rule applied. `explanation` is pure;
//! `run` fetches the inventory (listing the nodes of this one cluster) and prints.
//!
//! Its parts: `cluster` (the explanation of one cluster and the comparison), `vms` and `nodes`
//! (their lines, each with the rule that applied), `findings` (what this look found and what
//! was reported before), `text` (the text form; the JSON form is these types' `Serialize`)
//! and `gather` (what `explain` reads: the cluster asked for, the inventory, the state file).

use std::io::Write;

use serde::Serialize;

use crate::base::error_chain::error_chain;
use crate::base::time::Timestamp;
use crate::config::Config;
use crate::snapshot::{Owner, Vm};

mod cluster;
mod findings;
mod gather;
mod nodes;
mod text;
mod vms;

pub use cluster::explanation;
pub use gather::{ExplainError, Listed, explain, pick};
pub use text::to_text;
pub use vms::strangers;

/// One cluster, explained.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explanation {
    pub cluster: ClusterLine,
    /// `checked`, `partial` (the nodes could not be listed) or `skipped`.
    pub status: &'static str,
    /// Why it was skipped, or why its nodes could not be listed.
    pub reason: Option<String>,
    pub grace_period_seconds: u64,
    pub at: Timestamp,
    /// The map rows: those the API shows, then those it hides that were found gone.
    pub map: Vec<MapRow>,
    pub expected_vms: u32,
    /// The map's VMs, the owner's VMs named as its nodes, and VMs named so by someone else.
    pub vms: Vec<VmLine>,
    /// `None` when the nodes were not listed.
    pub nodes: Option<Vec<NodeLine>>,
    pub findings: Vec<FindingLine>,
    /// What the state file holds for the cluster: findings reported and not resolved since.
    pub reported: Option<Vec<ReportedLine>>,
    /// Notifications about the cluster queued in the state file, not yet delivered.
    pub pending: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusterLine {
    pub id: String,
    pub name: String,
    pub state: String,
    pub zone: Option<String>,
    pub owner: String,
    pub control_nodes: u32,
    pub size: u32,
    pub etcd_nodes: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MapRow {
    pub vm_id: String,
    pub vm_name: Option<String>,
    /// The VM's state, or `Expunged` / `Missing` for a row whose VM is gone.
    pub state: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VmLine {
    pub id: String,
    pub name: String,
    pub state: String,
    pub created: Option<Timestamp>,
    pub last_change: Option<Timestamp>,
    pub mapped: bool,
    /// `control`, `worker` or `etcd`, as its name says; `None` for a mapped VM named otherwise.
    pub role: Option<&'static str>,
    /// The finding's key, when it is one.
    pub finding: Option<String>,
    /// The rule that applied, in words.
    pub verdict: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeLine {
    pub name: String,
    /// Its `Ready` condition: `Ready`, `NotReady` or `Unknown` (the kubelet went silent);
    /// `None` when it has none or the command does not list it.
    pub ready: Option<&'static str>,
    /// `status.nodeInfo.systemUUID` and `spec.providerID`, as listed.
    pub system_uuid: Option<String>,
    pub provider_id: Option<String>,
    /// The VM it matches, `<name> (<id>)`.
    pub vm: Option<String>,
    pub finding: Option<String>,
    pub verdict: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FindingLine {
    pub kind: &'static str,
    pub key: String,
    /// What was found, as the event log says it.
    pub reason: String,
    /// First reported, from the state file.
    pub since: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReportedLine {
    pub key: String,
    pub since: Timestamp,
    pub alert: bool,
    pub annotation: bool,
    /// Held by a storm: only its event was written.
    pub held: bool,
    /// Still found by this look (it resolves at the next cycle otherwise).
    pub open: bool,
    /// A node-side finding of a cluster whose nodes were not listed: kept as it is, neither
    /// found again nor resolved, until they are.
    pub kept: bool,
}

/// VMs named like a node of the cluster but owned by someone else: never the cluster's.
#[derive(Debug, Clone, PartialEq)]
pub struct Stranger {
    pub vm: Vm,
    pub owner: String,
}

fn owner_text(owner: Option<&Owner>) -> String {
    match owner {
        Some(Owner::Account { account, domain_id }) => {
            format!("account {account} (domain {domain_id})")
        }
        Some(Owner::Project { project_id, .. }) => format!("project {project_id}"),
        None => "unknown".into(),
    }
}

/// `cks-drift explain`: prints the explanation, returns the exit code.
pub async fn run(config: &Config, wanted: &str, json: bool, out: &mut dyn Write) -> i32 {
    match explain(config, wanted, Timestamp::now()).await {
        Ok(e) => {
            let text = if json {
                crate::base::untrusted::json_visible(
                    serde_json::to_string_pretty(&e).unwrap_or_default(),
                ) + "\n"
            } else {
                to_text(&e)
            };
            let _ = out.write_all(text.as_bytes());
            0
        }
        Err(e) => {
            eprintln!("cks-drift: {}", error_chain(&e));
            crate::front::report::exit::CANNOT_RUN
        }
    }
}

#[cfg(test)]
mod tests;
