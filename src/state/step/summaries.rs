//! Summary alerts: the one alert a cluster's findings past `notify.alert_cap` share, whether
//! one is open, and which to archive once none of the findings it covers is open.

use std::collections::BTreeSet;

use super::Queue;
use crate::state::{Notification, State};

/// Queues the archive of the cluster's summary alerts none of whose keys is in `open`.
pub(super) fn archive_summaries(q: &mut Queue<'_>, cluster_id: &str, open: &BTreeSet<String>) {
    for key in summaries_to_archive(q.state, cluster_id, open) {
        q.push(Notification::ArchiveAlert {
            cluster_id: cluster_id.to_string(),
            key,
        });
    }
}

/// Whether a summary alert of the cluster is recorded, or queued, and not being archived.
pub(super) fn has_open_summary(state: &State, cluster_id: &str) -> bool {
    let archiving = |key: &str| {
        state.outbox.iter().any(|o| {
            matches!(&o.notification, Notification::ArchiveAlert { cluster_id: c, key: k }
                if c == cluster_id && k == key)
        })
    };
    let recorded = state
        .alerts
        .iter()
        .any(|(rk, r)| rk.cluster_id == cluster_id && !r.covers.is_empty() && !archiving(&rk.key));
    recorded
        || state.outbox.iter().any(|o| match &o.notification {
            Notification::RaiseAlert {
                cluster_id: c,
                key,
                covers,
                ..
            } => c == cluster_id && !covers.is_empty() && !archiving(key),
            _ => false,
        })
}

/// Summary alerts of a cluster (recorded or still queued) none of whose keys is open.
fn summaries_to_archive(state: &State, cluster_id: &str, open: &BTreeSet<String>) -> Vec<String> {
    let mut out: Vec<String> = state
        .alerts
        .iter()
        .filter(|(rk, r)| {
            rk.cluster_id == cluster_id
                && !r.covers.is_empty()
                && r.covers.iter().all(|k| !open.contains(k))
        })
        .map(|(rk, _)| rk.key.clone())
        .collect();
    for o in &state.outbox {
        if let Notification::RaiseAlert {
            cluster_id: cid,
            key,
            covers,
            ..
        } = &o.notification
            && cid == cluster_id
            && !covers.is_empty()
            && covers.iter().all(|k| !open.contains(k))
            && !out.contains(key)
        {
            out.push(key.clone());
        }
    }
    // Do not queue the same archive twice.
    out.retain(|key| {
        !state.outbox.iter().any(|o| match &o.notification {
            Notification::ArchiveAlert {
                cluster_id: cid,
                key: k,
            } => cid == cluster_id && k == key,
            _ => false,
        })
    });
    out
}
