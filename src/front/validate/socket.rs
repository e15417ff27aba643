//! Whether `run` would serve a socket systemd passes in place of `http.listen`.

use super::{Finding, Severity};
use crate::daemon::listen::{PassedError, PassedFd};

/// Whether `run`, started as this command was, would serve a socket systemd passed in place
/// of `http.listen` (handed a socket as cks-drift.socket hands one, by systemd-socket-activate
/// say).
/// Nothing when systemd passed this process none: `run` binds `http.listen`.
pub fn passed_socket(passed: Result<Vec<PassedFd>, PassedError>) -> Option<Finding> {
    let refused = |e: &PassedError| {
        Finding::warning(
            "http.listen",
            format!("{e}; `run` would bind http.listen instead"),
        )
    };
    match passed {
        Ok(fds) => match fds.as_slice() {
            [] => None,
            [one] => Some(Finding::new(
                Severity::Ok,
                "http.listen",
                format!(
                    "not used: `run` serves the socket systemd passes (fd {}, {}) in its place",
                    one.fd, one.name
                ),
            )),
            several => Some(refused(&PassedError::Several {
                count: several.len(),
                names: several
                    .iter()
                    .map(|f| f.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })),
        },
        Err(e) => Some(refused(&e)),
    }
}
