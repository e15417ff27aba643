//! The HELP line of each metric, as `# HELP` shows it to whoever reads the exposition: the
//! wording in one place; the exposition itself is rendered by `metrics`.

/// `cks_drift_ignored_findings`.
pub const IGNORED_FINDINGS: &str =
    "Open findings an [[ignore]] rule matches (reported, not alerted), by rule number and reason.";

/// `cks_drift_storm_held_findings`.
pub const STORM_HELD_FINDINGS: &str = "Findings whose alert and annotation the storm under way \
     holds; each is in the event log and the report.";

/// `cks_drift_storm`.
pub const STORM: &str = "1 while a storm lasts: new findings came in more clusters at once than \
     notify.storm_clusters, and their alerts and annotations are held.";

/// `cks_drift_blind_seconds`.
pub const BLIND_SECONDS: &str = "Per cluster with an open blind finding: seconds since its \
     Kubernetes nodes were last listed (its last full comparison).";

/// `cks_drift_notifications_total`.
pub const NOTIFICATIONS_TOTAL: &str = "Notification deliveries by channel (alert, annotation, \
     event_log) and outcome: delivered, failed (kept and tried again) or refused (CloudStack \
     refused it for good; dropped, logged as an ERROR).";

/// `cks_drift_api_requests_total`.
pub const API_REQUESTS_TOTAL: &str = "CloudStack API HTTP requests (retries included) by command \
     and outcome: ok, error (an answer such as 431 or 401) or transient (retried).";

/// `cks_drift_clusters`.
pub const CLUSTERS: &str = "Kubernetes clusters in the last cycle that ran, by status: checked, \
     partial (nodes not listed) or skipped.";

/// `cks_drift_cycles_total`.
pub const CYCLES_TOTAL: &str = "Check cycles by outcome: ok, or failed (the API could not be \
     listed or the state file not written).";

/// `cks_drift_map_reads_total`.
pub const MAP_READS_TOTAL: &str = "Cycles by where the map rows the API hides were read: api (no \
     [database]), database, or database_failed (the database failed; the cycle read them through \
     the API).";

/// `cks_drift_lock_held_elsewhere`.
pub const LOCK_HELD_ELSEWHERE: &str = "1 while this standby has seen the database lock held, for \
     three lock intervals or more, by a connection of another database user: possibly no instance \
     of cks-drift, and then none checks.";

/// `cks_drift_role`.
pub const ROLE: &str = "1 for the role this instance has: active (it checks and notifies; always, \
     without [database]) or standby (another instance holds the lock in the CloudStack database).";

/// `cks_drift_database_lock_node_info`.
pub const LOCK_NODE_INFO: &str = "1 while this instance holds the database lock, labelled with \
     the server it holds it on: its kind (server; galera, a Galera node; replica, a replica or a \
     read-only server), its node name and Galera cluster. On a galera or replica node the lock \
     excludes only the instances connected to that node: two active instances with different \
     nodes both alert.";

/// `cks_drift_server_check`.
pub const SERVER_CHECK: &str = "CloudStack's own VM map check as last read \
     (cloud.kubernetes.cluster.vm.map.check.enabled): 1 for its state, absent, off or on.";

/// `cks_drift_findings_left_to_server`.
pub const FINDINGS_LEFT_TO_SERVER: &str = "Open findings CloudStack's own VM map check alerts, \
     for which cks-drift raises no CloudStack alert or annotation \
     (notify.defer_to_server_check).";

/// `cks_drift_state_write_failing`.
pub const STATE_WRITE_FAILING: &str = "1 while the last attempt to write the state file failed \
     (a full disk, a read-only file system, permissions); cycles send nothing until it is written.";

/// `cks_drift_state_write_failures_total`.
pub const STATE_WRITE_FAILURES_TOTAL: &str =
    "Cycles whose state file could not be written, before or after delivering notifications.";
