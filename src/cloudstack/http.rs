//! The real [`Transport`]: sends a request, signed as `request` puts it (a URL for a read, a
//! form body for a change), to the management server over HTTP(S), with TLS and a deadline.
//! It returns the status, and the body as it arrives, up to a bound; what is signed, and how,
//! belongs to `request`, and reading CloudStack's answer to `response`, `pages` and
//! `streamed`.

use std::time::Duration;

use reqwest::header::CONTENT_TYPE;

use super::error::ApiError;
use super::request::{ApiRequest, Signed};
use futures::StreamExt;

use super::transport::{
    Answer, Chunks, RawResponse, StreamedResponse, Transport, TransportError, TransportFuture,
};
use crate::base::time::Timestamp;
use crate::config::{CloudStackSettings, Secret};

/// The most of one answer that is read. CloudStack's largest answers, pages of 500
/// clusters with their VMs, are a few MB. Read, not held: a list page is read into rows as it
/// arrives, and of any other answer at most `response::TREE_BYTES` is kept.
pub const MAX_BODY: usize = 64 * 1024 * 1024;

/// Signs and sends API requests to one management server.
///
/// `Debug` shows the endpoint only: the keys are [`Secret`]s and the signed URL is never kept.
#[derive(Debug)]
pub struct HttpTransport {
    http: reqwest::Client,
    url: String,
    api_key: Secret,
    secret_key: Secret,
    timeout: Duration,
}

impl HttpTransport {
    /// Builds the HTTP client: TLS verified against the system roots plus the optional
    /// `ca_file` bundle, or not at all when `insecure` is set.
    pub fn new(settings: &CloudStackSettings) -> Result<Self, ApiError> {
        if let Err(e) = reqwest::Url::parse(&settings.url) {
            return Err(ApiError::Config {
                key: "cloudstack.url",
                problem: format!("{:?} is not a valid URL ({e})", settings.url),
            });
        }
        // CloudStack's API never redirects. A redirect would carry the signed request (the API
        // key and a valid signature) to wherever it points, so it is never followed: the 3xx
        // answer is an error like any other unexpected answer.
        let builder = client_builder(
            settings.timeout,
            settings.ca_file.as_deref(),
            settings.insecure,
        )?;
        let http = builder.build().map_err(|e| ApiError::Config {
            key: if settings.ca_file.is_some() {
                "cloudstack.ca_file"
            } else {
                "cloudstack"
            },
            problem: format!("cannot build the HTTPS client: {e}"),
        })?;
        Ok(HttpTransport {
            http,
            url: settings.url.clone(),
            api_key: settings.api_key.clone(),
            secret_key: settings.secret_key.clone(),
            timeout: settings.timeout,
        })
    }

    async fn send_signed(&self, request: ApiRequest) -> Result<Answer, TransportError> {
        let signed = request.signed(
            &self.url,
            self.api_key.expose(),
            self.secret_key.expose(),
            Timestamp::now(),
        );
        let builder = match signed {
            Signed::Get { url } => self.http.get(url),
            Signed::Post { body } => self
                .http
                .post(&self.url)
                .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(body),
        };
        let response = builder
            .send()
            .await
            .map_err(|e| transport_error(&self.url, self.timeout, e))?;
        let status = response.status().as_u16();
        // An answer that ends within WHOLE_MAX (every page CloudStack sends: a few MB at
        // most) is read whole and parsed from memory, which costs a fraction of the CPU of
        // reading it as a stream; past that, it goes on as a stream, so that a huge one is
        // never held.
        // Sized from `Content-Length` where the server sends it: a buffer grown by doubling
        // holds the old and the new one at once, and keeps up to half of it unused.
        let announced = response
            .content_length()
            .and_then(|n| usize::try_from(n).ok());
        let mut body: Vec<u8> = Vec::with_capacity(announced.map_or(0, |n| n.min(WHOLE_MAX + 1)));
        let mut rest = chunks(response, self.url.clone(), self.timeout);
        while body.len() <= WHOLE_MAX {
            match rest.next().await {
                Some(chunk) => body.extend_from_slice(&chunk?),
                None => {
                    // Valid UTF-8 (every answer CloudStack sends) becomes the string without
                    // a copy.
                    let body = String::from_utf8(body)
                        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
                    return Ok(Answer::Whole(RawResponse { status, body }));
                }
            }
        }
        let read = futures::stream::once(async move { Ok(body) });
        Ok(Answer::Streamed(StreamedResponse {
            status,
            chunks: Box::pin(read.chain(rest)),
        }))
    }
}

/// The most of an answer read whole before the rest is read as a stream.
pub const WHOLE_MAX: usize = 4 * 1024 * 1024;

/// The body of `response` as it arrives, ended by [`TransportError::TooLarge`] once it goes
/// past [`MAX_BODY`]: the reader decides what to hold of it, and the bound holds whatever it
/// holds. The request's deadline covers the body too.
fn chunks(response: reqwest::Response, url: String, timeout: Duration) -> Chunks {
    let state = Some((response, 0usize));
    Box::pin(futures::stream::unfold(state, move |state| {
        let url = url.clone();
        async move {
            let (mut response, read) = state?;
            match response.chunk().await {
                Ok(None) => None,
                Ok(Some(chunk)) if read + chunk.len() > MAX_BODY => Some((
                    Err(TransportError::TooLarge {
                        url,
                        limit: MAX_BODY,
                    }),
                    None,
                )),
                Ok(Some(chunk)) => {
                    let read = read + chunk.len();
                    Some((Ok(chunk.to_vec()), Some((response, read))))
                }
                Err(e) => Some((Err(transport_error(&url, timeout, e)), None)),
            }
        }
    }))
}

/// Maps a reqwest error without its URL: a GET URL carries the API key and signature.
fn transport_error(url: &str, timeout: Duration, e: reqwest::Error) -> TransportError {
    let url = url.to_string();
    if e.is_timeout() {
        TransportError::Timeout {
            url,
            seconds: timeout.as_secs_f64().ceil() as u64,
        }
    } else if e.is_connect() {
        TransportError::Connect {
            url,
            source: Box::new(e.without_url()),
        }
    } else {
        TransportError::Other {
            url,
            source: Box::new(e.without_url()),
        }
    }
}
/// Idle connections kept per host between calls (see `client_builder`).
const IDLE_CONNECTIONS: usize = 2;

/// An HTTPS client builder as every client of cks-drift needs one: no redirect followed (it
/// would carry the credentials elsewhere), the deadline on connect and on the whole request,
/// the system roots plus `ca_file`, or no verification at all with `insecure`.
pub fn client_builder(
    timeout: std::time::Duration,
    ca_file: Option<&std::path::Path>,
    insecure: bool,
) -> Result<reqwest::ClientBuilder, ApiError> {
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(timeout)
        .connect_timeout(timeout)
        // An idle connection keeps the read buffer its largest answer grew (up to about
        // 400 KB): a cycle reads three listings at once, four pages each, and then nothing
        // for as long as the node listings last. Two idle connections are kept, not twelve.
        .pool_max_idle_per_host(IDLE_CONNECTIONS)
        .user_agent(concat!("cks-drift/", env!("CARGO_PKG_VERSION")));
    if let Some(path) = ca_file {
        builder = builder.tls_certs_merge(read_ca_bundle(path)?);
    }
    if insecure {
        builder = builder.tls_danger_accept_invalid_certs(true);
    }
    Ok(builder)
}

/// Reads `cloudstack.ca_file`: a PEM bundle holding at least one certificate.
pub fn read_ca_bundle(path: &std::path::Path) -> Result<Vec<reqwest::Certificate>, ApiError> {
    let config_error = |problem: String| ApiError::Config {
        key: "cloudstack.ca_file",
        problem,
    };
    let pem = std::fs::read(path)
        .map_err(|e| config_error(format!("cannot read CA bundle {}: {e}", path.display())))?;
    let certs = reqwest::Certificate::from_pem_bundle(&pem)
        .map_err(|e| config_error(format!("invalid PEM in CA bundle {}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(config_error(format!(
            "CA bundle {} holds no PEM certificate",
            path.display()
        )));
    }
    Ok(certs)
}

impl Transport for HttpTransport {
    fn send(&self, request: ApiRequest) -> TransportFuture<'_> {
        Box::pin(self.send_signed(request))
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;
    use std::path::PathBuf;
    use std::sync::{Arc, Mutex};

    use axum::Router;
    use axum::extract::State;
    use axum::http::{HeaderMap, StatusCode, Uri};
    use axum::routing::any;
    use futures::StreamExt;
    use percent_encoding::percent_decode_str;

    use super::*;
    use crate::cloudstack::client::Client;
    use crate::cloudstack::sign;

    const API_KEY: &str = "AK-visible-nowhere-1234";
    const SECRET_KEY: &str = "SK/secret+never=shown";

    fn settings(url: String) -> CloudStackSettings {
        CloudStackSettings {
            url,
            api_key: Secret::new(API_KEY),
            secret_key: Secret::new(SECRET_KEY),
            timeout: Duration::from_secs(5),
            ca_file: None,
            insecure: false,
            page_size: 500,
        }
    }

    /// Splits a query string or form body the way the servlet does (`+` is a space).
    fn decode_pairs(s: &str) -> Vec<(String, String)> {
        let decode = |p: &str| {
            percent_decode_str(&p.replace('+', " "))
                .decode_utf8()
                .expect("utf-8")
                .into_owned()
        };
        s.split('&')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
                (decode(name), decode(value))
            })
            .collect()
    }

    /// What the fake management server saw of one request.
    #[derive(Debug, Clone)]
    struct Seen {
        method: String,
        content_type: Option<String>,
        query: String,
        body: String,
        params: Vec<(String, String)>,
    }

    /// Verifies a request like `ApiServer.verifyRequest` and answers with a JSON echo of the
    /// decoded parameters, or 401 when the signature or the keys are wrong.
    async fn verify(
        State(seen): State<Arc<Mutex<Vec<Seen>>>>,
        method: axum::http::Method,
        uri: Uri,
        headers: HeaderMap,
        body: String,
    ) -> (StatusCode, String) {
        let query = uri.query().unwrap_or("").to_string();
        let mut params = decode_pairs(&query);
        params.extend(decode_pairs(&body));
        seen.lock().unwrap().push(Seen {
            method: method.to_string(),
            content_type: headers
                .get("content-type")
                .map(|v| v.to_str().unwrap().to_string()),
            query,
            body,
            params: params.clone(),
        });
        let get = |name: &str| {
            params
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        let expected = sign::signature(SECRET_KEY, &params);
        let expires_ok = get("expires")
            .and_then(|e| Timestamp::parse(&e))
            .is_some_and(|e| {
                let now = Timestamp::now();
                e > now && e <= now.plus(Duration::from_secs(15 * 60))
            });
        let command = get("command").unwrap_or_default().to_lowercase();
        if get("signature").as_deref() != Some(expected.as_str())
            || get("apikey").as_deref() != Some(API_KEY)
            || get("signatureversion").as_deref() != Some("3")
            || get("response").as_deref() != Some("json")
            || !expires_ok
        {
            let body = serde_json::json!({ format!("{command}response"): {
                "uuidList": [], "errorcode": 401,
                "errortext": "unable to verify user credentials and/or request signature"
            }});
            return (StatusCode::UNAUTHORIZED, body.to_string());
        }
        let echo: serde_json::Map<String, serde_json::Value> = params
            .into_iter()
            .map(|(n, v)| (n, serde_json::Value::String(v)))
            .collect();
        let body = serde_json::json!({ format!("{command}response"): { "echo": echo } });
        (StatusCode::OK, body.to_string())
    }

    async fn server() -> (String, Arc<Mutex<Vec<Seen>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let app = Router::new()
            .route("/client/api", any(verify))
            .with_state(seen.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (format!("http://{addr}/client/api"), seen)
    }

    fn request(command: &str, params: &[(&str, &str)]) -> ApiRequest {
        ApiRequest {
            command: command.to_string(),
            params: params
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
        }
    }

    /// A small answer read to its end.
    async fn whole(answer: Answer) -> crate::cloudstack::transport::RawResponse {
        let answer = match answer {
            Answer::Whole(raw) => return raw,
            Answer::Streamed(answer) => answer,
        };
        let mut body = Vec::new();
        let mut chunks = answer.chunks;
        while let Some(chunk) = chunks.next().await {
            body.extend(chunk.unwrap());
        }
        crate::cloudstack::transport::RawResponse {
            status: answer.status,
            body: String::from_utf8(body).unwrap(),
        }
    }

    /// The whole error chain as one string, to look for leaked secrets.
    fn chain(e: &dyn std::error::Error) -> String {
        let mut out = format!("{e} / {e:?}");
        let mut source = e.source();
        while let Some(s) = source {
            out.push_str(&format!(" / {s} / {s:?}"));
            source = s.source();
        }
        out
    }

    #[tokio::test]
    async fn get_for_reads_is_signed_as_the_server_verifies() {
        let (url, seen) = server().await;
        let transport = HttpTransport::new(&settings(url)).unwrap();
        let tricky = "a+b c~d/e*f=g&h";
        let response = transport
            .send(request(
                "listVirtualMachines",
                &[("keyword", tricky), ("listall", "true")],
            ))
            .await
            .unwrap();
        let response = whole(response).await;
        assert_eq!(response.status, 200, "{}", response.body);
        let body: serde_json::Value = serde_json::from_str(&response.body).unwrap();
        let echo = &body["listvirtualmachinesresponse"]["echo"];
        assert_eq!(echo["keyword"], tricky);
        assert_eq!(echo["listall"], "true");
        assert_eq!(echo["command"], "listVirtualMachines");

        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].method, "GET");
        assert_eq!(seen[0].body, "");
        assert!(
            seen[0]
                .query
                .contains("keyword=a%2Bb%20c%7Ed%2Fe*f%3Dg%26h"),
            "{}",
            seen[0].query
        );
        let names: Vec<&str> = seen[0].params.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "command",
                "keyword",
                "listall",
                "apikey",
                "response",
                "signatureversion",
                "expires",
                "signature"
            ]
        );
    }

    #[tokio::test]
    async fn post_for_changes_carries_a_signed_form_body() {
        let (url, seen) = server().await;
        let transport = HttpTransport::new(&settings(url)).unwrap();
        let description = "VM k8s-node-1 ~ missing/expunged + more";
        let response = transport
            .send(request(
                "generateAlert",
                &[
                    ("type", "1000"),
                    ("name", "ALERT.CKS.DRIFT"),
                    ("description", description),
                ],
            ))
            .await
            .unwrap();
        let response = whole(response).await;
        assert_eq!(response.status, 200, "{}", response.body);
        let body: serde_json::Value = serde_json::from_str(&response.body).unwrap();
        assert_eq!(
            body["generatealertresponse"]["echo"]["description"],
            description
        );

        let seen = seen.lock().unwrap();
        assert_eq!(seen[0].method, "POST");
        assert_eq!(seen[0].query, "");
        assert_eq!(
            seen[0].content_type.as_deref(),
            Some("application/x-www-form-urlencoded")
        );
        assert!(
            seen[0].body.starts_with("command=generateAlert&type=1000&"),
            "{}",
            seen[0].body
        );
    }

    #[tokio::test]
    async fn wrong_secret_gets_unauthorized_through_the_client() {
        let (url, _seen) = server().await;
        let mut s = settings(url.clone());
        s.secret_key = Secret::new("not-the-secret");
        let client = Client::new(&s).unwrap();
        let err = client.request("listZones", &[]).await.unwrap_err();
        assert!(
            matches!(&err, ApiError::Unauthorized { url: u, command } if *u == url && command == "listZones"),
            "{err:?}"
        );
        assert_eq!(client.stats(), [("listZones".to_string(), "error", 1)]);
    }

    #[tokio::test]
    async fn client_reads_the_response_object_over_http() {
        let (url, _seen) = server().await;
        let client = Client::new(&settings(url)).unwrap();
        let answer = client
            .request("listZones", &[("name", "zone 1")])
            .await
            .unwrap();
        assert_eq!(answer["echo"]["name"], "zone 1");
    }

    /// A list page is read into rows as it arrives: the rows already sent are kept while the
    /// rest of the page is still to come. Read whole first, a 60 MiB page was held twice (its
    /// text, then its rows) before any row was read.
    #[tokio::test]
    async fn a_page_is_read_into_rows_as_it_arrives() {
        let first_row_kept = Arc::new(tokio::sync::Notify::new());
        let app = Router::new().route(
            "/client/api",
            any({
                let first_row_kept = first_row_kept.clone();
                move || {
                    let first_row_kept = first_row_kept.clone();
                    async move {
                        // Past WHOLE_MAX (spaces before the JSON), so that it is streamed.
                        let head = format!(
                            "{}{}",
                            " ".repeat(WHOLE_MAX + 1),
                            r#"{"listzonesresponse":{"count":2,"zone":[{"id":"z1"},"#
                        );
                        // The rest is sent once the first row is kept; a client that waits
                        // for the whole answer gets another row after 2 s.
                        let rest = async move {
                            let kept = tokio::time::timeout(
                                Duration::from_secs(2),
                                first_row_kept.notified(),
                            )
                            .await;
                            let id = if kept.is_ok() { "z2" } else { "late" };
                            format!(r#"{{"id":"{id}"}}]}}}}"#)
                        };
                        let body = futures::stream::once(async move { head })
                            .chain(futures::stream::once(rest))
                            .map(Ok::<_, std::io::Error>);
                        axum::response::Response::new(axum::body::Body::from_stream(body))
                    }
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let client = Client::new(&settings(format!("http://{addr}/client/api"))).unwrap();
        #[derive(Debug, serde::Deserialize)]
        struct Zone {
            id: String,
        }
        let ids: Vec<String> = client
            .list_map("listZones", "zone", &[], |zone: Zone| {
                if zone.id == "z1" {
                    first_row_kept.notify_one();
                }
                Some(zone.id)
            })
            .await
            .unwrap();
        assert_eq!(ids, ["z1", "z2"]);
    }

    #[tokio::test]
    async fn a_server_that_never_answers_times_out() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // Accepts connections and keeps them open without ever answering.
        let hold = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        let mut s = settings(format!("http://{addr}/client/api"));
        s.timeout = Duration::from_millis(300);
        let transport = HttpTransport::new(&s).unwrap();
        let err = transport.send(request("listZones", &[])).await.unwrap_err();
        assert!(
            matches!(&err, TransportError::Timeout { url, seconds: 1 } if url == &s.url),
            "{err:?}"
        );
        hold.abort();
    }

    #[tokio::test]
    async fn a_closed_port_is_a_connect_error_without_secrets() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let s = settings(format!("http://{addr}/client/api"));
        let transport = HttpTransport::new(&s).unwrap();
        let err = transport.send(request("listZones", &[])).await.unwrap_err();
        assert!(
            matches!(&err, TransportError::Connect { url, .. } if url == &s.url),
            "{err:?}"
        );
        let text = chain(&err);
        assert!(!text.contains(API_KEY), "{text}");
        assert!(!text.contains("signature"), "{text}");
        assert!(!text.contains("AK-visible"), "{text}");
    }

    #[test]
    fn debug_shows_no_keys() {
        let s = settings("http://127.0.0.1:1/client/api".into());
        let transport = HttpTransport::new(&s).unwrap();
        let client = Client::new(&s).unwrap();
        for text in [format!("{transport:?}"), format!("{client:?}")] {
            assert!(text.contains("127.0.0.1:1"), "{text}");
            assert!(!text.contains(API_KEY), "{text}");
            assert!(!text.contains(SECRET_KEY), "{text}");
            assert!(!text.contains("SK/secret"), "{text}");
        }
    }

    #[test]
    fn a_missing_ca_file_names_the_key_and_path() {
        let mut s = settings("https://127.0.0.1:1/client/api".into());
        s.ca_file = Some(PathBuf::from("/nonexistent/cks-drift-ca.pem"));
        let err = HttpTransport::new(&s).unwrap_err();
        assert!(
            matches!(
                &err,
                ApiError::Config {
                    key: "cloudstack.ca_file",
                    ..
                }
            ),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(text.starts_with("cloudstack.ca_file: "), "{text}");
        assert!(text.contains("/nonexistent/cks-drift-ca.pem"), "{text}");
        let err = Client::new(&s).unwrap_err();
        assert!(err.to_string().contains("cloudstack.ca_file"), "{err}");
    }

    #[test]
    fn a_ca_file_without_certificates_is_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, "not a certificate\n").unwrap();
        let mut s = settings("https://127.0.0.1:1/client/api".into());
        s.ca_file = Some(path.clone());
        let err = HttpTransport::new(&s).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "cloudstack.ca_file: CA bundle {} holds no PEM certificate",
                path.display()
            )
        );
        std::fs::write(
            &path,
            "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let err = HttpTransport::new(&s).unwrap_err();
        assert!(
            matches!(&err, ApiError::Config { key: "cloudstack.ca_file", problem } if problem.contains(&path.display().to_string())),
            "{err:?}"
        );
        assert!(err.source().is_none());
    }

    #[test]
    fn a_valid_ca_file_and_insecure_mode_build() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, TEST_CA_PEM).unwrap();
        let mut s = settings("https://127.0.0.1:1/client/api".into());
        s.ca_file = Some(path);
        HttpTransport::new(&s).unwrap();
        s.ca_file = None;
        s.insecure = true;
        HttpTransport::new(&s).unwrap();
    }

    #[test]
    fn an_invalid_url_is_a_config_error() {
        let err = HttpTransport::new(&settings("not a url".into())).unwrap_err();
        assert!(
            matches!(
                &err,
                ApiError::Config {
                    key: "cloudstack.url",
                    ..
                }
            ),
            "{err:?}"
        );
    }

    /// A self-signed CA certificate (`openssl req -x509 -newkey ec`, CA:TRUE, 100 years).
    const TEST_CA_PEM: &str = "\
-----BEGIN CERTIFICATE-----
MIIBjzCCATWgAwIBAgIURNla4OpFXwD+ZgHNEG/87yVhOd4wCgYIKoZIzj0EAwIw
HDEaMBgGA1UEAwwRY2tzLWRyaWZ0IHRlc3QgQ0EwIBcNMjYxMTMwMDAwNzAyWhgP
MjEyNjExMDYwMDA3MDJaMBwxGjAYBgNVBAMMEWNrcy1kcmlmdCB0ZXN0IENBMFkw
EwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEQcGICdADoXVp2T0ga/kV7ehZEYlsPpPZ
GabRYOMjB54tKt39igXHWLOItKIxjyD6yNwuWVICptYPzC0u/1qIfKNTMFEwHQYD
VR0OBBYEFC8wlaZyS60i4+l3idihOELPxcCbMB8GA1UdIwQYMBaAFC8wlaZyS60i
4+l3idihOELPxcCbMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSAAwRQIg
JGebnybmJsvyp6RXJMYhggAPP9PbG20Xja3QVzZb87cCIQClGaPx3ttvihVcsL/i
hxHCwdOE4Zf1n5CHMB27dsx1+w==
-----END CERTIFICATE-----
";
}
