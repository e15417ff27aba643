//! The findings of this look in words, and what the state file holds of those reported
//! before.

use std::collections::HashSet;

use super::{FindingLine, ReportedLine};
use crate::diff::wording::reason;
use crate::diff::{FindingKey, Mismatch};
use crate::state::{ClusterState, RecordKey, State};

/// The diff's findings in words, each with when it was first reported (from `recorded`, the
/// cluster's part of the state file).
pub(super) fn finding_lines(
    cluster_name: &str,
    found: &[Mismatch],
    recorded: Option<&ClusterState>,
) -> Vec<FindingLine> {
    found
        .iter()
        .map(|m| {
            let key = m.key();
            FindingLine {
                kind: m.kind.as_str(),
                since: recorded.and_then(|c| c.side(m.side()).get(&key).map(|r| r.since)),
                reason: reason(cluster_name, m),
                key: key.to_string(),
            }
        })
        .collect()
}

/// What the state file holds for cluster `id`: each finding reported, what was sent for it,
/// and whether this look still finds it. `compared` says whether the cluster was compared
/// at all, `nodes_listed` whether its nodes were.
pub(super) fn reported_lines(
    state: &State,
    id: &str,
    found: &[Mismatch],
    compared: bool,
    nodes_listed: bool,
) -> Vec<ReportedLine> {
    let open: HashSet<FindingKey> = found.iter().map(Mismatch::key).collect();
    state
        .clusters
        .get(id)
        .into_iter()
        .flat_map(|c| {
            let vms = c.vms.iter().map(|e| (e, false));
            vms.chain(c.nodes.iter().map(|e| (e, true)))
        })
        .map(|((key, r), node_side)| {
            let rk = RecordKey::finding(id, key);
            let kept = compared && node_side && !nodes_listed;
            ReportedLine {
                key: key.to_string(),
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
