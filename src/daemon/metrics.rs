//! The Prometheus metrics of `cks-drift run`: one struct of typed handles, updated by the
//! daemon after each tick and rendered by hand in the classic text exposition format 0.0.4,
//! the format Debian 12's `promtool check metrics` reads (the OpenMetrics text of the
//! `prometheus-client` crate fails it).
//!
//! No global registry: the daemon owns one `Metrics` and shares it with the HTTP endpoint.
//! Serving it belongs to `daemon::http`; what a cycle found is decided by `cycle` and the
//! dedupe, not here.

mod help;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::cloudstack::client::Client;
use crate::cloudstack::server_check::ServerCheck;
use crate::database::lock::Role;
use crate::database::topology::Node;
use crate::diff::MismatchKind;
use crate::engine::Tick;
use crate::engine::cycle::{ClusterStatus, MapSource};
use help::{
    API_REQUESTS_TOTAL, BLIND_SECONDS, CLUSTERS, CYCLES_TOTAL, FINDINGS_LEFT_TO_SERVER,
    IGNORED_FINDINGS, LOCK_HELD_ELSEWHERE, LOCK_NODE_INFO, MAP_READS_TOTAL, NOTIFICATIONS_TOTAL,
    ROLE, SERVER_CHECK, STATE_WRITE_FAILING, STATE_WRITE_FAILURES_TOTAL, STORM,
    STORM_HELD_FINDINGS,
};

/// The `Content-Type` of the exposition.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// How a tick ended, the label of `cks_drift_cycles_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CycleOutcome {
    /// The cycle ran and the state was written.
    Ok,
    /// The cycle could not run (an API list failed), or the state could not be written.
    Failed,
}

impl CycleOutcome {
    pub const ALL: [CycleOutcome; 2] = [CycleOutcome::Ok, CycleOutcome::Failed];

    pub fn as_str(self) -> &'static str {
        match self {
            CycleOutcome::Ok => "ok",
            CycleOutcome::Failed => "failed",
        }
    }

    /// The outcome of a tick.
    pub fn of(tick: &Tick) -> CycleOutcome {
        if tick.report.is_ok() && tick.state_error.is_none() {
            CycleOutcome::Ok
        } else {
            CycleOutcome::Failed
        }
    }
}

const CLUSTER_STATUSES: [ClusterStatus; 3] = [
    ClusterStatus::Checked,
    ClusterStatus::Partial,
    ClusterStatus::Skipped,
];

/// The labels `NodeListError::reason` (and the cycle's `internal`) give; present from the
/// start so that a rate over them never starts from a missing series.
const SSH_REASONS: [&str; 7] = [
    "auth", "command", "connect", "host_key", "internal", "output", "timeout",
];

/// Delivery channels and outcomes, as `notify::deliver` counts them.
const CHANNELS: [&str; 4] = ["alert", "alertmanager", "annotation", "event_log"];
const DELIVERY_OUTCOMES: [&str; 3] = ["delivered", "failed", "refused"];

/// The labelled families, behind one lock.
struct Families {
    cycles: BTreeMap<CycleOutcome, u64>,
    /// Indexed like `CLUSTER_STATUSES`.
    clusters: [u64; 3],
    open_mismatches: BTreeMap<MismatchKind, u64>,
    ssh_failures: BTreeMap<&'static str, u64>,
    notifications: BTreeMap<(&'static str, &'static str), u64>,
    map_reads: BTreeMap<&'static str, u64>,
    /// Clusters with an open `blind` finding: id, name, since (Unix seconds).
    blind: Vec<(String, String, i64)>,
    /// The findings a storm under way holds (none without one).
    storm: Option<usize>,
    /// Open findings an `[[ignore]]` rule matches, by (rule number, reason).
    ignored: BTreeMap<(usize, String), u64>,
    /// CloudStack's own VM map check as last read, and the open findings left to it.
    server_check: Option<(ServerCheck, u64)>,
}

/// Where a cycle read the map rows the API hides: the label of `cks_drift_map_reads_total`.
const MAP_SOURCES: [&str; 3] = ["api", "database", "database_failed"];

fn map_source_label(source: &MapSource) -> &'static str {
    match source {
        MapSource::Api => "api",
        MapSource::Database { .. } => "database",
        MapSource::DatabaseFailed { .. } => "database_failed",
    }
}

/// `cks_drift_api_requests_total`, fed by the client's cumulative counts. A reload builds a
/// new client whose counts start again at zero, so the totals are kept here and only the
/// growth since the last look is added.
#[derive(Default)]
struct ApiRequests {
    client: Option<Arc<Client>>,
    seen: BTreeMap<(String, &'static str), u64>,
    totals: BTreeMap<(String, &'static str), u64>,
}

impl ApiRequests {
    fn sync(&mut self) {
        let Some(client) = &self.client else { return };
        for (command, outcome, count) in client.stats() {
            let key = (command, outcome);
            let seen = self.seen.entry(key.clone()).or_default();
            let growth = count.saturating_sub(*seen);
            *seen = count;
            *self.totals.entry(key).or_default() += growth;
        }
    }
}

/// Every metric of the daemon.
pub struct Metrics {
    check_enabled: AtomicBool,
    /// Holds the database lock (always, without a database).
    active: AtomicBool,
    /// The lock keeper's flag: another database user's connection holds the lock.
    held_elsewhere: std::sync::OnceLock<std::sync::Arc<AtomicBool>>,
    /// The server this instance holds the lock on: kind, node name, Galera cluster.
    lock_node: Mutex<Option<[String; 3]>>,
    notifications_pending: AtomicU64,
    /// `f64` bits; NaN until the first tick ends.
    cycle_duration: AtomicU64,
    /// `f64` bits of Unix seconds; 0 until a cycle succeeds.
    last_success: AtomicU64,
    /// The last attempt to write the state file failed.
    state_write_failing: AtomicBool,
    state_write_failures: AtomicU64,
    families: Mutex<Families>,
    api: Mutex<ApiRequests>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain counters behind: still usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Metrics {
    pub fn new(check_enabled: bool) -> Metrics {
        let families = Families {
            cycles: CycleOutcome::ALL.iter().map(|&o| (o, 0)).collect(),
            clusters: [0; 3],
            open_mismatches: MismatchKind::ALL.iter().map(|&k| (k, 0)).collect(),
            ssh_failures: SSH_REASONS.iter().map(|&r| (r, 0)).collect(),
            notifications: CHANNELS
                .iter()
                .flat_map(|&c| DELIVERY_OUTCOMES.iter().map(move |&o| ((c, o), 0)))
                .collect(),
            map_reads: MAP_SOURCES.iter().map(|&s| (s, 0)).collect(),
            blind: Vec::new(),
            storm: None,
            ignored: BTreeMap::new(),
            server_check: None,
        };
        Metrics {
            check_enabled: AtomicBool::new(check_enabled),
            active: AtomicBool::new(true),
            held_elsewhere: std::sync::OnceLock::new(),
            lock_node: Mutex::new(None),
            notifications_pending: AtomicU64::new(0),
            cycle_duration: AtomicU64::new(f64::NAN.to_bits()),
            last_success: AtomicU64::new(0f64.to_bits()),
            state_write_failing: AtomicBool::new(false),
            state_write_failures: AtomicU64::new(0),
            families: Mutex::new(families),
            api: Mutex::new(ApiRequests::default()),
        }
    }

    pub fn set_check_enabled(&self, enabled: bool) {
        self.check_enabled.store(enabled, Ordering::Relaxed);
    }

    pub fn set_role(&self, role: Role) {
        self.active.store(role == Role::Active, Ordering::Relaxed);
    }

    /// The server the lock is held on, while it is (`None` otherwise, or when unknown).
    pub fn set_lock_node(&self, node: Option<&Node>) {
        *lock(&self.lock_node) = node.map(|n| {
            [
                n.kind.as_str().to_string(),
                n.name.clone(),
                n.cluster.clone().unwrap_or_default(),
            ]
        });
    }

    /// Shows the lock keeper's `held_elsewhere` flag (see `database::lock::Lock`).
    pub fn follow_lock_holder(&self, flag: std::sync::Arc<AtomicBool>) {
        let _ = self.held_elsewhere.set(flag);
    }

    /// Counts the API requests of `client` from now on (what an earlier client counted
    /// is kept).
    pub fn track_api_client(&self, client: Arc<Client>) {
        let mut api = lock(&self.api);
        api.sync();
        api.client = Some(client);
        api.seen.clear();
        // Whatever the new client counted before it was tracked belongs to these totals too.
        api.sync();
    }

    /// Records a finished tick that took `duration` and ended at `finished`.
    pub fn record_tick(&self, tick: &Tick, duration: Duration, finished: SystemTime) {
        let outcome = CycleOutcome::of(tick);
        self.cycle_duration
            .store(duration.as_secs_f64().to_bits(), Ordering::Relaxed);
        self.notifications_pending
            .store(tick.pending as u64, Ordering::Relaxed);
        if outcome == CycleOutcome::Ok {
            let secs = finished
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs_f64();
            self.last_success.store(secs.to_bits(), Ordering::Relaxed);
        }
        // A tick that did not come to writing (standing by, the caller not checked) says
        // nothing about the file: the gauge keeps what the last attempt found.
        if tick.state_write_attempted {
            let failed = tick.state_error.is_some();
            self.state_write_failing.store(failed, Ordering::Relaxed);
            if failed {
                self.state_write_failures.fetch_add(1, Ordering::Relaxed);
            }
        }
        let mut f = lock(&self.families);
        *f.cycles.entry(outcome).or_default() += 1;
        for (&(channel, result), &n) in &tick.delivered {
            *f.notifications.entry((channel, result)).or_default() += n;
        }
        // A failed cycle saw nothing: the gauges keep what the last cycle that ran saw.
        let Ok(report) = &tick.report else { return };
        *f.map_reads
            .entry(map_source_label(&report.map_source))
            .or_default() += 1;
        f.blind = tick
            .blind
            .iter()
            .map(|b| (b.cluster_id.clone(), b.name.clone(), b.since.unix()))
            .collect();
        f.storm = tick.storm.map(|(_, held)| held);
        f.ignored = tick.ignored.clone();
        if let Some(check) = report.server_check {
            let left = report
                .clusters
                .iter()
                .map(|c| c.left_to_server.len())
                .sum::<usize>();
            f.server_check = Some((check, left as u64));
        }
        f.clusters = CLUSTER_STATUSES
            .map(|s| report.clusters.iter().filter(|c| c.status == s).count() as u64);
        for count in f.open_mismatches.values_mut() {
            *count = 0;
        }
        for m in report.clusters.iter().flat_map(|c| &c.mismatches) {
            *f.open_mismatches.entry(m.kind).or_default() += 1;
        }
        for reason in report.clusters.iter().filter_map(|c| c.node_failure) {
            *f.ssh_failures.entry(reason).or_default() += 1;
        }
    }

    /// The exposition, classic text format 0.0.4.
    pub fn render(&self) -> String {
        let api_totals = {
            let mut api = lock(&self.api);
            api.sync();
            api.totals.clone()
        };
        let f = lock(&self.families);
        let mut out = String::new();
        self.render_instance(&mut out);
        self.render_cycles(&mut out, &f);
        self.render_state_file(&mut out);
        render_last_cycle(&mut out, &f);
        render_traffic(&mut out, &f, &api_totals);
        render_finding_states(&mut out, &f);
        self.render_queue(&mut out);
        out
    }

    /// Whether this instance checks at all: `check.enabled`, its role and the database lock.
    fn render_instance(&self, out: &mut String) {
        header(
            out,
            "cks_drift_check_enabled",
            "gauge",
            "1 while checking is on (check.enabled), 0 while it is off.",
        );
        let enabled = u64::from(self.check_enabled.load(Ordering::Relaxed));
        sample(out, "cks_drift_check_enabled", &[], enabled);

        header(out, "cks_drift_role", "gauge", ROLE);
        let active = self.active.load(Ordering::Relaxed);
        for (role, on) in [("active", active), ("standby", !active)] {
            sample(out, "cks_drift_role", &[("role", role)], u64::from(on));
        }

        header(
            out,
            "cks_drift_lock_held_elsewhere",
            "gauge",
            LOCK_HELD_ELSEWHERE,
        );
        let elsewhere = self
            .held_elsewhere
            .get()
            .is_some_and(|f| f.load(Ordering::Relaxed));
        sample(
            out,
            "cks_drift_lock_held_elsewhere",
            &[],
            u64::from(elsewhere),
        );

        let name = "cks_drift_database_lock_node_info";
        header(out, name, "gauge", LOCK_NODE_INFO);
        if let Some([kind, node, cluster]) = &*lock(&self.lock_node) {
            let labels = [
                ("kind", kind.as_str()),
                ("node", node),
                ("cluster", cluster),
            ];
            sample(out, name, &labels, 1);
        }
    }

    /// How the cycles went: where the map was read, outcomes, the last one's duration and
    /// when one last succeeded.
    fn render_cycles(&self, out: &mut String, f: &Families) {
        header(out, "cks_drift_map_reads_total", "counter", MAP_READS_TOTAL);
        for (source, n) in &f.map_reads {
            sample(out, "cks_drift_map_reads_total", &[("source", source)], n);
        }

        header(out, "cks_drift_cycles_total", "counter", CYCLES_TOTAL);
        for (outcome, n) in &f.cycles {
            sample(
                out,
                "cks_drift_cycles_total",
                &[("outcome", outcome.as_str())],
                n,
            );
        }

        header(
            out,
            "cks_drift_cycle_duration_seconds",
            "gauge",
            "Duration of the last cycle: checking, writing the state and delivering notifications.",
        );
        let duration = f64::from_bits(self.cycle_duration.load(Ordering::Relaxed));
        if !duration.is_nan() {
            sample(
                out,
                "cks_drift_cycle_duration_seconds",
                &[],
                Float(duration),
            );
        }

        header(
            out,
            "cks_drift_last_success_timestamp_seconds",
            "gauge",
            "Unix time at which the last successful cycle ended; 0 before the first.",
        );
        let last = f64::from_bits(self.last_success.load(Ordering::Relaxed));
        sample(
            out,
            "cks_drift_last_success_timestamp_seconds",
            &[],
            Float(last),
        );
    }

    /// Whether the state file can be written: while it cannot, nothing is sent.
    fn render_state_file(&self, out: &mut String) {
        header(
            out,
            "cks_drift_state_write_failing",
            "gauge",
            STATE_WRITE_FAILING,
        );
        let failing = self.state_write_failing.load(Ordering::Relaxed);
        sample(
            out,
            "cks_drift_state_write_failing",
            &[],
            u64::from(failing),
        );
        let name = "cks_drift_state_write_failures_total";
        header(out, name, "counter", STATE_WRITE_FAILURES_TOTAL);
        let failures = self.state_write_failures.load(Ordering::Relaxed);
        sample(out, name, &[], failures);
    }

    /// What the deliveries left queued.
    fn render_queue(&self, out: &mut String) {
        header(
            out,
            "cks_drift_notifications_pending",
            "gauge",
            "Notifications queued in the state file after the last cycle, waiting to be delivered.",
        );
        let pending = self.notifications_pending.load(Ordering::Relaxed);
        sample(out, "cks_drift_notifications_pending", &[], pending);
    }
}

/// What the last cycle that ran found: clusters by status and open mismatches by kind.
fn render_last_cycle(out: &mut String, f: &Families) {
    header(out, "cks_drift_clusters", "gauge", CLUSTERS);
    for (status, n) in CLUSTER_STATUSES.iter().zip(f.clusters) {
        sample(out, "cks_drift_clusters", &[("status", status.as_str())], n);
    }

    header(
        out,
        "cks_drift_open_mismatches",
        "gauge",
        "Mismatches open after the last cycle that ran, by kind.",
    );
    for (kind, n) in &f.open_mismatches {
        sample(
            out,
            "cks_drift_open_mismatches",
            &[("kind", kind.as_str())],
            n,
        );
    }
}

/// Calls to the outside world: API requests, SSH node listings and notification deliveries.
fn render_traffic(
    out: &mut String,
    f: &Families,
    api_totals: &BTreeMap<(String, &'static str), u64>,
) {
    header(
        out,
        "cks_drift_api_requests_total",
        "counter",
        API_REQUESTS_TOTAL,
    );
    for ((command, outcome), n) in api_totals {
        sample(
            out,
            "cks_drift_api_requests_total",
            &[("command", command), ("outcome", outcome)],
            n,
        );
    }

    header(
        out,
        "cks_drift_ssh_failures_total",
        "counter",
        "Node listings over SSH that failed, by reason.",
    );
    for (reason, n) in &f.ssh_failures {
        sample(
            out,
            "cks_drift_ssh_failures_total",
            &[("reason", reason)],
            n,
        );
    }

    header(
        out,
        "cks_drift_notifications_total",
        "counter",
        NOTIFICATIONS_TOTAL,
    );
    for ((channel, result), n) in &f.notifications {
        sample(
            out,
            "cks_drift_notifications_total",
            &[("channel", channel), ("outcome", result)],
            n,
        );
    }
}

/// Open findings in a state of their own: blind clusters, those a storm holds and those an
/// `[[ignore]]` rule matches.
fn render_finding_states(out: &mut String, f: &Families) {
    header(out, "cks_drift_blind_seconds", "gauge", BLIND_SECONDS);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs() as i64;
    for (id, name, since) in &f.blind {
        sample(
            out,
            "cks_drift_blind_seconds",
            &[("cluster_id", id), ("cluster", name)],
            now.saturating_sub(*since).max(0),
        );
    }

    header(out, "cks_drift_storm", "gauge", STORM);
    sample(out, "cks_drift_storm", &[], u64::from(f.storm.is_some()));
    header(
        out,
        "cks_drift_storm_held_findings",
        "gauge",
        STORM_HELD_FINDINGS,
    );
    sample(
        out,
        "cks_drift_storm_held_findings",
        &[],
        f.storm.unwrap_or(0) as u64,
    );

    header(out, "cks_drift_server_check", "gauge", SERVER_CHECK);
    if let Some((check, _)) = f.server_check {
        for state in [ServerCheck::Absent, ServerCheck::Off, ServerCheck::On] {
            let value = u64::from(state == check);
            sample(
                out,
                "cks_drift_server_check",
                &[("state", state.as_str())],
                value,
            );
        }
    }
    header(
        out,
        "cks_drift_findings_left_to_server",
        "gauge",
        FINDINGS_LEFT_TO_SERVER,
    );
    if let Some((_, left)) = f.server_check {
        sample(out, "cks_drift_findings_left_to_server", &[], left);
    }

    header(out, "cks_drift_ignored_findings", "gauge", IGNORED_FINDINGS);
    for ((rule, reason), n) in &f.ignored {
        sample(
            out,
            "cks_drift_ignored_findings",
            &[("rule", &rule.to_string()), ("reason", reason)],
            n,
        );
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {}", escape_help(help));
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (label, value)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{label}=\"{}\"", escape_label_value(value));
        }
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

/// A sample value as the text format spells it (`+Inf`, `-Inf`, `NaN`).
struct Float(f64);

impl std::fmt::Display for Float {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            v if v.is_nan() => f.write_str("NaN"),
            v if v == f64::INFINITY => f.write_str("+Inf"),
            v if v == f64::NEG_INFINITY => f.write_str("-Inf"),
            v => write!(f, "{v}"),
        }
    }
}

/// Label values escape backslash, double quote and line feed.
pub fn escape_label_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// HELP text escapes backslash and line feed.
fn escape_help(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests;
