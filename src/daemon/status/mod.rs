//! The operator's window on the endpoint: what the last cycle saw, kept after each tick as
//! one [`View`] (pure data, built here from the tick), and served as a status page (`page`)
//! and a read-only JSON API (`api`). Opening either sends nothing to CloudStack or to a
//! control node: both only read the view.
//!
//! Every text a tenant controls (cluster, VM and node names, reasons) is escaped where it is
//! written: HTML-escaped on the page, JSON-escaped in the API.

pub mod api;
pub mod page;

use std::collections::HashMap;
use std::time::Duration;

use crate::base::time::Timestamp;
use crate::cloudstack::server_check::ServerCheck;
use crate::config::IgnoreRule;
use crate::engine::Tick;
use crate::engine::cycle::{ClusterStatus, Views};
use crate::engine::findings::FindingRow;
use crate::state::RecordKey;
use crate::state::standing::{Sent, Standing};

/// What the last cycle saw, as the page and the API show it.
#[derive(Debug, Clone, PartialEq)]
pub struct View {
    /// When the cycle that gave the clusters and findings started, and how long it took.
    pub at: Timestamp,
    pub duration: Duration,
    /// Why the last tick failed, if it did (the clusters and findings are then those of the
    /// last tick that succeeded).
    pub failure: Option<String>,
    pub server_check: Option<ServerCheck>,
    /// Since when a storm holds findings, and how many.
    pub storm: Option<(Timestamp, usize)>,
    /// In the API's order: by name, then id.
    pub clusters: Vec<ClusterRow>,
    /// Grouped by cluster in the clusters' order, by kind then key within one.
    pub findings: Vec<Finding>,
}

/// A cluster as the last cycle saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterRow {
    pub id: String,
    pub name: String,
    pub owner: Option<String>,
    pub zone_id: Option<String>,
    pub status: ClusterStatus,
    pub reason: Option<String>,
    pub findings: usize,
    /// The map rows the API showed, VM id and name: kept for a cluster with findings or not
    /// fully checked and no views; a matching cluster keeps their count alone (at 10,000
    /// clusters the rows would hold a few MiB for nothing to show).
    pub map: Option<Vec<(String, String)>>,
    /// How many map rows the API showed.
    pub mapped: usize,
    pub expected_vms: u32,
    /// Its three views, when the cycle kept them (a cluster with findings, or compared in part).
    pub views: Option<Box<Views>>,
    /// Since when its nodes have gone unlisted, when its `blind` finding is open.
    pub blind_since: Option<Timestamp>,
}

/// An open finding with where it stands.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub row: FindingRow,
    pub owner: Option<String>,
    /// First reported; `None` without a state.
    pub since: Option<Timestamp>,
    pub delivery: Delivery,
}

/// Where a finding's CloudStack alert and annotation are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// Raised, or queued to be: whether each of the two is delivered.
    Notified { alert: Sent, annotation: Sent },
    /// A storm holds them.
    HeldByStorm,
    /// Its alert waits for its tenant's budget (`notify.owner_alert_cap`,
    /// `owner_alerts_per_hour`).
    WaitingForBudget,
    /// An `[[ignore]]` rule matches it: reported, never alerted.
    Ignored {
        rule: usize,
        reason: String,
        expires: Option<Timestamp>,
    },
    /// CloudStack's own VM map check alerts it.
    LeftToServer,
    /// Nothing is sent for it: alerts and annotations are off, or it is over the cluster's
    /// cap and summed up in another alert.
    NotSent,
}

impl Delivery {
    fn of(standing: Option<&Standing>, rules: &[IgnoreRule]) -> Delivery {
        let Some(s) = standing else {
            return Delivery::NotSent;
        };
        if let Some(ignored) = &s.ignored {
            let expires = rules
                .iter()
                .find(|r| r.number == ignored.rule)
                .and_then(|r| r.expires);
            return Delivery::Ignored {
                rule: ignored.rule,
                reason: ignored.reason.clone(),
                expires,
            };
        }
        if s.left_to_server {
            return Delivery::LeftToServer;
        }
        if s.held {
            return Delivery::HeldByStorm;
        }
        if s.deferred {
            return Delivery::WaitingForBudget;
        }
        if s.alert == Sent::No && s.annotation == Sent::No {
            return Delivery::NotSent;
        }
        Delivery::Notified {
            alert: s.alert,
            annotation: s.annotation,
        }
    }

    /// In words, for the page.
    pub fn text(&self) -> String {
        let sent = |s: Sent| match s {
            Sent::Yes => "raised",
            Sent::Queued => "queued",
            Sent::No => "none",
        };
        match self {
            Delivery::Notified { alert, annotation } => {
                format!("alert {}, annotation {}", sent(*alert), sent(*annotation))
            }
            Delivery::HeldByStorm => "held by the storm under way".into(),
            Delivery::WaitingForBudget => "alert waits for its owner's budget".into(),
            Delivery::Ignored {
                rule,
                reason,
                expires,
            } => match expires {
                Some(t) => format!("ignored by [[ignore]] rule {rule} until {t}: {reason}"),
                None => format!("ignored by [[ignore]] rule {rule}: {reason}"),
            },
            Delivery::LeftToServer => "alerted by CloudStack's own VM map check".into(),
            Delivery::NotSent => "no alert of its own (alerts off, or summed up)".into(),
        }
    }

    /// A short word for the API.
    pub fn as_str(&self) -> &'static str {
        match self {
            Delivery::Notified { .. } => "notified",
            Delivery::HeldByStorm => "held_by_storm",
            Delivery::WaitingForBudget => "waiting_for_budget",
            Delivery::Ignored { .. } => "ignored",
            Delivery::LeftToServer => "left_to_server",
            Delivery::NotSent => "not_sent",
        }
    }
}

impl View {
    /// The view after `tick`, or `None` when it ran no cycle (a standby, or a failure before
    /// anything was read): then the last view stands, marked with the failure.
    pub fn of(tick: &Tick, rules: &[IgnoreRule]) -> Option<View> {
        let report = tick.report.as_ref().ok()?;
        let blind: HashMap<&str, Timestamp> = tick
            .blind
            .iter()
            .map(|b| (b.cluster_id.as_str(), b.since))
            .collect();
        let mut clusters: Vec<&crate::engine::cycle::ClusterOutcome> =
            report.clusters.iter().collect();
        clusters.sort_by(|a, b| {
            (&a.cluster.name, &a.cluster.id).cmp(&(&b.cluster.name, &b.cluster.id))
        });
        let mut findings = Vec::new();
        let rows = clusters
            .iter()
            .map(|c| {
                for m in &c.mismatches {
                    let key = RecordKey::finding(&c.cluster.id, &m.key());
                    let standing = tick.standings.get(&key);
                    let new = tick
                        .new
                        .as_ref()
                        .map(|n| n.contains(&(c.cluster.id.clone(), m.key())));
                    findings.push(Finding {
                        row: FindingRow::of(c, m, new),
                        owner: c.cluster.owner.clone(),
                        since: standing.map(|s| s.since),
                        delivery: Delivery::of(standing, rules),
                    });
                }
                ClusterRow {
                    id: c.cluster.id.clone(),
                    name: c.cluster.name.clone(),
                    owner: c.cluster.owner.clone(),
                    zone_id: c.cluster.zone_id.clone(),
                    status: c.status,
                    reason: c.reason.clone(),
                    findings: c.mismatches.len(),
                    map: (c.views.is_none()
                        && (c.status != ClusterStatus::Checked || !c.mismatches.is_empty()))
                    .then(|| c.mapped.clone()),
                    mapped: c.mapped.len(),
                    expected_vms: c.expected_vms,
                    views: c.views.clone(),
                    blind_since: blind.get(c.cluster.id.as_str()).copied(),
                }
            })
            .collect();
        Some(View {
            at: report.started,
            duration: report.duration,
            failure: None,
            server_check: report.server_check,
            storm: tick.storm,
            clusters: rows,
            findings,
        })
    }

    /// The clusters with each status, and those blind.
    pub fn counts(&self) -> Counts {
        let of = |s: ClusterStatus| self.clusters.iter().filter(|c| c.status == s).count();
        Counts {
            checked: of(ClusterStatus::Checked),
            partial: of(ClusterStatus::Partial),
            skipped: of(ClusterStatus::Skipped),
            blind: self
                .clusters
                .iter()
                .filter(|c| c.blind_since.is_some())
                .count(),
        }
    }

    pub fn cluster(&self, id: &str) -> Option<&ClusterRow> {
        self.clusters.iter().find(|c| c.id == id)
    }

    pub fn findings_of<'a>(&'a self, cluster_id: &'a str) -> impl Iterator<Item = &'a Finding> {
        self.findings
            .iter()
            .filter(move |f| f.row.cluster_id == cluster_id)
    }
}

/// Clusters by how far the last cycle checked them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    pub checked: usize,
    pub partial: usize,
    pub skipped: usize,
    pub blind: usize,
}

/// Who this instance is, as the page and `/api/v1/status` say it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Standby {
    /// Another instance holds the database lock.
    pub standby: bool,
    /// The server the lock is local to, when it is (a Galera node, a replica).
    pub lock_node: Option<String>,
    /// While standing by: who holds the lock, in words.
    pub holder: Option<String>,
    pub checking_enabled: bool,
}

/// The most rows one page of the API, or of the status page's findings, lists.
pub const MAX_ROWS: usize = 500;
/// Rows when the request does not say.
pub const DEFAULT_ROWS: usize = 100;
