//! `[check]`: when cycles run, how many clusters at once, and how long drift must last before
//! it is told or counted as gone.

use std::time::Duration;

use super::key::{Default, Key, Kind};
use super::reader::Reader;

/// `[check]`.
#[derive(Debug, Clone)]
pub struct CheckSettings {
    pub enabled: bool,
    pub interval: Duration,
    pub initial_delay: Duration,
    pub grace_period: Duration,
    /// Clusters checked at once (node listings in flight).
    pub concurrency: usize,
    /// How long a cluster's nodes may go unlisted before it is a `blind` finding.
    pub blind_after: Duration,
    /// How long a finding must stay absent before it counts as gone (its INFO line, its
    /// alert archived, its annotation removed): a finding that flaps is told once.
    pub resolve_after: Duration,
}

/// `check.blind_after`'s default, for code that builds settings without a file (a unit test
/// holds it equal to [`BLIND_AFTER`]'s).
pub const DEFAULT_BLIND_AFTER: Duration = Duration::from_secs(30 * 60);

const DAY: Duration = Duration::from_secs(86_400);

const fn key(name: &'static str, default: Default, doc: &'static str, kind: Kind) -> Key {
    Key {
        table: "check",
        name,
        default,
        doc,
        kind,
    }
}

pub const ENABLED: Key = key(
    "enabled",
    Default::Is("true"),
    "turn checking off without stopping the daemon",
    Kind::Bool,
);
pub const INTERVAL: Key = key(
    "interval",
    Default::Is("5m"),
    "time from the start of one cycle to the start of the next",
    Kind::Duration {
        min: Duration::from_secs(1),
        max: Duration::from_secs(7 * 86_400),
    },
);
pub const INITIAL_DELAY: Key = key(
    "initial_delay",
    Default::Is("0s"),
    "wait before the first cycle of run",
    Kind::Duration {
        min: Duration::ZERO,
        max: DAY,
    },
);
pub const GRACE_PERIOD: Key = key(
    "grace_period",
    Default::Is("15m"),
    "how young a VM or a state change is not reported yet",
    Kind::Duration {
        min: Duration::ZERO,
        max: Duration::from_secs(30 * 86_400),
    },
);
pub const CONCURRENCY: Key = key(
    "concurrency",
    Default::Is("8"),
    "node listings at once",
    Kind::Int { min: 1, max: 1024 },
);
pub const BLIND_AFTER: Key = key(
    "blind_after",
    Default::Is("30m"),
    "nodes unlisted this long (and two cycles) make a blind finding",
    Kind::Duration {
        min: Duration::ZERO,
        max: Duration::from_secs(30 * 86_400),
    },
);
pub const RESOLVE_AFTER: Key = key(
    "resolve_after",
    Default::Is("15m"),
    "a mismatch counts as gone only once absent this long",
    Kind::Duration {
        min: Duration::ZERO,
        max: DAY,
    },
);

pub const KEYS: &[&Key] = &[
    &ENABLED,
    &INTERVAL,
    &INITIAL_DELAY,
    &GRACE_PERIOD,
    &CONCURRENCY,
    &BLIND_AFTER,
    &RESOLVE_AFTER,
];

impl Reader<'_> {
    /// `[check]`.
    pub(super) fn check(&mut self) -> CheckSettings {
        CheckSettings {
            enabled: self.bool(&ENABLED),
            interval: self.duration(&INTERVAL),
            initial_delay: self.duration(&INITIAL_DELAY),
            grace_period: self.duration(&GRACE_PERIOD),
            concurrency: self.int(&CONCURRENCY) as usize,
            blind_after: self.duration(&BLIND_AFTER),
            resolve_after: self.duration(&RESOLVE_AFTER),
        }
    }
}
