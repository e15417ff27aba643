//! Where each open finding stands with its notifications, read from the state after a step:
//! alerted and annotated, queued, held by a storm, waiting for its tenant's budget, matched
//! by an `[[ignore]]` rule, or left to CloudStack's own check. For the endpoint's status page
//! and API; pure.

use std::collections::HashMap;

use crate::base::time::Timestamp;
use crate::state::ignore::Ignored;
use crate::state::{Notification, RecordKey, State};

/// One open finding's notifications.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Standing {
    /// First reported.
    pub since: Timestamp,
    /// Its CloudStack alert is raised (recorded), or queued to be.
    pub alert: Sent,
    /// Its annotation is added (recorded), or queued to be.
    pub annotation: Sent,
    /// Held by a storm: only its event was written.
    pub held: bool,
    /// Its alert waits for its tenant's budget.
    pub deferred: bool,
    /// CloudStack's own VM map check alerts it.
    pub left_to_server: bool,
    /// The `[[ignore]]` rule that matches it.
    pub ignored: Option<Ignored>,
}

/// Whether a notification of a finding went out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    No,
    /// Queued in the state, not delivered yet.
    Queued,
    /// Delivered: CloudStack holds it.
    Yes,
}

/// The standing of every open finding, by cluster and key.
pub fn standings(state: &State) -> HashMap<RecordKey, Standing> {
    let mut queued_alerts = std::collections::HashSet::new();
    let mut queued_notes = std::collections::HashSet::new();
    for o in &state.outbox {
        match &o.notification {
            Notification::RaiseAlert {
                cluster_id, key, ..
            } => {
                queued_alerts.insert(RecordKey::new(cluster_id, key));
            }
            Notification::AddAnnotation {
                cluster_id, key, ..
            } => {
                queued_notes.insert(RecordKey::new(cluster_id, key));
            }
            _ => {}
        }
    }
    let sent = |held: bool, queued: bool| match (held, queued) {
        (true, _) => Sent::Yes,
        (false, true) => Sent::Queued,
        (false, false) => Sent::No,
    };
    let mut out = HashMap::new();
    for (id, c) in &state.clusters {
        for (key, r) in c.vms.iter().chain(&c.nodes) {
            let rk = RecordKey::finding(id, key);
            let standing = Standing {
                since: r.since,
                alert: sent(state.alerts.contains_key(&rk), queued_alerts.contains(&rk)),
                annotation: sent(
                    state.annotations.contains_key(&rk),
                    queued_notes.contains(&rk),
                ),
                held: r.held,
                deferred: r.deferred,
                left_to_server: r.server,
                ignored: r.ignored.clone(),
            };
            out.insert(rk, standing);
        }
    }
    out
}
