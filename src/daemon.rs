//! `cks-drift run`: the long-running service. It locks the state, binds the HTTP endpoint,
//! tells systemd it is ready, then runs one engine tick every `check.interval` on its own
//! task, reloads the config on SIGHUP and stops on SIGTERM/SIGINT.
//!
//! Scheduling, signals, systemd notifications and the endpoint's shared figures live here;
//! what a tick does belongs to `engine`, the exposition to `metrics`.

pub mod http;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use sd_notify::NotifyState;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::task::{JoinError, JoinHandle};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, error, info, info_span, warn};

use crate::config::{Config, ConfigError};
use crate::engine::{Engine, Store, Tick};
use crate::error_chain::error_chain;
use crate::metrics::{CycleOutcome, Metrics};
use crate::state::file::StateError;
use crate::time::Timestamp;
use http::{Health, Shared, one_line};

/// How long a running cycle may go on after SIGTERM/SIGINT before it is cancelled. The state
/// file is written atomically and queued notifications stay in it, so cancelling loses
/// nothing that was decided.
pub const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(10);

/// How long open HTTP requests may take to finish at shutdown.
const HTTP_SHUTDOWN_DEADLINE: Duration = Duration::from_secs(5);

/// Why the daemon could not start (or had to stop).
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error("cannot set up checking: {0}")]
    Engine(String),
    #[error("cannot listen on {addr} (http.listen)")]
    Listen {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot handle signal {signal}")]
    Signal {
        signal: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// Runs the daemon until `shutdown` is cancelled (SIGTERM and SIGINT cancel it). Returns
/// once the running cycle finished or was cancelled.
pub async fn run(config_path: &Path, shutdown: CancellationToken) -> Result<(), DaemonError> {
    let config = Config::load(config_path)?;
    crate::logging::init(&config.log.level, config.log.format);
    let signals = Signals::install()?;
    spawn_stop_on_signal(signals.term, signals.int, shutdown.clone());

    // The state is locked before anything else: a second instance stops here, before it
    // could take the port or talk to CloudStack.
    let store = Store::open(&config)?;
    let engine = Engine::from_config(&config, Some(store)).map_err(DaemonError::Engine)?;

    let started = Instant::now();
    let metrics = Metrics::new(config.check.enabled);
    metrics.track_api_client(engine.api.clone());
    let shared = Arc::new(Shared {
        metrics,
        health: Mutex::new(Health {
            enabled: config.check.enabled,
            interval: config.check.interval,
            since: started + config.check.initial_delay,
            last_success: None,
            last_failure: None,
            running_since: None,
        }),
    });

    let server = match config.http.listen {
        None => None,
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|source| DaemonError::Listen { addr, source })?;
            let bound = listener.local_addr().unwrap_or(addr);
            info!(address = %bound, "serving /metrics and /healthz");
            let shared = shared.clone();
            let stop = shutdown.child_token();
            Some(tokio::spawn(async move {
                if let Err(e) = http::serve(listener, shared, stop).await {
                    error!(error = %e, "the HTTP endpoint failed");
                }
            }))
        }
    };

    let status = if config.check.enabled {
        "waiting for the first cycle".to_string()
    } else {
        DISABLED_STATUS.to_string()
    };
    notify(&[NotifyState::Ready, NotifyState::Status(&status)]);
    spawn_watchdog(shutdown.clone());
    info!(
        interval = ?config.check.interval,
        initial_delay = ?config.check.initial_delay,
        enabled = config.check.enabled,
        "cks-drift is running"
    );

    let mut scheduler = Scheduler {
        path: config_path.to_path_buf(),
        next_due: started + config.check.initial_delay,
        last_start: None,
        config,
        idle: Some(engine),
        reloaded: None,
        running: None,
        shared,
    };
    let outcome = scheduler.run(signals.hup, &shutdown).await;

    notify(&[NotifyState::Stopping]);
    info!("shutting down");
    scheduler.stop().await;
    if let Some(server) = server {
        // The server's token is a child of `shutdown`, which is cancelled by now, unless
        // the scheduler stopped on an error.
        shutdown.cancel();
        if tokio::time::timeout(HTTP_SHUTDOWN_DEADLINE, server)
            .await
            .is_err()
        {
            warn!("HTTP requests still open at shutdown were dropped");
        }
    }
    outcome
}

const DISABLED_STATUS: &str = "checking is disabled (check.enabled = false)";

struct Signals {
    term: Signal,
    int: Signal,
    hup: Signal,
}

impl Signals {
    fn install() -> Result<Signals, DaemonError> {
        let one = |kind: SignalKind, name: &'static str| {
            signal(kind).map_err(|source| DaemonError::Signal {
                signal: name,
                source,
            })
        };
        Ok(Signals {
            term: one(SignalKind::terminate(), "SIGTERM")?,
            int: one(SignalKind::interrupt(), "SIGINT")?,
            hup: one(SignalKind::hangup(), "SIGHUP")?,
        })
    }
}

fn spawn_stop_on_signal(mut term: Signal, mut int: Signal, shutdown: CancellationToken) {
    tokio::spawn(async move {
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
            _ = shutdown.cancelled() => return,
        };
        info!(signal = name, "stop requested");
        shutdown.cancel();
    });
}

/// Sends a notification to systemd; nothing happens without `NOTIFY_SOCKET`.
fn notify(states: &[NotifyState]) {
    if let Err(e) = sd_notify::notify(states) {
        warn!(error = %e, "cannot notify systemd (NOTIFY_SOCKET)");
    }
}

/// Pings the systemd watchdog at half its period when `WatchdogSec` is set. The pings come
/// from their own task, so a slow cycle never trips the watchdog; a wedged runtime does.
fn spawn_watchdog(shutdown: CancellationToken) {
    let Some(period) = sd_notify::watchdog_enabled() else {
        return;
    };
    let every = (period / 2).max(Duration::from_millis(10));
    debug!(every = ?every, "pinging the systemd watchdog");
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(every);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = ticker.tick() => notify(&[NotifyState::Watchdog]),
            }
        }
    });
}

/// What a finished tick task hands back.
struct Finished {
    engine: Engine,
    tick: Tick,
    /// When the tick started, and how long it took.
    at: Timestamp,
    took: Duration,
}

struct Running {
    task: JoinHandle<Finished>,
}

enum Event {
    Shutdown,
    Reload,
    Due,
    Finished(Box<Result<Finished, JoinError>>),
}

/// The scheduling loop and what it owns: the config in force, the engine (home while no
/// tick runs), an engine built from a reloaded config, and the running tick.
struct Scheduler {
    path: PathBuf,
    config: Config,
    /// The engine while no tick runs.
    idle: Option<Engine>,
    /// Built from a reloaded config; takes over the state at the next tick.
    reloaded: Option<Engine>,
    running: Option<Running>,
    /// When the next tick may start (start-to-start spacing).
    next_due: Instant,
    last_start: Option<Instant>,
    shared: Arc<Shared>,
}

impl Scheduler {
    async fn run(
        &mut self,
        mut hup: Signal,
        shutdown: &CancellationToken,
    ) -> Result<(), DaemonError> {
        loop {
            let may_start = self.config.check.enabled && self.running.is_none();
            let due = self.next_due;
            let event = tokio::select! {
                biased;
                _ = shutdown.cancelled() => Event::Shutdown,
                Some(()) = hup.recv() => Event::Reload,
                joined = async { (&mut self.running.as_mut().expect("running").task).await }, if self.running.is_some() => {
                    Event::Finished(Box::new(joined))
                }
                _ = tokio::time::sleep_until(due), if may_start => Event::Due,
            };
            match event {
                Event::Shutdown => return Ok(()),
                Event::Reload => self.reload(),
                Event::Due => self.start(),
                Event::Finished(joined) => {
                    self.running = None;
                    self.finish(*joined)?;
                }
            }
        }
    }

    /// Starts a tick on its own task with the engine of the config in force now.
    fn start(&mut self) {
        let Some(mut engine) = self.idle.take() else {
            return;
        };
        if let Some(mut next) = self.reloaded.take() {
            next.store = engine.store.take();
            self.shared.metrics.track_api_client(next.api.clone());
            engine = next;
        }
        let now = Instant::now();
        // Start to start: an overrun delays the next tick, it never runs two at once.
        self.next_due = now + self.config.check.interval;
        self.shared.health().running_since = Some(now);
        let span = info_span!("tick");
        let task = tokio::spawn(
            async move {
                let began = Instant::now();
                let at = Timestamp::now();
                let tick = engine.tick(at).await;
                Finished {
                    engine,
                    tick,
                    at,
                    took: began.elapsed(),
                }
            }
            .instrument(span),
        );
        self.running = Some(Running { task });
        self.last_start = Some(now);
    }

    fn finish(&mut self, joined: Result<Finished, JoinError>) -> Result<(), DaemonError> {
        self.shared.health().running_since = None;
        let Finished {
            engine,
            tick,
            at,
            took,
        } = match joined {
            Ok(f) => f,
            Err(e) => {
                // The engine, and the state file's lock with it, went down with the task.
                error!(error = %e, "the cycle task failed; reopening the state file");
                let store = Store::open(&self.config)?;
                let engine =
                    Engine::from_config(&self.config, Some(store)).map_err(DaemonError::Engine)?;
                self.shared.metrics.track_api_client(engine.api.clone());
                self.reloaded = None;
                self.idle = Some(engine);
                return Ok(());
            }
        };
        self.idle = Some(engine);
        let now = Instant::now();
        self.shared
            .metrics
            .record_tick(&tick, took, SystemTime::now());
        {
            let mut health = self.shared.health();
            match CycleOutcome::of(&tick) {
                CycleOutcome::Ok => {
                    health.last_success = Some(now);
                    health.last_failure = None;
                }
                CycleOutcome::Failed => health.last_failure = Some(failure_text(&tick)),
            }
        }
        if let Err(e) = &tick.report {
            warn!(error = %error_chain(e), "the cycle failed; the next one runs at the next interval");
        }
        if self.config.check.enabled && now > self.next_due {
            warn!(
                took = ?took,
                interval = ?self.config.check.interval,
                late = ?now - self.next_due,
                "the cycle took longer than check.interval; the next one starts late"
            );
        }
        let mut status = status_line(&tick, at);
        if !self.config.check.enabled {
            status.push_str("; ");
            status.push_str(DISABLED_STATUS);
        }
        notify(&[NotifyState::Status(&status)]);
        Ok(())
    }

    /// Reads the config file again. An invalid file changes nothing; a valid one applies
    /// from the next tick (a running tick finishes with the config it started with).
    fn reload(&mut self) {
        info!(path = %self.path.display(), "SIGHUP: reloading the config");
        let mut new = match Config::load(&self.path) {
            Ok(c) => c,
            Err(e) => {
                error!(error = %e, "the new config is refused; the old one stays in force");
                return;
            }
        };
        let old = &self.config;
        if new.state.path != old.state.path {
            warn!(running = %old.state.path.display(), new = %new.state.path.display(), "state.path cannot change while running; restart to use the new path");
            new.state.path = old.state.path.clone();
        }
        if new.http.listen != old.http.listen {
            warn!(running = ?old.http.listen, new = ?new.http.listen, "http.listen cannot change while running; restart to use the new address");
            new.http.listen = old.http.listen;
        }
        if new.log.level != old.log.level || new.log.format != old.log.format {
            warn!("log.level and log.format take effect at the next restart");
        }
        let engine = match Engine::from_config(&new, None) {
            Ok(e) => e,
            Err(e) => {
                error!(error = %e, "the new config is refused; the old one stays in force");
                return;
            }
        };
        let now = Instant::now();
        let was_enabled = old.check.enabled;
        let enabled = new.check.enabled;
        // The interval in force spaces the next tick from the start of the last one.
        if let Some(last) = self.last_start {
            self.next_due = last + new.check.interval;
        }
        if enabled && !was_enabled {
            // Turned back on: check now, and give health a fresh start.
            self.next_due = now;
            self.shared.health().since = now;
            info!("checking is on again");
        } else if !enabled && was_enabled {
            info!("checking is off; no cycle runs until it is turned on again");
            notify(&[NotifyState::Status(DISABLED_STATUS)]);
        }
        {
            let mut health = self.shared.health();
            health.enabled = enabled;
            health.interval = new.check.interval;
        }
        self.shared.metrics.set_check_enabled(enabled);
        self.reloaded = Some(engine);
        self.config = new;
        info!(
            enabled,
            interval = ?self.config.check.interval,
            "config reloaded; it applies from the next cycle"
        );
    }

    /// At shutdown: lets a running tick finish within the deadline, else cancels it.
    async fn stop(&mut self) {
        let Some(running) = self.running.take() else {
            return;
        };
        info!(deadline = ?SHUTDOWN_DEADLINE, "waiting for the running cycle to finish");
        let mut task = running.task;
        match tokio::time::timeout(SHUTDOWN_DEADLINE, &mut task).await {
            Ok(_) => info!("the running cycle finished"),
            Err(_) => {
                // Dropping the tick at an await point is safe: every state write is atomic,
                // and what was not yet delivered is still queued in the state file.
                task.abort();
                let _ = task.await;
                warn!(deadline = ?SHUTDOWN_DEADLINE, "the running cycle was cancelled at the shutdown deadline");
            }
        }
    }
}

/// The one-line reason a tick failed.
fn failure_text(tick: &Tick) -> String {
    match (&tick.report, &tick.state_error) {
        (Err(e), _) => one_line(&error_chain(e)),
        (Ok(_), Some(e)) => one_line(&error_chain(e)),
        (Ok(_), None) => String::new(),
    }
}

/// systemd's STATUS= after a tick that started at `at`, e.g. `last cycle
/// 2026-11-30T10:05:00Z: 12 clusters, 2 open mismatches, 0 pending notifications`.
pub fn status_line(tick: &Tick, at: Timestamp) -> String {
    match &tick.report {
        Ok(report) => {
            let open: usize = report.clusters.iter().map(|c| c.mismatches.len()).sum();
            let mut line = format!(
                "last cycle {at}: {} clusters, {} open mismatches, {} pending notifications",
                report.clusters.len(),
                open,
                tick.pending
            );
            if tick.state_error.is_some() {
                line.push_str("; the state file could not be written: ");
                line.push_str(&failure_text(tick));
            }
            line
        }
        Err(_) => format!(
            "last cycle {at} failed: {}; {} pending notifications",
            failure_text(tick),
            tick.pending
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cycle::{ClusterOutcome, ClusterStatus, CycleError, CycleReport};
    use crate::diff::{Mismatch, MismatchKind};

    fn outcome(mismatches: usize) -> ClusterOutcome {
        ClusterOutcome {
            id: "c".into(),
            name: "c".into(),
            zone_id: None,
            status: ClusterStatus::Checked,
            skip: None,
            reason: None,
            node_failure: None,
            mismatches: (0..mismatches)
                .map(|i| Mismatch {
                    kind: MismatchKind::UnmappedVm,
                    vm_id: Some(format!("v{i}")),
                    vm_name: None,
                    vm_state: None,
                    node: None,
                    reason: "r".into(),
                })
                .collect(),
            mapped: vec![],
            expected_vms: 0,
        }
    }

    #[test]
    fn status_names_the_last_cycle() {
        let tick = Tick {
            report: Ok(CycleReport {
                started: Timestamp::parse("2026-11-30T10:05:00Z").unwrap(),
                duration: Duration::from_secs(1),
                clusters: vec![outcome(2), outcome(0), outcome(1)],
            }),
            new: None,
            delivered: Default::default(),
            pending: 4,
            state_error: None,
        };
        assert_eq!(
            status_line(&tick, Timestamp::parse("2026-11-30T10:05:00Z").unwrap()),
            "last cycle 2026-11-30T10:05:00Z: 3 clusters, 3 open mismatches, 4 pending notifications"
        );
    }

    #[test]
    fn status_of_a_failed_cycle_gives_the_reason_on_one_line() {
        let tick = Tick {
            report: Err(CycleError::List {
                what: "Kubernetes clusters",
                source: crate::cloudstack::error::ApiError::Unauthorized {
                    url: "https://cloud.example.com/client/api".into(),
                    command: "listKubernetesClusters".into(),
                },
            }),
            new: None,
            delivered: Default::default(),
            pending: 0,
            state_error: None,
        };
        let line = status_line(&tick, Timestamp::parse("2026-11-30T10:10:00Z").unwrap());
        assert_eq!(
            line,
            "last cycle 2026-11-30T10:10:00Z failed: cannot list Kubernetes clusters: cloudstack at \
             https://cloud.example.com/client/api refused listKubernetesClusters with HTTP 401 \
             (unable to verify user credentials and/or request signature); this means a wrong \
             API key or secret key, an expired request (clock skew between this host and the \
             management server), a disabled account or user, or a command the key's role may \
             not call; 0 pending notifications"
        );
    }
}
