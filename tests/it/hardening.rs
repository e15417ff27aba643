//! What a hostile or broken world cannot do to cks-drift: a server that redirects the signed
//! request elsewhere, answers without end or with a page too large to explain whole, files
//! swapped for symlinks, risky settings that run silently.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use cks_drift::cloudstack::client::Client;
use cks_drift::cloudstack::error::ApiError;
use cks_drift::cloudstack::model::VirtualMachine;
use cks_drift::cloudstack::transport::TransportError;
use cks_drift::config::{CloudStackSettings, Secret};

use crate::support::cloud::one_cluster;

/// Serves `app` on 127.0.0.1; returns its base URL.
async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}")
}

fn client(url: &str) -> Client {
    Client::new(&CloudStackSettings {
        url: url.to_string(),
        api_key: Secret::new("k"),
        secret_key: Secret::new("s"),
        timeout: Duration::from_secs(10),
        ca_file: None,
        insecure: false,
        page_size: 500,
    })
    .unwrap()
}

#[tokio::test]
async fn a_redirect_is_never_followed() {
    // Where a redirect would take the signed request: it must never see one.
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    let elsewhere = serve(Router::new().route(
        "/{*path}",
        any(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            async { "{}" }
        }),
    ))
    .await;
    let target = format!("{elsewhere}/client/api");
    let redirecting = serve(Router::new().route(
        "/client/api",
        any(move || {
            let target = target.clone();
            async move { (StatusCode::FOUND, [(header::LOCATION, target)], "").into_response() }
        }),
    ))
    .await;
    let api = client(&format!("{redirecting}/client/api"));
    for command in ["listKubernetesClusters", "addAnnotation"] {
        let err = api.request(command, &[("id", "x")]).await.unwrap_err();
        assert!(
            matches!(err, ApiError::Http { status: 302, .. }),
            "{command}: {err:?}"
        );
    }
    assert_eq!(seen.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn an_answer_without_end_is_cut_at_the_bound() {
    let endless = serve(Router::new().route(
        "/client/api",
        any(|| async {
            // 1 MiB chunks, 65 of them: one past the bound.
            let chunk = vec![b' '; 1024 * 1024];
            let chunks = (0..65).map(move |_| Ok::<_, std::io::Error>(chunk.clone()));
            Response::new(Body::from_stream(futures::stream::iter(chunks)))
        }),
    ))
    .await;
    let err = client(&format!("{endless}/client/api"))
        .request("listZones", &[])
        .await
        .unwrap_err();
    match err {
        ApiError::Transport {
            source: TransportError::TooLarge { limit, .. },
            ..
        } => assert_eq!(limit, 64 * 1024 * 1024),
        other => panic!("expected TooLarge, got {other:?}"),
    }
}

#[tokio::test]
async fn an_oversized_page_that_is_no_page_is_explained_without_reading_it_into_a_tree() {
    // 60 MiB of rows that are no VMs, valid JSON: read into a JSON tree to explain it, it
    // took 1 GiB (`cargo bench --bench oversized` measures it).
    const HEAD: &str = r#"{"listvirtualmachinesresponse":{"count":1,"virtualmachine":["#;
    let chunk = axum::body::Bytes::from("0,".repeat(512 * 1024));
    let length = HEAD.len() + 60 * chunk.len() + 4;
    let server = serve(Router::new().route(
        "/client/api",
        any(move || {
            let parts = std::iter::once(axum::body::Bytes::from_static(HEAD.as_bytes()))
                .chain(std::iter::repeat_n(chunk.clone(), 60))
                .chain(std::iter::once(axum::body::Bytes::from_static(b"0]}}")));
            let stream = futures::stream::iter(parts.map(Ok::<_, std::io::Error>));
            async move {
                Response::builder()
                    .header(header::CONTENT_LENGTH, length)
                    .body(Body::from_stream(stream))
                    .unwrap()
            }
        }),
    ))
    .await;
    let err = client(&format!("{server}/client/api"))
        .list::<VirtualMachine>("listVirtualMachines", "virtualmachine", &[])
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "cannot read the answer to cloudstack command listVirtualMachines: page 1 (an answer of {length} bytes) is not a list of `virtualmachine`: invalid type: integer `0`, expected struct VirtualMachine at line 1 column {}",
            HEAD.len() + 1
        )
    );
}

#[tokio::test]
async fn files_swapped_for_symlinks_are_not_written_through() {
    let (mut cloud, id) = one_cluster().await;
    let bait = cloud.dir.path().join("bait");
    std::fs::write(&bait, "").unwrap();
    let state_dir = cloud.state_path().parent().unwrap().to_path_buf();
    std::fs::create_dir_all(&state_dir).unwrap();

    // The lock.
    let lock = state_dir.join("state.json.lock");
    std::os::unix::fs::symlink(&bait, &lock).unwrap();
    let run = cloud.check(&[]).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr
            .contains(&format!("cannot open {}", lock.display())),
        "{}",
        run.stderr
    );
    std::fs::remove_file(&lock).unwrap();

    // The event log, with a finding to write.
    cloud.unmap_last_worker(&id);
    std::os::unix::fs::symlink(&bait, cloud.event_log()).unwrap();
    let run = cloud.check(&[]).await;
    assert!(
        run.stderr.contains("cannot append to the event log"),
        "{}",
        run.stderr
    );
    std::fs::remove_file(cloud.event_log()).unwrap();

    // known_hosts.
    let known_hosts = cloud.dir.path().join("known_hosts");
    let _ = std::fs::remove_file(&known_hosts);
    std::os::unix::fs::symlink(&bait, &known_hosts).unwrap();
    cloud.extra = String::new();
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(report["clusters"][0]["status"], "partial", "{run:?}");
    assert!(
        report["clusters"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("known_hosts"),
        "{report}"
    );
    assert_eq!(
        std::fs::read_to_string(&bait).unwrap(),
        "",
        "bait untouched"
    );
}

#[tokio::test]
async fn risky_settings_are_warned_at_start() {
    let (mut cloud, _) = one_cluster().await;
    cloud.extra = String::new();
    let config = cloud.write_config();
    // The API key in a file anybody may read.
    let key_file = cloud.dir.path().join("apikey");
    std::fs::write(&key_file, "AK").unwrap();
    std::fs::set_permissions(
        &key_file,
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    let text = std::fs::read_to_string(&config).unwrap();
    let api_key = text
        .lines()
        .find(|l| l.starts_with("api_key = "))
        .unwrap()
        .to_string();
    std::fs::write(
        &key_file,
        api_key.trim_start_matches("api_key = ").trim_matches('"'),
    )
    .unwrap();
    let text = text
        .replace(
            "host_key_policy = \"accept-new\"",
            "host_key_policy = \"off\"",
        )
        .replace(
            &api_key,
            &format!("api_key_file = \"{}\"", key_file.display()),
        );
    std::fs::write(&config, text).unwrap();
    let output = tokio::process::Command::new(crate::support::cloud::binary())
        .args(["check", "--no-notify", "-c"])
        .arg(&config)
        .env_remove("RUST_LOG")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cloudstack.url is a plain http:// URL"),
        "{stderr}"
    );
    assert!(
        stderr.contains("ssh.host_key_policy is \"off\": any host key is accepted"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "cloudstack.api_key_file: {} holds a secret and ",
            key_file.display()
        )) && stderr.contains("(mode 0644)"),
        "{stderr}"
    );
    assert_eq!(output.status.code(), Some(0), "{stderr}");
}

#[tokio::test]
async fn the_event_log_is_created_0640_whatever_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let (cloud, id) = one_cluster().await;
    cloud.unmap_last_worker(&id);
    let config = cloud.write_config();
    // umask 0 would leave a plain create at 0666.
    let output = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "umask 000; exec {} check -c {}",
            crate::support::cloud::binary().display(),
            config.display()
        ))
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let mode = std::fs::metadata(cloud.event_log())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o640);
}
