//! A real Alertmanager (Debian's `prometheus-alertmanager`) started for one test: its own
//! config and data folder, on a free loopback port, clustering off; stopped when dropped.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::sshd::free_port;

pub const BINARY: &str = "/usr/bin/prometheus-alertmanager";

pub struct Alertmanager {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
}

impl Alertmanager {
    /// Starts one that routes everything to a receiver that sends nothing, grouping by
    /// cluster, and waits until it is ready.
    pub async fn start() -> Alertmanager {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("alertmanager.yml");
        std::fs::write(
            &config,
            "route:\n  receiver: nobody\n  group_by: [cluster]\n  group_wait: 1s\nreceivers:\n  - name: nobody\n",
        )
        .unwrap();
        let port = free_port();
        let child = spawn(&config, dir.path(), port);
        let am = Alertmanager {
            child: Some(child),
            port,
            dir,
        };
        am.wait_ready().await;
        am
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    async fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        let client = reqwest::Client::new();
        loop {
            let ready = client
                .get(format!("{}/-/ready", self.url()))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if ready {
                return;
            }
            assert!(Instant::now() < deadline, "alertmanager not ready in 20 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `GET /api/v2/alerts` (active, silenced and inhibited alike).
    pub async fn alerts(&self) -> Vec<Value> {
        reqwest::get(format!("{}/api/v2/alerts", self.url()))
            .await
            .unwrap()
            .json::<Vec<Value>>()
            .await
            .unwrap()
    }

    /// Silences, for an hour, the alerts whose `label` equals `value`.
    pub async fn silence(&self, label: &str, value: &str) {
        let now = chrono_like_now();
        let body = serde_json::json!({
            "matchers": [{"name": label, "value": value, "isRegex": false, "isEqual": true}],
            "startsAt": now.0,
            "endsAt": now.1,
            "createdBy": "test",
            "comment": "test silence",
        });
        let r = reqwest::Client::new()
            .post(format!("{}/api/v2/silences", self.url()))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{:?}", r.text().await);
    }

    /// Starts it again after `stop`, on the same port, with the same config and data.
    pub async fn restart(&mut self) {
        let config = self.dir.path().join("alertmanager.yml");
        self.child = Some(spawn(&config, self.dir.path(), self.port));
        self.wait_ready().await;
    }

    /// Stops it (a test of an Alertmanager that is down).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Alertmanager {
    fn drop(&mut self) {
        self.stop();
    }
}

fn spawn(config: &Path, data: &Path, port: u16) -> Child {
    Command::new(BINARY)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.path={}", data.display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--cluster.listen-address=")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot start {BINARY} (apt install prometheus-alertmanager): {e}")
        })
}

/// Now and an hour on, in RFC 3339.
fn chrono_like_now() -> (String, String) {
    let now = cks_drift::base::time::Timestamp::now();
    (
        now.to_string(),
        now.plus(Duration::from_secs(3600)).to_string(),
    )
}

/// A hostile Alertmanager on 127.0.0.1 (not the real one): every request is answered HTTP 500
/// with a chunked body that starts `{"error":"overloaded"}` and never ends, written as fast as
/// the connection takes it. Its URL.
pub async fn endless_error_body() -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = [0u8; 16 * 1024];
                let _ = stream.read(&mut request).await;
                let first = b"{\"error\":\"overloaded\"}";
                let mut start = b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
                start.extend_from_slice(format!("{:x}\r\n", first.len()).as_bytes());
                start.extend_from_slice(first);
                start.extend_from_slice(b"\r\n");
                let data = vec![b'x'; 64 * 1024];
                let mut chunk = format!("{:x}\r\n", data.len()).into_bytes();
                chunk.extend_from_slice(&data);
                chunk.extend_from_slice(b"\r\n");
                if stream.write_all(&start).await.is_err() {
                    return;
                }
                while stream.write_all(&chunk).await.is_ok() {}
            });
        }
    });
    url
}
