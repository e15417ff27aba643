//! One tick of the checker, shared by `check`, `run` and `demo`: run the cycle, apply the
//! dedupe step to the state, write the state, then deliver the notifications and write the
//! state again. Without a state (`check --no-notify`) it only runs the cycle.

pub mod cycle;
pub mod diagnose;
pub mod findings;
mod messages;
pub mod takeover;

use std::sync::Arc;

use tracing::{error, info, warn};

use crate::base::error_chain::error_chain;
use crate::base::time::Timestamp;
use crate::cloudstack::client::Client;
use crate::cloudstack::error::ApiError;
use crate::cloudstack::server_check::ServerCheck;
use crate::config::Config;
use crate::database::lock::{Lock, Role};
use crate::diff::{MismatchKind, Policy};
use crate::engine::cycle::{ClusterStatus, CycleError, CycleReport, CycleSettings, run_cycle};
use crate::notify::alertmanager::{
    Alertmanager, AlertmanagerError, FiringCaps, active_for, firing,
};
use crate::notify::{DeliveryCounts, DeliverySettings, deliver};
use crate::remote::NodeLister;
use crate::remote::ssh::{KeyError, SshNodeLister};
use crate::state::State;
use crate::state::file::{StateError, StateFile};
use crate::state::standing::{Standing, standings};
use crate::state::step::{
    Coverage, IgnoreChange, NewKeys, Observed, StepSettings, StormChange, previous_maps, step,
};
use messages::{
    ALERTMANAGER_NOT_SENT, CALLER_UNKNOWN, HANDED_OVER, READ_BACK_FAILED, SERVER_CHECK_ABSENT,
    SERVER_CHECK_OFF, SERVER_CHECK_ON_DEFER, SERVER_CHECK_ON_KEEP, SERVER_CHECK_UNREAD,
    STATE_MOVED_ASIDE, STATE_NOT_WRITTEN, STATE_NOT_WRITTEN_AFTER_DELIVERY, STORM_BEGAN,
    STORM_ENDED, TLS_UNVERIFIED,
};

/// The persisted state and its (locked) file.
#[derive(Debug)]
pub struct Store {
    pub file: StateFile,
    pub state: State,
    /// The state started afresh (no file, or one moved aside): what was reported is read back
    /// from CloudStack before the first dedupe step (see `takeover`).
    pub recover: bool,
}

impl Store {
    /// Opens (and locks) the state file named by the config; a corrupt file is moved aside
    /// with a warning.
    pub fn open(config: &Config) -> Result<Store, StateError> {
        let (file, state, note) = StateFile::open(&config.state.path, Timestamp::now())?;
        let recover = note.created || note.moved_aside.is_some();
        if let Some((moved, why)) = note.moved_aside {
            tracing::warn!(
                path = %config.state.path.display(),
                moved_to = %moved.display(),
                reason = %why,
                "{STATE_MOVED_ASIDE}"
            );
        }
        Ok(Store {
            file,
            state,
            recover,
        })
    }
}

/// Why an engine could not be built from a config: the part that could not be wired. Each
/// variant shows its part's own error as it is.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The CloudStack API client (`[cloudstack]`).
    #[error(transparent)]
    Client(#[from] ApiError),
    /// The SSH node lister (`[ssh]`): its private key.
    #[error(transparent)]
    Ssh(#[from] KeyError),
    /// The Alertmanager client (`[alertmanager]`).
    #[error(transparent)]
    Alertmanager(#[from] AlertmanagerError),
}

/// Everything a tick needs.
pub struct Engine {
    pub api: Arc<Client>,
    pub lister: Arc<dyn NodeLister>,
    pub cycle: CycleSettings,
    pub step: StepSettings,
    pub delivery: DeliverySettings,
    /// `[[ignore]]`: findings they match are reported, not alerted.
    pub ignore: Vec<crate::config::IgnoreRule>,
    /// How long a posted Alertmanager alert stays active (see `alertmanager::active_for`).
    pub alertmanager_active_for: std::time::Duration,
    /// `None` for a check that sends nothing and keeps no state.
    pub store: Option<Store>,
    /// With a database: the lock that makes this instance the active one. Ticks run and
    /// notifications go only while it is held.
    pub lock: Option<Arc<Lock>>,
    /// The lock's `taken` count when the state last caught up with CloudStack: a new term
    /// means another instance may have reported meanwhile.
    pub term_seen: u64,
    /// The API key, to ask once who holds it (`getUser`).
    pub api_key: crate::config::Secret,
    /// Whether the key's role was found fit (or could not be asked): asked until then.
    pub caller_checked: bool,
    /// The management server's own VM map check as last read (`None`: not read yet); kept
    /// when a reading fails, so that an outage does not hand findings back and forth.
    pub server_check: Option<ServerCheck>,
    /// `notify.defer_to_server_check`.
    pub defer_to_server_check: bool,
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
    /// The tick came to writing the state file, and `state_error` says whether it could; false
    /// for a tick that ended before (no state, standing by, the caller not checked).
    pub state_write_attempted: bool,
    /// Clusters with an open `blind` finding.
    pub blind: Vec<Blind>,
    /// The storm under way after the tick: since when, and the findings it holds.
    pub storm: Option<(Timestamp, usize)>,
    /// Open findings an `[[ignore]]` rule matches, by (rule number, reason).
    pub ignored: std::collections::BTreeMap<(usize, String), u64>,
    /// With a state: where each open finding stands with its notifications.
    pub standings: std::collections::HashMap<crate::state::RecordKey, Standing>,
}

/// A cluster whose nodes have not been listed for long: its `blind` finding is open.
#[derive(Debug, Clone, PartialEq)]
pub struct Blind {
    pub cluster_id: String,
    pub name: String,
    /// Since when its nodes have not been listed.
    pub since: Timestamp,
}

impl Engine {
    /// The engine for a config: the API client, the SSH node lister and the settings. The
    /// one place where a configured engine is wired.
    pub fn from_config(config: &Config, store: Option<Store>) -> Result<Engine, EngineError> {
        warn_plain_transport(config);
        warn_readable_secrets(config);
        if config.ssh.host_key_policy == crate::config::HostKeyPolicy::Off {
            tracing::warn!("ssh.host_key_policy {}", crate::config::HOST_KEYS_OFF);
        }
        for (key, message) in
            crate::state::ignore::expiry_warnings(&config.ignore, Timestamp::now())
        {
            tracing::warn!("{key} {message}");
        }
        let api = Client::new(&config.cloudstack)?;
        let lister = SshNodeLister::new(&config.ssh)?;
        Ok(Engine {
            api: Arc::new(api),
            lister: Arc::new(lister),
            cycle: cycle_settings(config),
            step: step_settings(config),
            delivery: delivery_settings(config)?,
            ignore: config.ignore.clone(),
            alertmanager_active_for: active_for(config.check.interval),
            store,
            lock: None,
            term_seen: 0,
            api_key: config.cloudstack.api_key.clone(),
            caller_checked: false,
            server_check: None,
            defer_to_server_check: config.notify.defer_to_server_check,
        })
    }

    /// One tick at `now`: the cycle, then (with a state) the dedupe step, the state written,
    /// and the notifications delivered.
    pub async fn tick(&mut self, now: Timestamp) -> Tick {
        if !self.holds_lock() {
            return Tick::standing_by(self.pending());
        }
        let unasked = match self.check_caller().await {
            Ok(unasked) => unasked,
            Err(e) => return Tick::of(Err(e), self.pending()),
        };
        let report = self.cycle_report(unasked, now).await;
        let Some(store) = self.store.as_mut() else {
            // Without a state (`check --no-notify`), the findings an `[[ignore]]` rule matches
            // are marked from the config alone.
            return Tick::of(mark_ignored(report, &self.ignore, now), 0);
        };
        // A cycle during which the lock was lost decides nothing: the instance that holds
        // it now does.
        if let Some(lock) = &self.lock
            && !lock.confirm().await
        {
            return Tick::standing_by(store.state.outbox.len());
        }
        let mut tick = Tick::of(report, store.state.outbox.len());
        if tick.report.is_ok() && store.recover && !recover_reported(&self.api, store, now).await {
            return tick;
        }
        if let Ok(report) = tick.report.as_mut() {
            let new = decide(report, &mut store.state, &self.ignore, &self.step, now);
            tick.new = Some(new);
        }
        tick.read_state(&store.state);
        // The state is written before anything is sent, also when the cycle failed and only
        // earlier notifications are queued: a crash after this point repeats deliveries
        // (recognised by their markers), it never forgets them; and while the state cannot be
        // written, nothing is sent that a crash would send again.
        tick.state_write_attempted = true;
        if let Err(e) = store.file.save(&store.state) {
            error!(error = %error_chain(&e), "{STATE_NOT_WRITTEN}");
            tick.state_error = Some(e);
            return tick;
        }
        let lock = self.lock.as_deref();
        deliver_queued(&self.api, &self.delivery, lock, store, &mut tick).await;
        // Where each finding stands once what could be delivered was.
        tick.standings = standings(&store.state);
        // Every open finding goes to Alertmanager again, also after a failed cycle: an alert
        // must not lapse because the API was down for a cycle.
        if let Some(am) = &self.delivery.alertmanager {
            let active_until = now.plus(self.alertmanager_active_for);
            let caps = FiringCaps {
                per_cluster: self.step.alert_cap,
                per_tenant: self.step.owner_alert_cap,
            };
            post_firing(am, &store.state, caps, active_until, &mut tick.delivered).await;
        }
        tick.pending = store.state.outbox.len();
        tick
    }

    /// Notifications queued in the state (none without one).
    fn pending(&self) -> usize {
        self.store.as_ref().map_or(0, |s| s.state.outbox.len())
    }

    /// Whether this instance may tick: always without a database, else while it holds the
    /// lock. A term begun since the state last caught up makes it catch up first.
    fn holds_lock(&mut self) -> bool {
        let Some(lock) = &self.lock else {
            return true;
        };
        let term = lock.term();
        if term.role != Role::Active {
            return false;
        }
        if term.taken != self.term_seen {
            // Another instance may have reported and resolved findings while this one
            // stood by: what CloudStack holds is read back before anything is decided.
            self.term_seen = term.taken;
            if let Some(store) = self.store.as_mut() {
                store.recover = true;
            }
        }
        true
    }

    /// Runs the cycle against the maps the state remembers. `unasked` is the error of a
    /// `getUser` that failed before it.
    async fn cycle_report(
        &mut self,
        unasked: Option<ApiError>,
        now: Timestamp,
    ) -> Result<CycleReport, CycleError> {
        let previous = self
            .store
            .as_ref()
            .map(|s| previous_maps(&s.state))
            .unwrap_or_default();
        let (mut report, server) = tokio::join!(
            run_cycle(&self.api, self.lister.clone(), &self.cycle, &previous, now),
            self.api.server_check(),
        );
        self.read_server_check(server);
        if let Ok(report) = &mut report {
            forget_unlisted(self.lister.as_ref(), report).await;
            report.server_check = self.server_check;
            let defer = self.defer_to_server_check && self.server_check == Some(ServerCheck::On);
            for c in report.clusters.iter_mut().filter(|_| !defer) {
                c.left_to_server.clear();
            }
        }
        // `getUser` was refused, yet the cycle's own calls went through: the role lacks that
        // command (or said nothing); said once, and not asked again.
        if let Some(e) = unasked
            && report.is_ok()
        {
            warn!(error = %error_chain(&e), "{CALLER_UNKNOWN}");
            self.caller_checked = true;
        }
        report
    }
}

impl Engine {
    /// Keeps what `listConfigurations` said of the server's own check, and says so when it
    /// changes (the first reading included); a failed reading keeps the last.
    fn read_server_check(&mut self, read: Result<ServerCheck, ApiError>) {
        let now = match read {
            Ok(now) => now,
            Err(e) => {
                tracing::debug!(error = %error_chain(&e), "{SERVER_CHECK_UNREAD}");
                return;
            }
        };
        let before = self.server_check.replace(now);
        if before == Some(now) {
            return;
        }
        let defer = self.defer_to_server_check;
        match now {
            // Most releases have none: said only when one was there before.
            ServerCheck::Absent if before.is_some() => {
                info!(state = now.as_str(), "{SERVER_CHECK_ABSENT}");
            }
            ServerCheck::Absent => {}
            ServerCheck::Off => info!(state = now.as_str(), "{SERVER_CHECK_OFF}"),
            ServerCheck::On if defer => warn!(state = now.as_str(), "{SERVER_CHECK_ON_DEFER}"),
            ServerCheck::On => warn!(state = now.as_str(), "{SERVER_CHECK_ON_KEEP}"),
        }
    }
}

impl Tick {
    /// A tick that ran `report` and left `pending` notifications queued, before anything was
    /// decided or sent.
    fn of(report: Result<CycleReport, CycleError>, pending: usize) -> Tick {
        Tick {
            report,
            new: None,
            delivered: DeliveryCounts::new(),
            pending,
            state_error: None,
            state_write_attempted: false,
            blind: Vec::new(),
            storm: None,
            ignored: Default::default(),
            standings: Default::default(),
        }
    }

    /// The tick of an instance that is not the active one.
    fn standing_by(pending: usize) -> Tick {
        Tick::of(Err(CycleError::Standby), pending)
    }

    /// What the metrics show of the state after the step: blind clusters, the storm and the
    /// ignored findings.
    fn read_state(&mut self, state: &State) {
        self.blind = blind_clusters(state);
        self.standings = standings(state);
        self.storm = state.storm.as_ref().map(|s| (s.since, held(state)));
        for r in state
            .clusters
            .values()
            .flat_map(|c| c.vms.values().chain(c.nodes.values()))
        {
            if let Some(rule) = &r.ignored {
                *self
                    .ignored
                    .entry((rule.rule, rule.reason.clone()))
                    .or_default() += 1;
            }
        }
    }
}

/// Drops what the node lister learned of clusters this cycle's listing no longer shows (their
/// host keys: the address goes to another tenant's cluster next). An empty listing is not
/// taken as "every cluster is gone" (a key that lost its rights sees nothing), as the dedupe
/// step does not take it so.
async fn forget_unlisted(lister: &dyn NodeLister, report: &CycleReport) {
    if report.clusters.is_empty() {
        return;
    }
    let listed: std::collections::HashSet<String> = report
        .clusters
        .iter()
        .map(|c| c.cluster.id.clone())
        .collect();
    lister.forget_unlisted(&listed).await;
}

/// Warns of connections in clear or unverified: to CloudStack and to its database.
fn warn_plain_transport(config: &Config) {
    if config.cloudstack.insecure {
        tracing::warn!(url = %config.cloudstack.url, "{TLS_UNVERIFIED}");
    }
    if config
        .cloudstack
        .url
        .trim()
        .to_ascii_lowercase()
        .starts_with("http://")
    {
        tracing::warn!(
            url = %config.cloudstack.url,
            "cloudstack.url {}",
            crate::config::PLAIN_HTTP
        );
    }
    if let Some(db) = &config.database
        && !db.tls
        && !crate::base::net::is_loopback(&db.host)
    {
        tracing::warn!(
            "database.tls {}",
            crate::config::database_in_clear(&db.host)
        );
    }
}

/// Secrets others may read: warned at every start, as `validate-config` warns.
fn warn_readable_secrets(config: &Config) {
    let allowed = crate::config::secret_file::allowed();
    let private_key = (
        "ssh.private_key".to_string(),
        config.ssh.private_key.clone(),
    );
    for (key, path) in config.secret_files.iter().chain([&private_key]) {
        let what = if key == "ssh.private_key" {
            "is a private key"
        } else {
            "holds a secret"
        };
        if let Some(access) = crate::config::secret_file::access(path)
            && let Some(stranger) = crate::config::secret_file::readers_beyond(&access, &allowed)
        {
            tracing::warn!(
                "{key}: {}",
                crate::config::secret_file::warning(path, what, access.mode, &stranger, &allowed)
            );
        }
    }
}

fn cycle_settings(config: &Config) -> CycleSettings {
    CycleSettings {
        policy: Policy {
            grace_period: config.check.grace_period,
        },
        concurrency: config.check.concurrency,
        default_user: config.ssh.user.clone(),
        node_deadline: node_deadline(config),
        database: config.database.as_ref().map(crate::database::Database::new),
    }
}

fn step_settings(config: &Config) -> StepSettings {
    StepSettings {
        alerts: config.notify.alerts,
        annotations: config.notify.annotations,
        alert_cap: config.notify.alert_cap,
        owner_alert_cap: config.notify.owner_alert_cap,
        blind_after: config.check.blind_after,
        resolve_after: config.check.resolve_after,
        owner_alerts_per_hour: config.notify.owner_alerts_per_hour,
        alert_types: config.notify.alert_types.clone().count(),
        storm: config.notify.storm_clusters,
        alertmanager: config.alertmanager.is_some(),
    }
}

fn delivery_settings(config: &Config) -> Result<DeliverySettings, AlertmanagerError> {
    Ok(DeliverySettings {
        event_log: config.notify.event_log.clone(),
        alert_types: config.notify.alert_types.clone(),
        alertmanager: match &config.alertmanager {
            None => None,
            Some(am) => Some(Arc::new(Alertmanager::new(am)?)),
        },
    })
}

/// The report with the findings an `[[ignore]]` rule matches marked, from the config alone.
fn mark_ignored(
    mut report: Result<CycleReport, CycleError>,
    rules: &[crate::config::IgnoreRule],
    now: Timestamp,
) -> Result<CycleReport, CycleError> {
    let Ok(cycle) = report.as_mut() else {
        return report;
    };
    for c in &mut cycle.clusters {
        c.ignored = crate::state::ignore::matched(rules, &c.cluster, &c.mismatches, now)
            .map(|(key, rule)| (key, format!("rule {}: {}", rule.number, rule.reason)))
            .collect();
    }
    report
}

/// Reads back from CloudStack what was reported (see `takeover`); false when it could not be
/// read, and the tick then decides nothing.
async fn recover_reported(api: &Client, store: &mut Store, now: Timestamp) -> bool {
    match crate::engine::takeover::recover(api, &mut store.state, now).await {
        Ok(_) => {
            store.recover = false;
            true
        }
        Err(e) => {
            // Deciding without it would alert again everything already alerted.
            error!(error = %error_chain(&e), "{READ_BACK_FAILED}");
            false
        }
    }
}

/// The dedupe step on a cycle's report: the state moves on, and the report gets back every
/// open finding. Returns the findings first reported now.
fn decide(
    report: &mut CycleReport,
    state: &mut State,
    rules: &[crate::config::IgnoreRule],
    settings: &StepSettings,
    now: Timestamp,
) -> NewKeys {
    let observed = observe(report, rules, now);
    let mut outcome = step(state, &observed, settings, now);
    // With a state, the report lists every open finding, kept ones included, and
    // those an `[[ignore]]` rule matches with its reason.
    for c in &mut report.clusters {
        c.mismatches = outcome.open.remove(&c.cluster.id).unwrap_or_default();
        c.ignored = ignored_of(state, &c.cluster.id);
        c.left_to_server = left_to_server_of(state, &c.cluster.id);
    }
    for (cluster_id, key) in &outcome.handed_over {
        info!(cluster_id = %cluster_id, key = %key, "{HANDED_OVER}");
    }
    log_storm(outcome.storm.as_ref());
    log_ignore_changes(rules, &outcome.unignored, &outcome.newly_ignored, now);
    outcome.new
}

/// Delivers what is queued, this cycle's and any left from earlier ones, even when the
/// cycle failed: the event log does not need the API.
async fn deliver_queued(
    api: &Client,
    settings: &DeliverySettings,
    lock: Option<&Lock>,
    store: &mut Store,
    tick: &mut Tick,
) {
    let file = &store.file;
    let mut save = |s: &State| file.save(s);
    let (delivered, save_error) = deliver(api, settings, &mut store.state, &mut save, lock).await;
    tick.delivered = delivered;
    if let Some(e) = save_error {
        error!(error = %error_chain(&e), "{STATE_NOT_WRITTEN_AFTER_DELIVERY}");
        tick.state_error = Some(e);
    }
}

/// Posts every open finding to Alertmanager, active until `active_until`, and counts them.
async fn post_firing(
    am: &Alertmanager,
    state: &State,
    caps: FiringCaps,
    active_until: Timestamp,
    delivered: &mut DeliveryCounts,
) {
    let alerts = firing(state, active_until, caps);
    let outcome = match am.post(&alerts).await {
        Ok(()) => "delivered",
        Err(e) => {
            warn!(error = %error_chain(&e), alerts = alerts.len(), "{ALERTMANAGER_NOT_SENT}");
            "failed"
        }
    };
    if !alerts.is_empty() {
        *delivered.entry(("alertmanager", outcome)).or_default() += alerts.len() as u64;
    }
}

impl Engine {
    /// Before the first cycle: whether the API key's role is of type Admin. A role of another
    /// type fails every cycle with the reason (its reports would be incomplete without a
    /// word). When `getUser` fails, the error is returned for the tick to judge: an outage
    /// or bad keys fail the cycle anyway and the question is asked again next time.
    async fn check_caller(&mut self) -> Result<Option<ApiError>, CycleError> {
        if self.caller_checked {
            return Ok(None);
        }
        match self.api.caller(self.api_key.expose()).await {
            Ok(user) => {
                if let Some(problem) = crate::cloudstack::release::role_problem(&user) {
                    return Err(CycleError::Caller(problem));
                }
                self.caller_checked = true;
                Ok(None)
            }
            Err(e) => Ok(Some(e)),
        }
    }
}

/// One WARN per finding an `[[ignore]]` rule stopped matching, naming whether the rule
/// expired; one INFO per finding a rule matches from now on.
fn log_ignore_changes(
    rules: &[crate::config::IgnoreRule],
    unignored: &[IgnoreChange],
    newly: &[IgnoreChange],
    now: Timestamp,
) {
    for IgnoreChange {
        cluster_id,
        key,
        rule: was,
    } in unignored
    {
        let rule = rules.iter().find(|r| r.number == was.rule);
        let why = match rule.and_then(|r| r.expires) {
            Some(t) if t <= now => format!("expired at {t}"),
            _ => "no longer matches it (changed or removed)".to_string(),
        };
        warn!(
            cluster_id = %cluster_id,
            key = %key,
            rule = was.rule,
            reason = %was.reason,
            "[[ignore]] rule {} {why}; the finding is alerted now",
            was.rule
        );
    }
    for IgnoreChange {
        cluster_id,
        key,
        rule,
    } in newly
    {
        info!(
            cluster_id = %cluster_id,
            key = %key,
            rule = rule.rule,
            reason = %rule.reason,
            "[[ignore]] rule {} matches this finding from now on; its alert and annotation \
             are taken back",
            rule.rule
        );
    }
}

/// The open findings of a cluster whose CloudStack alert and annotation are left to the
/// server's own check.
fn left_to_server_of(
    state: &State,
    cluster_id: &str,
) -> std::collections::BTreeSet<crate::diff::FindingKey> {
    state
        .clusters
        .get(cluster_id)
        .into_iter()
        .flat_map(|c| c.vms.iter().chain(&c.nodes))
        .filter(|(_, r)| r.server)
        .map(|(k, _)| k.clone())
        .collect()
}

/// The open findings of a cluster that an `[[ignore]]` rule matches: key, the rule's reason.
fn ignored_of(
    state: &State,
    cluster_id: &str,
) -> std::collections::BTreeMap<crate::diff::FindingKey, String> {
    state
        .clusters
        .get(cluster_id)
        .into_iter()
        .flat_map(|c| c.vms.iter().chain(&c.nodes))
        .filter_map(|(k, r)| {
            let rule = r.ignored.as_ref()?;
            Some((k.clone(), format!("rule {}: {}", rule.rule, rule.reason)))
        })
        .collect()
}

/// What the dedupe step needs of a cycle's report. The findings move over: the report gets
/// every open one back from the step.
/// `rules` mark the findings they match at `now`.
pub fn observe(
    report: &mut CycleReport,
    rules: &[crate::config::IgnoreRule],
    now: Timestamp,
) -> Vec<Observed> {
    report
        .clusters
        .iter_mut()
        .map(|c| Observed {
            cluster: c.cluster.clone(),
            ignored: crate::state::ignore::matched(rules, &c.cluster, &c.mismatches, now)
                .map(|(key, rule)| (key, crate::state::ignore::Ignored::of(rule)))
                .collect(),
            coverage: match c.status {
                ClusterStatus::Checked => Coverage::Full,
                ClusterStatus::Partial => Coverage::VmsOnly,
                ClusterStatus::Skipped => Coverage::None,
            },
            blind_reason: (c.status == ClusterStatus::Partial)
                .then(|| crate::diff::wording::blind_reason(c.node_failure, c.reason.as_deref())),
            listed: c.status != ClusterStatus::Skipped
                && c.node_failure != Some(crate::inventory::NOT_STARTED),
            mismatches: std::mem::take(&mut c.mismatches),
            mapped: c.mapped.clone(),
            expected_vms: c.expected_vms,
            db_ids: c.db_ids.take(),
            left_to_server: c.left_to_server.clone(),
        })
        .collect()
}

/// One WARN when a storm begins, one INFO when it ends.
fn log_storm(change: Option<&StormChange>) {
    match change {
        None => {}
        Some(StormChange::Began {
            clusters,
            checked,
            threshold,
            findings,
        }) => warn!(clusters, checked, threshold, findings, "{STORM_BEGAN}"),
        Some(StormChange::Ended {
            since,
            held,
            released,
        }) => info!(
            %since,
            held,
            released,
            "{STORM_ENDED}"
        ),
    }
}

/// Findings whose alert and annotation a storm holds.
fn held(state: &State) -> usize {
    state
        .clusters
        .values()
        .flat_map(|c| c.vms.values().chain(c.nodes.values()))
        .filter(|r| r.held)
        .count()
}

/// The clusters whose `blind` finding is open, for the metrics.
fn blind_clusters(state: &State) -> Vec<Blind> {
    let key = crate::diff::FindingKey::new(MismatchKind::Blind, crate::diff::BLIND_SUBJECT);
    state
        .clusters
        .iter()
        .filter_map(|(id, c)| {
            let r = c.vms.get(&key)?;
            Some(Blind {
                cluster_id: id.clone(),
                name: c.name.clone(),
                since: r.blind_since.unwrap_or(r.since),
            })
        })
        .collect()
}

/// When a cycle's node listings end: half the interval, so that a cycle leaves room for the
/// rest of its work and for the next one, but never before one listing could have ended.
pub fn node_deadline(config: &Config) -> std::time::Duration {
    (config.check.interval / 2).max(config.ssh.connect_timeout + config.ssh.command_timeout)
}
