//! A simulated CloudStack management server: the cloud the integration tests, the benchmark
//! and the `demo` command of cks-drift run against, in memory or over HTTP.
//!
//! `World` is the plain-data state, `commands` answers API commands in CloudStack's shapes
//! and semantics, and `Sim` wraps both behind a mutex with fault injection, a call log and
//! optional latency. `http` serves a `Sim` behind the servlet's request checks, with
//! `signature` for authentication and `time` for the server's clock and dates. `mariadb`
//! runs a private MariaDB server holding the CloudStack tables that describe a `World`.
//!
//! This crate does not depend on cks-drift and shares no code with its client: signing,
//! the GET/POST rule and date handling are written here from CloudStack's behaviour, so that
//! a bug in the client cannot be mirrored by the server it is tested against.
#![forbid(unsafe_code)]
// A function reads as a short list of named phases: the bound is the workspace's clippy.toml.
#![warn(clippy::too_many_lines)]

mod commands;
mod http;
#[cfg(feature = "mariadb")]
pub mod mariadb;
mod params;
mod query;
mod release;
mod render;
pub mod signature;
mod time;
mod world;

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

pub use commands::{COMMANDS, Settings, VM_MAP_CHECK_SETTING};
pub use http::{CONTENT_TYPE, FakeCloudStack, decode_pairs};
pub use query::{ApiError, DEFAULT_PAGE_SIZE};
pub use release::Release;
pub use render::{error_body, response_key};
pub use time::SimTime;
pub use world::{
    CALLER_ACCOUNT, ClusterSpec, JobOutcome, JobWork, NetworkLayout, NetworkType, NodeRole,
    ROOT_DOMAIN, SimAccount, SimAlert, SimAnnotation, SimCluster, SimDomain, SimEvent, SimJob,
    SimNetwork, SimNic, SimOwner, SimProject, SimPublicIp, SimVm, SimZone, VM_MAP_CHECK_EVENT,
    World, cks_hex, etcd_name_prefix, node_name_prefix,
};

/// The text of every authentication failure, and of an unknown command.
pub const UNAUTHORIZED_TEXT: &str = "unable to verify user credentials and/or request signature";

/// One API call as the simulator received it (parameter names lower-cased).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub command: String,
    pub params: BTreeMap<String, String>,
    /// The port of the API front that received it (several fronts may serve one `Sim`, one
    /// per client, so that a test can tell its clients' calls apart); 0 when called directly.
    pub front: u16,
    /// When it arrived (the wall clock, not the world's), before any latency.
    pub at: std::time::SystemTime,
}

impl Call {
    /// Whether the call would change state in a real cloud (see [`is_state_changing`]).
    pub fn is_state_changing(&self) -> bool {
        is_state_changing(&self.command)
    }
}

/// What the management server treats as state-changing, and so wants by POST when
/// `enforce.post.requests.and.timestamps` is on (`ApiServlet.isStateChangingCommandUsingPOST`,
/// server/src/main/java/com/cloud/api/ApiServlet.java, 4.21): any command whose name does not
/// start with `list`, `get`, `query` or `find`. The prefixes are matched as Java's
/// `startsWith` matches them, case-sensitively.
pub fn is_state_changing(command: &str) -> bool {
    const READS: [&str; 4] = ["list", "get", "query", "find"];
    !READS.iter().any(|read| command.starts_with(read))
}

/// What the simulated server answers: an HTTP status and a body (CloudStack's JSON, or the
/// body of an injected fault).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub body: String,
}

/// Parameters that carry authentication, not command input.
const AUTH_PARAMS: &[&str] = &[
    "command",
    "apikey",
    "signature",
    "signatureversion",
    "expires",
    "response",
];

struct Inner {
    world: World,
    settings: Settings,
    latency: Duration,
    faults: BTreeMap<String, VecDeque<Answer>>,
    /// Every call answered with this while set (a server that is down behind its proxy).
    outage: Option<Answer>,
    /// Every state-changing call refused with this error while set.
    writes_refused: Option<ApiError>,
    calls: Vec<Call>,
}

/// The simulated server: a `World` behind a mutex, server settings, injected faults and a
/// log of every call. Share it as `Arc<Sim>`.
pub struct Sim {
    inner: Mutex<Inner>,
}

impl Sim {
    pub fn new(world: World) -> Self {
        Sim {
            inner: Mutex::new(Inner {
                world,
                settings: Settings::default(),
                latency: Duration::ZERO,
                faults: BTreeMap::new(),
                outage: None,
                writes_refused: None,
                calls: Vec::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panicking test closure must not wedge every later call.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads or changes the world.
    pub fn with_world<R>(&self, f: impl FnOnce(&mut World) -> R) -> R {
        f(&mut self.lock().world)
    }

    /// `default.page.size`; `None` is -1 (no maximum, no default limit).
    pub fn set_max_page_size(&self, max: Option<u32>) {
        self.lock().settings.max_page_size = max;
    }

    /// Makes new async jobs answer "pending" to this many queries before they run.
    pub fn set_job_pending_polls(&self, polls: u32) {
        self.lock().settings.job_pending_polls = polls;
    }

    /// `encode.api.response = true`: every string value of every answer is URL-encoded.
    pub fn set_encode_api_response(&self, on: bool) {
        self.lock().settings.encode_api_response = on;
    }

    /// Delay applied by the transports before each call is answered.
    pub fn set_latency(&self, latency: Duration) {
        self.lock().latency = latency;
    }

    pub fn latency(&self) -> Duration {
        self.lock().latency
    }

    /// The next `times` calls of `command` get this status and body instead of an answer.
    pub fn fail_next(&self, command: &str, times: usize, status: u16, body: &str) {
        let mut inner = self.lock();
        let queue = inner.faults.entry(command.to_string()).or_default();
        for _ in 0..times {
            queue.push_back(Answer {
                status,
                body: body.to_string(),
            });
        }
    }

    /// Until called again with `None`, every call gets this status and body (a management
    /// server down behind its proxy or load balancer: 502, 503), whatever the command.
    pub fn set_outage(&self, answer: Option<(u16, &str)>) {
        self.lock().outage = answer.map(|(status, body)| Answer {
            status,
            body: body.to_string(),
        });
    }

    /// Until called again with `None`, every state-changing call is refused with this
    /// CloudStack error (HTTP status = `errorcode`, under the command's response key), as a
    /// server whose database refuses writes answers (530, "Internal error executing
    /// command."); reads are answered.
    pub fn refuse_writes(&self, refusal: Option<(u16, &str)>) {
        self.lock().writes_refused = refusal.map(|(code, text)| ApiError {
            code,
            cs_code: Some(query::CS_CLOUD_RUNTIME),
            text: text.to_string(),
        });
    }

    /// Like [`Sim::fail_next`] with a CloudStack error body: HTTP status = `errorcode`.
    pub fn fail_next_with_error(&self, command: &str, times: usize, errorcode: u16, text: &str) {
        let err = ApiError {
            code: errorcode,
            cs_code: Some(query::CS_CLOUD_RUNTIME),
            text: text.to_string(),
        };
        self.fail_next(
            command,
            times,
            errorcode,
            &error_body(&response_key(command), &err),
        );
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// How many times `command` was called.
    pub fn call_count(&self, command: &str) -> usize {
        self.lock()
            .calls
            .iter()
            .filter(|c| c.command == command)
            .count()
    }

    /// The calls that would change state in a real cloud.
    pub fn state_changing_calls(&self) -> Vec<Call> {
        self.lock()
            .calls
            .iter()
            .filter(|c| c.is_state_changing())
            .cloned()
            .collect()
    }

    pub fn clear_calls(&self) {
        self.lock().calls.clear();
    }

    /// Whether the simulator implements `command` (anything else is answered like an
    /// unknown API: 401 under `errorresponse`).
    pub fn knows(command: &str) -> bool {
        COMMANDS.contains(&command)
    }

    /// Answers one API call as the management server would, after authentication: the
    /// values are checked for control characters and the command's declared parameters for
    /// presence, emptiness, type and length, then the command runs. Parameter names are
    /// matched case-insensitively (the server lower-cases them); the first value of a name
    /// wins; authentication parameters are ignored by the commands.
    pub fn handle(&self, command: &str, params: &BTreeMap<String, String>) -> Answer {
        self.handle_from(0, std::time::SystemTime::now(), command, params)
    }

    /// [`Sim::handle`] for a call received by the API front on port `front` at `at`.
    pub fn handle_from(
        &self,
        front: u16,
        at: std::time::SystemTime,
        command: &str,
        params: &BTreeMap<String, String>,
    ) -> Answer {
        let mut normalized: BTreeMap<String, String> = BTreeMap::new();
        for (name, value) in params {
            let name = name.to_lowercase();
            if !AUTH_PARAMS.contains(&name.as_str()) {
                normalized.entry(name).or_insert_with(|| value.clone());
            }
        }
        let mut inner = self.lock();
        inner.calls.push(Call {
            command: command.to_string(),
            params: normalized.clone(),
            front,
            at,
        });
        // A command the caller's role (a custom one) or, on 4.23, its key pair's own rules
        // do not allow is refused while the request is verified.
        if let Some(err) = role_refusal(&inner.world, command) {
            return Answer {
                status: err.code,
                body: error_body("errorresponse", &err),
            };
        }
        // What the server refuses before the command runs (see `params`).
        let checked = params::check_characters(params)
            .and_then(|()| params::check_declared(command, &normalized));
        if let Err(err) = checked {
            let key = if Sim::knows(command) {
                response_key(command)
            } else {
                "errorresponse".to_string()
            };
            return Answer {
                status: err.code,
                body: error_body(&key, &err),
            };
        }
        if let Some(fault) = inner.faults.get_mut(command).and_then(VecDeque::pop_front) {
            return fault;
        }
        if let Some(outage) = &inner.outage {
            return outage.clone();
        }
        if let Some(err) = inner
            .writes_refused
            .as_ref()
            .filter(|_| is_state_changing(command))
        {
            return Answer {
                status: err.code,
                body: error_body(&response_key(command), err),
            };
        }
        let Inner {
            world, settings, ..
        } = &mut *inner;
        let encoded = |body: String| {
            if settings.encode_api_response {
                render::url_encoded_answer(&body)
            } else {
                body
            }
        };
        match commands::execute(world, settings, command, &normalized) {
            Some(Ok(body)) => Answer {
                status: 200,
                body: encoded(body),
            },
            Some(Err(err)) => Answer {
                status: err.code,
                body: encoded(error_body(&response_key(command), &err)),
            },
            None => Answer {
                status: 401,
                body: error_body(
                    "errorresponse",
                    &ApiError {
                        code: 401,
                        cs_code: None,
                        text: UNAUTHORIZED_TEXT.to_string(),
                    },
                ),
            },
        }
    }
}

/// The refusal of `command` by the caller's custom role (`caller_role_denies`) or, on 4.23, by
/// its key pair's own rules (`caller_key_pair_allows`): `DynamicRoleBasedAPIAccessChecker`
/// throws `UnavailableCommandException`, which `ApiServer.commandAvailable` answers with 432
/// under `errorresponse`, cserrorcode 9999 (`ServerApiException`), and the checker's text,
/// which changed with PR 6412 (4.18), PR 9840 (4.20.1) and PR 9504 (4.23).
fn role_refusal(w: &World, command: &str) -> Option<ApiError> {
    if !Sim::knows(command) {
        return None;
    }
    let by_role = w
        .caller_role_denies
        .iter()
        .any(|c| c.eq_ignore_ascii_case(command));
    let by_pair = w.release.has_api_key_pairs()
        && w.caller_key_pair_allows
            .as_ref()
            .is_some_and(|allows| !allows.iter().any(|c| c.eq_ignore_ascii_case(command)));
    if !by_role && !by_pair {
        return None;
    }
    Some(ApiError {
        code: 432,
        cs_code: Some(query::CS_SERVER_API),
        text: w
            .release
            .unavailable_command_text(command, CALLER_ACCOUNT, &w.admin_user_id),
    })
}

#[cfg(test)]
mod tests;
