//! The daemon's HTTP endpoint: `/metrics` (the exposition `metrics` renders) and `/healthz`
//! (whether cycles succeed often enough), and the health rule itself as a pure function.
//!
//! Nothing here runs checks or changes state; the scheduler updates `Shared` and the
//! handlers only read it. Which connections are served, and which are closed to make room,
//! is decided by [`Connections`], without I/O.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
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

use crate::daemon::metrics::{CONTENT_TYPE, Metrics};
use crate::daemon::status::{Standby, View, api, page};
use crate::daemon::web::WebSecurity;

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
    /// This instance holds the lock on a Galera node or a replica, described: the lock
    /// excludes only instances connected to that server.
    pub lock_node: Option<String>,
    /// While standing by: who holds the lock, in words.
    pub lock_holder: Option<String>,
}

/// How long after its reference point (the last success, or when checking started) a
/// successful cycle must have ended: `2 × interval + min(interval, 30 s)`.
pub fn health_limit(interval: Duration) -> Duration {
    interval * 2 + interval.min(HEALTH_SLACK_MAX)
}

fn secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

/// `Ok(text)` for 200, `Err(reason)` for 503; both one line, ending with the node the lock
/// is local to, if it is.
pub fn health(h: &Health, now: Instant) -> Result<String, String> {
    let verdict = cycle_health(h, now);
    let Some(node) = h.lock_node.as_ref().filter(|_| h.enabled && !h.standby) else {
        return verdict;
    };
    let with_node = |text: String| format!("{text}; the lock is local to {node}");
    verdict.map(with_node).map_err(with_node)
}

fn cycle_health(h: &Health, now: Instant) -> Result<String, String> {
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
            "no successful cycle in the {} since checking started \
             (limit 2 x check.interval + slack: {})",
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
    /// What the last cycle saw, for the status page and the API (`None` before the first).
    pub view: Mutex<Option<Arc<View>>>,
    /// TLS and basic authentication (none by default); replaced on SIGHUP.
    web: std::sync::RwLock<Arc<WebSecurity>>,
}

impl Shared {
    pub fn new(metrics: Metrics, health: Health) -> Shared {
        Shared {
            metrics,
            health: Mutex::new(health),
            view: Mutex::new(None),
            web: std::sync::RwLock::new(Arc::new(WebSecurity::open())),
        }
    }

    /// The same, served with `web`'s TLS and authentication.
    pub fn with_web(self, web: WebSecurity) -> Shared {
        self.set_web(web);
        self
    }

    /// The TLS and authentication in force: each connection and request takes them as it
    /// starts.
    pub fn web(&self) -> Arc<WebSecurity> {
        self.web.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Replaces the TLS and authentication (a reload): connections and requests from now on
    /// use `web`.
    pub fn set_web(&self, web: WebSecurity) {
        *self.web.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(web);
    }

    pub fn health(&self) -> MutexGuard<'_, Health> {
        self.health.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The last view, shared: a request holds no lock while it renders.
    pub fn view(&self) -> Option<Arc<View>> {
        self.view.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn set_view(&self, view: Option<Arc<View>>) {
        *self.view.lock().unwrap_or_else(|e| e.into_inner()) = view;
    }

    fn standby(&self) -> (Standby, Duration) {
        let h = self.health();
        let who = Standby {
            standby: h.standby,
            lock_node: h.lock_node.clone(),
            holder: h.lock_holder.clone(),
            checking_enabled: h.enabled,
        };
        (who, h.interval)
    }
}

pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/", get(status_page))
        .route("/status.css", get(style))
        .route("/clusters/{id}", get(cluster_page))
        .route("/api/v1/status", get(api_status))
        .route("/api/v1/findings", get(api_findings))
        .route("/api/v1/clusters", get(api_clusters))
        .route("/api/v1/clusters/{id}", get(api_cluster))
        .layer(axum::middleware::from_fn_with_state(
            shared.clone(),
            authenticate,
        ))
        .with_state(shared)
}

/// Basic authentication (`http.basic_auth_users`), before any path is served.
async fn authenticate(
    State(shared): State<Arc<Shared>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes().to_vec());
    let web = shared.web();
    if web
        .admits(request.uri().path(), authorization.as_deref())
        .await
    {
        return next.run(request).await;
    }
    (
        StatusCode::UNAUTHORIZED,
        [
            (header::WWW_AUTHENTICATE, "Basic realm=\"cks-drift\""),
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
        ],
        "authentication required\n",
    )
        .into_response()
}

/// Headers of every page and API answer: nothing is cached by a proxy or kept by a browser
/// (an admin's view of every tenant), and the page runs no script.
fn page_headers(content_type: &'static str) -> [(header::HeaderName, &'static str); 4] {
    [
        (header::CONTENT_TYPE, content_type),
        (header::CACHE_CONTROL, "no-store"),
        (
            header::CONTENT_SECURITY_POLICY,
            page::CONTENT_SECURITY_POLICY,
        ),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    ]
}

const HTML: &str = "text/html; charset=utf-8";
const JSON: &str = "application/json";

async fn status_page(State(shared): State<Arc<Shared>>, uri: axum::http::Uri) -> Response {
    let (page_no, per_page) = match api::paging(uri.query()) {
        Ok(p) => p,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                page_headers(HTML),
                page::html(&e.error),
            )
                .into_response();
        }
    };
    let (who, refresh) = shared.standby();
    let view = shared.view();
    let body = page::status(view.as_deref(), &who, refresh, page_no, per_page);
    (page_headers(HTML), body).into_response()
}

async fn style() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "max-age=3600"),
        ],
        page::STYLE,
    )
        .into_response()
}

async fn cluster_page(
    State(shared): State<Arc<Shared>>,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> Response {
    let (who, refresh) = shared.standby();
    let view = shared.view();
    match view
        .as_deref()
        .and_then(|v| page::cluster(v, &who, &id, refresh))
    {
        Some(body) => (page_headers(HTML), body).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            page_headers(HTML),
            "<!DOCTYPE html><title>not found</title><p>No such cluster in the last cycle. \
             <a href=\"/\">cks-drift</a></p>\n",
        )
            .into_response(),
    }
}

fn json_answer(result: Result<serde_json::Value, api::Refused>) -> Response {
    let (status, value) = match result {
        Ok(v) => (StatusCode::OK, v),
        Err(e) => (
            StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST),
            serde_json::json!({"error": e.error}),
        ),
    };
    let body = crate::base::untrusted::json_visible(value.to_string()) + "\n";
    (status, page_headers(JSON), body).into_response()
}

async fn api_status(State(shared): State<Arc<Shared>>) -> Response {
    let (who, _) = shared.standby();
    json_answer(Ok(api::status(shared.view().as_deref(), &who)))
}

async fn api_findings(State(shared): State<Arc<Shared>>, uri: axum::http::Uri) -> Response {
    json_answer(api::findings(shared.view().as_deref(), uri.query()))
}

async fn api_clusters(State(shared): State<Arc<Shared>>, uri: axum::http::Uri) -> Response {
    json_answer(api::clusters(shared.view().as_deref(), uri.query()))
}

async fn api_cluster(
    State(shared): State<Arc<Shared>>,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> Response {
    json_answer(api::cluster(shared.view().as_deref(), &id))
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

/// Connections served at once. The endpoint is for a scraper and a health probe, not for a
/// crowd.
pub const MAX_CONNECTIONS: usize = 32;

/// Connections one peer (see [`Peer`]) is served at once: one client reopening connections
/// cannot take the slots of the others. A scraper and a probe need one each.
pub const MAX_PER_PEER: usize = 4;

/// Who a connection comes from, for [`MAX_PER_PEER`]: an IPv4 address, or the /64 of an IPv6
/// one (a host usually has a whole /64 to pick addresses from).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    V4(std::net::Ipv4Addr),
    V6Prefix(u64),
}

impl From<SocketAddr> for Peer {
    fn from(addr: SocketAddr) -> Peer {
        match addr.ip() {
            IpAddr::V4(ip) => Peer::V4(ip),
            IpAddr::V6(ip) => match ip.to_ipv4_mapped() {
                Some(v4) => Peer::V4(v4),
                None => Peer::V6Prefix((u128::from(ip) >> 64) as u64),
            },
        }
    }
}

/// The connections being served, oldest first, and the rule that admits a new one.
///
/// A full endpoint makes room by closing an idle connection (between requests, or with no
/// whole request yet) rather than refusing the newcomer: idle connections are what a client
/// hoarding slots holds, and closing one costs an honest client only a reconnect. A busy one
/// (from a request's arrival until its answer is written) is never closed to make room. The
/// connection closed is the newcomer's own peer's oldest when that peer is at
/// [`MAX_PER_PEER`]; otherwise the oldest of the peer holding the most.
#[derive(Debug, Default)]
pub struct Connections {
    open: Vec<Open>,
    next_id: u64,
}

#[derive(Debug)]
struct Open {
    id: u64,
    peer: Peer,
    /// Requests being answered on it (hyper answers one at a time on HTTP/1).
    busy: Arc<AtomicUsize>,
    close: CancellationToken,
    /// Told to close; it still counts against the hard bound until it has.
    closing: bool,
}

/// A connection let in.
#[derive(Debug)]
pub struct Admitted {
    pub id: u64,
    /// Raised while it answers a request.
    pub busy: Arc<AtomicUsize>,
    /// Cancelled when it is to close (to make room, or at shutdown).
    pub close: CancellationToken,
}

impl Connections {
    /// Lets a connection from `peer` in, closing an idle one to make room if needed, or
    /// refuses it (`None`) when there is no room and nothing idle to close. `shutdown` is the
    /// endpoint's: every connection's `close` is a child of it.
    pub fn admit(&mut self, peer: Peer, shutdown: &CancellationToken) -> Option<Admitted> {
        // Connections told to close still hold sockets until they have: bounded too.
        if self.open.len() >= 2 * MAX_CONNECTIONS {
            return None;
        }
        let live = |o: &&Open| !o.closing;
        let of_peer = self
            .open
            .iter()
            .filter(live)
            .filter(|o| o.peer == peer)
            .count();
        if of_peer >= MAX_PER_PEER {
            self.close_idle(|o| o.peer == peer)?;
        } else if self.open.iter().filter(live).count() >= MAX_CONNECTIONS {
            let busiest = self.busiest_peer_with_idle()?;
            self.close_idle(|o| o.peer == busiest)?;
        }
        let admitted = Admitted {
            id: self.next_id,
            busy: Arc::new(AtomicUsize::new(0)),
            close: shutdown.child_token(),
        };
        self.next_id += 1;
        self.open.push(Open {
            id: admitted.id,
            peer,
            busy: admitted.busy.clone(),
            close: admitted.close.clone(),
            closing: false,
        });
        Some(admitted)
    }

    /// A connection has ended.
    pub fn remove(&mut self, id: u64) {
        self.open.retain(|o| o.id != id);
    }

    /// Connections not told to close.
    pub fn live(&self) -> usize {
        self.open.iter().filter(|o| !o.closing).count()
    }

    fn idle(o: &Open) -> bool {
        !o.closing && o.busy.load(Ordering::Acquire) == 0
    }

    /// The peer holding the most live connections among those with an idle one; the one
    /// with the oldest idle connection on a tie.
    fn busiest_peer_with_idle(&self) -> Option<Peer> {
        let held = |peer: Peer| {
            self.open
                .iter()
                .filter(|o| !o.closing && o.peer == peer)
                .count()
        };
        let mut best: Option<(usize, Peer)> = None;
        for o in self.open.iter().filter(|o| Self::idle(o)) {
            let n = held(o.peer);
            if best.is_none_or(|(m, _)| n > m) {
                best = Some((n, o.peer));
            }
        }
        best.map(|(_, peer)| peer)
    }

    /// Tells the oldest idle connection that `which` accepts to close.
    fn close_idle(&mut self, which: impl Fn(&Open) -> bool) -> Option<()> {
        let victim = self.open.iter_mut().find(|o| Self::idle(o) && which(o))?;
        victim.closing = true;
        victim.close.cancel();
        Some(())
    }
}

/// Marks a connection busy from the moment its request has arrived until its answer's body
/// has been written out.
struct Busy(Arc<AtomicUsize>);

impl Busy {
    fn start(busy: &Arc<AtomicUsize>) -> Busy {
        busy.fetch_add(1, Ordering::AcqRel);
        Busy(busy.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// An answer's body that keeps its connection [`Busy`] until hyper has written it and drops
/// it: a connection closed to make room never loses an answer half sent.
struct Answer {
    body: axum::body::Body,
    _busy: Busy,
}

impl hyper::body::Body for Answer {
    type Data = hyper::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// A request's headers must have arrived within this; a client that sends them slowly, or
/// not at all, loses its connection instead of holding it.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves the endpoint on `listener` until `shutdown` is cancelled; requests in flight then
/// finish, idle connections are closed. At most [`MAX_CONNECTIONS`] at once and
/// [`MAX_PER_PEER`] from one peer, an idle one closed to make room (see [`Connections`]), each
/// with [`HEADER_READ_TIMEOUT`] to send its request's headers.
pub async fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let app = router(shared.clone());
    let registry = Arc::new(Mutex::new(Connections::default()));
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok((stream, addr)) => (stream, Peer::from(addr)),
            Err(e) => {
                // Out of descriptors, say: wait a little rather than spin.
                tracing::debug!(error = %e, "cannot accept a connection on the HTTP endpoint");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let admitted = lock(&registry).admit(peer, &shutdown);
        let Some(Admitted { id, busy, close }) = admitted else {
            tracing::debug!("too many busy connections to the HTTP endpoint; one closed");
            continue;
        };
        let tower = hyper_util::service::TowerToHyperService::new(app.clone());
        let busy_now = busy.clone();
        let service = hyper::service::service_fn(move |request| {
            use hyper::service::Service as _;
            let busy = Busy::start(&busy);
            let answer = tower.call(request);
            async move {
                let answer = answer.await?;
                Ok::<_, std::convert::Infallible>(answer.map(|body| Answer { body, _busy: busy }))
            }
        });
        let registry = registry.clone();
        let shutdown = shutdown.clone();
        let tls = shared.web().tls.clone();
        connections.spawn(async move {
            match tls {
                None => serve_connection(stream, service, &close, &shutdown, &busy_now).await,
                Some(acceptor) => {
                    // The handshake, too, must end within the header deadline.
                    let handshake =
                        tokio::time::timeout(HEADER_READ_TIMEOUT, acceptor.accept(stream)).await;
                    match handshake {
                        Ok(Ok(stream)) => {
                            serve_connection(stream, service, &close, &shutdown, &busy_now).await;
                        }
                        Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!("TLS handshake not done in time"),
                    }
                }
            }
            lock(&registry).remove(id);
        });
        while connections.try_join_next().is_some() {}
    }
    while connections.join_next().await.is_some() {}
    Ok(())
}

/// Serves one connection (plain or TLS) until it ends; closed at once when `close` fires while
/// it is idle, or after its answer at shutdown or when a request came after all.
async fn serve_connection<I, S>(
    io: I,
    service: S,
    close: &CancellationToken,
    shutdown: &CancellationToken,
    busy: &AtomicUsize,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    S: hyper::service::HttpService<hyper::body::Incoming> + Send,
    S::ResBody: Send + 'static,
    <S::ResBody as hyper::body::Body>::Data: Send,
    <S::ResBody as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    S::Future: Send,
{
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .serve_connection(hyper_util::rt::TokioIo::new(io), service);
    tokio::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => {}
        () = close.cancelled() => {
            // Closed to make room, and still idle (no request came since it was chosen):
            // dropped at once, with whatever half a request it holds. At shutdown, or when a
            // request came after all, the answer is finished first.
            if shutdown.is_cancelled() || busy.load(Ordering::Acquire) > 0 {
                connection.as_mut().graceful_shutdown();
                let _ = connection.await;
            }
        }
    }
}

fn lock(registry: &Mutex<Connections>) -> MutexGuard<'_, Connections> {
    registry.lock().unwrap_or_else(|e| e.into_inner())
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
            lock_node: None,
            lock_holder: None,
        }
    }

    #[test]
    fn an_active_instance_names_the_node_its_lock_is_local_to() {
        let now = Instant::now();
        let node = "Galera node node1 of cluster cloud, 3 nodes".to_string();
        let mut h = Health {
            lock_node: Some(node),
            ..state(now, Duration::from_secs(1))
        };
        assert_eq!(
            health(&h, now),
            Ok(
                "ok: checking started 1.0s ago, no successful cycle yet; the lock is local to \
                Galera node node1 of cluster cloud, 3 nodes"
                    .into()
            )
        );
        h.since = now - 20 * MIN;
        let failing = health(&h, now).unwrap_err();
        assert!(
            failing.ends_with("; the lock is local to Galera node node1 of cluster cloud, 3 nodes"),
            "{failing}"
        );
        // A standby holds no lock; with checking off, nothing is said of it.
        h.standby = true;
        assert_eq!(
            health(&h, now),
            Ok("standby: another instance holds the lock in the CloudStack database".into())
        );
        h.standby = false;
        h.enabled = false;
        assert_eq!(
            health(&h, now),
            Ok("ok: checking is disabled (check.enabled = false)".into())
        );
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

    fn v4(last: u8) -> Peer {
        Peer::V4(std::net::Ipv4Addr::new(127, 0, 0, last))
    }

    #[test]
    fn a_peer_at_its_cap_makes_room_with_its_own_oldest_idle_connection() {
        let shutdown = CancellationToken::new();
        let mut c = Connections::default();
        let first: Vec<Admitted> = (0..MAX_PER_PEER)
            .map(|_| c.admit(v4(1), &shutdown).unwrap())
            .collect();
        let other = c.admit(v4(2), &shutdown).unwrap();
        // The fifth of peer 1 closes peer 1's oldest, never peer 2's.
        c.admit(v4(1), &shutdown).unwrap();
        assert!(first[0].close.is_cancelled());
        assert!(!first[1].close.is_cancelled() && !other.close.is_cancelled());
        assert_eq!(c.live(), MAX_PER_PEER + 1);
        // Busy connections are not closed: with all of peer 1's busy, it is refused.
        for a in &first[1..] {
            a.busy.store(1, Ordering::Release);
        }
        c.open.last().unwrap().busy.store(1, Ordering::Release);
        assert!(c.admit(v4(1), &shutdown).is_none());
        assert!(c.admit(v4(2), &shutdown).is_some());
        // A connection that ended leaves room.
        c.remove(first[1].id);
        assert!(c.admit(v4(1), &shutdown).is_some());
    }

    #[test]
    fn a_full_endpoint_closes_an_idle_connection_of_the_peer_holding_the_most() {
        let shutdown = CancellationToken::new();
        let mut c = Connections::default();
        // 8 peers at their cap fill the endpoint; peer 10 holds the most of them after one of
        // another peer ended.
        let mut held = Vec::new();
        for peer in 10..10 + (MAX_CONNECTIONS / MAX_PER_PEER) as u8 {
            for _ in 0..MAX_PER_PEER {
                held.push((peer, c.admit(v4(peer), &shutdown).unwrap()));
            }
        }
        assert_eq!(c.live(), MAX_CONNECTIONS);
        c.remove(held[MAX_PER_PEER].1.id);
        c.admit(v4(99), &shutdown).unwrap();
        let newcomer = c.admit(v4(100), &shutdown).unwrap();
        let closed: Vec<u8> = held
            .iter()
            .filter(|(_, a)| a.close.is_cancelled())
            .map(|(p, _)| *p)
            .collect();
        assert_eq!(closed, [10]);
        assert!(held[0].1.close.is_cancelled(), "the oldest of peer 10");
        assert_eq!(c.live(), MAX_CONNECTIONS);
        // Nothing idle: refused.
        for (_, a) in &held {
            a.busy.store(1, Ordering::Release);
        }
        newcomer.busy.store(1, Ordering::Release);
        c.open
            .iter()
            .for_each(|o| o.busy.store(1, Ordering::Release));
        assert!(c.admit(v4(101), &shutdown).is_none());
        // Shutdown reaches every connection.
        shutdown.cancel();
        assert!(newcomer.close.is_cancelled());
    }

    #[test]
    fn peers_are_addresses_and_ipv6_slash_64s() {
        let peer = |s: &str| Peer::from(s.parse::<SocketAddr>().unwrap());
        assert_eq!(peer("10.0.0.1:1000"), peer("10.0.0.1:2000"));
        assert_ne!(peer("10.0.0.1:1000"), peer("10.0.0.2:1000"));
        assert_eq!(peer("[::ffff:10.0.0.1]:1"), peer("10.0.0.1:1"));
        assert_eq!(
            peer("[2001:db8:1:2::1]:1"),
            peer("[2001:db8:1:2:ffff::9]:1")
        );
        assert_ne!(peer("[2001:db8:1:2::1]:1"), peer("[2001:db8:1:3::1]:1"));
    }

    /// Serves the endpoint on 127.0.0.1 with checking disabled (`/healthz` answers 200).
    async fn endpoint() -> (SocketAddr, CancellationToken) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared::new(
            Metrics::new(false),
            Health {
                enabled: false,
                ..state(Instant::now(), Duration::ZERO)
            },
        ));
        let shutdown = CancellationToken::new();
        tokio::spawn(serve(listener, shared, shutdown.clone()));
        (addr, shutdown)
    }

    /// A connection to `addr` from the loopback address `from` (127.0.0.x: every one of them
    /// is this host's).
    async fn connect_from(from: &str, addr: SocketAddr) -> tokio::net::TcpStream {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
        socket.connect(addr).await.unwrap()
    }

    /// `GET /healthz` from `from` on a new connection: the status line, or why there is none.
    async fn healthz_from(from: &str, addr: SocketAddr) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = connect_from(from, addr).await;
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = Vec::new();
        match tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut answer)).await {
            Ok(Ok(_)) => String::from_utf8_lossy(&answer)
                .lines()
                .next()
                .unwrap_or("closed without an answer")
                .to_string(),
            Ok(Err(e)) => format!("closed: {e}"),
            Err(_) => "no answer in 5 s".into(),
        }
    }

    /// Whether the server closed `stream` within `within`.
    async fn closed(stream: &mut tokio::net::TcpStream, within: Duration) -> bool {
        use tokio::io::AsyncReadExt;
        let mut buf = [0u8; 64];
        matches!(
            tokio::time::timeout(within, stream.read(&mut buf)).await,
            Ok(Ok(0) | Err(_))
        )
    }

    #[tokio::test]
    async fn a_peer_hoarding_idle_connections_cannot_keep_healthz_from_others() {
        let (addr, shutdown) = endpoint().await;
        // One client opens more connections than the endpoint serves and sends nothing.
        let mut hoard = Vec::new();
        for _ in 0..2 * MAX_CONNECTIONS {
            hoard.push(connect_from("127.0.0.1", addr).await);
        }
        // It keeps its newest few; the others are closed at once.
        let mut kept = 0;
        for s in &mut hoard {
            if !closed(s, Duration::from_millis(50)).await {
                kept += 1;
            }
        }
        assert_eq!(kept, MAX_PER_PEER);
        // Another peer is answered, and so is a new connection of the same address (a probe
        // on the same host): it takes the place of the oldest idle one.
        assert_eq!(healthz_from("127.0.0.2", addr).await, "HTTP/1.1 200 OK");
        assert_eq!(healthz_from("127.0.0.1", addr).await, "HTTP/1.1 200 OK");
        shutdown.cancel();
    }

    #[tokio::test]
    async fn peers_filling_the_endpoint_with_idle_connections_cannot_keep_healthz_from_others() {
        let (addr, shutdown) = endpoint().await;
        let mut hoard = Vec::new();
        for peer in 0..MAX_CONNECTIONS / MAX_PER_PEER + 2 {
            for _ in 0..MAX_PER_PEER {
                hoard.push(connect_from(&format!("127.0.1.{peer}"), addr).await);
            }
        }
        assert_eq!(healthz_from("127.0.0.2", addr).await, "HTTP/1.1 200 OK");
        shutdown.cancel();
    }

    #[test]
    fn one_line_joins_lines() {
        assert_eq!(one_line("a\nb\r\n  c  \n"), "a; b; c");
        assert_eq!(one_line("plain"), "plain");
    }
}
