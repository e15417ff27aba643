//! The explanation of one cluster: its line, the map rows, and the comparison that fills in
//! its VMs, its nodes and its findings.

use std::collections::HashSet;

use super::findings::{finding_lines, reported_lines};
use super::nodes::node_lines;
use super::vms::{stranger_line, vm_lines};
use super::{ClusterLine, Explanation, MapRow, Stranger, owner_text};
use crate::base::time::Timestamp;
use crate::cks::naming::ClusterPrefixes;
use crate::diff::{GONE_EXPUNGED, GONE_MISSING, Mismatch, Policy, diff};
use crate::inventory::ClusterRecord;
use crate::inventory::assemble::{Assembled, Verdict};
use crate::snapshot::{ClusterSnapshot, VanishedHow};
use crate::state::State;

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
