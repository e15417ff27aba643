//! Where the endpoint listens: the socket systemd passes (socket activation, `cks-drift.socket`)
//! or `http.listen`, bound by the daemon and bound again after a failure until it can be.
//!
//! Which sockets systemd passed is read from `LISTEN_PID`, `LISTEN_FDS` and `LISTEN_FDNAMES`
//! by a pure function, following sd_listen_fds(3). Checking never waits for the endpoint:
//! a port someone else holds costs `/metrics` and `/healthz`, never a cycle. What is served
//! belongs to `http`.

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use super::http::{self, Shared};
use super::messages::{
    CANNOT_LISTEN, LISTEN_STILL_TAKEN, PASSED_ELSEWHERE, PASSED_LISTEN_OFF, PASSED_SAME,
};
use crate::base::untrusted::shown;

/// The first descriptor systemd passes (`SD_LISTEN_FDS_START`).
pub const FIRST_FD: RawFd = 3;

/// The first wait before binding `http.listen` again; it doubles up to [`REBIND_MAX`].
pub const REBIND_FIRST: Duration = Duration::from_secs(1);

/// The longest wait between two attempts to bind `http.listen`: as often as systemd restarts
/// a failed unit (`RestartSec=10s`), so a port freed is served as soon as a restart would.
pub const REBIND_MAX: Duration = Duration::from_secs(10);

/// One descriptor systemd passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassedFd {
    pub fd: RawFd,
    /// `FileDescriptorName=`, `unknown` when systemd gave none.
    pub name: String,
}

/// Why the sockets systemd passed cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum PassedError {
    #[error("{variable}={value} is not what systemd sets (sd_listen_fds(3))")]
    Variable {
        variable: &'static str,
        value: String,
    },
    #[error("LISTEN_FDNAMES names {names} sockets, LISTEN_FDS passes {count} (sd_listen_fds(3))")]
    Names { names: usize, count: usize },
    #[error(
        "systemd passed {count} sockets ({names}); cks-drift serves one: give cks-drift.socket \
         a single ListenStream="
    )]
    Several { count: usize, names: String },
    #[error(
        "the socket systemd passed (fd {fd}, {name}) is not a TCP stream socket: \
         ListenStream= in cks-drift.socket must be an address:port, e.g. 127.0.0.1:9712"
    )]
    NotTcp {
        fd: RawFd,
        name: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the socket systemd passed (fd {fd}, {name}) is not listening: cks-drift.socket must \
         not set Accept=yes"
    )]
    NotListening { fd: RawFd, name: String },
    #[error("cannot use the socket systemd passed (fd {fd}, {name})")]
    Use {
        fd: RawFd,
        name: String,
        #[source]
        source: std::io::Error,
    },
}

/// The descriptors passed to process `pid`, from the values of `LISTEN_PID`, `LISTEN_FDS` and
/// `LISTEN_FDNAMES`. As sd_listen_fds(3): none unless `LISTEN_PID` is this process (the
/// variables are inherited by whatever the process starts, and are not for it); they start at
/// fd 3; a name missing is `unknown`.
pub fn passed_fds(
    pid: u32,
    listen_pid: Option<&str>,
    listen_fds: Option<&str>,
    names: Option<&str>,
) -> Result<Vec<PassedFd>, PassedError> {
    let bad = |variable: &'static str, value: &str| PassedError::Variable {
        variable,
        value: format!("\"{}\"", shown(value, 40)),
    };
    let Some(listen_pid) = listen_pid else {
        return Ok(Vec::new());
    };
    let for_pid: u32 = listen_pid
        .parse()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| bad("LISTEN_PID", listen_pid))?;
    if for_pid != pid {
        return Ok(Vec::new());
    }
    let Some(listen_fds) = listen_fds else {
        return Ok(Vec::new());
    };
    let count: RawFd = listen_fds
        .parse()
        .ok()
        .filter(|n| *n > 0 && *n <= RawFd::MAX - FIRST_FD)
        .ok_or_else(|| bad("LISTEN_FDS", listen_fds))?;
    let count = usize::try_from(count).unwrap_or(0);
    let names: Vec<String> = match names {
        None => vec!["unknown".to_string(); count],
        Some(list) => list.split(':').map(|n| shown(n, 40)).collect(),
    };
    if names.len() != count {
        return Err(PassedError::Names {
            names: names.len(),
            count,
        });
    }
    Ok((FIRST_FD..)
        .zip(names)
        .map(|(fd, name)| PassedFd { fd, name })
        .collect())
}

/// What systemd passed, taken once at start.
#[derive(Debug)]
pub enum Passed {
    Nothing,
    Socket(std::net::TcpListener),
    Unusable(PassedError),
}

impl Passed {
    /// Takes the socket systemd passed this process, and unsets `LISTEN_PID` and `LISTEN_FDS`.
    /// To be called while the process has one thread: changing the environment races with
    /// any other thread reading it.
    pub fn take() -> Passed {
        let var = |name: &str| std::env::var(name).ok();
        let parsed = passed_fds(
            std::process::id(),
            var("LISTEN_PID").as_deref(),
            var("LISTEN_FDS").as_deref(),
            var("LISTEN_FDNAMES").as_deref(),
        );
        // Taken whatever `parsed` says, so that the variables are unset either way.
        let mut inherited = listenfd::ListenFd::from_env();
        match parsed {
            Ok(fds) if fds.is_empty() => Passed::Nothing,
            Ok(fds) => match take_one(&mut inherited, fds) {
                Ok(listener) => Passed::Socket(listener),
                Err(e) => Passed::Unusable(e),
            },
            Err(e) => Passed::Unusable(e),
        }
    }
}

fn take_one(
    inherited: &mut listenfd::ListenFd,
    mut fds: Vec<PassedFd>,
) -> Result<std::net::TcpListener, PassedError> {
    if fds.len() > 1 {
        return Err(PassedError::Several {
            count: fds.len(),
            names: fds
                .iter()
                .map(|f| f.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    let PassedFd { fd, name } = fds.remove(0);
    let listener = match inherited.take_tcp_listener(0) {
        Ok(Some(listener)) if listener.as_raw_fd() == fd => listener,
        // listenfd also honours variables systemd does not set (LISTEN_FDS_FIRST_FD): a
        // descriptor other than the one sd_listen_fds(3) names is not taken.
        Ok(_) => {
            return Err(PassedError::Use {
                fd,
                name,
                source: std::io::Error::other("not the descriptor sd_listen_fds(3) names"),
            });
        }
        Err(source) => return Err(PassedError::NotTcp { fd, name, source }),
    };
    match rustix::net::sockopt::socket_acceptconn(&listener) {
        Ok(true) => {}
        Ok(false) => return Err(PassedError::NotListening { fd, name }),
        Err(e) => {
            return Err(PassedError::Use {
                fd,
                name,
                source: e.into(),
            });
        }
    }
    listener
        .set_nonblocking(true)
        .map_err(|source| PassedError::Use { fd, name, source })?;
    Ok(listener)
}

/// Where the endpoint is to listen.
#[derive(Debug)]
pub enum Endpoint {
    /// A socket already listening: systemd's.
    Listening(std::net::TcpListener),
    /// `http.listen`, bound by the service.
    Bind(SocketAddr),
}

impl Endpoint {
    /// The endpoint of `http.listen` and what systemd passed: systemd's socket wins, as the
    /// socket unit is what keeps the port from other users. A passed socket that cannot be
    /// served leaves `http.listen`.
    pub fn choose(passed: Passed, listen: Option<SocketAddr>) -> Option<Endpoint> {
        match passed {
            Passed::Socket(listener) => {
                let address = listener
                    .local_addr()
                    .map_or_else(|_| "?".to_string(), |a| a.to_string());
                match listen {
                    Some(configured) if listener.local_addr().ok() != Some(configured) => warn!(
                        %address,
                        http_listen = %configured,
                        "{PASSED_ELSEWHERE}"
                    ),
                    Some(configured) => info!(
                        %address,
                        http_listen = %configured,
                        "{PASSED_SAME}"
                    ),
                    None => info!(
                        %address,
                        "{PASSED_LISTEN_OFF}"
                    ),
                }
                Some(Endpoint::Listening(listener))
            }
            Passed::Unusable(e) => {
                error!(
                    error = %crate::base::error_chain::error_chain(&e),
                    "the socket systemd passed is not served; http.listen is used instead"
                );
                listen.map(Endpoint::Bind)
            }
            Passed::Nothing => listen.map(Endpoint::Bind),
        }
    }
}

/// Starts serving `endpoint` until `shutdown`. `http.listen` is bound once before this
/// returns, so that when the port is free the endpoint answers from the start; when it cannot
/// be, the error is logged and a task of its own binds it again (see [`REBIND_MAX`]) while
/// cycles go on. `None`: systemd's socket could not be served, and that is logged.
pub async fn start(
    endpoint: Endpoint,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
) -> Option<JoinHandle<()>> {
    let addr = endpoint_addr(&endpoint);
    let first = match endpoint {
        Endpoint::Listening(listener) => TcpListener::from_std(listener),
        Endpoint::Bind(addr) => TcpListener::bind(addr).await,
    };
    let rebind = match (first, addr) {
        (Ok(listener), _) => return Some(tokio::spawn(serve(listener, shared, shutdown))),
        (Err(e), Some(addr)) => {
            cannot_listen(addr, &e);
            addr
        }
        (Err(e), None) => {
            error!(error = %e, "cannot serve the socket systemd passed; the endpoint is off");
            return None;
        }
    };
    Some(tokio::spawn(async move {
        if let Some(listener) = bind_again(rebind, &shutdown).await {
            serve(listener, shared, shutdown).await;
        }
    }))
}

fn endpoint_addr(endpoint: &Endpoint) -> Option<SocketAddr> {
    match endpoint {
        Endpoint::Listening(_) => None,
        Endpoint::Bind(addr) => Some(*addr),
    }
}

fn cannot_listen(addr: SocketAddr, e: &std::io::Error) {
    error!(
        address = %addr,
        error = %e,
        "{CANNOT_LISTEN}"
    );
}

/// How often a still-taken `http.listen` is said again at WARN: whoever holds the port may be
/// answering `/healthz` in cks-drift's place, so it must not go quiet after one line.
const STILL_TAKEN_EVERY: Duration = Duration::from_secs(600);

/// Binds `addr` again, waiting longer after each failure up to [`REBIND_MAX`], until it is
/// bound (`Some`) or `shutdown` is cancelled (`None`). Repeated failures are logged at debug,
/// and at WARN every [`STILL_TAKEN_EVERY`].
async fn bind_again(addr: SocketAddr, shutdown: &CancellationToken) -> Option<TcpListener> {
    let mut wait = REBIND_FIRST;
    let mut attempts = 1u32;
    let mut said = tokio::time::Instant::now();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return None,
            () = tokio::time::sleep(wait) => {}
        }
        attempts += 1;
        match TcpListener::bind(addr).await {
            Ok(listener) => {
                info!(address = %addr, attempts, "http.listen is bound at last");
                return Some(listener);
            }
            Err(e) if said.elapsed() >= STILL_TAKEN_EVERY => {
                said = tokio::time::Instant::now();
                warn!(
                    address = %addr,
                    error = %e,
                    attempts,
                    "{LISTEN_STILL_TAKEN}"
                );
            }
            Err(e) => debug!(address = %addr, error = %e, attempts, "http.listen is still taken"),
        }
        wait = (wait * 2).min(REBIND_MAX);
    }
}

async fn serve(listener: TcpListener, shared: Arc<Shared>, shutdown: CancellationToken) {
    if let Ok(bound) = listener.local_addr() {
        info!(address = %bound, "serving /metrics and /healthz");
    }
    if let Err(e) = http::serve(listener, shared, shutdown).await {
        error!(error = %e, "the HTTP endpoint failed");
    }
}

#[cfg(test)]
mod tests;
