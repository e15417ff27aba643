//! The report of a cycle for people (text) and programs (JSON), and the exit code of `check`.
//!
//! Rendering only: what to report was decided by `cycle` and the dedupe.

use std::fmt::Write as _;

use serde::Serialize;

use crate::base::untrusted::escaped;
use crate::cloudstack::server_check::ServerCheck;
use crate::diff::wording;
use crate::engine::cycle::{ClusterStatus, CycleReport};
use crate::engine::findings::FindingRow;
use crate::notify::DeliveryCounts;

/// Exit codes of `check`.
pub mod exit {
    /// Every checked cluster matches.
    pub const MATCHES: i32 = 0;
    /// At least one mismatch is open.
    pub const MISMATCHES: i32 = 1;
    /// The check could not run (bad config, API unreachable, bad credentials, state locked).
    pub const CANNOT_RUN: i32 = 2;
    /// No mismatch, but a cluster's nodes could not be listed (compared in part).
    pub const PARTIAL: i32 = 3;
}

pub use crate::state::step::NewKeys;

#[derive(Serialize)]
struct JsonCluster<'a> {
    id: &'a str,
    name: &'a str,
    status: ClusterStatus,
    reason: Option<&'a str>,
}

#[derive(Serialize)]
struct JsonReport<'a> {
    started: String,
    duration_seconds: f64,
    /// CloudStack's own VM map check: `absent`, `off` or `on`; left out when not read.
    #[serde(skip_serializing_if = "Option::is_none")]
    server_check: Option<&'static str>,
    clusters: Vec<JsonCluster<'a>>,
    mismatches: Vec<FindingRow>,
}

/// The JSON report (see docs/commands.md for the schema). `new` marks mismatches first reported
/// by this cycle; it is omitted when the check ran without state.
pub fn to_json(report: &CycleReport, new: Option<&NewKeys>) -> String {
    let clusters = report
        .clusters
        .iter()
        .map(|c| JsonCluster {
            id: &c.cluster.id,
            name: &c.cluster.name,
            status: c.status,
            reason: c.reason.as_deref(),
        })
        .collect();
    let mismatches = report
        .clusters
        .iter()
        .flat_map(|c| {
            c.mismatches.iter().map(move |m| {
                let new = new.map(|n| n.contains(&(c.cluster.id.clone(), m.key())));
                FindingRow::of(c, m, new)
            })
        })
        .collect();
    let json = JsonReport {
        started: report.started.to_string(),
        duration_seconds: (report.duration.as_secs_f64() * 1000.0).round() / 1000.0,
        server_check: report.server_check.map(ServerCheck::as_str),
        clusters,
        mismatches,
    };
    crate::base::untrusted::json_visible(
        serde_json::to_string_pretty(&json).expect("the report serializes"),
    ) + "\n"
}

/// The text report for a person. Tenant text (names, reasons) has its control characters
/// escaped: it goes to a terminal.
pub fn to_text(report: &CycleReport, new: Option<&NewKeys>) -> String {
    let count = |s: ClusterStatus| report.clusters.iter().filter(|c| c.status == s).count();
    let total: usize = report.clusters.iter().map(|c| c.mismatches.len()).sum();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "cks-drift check at {}: {} clusters ({} checked, {} partial, {} skipped), {} mismatch{}",
        report.started,
        report.clusters.len(),
        count(ClusterStatus::Checked),
        count(ClusterStatus::Partial),
        count(ClusterStatus::Skipped),
        total,
        if total == 1 { "" } else { "es" }
    );
    if report.server_check == Some(ServerCheck::On) {
        let left: usize = report.clusters.iter().map(|c| c.left_to_server.len()).sum();
        let _ = writeln!(
            out,
            "CloudStack runs its own VM map check: {left} mismatch{} left to its alerts",
            if left == 1 { " is" } else { "es are" }
        );
    }
    if !report.clusters.is_empty() {
        out.push_str("\nClusters\n");
    }
    for c in &report.clusters {
        let _ = write!(
            out,
            "  {:<8} {} ({})",
            c.status.as_str(),
            escaped(&c.cluster.name),
            escaped(&c.cluster.id)
        );
        if let Some(reason) = &c.reason {
            let _ = write!(out, ": {}", escaped(reason));
        }
        out.push('\n');
    }
    if total > 0 {
        out.push_str("\nMismatches\n");
    }
    for c in &report.clusters {
        for m in &c.mismatches {
            let marker = match new {
                Some(n) if n.contains(&(c.cluster.id.clone(), m.key())) => "[new] ",
                Some(_) => "      ",
                None => "",
            };
            let subject = wording::subject_with_state(m);
            let subject = escaped(&subject);
            let _ = writeln!(
                out,
                "  {marker}{}  {}  {subject}\n  {}    {}",
                escaped(&c.cluster.name),
                m.kind.as_str(),
                " ".repeat(marker.len()),
                escaped(&wording::reason(&c.cluster.name, m))
            );
            if c.left_to_server.contains(&m.key()) {
                let _ = writeln!(
                    out,
                    "  {}    alerted by CloudStack's own VM map check",
                    " ".repeat(marker.len()),
                );
            }
            if let Some(rule) = c.ignored.get(&m.key()) {
                let _ = writeln!(
                    out,
                    "  {}    ignored by [[ignore]] {}",
                    " ".repeat(marker.len()),
                    escaped(rule)
                );
            }
        }
    }
    out
}

/// The text report's last line: what the check sent, by channel, or that nothing was and
/// why. `delivered` counts per `(channel, outcome)`; `None` when the check did not notify
/// (`--no-notify`).
pub fn sent_text(delivered: Option<&DeliveryCounts>) -> String {
    let Some(counts) = delivered else {
        return "Sent: nothing (--no-notify).\n".into();
    };
    let count = |channel: &'static str, outcome: &'static str| {
        counts.get(&(channel, outcome)).copied().unwrap_or_default()
    };
    let plural = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let mut sent = Vec::new();
    for (channel, one, many) in [
        ("event_log", "event log line", "event log lines"),
        (
            "alert",
            "CloudStack alert raised or archived",
            "CloudStack alerts raised or archived",
        ),
        (
            "annotation",
            "annotation added or removed",
            "annotations added or removed",
        ),
    ] {
        let n = count(channel, "delivered");
        if n > 0 {
            sent.push(plural(n, one, many));
        }
    }
    let total = |outcome: &'static str| -> u64 {
        ["event_log", "alert", "annotation"]
            .iter()
            .map(|c| count(c, outcome))
            .sum()
    };
    let (failed, refused) = (total("failed"), total("refused"));
    let mut out = if sent.is_empty() {
        if failed + refused == 0 {
            "Sent: nothing (no mismatch is new or resolved).".to_string()
        } else {
            "Sent: nothing.".to_string()
        }
    } else {
        format!("Sent: {}.", sent.join(", "))
    };
    if failed > 0 {
        out.push_str(&format!(
            " Not delivered: {}, queued in the state file for the next run.",
            plural(failed, "notification", "notifications")
        ));
    }
    if refused > 0 {
        out.push_str(&format!(
            " Refused by CloudStack for good: {} (see the ERROR lines).",
            plural(refused, "notification", "notifications")
        ));
    }
    out.push('\n');
    out
}

/// 1 while any mismatch is open, else 3 if a cluster was compared only in part (its nodes
/// could not be listed, or an API call for it failed), else 0. Clusters skipped by rule or
/// because an operation ran during the check do not count.
pub fn exit_code(report: &CycleReport) -> i32 {
    if report.clusters.iter().any(|c| !c.mismatches.is_empty()) {
        exit::MISMATCHES
    } else if report.clusters.iter().any(|c| {
        c.status == ClusterStatus::Partial
            || c.skip == Some(crate::engine::cycle::SkipKind::ApiFailed)
    }) {
        exit::PARTIAL
    } else {
        exit::MATCHES
    }
}
