//! The engine's log lines, as an operator reads them: what a tick could not do and what it
//! does instead. Wording only; when each is logged belongs to `engine`.

/// A storm ended: the findings it held go out one by one.
pub const STORM_ENDED: &str = "the storm is over; the findings still open are alerted and \
     annotated one by one, those resolved meanwhile never";

/// A storm began: one storm alert in place of the findings' own.
pub const STORM_BEGAN: &str = "storm: new findings in more clusters at once than \
     notify.storm_clusters; one storm alert is raised and the findings' own alerts and \
     annotations are held until it ends";

/// Alertmanager did not take the open findings.
pub const ALERTMANAGER_NOT_SENT: &str =
    "the open findings were not sent to Alertmanager; they are sent again next cycle";

/// The state could not be written after a delivery.
pub const STATE_NOT_WRITTEN_AFTER_DELIVERY: &str =
    "cannot write the state file after a delivery; nothing more is sent this cycle";

/// What was reported could not be read back from CloudStack (a take-over).
pub const READ_BACK_FAILED: &str =
    "cannot read back from CloudStack what was reported; nothing is decided or sent this cycle";

/// `cloudstack.insecure = true`.
pub const TLS_UNVERIFIED: &str = "TLS certificate verification is off (cloudstack.insecure = true)";

/// `getUser` failed: the key's role is not known.
pub const CALLER_UNKNOWN: &str = "cannot ask CloudStack who holds the API key (getUser); its role \
     must be of type Admin, or cks-drift's own annotations are not read back and other domains' \
     clusters are not checked";

/// The state could not be written after the dedupe step.
pub const STATE_NOT_WRITTEN: &str = "cannot write the state file; nothing is sent this cycle";

/// The state file was corrupt and moved aside.
pub const STATE_MOVED_ASIDE: &str =
    "the state file could not be read; it was moved aside and checking starts afresh";
