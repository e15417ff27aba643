//! Which sockets systemd passed (pure), which endpoint wins, and binding `http.listen` again
//! while another listener holds it: with real loopback sockets, and under paused time for the
//! waits.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use super::*;
use crate::daemon::http::Health;
use crate::daemon::metrics::Metrics;

fn fd(fd: RawFd, name: &str) -> PassedFd {
    PassedFd {
        fd,
        name: name.into(),
    }
}

#[test]
fn sockets_are_passed_only_to_the_process_listen_pid_names() {
    assert_eq!(passed_fds(42, None, Some("1"), None).unwrap(), []);
    assert_eq!(passed_fds(42, Some("41"), Some("1"), None).unwrap(), []);
    assert_eq!(passed_fds(42, Some("42"), None, None).unwrap(), []);
    assert_eq!(
        passed_fds(42, Some("42"), Some("1"), None).unwrap(),
        [fd(3, "unknown")]
    );
    assert_eq!(
        passed_fds(42, Some("42"), Some("2"), Some("cks-drift.socket:other")).unwrap(),
        [fd(3, "cks-drift.socket"), fd(4, "other")]
    );
}

#[test]
fn what_systemd_never_sets_is_refused_with_the_variable() {
    let refused = |pid: &str, fds: &str, names: Option<&str>| {
        passed_fds(42, Some(pid), Some(fds), names)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        refused("x42", "1", None),
        "LISTEN_PID=\"x42\" is not what systemd sets (sd_listen_fds(3))"
    );
    assert_eq!(
        refused("0", "1", None),
        "LISTEN_PID=\"0\" is not what systemd sets (sd_listen_fds(3))"
    );
    assert_eq!(
        refused("42", "0", None),
        "LISTEN_FDS=\"0\" is not what systemd sets (sd_listen_fds(3))"
    );
    assert_eq!(
        refused("42", "-1", None),
        "LISTEN_FDS=\"-1\" is not what systemd sets (sd_listen_fds(3))"
    );
    assert_eq!(
        refused("42", "2147483645", None),
        "LISTEN_FDS=\"2147483645\" is not what systemd sets (sd_listen_fds(3))"
    );
    assert_eq!(
        refused("42", "2", Some("one")),
        "LISTEN_FDNAMES names 1 sockets, LISTEN_FDS passes 2 (sd_listen_fds(3))"
    );
    // Whoever set the variable chose its text: it is quoted escaped and cut short.
    assert_eq!(
        refused("42", &format!("1\n{}", "9".repeat(100)), None),
        format!(
            "LISTEN_FDS=\"1\\x0a{}…\" is not what systemd sets (sd_listen_fds(3))",
            "9".repeat(34)
        )
    );
}

#[test]
fn the_socket_systemd_passed_wins_over_http_listen() {
    let socket = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = socket.local_addr().unwrap();
    let configured: SocketAddr = "127.0.0.1:9712".parse().unwrap();
    match Endpoint::choose(Passed::Socket(socket), Some(configured)) {
        Some(Endpoint::Listening(l)) => assert_eq!(l.local_addr().unwrap(), addr),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        Endpoint::choose(Passed::Nothing, Some(configured)),
        Some(Endpoint::Bind(a)) if a == configured
    ));
    assert!(Endpoint::choose(Passed::Nothing, None).is_none());
    // A passed socket that cannot be served leaves http.listen.
    let unusable = Passed::Unusable(PassedError::NotListening {
        fd: 3,
        name: "unknown".into(),
    });
    assert!(matches!(
        Endpoint::choose(unusable, Some(configured)),
        Some(Endpoint::Bind(a)) if a == configured
    ));
}

fn shared() -> Arc<Shared> {
    Arc::new(Shared::new(
        Metrics::new(false),
        Health {
            enabled: false,
            interval: Duration::from_secs(60),
            since: Instant::now(),
            last_success: None,
            last_failure: None,
            running_since: None,
            standby: false,
            lock_node: None,
            lock_holder: None,
        },
    ))
}

/// The status line of `GET /healthz` at `addr`, or what came instead within 2 s.
async fn healthz(addr: SocketAddr) -> String {
    let Ok(mut s) = tokio::net::TcpStream::connect(addr).await else {
        return "refused".into();
    };
    let _ = s
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await;
    let mut answer = Vec::new();
    match tokio::time::timeout(Duration::from_secs(2), s.read_to_end(&mut answer)).await {
        Ok(_) => String::from_utf8_lossy(&answer)
            .lines()
            .next()
            .unwrap_or("closed")
            .to_string(),
        Err(_) => "no answer".into(),
    }
}

#[tokio::test]
async fn a_port_held_by_another_listener_is_served_once_it_is_freed() {
    let squatter = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = squatter.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let server = start(Endpoint::Bind(addr), shared(), shutdown.clone())
        .await
        .expect("a task that binds again");
    // The squatter takes the connection and says nothing.
    assert_eq!(healthz(addr).await, "no answer");
    drop(squatter);
    let started = std::time::Instant::now();
    loop {
        let got = healthz(addr).await;
        if got == "HTTP/1.1 200 OK" {
            break;
        }
        assert!(
            started.elapsed() < REBIND_MAX * 2,
            "not served within {:?}: {got}",
            REBIND_MAX * 2
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    shutdown.cancel();
    server.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn binding_again_waits_longer_each_time_up_to_the_cap_and_stops_at_shutdown() {
    let squatter = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = squatter.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let started = Instant::now();
    let task = tokio::spawn({
        let shutdown = shutdown.clone();
        async move { bind_again(addr, &shutdown).await.is_some() }
    });
    // Attempts at 1, 3, 7, 15, 25 and 35 s: the waits double up to 10 s.
    tokio::time::sleep(Duration::from_millis(25_500)).await;
    drop(squatter);
    tokio::time::sleep(Duration::from_millis(9_400)).await;
    assert!(!task.is_finished(), "bound before 35 s");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(task.is_finished(), "not bound at 35 s");
    assert!(task.await.unwrap());
    assert_eq!(started.elapsed(), Duration::from_millis(35_100));
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = held.local_addr().unwrap();
    let task = tokio::spawn({
        let shutdown = shutdown.clone();
        async move { bind_again(addr, &shutdown).await.is_some() }
    });
    shutdown.cancel();
    assert!(!task.await.unwrap());
}
