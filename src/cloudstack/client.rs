//! The CloudStack API client: one command with retries of outages, every page of a list
//! command, and asynchronous jobs polled to their end, with attempts counted per command.
//! It ties the parts together and owns what takes time: sending, sleeping, running pages
//! concurrently. The parts themselves do not belong here: building and signing a request
//! (`request`), the wire (`transport`, `http`), reading an answer (`response`) or a page
//! (`pages`), when to retry (`retry`). Nor do which commands to call, and what the answers
//! mean for a cluster, which belong to the callers.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::stream::{self, StreamExt};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::time::Instant;

use super::error::ApiError;
use super::http::HttpTransport;
use super::pages::{ListPage, PageOf, Paging, read_page};
use super::request::{ApiRequest, Method};
use super::response::{job_id, read_answer, read_job, read_response};
use super::retry::RetryPolicy;
use super::streamed::{self, hold};
use super::transport::{Answer, Transport};
use crate::config::CloudStackSettings;

/// Whether this instance may still send changes to CloudStack: the database lock, confirmed
/// on its own connection, where several instances share one cloud.
pub trait Fence: Send + Sync {
    fn holds(&self) -> futures::future::BoxFuture<'_, bool>;
}

/// How the client pages, retries and waits for asynchronous jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientOptions {
    /// Rows per page of list commands (at most the server's `default.page.size`).
    pub page_size: u32,
    /// Pages of one list command in flight at once, once the first page has told how many
    /// rows there are (the management server serves concurrent reads).
    pub page_concurrency: usize,
    pub retry: RetryPolicy,
    /// Wait between two `queryAsyncJobResult` calls.
    pub async_poll_interval: Duration,
    /// How long an asynchronous job may stay pending before the client gives up on it.
    pub async_deadline: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            page_size: 500,
            page_concurrency: 4,
            retry: RetryPolicy::default(),
            async_poll_interval: Duration::from_secs(2),
            async_deadline: Duration::from_secs(120),
        }
    }
}

/// What one HTTP attempt came to, as counted by [`Client::stats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Ok,
    Error,
    Transient,
}

impl Outcome {
    fn of<R>(result: &Result<R, ApiError>) -> Outcome {
        match result {
            Ok(_) => Outcome::Ok,
            Err(e) if e.is_transient() => Outcome::Transient,
            Err(_) => Outcome::Error,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
            Outcome::Transient => "transient",
        }
    }
}

/// The most rows a list's buffer is grown to at once on the server's word (`count`).
const MAX_RESERVED_ROWS: usize = 1 << 20;

/// Makes room, before `incoming` rows join `rows`, for the rows still to come as far as the
/// server's `count` and the share of the `read` rows kept so far tell: a list of thousands of
/// rows grows once or twice, not by doubling, which holds the old buffer and one twice its size
/// at once. A `count` no larger than what was read (as 4.16 to 4.19.0 answer) gives no hint;
/// the room left is given back when the list is complete.
fn reserve_expected<U>(rows: &mut Vec<U>, incoming: usize, read: usize, count: Option<u64>) {
    let Some(count) = count.and_then(|c| usize::try_from(c).ok()) else {
        return;
    };
    let kept = rows.len() + incoming;
    if read == 0 || count <= read || kept <= rows.capacity() {
        return;
    }
    // The share kept varies from page to page: a sixteenth more than it predicts.
    let expected = kept.saturating_mul(count) / read;
    let expected = expected
        .saturating_add(expected / 16)
        .min(MAX_RESERVED_ROWS);
    if expected > kept {
        rows.reserve_exact(expected - rows.len());
    }
}

/// A CloudStack API client. Cheap to share behind an `Arc`; calls may run concurrently.
pub struct Client {
    transport: Arc<dyn Transport>,
    options: ClientOptions,
    /// Asked before every attempt of a command that changes state (its retries included):
    /// an instance that no longer holds the lock sends no change at all (see [`Fence`]).
    fence: std::sync::OnceLock<Arc<dyn Fence>>,
    /// Only to name the server in errors.
    endpoint: String,
    /// Attempts per (command, outcome).
    stats: Mutex<BTreeMap<(String, &'static str), u64>>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("endpoint", &self.endpoint)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client talking HTTP(S) to the management server of `settings`.
    pub fn new(settings: &CloudStackSettings) -> Result<Client, ApiError> {
        let transport = HttpTransport::new(settings)?;
        let options = ClientOptions {
            page_size: settings.page_size,
            ..ClientOptions::default()
        };
        Ok(Client::with_transport(Arc::new(transport), options).with_endpoint(&settings.url))
    }

    /// A client over any transport (an in-memory simulator, a test double).
    pub fn with_transport(transport: Arc<dyn Transport>, options: ClientOptions) -> Client {
        Client {
            transport,
            options,
            endpoint: "(endpoint not set)".to_string(),
            stats: Mutex::new(BTreeMap::new()),
            fence: std::sync::OnceLock::new(),
        }
    }

    /// Names the management server in errors (for example in [`ApiError::Unauthorized`]).
    pub fn with_endpoint(mut self, url: impl Into<String>) -> Client {
        self.endpoint = url.into();
        self
    }

    pub fn options(&self) -> &ClientOptions {
        &self.options
    }

    /// HTTP attempts so far, per command and outcome (`"ok"`, `"error"`, `"transient"`),
    /// sorted by command then outcome.
    pub fn stats(&self) -> Vec<(String, &'static str, u64)> {
        let stats = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        stats
            .iter()
            .map(|((command, outcome), n)| (command.clone(), *outcome, *n))
            .collect()
    }

    /// Runs one command and returns the object under `<command lowercased>response`.
    /// Transient failures are retried as the [`RetryPolicy`] says; nothing else is.
    pub async fn request(&self, command: &str, params: &[(&str, &str)]) -> Result<Value, ApiError> {
        let request = ApiRequest::new(command, params);
        self.retried(command, || self.attempt(&request)).await
    }

    /// The version the management server reports (`listCapabilities`' `cloudstackversion`,
    /// which any caller may read), at most 64 characters, or `None` where it is not shown
    /// (from 4.21 `expose.cloudstack.version.api.list.capabilities = false` hides it).
    pub async fn version(&self) -> Result<Option<String>, ApiError> {
        let answer = self.request("listCapabilities", &[]).await?;
        Ok(answer
            .get("capability")
            .and_then(|c| c.get("cloudstackversion"))
            .and_then(Value::as_str)
            .map(|v| v.chars().take(64).collect()))
    }

    /// Whether the management server runs its own VM map check (`listConfigurations
    /// name=`, one page: the name matches a handful of settings at most).
    pub async fn server_check(&self) -> Result<super::server_check::ServerCheck, ApiError> {
        use super::server_check::{Configuration, SETTING, ServerCheck};
        let rows: Vec<Configuration> = self
            .list("listConfigurations", "configuration", &[("name", SETTING)])
            .await?;
        Ok(ServerCheck::from_rows(&rows))
    }

    /// The default alert types the server lists (`listAlertTypes`, 4.19.1 and later), each
    /// number with its name.
    pub async fn alert_types(&self) -> Result<Vec<super::model::AlertType>, ApiError> {
        let answer = self.request("listAlertTypes", &[]).await?;
        let rows = answer
            .get("alerttype")
            .cloned()
            .unwrap_or_else(|| Value::Array(Vec::new()));
        serde_json::from_value(rows).map_err(|e| ApiError::Decode {
            command: "listAlertTypes".to_string(),
            detail: format!("`alerttype`: {e}"),
        })
    }

    /// The user that holds `api_key` (`getUser userapikey=`, the same on 4.16 to 4.22): whose
    /// annotations are cks-drift's own, and the type of its role.
    pub async fn caller(&self, api_key: &str) -> Result<super::model::User, ApiError> {
        let mut answer = self.request("getUser", &[("userapikey", api_key)]).await?;
        let user = answer.get_mut("user").map(Value::take).unwrap_or_default();
        serde_json::from_value(user).map_err(|e| ApiError::Decode {
            command: "getUser".to_string(),
            detail: format!("`user`: {e}"),
        })
    }

    /// From now on, every attempt of a command that changes state first asks `fence`; a
    /// client is fenced once, when its instance takes part in a lock.
    pub fn fence_with(&self, fence: Arc<dyn Fence>) {
        let _ = self.fence.set(fence);
    }

    /// Runs `call` until it succeeds, fails with a non-transient error, or the attempts are
    /// used up; counts every attempt in [`Client::stats`]. A change is not sent once the
    /// fence says this instance may no longer send ([`ApiError::Fenced`]).
    async fn retried<R, F, Fut>(&self, command: &str, mut call: F) -> Result<R, ApiError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<R, ApiError>>,
    {
        let mut attempt = 1;
        let fenced = Method::for_command(command) == Method::Post;
        loop {
            if fenced
                && let Some(fence) = self.fence.get()
                && !fence.holds().await
            {
                return Err(ApiError::Fenced {
                    command: command.to_string(),
                });
            }
            let result = call().await;
            self.count(command, Outcome::of(&result));
            let error = match result {
                Err(error) => error,
                done => return done,
            };
            let Some(delay) = self.options.retry.retry_after(attempt, &error) else {
                return Err(error);
            };
            tracing::debug!(
                command,
                attempt,
                delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                %error,
                "transient failure, retrying"
            );
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    async fn attempt(&self, request: &ApiRequest) -> Result<Value, ApiError> {
        let page_size = self.requested_page_size(request);
        match self.send(request).await? {
            Answer::Whole(raw) => read_response(&request.command, &self.endpoint, page_size, &raw),
            // Not a list page: CloudStack's answers are a few KiB, and no more than a tree is
            // read for is held of one.
            Answer::Streamed(answer) => {
                let held = hold(answer).await.map_err(|source| ApiError::Transport {
                    command: request.command.clone(),
                    source,
                })?;
                read_answer(&request.command, &self.endpoint, page_size, &held)
            }
        }
    }

    async fn send(&self, request: &ApiRequest) -> Result<Answer, ApiError> {
        self.transport
            .send(request.clone())
            .await
            .map_err(|source| ApiError::Transport {
                command: request.command.clone(),
                source,
            })
    }

    fn requested_page_size(&self, request: &ApiRequest) -> u32 {
        request.page_size().unwrap_or(self.options.page_size)
    }

    fn count(&self, command: &str, outcome: Outcome) {
        let mut stats = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        *stats
            .entry((command.to_string(), outcome.label()))
            .or_insert(0) += 1;
    }

    /// Every row of a list command: asks for `page=1..` with `pagesize`, and stops when a page
    /// comes back short or without `item_key`; a full page is always followed by another,
    /// whatever `count` says (see `pages`). An empty list (`{"listxresponse":{}}`) is an
    /// empty `Vec`.
    ///
    /// Once the first page has given `count`, the further pages it implies are fetched
    /// [`ClientOptions::page_concurrency`] at a time; rows keep the server's order, and a
    /// page that fails (after its retries) fails the whole list.
    pub async fn list<T: DeserializeOwned + Send + 'static>(
        &self,
        command: &str,
        item_key: &str,
        params: &[(&str, &str)],
    ) -> Result<Vec<T>, ApiError> {
        self.list_where(command, item_key, params, |_: &T| true)
            .await
    }

    /// Like [`Client::list`], but keeps only the rows `keep` accepts, so that a large listing
    /// of which a small part matters is never held whole. Paging counts every row read.
    pub async fn list_where<T, K>(
        &self,
        command: &str,
        item_key: &str,
        params: &[(&str, &str)],
        keep: K,
    ) -> Result<Vec<T>, ApiError>
    where
        T: DeserializeOwned + Send + 'static,
        K: Fn(&T) -> bool,
    {
        self.list_map(command, item_key, params, |row: T| {
            keep(&row).then_some(row)
        })
        .await
    }

    /// Like [`Client::list_where`], but each row is turned into what is kept of it (or
    /// dropped, `None`) as soon as it is read: a listing held for a whole cycle holds only
    /// that, never the rows as the API wrote them, nor the page's text (a page is read into rows
    /// as it arrives). `keep` may run more than once for a page whose request is retried, or
    /// whose answer turns out to be no page and is read again to explain it; only the last
    /// run's rows are kept.
    pub async fn list_map<T, U, K>(
        &self,
        command: &str,
        item_key: &str,
        params: &[(&str, &str)],
        keep: K,
    ) -> Result<Vec<U>, ApiError>
    where
        T: DeserializeOwned + Send + 'static,
        K: Fn(T) -> Option<U>,
    {
        let mut paging = Paging::new(self.options.page_size);
        let page_size = paging.page_size();
        let mut rows: Vec<U> = Vec::new();
        let mut read = 0;
        loop {
            let mut pages = stream::iter(paging.batch())
                .map(|page| self.page(command, item_key, params, page, page_size, &keep))
                .buffered(self.options.page_concurrency.max(1));
            while let Some(answer) = pages.next().await {
                let answer = answer?;
                tracing::trace!(
                    command,
                    page = paging.next_page(),
                    rows = answer.read,
                    "page read"
                );
                read += answer.read;
                reserve_expected(&mut rows, answer.rows.len(), read, answer.count);
                rows.extend(answer.rows);
                if paging.complete_after(answer.read, answer.count) {
                    // Pages still in flight are past the end: dropping them cancels them.
                    // The rows are kept for the whole cycle: not the room doubling left.
                    rows.shrink_to_fit();
                    return Ok(rows);
                }
            }
            paging.plan_next_batch(command)?;
        }
    }

    /// One page of a list command, with retries.
    async fn page<T, U, K>(
        &self,
        command: &str,
        item_key: &str,
        params: &[(&str, &str)],
        page: u32,
        page_size: u32,
        keep: &K,
    ) -> Result<ListPage<U>, ApiError>
    where
        T: DeserializeOwned + Send + 'static,
        K: Fn(T) -> Option<U>,
    {
        let request = ApiRequest::list_page(command, params, page, page_size);
        let requested_page_size = self.requested_page_size(&request);
        let at = PageOf {
            command,
            endpoint: &self.endpoint,
            item_key,
            page,
            page_size: requested_page_size,
        };
        self.retried(command, || async {
            match self.send(&request).await? {
                Answer::Whole(raw) => read_page(
                    command,
                    &self.endpoint,
                    item_key,
                    page,
                    requested_page_size,
                    &raw,
                    keep,
                ),
                Answer::Streamed(answer) => streamed::read_page(at, answer, keep).await,
            }
        })
        .await
    }

    /// Runs an asynchronous command and waits for its job: polls `queryAsyncJobResult`
    /// every `async_poll_interval` until `jobstatus` is 1 (returns `jobresult`) or 2
    /// ([`ApiError::AsyncJobFailed`]), or `async_deadline` has passed
    /// ([`ApiError::AsyncJobTimeout`]; the job may still finish on the server).
    pub async fn request_async(
        &self,
        command: &str,
        params: &[(&str, &str)],
    ) -> Result<Value, ApiError> {
        let answer = self.request(command, params).await?;
        let job_id = job_id(command, &answer)?;
        let started = Instant::now();
        let deadline = started + self.options.async_deadline;
        // Quick jobs (generateAlert takes milliseconds) are seen at once; slow ones are polled
        // at most every `async_poll_interval`.
        let mut wait = self
            .options
            .async_poll_interval
            .min(Duration::from_millis(100));
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            tokio::time::sleep(wait.min(left)).await;
            wait = (wait * 2).min(self.options.async_poll_interval);
            let status = self
                .request("queryAsyncJobResult", &[("jobid", job_id)])
                .await?;
            if let Some(result) = read_job(command, job_id, status)? {
                return Ok(result);
            }
            if Instant::now() >= deadline {
                return Err(ApiError::AsyncJobTimeout {
                    command: command.to_string(),
                    job_id: job_id.to_string(),
                    waited: started.elapsed(),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_list_grows_to_what_count_and_the_share_kept_predict() {
        // 100 of 1,000 rows read, 10 kept: room for about 100 (and a sixteenth more).
        let mut rows: Vec<u32> = Vec::new();
        super::reserve_expected(&mut rows, 10, 100, Some(1000));
        assert!(
            (100..=110).contains(&rows.capacity()),
            "{}",
            rows.capacity()
        );
        // No hint: `count` missing, or no larger than what was read (4.16 to 4.19.0).
        for count in [None, Some(100)] {
            let mut rows: Vec<u32> = Vec::new();
            super::reserve_expected(&mut rows, 10, 100, count);
            assert_eq!(rows.capacity(), 0);
        }
        // A `count` no server could mean is not taken at its word.
        let mut rows: Vec<u8> = Vec::new();
        super::reserve_expected(&mut rows, 500, 500, Some(u64::MAX));
        assert!(rows.capacity() <= super::MAX_RESERVED_ROWS);
    }

    use std::collections::VecDeque;

    use serde::Deserialize;
    use serde_json::json;

    use super::*;
    use crate::cloudstack::transport::{RawResponse, TransportError, TransportFuture};

    /// Answers from a script, one per attempt, and records every request.
    struct Scripted {
        answers: Mutex<VecDeque<Result<RawResponse, TransportError>>>,
        requests: Mutex<Vec<ApiRequest>>,
    }

    impl Scripted {
        fn new(answers: Vec<Result<RawResponse, TransportError>>) -> Arc<Scripted> {
            Arc::new(Scripted {
                answers: Mutex::new(answers.into()),
                requests: Mutex::new(Vec::new()),
            })
        }

        fn requests(&self) -> Vec<ApiRequest> {
            self.requests.lock().unwrap().clone()
        }
    }

    impl Transport for Scripted {
        fn send(&self, request: ApiRequest) -> TransportFuture<'_> {
            self.requests.lock().unwrap().push(request);
            let answer = self
                .answers
                .lock()
                .unwrap()
                .pop_front()
                .expect("more requests than scripted answers");
            Box::pin(async move { answer.map(Answer::from) })
        }
    }

    fn ok(body: Value) -> Result<RawResponse, TransportError> {
        answer(200, &body.to_string())
    }

    fn answer(status: u16, body: &str) -> Result<RawResponse, TransportError> {
        Ok(RawResponse {
            status,
            body: body.to_string(),
        })
    }

    fn fast_options(page_size: u32) -> ClientOptions {
        ClientOptions {
            page_size,
            page_concurrency: 4,
            retry: RetryPolicy {
                attempts: 3,
                base_delay: Duration::from_millis(1),
                max_delay: Duration::from_millis(2),
            },
            async_poll_interval: Duration::from_millis(1),
            async_deadline: Duration::from_secs(10),
        }
    }

    fn client(script: &Arc<Scripted>, options: ClientOptions) -> Client {
        Client::with_transport(script.clone(), options)
            .with_endpoint("https://cs.example/client/api")
    }

    fn param<'a>(request: &'a ApiRequest, name: &str) -> Option<&'a str> {
        request
            .params
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Row {
        id: String,
    }

    fn rows(range: std::ops::Range<usize>) -> Vec<Value> {
        range.map(|i| json!({ "id": format!("vm-{i}") })).collect()
    }

    #[tokio::test]
    async fn list_follows_count_over_three_pages() {
        let script = Scripted::new(vec![
            ok(
                json!({"listvirtualmachinesresponse": {"count": 1203, "virtualmachine": rows(0..500)}}),
            ),
            ok(
                json!({"listvirtualmachinesresponse": {"count": 1203, "virtualmachine": rows(500..1000)}}),
            ),
            ok(
                json!({"listvirtualmachinesresponse": {"count": 1203, "virtualmachine": rows(1000..1203)}}),
            ),
        ]);
        let client = client(&script, fast_options(500));
        let vms: Vec<Row> = client
            .list(
                "listVirtualMachines",
                "virtualmachine",
                &[("listall", "true")],
            )
            .await
            .unwrap();
        assert_eq!(vms.len(), 1203);
        assert_eq!(vms[0], Row { id: "vm-0".into() });
        assert_eq!(
            vms[1202],
            Row {
                id: "vm-1202".into()
            }
        );
        let requests = script.requests();
        assert_eq!(requests.len(), 3);
        for (i, request) in requests.iter().enumerate() {
            assert_eq!(request.command, "listVirtualMachines");
            assert_eq!(
                request.params,
                [
                    ("listall".to_string(), "true".to_string()),
                    ("page".to_string(), (i + 1).to_string()),
                    ("pagesize".to_string(), "500".to_string()),
                ]
            );
        }
        assert_eq!(
            client.stats(),
            [("listVirtualMachines".to_string(), "ok", 3)]
        );
    }

    #[tokio::test]
    async fn a_full_page_that_reaches_count_is_followed_by_one_more() {
        // 1000 matches: the second page is full and the rows now equal `count`, which a
        // release may answer as the rows of the page alone: page 3 tells.
        let script = Scripted::new(vec![
            ok(json!({"listzonesresponse": {"count": 1000, "zone": rows(0..500)}})),
            ok(json!({"listzonesresponse": {"count": 1000, "zone": rows(500..1000)}})),
            ok(json!({"listzonesresponse": {"count": 1000}})),
        ]);
        let client = client(&script, fast_options(500));
        let zones: Vec<Row> = client.list("listZones", "zone", &[]).await.unwrap();
        assert_eq!(zones.len(), 1000);
        assert_eq!(script.requests().len(), 3);
    }

    #[tokio::test]
    async fn a_count_of_the_pages_own_rows_does_not_end_the_list() {
        // `listKubernetesClusters` before 4.19.1 (apache/cloudstack PR 8701).
        let script = Scripted::new(vec![
            ok(json!({"listzonesresponse": {"count": 2, "zone": rows(0..2)}})),
            ok(json!({"listzonesresponse": {"count": 2, "zone": rows(2..4)}})),
            ok(json!({"listzonesresponse": {"count": 1, "zone": rows(4..5)}})),
        ]);
        let client = client(&script, fast_options(2));
        let zones: Vec<Row> = client.list("listZones", "zone", &[]).await.unwrap();
        assert_eq!(ids(&zones), expected_ids(0..5));
        assert_eq!(script.requests().len(), 3);
    }

    #[tokio::test]
    async fn empty_list_bodies_are_empty() {
        for body in [
            r#"{"listkubernetesclustersresponse":{}}"#,
            r#"{ "listkubernetesclustersresponse" : { } }"#,
        ] {
            let script = Scripted::new(vec![answer(200, body)]);
            let client = client(&script, fast_options(500));
            let clusters: Vec<Row> = client
                .list("listKubernetesClusters", "kubernetescluster", &[])
                .await
                .unwrap();
            assert_eq!(clusters, []);
            assert_eq!(script.requests().len(), 1, "{body}");
        }
    }

    #[tokio::test]
    async fn a_page_past_the_end_stops() {
        // Rows vanished between pages: page 3 has only the count.
        let script = Scripted::new(vec![
            ok(json!({"listvirtualmachinesresponse": {"count": 5, "virtualmachine": rows(0..2)}})),
            ok(json!({"listvirtualmachinesresponse": {"count": 5, "virtualmachine": rows(2..4)}})),
            ok(json!({"listvirtualmachinesresponse": {"count": 5}})),
        ]);
        let client = client(&script, fast_options(2));
        let vms: Vec<Row> = client
            .list("listVirtualMachines", "virtualmachine", &[])
            .await
            .unwrap();
        assert_eq!(vms.len(), 4);
        assert_eq!(script.requests().len(), 3);
        assert_eq!(param(&script.requests()[2], "page"), Some("3"));
        assert_eq!(param(&script.requests()[2], "pagesize"), Some("2"));
    }

    /// A list command served by page number: `total` rows `vm-0..`, answered after a delay
    /// that shrinks with the page number (so later pages come back first), with scripted
    /// failures for some pages. Records the pages asked for and the most pages in flight.
    struct PagedServer {
        total: usize,
        page_size: usize,
        failures: Mutex<BTreeMap<u32, VecDeque<RawResponse>>>,
        asked: Mutex<Vec<u32>>,
        in_flight: std::sync::atomic::AtomicUsize,
        most_in_flight: std::sync::atomic::AtomicUsize,
    }

    impl PagedServer {
        fn new(total: usize, page_size: usize) -> Arc<PagedServer> {
            Arc::new(PagedServer {
                total,
                page_size,
                failures: Mutex::new(BTreeMap::new()),
                asked: Mutex::new(Vec::new()),
                in_flight: 0.into(),
                most_in_flight: 0.into(),
            })
        }

        fn fail(&self, page: u32, status: u16, body: &str) {
            self.failures
                .lock()
                .unwrap()
                .entry(page)
                .or_default()
                .push_back(RawResponse {
                    status,
                    body: body.to_string(),
                });
        }

        fn asked(&self) -> Vec<u32> {
            self.asked.lock().unwrap().clone()
        }
    }

    impl Transport for PagedServer {
        fn send(&self, request: ApiRequest) -> TransportFuture<'_> {
            use std::sync::atomic::Ordering::SeqCst;
            let page: u32 = param(&request, "page").unwrap().parse().unwrap();
            self.asked.lock().unwrap().push(page);
            let now = self.in_flight.fetch_add(1, SeqCst) + 1;
            self.most_in_flight.fetch_max(now, SeqCst);
            let failure = self
                .failures
                .lock()
                .unwrap()
                .get_mut(&page)
                .and_then(VecDeque::pop_front);
            let start = (page as usize - 1) * self.page_size;
            let end = (start + self.page_size).min(self.total);
            let body = json!({"listvirtualmachinesresponse": {
                "count": self.total,
                "virtualmachine": rows(start.min(end)..end),
            }});
            Box::pin(async move {
                tokio::time::sleep(Duration::from_millis(u64::from(20u32.saturating_sub(page))))
                    .await;
                self.in_flight.fetch_sub(1, SeqCst);
                Ok(failure
                    .unwrap_or(RawResponse {
                        status: 200,
                        body: body.to_string(),
                    })
                    .into())
            })
        }
    }

    fn ids(rows: &[Row]) -> Vec<String> {
        rows.iter().map(|r| r.id.clone()).collect()
    }

    fn expected_ids(range: std::ops::Range<usize>) -> Vec<String> {
        range.map(|i| format!("vm-{i}")).collect()
    }

    #[tokio::test]
    async fn pages_after_the_first_are_fetched_together_in_order() {
        let server = PagedServer::new(2203, 500);
        let client = Client::with_transport(server.clone(), fast_options(500));
        let vms: Vec<Row> = client
            .list("listVirtualMachines", "virtualmachine", &[])
            .await
            .unwrap();
        // Pages 2..5 answer in reverse order; the rows keep the server's order.
        assert_eq!(ids(&vms), expected_ids(0..2203));
        assert_eq!(server.asked(), [1, 2, 3, 4, 5]);
        let most = server
            .most_in_flight
            .load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(most, 4);
        assert_eq!(
            client.stats(),
            [("listVirtualMachines".to_string(), "ok", 5)]
        );
    }

    #[tokio::test]
    async fn page_concurrency_bounds_the_pages_in_flight() {
        let server = PagedServer::new(2203, 500);
        let mut options = fast_options(500);
        options.page_concurrency = 2;
        let client = Client::with_transport(server.clone(), options);
        let vms: Vec<Row> = client
            .list("listVirtualMachines", "virtualmachine", &[])
            .await
            .unwrap();
        assert_eq!(ids(&vms), expected_ids(0..2203));
        let most = server
            .most_in_flight
            .load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(most, 2);
    }

    #[tokio::test]
    async fn only_the_pages_count_implies_are_asked_for_and_one_past_a_full_one() {
        for (total, pages) in [(0, 1), (499, 1), (500, 2), (501, 2), (1500, 4), (1501, 4)] {
            let server = PagedServer::new(total, 500);
            let client = Client::with_transport(server.clone(), fast_options(500));
            let vms: Vec<Row> = client
                .list("listVirtualMachines", "virtualmachine", &[])
                .await
                .unwrap();
            assert_eq!(vms.len(), total);
            assert_eq!(server.asked(), (1..=pages).collect::<Vec<u32>>(), "{total}");
        }
    }

    #[tokio::test]
    async fn a_failing_page_fails_the_list() {
        let server = PagedServer::new(2203, 500);
        server.fail(
            3,
            530,
            r#"{"listvirtualmachinesresponse":{"uuidList":[],"errorcode":530,"cserrorcode":4250,"errortext":"database gone"}}"#,
        );
        let client = Client::with_transport(server.clone(), fast_options(500));
        let err = client
            .list::<Row>("listVirtualMachines", "virtualmachine", &[])
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ApiError::CloudStack { code: 530, text, .. } if text == "database gone"),
            "{err:?}"
        );
        // Not retried: a CloudStack error is an answer.
        assert_eq!(
            server.asked().iter().filter(|&&p| p == 3).count(),
            1,
            "{:?}",
            server.asked()
        );
    }

    #[tokio::test]
    async fn a_page_with_a_transient_failure_is_retried_alone() {
        let server = PagedServer::new(2203, 500);
        server.fail(2, 503, "Service Unavailable");
        let client = Client::with_transport(server.clone(), fast_options(500));
        let vms: Vec<Row> = client
            .list("listVirtualMachines", "virtualmachine", &[])
            .await
            .unwrap();
        assert_eq!(ids(&vms), expected_ids(0..2203));
        let mut asked = server.asked();
        asked.sort_unstable();
        assert_eq!(asked, [1, 2, 2, 3, 4, 5]);
        assert_eq!(
            client.stats(),
            [
                ("listVirtualMachines".to_string(), "ok", 5),
                ("listVirtualMachines".to_string(), "transient", 1),
            ]
        );
    }

    #[tokio::test]
    async fn list_where_keeps_some_rows_and_pages_by_all() {
        let server = PagedServer::new(1203, 500);
        let client = Client::with_transport(server.clone(), fast_options(500));
        let vms: Vec<Row> = client
            .list_where("listVirtualMachines", "virtualmachine", &[], |r: &Row| {
                r.id.ends_with('7')
            })
            .await
            .unwrap();
        let expected: Vec<String> = expected_ids(0..1203)
            .into_iter()
            .filter(|id| id.ends_with('7'))
            .collect();
        assert_eq!(ids(&vms), expected);
        assert_eq!(server.asked(), [1, 2, 3]);
    }

    #[tokio::test]
    async fn a_count_that_grows_is_followed() {
        // Rows were added after page 1: page 2 says there are more than page 1 did.
        let script = Scripted::new(vec![
            ok(json!({"listzonesresponse": {"count": 4, "zone": rows(0..2)}})),
            ok(json!({"listzonesresponse": {"count": 6, "zone": rows(2..4)}})),
            ok(json!({"listzonesresponse": {"count": 6, "zone": rows(4..6)}})),
            ok(json!({"listzonesresponse": {}})),
        ]);
        let client = client(&script, fast_options(2));
        let zones: Vec<Row> = client.list("listZones", "zone", &[]).await.unwrap();
        assert_eq!(ids(&zones), expected_ids(0..6));
        let requests = script.requests();
        let pages: Vec<&str> = requests.iter().map(|r| param(r, "page").unwrap()).collect();
        assert_eq!(pages, ["1", "2", "3", "4"]);
    }

    #[tokio::test]
    async fn count_may_be_a_numeric_string() {
        let script = Scripted::new(vec![
            ok(json!({"listzonesresponse": {"count": "3", "zone": rows(0..2)}})),
            ok(json!({"listzonesresponse": {"count": "3", "zone": rows(2..3)}})),
        ]);
        let client = client(&script, fast_options(2));
        let zones: Vec<Row> = client.list("listZones", "zone", &[]).await.unwrap();
        assert_eq!(ids(&zones), expected_ids(0..3));
        assert_eq!(script.requests().len(), 2);
    }

    #[tokio::test]
    async fn a_malformed_page_is_explained() {
        let cases = [
            (
                json!({"listzonesresponse": {"count": 1, "zone": {"id": "z1"}}}),
                "`zone` is not a list but an object",
            ),
            (
                json!({"listzonesresponse": {"count": "many", "zone": rows(0..1)}}),
                "`count` is not a number: \"many\"",
            ),
        ];
        for (body, detail_expected) in cases {
            let script = Scripted::new(vec![ok(body)]);
            let client = client(&script, fast_options(500));
            let err = client
                .list::<Row>("listZones", "zone", &[])
                .await
                .unwrap_err();
            assert!(
                matches!(&err, ApiError::Decode { command, detail } if command == "listZones" && detail == detail_expected),
                "{err:?}"
            );
        }
    }

    #[tokio::test]
    async fn list_reports_a_bad_row() {
        let script = Scripted::new(vec![ok(
            json!({"listzonesresponse": {"count": 2, "zone": [{"id": "z1"}, {"name": "no id"}]}}),
        )]);
        let client = client(&script, fast_options(500));
        let err = client
            .list::<Row>("listZones", "zone", &[])
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ApiError::Decode { command, detail } if command == "listZones" && detail.starts_with("page 1, `zone` row 1: missing field `id`")),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn request_returns_the_response_object() {
        let script = Scripted::new(vec![ok(
            json!({"addannotationresponse": {"annotation": {"id": "a1"}}}),
        )]);
        let client = client(&script, fast_options(500));
        let answer = client
            .request("addAnnotation", &[("entitytype", "KUBERNETES_CLUSTER")])
            .await
            .unwrap();
        assert_eq!(answer, json!({"annotation": {"id": "a1"}}));
        assert_eq!(
            script.requests()[0].params,
            [("entitytype".to_string(), "KUBERNETES_CLUSTER".to_string())]
        );
    }

    #[tokio::test]
    async fn transient_failures_are_retried() {
        let script = Scripted::new(vec![
            answer(503, "Service Unavailable"),
            answer(503, "Service Unavailable"),
            ok(json!({"listzonesresponse": {"count": 1, "zone": [{"id": "z1"}]}})),
        ]);
        let client = client(&script, fast_options(500));
        let answer = client.request("listZones", &[]).await.unwrap();
        assert_eq!(answer["zone"][0]["id"], "z1");
        assert_eq!(script.requests().len(), 3);
        assert_eq!(
            client.stats(),
            [
                ("listZones".to_string(), "ok", 1),
                ("listZones".to_string(), "transient", 2),
            ]
        );
    }

    #[tokio::test]
    async fn retries_stop_after_the_last_attempt() {
        let timeout = || {
            Err(TransportError::Timeout {
                url: "u".into(),
                seconds: 1,
            })
        };
        let script = Scripted::new(vec![timeout(), timeout(), timeout()]);
        let client = client(&script, fast_options(500));
        let err = client.request("listZones", &[]).await.unwrap_err();
        assert!(matches!(&err, ApiError::Transport { .. }), "{err:?}");
        assert_eq!(script.requests().len(), 3);
        assert_eq!(client.stats(), [("listZones".to_string(), "transient", 3)]);
    }

    /// A fence that says yes `allowed` times, then no.
    struct Allowing(std::sync::atomic::AtomicUsize);

    impl Fence for Allowing {
        fn holds(&self) -> futures::future::BoxFuture<'_, bool> {
            let left = self.0.load(std::sync::atomic::Ordering::SeqCst);
            if left > 0 {
                self.0.store(left - 1, std::sync::atomic::Ordering::SeqCst);
            }
            Box::pin(async move { left > 0 })
        }
    }

    #[tokio::test]
    async fn a_fenced_client_sends_no_change_once_the_fence_says_no_retries_included() {
        let failing =
            r#"{"addannotationresponse":{"uuidList":[],"errorcode":503,"errortext":"busy"}}"#;
        let script = Scripted::new(vec![answer(503, failing), answer(503, failing)]);
        let writer = client(&script, fast_options(500));
        // The first attempt is let through; the retry after it is not.
        writer.fence_with(Arc::new(Allowing(1.into())));
        let err = writer
            .request("addAnnotation", &[("annotation", "a")])
            .await
            .unwrap_err();
        assert!(matches!(err, ApiError::Fenced { .. }), "{err:?}");
        assert_eq!(script.requests().len(), 1);
        // Reads are not fenced.
        let script = Scripted::new(vec![answer(200, r#"{"listalertsresponse":{}}"#)]);
        let reader = client(&script, fast_options(500));
        reader.fence_with(Arc::new(Allowing(0.into())));
        assert!(reader.request("listAlerts", &[]).await.is_ok());
        assert_eq!(script.requests().len(), 1);
    }

    #[tokio::test]
    async fn cloudstack_errors_are_not_retried() {
        let script = Scripted::new(vec![answer(
            530,
            r#"{"listkubernetesclustersresponse":{"uuidList":[],"errorcode":530,"cserrorcode":4250,"errortext":"Kubernetes Service plugin is disabled"}}"#,
        )]);
        let client = client(&script, fast_options(500));
        let err = client
            .request("listKubernetesClusters", &[])
            .await
            .unwrap_err();
        assert_eq!(err.code(), Some(530));
        assert_eq!(script.requests().len(), 1);
        assert_eq!(
            client.stats(),
            [("listKubernetesClusters".to_string(), "error", 1)]
        );
    }

    #[tokio::test]
    async fn unauthorized_is_not_retried() {
        let script = Scripted::new(vec![answer(
            401,
            r#"{"listzonesresponse":{"uuidList":[],"errorcode":401,"errortext":"unable to verify user credentials and/or request signature"}}"#,
        )]);
        let client = client(&script, fast_options(500));
        let err = client.request("listZones", &[]).await.unwrap_err();
        assert!(matches!(&err, ApiError::Unauthorized { .. }), "{err:?}");
        assert_eq!(script.requests().len(), 1);
    }

    #[tokio::test]
    async fn other_transport_errors_are_not_retried() {
        let script = Scripted::new(vec![Err(TransportError::Other {
            url: "u".into(),
            source: Box::new(std::io::Error::other("tls handshake failed")),
        })]);
        let client = client(&script, fast_options(500));
        let err = client.request("listZones", &[]).await.unwrap_err();
        assert!(!err.is_transient());
        assert_eq!(script.requests().len(), 1);
    }

    fn job(status: u64, result: Option<Value>) -> Result<RawResponse, TransportError> {
        let mut body = json!({"jobid": "job-1", "jobstatus": status});
        if let Some(result) = result {
            body["jobresult"] = result;
        }
        ok(json!({ "queryasyncjobresultresponse": body }))
    }

    fn submitted() -> Result<RawResponse, TransportError> {
        ok(json!({"generatealertresponse": {"jobid": "job-1"}}))
    }

    #[tokio::test]
    async fn async_job_success_returns_its_result() {
        let script = Scripted::new(vec![
            submitted(),
            job(0, None),
            job(0, None),
            job(1, Some(json!({"success": true}))),
        ]);
        let client = client(&script, fast_options(500));
        let result = client
            .request_async("generateAlert", &[("type", "1000")])
            .await
            .unwrap();
        assert_eq!(result, json!({"success": true}));
        let requests = script.requests();
        assert_eq!(requests.len(), 4);
        assert_eq!(requests[0].command, "generateAlert");
        for poll in &requests[1..] {
            assert_eq!(poll.command, "queryAsyncJobResult");
            assert_eq!(poll.params, [("jobid".to_string(), "job-1".to_string())]);
        }
        assert_eq!(
            client.stats(),
            [
                ("generateAlert".to_string(), "ok", 1),
                ("queryAsyncJobResult".to_string(), "ok", 3),
            ]
        );
    }

    #[tokio::test]
    async fn async_job_failure_carries_code_and_text() {
        let script = Scripted::new(vec![
            submitted(),
            job(
                2,
                Some(json!({"errorcode": 530, "errortext": "Failed to generate alert"})),
            ),
        ]);
        let client = client(&script, fast_options(500));
        let err = client
            .request_async("generateAlert", &[])
            .await
            .unwrap_err();
        match &err {
            ApiError::AsyncJobFailed {
                command,
                job_id,
                code,
                text,
            } => {
                assert_eq!(command, "generateAlert");
                assert_eq!(job_id, "job-1");
                assert_eq!(*code, Some(530));
                assert_eq!(text, "Failed to generate alert");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(err.code(), Some(530));
    }

    #[tokio::test]
    async fn async_job_gives_up_at_the_deadline() {
        let mut options = fast_options(500);
        options.async_poll_interval = Duration::from_millis(2);
        options.async_deadline = Duration::from_millis(5);
        // More pending answers than the deadline allows polls.
        let mut answers = vec![submitted()];
        answers.extend((0..100).map(|_| job(0, None)));
        let script = Scripted::new(answers);
        let client = client(&script, options);
        let err = client
            .request_async("generateAlert", &[])
            .await
            .unwrap_err();
        match &err {
            ApiError::AsyncJobTimeout {
                command,
                job_id,
                waited,
            } => {
                assert_eq!(command, "generateAlert");
                assert_eq!(job_id, "job-1");
                assert!(*waited >= Duration::from_millis(5), "{waited:?}");
            }
            other => panic!("{other:?}"),
        }
        let polls = script.requests().len() - 1;
        assert!((1..100).contains(&polls), "{polls}");
    }

    #[tokio::test]
    async fn async_answer_without_jobid_is_a_decode_error() {
        let script = Scripted::new(vec![ok(json!({"generatealertresponse": {}}))]);
        let client = client(&script, fast_options(500));
        let err = client
            .request_async("generateAlert", &[])
            .await
            .unwrap_err();
        assert!(matches!(&err, ApiError::Decode { .. }), "{err:?}");
    }

    #[test]
    fn default_options() {
        let options = ClientOptions::default();
        assert_eq!(options.page_size, 500);
        assert_eq!(options.page_concurrency, 4);
        assert_eq!(options.retry.attempts, 3);
        assert_eq!(options.async_poll_interval, Duration::from_secs(2));
        assert_eq!(options.async_deadline, Duration::from_secs(120));
    }
}
