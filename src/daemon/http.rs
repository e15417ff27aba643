//! The daemon's HTTP endpoint: `/metrics` (the exposition `metrics` renders) and `/healthz`
//! (whether cycles succeed often enough), and the health rule itself as a pure function.
//!
//! Nothing here runs checks or changes state; the scheduler updates `Shared` and the
//! handlers only read it.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::metrics::{CONTENT_TYPE, Metrics};

/// The most slack `/healthz` allows beyond two intervals; smaller intervals get as much
/// slack as one interval.
pub const HEALTH_SLACK_MAX: Duration = Duration::from_secs(30);

/// What the health rule looks at; the scheduler keeps it current.
#[derive(Debug, Clone)]
pub struct Health {
    pub enabled: bool,
    pub interval: Duration,
    /// When checking started or was last turned on (after `check.initial_delay`).
    pub since: Instant,
    /// When the last successful cycle ended.
    pub last_success: Option<Instant>,
    /// Why the last cycle failed, if it did (cleared by a success).
    pub last_failure: Option<String>,
    /// When the cycle running now started.
    pub running_since: Option<Instant>,
    /// Another instance holds the database lock: this one waits, and that is healthy.
    pub standby: bool,
}

/// How long after its reference point (the last success, or when checking started) a
/// successful cycle must have ended: `2 × interval + min(interval, 30 s)`.
pub fn health_limit(interval: Duration) -> Duration {
    interval * 2 + interval.min(HEALTH_SLACK_MAX)
}

fn secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

/// `Ok(text)` for 200, `Err(reason)` for 503; both one line.
pub fn health(h: &Health, now: Instant) -> Result<String, String> {
    if !h.enabled {
        return Ok("ok: checking is disabled (check.enabled = false)".into());
    }
    if h.standby {
        return Ok("standby: another instance holds the lock in the CloudStack database".into());
    }
    let limit = health_limit(h.interval);
    let since_start = now.saturating_duration_since(h.since);
    let success_age = h.last_success.map(|t| now.saturating_duration_since(t));
    // A success from before checking was (re)started does not count as recent.
    let success_counts = h.last_success.is_some_and(|t| t >= h.since);
    match success_age {
        Some(age) if success_counts && age <= limit => {
            return Ok(format!("ok: last cycle succeeded {} ago", secs(age)));
        }
        _ if since_start <= limit => {
            return Ok(format!(
                "ok: checking started {} ago, no successful cycle yet",
                secs(since_start)
            ));
        }
        _ => {}
    }
    let mut reason = match success_age {
        Some(age) if success_counts => format!(
            "last successful cycle ended {} ago, more than 2 x check.interval + slack ({})",
            secs(age),
            secs(limit)
        ),
        _ => format!(
            "no successful cycle in the {} since checking started (limit 2 x check.interval + slack: {})",
            secs(since_start),
            secs(limit)
        ),
    };
    if let Some(failure) = &h.last_failure {
        reason.push_str("; last cycle failed: ");
        reason.push_str(failure);
    }
    if let Some(started) = h.running_since {
        reason.push_str(&format!(
            "; a cycle has been running for {}",
            secs(now.saturating_duration_since(started))
        ));
    }
    Err(one_line(&reason))
}

/// Replaces line breaks so that a reason stays one line.
pub fn one_line(text: &str) -> String {
    text.split(['\n', '\r'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// What the scheduler and the endpoint share.
pub struct Shared {
    pub metrics: Metrics,
    pub health: Mutex<Health>,
}

impl Shared {
    pub fn health(&self) -> MutexGuard<'_, Health> {
        self.health.lock().unwrap_or_else(|e| e.into_inner())
    }
}

pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .with_state(shared)
}

async fn metrics(State(shared): State<Arc<Shared>>) -> Response {
    (
        [(header::CONTENT_TYPE, CONTENT_TYPE)],
        shared.metrics.render(),
    )
        .into_response()
}

async fn healthz(State(shared): State<Arc<Shared>>) -> Response {
    let verdict = health(&shared.health(), Instant::now());
    let (status, text) = match verdict {
        Ok(text) => (StatusCode::OK, text),
        Err(reason) => (StatusCode::SERVICE_UNAVAILABLE, reason),
    };
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        text + "\n",
    )
        .into_response()
}

/// Connections served at once; one more is closed as soon as it is accepted. The endpoint is
/// for a scraper and a health probe, not for a crowd.
pub const MAX_CONNECTIONS: usize = 32;

/// A request's headers must have arrived within this; a client that sends them slowly, or
/// not at all, loses its connection instead of holding it.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves the endpoint on `listener` until `shutdown` is cancelled; requests in flight then
/// finish, idle connections are closed. At most [`MAX_CONNECTIONS`] at once, each with
/// [`HEADER_READ_TIMEOUT`] to send its request's headers.
pub async fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let app = router(shared);
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of descriptors, say: wait a little rather than spin.
                tracing::debug!(error = %e, "cannot accept a connection on the HTTP endpoint");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!("too many connections to the HTTP endpoint; one closed");
            continue;
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let shutdown = shutdown.clone();
        connections.spawn(async move {
            let _slot = slot;
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                () = shutdown.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
        });
        while connections.try_join_next().is_some() {}
    }
    while connections.join_next().await.is_some() {}
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    fn state(now: Instant, started_ago: Duration) -> Health {
        Health {
            enabled: true,
            interval: 5 * MIN,
            since: now - started_ago,
            last_success: None,
            last_failure: None,
            running_since: None,
            standby: false,
        }
    }

    #[test]
    fn the_limit_is_two_intervals_and_bounded_slack() {
        assert_eq!(health_limit(5 * MIN), Duration::from_secs(630));
        assert_eq!(health_limit(Duration::from_secs(1)), Duration::from_secs(3));
        assert_eq!(
            health_limit(Duration::from_secs(20)),
            Duration::from_secs(60)
        );
    }

    #[test]
    fn recent_success_is_healthy() {
        let now = Instant::now() + Duration::from_secs(3600);
        let mut h = state(now, 30 * MIN);
        h.last_success = Some(now - Duration::from_secs(300));
        assert_eq!(
            health(&h, now),
            Ok("ok: last cycle succeeded 300.0s ago".into())
        );
        h.last_success = Some(now - Duration::from_secs(630));
        assert_eq!(
            health(&h, now),
            Ok("ok: last cycle succeeded 630.0s ago".into())
        );
    }

    #[test]
    fn a_success_too_long_ago_is_unhealthy_with_the_last_failure() {
        let now = Instant::now() + Duration::from_secs(3600);
        let mut h = state(now, 30 * MIN);
        h.last_success = Some(now - Duration::from_secs(631));
        h.last_failure =
            Some("cannot list Kubernetes clusters: CloudStack error 530\nsecond line".into());
        assert_eq!(
            health(&h, now),
            Err("last successful cycle ended 631.0s ago, more than 2 x check.interval + slack (630.0s); last cycle failed: cannot list Kubernetes clusters: CloudStack error 530; second line".into())
        );
    }

    #[test]
    fn no_success_yet_is_healthy_only_within_the_limit() {
        let now = Instant::now() + Duration::from_secs(3600);
        let h = state(now, Duration::from_secs(100));
        assert_eq!(
            health(&h, now),
            Ok("ok: checking started 100.0s ago, no successful cycle yet".into())
        );
        let mut h = state(now, Duration::from_secs(700));
        h.running_since = Some(now - Duration::from_secs(650));
        assert_eq!(
            health(&h, now),
            Err("no successful cycle in the 700.0s since checking started (limit 2 x check.interval + slack: 630.0s); a cycle has been running for 650.0s".into())
        );
    }

    #[test]
    fn turning_checking_back_on_restarts_the_clock() {
        let now = Instant::now() + Duration::from_secs(7200);
        // A success long ago, then checking was off, and on again 10 s ago.
        let mut h = state(now, Duration::from_secs(10));
        h.last_success = Some(now - Duration::from_secs(5000));
        assert_eq!(
            health(&h, now),
            Ok("ok: checking started 10.0s ago, no successful cycle yet".into())
        );
        h.since = now - Duration::from_secs(1000);
        assert!(
            health(&h, now)
                .unwrap_err()
                .starts_with("no successful cycle in the 1000.0s since checking started")
        );
    }

    #[test]
    fn disabled_checking_is_healthy() {
        let now = Instant::now() + Duration::from_secs(7200);
        let mut h = state(now, Duration::from_secs(5000));
        h.enabled = false;
        assert_eq!(
            health(&h, now),
            Ok("ok: checking is disabled (check.enabled = false)".into())
        );
    }

    #[test]
    fn one_line_joins_lines() {
        assert_eq!(one_line("a\nb\r\n  c  \n"), "a; b; c");
        assert_eq!(one_line("plain"), "plain");
    }
}
