//! `[notify]`: which notifications are raised, their caps, the event log, and what makes a
//! storm.

use std::path::PathBuf;

use super::key::{Default, Key, Kind};
use super::reader::Reader;

/// `[notify]`.
#[derive(Debug, Clone)]
pub struct NotifySettings {
    /// Raise a CloudStack alert per new mismatch.
    pub alerts: bool,
    /// Alert type numbers the daemon may use, one per open mismatch in a zone.
    pub alert_types: std::ops::RangeInclusive<u32>,
    /// Alerts per cluster and cycle before the rest are summed up in one.
    pub alert_cap: usize,
    /// Alerts (and, apart, annotations) all the clusters of one tenant hold at once: an
    /// account, or the projects of one domain together (`Owner::key`).
    pub owner_alert_cap: usize,
    /// Alerts (and, apart, annotations) raised for one tenant's clusters in any hour.
    pub owner_alerts_per_hour: usize,
    /// Keep an admin-only annotation on the cluster per open mismatch.
    pub annotations: bool,
    /// JSON-lines event log.
    pub event_log: PathBuf,
    /// How many clusters with new findings in one cycle make a storm.
    pub storm_clusters: StormThreshold,
    /// Where the management server runs its own VM map check (apache/cloudstack PR 14666),
    /// raise no CloudStack alert or annotation for the findings it reports itself.
    pub defer_to_server_check: bool,
}

/// The fewest clusters a percentage in `notify.storm_clusters` stands for: in a small cloud,
/// a few clusters drifting at once are still told one by one.
pub const STORM_MIN_CLUSTERS: usize = 5;

/// `notify.storm_clusters`: more clusters than this with new findings in one cycle are a
/// storm, told in one alert while the per-finding alerts and annotations wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StormThreshold {
    /// Every finding is told on its own, however many come at once.
    Off,
    /// A number of clusters.
    Clusters(usize),
    /// A percentage of the clusters checked in the cycle, and never fewer than
    /// [`STORM_MIN_CLUSTERS`].
    Percent(u32),
}

impl StormThreshold {
    /// The number of clusters for a cycle that checked `checked`; `None` when storms are off.
    pub fn clusters(self, checked: usize) -> Option<usize> {
        match self {
            StormThreshold::Off => None,
            StormThreshold::Clusters(n) => Some(n),
            StormThreshold::Percent(p) => {
                Some((checked * p as usize / 100).max(STORM_MIN_CLUSTERS))
            }
        }
    }
}

impl std::fmt::Display for StormThreshold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StormThreshold::Off => f.write_str("off"),
            StormThreshold::Clusters(n) => write!(f, "{n}"),
            StormThreshold::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// `notify.storm_clusters`'s default: Cluster API's MachineHealthCheck and cluster-autoscaler
/// stop acting one by one at a share of the fleet of this order (a unit test holds it equal to
/// [`STORM_CLUSTERS`]'s).
pub const DEFAULT_STORM_CLUSTERS: StormThreshold = StormThreshold::Percent(20);

/// How to write `notify.storm_clusters`, at the end of every problem with it.
const STORM_HOW: &str = "give a number of clusters (e.g. 10), a percentage of the checked \
     clusters (e.g. \"20%\"), or \"off\"";

/// Why `notify.storm_clusters` is not a threshold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StormClustersError {
    /// A number of clusters outside 1 to 1000000.
    #[error("is {number}; {STORM_HOW}")]
    OutOfRange { number: i64 },
    /// A string that is neither `"<p>%"` (1 to 100) nor `"off"`, as written.
    #[error("is {text:?}; {STORM_HOW}")]
    Unreadable { text: String },
    #[error("must be a number or a string, not {kind}; {STORM_HOW}")]
    WrongType { kind: &'static str },
}

/// Reads `notify.storm_clusters`: a number, `"<p>%"` or `"off"`.
pub fn parse_storm_clusters(value: &toml::Value) -> Result<StormThreshold, StormClustersError> {
    match value {
        toml::Value::Integer(n) if (1..=1_000_000).contains(n) => {
            Ok(StormThreshold::Clusters(*n as usize))
        }
        toml::Value::Integer(n) => Err(StormClustersError::OutOfRange { number: *n }),
        toml::Value::String(s) if s.trim() == "off" => Ok(StormThreshold::Off),
        toml::Value::String(s) => match s.trim().strip_suffix('%').map(|p| p.trim().parse::<u32>())
        {
            Some(Ok(p)) if (1..=100).contains(&p) => Ok(StormThreshold::Percent(p)),
            _ => Err(StormClustersError::Unreadable { text: s.clone() }),
        },
        other => Err(StormClustersError::WrongType {
            kind: other.type_str(),
        }),
    }
}

/// `"3000-3999"` (or a single `"3000"`): alert types for the daemon. Types up to 33 are
/// CloudStack's own and are refused.
pub(super) fn parse_range(text: &str) -> Result<std::ops::RangeInclusive<u32>, String> {
    let (lo, hi) = text.split_once('-').unwrap_or((text, text));
    let parse = |s: &str| {
        s.trim()
            .parse::<u32>()
            .map_err(|_| format!("{text:?} is not a range of numbers like \"3000-3999\""))
    };
    let (lo, hi) = (parse(lo)?, parse(hi)?);
    if lo > hi {
        return Err(format!("{text:?} starts above its end"));
    }
    if lo <= 100 {
        return Err(format!(
            "{text:?} overlaps CloudStack's own alert types (0-33 and those added later); use \
             numbers above 100, e.g. \"3000-3999\""
        ));
    }
    if hi > i16::MAX as u32 {
        return Err(format!(
            "{text:?} goes past 32767, the largest alert type CloudStack stores"
        ));
    }
    Ok(lo..=hi)
}

const fn key(name: &'static str, default: Default, doc: &'static str, kind: Kind) -> Key {
    Key {
        table: "notify",
        name,
        default,
        doc,
        kind,
    }
}

pub const ALERTS: Key = key(
    "alerts",
    Default::Is("true"),
    "raise CloudStack alerts",
    Kind::Bool,
);
pub const ALERT_TYPES: Key = key(
    "alert_types",
    Default::Is("3000-3999"),
    "alert types to use, one per open mismatch",
    Kind::Text,
);
pub const ALERT_CAP: Key = key(
    "alert_cap",
    Default::Is("5"),
    "alerts per cluster and cycle before one sums up the rest",
    Kind::Int { min: 1, max: 1000 },
);
pub const OWNER_ALERT_CAP: Key = key(
    "owner_alert_cap",
    Default::Is("100"),
    "alerts all the clusters of one tenant hold at once",
    Kind::Int {
        min: 1,
        max: 100_000,
    },
);
pub const OWNER_ALERTS_PER_HOUR: Key = key(
    "owner_alerts_per_hour",
    Default::Is("20"),
    "alerts raised for one tenant's clusters in any hour",
    Kind::Int {
        min: 1,
        max: 100_000,
    },
);
pub const ANNOTATIONS: Key = key(
    "annotations",
    Default::Is("true"),
    "annotate the cluster per open mismatch",
    Kind::Bool,
);
pub const EVENT_LOG: Key = key(
    "event_log",
    Default::Derived("`events.jsonl` beside the state file"),
    "JSON-lines event log",
    Kind::Text,
);
pub const STORM_CLUSTERS: Key = key(
    "storm_clusters",
    Default::Is("20%"),
    "more clusters than this with new findings in one cycle are a storm",
    Kind::Text,
);

pub const DEFER_TO_SERVER_CHECK: Key = key(
    "defer_to_server_check",
    Default::Is("true"),
    "where CloudStack runs its own VM map check, leave the mismatches it alerts to it",
    Kind::Bool,
);

pub const KEYS: &[&Key] = &[
    &ALERTS,
    &ALERT_TYPES,
    &ALERT_CAP,
    &OWNER_ALERT_CAP,
    &OWNER_ALERTS_PER_HOUR,
    &ANNOTATIONS,
    &EVENT_LOG,
    &STORM_CLUSTERS,
    &DEFER_TO_SERVER_CHECK,
];

impl Reader<'_> {
    /// `[notify]`; the event log is beside the state file at `state_path` unless it is set.
    pub(super) fn notify(&mut self, state_path: &std::path::Path) -> NotifySettings {
        let event_log = self.path(&EVENT_LOG).unwrap_or_else(|| {
            state_path
                .parent()
                .unwrap_or(std::path::Path::new("."))
                .join("events.jsonl")
        });
        let alert_types = self.alert_types();
        NotifySettings {
            alerts: self.bool(&ALERTS),
            alert_types,
            alert_cap: self.int(&ALERT_CAP) as usize,
            owner_alert_cap: self.int(&OWNER_ALERT_CAP) as usize,
            owner_alerts_per_hour: self.int(&OWNER_ALERTS_PER_HOUR) as usize,
            annotations: self.bool(&ANNOTATIONS),
            event_log,
            storm_clusters: self.storm_clusters(),
            defer_to_server_check: self.bool(&DEFER_TO_SERVER_CHECK),
        }
    }

    /// `notify.alert_types`, its default when it is not set.
    fn alert_types(&mut self) -> std::ops::RangeInclusive<u32> {
        let text = self.text(&ALERT_TYPES);
        match parse_range(&text) {
            Ok(range) => range,
            Err(e) => {
                self.problem(&ALERT_TYPES.full(), e);
                parse_range(ALERT_TYPES.default_text()).unwrap_or(3000..=3999)
            }
        }
    }

    /// `notify.storm_clusters`, [`DEFAULT_STORM_CLUSTERS`] when it is not set.
    fn storm_clusters(&mut self) -> StormThreshold {
        match self.value(&STORM_CLUSTERS) {
            None => DEFAULT_STORM_CLUSTERS,
            Some(v) => parse_storm_clusters(v).unwrap_or_else(|e| {
                self.problem(&STORM_CLUSTERS.full(), e.to_string());
                DEFAULT_STORM_CLUSTERS
            }),
        }
    }
}
