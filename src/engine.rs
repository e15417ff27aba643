//! One tick of the checker, shared by `check`, `run` and `demo`: run the cycle, apply the
//! dedupe step to the state, write the state, then deliver the notifications and write the
//! state again. Without a state (`check --no-notify`) it only runs the cycle.

use std::sync::Arc;

use tracing::error;

use crate::cloudstack::client::Client;
use crate::cycle::{CycleError, CycleReport, CycleSettings, run_cycle};
use crate::notify::{DeliveryCounts, DeliverySettings, deliver};
use crate::remote::NodeLister;
use crate::report::NewKeys;
use crate::state::State;
use crate::state::file::{StateError, StateFile};
use crate::state::step::{StepSettings, previous_maps, step};
use crate::time::Timestamp;

/// The persisted state and its (locked) file.
#[derive(Debug)]
pub struct Store {
    pub file: StateFile,
    pub state: State,
}

/// Everything a tick needs.
pub struct Engine {
    pub api: Arc<Client>,
    pub lister: Arc<dyn NodeLister>,
    pub cycle: CycleSettings,
    pub step: StepSettings,
    pub delivery: DeliverySettings,
    /// `None` for a check that sends nothing and keeps no state.
    pub store: Option<Store>,
}

/// What a tick did.
#[derive(Debug)]
pub struct Tick {
    /// The cycle's report; with a state, each cluster lists every open mismatch (kept ones
    /// included), not only what this cycle saw.
    pub report: Result<CycleReport, CycleError>,
    /// Mismatches first reported by this tick (with a state).
    pub new: Option<NewKeys>,
    pub delivered: DeliveryCounts,
    /// Notifications still queued after the tick.
    pub pending: usize,
    /// The state could not be written: nothing was sent.
    pub state_error: Option<StateError>,
}

impl Engine {
    pub async fn tick(&mut self, now: Timestamp) -> Tick {
        let previous = self
            .store
            .as_ref()
            .map(|s| previous_maps(&s.state))
            .unwrap_or_default();
        let report = run_cycle(&self.api, self.lister.clone(), &self.cycle, &previous, now).await;
        let Some(store) = self.store.as_mut() else {
            return Tick {
                report,
                new: None,
                delivered: DeliveryCounts::new(),
                pending: 0,
                state_error: None,
            };
        };
        let mut tick = Tick {
            report,
            new: None,
            delivered: DeliveryCounts::new(),
            pending: store.state.outbox.len(),
            state_error: None,
        };
        if let Ok(report) = tick.report.as_mut() {
            let outcome = step(&mut store.state, report, &self.step, now);
            for c in &mut report.clusters {
                c.mismatches = outcome.open.get(&c.id).cloned().unwrap_or_default();
            }
            tick.new = Some(outcome.new);
        }
        // The state is written before anything is sent, also when the cycle failed and only
        // earlier notifications are queued: a crash after this point repeats deliveries
        // (recognised by their markers), it never forgets them; and while the state cannot be
        // written, nothing is sent that a crash would send again.
        if let Err(e) = store.file.save(&store.state) {
            error!(error = %crate::cli::error_chain(&e), "cannot write the state file; nothing is sent this cycle");
            tick.state_error = Some(e);
            return tick;
        }
        // Deliver what is queued, this cycle's and any left from earlier ones, even when the
        // cycle failed: the event log does not need the API.
        let file = &store.file;
        let mut save = |s: &State| file.save(s);
        let (delivered, save_error) =
            deliver(&self.api, &self.delivery, &mut store.state, &mut save).await;
        tick.delivered = delivered;
        if let Some(e) = save_error {
            error!(error = %crate::cli::error_chain(&e), "cannot write the state file after a delivery; nothing more is sent this cycle");
            tick.state_error = Some(e);
        }
        tick.pending = store.state.outbox.len();
        tick
    }
}
