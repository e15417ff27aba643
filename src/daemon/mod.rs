//! `cks-drift run`: the long-running service, wired from its parts. This module loads the
//! config, installs logging and the signal handlers (SIGHUP reads the config again,
//! SIGTERM/SIGINT stop), locks the state, builds the engine, chooses where the HTTP endpoint
//! listens and hands all of it to `service`, which runs one engine tick every
//! `check.interval`.
//!
//! Scheduling, the endpoint's shared figures and systemd notifications live in `service`
//! and `http`; the socket systemd passes and binding `http.listen` in `listen`; what a tick
//! does belongs to `engine`, the exposition to `metrics`. `logging` installs the log output
//! for `run` and for the one-shot commands alike; `messages` holds the wording of the
//! service's log lines.

pub mod http;
pub mod listen;
pub mod logging;
mod messages;
pub mod metrics;
pub mod service;
pub mod status;
pub mod web;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sd_notify::NotifyState;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::mpsc::{self, UnboundedReceiver};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::base::error_chain::error_chain;
use crate::base::time::Timestamp;
use crate::config::{Config, ConfigError};
use crate::database::Database;
use crate::database::lock::Lock;
use crate::engine::{Engine, EngineError, Store, Tick};
use crate::state::file::StateError;
use http::one_line;
use listen::{Endpoint, Passed};
use service::{Notifier, Parts};

/// Why the daemon could not start (or had to stop).
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error("cannot set up checking")]
    Engine(#[from] EngineError),
    #[error("cannot set up the endpoint")]
    Web(#[from] crate::daemon::web::WebError),
    #[error("cannot handle signal {signal}")]
    Signal {
        signal: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// Runs the daemon until `shutdown` is cancelled (SIGTERM and SIGINT cancel it), serving the
/// endpoint on the socket systemd `passed` or on `http.listen`. Returns once the running
/// cycle finished or was cancelled.
pub async fn run(
    config_path: &Path,
    passed: Passed,
    shutdown: CancellationToken,
) -> Result<(), DaemonError> {
    let config = Config::load(config_path)?;
    crate::daemon::logging::init(&config.log.level, config.log.format);
    let signals = Signals::install()?;
    spawn_stop_on_signal(signals.term, signals.int, shutdown.clone());
    let reloads = spawn_reload_on_hangup(signals.hup, config_path.to_path_buf(), shutdown.clone());

    // The state is locked before anything else: a second instance stops here, before it
    // could take the port or talk to CloudStack. (A socket systemd passed is this instance's
    // already.)
    let store = Store::open(&config)?;
    // With a database, one instance among several is active: the lock's keeper runs on its
    // own task, and every engine built (at start, after a reload or a failed tick) checks it.
    let lock = config.database.as_ref().map(|settings| {
        let lock = Lock::new(Database::new(settings), settings.lock_interval);
        tokio::spawn(lock.clone().keep(shutdown.clone()));
        lock
    });
    let roles = lock.as_ref().map(|l| l.watch());
    let held_elsewhere = lock.as_ref().map(|l| l.held_elsewhere());
    let build = move |config: &Config, store: Option<Store>| {
        let mut engine = Engine::from_config(config, store)?;
        if let Some(lock) = &lock {
            engine.api.fence_with(lock.clone());
        }
        engine.lock = lock.clone();
        Ok(engine)
    };
    let engine = build(&config, Some(store))?;
    let endpoint = Endpoint::choose(passed, config.http.listen);
    let parts = Parts {
        config,
        engine,
        build,
        endpoint,
        reloads,
        notifier: Arc::new(Systemd),
        watchdog: sd_notify::watchdog_enabled(),
        roles,
        held_elsewhere,
    };
    service::serve(parts, shutdown).await
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

/// Reads the config file again on each SIGHUP and hands a valid one to the service; an
/// invalid file is refused here and changes nothing. Stops with the service.
fn spawn_reload_on_hangup(
    mut hup: Signal,
    path: PathBuf,
    shutdown: CancellationToken,
) -> UnboundedReceiver<Config> {
    let (reloads, received) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => return,
                got = hup.recv() => if got.is_none() { return },
            }
            info!(path = %path.display(), "SIGHUP: reloading the config");
            match Config::load(&path) {
                Ok(config) => {
                    if reloads.send(config).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    error!(error = %e, "the new config is refused; the old one stays in force")
                }
            }
        }
    });
    received
}

/// Notifications to systemd through `NOTIFY_SOCKET`; nothing happens without it.
struct Systemd;

impl Notifier for Systemd {
    fn notify(&self, states: &[NotifyState<'_>]) {
        if let Err(e) = sd_notify::notify(states) {
            warn!(error = %e, "cannot notify systemd (NOTIFY_SOCKET)");
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
    use crate::diff::{Mismatch, MismatchKind, Subject, VmRef};
    use crate::engine::cycle::{ClusterOutcome, ClusterStatus, CycleError, CycleReport};
    use std::time::Duration;

    fn outcome(mismatches: usize) -> ClusterOutcome {
        ClusterOutcome {
            cluster: crate::snapshot::ClusterIdentity {
                id: "c".into(),
                name: "c".into(),
                zone_id: None,
                owner: None,
                owner_id: None,
            },
            ignored: Default::default(),
            db_ids: None,
            left_to_server: Default::default(),
            views: None,
            status: ClusterStatus::Checked,
            skip: None,
            reason: None,
            node_failure: None,
            mismatches: (0..mismatches)
                .map(|i| Mismatch {
                    kind: MismatchKind::UnmappedVm,
                    subject: Subject::Vm(VmRef {
                        id: format!("v{i}"),
                        name: None,
                        state: "Running".into(),
                    }),
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
                map_source: Default::default(),
                server_check: None,
            }),
            new: None,
            delivered: Default::default(),
            pending: 4,
            state_error: None,
            state_write_attempted: false,
            blind: Vec::new(),
            storm: None,
            ignored: Default::default(),
            standings: Default::default(),
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
            state_write_attempted: false,
            blind: Vec::new(),
            storm: None,
            ignored: Default::default(),
            standings: Default::default(),
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
