//! The service core under paused time: a scripted engine stands in for `Engine`, a recorder
//! for systemd and a tracing layer for the log. Every record is stamped with the paused
//! clock in milliseconds since the start, so each test asserts exact sequences.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sd_notify::NotifyState;
use tokio::sync::mpsc::{self, UnboundedSender};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};

use super::{Notifier, Parts, SHUTDOWN_DEADLINE, Ticker, serve};
use crate::base::time::Timestamp;
use crate::cloudstack::error::ApiError;
use crate::config::Config;
use crate::daemon::DaemonError;
use crate::daemon::metrics::Metrics;
use crate::database::lock::{Role, Term};
use crate::engine::cycle::{CycleError, CycleReport};
use crate::engine::{EngineError, Store, Tick};

/// What was recorded, by whom, when.
#[derive(Clone)]
struct Record {
    t0: Instant,
    lines: Arc<Mutex<Vec<(u128, Source, String)>>>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    Engine,
    Systemd,
    Log,
}

impl Record {
    fn push(&self, source: Source, text: String) {
        let ms = (Instant::now() - self.t0).as_millis();
        self.lines.lock().unwrap().push((ms, source, text));
    }

    /// `"<ms> <text>"` for each record of `source`, in order.
    fn of(&self, source: Source) -> Vec<String> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, s, _)| *s == source)
            .map(|(ms, _, text)| format!("{ms} {text}"))
            .collect()
    }
}

/// How a scripted tick goes; the last step of a script repeats.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// A cycle that succeeds after this many milliseconds.
    Ok(u64),
    /// A cycle whose listing fails after this many milliseconds.
    Fails(u64),
    /// A tick that does not end by itself.
    Hangs,
    /// A tick whose task panics at once.
    Panics,
}

/// The stand-in for `Engine`: records each tick's start and end as `e<id>`.
struct Fake {
    id: usize,
    script: Arc<Mutex<VecDeque<Step>>>,
    record: Record,
}

/// Records `cancelled` when a tick is dropped before it ended.
struct Cancelled {
    record: Record,
    id: usize,
    armed: bool,
}

impl Drop for Cancelled {
    fn drop(&mut self) {
        if self.armed {
            self.record
                .push(Source::Engine, format!("cancelled e{}", self.id));
        }
    }
}

impl Ticker for Fake {
    fn tick(&mut self, _now: Timestamp) -> impl Future<Output = Tick> + Send {
        let step = {
            let mut script = self.script.lock().unwrap();
            if script.len() > 1 {
                script.pop_front().unwrap()
            } else {
                script[0]
            }
        };
        let record = self.record.clone();
        let id = self.id;
        async move {
            record.push(Source::Engine, format!("start e{id}"));
            let mut guard = Cancelled {
                record: record.clone(),
                id,
                armed: true,
            };
            let report = match step {
                Step::Ok(ms) => {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    Ok(CycleReport {
                        started: Timestamp::parse("2026-11-30T10:05:00Z").unwrap(),
                        duration: Duration::from_millis(ms),
                        clusters: vec![],
                        map_source: Default::default(),
                        server_check: None,
                    })
                }
                Step::Fails(ms) => {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    Err(CycleError::List {
                        what: "Kubernetes clusters",
                        source: ApiError::Decode {
                            command: "listKubernetesClusters".into(),
                            detail: "the database is down".into(),
                        },
                    })
                }
                Step::Hangs => std::future::pending().await,
                Step::Panics => {
                    guard.armed = false;
                    panic!("a scripted panic")
                }
            };
            guard.armed = false;
            record.push(Source::Engine, format!("end e{id}"));
            Tick {
                report,
                new: None,
                delivered: Default::default(),
                pending: 0,
                state_error: None,
                state_write_attempted: false,
                blind: Vec::new(),
                storm: None,
                ignored: Default::default(),
                standings: Default::default(),
            }
        }
    }

    fn take_over(&mut self, old: Option<Fake>, _metrics: &Metrics) {
        if let Some(old) = old {
            self.record.push(
                Source::Engine,
                format!("e{} takes over from e{}", self.id, old.id),
            );
        }
    }
}

/// systemd's stand-in: each call as one datagram would be, with the wall-clock time in
/// `last cycle <time>` masked.
struct Recorder(Record);

impl Notifier for Recorder {
    fn notify(&self, states: &[NotifyState<'_>]) {
        let text = states
            .iter()
            .map(|s| {
                let s = s.to_string();
                match s.strip_prefix("STATUS=last cycle ") {
                    // The time is `YYYY-MM-DDTHH:MM:SSZ`, 20 characters.
                    Some(rest) if rest.len() >= 20 => {
                        format!("STATUS=last cycle <time>{}", &rest[20..])
                    }
                    _ => s,
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        self.0.push(Source::Systemd, text);
    }
}

/// Records each log event as `LEVEL message field=value...`.
struct Capture(Record);

#[derive(Default)]
struct Fields {
    message: String,
    rest: String,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        } else {
            let _ = write!(self.rest, " {}={value:?}", field.name());
        }
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        self.0.push(
            Source::Log,
            format!(
                "{} {}{}",
                event.metadata().level(),
                fields.message,
                fields.rest
            ),
        );
    }
}

fn config_text(check: &str) -> String {
    format!(
        r#"
[cloudstack]
url = "https://cloud.example.com/client/api"
api_key = "KEY"
secret_key = "SECRET"
[ssh]
private_key = "/nonexistent/id_rsa"
[check]
{check}
[state]
path = "/nonexistent/state.json"
[http]
listen = ""
"#
    )
}

fn parse(text: &str) -> Config {
    Config::from_toml(text, Path::new("test.toml"), &|_| None).unwrap()
}

/// A config with these `[check]` lines.
fn config(check: &str) -> Config {
    parse(&config_text(check))
}

/// The service core running on the fake engine; engines built later are e2, e3...
struct Harness {
    record: Record,
    reloads: UnboundedSender<Config>,
    shutdown: CancellationToken,
    service: JoinHandle<Result<(), DaemonError>>,
    /// The configs engines were built from, in order.
    built: Arc<Mutex<Vec<Config>>>,
    _log: tracing::subscriber::DefaultGuard,
}

impl Harness {
    fn start(config: Config, script: &[Step]) -> Harness {
        Harness::start_with(config, script, None)
    }

    /// Starts the core with systemd's watchdog period `watchdog`.
    fn start_with(config: Config, script: &[Step], watchdog: Option<Duration>) -> Harness {
        Harness::start_full(config, script, watchdog, None)
    }

    /// Starts the core with the roles a lock's keeper would announce.
    fn start_full(
        config: Config,
        script: &[Step],
        watchdog: Option<Duration>,
        roles: Option<tokio::sync::watch::Receiver<Term>>,
    ) -> Harness {
        let record = Record {
            t0: Instant::now(),
            lines: Arc::default(),
        };
        // Every task runs on this test's thread, so a thread-wide subscriber sees them all.
        let log = tracing::subscriber::set_default(
            tracing_subscriber::registry().with(Capture(record.clone())),
        );
        let script = Arc::new(Mutex::new(script.iter().copied().collect::<VecDeque<_>>()));
        let built = Arc::new(Mutex::new(Vec::new()));
        let engine = Fake {
            id: 1,
            script: script.clone(),
            record: record.clone(),
        };
        let mut last_id = 1;
        let (build_record, build_log) = (record.clone(), built.clone());
        let build = move |config: &Config, store: Option<Store>| {
            if config.cloudstack.url.contains("refused") {
                return Err(EngineError::Client(ApiError::Config {
                    key: "cloudstack.url",
                    problem: format!("{} is refused", config.cloudstack.url),
                }));
            }
            last_id += 1;
            let with = if store.is_some() {
                " with the state"
            } else {
                ""
            };
            build_record.push(Source::Engine, format!("build e{last_id}{with}"));
            build_log.lock().unwrap().push(config.clone());
            Ok(Fake {
                id: last_id,
                script: script.clone(),
                record: build_record.clone(),
            })
        };
        let (reloads, received) = mpsc::unbounded_channel();
        let shutdown = CancellationToken::new();
        let parts = Parts {
            config,
            engine,
            build,
            endpoint: None,
            reloads: received,
            notifier: Arc::new(Recorder(record.clone())),
            watchdog,
            roles,
            held_elsewhere: None,
        };
        let service = tokio::spawn(serve(parts, shutdown.clone()));
        Harness {
            record,
            reloads,
            shutdown,
            service,
            built,
            _log: log,
        }
    }

    /// Lets the service run until `ms` after the start.
    async fn until(&self, ms: u64) {
        tokio::time::sleep_until(self.record.t0 + Duration::from_millis(ms)).await;
    }

    fn reload(&self, config: Config) {
        self.reloads.send(config).unwrap();
    }

    /// Requests shutdown at `ms` and returns when (in ms) the service returned.
    async fn stop_at(&mut self, ms: u64) -> u128 {
        self.until(ms).await;
        self.shutdown.cancel();
        (&mut self.service).await.unwrap().unwrap();
        (Instant::now() - self.record.t0).as_millis()
    }

    /// What the engines did.
    fn engine(&self) -> Vec<String> {
        self.record.of(Source::Engine)
    }

    fn notes(&self) -> Vec<String> {
        self.record.of(Source::Systemd)
    }

    /// Log events of these levels (e.g. `["WARN", "ERROR"]`).
    fn logs(&self, levels: &[&str]) -> Vec<String> {
        self.record
            .of(Source::Log)
            .into_iter()
            .filter(|l| levels.contains(&l.split(' ').nth(1).unwrap_or("")))
            .collect()
    }
}

const OK_STATUS: &str =
    "STATUS=last cycle <time>: 0 clusters, 0 open mismatches, 0 pending notifications";
const LATE: &str = "WARN the cycle took longer than check.interval; the next one starts late";

#[tokio::test(start_paused = true)]
async fn ticks_start_an_interval_apart_and_a_slow_one_delays_the_next_without_overlap() {
    let mut h = Harness::start(
        config("interval = \"1s\""),
        &[Step::Ok(300), Step::Ok(1500), Step::Ok(1000), Step::Ok(300)],
    );
    assert_eq!(h.stop_at(4200).await, 4200);
    // The interval counts from each start: the 1.5 s tick ends after the next was due, so
    // the next starts at once, never alongside it. A tick exactly as long as the interval
    // is not late.
    assert_eq!(
        h.engine(),
        [
            "0 start e1",
            "300 end e1",
            "1000 start e1",
            "2500 end e1",
            "2500 start e1",
            "3500 end e1",
            "3500 start e1",
            "3800 end e1",
        ]
    );
    assert_eq!(
        h.logs(&["WARN", "ERROR"]),
        [format!("2500 {LATE} took=1.5s interval=1s late=500ms")]
    );
}

#[tokio::test(start_paused = true)]
async fn the_first_tick_waits_for_the_initial_delay() {
    let mut h = Harness::start(
        config("interval = \"1s\"\ninitial_delay = \"5s\""),
        &[Step::Ok(100)],
    );
    assert_eq!(h.stop_at(7500).await, 7500);
    assert_eq!(
        h.engine(),
        [
            "5000 start e1",
            "5100 end e1",
            "6000 start e1",
            "6100 end e1",
            "7000 start e1",
            "7100 end e1",
        ]
    );
    assert_eq!(
        h.notes(),
        [
            "0 READY=1\nSTATUS=waiting for the first cycle".to_string(),
            format!("5100 {OK_STATUS}"),
            format!("6100 {OK_STATUS}"),
            format!("7100 {OK_STATUS}"),
            "7500 STOPPING=1".to_string(),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn systemd_hears_each_outcome_and_a_failed_cycle_is_warned() {
    let mut h = Harness::start(
        config("interval = \"1s\""),
        &[Step::Ok(100), Step::Fails(200), Step::Ok(100)],
    );
    assert_eq!(h.stop_at(2500).await, 2500);
    assert_eq!(
        h.notes(),
        [
            "0 READY=1\nSTATUS=waiting for the first cycle".to_string(),
            format!("100 {OK_STATUS}"),
            "1200 STATUS=last cycle <time> failed: cannot list Kubernetes clusters: cannot \
             read the answer to cloudstack command listKubernetesClusters: the database is \
             down; 0 pending notifications"
                .to_string(),
            format!("2100 {OK_STATUS}"),
            "2500 STOPPING=1".to_string(),
        ]
    );
    assert_eq!(
        h.logs(&["WARN", "ERROR"]),
        [
            "1200 WARN the cycle failed; the next one runs at the next interval error=cannot \
             list Kubernetes clusters: cannot read the answer to cloudstack command \
             listKubernetesClusters: the database is down"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_reload_applies_from_the_next_tick_never_to_the_running_one() {
    let mut h = Harness::start(config("interval = \"1s\""), &[Step::Ok(600)]);
    // Two reloads while the first tick runs: the last one wins, and its interval spaces the
    // next tick from the start of the running one.
    h.until(300).await;
    h.reload(config("interval = \"2s\""));
    h.until(400).await;
    h.reload(config("interval = \"3s\""));
    assert_eq!(h.stop_at(6700).await, 6700);
    assert_eq!(
        h.engine(),
        [
            "0 start e1",
            "300 build e2",
            "400 build e3",
            "600 end e1",
            "3000 e3 takes over from e1",
            "3000 start e3",
            "3600 end e3",
            "6000 start e3",
            "6600 end e3",
        ]
    );
    assert_eq!(
        h.logs(&["INFO"])
            .into_iter()
            .filter(|l| l.contains("reloaded"))
            .collect::<Vec<_>>(),
        [
            "300 INFO config reloaded; it applies from the next cycle enabled=true interval=2s",
            "400 INFO config reloaded; it applies from the next cycle enabled=true interval=3s",
        ]
    );
    assert_eq!(h.logs(&["WARN", "ERROR"]), Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn a_reload_keeps_the_restart_only_keys_and_a_refused_one_changes_nothing() {
    let mut h = Harness::start(config("interval = \"1s\""), &[Step::Ok(100)]);
    h.until(1500).await;
    let moved = config_text("interval = \"2s\"")
        .replace("/nonexistent/state.json", "/elsewhere/state.json")
        .replace("listen = \"\"", "listen = \"127.0.0.1:9999\"")
        + "[log]\nlevel = \"debug\"\n";
    h.reload(parse(&moved));
    h.until(2500).await;
    let refused = config_text("interval = \"10s\"").replace("cloud.example", "refused.example")
        + "[log]\nlevel = \"debug\"\n";
    h.reload(parse(&refused));
    assert_eq!(h.stop_at(5500).await, 5500);
    assert_eq!(
        h.logs(&["WARN", "ERROR"]),
        [
            "1500 WARN state.path cannot change while running; restart to use the new path \
             running=/nonexistent/state.json new=/elsewhere/state.json",
            "1500 WARN http.listen cannot change while running; restart to use the new address \
             running=None new=Some(127.0.0.1:9999)",
            "1500 WARN log.level and log.format take effect at the next restart",
            "2500 ERROR the new config is refused; the old one stays in force \
             error=cloudstack.url: https://refused.example.com/client/api is refused",
        ]
    );
    // The engine was built with the keys in force, and the 2 s interval stayed in force.
    let built = h.built.lock().unwrap().clone();
    assert_eq!(built.len(), 1);
    assert_eq!(built[0].state.path, Path::new("/nonexistent/state.json"));
    assert_eq!(built[0].http.listen, None);
    assert_eq!(built[0].log.level, "debug");
    assert_eq!(
        h.engine(),
        [
            "0 start e1",
            "100 end e1",
            "1000 start e1",
            "1100 end e1",
            "1500 build e2",
            "3000 e2 takes over from e1",
            "3000 start e2",
            "3100 end e2",
            "5000 start e2",
            "5100 end e2",
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn disabled_checking_runs_no_tick_until_a_reload_turns_it_on() {
    let mut h = Harness::start(
        config("interval = \"1s\"\nenabled = false"),
        &[Step::Ok(800)],
    );
    // An hour without a tick.
    h.until(3_600_000).await;
    assert_eq!(h.engine(), Vec::<String>::new());
    // On again: a tick at once. Off again while it runs: it finishes, and no other starts.
    h.reload(config("interval = \"1s\""));
    h.until(3_601_500).await;
    h.reload(config("interval = \"1s\"\nenabled = false"));
    assert_eq!(h.stop_at(3_700_000).await, 3_700_000);
    assert_eq!(
        h.engine(),
        [
            "3600000 build e2",
            "3600000 e2 takes over from e1",
            "3600000 start e2",
            "3600800 end e2",
            "3601000 start e2",
            "3601500 build e3",
            "3601800 end e2",
        ]
    );
    assert_eq!(
        h.notes(),
        [
            "0 READY=1\nSTATUS=checking is disabled (check.enabled = false)".to_string(),
            format!("3600800 {OK_STATUS}"),
            "3601500 STATUS=checking is disabled (check.enabled = false)".to_string(),
            format!("3601800 {OK_STATUS}; checking is disabled (check.enabled = false)"),
            "3700000 STOPPING=1".to_string(),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn shutdown_lets_a_tick_finish_within_the_deadline() {
    let mut h = Harness::start(config("interval = \"1s\""), &[Step::Ok(3000)]);
    assert_eq!(h.stop_at(1000).await, 3000);
    assert_eq!(h.engine(), ["0 start e1", "3000 end e1"]);
    let logs: Vec<String> = h
        .logs(&["INFO", "WARN", "ERROR"])
        .into_iter()
        .filter(|l| !l.starts_with("0 "))
        .collect();
    assert_eq!(
        logs,
        [
            "1000 INFO shutting down",
            "1000 INFO waiting for the running cycle to finish deadline=10s",
            "3000 INFO the running cycle finished",
        ]
    );
    assert_eq!(
        h.notes(),
        [
            "0 READY=1\nSTATUS=waiting for the first cycle",
            "1000 STOPPING=1"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn shutdown_cancels_a_tick_still_running_at_the_deadline() {
    assert_eq!(SHUTDOWN_DEADLINE, Duration::from_secs(10));
    let mut h = Harness::start(config("interval = \"1s\""), &[Step::Ok(30_000)]);
    assert_eq!(h.stop_at(1000).await, 11_000);
    assert_eq!(h.engine(), ["0 start e1", "11000 cancelled e1"]);
    assert_eq!(
        h.logs(&["WARN", "ERROR"]),
        ["11000 WARN the running cycle was cancelled at the shutdown deadline deadline=10s"]
    );
}

#[tokio::test(start_paused = true)]
async fn the_watchdog_is_pinged_at_half_its_period_also_while_a_tick_hangs() {
    let mut h = Harness::start_with(
        config("interval = \"1s\""),
        &[Step::Hangs],
        Some(Duration::from_millis(400)),
    );
    assert_eq!(h.stop_at(1100).await, 11_100);
    // The pings stop with the shutdown request.
    assert_eq!(
        h.notes(),
        [
            "0 READY=1\nSTATUS=waiting for the first cycle",
            "0 WATCHDOG=1",
            "200 WATCHDOG=1",
            "400 WATCHDOG=1",
            "600 WATCHDOG=1",
            "800 WATCHDOG=1",
            "1000 WATCHDOG=1",
            "1100 STOPPING=1",
        ]
    );
    assert_eq!(h.engine(), ["0 start e1", "11100 cancelled e1"]);
}

#[tokio::test(start_paused = true)]
async fn a_tick_task_that_panics_is_replaced_with_the_state_opened_again() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let text = config_text("interval = \"1s\"")
        .replace("/nonexistent/state.json", &state.display().to_string());
    let mut h = Harness::start(parse(&text), &[Step::Panics, Step::Ok(100)]);
    assert_eq!(h.stop_at(2500).await, 2500);
    assert_eq!(
        h.engine(),
        [
            "0 start e1",
            "0 build e2 with the state",
            "1000 start e2",
            "1100 end e2",
            "2000 start e2",
            "2100 end e2",
        ]
    );
    let errors = h.logs(&["WARN", "ERROR"]);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0]
            .starts_with("0 ERROR the cycle task failed; reopening the state file error=task ")
            && errors[0].ends_with(" panicked with message \"a scripted panic\""),
        "{errors:?}"
    );
    // The state was opened, and so locked, again.
    assert!(dir.path().join("state.json.lock").exists());
}

#[tokio::test(start_paused = true)]
async fn a_standby_runs_no_tick_and_an_instance_that_becomes_active_checks_at_once() {
    let standby = Term {
        role: Role::Standby,
        taken: 0,
        node: None,
        holder: None,
    };
    let (roles, watched) = tokio::sync::watch::channel(standby);
    let mut h = Harness::start_full(
        config("interval = \"1s\""),
        &[Step::Ok(200), Step::Ok(200), Step::Ok(200)],
        None,
        Some(watched),
    );
    // Ten intervals on standby: no tick.
    h.until(10_300).await;
    assert_eq!(h.engine(), Vec::<String>::new());
    roles.send_replace(Term {
        role: Role::Active,
        taken: 1,
        node: None,
        holder: None,
    });
    h.until(11_500).await;
    // Active: a tick at once, then one an interval later. Standby again: none after.
    roles.send_replace(Term {
        role: Role::Standby,
        taken: 1,
        node: None,
        holder: None,
    });
    assert_eq!(h.stop_at(20_000).await, 20_000);
    assert_eq!(
        h.engine(),
        [
            "10300 start e1",
            "10500 end e1",
            "11300 start e1",
            "11500 end e1",
        ]
    );
    assert_eq!(
        h.notes(),
        [
            "0 READY=1\nSTATUS=waiting for the first cycle".to_string(),
            "10300 STATUS=active: holds the lock; checking".to_string(),
            format!("10500 {OK_STATUS}"),
            format!("11500 {OK_STATUS}"),
            "11500 STATUS=standby: another instance holds the lock".to_string(),
            "20000 STOPPING=1".to_string(),
        ]
    );
}
