//! The fake CloudStack API server: a [`Sim`] served over HTTP at `/client/api` on 127.0.0.1,
//! behind the management server's request checks. What a command answers is the simulator's;
//! only the servlet's part (decoding, the checks before a command runs) lives here.
//!
//! What it checks, in the management server's order:
//! - `response=json`, otherwise HTTP 400 with a plain-text body: the real server would answer
//!   in XML, which nothing here speaks, so a client that forgets `response=json` fails loudly;
//! - with `enforce_post(true)` (the `enforce.post.requests.and.timestamps` setting): a
//!   state-changing command sent by GET gets HTTP 400
//!   (`ApiServlet.isStateChangingCommandUsingPOST`), signature version 3 is
//!   mandatory and `expires` may be at most 15 minutes ahead;
//! - the api key, `expires` for `signatureversion=3` (missing, unparseable or past) and the
//!   signature over the decoded parameters (see `signature`): any failure gives HTTP 401
//!   "unable to verify user credentials and/or request signature" under the command's
//!   response key (`errorresponse` for an unknown command), as
//!   `ApiServer.getSerializedApiError` writes it.
//!
//! Parameters come from the query string, and for POST also from the form body.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::signature::{self, Keys};
use super::time::SimTime;
use super::{
    Answer, ApiError, Sim, UNAUTHORIZED_TEXT, error_body, is_state_changing, response_key,
};

/// `json.content.type`, the content type of every JSON answer.
pub const CONTENT_TYPE: &str = "application/json; charset=UTF-8";

struct Shared {
    sim: Arc<Sim>,
    api_key: String,
    secret_key: String,
    enforce_post: AtomicBool,
    /// The port this front listens on, recorded with each call.
    front: u16,
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
        // `getUser userapikey=` finds the caller by the key it signs with.
        sim.with_world(|w| w.caller_api_key = api_key.to_string());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("bound address");
        let shared = Arc::new(Shared {
            sim,
            api_key: api_key.to_string(),
            secret_key: secret_key.to_string(),
            enforce_post: AtomicBool::new(false),
            front: addr.port(),
        });
        let app = Router::new()
            .route("/client/api", get(api).post(api))
            .with_state(shared.clone());
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

    /// The port it listens on: [`crate::Call::front`] of the calls it received.
    pub fn port(&self) -> u16 {
        self.addr.port()
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
    method: Method,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Response {
    let mut params = decode_pairs(query.as_deref().unwrap_or(""));
    if method == Method::POST {
        params.extend(decode_pairs(&String::from_utf8_lossy(&body)));
    }
    // A call is recorded as arrived when it came, not when it is answered after the latency.
    let arrived = std::time::SystemTime::now();
    let latency = shared.sim.latency();
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let answer = shared.answer_arrived(method == Method::POST, &params, SimTime::now(), arrived);
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let content_type = if answer.body.starts_with('{') {
        CONTENT_TYPE
    } else {
        "text/plain; charset=UTF-8"
    };
    (status, [(header::CONTENT_TYPE, content_type)], answer.body).into_response()
}

impl Shared {
    /// The answer to one request whose parameters are decoded, in the order sent.
    #[cfg(test)]
    fn answer(&self, is_post: bool, params: &[(String, String)], now: SimTime) -> Answer {
        self.answer_arrived(is_post, params, now, std::time::SystemTime::now())
    }

    /// [`Shared::answer`] of a call that arrived at `arrived` (recorded with the call).
    fn answer_arrived(
        &self,
        is_post: bool,
        params: &[(String, String)],
        now: SimTime,
        arrived: std::time::SystemTime,
    ) -> Answer {
        // `ApiServlet` reads `command` and `response` by their exact names.
        let exact = |name: &str| {
            params
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        if !exact("response").is_some_and(|r| r.eq_ignore_ascii_case("json")) {
            return Answer {
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
        if enforce && !is_post && is_state_changing(command) {
            let text =
                format!("State changing command {command} needs to be sent using POST request");
            return error(400, &key, &text);
        }
        let keys = Keys {
            api_key: &self.api_key,
            secret_key: &self.secret_key,
            enforce,
        };
        if signature::verify(params, &keys, now).is_err() {
            return error(401, &key, UNAUTHORIZED_TEXT);
        }
        let mut map = BTreeMap::new();
        for (k, v) in params {
            map.entry(k.clone()).or_insert_with(|| v.clone());
        }
        self.sim.handle_from(self.front, arrived, command, &map)
    }
}

fn error(status: u16, key: &str, text: &str) -> Answer {
    let err = ApiError {
        code: status,
        cs_code: None,
        text: text.to_string(),
    };
    Answer {
        status,
        body: error_body(key, &err),
    }
}

/// Splits `a=b&c=d` and decodes each side as a servlet does (`+` is a space, `%XX` a byte,
/// bytes that are not UTF-8 become U+FFFD). A pair without `=` is a name with an empty value.
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

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::{Value, json};

    use super::signature::{signature_of, string_to_sign};
    use crate::World;

    const NOW: i64 = 1_750_000_000;

    fn server(world: World) -> Shared {
        Shared {
            sim: Arc::new(Sim::new(world)),
            api_key: "key".to_string(),
            secret_key: "secret".to_string(),
            enforce_post: AtomicBool::new(false),
            front: 0,
        }
    }

    fn now() -> SimTime {
        SimTime::from_unix(NOW)
    }

    /// `pairs` plus the authentication parameters, signed with `secret` by this crate's
    /// signer, as a query string would decode.
    fn signed(secret: &str, pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut params: Vec<(String, String)> = vec![
            ("apikey".into(), "key".into()),
            ("signatureversion".into(), "3".into()),
            (
                "expires".into(),
                now()
                    .plus(std::time::Duration::from_secs(60))
                    .to_cloudstack(),
            ),
        ];
        params.extend(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let sig = signature_of(secret, &string_to_sign(&params));
        params.push(("signature".into(), sig));
        params
    }

    fn json_of(answer: &Answer) -> Value {
        serde_json::from_str(&answer.body).unwrap_or_else(|e| panic!("{e}: {}", answer.body))
    }

    #[test]
    fn servlet_decoding_turns_plus_into_space_and_keeps_repeats() {
        assert_eq!(
            decode_pairs("a=1+2&b=%2B%2F%3D&&c&name=%C3%9C&name=x&bad=%FF%zz"),
            [
                ("a".to_string(), "1 2".to_string()),
                ("b".to_string(), "+/=".to_string()),
                ("c".to_string(), String::new()),
                ("name".to_string(), "Ü".to_string()),
                ("name".to_string(), "x".to_string()),
                ("bad".to_string(), "\u{fffd}%zz".to_string()),
            ]
        );
        assert!(decode_pairs("").is_empty());
    }

    #[test]
    fn a_signed_request_reaches_the_simulator_and_a_bad_one_does_not() {
        let fake = server(World::new(now()));
        let good = signed("secret", &[("command", "listAlerts"), ("response", "json")]);
        let answer = fake.answer(false, &good, now());
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert_eq!(json_of(&answer), json!({"listalertsresponse": {}}));

        let bad = signed("wrong", &[("command", "listAlerts"), ("response", "json")]);
        let answer = fake.answer(false, &bad, now());
        assert_eq!(answer.status, 401);
        assert_eq!(
            json_of(&answer),
            json!({"listalertsresponse": {
                "uuidList": [], "errorcode": 401, "errortext": UNAUTHORIZED_TEXT
            }})
        );
        let unknown = signed("wrong", &[("command", "listAlertz"), ("response", "json")]);
        let answer = fake.answer(false, &unknown, now());
        assert_eq!(answer.status, 401);
        assert!(
            json_of(&answer).get("errorresponse").is_some(),
            "{}",
            answer.body
        );
        assert_eq!(fake.sim.call_count("listAlerts"), 1);
    }

    #[test]
    fn response_json_and_command_come_first() {
        let fake = server(World::new(now()));
        let answer = fake.answer(
            false,
            &signed("secret", &[("command", "listAlerts")]),
            now(),
        );
        assert_eq!(
            (answer.status, answer.body.as_str()),
            (400, "this fake CloudStack answers only response=json")
        );
        let answer = fake.answer(false, &signed("wrong", &[("response", "json")]), now());
        assert_eq!(answer.status, 400);
        assert_eq!(
            json_of(&answer)["errorresponse"]["errortext"],
            "no command specified"
        );
    }

    #[test]
    fn enforcement_wants_post_for_state_changing_commands() {
        let fake = server(World::new(now()));
        fake.enforce_post.store(true, Ordering::SeqCst);
        let alert = [
            ("command", "generateAlert"),
            ("response", "json"),
            ("type", "1001"),
            ("name", "n"),
            ("description", "d"),
        ];
        let answer = fake.answer(false, &signed("secret", &alert), now());
        assert_eq!(answer.status, 400);
        assert_eq!(
            json_of(&answer)["generatealertresponse"]["errortext"],
            "State changing command generateAlert needs to be sent using POST request"
        );
        assert_eq!(fake.sim.call_count("generateAlert"), 0);
        let answer = fake.answer(true, &signed("secret", &alert), now());
        assert_eq!(answer.status, 200, "{}", answer.body);
        let list = [("command", "listAlerts"), ("response", "json")];
        assert_eq!(
            fake.answer(false, &signed("secret", &list), now()).status,
            200
        );
    }
}
