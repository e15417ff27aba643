//! `cks-drift explain CLUSTER`: one cluster's three views side by side for an operator's
//! triage at the terminal: its map rows, its VMs with their state and times, its Kubernetes
//! nodes, which rule made each finding or why a thing is not one, and what has been reported
//! and when (from the state file). Read-only: it sends nothing and takes no lock.
//!
//! The findings are the diff's own (`diff::diff` on the same snapshot a cycle builds); this
//! module only says, for every VM and node, which rule applied. `explanation` is pure;
//! `run` fetches the inventory (listing the nodes of this one cluster) and prints.

use std::collections::{BTreeSet, HashSet};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use serde::Serialize;

use crate::base::error_chain::error_chain;
use crate::base::time::Timestamp;
use crate::base::untrusted::escaped;
use crate::cks::naming::{ClusterPrefixes, NodeRole};
use crate::cloudstack::client::Client;
use crate::cloudstack::model::KubernetesCluster;
use crate::config::Config;
use crate::diff::identity::{Identity, host_label, identify};
use crate::diff::wording::reason;
use crate::diff::{GONE_EXPUNGED, GONE_MISSING, Mismatch, Policy, Subject, diff};
use crate::inventory::assemble::{Assembled, Verdict, assemble};
use crate::inventory::{ClusterRecord, VmRow};
use crate::remote::Readiness;
use crate::snapshot::{ClusterSnapshot, NodeView, Owner, VanishedHow, Vm, VmState};
use crate::state::{ClusterState, State, record_key, side_key};

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

fn role_text(role: NodeRole) -> &'static str {
    match role {
        NodeRole::Control => "control",
        NodeRole::Worker => "worker",
        NodeRole::Etcd => "etcd",
    }
}

/// Explains one assembled cluster. `strangers` are the VMs named like its nodes that
/// another account or project owns; `state` is the state file's content, if there is one.
pub fn explanation(
    raw: &ClusterRecord,
    assembled: &Assembled,
    strangers: &[Stranger],
    policy: &Policy,
    now: Timestamp,
    state: Option<&State>,
) -> Explanation {
    let info = &raw.info;
    let prefixes = ClusterPrefixes::of(&info.name, &info.id);
    let mut out = Explanation {
        cluster: cluster_line(raw),
        status: "skipped",
        reason: None,
        grace_period_seconds: policy.grace_period.as_secs(),
        at: now,
        map: map_rows(raw),
        expected_vms: info.expected_vms(),
        vms: Vec::new(),
        nodes: None,
        findings: Vec::new(),
        reported: None,
        pending: 0,
    };
    let found = match &assembled.verdict {
        Verdict::Skipped { reason, .. } => {
            out.reason = Some(reason.clone());
            Vec::new()
        }
        Verdict::Compare { snapshot, partial } => {
            let why_partial = partial.as_ref().map(|(r, _)| r.as_str());
            compare(&mut out, snapshot, why_partial, &prefixes, policy, now)
        }
    };
    out.vms
        .extend(strangers.iter().map(|s| stranger_line(s, &prefixes)));
    let recorded = state.and_then(|s| s.clusters.get(&info.id));
    out.findings = finding_lines(&info.name, &found, recorded);
    if let Some(state) = state {
        let compared = matches!(&assembled.verdict, Verdict::Compare { .. });
        let nodes_listed = out.nodes.is_some();
        out.reported = Some(reported_lines(
            state,
            &info.id,
            &found,
            compared,
            nodes_listed,
        ));
        out.pending = state
            .outbox
            .iter()
            .filter(|o| o.notification.finding().0 == info.id)
            .count();
    }
    out
}

fn cluster_line(raw: &ClusterRecord) -> ClusterLine {
    let info = &raw.info;
    ClusterLine {
        id: info.id.clone(),
        name: info.name.clone(),
        state: info.state.clone(),
        zone: raw.zone_name.clone().or_else(|| info.zone_id.clone()),
        owner: owner_text(info.owner.as_ref()),
        control_nodes: info.control_nodes,
        size: info.size,
        etcd_nodes: info.etcd_nodes,
    }
}

/// The map rows the API shows.
fn map_rows(raw: &ClusterRecord) -> Vec<MapRow> {
    raw.map
        .iter()
        .map(|vm| MapRow {
            vm_id: vm.id.to_string(),
            vm_name: Some(vm.name.to_string()),
            state: vm.state().as_str().to_string(),
        })
        .collect()
}

/// Runs the diff on a cluster's snapshot and fills in what it compared: its status (with
/// `why_partial`, why its nodes could not be listed), the map rows of VMs gone, its VMs and
/// its nodes. Returns the diff's findings.
fn compare(
    out: &mut Explanation,
    snapshot: &ClusterSnapshot,
    why_partial: Option<&str>,
    prefixes: &ClusterPrefixes,
    policy: &Policy,
    now: Timestamp,
) -> Vec<Mismatch> {
    out.status = if why_partial.is_some() {
        "partial"
    } else {
        "checked"
    };
    out.reason = why_partial.map(str::to_string);
    let found = diff(snapshot, policy, now);
    let keys: HashSet<String> = found.iter().map(|m| m.key().to_string()).collect();
    out.map.extend(snapshot.vanished.iter().map(|v| {
        MapRow {
            vm_id: v.id.clone(),
            vm_name: v.name.clone(),
            state: match v.how {
                VanishedHow::Expunged => GONE_EXPUNGED,
                VanishedHow::DoesNotExist => GONE_MISSING,
            }
            .to_string(),
        }
    }));
    out.vms = vm_lines(snapshot, prefixes, &keys, policy);
    out.nodes = node_lines(snapshot, &found, &keys);
    found
}

/// A VM named like a node of the cluster but owned by someone else.
fn stranger_line(s: &Stranger, prefixes: &ClusterPrefixes) -> VmLine {
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
            "not this cluster's: named like one of its nodes, but owned by {}, not by the cluster's owner",
            s.owner
        ),
    }
}

/// The diff's findings in words, each with when it was first reported (from `recorded`, the
/// cluster's part of the state file).
fn finding_lines(
    cluster_name: &str,
    found: &[Mismatch],
    recorded: Option<&ClusterState>,
) -> Vec<FindingLine> {
    found
        .iter()
        .map(|m| {
            let key = m.key().to_string();
            FindingLine {
                kind: m.kind.as_str(),
                since: recorded.and_then(|c| c.side(m.side()).get(&key).map(|r| r.since)),
                reason: reason(cluster_name, m),
                key,
            }
        })
        .collect()
}

/// What the state file holds for cluster `id`: each finding reported, what was sent for it,
/// and whether this look still finds it. `compared` says whether the cluster was compared
/// at all, `nodes_listed` whether its nodes were.
fn reported_lines(
    state: &State,
    id: &str,
    found: &[Mismatch],
    compared: bool,
    nodes_listed: bool,
) -> Vec<ReportedLine> {
    let open: HashSet<String> = found.iter().map(|m| side_key(&m.key())).collect();
    state
        .clusters
        .get(id)
        .into_iter()
        .flat_map(|c| {
            let vms = c.vms.iter().map(|e| (e, false));
            vms.chain(c.nodes.iter().map(|e| (e, true)))
        })
        .map(|((key, r), node_side)| {
            let rk = record_key(id, key);
            let kept = compared && node_side && !nodes_listed;
            ReportedLine {
                key: key.clone(),
                since: r.since,
                alert: state.alerts.contains_key(&rk),
                annotation: state.annotations.contains_key(&rk),
                held: r.held,
                open: open.contains(key) || !compared || kept,
                kept,
            }
        })
        .collect()
}

/// Every VM of the snapshot with the rule that applied to it, mapped ones first.
fn vm_lines(
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
            grace: crate::config::human_duration(policy.grace_period),
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
                    "finding vm_not_a_node: Running and mapped, no node is named {} and it has not changed for {grace}",
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
                    "not a finding yet: no node is named {}, but it was created or changed at {} (within the grace period of {})",
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
                "finding unmapped_vm: named as a node of this cluster, owned by its owner, in no cluster's map"
                    .to_string(),
            )
        } else {
            let created = vm
                .created
                .or_else(|| crate::cks::naming::created_from_name(&vm.name));
            (
                None,
                format!(
                    "not a finding yet: in no map, but created at {} (within the grace period of {})",
                    created.map_or("?".to_string(), |t| t.to_string()),
                    self.grace
                ),
            )
        }
    }
}

/// For each listed node, how it matched a VM of the cluster (`(id, name)`), as the diff
/// matches them: by system UUID or provider ID where any node is a VM so, else by name.
/// `None` when the nodes were not listed.
#[allow(clippy::type_complexity)]
fn node_matches(snap: &ClusterSnapshot) -> Option<Vec<(Identity, Option<(String, String)>)>> {
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
fn node_lines(
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
                            "finding identity_conflict: named like VM {} ({}), but its system UUID or provider ID is VM {} ({})",
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
                        Identity::Claims(_) => {
                            "the VM its system UUID names is another node's"
                        }
                        _ => "no VM of the cluster has its name",
                    };
                    (Some(without), format!("finding node_without_vm: {why}"))
                } else if let (Identity::Is(_), Some((_, name))) = (identity, &vm) {
                    let renamed = if name.eq_ignore_ascii_case(&host_label(&node.name)) {
                        ""
                    } else {
                        "; its name differs (a VM renamed in CloudStack, or a node renamed by its tenant), which is no finding"
                    };
                    (
                        None,
                        format!("is a VM of the cluster by its system UUID or provider ID{renamed}"),
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

fn opt_time(t: Option<Timestamp>) -> String {
    t.map_or_else(|| "-".to_string(), |t| t.to_string())
}

/// The text form: a few aligned tables. Tenant text is escaped.
pub fn to_text(e: &Explanation) -> String {
    // Every section ends with a line break; a blank line parts them.
    [
        header_text(e),
        map_text(e),
        vms_text(e),
        nodes_text(e),
        findings_text(e),
        reported_text(e),
    ]
    .join("\n")
}

/// Appends `line` and a line break.
fn push_line(out: &mut String, line: String) {
    out.push_str(&line);
    out.push('\n');
}

/// The cluster, and how far it was compared.
fn header_text(e: &Explanation) -> String {
    let mut out = String::new();
    let c = &e.cluster;
    push_line(
        &mut out,
        format!(
            "Kubernetes cluster {} ({}), {}, zone {}, owned by {}",
            escaped(&c.name),
            c.id,
            escaped(&c.state),
            c.zone.as_deref().map_or("?".into(), escaped),
            escaped(&c.owner)
        ),
    );
    let how = match e.status {
        "checked" => "map, VMs and Kubernetes nodes compared".to_string(),
        "partial" => format!(
            "map and VMs compared; the nodes were not: {}",
            escaped(e.reason.as_deref().unwrap_or(""))
        ),
        _ => format!(
            "not compared: {}",
            escaped(e.reason.as_deref().unwrap_or(""))
        ),
    };
    push_line(
        &mut out,
        format!(
            "{how}, at {}, grace period {}",
            e.at,
            crate::config::human_duration(std::time::Duration::from_secs(e.grace_period_seconds))
        ),
    );
    out
}

fn map_text(e: &Explanation) -> String {
    let mut out = String::new();
    let c = &e.cluster;
    push_line(
        &mut out,
        format!(
            "Map: {} rows, {} expected ({} control + {} workers + {} etcd)",
            e.map.len(),
            e.expected_vms,
            c.control_nodes,
            c.size,
            c.etcd_nodes
        ),
    );
    for row in &e.map {
        push_line(
            &mut out,
            format!(
                "  {:<36}  {:<10}  {}",
                row.vm_id,
                escaped(&row.state),
                row.vm_name.as_deref().map_or("?".into(), escaped)
            ),
        );
    }
    out
}

fn vms_text(e: &Explanation) -> String {
    let mut out = String::new();
    push_line(&mut out, format!("VMs: {}", e.vms.len()));
    for vm in &e.vms {
        push_line(
            &mut out,
            format!(
                "  {} ({}), {}, {}{}, created {}, last change {}",
                escaped(&vm.name),
                vm.id,
                escaped(&vm.state),
                if vm.mapped { "mapped" } else { "not mapped" },
                vm.role.map_or(String::new(), |r| format!(", {r}")),
                opt_time(vm.created),
                opt_time(vm.last_change)
            ),
        );
        push_line(&mut out, format!("      {}", escaped(&vm.verdict)));
    }
    out
}

fn nodes_text(e: &Explanation) -> String {
    let mut out = String::new();
    let Some(nodes) = &e.nodes else {
        push_line(&mut out, "Kubernetes nodes: not listed".to_string());
        return out;
    };
    push_line(&mut out, format!("Kubernetes nodes: {}", nodes.len()));
    for n in nodes {
        push_line(
            &mut out,
            format!(
                "  {}, {}, system UUID {}{}{}",
                escaped(&n.name),
                n.ready.unwrap_or("readiness not listed"),
                n.system_uuid.as_deref().map_or("-".into(), escaped),
                n.provider_id
                    .as_deref()
                    .map_or(String::new(), |p| format!(", provider ID {}", escaped(p))),
                n.vm.as_deref()
                    .map_or(String::new(), |v| format!(" -> VM {}", escaped(v)))
            ),
        );
        push_line(&mut out, format!("      {}", escaped(&n.verdict)));
    }
    out
}

fn findings_text(e: &Explanation) -> String {
    let mut out = String::new();
    if e.findings.is_empty() {
        push_line(&mut out, "Findings: none".to_string());
        return out;
    }
    push_line(&mut out, format!("Findings: {}", e.findings.len()));
    for f in &e.findings {
        push_line(
            &mut out,
            format!(
                "  {} ({})",
                escaped(&f.key),
                f.since.map_or("not reported yet".to_string(), |t| format!(
                    "reported since {t}"
                ))
            ),
        );
        push_line(&mut out, format!("      {}", escaped(&f.reason)));
    }
    out
}

/// What the state file holds, and the notifications pending.
fn reported_text(e: &Explanation) -> String {
    let mut out = String::new();
    match &e.reported {
        None => push_line(&mut out, "Reported: no state file".to_string()),
        Some(r) if r.is_empty() => push_line(
            &mut out,
            format!(
                "Reported: nothing open in the state file; {} notifications pending",
                e.pending
            ),
        ),
        Some(r) => {
            push_line(
                &mut out,
                format!(
                    "Reported (state file): {}; {} notifications pending",
                    r.len(),
                    e.pending
                ),
            );
            for line in r {
                push_line(
                    &mut out,
                    format!(
                        "  {} since {}: {}{}",
                        escaped(&line.key),
                        line.since,
                        sent_text(line),
                        if line.kept {
                            "; kept: the nodes were not listed, so it is neither found again nor resolved"
                        } else if line.open {
                            ""
                        } else {
                            "; no longer found, resolves at the next cycle"
                        }
                    ),
                );
            }
        }
    }
    out
}

/// What was sent about a reported finding: `alert, annotation`, `event only`, ...
fn sent_text(line: &ReportedLine) -> String {
    let mut sent = Vec::new();
    if line.alert {
        sent.push("alert");
    }
    if line.annotation {
        sent.push("annotation");
    }
    if line.held {
        sent.push("held by a storm");
    }
    if sent.is_empty() {
        sent.push("event only");
    }
    sent.join(", ")
}

/// Why `explain` could not explain.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    #[error("no Kubernetes cluster is named or has the id {0:?}; `cks-drift check` lists them")]
    NotFound(String),
    #[error("{count} Kubernetes clusters are named {name:?} ({ids}); give the id instead")]
    Ambiguous {
        name: String,
        count: usize,
        ids: String,
    },
    #[error(transparent)]
    Cycle(#[from] crate::inventory::CycleError),
    #[error("{0}")]
    Setup(String),
}

/// A cluster as some listing holds it: `explain` looks one up in the API's listing, then in
/// the cycle's inventory.
pub trait Listed {
    fn id(&self) -> &str;
    fn name(&self) -> &str;
}

impl Listed for KubernetesCluster {
    fn id(&self) -> &str {
        &self.id
    }
    fn name(&self) -> &str {
        &self.name
    }
}

impl Listed for ClusterRecord {
    fn id(&self) -> &str {
        &self.info.id
    }
    fn name(&self) -> &str {
        &self.info.name
    }
}

/// The one cluster named (by name or id) among `clusters`.
pub fn pick<'a, C: Listed>(clusters: &'a [C], wanted: &str) -> Result<&'a C, ExplainError> {
    if let Some(c) = clusters.iter().find(|c| c.id() == wanted) {
        return Ok(c);
    }
    let named: Vec<&C> = clusters.iter().filter(|c| c.name() == wanted).collect();
    match named.as_slice() {
        // Shown with `{:?}`, which escapes control characters.
        [] => Err(ExplainError::NotFound(wanted.to_string())),
        [one] => Ok(one),
        many => Err(ExplainError::Ambiguous {
            name: wanted.to_string(),
            count: many.len(),
            ids: many.iter().map(|c| c.id()).collect::<Vec<_>>().join(", "),
        }),
    }
}

/// Reads the inventory with only `cluster`'s nodes listed, and explains it.
pub async fn explain(
    config: &Config,
    wanted: &str,
    now: Timestamp,
) -> Result<Explanation, ExplainError> {
    let api = Client::new(&config.cloudstack).map_err(|e| ExplainError::Setup(error_chain(&e)))?;
    let lister = crate::remote::ssh::SshNodeLister::new(&config.ssh)
        .map_err(|e| ExplainError::Setup(error_chain(&e)))?;
    let state = read_state(&config.state.path)?;
    let previous = state
        .as_ref()
        .map(crate::state::step::previous_maps)
        .unwrap_or_default();
    let database = config.database.as_ref().map(crate::database::Database::new);
    // The cluster is looked up first, so that only its nodes are listed.
    let clusters: Vec<KubernetesCluster> = api
        .list(
            "listKubernetesClusters",
            "kubernetescluster",
            &crate::cks::ROOT_SCOPE,
        )
        .await
        .map_err(|source| crate::inventory::CycleError::List {
            what: "Kubernetes clusters",
            source,
        })?;
    let id = pick(&clusters, wanted)?.id.clone();
    drop(clusters);
    let listing = crate::inventory::Listing {
        concurrency: 1,
        default_user: &config.ssh.user,
        deadline: crate::engine::node_deadline(config),
        only: Some(&id),
    };
    let inventory = crate::inventory::fetch(
        &api,
        Arc::new(lister),
        listing,
        &previous,
        database.as_ref(),
    )
    .await?;
    let raw = pick(&inventory.clusters, &id)?.clone();
    let strangers = strangers(&raw, &inventory.vms);
    let assembled = assemble(inventory)
        .find(|a| a.id == id)
        .ok_or_else(|| ExplainError::NotFound(id.clone()))?;
    let policy = Policy {
        grace_period: config.check.grace_period,
    };
    Ok(explanation(
        &raw,
        &assembled,
        &strangers,
        &policy,
        now,
        state.as_ref(),
    ))
}

/// The state file's content, read without its lock (a running instance keeps it); `None`
/// when there is none.
fn read_state(path: &Path) -> Result<Option<State>, ExplainError> {
    crate::state::file::read(path).map_err(|e| ExplainError::Setup(error_chain(&e)))
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
