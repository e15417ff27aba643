//! The fake CloudStack API server: the library's simulated management server (`Sim`) served
//! over HTTP at `/client/api` on 127.0.0.1, behind the real server's request checks.
//!
//! What it checks, in the management server's order:
//! - `response=json`, otherwise HTTP 400 with a plain-text body: the real server would answer
//!   in XML, which nothing here speaks, so a client that forgets `response=json` fails loudly;
//! - with `enforce_post(true)` (the `enforce.post.requests.and.timestamps` setting): a
//!   state-changing command sent by GET gets HTTP 400, signature version 3 is mandatory and
//!   `expires` may be at most 15 minutes ahead;
//! - the api key, `expires` for `signatureversion=3` (missing, unparseable or past: 401),
//!   and the signature over the decoded parameters (all but `signature`, first value of
//!   each name): any failure gives HTTP 401 "unable to verify user credentials and/or
//!   request signature" under the command's response key (`errorresponse` for an unknown
//!   command), as `ApiServer.getSerializedApiError` writes it.
//!
//! Parameters come from the query string, and for POST also from the form body.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{Method as HttpMethod, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use cks_drift::cloudstack::request::Method;
use cks_drift::cloudstack::sign;
use cks_drift::cloudstack::transport::RawResponse;
use cks_drift::sim::{ApiError, Sim, UNAUTHORIZED_TEXT, error_body, response_key};
use cks_drift::time::Timestamp;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub const CONTENT_TYPE: &str = "application/json; charset=UTF-8";

/// How far ahead `expires` may be when POST and timestamps are enforced.
const MAX_EXPIRES_AHEAD: Duration = Duration::from_secs(15 * 60);

struct Shared {
    sim: Arc<Sim>,
    api_key: String,
    secret_key: String,
    enforce_post: AtomicBool,
}

/// A running fake CloudStack. Stops when dropped.
pub struct FakeCloudStack {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
    task: JoinHandle<()>,
}

impl FakeCloudStack {
    /// Serves `sim` on 127.0.0.1 (a free port), accepting requests signed with this key pair.
    pub async fn start(sim: Arc<Sim>, api_key: &str, secret_key: &str) -> FakeCloudStack {
        let shared = Arc::new(Shared {
            sim,
            api_key: api_key.to_string(),
            secret_key: secret_key.to_string(),
            enforce_post: AtomicBool::new(false),
        });
        let app = Router::new()
            .route("/client/api", get(api).post(api))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("bound address");
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await
                .expect("fake CloudStack server");
        });
        FakeCloudStack {
            addr,
            shared,
            shutdown,
            task,
        }
    }

    /// The API endpoint, `http://127.0.0.1:<port>/client/api`.
    pub fn url(&self) -> String {
        format!("http://{}/client/api", self.addr)
    }

    pub fn sim(&self) -> &Arc<Sim> {
        &self.shared.sim
    }

    /// Behave as with `enforce.post.requests.and.timestamps=true`.
    pub fn enforce_post(&self, on: bool) {
        self.shared.enforce_post.store(on, Ordering::SeqCst);
    }
}

impl Drop for FakeCloudStack {
    fn drop(&mut self) {
        self.shutdown.cancel();
        self.task.abort();
    }
}

async fn api(
    State(shared): State<Arc<Shared>>,
    method: HttpMethod,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Response {
    let mut params = decode_pairs(query.as_deref().unwrap_or(""));
    if method == HttpMethod::POST {
        params.extend(decode_pairs(&String::from_utf8_lossy(&body)));
    }
    let latency = shared.sim.latency();
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let answer = shared.answer(method == HttpMethod::POST, &params);
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let content_type = if answer.body.starts_with('{') {
        CONTENT_TYPE
    } else {
        "text/plain; charset=UTF-8"
    };
    (status, [(header::CONTENT_TYPE, content_type)], answer.body).into_response()
}

impl Shared {
    fn answer(&self, is_post: bool, params: &[(String, String)]) -> RawResponse {
        let exact = |name: &str| {
            params
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        let any_case = |name: &str| {
            params
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        };
        if !exact("response").is_some_and(|r| r.eq_ignore_ascii_case("json")) {
            return RawResponse {
                status: 400,
                body: "this fake CloudStack answers only response=json".to_string(),
            };
        }
        let Some(command) = exact("command") else {
            return error(400, "errorresponse", "no command specified");
        };
        let key = if Sim::knows(command) {
            response_key(command)
        } else {
            "errorresponse".to_string()
        };
        let enforce = self.enforce_post.load(Ordering::SeqCst);
        if enforce && !is_post && Method::for_command(command) == Method::Post {
            let text =
                format!("State changing command {command} needs to be sent using POST request");
            return error(400, &key, &text);
        }
        if !self.verify(params, any_case, enforce) {
            return error(401, &key, UNAUTHORIZED_TEXT);
        }
        let mut map = BTreeMap::new();
        for (k, v) in params {
            map.entry(k.clone()).or_insert_with(|| v.clone());
        }
        self.sim.handle(command, &map)
    }

    /// `ApiServer.verifyRequest`: key, expiry (signature version 3) and signature.
    fn verify<'a>(
        &self,
        params: &'a [(String, String)],
        any_case: impl Fn(&str) -> Option<&'a str>,
        enforce: bool,
    ) -> bool {
        if any_case("apikey") != Some(self.api_key.as_str()) {
            return false;
        }
        let v3 = any_case("signatureversion") == Some("3");
        if enforce && !v3 {
            return false;
        }
        if v3 {
            let Some(expires) = any_case("expires").and_then(Timestamp::parse) else {
                return false;
            };
            let now = Timestamp::now();
            if expires < now || (enforce && expires > now.plus(MAX_EXPIRES_AHEAD)) {
                return false;
            }
        }
        let Some(given) = any_case("signature") else {
            return false;
        };
        let mut seen = BTreeSet::new();
        let signed: Vec<(String, String)> = params
            .iter()
            .filter(|(k, _)| seen.insert(k.as_str()))
            .cloned()
            .collect();
        sign::signature(&self.secret_key, &signed) == given
    }
}

fn error(status: u16, key: &str, text: &str) -> RawResponse {
    let err = ApiError {
        code: status,
        cs_code: None,
        text: text.to_string(),
    };
    RawResponse {
        status,
        body: error_body(key, &err),
    }
}

/// Splits `a=b&c=d` and decodes each side as a servlet does (`+` is a space).
pub fn decode_pairs(raw: &str) -> Vec<(String, String)> {
    raw.split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(s: &str) -> String {
    let spaced = s.replace('+', " ");
    percent_encoding::percent_decode_str(&spaced)
        .decode_utf8_lossy()
        .into_owned()
}
