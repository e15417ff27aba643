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

/// `listConfigurations` failed: what was last read of the server's own check stands.
pub const SERVER_CHECK_UNREAD: &str = "cannot read whether CloudStack runs its own VM map check \
     (listConfigurations); what was last read stands";

/// The server's own check is gone (a downgrade, or the plugin's setting removed).
pub const SERVER_CHECK_ABSENT: &str = "CloudStack has no VM map check of its own (any more): \
     cks-drift alerts every mismatch";

/// The server's own check exists and is off.
pub const SERVER_CHECK_OFF: &str = "CloudStack's own VM map check is switched off \
     (cloud.kubernetes.cluster.vm.map.check.enabled = false): cks-drift alerts every mismatch";

/// The server's own check is on, and cks-drift leaves to it what it alerts.
pub const SERVER_CHECK_ON_DEFER: &str = "CloudStack runs its own VM map check \
     (cloud.kubernetes.cluster.vm.map.check.enabled = true): the mismatches it alerts itself \
     get no CloudStack alert or annotation from cks-drift, and those cks-drift alerted are \
     taken back; findings by identity, blind clusters and map_count are still alerted, and \
     every finding still goes to the event log, the metrics, Alertmanager and the report \
     (notify.defer_to_server_check = false alerts everything)";

/// The server's own check is on, and cks-drift alerts everything anyway.
pub const SERVER_CHECK_ON_KEEP: &str = "CloudStack runs its own VM map check \
     (cloud.kubernetes.cluster.vm.map.check.enabled = true) and notify.defer_to_server_check \
     is false: each mismatch it finds is alerted twice, once by CloudStack and once by cks-drift";

/// A finding left to the server's own check from now on.
pub const HANDED_OVER: &str = "CloudStack's own VM map check alerts this finding from now on: \
     cks-drift's alert is archived and its annotation removed";
