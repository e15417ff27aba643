//! One oversized answer: a server on 127.0.0.1 answers every request with a
//! `listVirtualMachines` page of N MiB (default 60) whose rows are all `0`, valid JSON that is
//! no page. The real client reads it; printed are the error, the wall time and the process's
//! peak memory (`cargo bench --bench oversized [-- N]`). The server streams the answer from
//! one shared chunk, so the peak is the client's: the answer it holds and what it builds to
//! explain it. Tests of the error itself belong to the tests, not here.

use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::Response;
use axum::routing::any;
use cks_drift::cloudstack::client::Client;
use cks_drift::cloudstack::model::VirtualMachine;
use cks_drift::config::{CloudStackSettings, Secret};

const HEAD: &str = r#"{"listvirtualmachinesresponse":{"count":1,"virtualmachine":["#;
const TAIL: &str = "0]}}";
const CHUNK: usize = 1024 * 1024;

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

/// The answer: `HEAD`, `mib` chunks of `0,`, `TAIL`, with its length announced.
fn answer(mib: usize) -> Response {
    let chunk = Bytes::from("0,".repeat(CHUNK / 2));
    let parts = std::iter::once(Bytes::from_static(HEAD.as_bytes()))
        .chain(std::iter::repeat_n(chunk, mib))
        .chain(std::iter::once(Bytes::from_static(TAIL.as_bytes())));
    let length = HEAD.len() + mib * CHUNK + TAIL.len();
    let stream = futures::stream::iter(parts.map(Ok::<_, std::io::Error>));
    Response::builder()
        .header(header::CONTENT_TYPE, "application/json; charset=UTF-8")
        .header(header::CONTENT_LENGTH, length)
        .body(Body::from_stream(stream))
        .expect("a valid response")
}

#[tokio::main]
async fn main() {
    let mib: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(60);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1");
    let addr = listener.local_addr().expect("local address");
    let app = Router::new().route("/client/api", any(move || async move { answer(mib) }));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let client = Client::new(&CloudStackSettings {
        url: format!("http://{addr}/client/api"),
        api_key: Secret::new("k"),
        secret_key: Secret::new("s"),
        timeout: Duration::from_secs(120),
        ca_file: None,
        insecure: false,
        page_size: 500,
    })
    .expect("a client");
    let before = peak_rss_mib();
    let started = Instant::now();
    let result = client
        .list::<VirtualMachine>("listVirtualMachines", "virtualmachine", &[])
        .await;
    let wall = started.elapsed();
    let error = match result {
        Ok(rows) => format!("read as {} rows", rows.len()),
        Err(e) => e.to_string(),
    };
    println!("answer: {mib} MiB of `0,` rows");
    println!("result: {error}");
    println!("wall: {:.2} s", wall.as_secs_f64());
    println!(
        "peak RSS: {:.1} MiB (before the request: {before:.1} MiB)",
        peak_rss_mib()
    );
}
