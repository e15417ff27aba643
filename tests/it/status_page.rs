//! The endpoint's status page and read-only API, served by `run` against the fake CloudStack
//! and a real sshd: what they show of the last cycle, a hostile cluster name shown as text,
//! the headers, the paging bounds, and that opening them sends nothing to CloudStack.

use std::time::Duration;

use crate::daemon::{Daemon, daemon_config};
use crate::support::cloud::{TestCloud, world_now};
use crate::support::sshd::free_port;

/// A cluster name a tenant chose to run a script in an operator's browser.
pub const HOSTILE: &str = "<img src=x onerror=alert(1)>";

async fn headers(port: u16, path: &str) -> reqwest::header::HeaderMap {
    reqwest::get(format!("http://127.0.0.1:{port}{path}"))
        .await
        .unwrap()
        .headers()
        .clone()
}

/// `run` on its endpoint (a free port) after its first cycle over one cluster named
/// [`HOSTILE`] whose last worker is unmapped: the cloud, the daemon, the cluster's id, the
/// worker's id and the port.
async fn hostile_cluster_checked() -> (TestCloud, Daemon, String, String, u16) {
    let mut world = world_now();
    let owner = world.admin();
    let id = world.add_cluster(HOSTILE, owner, 1, 2, 0);
    let mut cloud = TestCloud::start(world).await;
    cloud.control_node(&id).await;
    let worker = cloud.unmap_last_worker(&id);
    let port = free_port();
    let (config, _) = daemon_config(&cloud, port, "interval = \"1h\"", None);
    let daemon = Daemon::start(cloud.dir.path(), &config, port).await;
    daemon
        .wait_until("a cycle", || async { daemon.ok_cycles().await >= 1.0 })
        .await;
    (cloud, daemon, id, worker, port)
}

#[tokio::test]
async fn the_status_page_and_the_api_show_the_last_cycle_and_escape_tenant_text() {
    let (cloud, daemon, id, worker, port) = hostile_cluster_checked().await;
    let calls = cloud.sim().calls().len();

    let (status, content_type, page) = daemon.get("/").await;
    assert_eq!(
        (status, content_type.as_str()),
        (200, "text/html; charset=utf-8")
    );
    assert!(
        page.contains("&lt;img src=x onerror=alert(1)&gt;"),
        "{page}"
    );
    assert!(!page.contains("<img"), "{page}");
    assert!(!page.contains("<script"), "{page}");
    assert!(
        page.contains("active: this instance holds the lock"),
        "{page}"
    );
    assert!(page.contains("<h2>Open findings (1)</h2>"), "{page}");
    assert!(page.contains(&format!("/clusters/{id}")), "{page}");
    assert!(page.contains("alert raised, annotation raised"), "{page}");
    let h = headers(port, "/").await;
    let csp = h["content-security-policy"].to_str().unwrap();
    assert!(
        csp.starts_with("default-src 'none'; style-src 'self'"),
        "{csp}"
    );
    assert!(!csp.contains('*'), "{csp}");
    assert_eq!(h["cache-control"], "no-store");
    let (status, content_type, css) = daemon.get("/status.css").await;
    assert_eq!(
        (status, content_type.as_str()),
        (200, "text/css; charset=utf-8")
    );
    assert!(css.contains("table"));

    let (status, _, cluster) = daemon.get(&format!("/clusters/{id}")).await;
    assert_eq!(status, 200, "{cluster}");
    assert!(cluster.contains("<h1 id=\"cluster\">&lt;img src=x onerror=alert(1)&gt;</h1>"));
    assert!(
        cluster.contains("Other VMs named as its nodes"),
        "{cluster}"
    );
    assert!(cluster.contains(&worker), "{cluster}");
    let (status, _, _) = daemon.get("/clusters/no-such-cluster").await;
    assert_eq!(status, 404);

    let (status, content_type, body) = daemon.get("/api/v1/status").await;
    assert_eq!((status, content_type.as_str()), (200, "application/json"));
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["instance"]["role"], "active");
    assert_eq!(v["open_findings"], 1);
    assert_eq!(v["last_cycle"]["counts"]["checked"], 1);

    let (_, _, body) = daemon.get("/api/v1/findings").await;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["total"], 1);
    let f = &v["findings"][0];
    assert_eq!(f["key"], format!("unmapped_vm:{worker}"));
    assert_eq!(f["cluster"], HOSTILE);
    assert_eq!(f["delivery"], "notified");
    assert!(f["since"].is_string());

    let (_, _, body) = daemon.get("/api/v1/clusters?page=1&per_page=10").await;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (v["total"].as_u64(), v["per_page"].as_u64()),
        (Some(1), Some(10))
    );
    assert_eq!(v["clusters"][0]["findings"], 1);
    let (status, _, body) = daemon.get("/api/v1/clusters?per_page=501").await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("per_page is at most 500"), "{body}");
    let (_, _, body) = daemon.get(&format!("/api/v1/clusters/{id}")).await;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["views"]["named"][0]["id"], worker.as_str());
    assert_eq!(v["open_findings"].as_array().map(Vec::len), Some(1));
    let (status, _, _) = daemon.get("/api/v1/clusters/nope").await;
    assert_eq!(status, 404);

    // Opening them asked CloudStack nothing.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(cloud.sim().calls().len(), calls);
}

/// Where a screenshot is kept for people to look at (CI keeps `target/artifacts`).
pub(crate) fn artifact(name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    path
}

/// Headless Chromium (Debian's `chromium`) on `url`: the DOM after the page loaded, with
/// `extra` arguments (a screenshot).
pub(crate) fn chromium(url: &str, extra: &[String]) -> String {
    let profile = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--window-size=1280,900",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg("--dump-dom")
        .arg(url)
        .output()
        .expect("run chromium (Debian package chromium)");
    assert!(
        out.status.success(),
        "chromium: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test]
async fn a_browser_shows_the_findings_and_the_hostile_name_as_text_and_runs_no_script() {
    // The cloud and the daemon stay up while the browser reads the pages.
    let (_cloud, _daemon, id, worker, port) = hostile_cluster_checked().await;
    let shot = artifact("status-page.png");
    let shot_path = shot.clone();
    let url = format!("http://127.0.0.1:{port}/");
    let dom = tokio::task::spawn_blocking(move || {
        chromium(&url, &[format!("--screenshot={}", shot.display())])
    })
    .await
    .unwrap();
    assert!(dom.contains("&lt;img src=x onerror=alert(1)&gt;"), "{dom}");
    // No element came of the name, so no handler of it could run; the page has no script.
    assert!(!dom.contains("<img"), "{dom}");
    assert!(!dom.contains("<script"), "{dom}");
    assert!(dom.contains("unmapped_vm"), "{dom}");
    assert!(dom.contains("alert raised, annotation raised"), "{dom}");
    assert!(shot_path.metadata().unwrap().len() > 1000, "no screenshot");
    let url = format!("http://127.0.0.1:{port}/clusters/{id}");
    let shot = artifact("cluster-page.png");
    let dom = tokio::task::spawn_blocking(move || {
        chromium(&url, &[format!("--screenshot={}", shot.display())])
    })
    .await
    .unwrap();
    assert!(dom.contains("Other VMs named as its nodes"), "{dom}");
    assert!(dom.contains(&worker), "{dom}");
    assert!(!dom.contains("<img"), "{dom}");
}

#[tokio::test]
async fn an_endpoint_with_tls_and_basic_auth_asks_every_path_but_an_open_healthz() {
    let (cloud, _id) = crate::support::cloud::one_cluster().await;
    let pki = tempfile::tempdir().unwrap();
    let ca = crate::support::pki::TestCa::new(pki.path());
    let (cert, key) = ca.server("endpoint", "127.0.0.1", &["IP:127.0.0.1"]);
    let hash = bcrypt::hash("right horse battery", 4).unwrap();
    let port = free_port();
    let (config, text) = daemon_config(&cloud, port, "interval = \"1h\"", None);
    let text = text.replace(
        "[http]\n",
        &format!(
            "[http]\ntls_cert_file = \"{}\"\ntls_key_file = \"{}\"\n\
             basic_auth_users = [\"prometheus:{hash}\"]\nhealthz_without_auth = true\n",
            cert.display(),
            key.display()
        ),
    );
    std::fs::write(&config, text).unwrap();
    let daemon = Daemon::start(cloud.dir.path(), &config, port).await;
    let ca_pem = std::fs::read(ca.path("ca.pem")).unwrap();
    let client = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(&ca_pem).unwrap()])
        .build()
        .unwrap();
    let url = |path: &str| format!("https://127.0.0.1:{port}{path}");

    let healthz = client.get(url("/healthz")).send().await.unwrap();
    assert_eq!(healthz.status(), 200);
    for path in ["/metrics", "/", "/api/v1/status"] {
        let refused = client.get(url(path)).send().await.unwrap();
        assert_eq!(refused.status(), 401, "{path}");
        assert_eq!(
            refused.headers()["www-authenticate"],
            "Basic realm=\"cks-drift\""
        );
        let wrong = client
            .get(url(path))
            .basic_auth("prometheus", Some("wrong"))
            .send()
            .await
            .unwrap();
        assert_eq!(wrong.status(), 401, "{path}");
        let right = client
            .get(url(path))
            .basic_auth("prometheus", Some("right horse battery"))
            .send()
            .await
            .unwrap();
        assert_eq!(right.status(), 200, "{path}");
    }
    // SIGHUP reads the files and the users again: a renewed certificate (here from another
    // CA) and another user are taken without a restart.
    let pki2 = tempfile::tempdir().unwrap();
    let ca2 = crate::support::pki::TestCa::new(pki2.path());
    let (cert2, key2) = ca2.server("endpoint", "127.0.0.1", &["IP:127.0.0.1"]);
    std::fs::copy(&cert2, &cert).unwrap();
    std::fs::copy(&key2, &key).unwrap();
    let text = std::fs::read_to_string(&config).unwrap();
    let hash2 = bcrypt::hash("another horse", 4).unwrap();
    std::fs::write(
        &config,
        text.replace(&format!("prometheus:{hash}"), &format!("grafana:{hash2}")),
    )
    .unwrap();
    daemon.signal("HUP");
    let ca2_pem = std::fs::read(ca2.path("ca.pem")).unwrap();
    let renewed = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(&ca2_pem).unwrap()])
        .build()
        .unwrap();
    daemon
        .wait_until("the renewed certificate served", || async {
            renewed
                .get(url("/metrics"))
                .basic_auth("grafana", Some("another horse"))
                .send()
                .await
                .is_ok_and(|r| r.status() == 200)
        })
        .await;
    let old_user = renewed
        .get(url("/metrics"))
        .basic_auth("prometheus", Some("right horse battery"))
        .send()
        .await
        .unwrap();
    assert_eq!(old_user.status(), 401);
    // A new connection trusting only the first CA is refused (connections made before keep
    // the session they have).
    let first_ca_only = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(&ca_pem).unwrap()])
        .build()
        .unwrap();
    assert!(
        first_ca_only.get(url("/healthz")).send().await.is_err(),
        "the old certificate is still served"
    );
    assert!(
        daemon
            .log()
            .contains("the endpoint's TLS files and users are read again")
    );

    // Plain HTTP on the TLS port gets no answer.
    let plain = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}/healthz"))
        .timeout(Duration::from_secs(8))
        .send()
        .await;
    assert!(plain.is_err() || plain.unwrap().status() != 200);
}
