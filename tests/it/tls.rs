//! TLS to the management server against a real TLS server (`openssl s_server` on 127.0.0.1)
//! with a private CA: verified by default, trusted through `cloudstack.ca_file`, skipped only
//! with `insecure`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cks_drift::cloudstack::client::Client;
use cks_drift::cloudstack::error::ApiError;
use cks_drift::config::{CloudStackSettings, Secret};

use crate::support::cloud::binary;
use crate::support::pki::{TestCa, openssl};
use crate::support::sshd::{KeyKind, free_port, keygen};

/// A CA and a leaf for 127.0.0.1 signed by it, as an operator would issue them.
fn make_pki(dir: &Path) {
    TestCa::new(dir).server("leaf", "127.0.0.1", &["IP:127.0.0.1"]);
}

struct TlsServer {
    child: Child,
    port: u16,
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `openssl s_server -www`: completes the handshake and answers any request with an HTML
/// status page (so a request that gets through TLS fails later, as not JSON).
fn serve(dir: &Path) -> TlsServer {
    let port = free_port();
    let child = Command::new("openssl")
        .args([
            "s_server",
            "-quiet",
            "-www",
            "-accept",
            &format!("127.0.0.1:{port}"),
            "-cert",
            "leaf.pem",
            "-key",
            "leaf.key",
        ])
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start openssl s_server");
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "s_server not listening"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    TlsServer { child, port }
}

fn settings(port: u16, ca_file: Option<&Path>, insecure: bool) -> CloudStackSettings {
    CloudStackSettings {
        url: format!("https://127.0.0.1:{port}/client/api"),
        api_key: Secret::new("k"),
        secret_key: Secret::new("s"),
        timeout: Duration::from_secs(5),
        ca_file: ca_file.map(Path::to_path_buf),
        insecure,
        page_size: 500,
    }
}

fn chain(e: &dyn std::error::Error) -> String {
    cks_drift::base::error_chain::error_chain(e)
}

#[tokio::test]
async fn tls_is_verified_and_a_private_ca_can_be_trusted() {
    let dir = tempfile::tempdir().unwrap();
    make_pki(dir.path());
    let server = serve(dir.path());

    // Verified by default: the private CA is unknown, the handshake fails.
    let client = Client::new(&settings(server.port, None, false)).unwrap();
    let err = client.request("listZones", &[]).await.unwrap_err();
    let text = chain(&err);
    assert!(matches!(err, ApiError::Transport { .. }), "{text}");
    assert!(text.to_lowercase().contains("certificate"), "{text}");

    // With the CA as ca_file the handshake succeeds: the request reaches HTTP, and the
    // status page that comes back is not a CloudStack answer.
    let client = Client::new(&settings(
        server.port,
        Some(&dir.path().join("ca.pem")),
        false,
    ))
    .unwrap();
    let err = client.request("listZones", &[]).await.unwrap_err();
    assert!(
        matches!(err, ApiError::Decode { .. } | ApiError::Http { .. }),
        "{}",
        chain(&err)
    );

    // insecure skips verification.
    let client = Client::new(&settings(server.port, None, true)).unwrap();
    let err = client.request("listZones", &[]).await.unwrap_err();
    assert!(
        matches!(err, ApiError::Decode { .. } | ApiError::Http { .. }),
        "{}",
        chain(&err)
    );
}

/// A self-signed certificate with the CA flag on, as a plain `openssl req -x509` makes it,
/// pinned as `ca_file`: refused all the same, and `check` says in one line what to do instead,
/// without the TLS library's own ERROR lines.
#[tokio::test]
async fn a_self_signed_ca_certificate_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    openssl(
        dir.path(),
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "leaf.key",
            "-out",
            "leaf.pem",
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
    );
    let server = serve(dir.path());
    let d = dir.path().display();
    let key = keygen(&dir.path().join("id_ed25519"), KeyKind::Ed25519);
    let config = dir.path().join("cks-drift.toml");
    std::fs::write(
        &config,
        format!(
            "[cloudstack]\nurl = \"https://127.0.0.1:{port}/client/api\"\napi_key = \"k\"\n\
             secret_key = \"s\"\nca_file = \"{d}/leaf.pem\"\ntimeout = \"5s\"\n\
             [ssh]\nprivate_key = \"{key}\"\nknown_hosts = \"{d}/known_hosts\"\n\
             [state]\npath = \"{d}/state.json\"\n",
            port = server.port,
            key = key.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(binary())
            .args(["check", "-c", config.to_str().unwrap(), "--no-notify"])
            .env_remove("RUST_LOG")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    // The listings run at once: whichever fails first is named.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let (listing, said) = stderr
        .strip_prefix("cks-drift: cannot list ")
        .and_then(|rest| rest.split_once(": "))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        ["Kubernetes clusters", "virtual machines", "networks"].contains(&listing),
        "{stderr}"
    );
    assert_eq!(
        said,
        format!(
            "TLS with 127.0.0.1:{} failed: invalid \
             peer certificate: CaUsedAsEndEntity; the management server presents a CA \
             certificate (CA:TRUE) as its own, which is refused even when it is given as \
             cloudstack.ca_file; give the server a certificate signed by a private CA and set \
             cloudstack.ca_file to that CA, or a self-signed certificate with the CA flag off \
             (basicConstraints CA:FALSE) and a subjectAltName for 127.0.0.1; as a last resort, \
             cloudstack.insecure = true skips verification (TLS)\n",
            server.port
        )
    );
}
