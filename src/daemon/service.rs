//! The core of `cks-drift run`, handed built parts: it runs one tick at a time every
//! `check.interval`, applies reloaded configs between ticks, starts the endpoint (`listen`),
//! tells systemd how it goes and keeps the shutdown deadline.
//!
//! Loading the config, logging, signals and the state file's lock belong to `daemon::run`.
//! All timing is tokio's (`tokio::time`), so tests drive the core with paused time.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use sd_notify::NotifyState;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::task::{JoinError, JoinHandle};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, error, info, info_span, warn};

use super::http::{Health, Shared};
use super::listen::{self, Endpoint};
use super::messages::{
    CANCELLED_AT_SHUTDOWN, CONFIG_REFUSED, CYCLE_FAILED, LISTEN_FIXED, STATE_PATH_FIXED,
};
use super::{DISABLED_STATUS, DaemonError, failure_text, status_line};
use crate::base::duration::{human_duration, human_elapsed};
use crate::base::error_chain::error_chain;
use crate::base::time::Timestamp;
use crate::config::Config;
use crate::daemon::metrics::{CycleOutcome, Metrics};
use crate::daemon::status::View;
use crate::database::lock::{Role, Term};
use crate::engine::cycle::CycleError;
use crate::engine::{Engine, EngineError, Store, Tick};

/// How long a running cycle may go on after shutdown is requested before it is cancelled.
/// The state file is written atomically and queued notifications stay in it, so cancelling
/// loses nothing that was decided.
pub const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(10);

/// How long open HTTP requests may take to finish at shutdown.
const HTTP_SHUTDOWN_DEADLINE: Duration = Duration::from_secs(5);

/// What the scheduler runs: the `Engine`, or a stand-in in tests.
pub trait Ticker: Send + Sized + 'static {
    /// One tick that started at `now`.
    fn tick(&mut self, now: Timestamp) -> impl Future<Output = Tick> + Send;

    /// Puts `self` in force: at start, in place of `old` after a reload (it takes over what
    /// `old` keeps between ticks: the locked state), or after a failed tick task. Its API
    /// requests count in `metrics` from now on.
    fn take_over(&mut self, old: Option<Self>, metrics: &Metrics);
}

impl Ticker for Engine {
    fn tick(&mut self, now: Timestamp) -> impl Future<Output = Tick> + Send {
        Engine::tick(self, now)
    }

    fn take_over(&mut self, old: Option<Engine>, metrics: &Metrics) {
        if let Some(mut old) = old {
            self.store = old.store.take();
            self.term_seen = old.term_seen;
        }
        metrics.track_api_client(self.api.clone());
    }
}

/// Where notifications to systemd go.
pub trait Notifier: Send + Sync + 'static {
    fn notify(&self, states: &[NotifyState<'_>]);
}

/// What the core is handed.
pub struct Parts<E, B> {
    /// The config in force.
    pub config: Config,
    /// Built from `config`, with the state.
    pub engine: E,
    /// Builds the engine of a config (`Engine::from_config`): without a state for a reloaded
    /// config, whose engine takes over the state at its first tick; with the state opened
    /// again after a tick task failed.
    pub build: B,
    /// Where the endpoint listens; `None` when `http.listen` is off and systemd passed no
    /// socket.
    pub endpoint: Option<Endpoint>,
    /// Each config read again (on SIGHUP), in order.
    pub reloads: UnboundedReceiver<Config>,
    pub notifier: Arc<dyn Notifier>,
    /// systemd's watchdog period (`WatchdogSec`), when it watches.
    pub watchdog: Option<Duration>,
    /// With a database: the role this instance has, as the lock's keeper changes it. Ticks
    /// start only while it is active. `None`: always active.
    pub roles: Option<tokio::sync::watch::Receiver<Term>>,
    /// With a database: set while another database user's connection holds the lock.
    pub held_elsewhere: Option<Arc<std::sync::atomic::AtomicBool>>,
}

/// Runs the service until `shutdown` is cancelled. Returns once the running cycle finished
/// or was cancelled at the deadline.
pub async fn serve<E, B>(parts: Parts<E, B>, shutdown: CancellationToken) -> Result<(), DaemonError>
where
    E: Ticker,
    B: FnMut(&Config, Option<Store>) -> Result<E, EngineError> + Send,
{
    let Parts {
        config,
        mut engine,
        build,
        endpoint,
        reloads,
        notifier,
        watchdog,
        roles,
        held_elsewhere,
    } = parts;
    let started = Instant::now();
    // The keeper may have taken the lock already; later changes come through `roles`.
    let initial = roles.as_ref().map(|r| r.borrow().clone());
    let initial_role = initial.as_ref().map(|t| t.role);
    let metrics = Metrics::new(config.check.enabled);
    engine.take_over(None, &metrics);
    let web = crate::daemon::web::WebSecurity::from_config(&config.http)?;
    let shared = Arc::new(
        Shared::new(
            metrics,
            Health {
                enabled: config.check.enabled,
                interval: config.check.interval,
                since: started + config.check.initial_delay,
                last_success: None,
                last_failure: None,
                running_since: None,
                standby: initial_role == Some(Role::Standby),
                lock_node: initial.as_ref().and_then(local_node),
                lock_holder: initial.as_ref().and_then(|t| t.holder.clone()),
            },
        )
        .with_web(web),
    );
    if let Some(term) = &initial {
        shared.metrics.set_role(term.role);
        shared.metrics.set_lock_node(term.node.as_deref());
    }
    if let Some(flag) = held_elsewhere {
        shared.metrics.follow_lock_holder(flag);
    }

    let server = match endpoint {
        Some(endpoint) => listen::start(endpoint, shared.clone(), shutdown.child_token()).await,
        None => None,
    };

    let status = if config.check.enabled {
        "waiting for the first cycle"
    } else {
        DISABLED_STATUS
    };
    notifier.notify(&[NotifyState::Ready, NotifyState::Status(status)]);
    spawn_watchdog(watchdog, notifier.clone(), shutdown.clone());
    info!(
        interval = %human_duration(config.check.interval),
        initial_delay = %human_duration(config.check.initial_delay),
        enabled = config.check.enabled,
        "cks-drift is running"
    );

    let mut scheduler = Scheduler {
        next_due: started + config.check.initial_delay,
        last_start: None,
        config,
        build,
        idle: Some(engine),
        reloaded: None,
        running: None,
        shared,
        notifier: notifier.clone(),
    };
    let outcome = scheduler.run(reloads, roles, &shutdown).await;

    notifier.notify(&[NotifyState::Stopping]);
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

/// Pings the systemd watchdog at half its period. The pings come from their own task, so a
/// slow cycle never trips the watchdog; a wedged runtime does.
fn spawn_watchdog(
    period: Option<Duration>,
    notifier: Arc<dyn Notifier>,
    shutdown: CancellationToken,
) {
    let Some(period) = period else {
        return;
    };
    let every = (period / 2).max(Duration::from_millis(10));
    debug!(every = ?every, "pinging the systemd watchdog");
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(every);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = ticker.tick() => notifier.notify(&[NotifyState::Watchdog]),
            }
        }
    });
}

/// What a finished tick task hands back.
struct Finished<E> {
    engine: E,
    tick: Tick,
    /// When the tick started, and how long it took.
    at: Timestamp,
    took: Duration,
}

enum Event<E> {
    Shutdown,
    Reload(Box<Config>),
    Due,
    Finished(Box<Result<Finished<E>, JoinError>>),
    Role(Term),
}

/// What `/healthz` says of the server the lock is held on: only a Galera node or a replica,
/// where the lock excludes no instance connected elsewhere.
fn local_node(term: &Term) -> Option<String> {
    term.node
        .as_ref()
        .filter(|n| term.role == Role::Active && n.is_local())
        .map(|n| n.to_string())
}

/// The next change of role; never, without a lock (or once its keeper is gone).
async fn next_role(roles: &mut Option<tokio::sync::watch::Receiver<Term>>) -> Term {
    if let Some(r) = roles
        && r.changed().await.is_ok()
    {
        return r.borrow_and_update().clone();
    }
    std::future::pending().await
}

/// The scheduling loop and what it owns: the config in force, the engine (home while no
/// tick runs), an engine built from a reloaded config, and the running tick.
struct Scheduler<E, B> {
    config: Config,
    build: B,
    /// The engine while no tick runs.
    idle: Option<E>,
    /// Built from a reloaded config; takes over the state at the next tick.
    reloaded: Option<E>,
    running: Option<JoinHandle<Finished<E>>>,
    /// When the next tick may start (start-to-start spacing).
    next_due: Instant,
    last_start: Option<Instant>,
    shared: Arc<Shared>,
    notifier: Arc<dyn Notifier>,
}

impl<E, B> Scheduler<E, B>
where
    E: Ticker,
    B: FnMut(&Config, Option<Store>) -> Result<E, EngineError>,
{
    async fn run(
        &mut self,
        mut reloads: UnboundedReceiver<Config>,
        mut roles: Option<tokio::sync::watch::Receiver<Term>>,
        shutdown: &CancellationToken,
    ) -> Result<(), DaemonError> {
        loop {
            let active = roles
                .as_ref()
                .is_none_or(|r| r.borrow().role == Role::Active);
            let may_start = self.config.check.enabled && self.running.is_none() && active;
            let due = self.next_due;
            let event = tokio::select! {
                biased;
                _ = shutdown.cancelled() => Event::Shutdown,
                Some(config) = reloads.recv() => Event::Reload(Box::new(config)),
                joined = async { self.running.as_mut().expect("running").await },
                    if self.running.is_some() => {
                    Event::Finished(Box::new(joined))
                }
                _ = tokio::time::sleep_until(due), if may_start => Event::Due,
                term = next_role(&mut roles) => Event::Role(term),
            };
            match event {
                Event::Shutdown => return Ok(()),
                Event::Reload(config) => self.reload(*config),
                Event::Due => self.start(),
                Event::Finished(joined) => {
                    self.running = None;
                    self.finish(*joined)?;
                }
                Event::Role(term) => self.change_role(term),
            }
        }
    }

    /// A new role: an instance that became active checks at once (the one it takes over from
    /// may have been gone for a while); a standby starts no tick, and says so on `/healthz`.
    fn change_role(&mut self, term: Term) {
        self.shared.metrics.set_role(term.role);
        self.shared.metrics.set_lock_node(term.node.as_deref());
        let now = Instant::now();
        {
            let mut health = self.shared.health();
            health.standby = term.role == Role::Standby;
            health.lock_node = local_node(&term);
            health.lock_holder = term.holder.clone();
            if term.role == Role::Active {
                health.since = now;
            }
        }
        match term.role {
            Role::Active => {
                self.next_due = now;
                self.notifier
                    .notify(&[NotifyState::Status("active: holds the lock; checking")]);
            }
            Role::Standby => self.notifier.notify(&[NotifyState::Status(
                "standby: another instance holds the lock",
            )]),
        }
    }

    /// Starts a tick on its own task with the engine of the config in force now.
    fn start(&mut self) {
        let Some(mut engine) = self.idle.take() else {
            return;
        };
        if let Some(mut next) = self.reloaded.take() {
            next.take_over(Some(engine), &self.shared.metrics);
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
        self.running = Some(task);
        self.last_start = Some(now);
    }

    /// What the status page and the API show from now on: this tick's view, or, after a
    /// tick that compared nothing, the last one marked with why.
    fn keep_view(&self, tick: &Tick) {
        match View::of(tick, &self.config.ignore) {
            Some(view) => self.shared.set_view(Some(Arc::new(view))),
            None => {
                let Some(last) = self.shared.view() else {
                    return;
                };
                let failure = match &tick.report {
                    Err(CycleError::Standby) => None,
                    Err(_) => Some(failure_text(tick)),
                    Ok(_) => None,
                };
                if last.failure != failure {
                    let mut marked = (*last).clone();
                    marked.failure = failure;
                    self.shared.set_view(Some(Arc::new(marked)));
                }
            }
        }
    }

    fn finish(&mut self, joined: Result<Finished<E>, JoinError>) -> Result<(), DaemonError> {
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
                let mut engine = (self.build)(&self.config, Some(store))?;
                engine.take_over(None, &self.shared.metrics);
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
        self.keep_view(&tick);
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
            // The error chain as it is and, when CloudStack could not be reached, what to check
            // (as `check` says it).
            let explained = crate::engine::diagnose::unreachable(e, &self.config.cloudstack.url);
            warn!(error = %error_chain(e), explained = explained.as_deref(), "{CYCLE_FAILED}");
        }
        if self.config.check.enabled && now > self.next_due {
            warn!(
                took = %human_elapsed(took),
                interval = %human_duration(self.config.check.interval),
                late = %human_elapsed(now - self.next_due),
                "the cycle took longer than check.interval; the next one starts late"
            );
        }
        let mut status = status_line(&tick, at);
        if !self.config.check.enabled {
            status.push_str("; ");
            status.push_str(DISABLED_STATUS);
        }
        self.notifier.notify(&[NotifyState::Status(&status)]);
        Ok(())
    }

    /// Takes a config read again. One whose engine cannot be built changes nothing; else it
    /// applies from the next tick (a running tick finishes with the config it started with).
    /// The endpoint's TLS files and users, read again (a renewed certificate is taken so);
    /// kept as they were, with the error logged, when the new ones cannot be used.
    fn reload_web(&self, new: &mut Config) {
        let old = &self.config.http;
        let unchanged = new.http.tls == old.tls
            && new.http.basic_auth_users == old.basic_auth_users
            && new.http.healthz_without_auth == old.healthz_without_auth;
        if unchanged && new.http.tls.is_none() {
            return;
        }
        match crate::daemon::web::WebSecurity::from_config(&new.http) {
            Ok(web) => {
                self.shared.set_web(web);
                info!("the endpoint's TLS files and users are read again");
            }
            Err(e) => {
                error!(
                    error = %error_chain(&e),
                    "the endpoint's new TLS files cannot be used; the running ones are kept"
                );
                new.http.tls.clone_from(&old.tls);
                new.http.basic_auth_users.clone_from(&old.basic_auth_users);
                new.http.healthz_without_auth = old.healthz_without_auth;
            }
        }
    }

    fn reload(&mut self, mut new: Config) {
        let old = &self.config;
        if new.state.path != old.state.path {
            warn!(
                running = %old.state.path.display(),
                new = %new.state.path.display(),
                "{STATE_PATH_FIXED}"
            );
            new.state.path = old.state.path.clone();
        }
        if new.database != old.database {
            warn!("[database] cannot change while running; restart to use the new settings");
            new.database = old.database.clone();
        }
        if new.http.listen != old.http.listen {
            warn!(running = ?old.http.listen, new = ?new.http.listen, "{LISTEN_FIXED}");
            new.http.listen = old.http.listen;
        }
        if new.log.level != old.log.level || new.log.format != old.log.format {
            warn!("log.level and log.format take effect at the next restart");
        }
        let engine = match (self.build)(&new, None) {
            Ok(e) => e,
            Err(e) => {
                error!(error = %error_chain(&e), "{CONFIG_REFUSED}");
                return;
            }
        };
        self.reload_web(&mut new);
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
            self.notifier
                .notify(&[NotifyState::Status(DISABLED_STATUS)]);
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
            interval = %human_duration(self.config.check.interval),
            "config reloaded; it applies from the next cycle"
        );
    }

    /// At shutdown: lets a running tick finish within the deadline, else cancels it.
    async fn stop(&mut self) {
        let Some(mut task) = self.running.take() else {
            return;
        };
        info!(deadline = ?SHUTDOWN_DEADLINE, "waiting for the running cycle to finish");
        match tokio::time::timeout(SHUTDOWN_DEADLINE, &mut task).await {
            Ok(_) => info!("the running cycle finished"),
            Err(_) => {
                // Dropping the tick at an await point is safe: every state write is atomic,
                // and what was not yet delivered is still queued in the state file.
                task.abort();
                let _ = task.await;
                warn!(deadline = ?SHUTDOWN_DEADLINE, "{CANCELLED_AT_SHUTDOWN}");
            }
        }
    }
}

#[cfg(test)]
mod tests;
