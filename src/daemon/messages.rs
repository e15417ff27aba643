//! The service's log lines, as an operator reads them: what `run` could not do and what it
//! does instead. Wording only; when each is logged belongs to `service` and `listen`.

/// The shutdown deadline passed with a cycle running.
pub const CANCELLED_AT_SHUTDOWN: &str = "the running cycle was cancelled at the shutdown deadline";

/// A reloaded config could not be put in force.
pub const CONFIG_REFUSED: &str = "the new config is refused; the old one stays in force";

/// A reload changed `http.listen`.
pub const LISTEN_FIXED: &str =
    "http.listen cannot change while running; restart to use the new address";

/// A reload changed `state.path`.
pub const STATE_PATH_FIXED: &str =
    "state.path cannot change while running; restart to use the new path";

/// A tick's cycle failed.
pub const CYCLE_FAILED: &str = "the cycle failed; the next one runs at the next interval";

/// `http.listen` is still taken by another process.
pub const LISTEN_STILL_TAKEN: &str = "http.listen is still taken: whatever holds it answers \
     /metrics and /healthz in cks-drift's place; free the port, or run cks-drift from \
     cks-drift.socket";

/// The socket systemd passed is served; `http.listen` is off.
pub const PASSED_LISTEN_OFF: &str =
    "the endpoint is served on the socket systemd passed, though http.listen is off";

/// The socket systemd passed is served; it is `http.listen`'s address.
pub const PASSED_SAME: &str =
    "the endpoint is served on the socket systemd passed; http.listen is not used";

/// The socket systemd passed is served; `http.listen` names another address.
pub const PASSED_ELSEWHERE: &str = "the endpoint is served on the socket systemd passed, not on \
     http.listen: set ListenStream= of cks-drift.socket to http.listen's address (systemctl edit \
     cks-drift.socket), or disable the socket unit";

/// `http.listen` could not be bound; it is tried again.
pub const CANNOT_LISTEN: &str = "cannot listen on http.listen; checking goes on without /metrics \
     and /healthz and the address is tried again, every 10 s at most: free the port, set \
     http.listen to another one, or run cks-drift from cks-drift.socket so that systemd holds the \
     port from boot";
