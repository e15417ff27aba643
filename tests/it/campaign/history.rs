//! What a campaign leaves behind (CloudStack's alerts and annotations, every call with the
//! instance that made it and when, each instance's log, event log and state file, and what
//! the schedule did), and the invariants checked on it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use cks_drift_sim::{Call, SimAlert, SimAnnotation};
use serde_json::Value;

use super::schedule::{Step, count_by_kind};

/// One drift the schedule planted: the token its alert, annotation and event line name (a
/// VM's id or a node's name), and its VM's name where it has one.
#[derive(Debug, Clone)]
pub struct Drift {
    pub cluster: String,
    pub kind: &'static str,
    pub token: String,
    pub opened: SystemTime,
    pub closed: Option<SystemTime>,
}

/// An instance killed, started, paused or resumed, by its API front's port.
#[derive(Debug, Clone)]
pub struct Lifecycle {
    pub instance: u16,
    pub what: &'static str,
    pub at: SystemTime,
}

pub struct History {
    /// API front port → instance name.
    pub fronts: BTreeMap<u16, String>,
    pub calls: Vec<Call>,
    pub alerts: Vec<SimAlert>,
    pub annotations: Vec<SimAnnotation>,
    pub drifts: Vec<Drift>,
    pub lifecycle: Vec<Lifecycle>,
    pub applied: Vec<(SystemTime, Step)>,
    /// By API front port.
    pub logs: BTreeMap<u16, String>,
    pub event_logs: BTreeMap<u16, String>,
    /// `None` where there is none.
    pub state_files: BTreeMap<u16, Option<String>>,
    /// Each instance's metrics at the end, by API front port.
    pub metrics: BTreeMap<u16, String>,
    /// (id, name) of every cluster.
    pub clusters: Vec<(String, String)>,
}

/// How long a drift with no fault around it lasts before it must have been alerted: many
/// cycles of 1 s, a lock interval and a delivery.
const LEFT_ALONE: Duration = Duration::from_secs(8);
/// How long before a drift began a fault still counts as around it (a takeover, a queued
/// delivery, a database back need a few cycles to settle).
const BEFORE_QUIET: Duration = Duration::from_secs(10);

/// A broken invariant, and when (to show the steps around it).
pub struct Violation {
    pub invariant: &'static str,
    pub at: Option<SystemTime>,
    pub what: String,
}

/// Seconds since the epoch, for reading times side by side.
fn secs(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

/// `2026-12-04T05:10:11.123456Z` (the JSON log's timestamp) as a time.
fn parse_time(text: &str) -> Option<SystemTime> {
    let b = text.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[10] != b'T' {
        return None;
    }
    let n = |r: std::ops::Range<usize>| text.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (n(0..4)?, n(5..7)?, n(8..10)?);
    let (hh, mm, ss) = (n(11..13)?, n(14..16)?, n(17..19)?);
    let nanos = match text[19..].strip_prefix('.') {
        Some(rest) => {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            format!("{digits:0<9}")[..9].parse::<u64>().ok()?
        }
        None => 0,
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss;
    Some(SystemTime::UNIX_EPOCH + Duration::new(u64::try_from(secs).ok()?, nanos as u32))
}

impl History {
    fn name(&self, port: u16) -> &str {
        self.fronts.get(&port).map_or("?", String::as_str)
    }

    fn openings(&self, token: &str) -> usize {
        self.drifts.iter().filter(|d| d.token == token).count()
    }

    /// The tokens, each once, with whether a drift of it is open at the end.
    fn tokens(&self) -> BTreeMap<&str, bool> {
        let mut tokens: BTreeMap<&str, bool> = BTreeMap::new();
        for d in &self.drifts {
            *tokens.entry(d.token.as_str()).or_default() |= d.closed.is_none();
        }
        tokens
    }

    /// Every broken invariant.
    pub fn violations(&self) -> Vec<Violation> {
        let mut found = Vec::new();
        self.notified_once(&mut found);
        self.alerted_when_left_alone(&mut found);
        self.nothing_invented(&mut found);
        self.one_active_at_a_time(&mut found);
        self.event_lines_once(&mut found);
        self.state_files_load(&mut found);
        self.metrics_agree(&mut found);
        found
    }

    /// Every drift open at the end is alerted and annotated exactly once; every drift is
    /// alerted and annotated at most once per opening; every drift that ended has its alerts
    /// archived and its annotations removed.
    fn notified_once(&self, found: &mut Vec<Violation>) {
        for (token, open) in self.tokens() {
            // The finding's own, by the marker that ends it (`[cks-drift <cluster>/<kind>:
            // <token>]`, `[cks-drift <kind>:<token>]`): a storm's or a summary's alert may
            // quote the token too.
            let marker = format!(":{token}]");
            let alerts: Vec<&SimAlert> = self
                .alerts
                .iter()
                .filter(|a| a.description.ends_with(&marker))
                .collect();
            let notes: Vec<&SimAnnotation> = self
                .annotations
                .iter()
                .filter(|a| a.annotation.ends_with(&marker))
                .collect();
            let active_alerts = alerts.iter().filter(|a| !a.archived).count();
            let active_notes = notes.iter().filter(|a| !a.removed).count();
            let openings = self.openings(token);
            let opened = self
                .drifts
                .iter()
                .find(|d| d.token == token)
                .map(|d| d.opened);
            let mut say = |invariant, what: String| {
                found.push(Violation {
                    invariant,
                    at: opened,
                    what,
                })
            };
            if open && (active_alerts != 1 || active_notes != 1) {
                say(
                    "a drift open at the end is alerted and annotated exactly once",
                    format!("{token}: {active_alerts} open alerts, {active_notes} annotations"),
                );
            }
            if alerts.len() > openings || notes.len() > openings {
                say(
                    "a drift is alerted and annotated at most once per opening",
                    format!(
                        "{token}: opened {openings} times, {} alerts, {} annotations; the \
                         calls that name it:\n{}",
                        alerts.len(),
                        notes.len(),
                        self.calls_naming(token)
                    ),
                );
            }
            if !open && (active_alerts > 0 || active_notes > 0) {
                say(
                    "a drift that ended is archived and its annotation removed",
                    format!(
                        "{token}: {active_alerts} alerts still open, {active_notes} annotations left"
                    ),
                );
            }
        }
    }

    /// A drift that lasted [`LEFT_ALONE`] with no fault anywhere around it (no instance killed
    /// or paused, no outage of the API or the database, no full disk, no storm) was alerted
    /// and annotated (at most once per opening: see `notified_once`). The schedule's calms
    /// plant such drifts. Returns how many drifts were checked.
    fn alerted_when_left_alone(&self, found: &mut Vec<Violation>) -> usize {
        let mut checked = 0;
        let faults: Vec<SystemTime> = self
            .applied
            .iter()
            .filter(|(_, s)| s.event.cloud_fault().is_some())
            .map(|(t, _)| *t)
            .chain(self.storm_lines().into_iter().map(|(t, _)| t))
            .collect();
        // A fault under way when the drift began shows as its end within the drift's life, or
        // as its start before: both are steps near or inside the window.
        for d in &self.drifts {
            let Some(closed) = d.closed else {
                continue;
            };
            if !self.left_alone(d, &faults, closed) {
                continue;
            }
            checked += 1;
            let lasted = closed.duration_since(d.opened).unwrap_or_default();
            let marker = format!(":{}]", d.token);
            let alerted = self.alerts.iter().any(|a| a.description.ends_with(&marker));
            let annotated = self
                .annotations
                .iter()
                .any(|a| a.annotation.ends_with(&marker));
            if !(alerted && annotated) {
                found.push(Violation {
                    invariant: "a drift left alone long enough is alerted and annotated",
                    at: Some(d.opened),
                    what: format!(
                        "{} {} lasted {:.1} s with no fault around it; alerted: {alerted}, \
                         annotated: {annotated}",
                        d.kind,
                        d.token,
                        lasted.as_secs_f64()
                    ),
                });
            }
        }
        checked
    }

    /// Whether drift `d`, which ended at `closed`, lasted [`LEFT_ALONE`] with none of the
    /// `faults` around it.
    fn left_alone(&self, d: &Drift, faults: &[SystemTime], closed: SystemTime) -> bool {
        let lasted = closed.duration_since(d.opened).unwrap_or_default();
        let from = d.opened - BEFORE_QUIET;
        lasted >= LEFT_ALONE
            && !faults.iter().any(|&t| t >= from && t <= closed)
            && !self.fault_under_way(d.opened)
    }

    /// `(time, began)` of every instance's storm event lines (a storm of findings the
    /// schedule planted together, or of several drifts and blind clusters at once).
    fn storm_lines(&self) -> Vec<(SystemTime, bool)> {
        let mut lines: Vec<(SystemTime, bool)> = self
            .event_logs
            .values()
            .flat_map(|log| log.lines())
            .filter_map(|line| {
                let v: Value = serde_json::from_str(line).ok()?;
                if v["kind"] != "storm" {
                    return None;
                }
                Some((parse_time(v["time"].as_str()?)?, v["level"] == "WARN"))
            })
            .collect();
        lines.sort();
        lines
    }

    /// Whether a fault that began before `t` had not ended by then.
    fn fault_under_way(&self, t: SystemTime) -> bool {
        let storm_on = self
            .storm_lines()
            .into_iter()
            .take_while(|(at, _)| *at <= t)
            .last()
            .is_some_and(|(_, began)| began);
        if storm_on {
            return true;
        }
        let mut under_way = 0i32;
        for (at, s) in &self.applied {
            if *at > t {
                break;
            }
            match s.event.cloud_fault() {
                Some(true) => under_way += 1,
                Some(false) => under_way -= 1,
                None => {}
            }
        }
        under_way > 0
    }

    /// The state-changing calls whose parameters name `token`, with who made them and when.
    fn calls_naming(&self, token: &str) -> String {
        self.calls
            .iter()
            .filter(|c| c.is_state_changing() && c.params.values().any(|v| v.contains(token)))
            .map(|c| {
                format!(
                    "    {:.3}  {} {}",
                    secs(c.at),
                    self.name(c.front),
                    c.command
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Every alert and annotation names a drift that was planted, or is a storm's or a
    /// summary's, or a blind cluster's whose SSH the schedule took away; and none of them is
    /// open at the end unless what it names is.
    fn nothing_invented(&self, found: &mut Vec<Violation>) {
        let tokens = self.tokens();
        let names_drift = |text: &str| tokens.keys().any(|t| text.contains(t));
        let open_drift = |text: &str| tokens.iter().any(|(t, open)| *open && text.contains(t));
        for a in &self.alerts {
            let text = format!("{} {}", a.name, a.description);
            let other = is_storm_or_summary(&text) || self.blind_of_faulted_ssh(&text);
            if !names_drift(&text) && !other {
                found.push(Violation {
                    invariant: "nothing that was not drift is alerted",
                    at: None,
                    what: format!("alert {:?}: {}", a.name, a.description),
                });
            }
            if !a.archived && !open_drift(&text) {
                found.push(Violation {
                    invariant: "nothing is left alerted once everything settled",
                    at: None,
                    what: format!("alert {:?}: {}", a.name, a.description),
                });
            }
        }
        for n in &self.annotations {
            let blind = format!("{} {}", n.entity_id, n.annotation);
            if !names_drift(&n.annotation) && !self.blind_of_faulted_ssh(&blind) {
                found.push(Violation {
                    invariant: "nothing that was not drift is annotated",
                    at: None,
                    what: n.annotation.clone(),
                });
            }
            if !n.removed && !open_drift(&n.annotation) {
                found.push(Violation {
                    invariant: "nothing is left annotated once everything settled",
                    at: None,
                    what: n.annotation.clone(),
                });
            }
        }
    }

    /// A `blind` finding of a cluster whose control node's SSH the schedule refused or hung.
    fn blind_of_faulted_ssh(&self, text: &str) -> bool {
        use super::schedule::Event;
        if !text.contains("blind") && !text.contains("could not be listed") {
            return false;
        }
        self.applied.iter().any(|(_, s)| match s.event {
            Event::SshRefused(c) | Event::SshHang(c) => {
                self.clusters.get(c).is_some_and(|(id, name)| {
                    text.contains(id.as_str()) || text.contains(name.as_str())
                })
            }
            _ => false,
        })
    }

    /// At no moment are two instances active, and an instance sends nothing while it is not:
    /// from each instance's lock lines, its kills, pauses and resumptions, and the calls that
    /// change state, by the API front each instance has of its own.
    fn one_active_at_a_time(&self, found: &mut Vec<Violation>) {
        let mut intervals: Vec<(u16, SystemTime, SystemTime)> = Vec::new();
        let mut limbo: Vec<(u16, SystemTime, SystemTime)> = Vec::new();
        let holds: Vec<(u16, SystemTime)> = self
            .fronts
            .keys()
            .flat_map(|&p| {
                self.lock_lines(p)
                    .into_iter()
                    .filter(|(_, holds)| *holds)
                    .map(move |(t, _)| (p, t))
            })
            .collect();
        let end = SystemTime::now();
        for &port in self.fronts.keys() {
            let mut marks: Vec<(SystemTime, &str)> = self
                .lock_lines(port)
                .into_iter()
                .map(|(t, holds)| (t, if holds { "holds" } else { "lost" }))
                .collect();
            marks.extend(
                self.lifecycle
                    .iter()
                    .filter(|l| l.instance == port)
                    .map(|l| (l.at, l.what)),
            );
            marks.sort_by_key(|(t, _)| *t);
            let mut active: Option<SystemTime> = None;
            let mut paused_active: Option<SystemTime> = None;
            let mut in_limbo: Option<SystemTime> = None;
            for (t, what) in marks {
                match what {
                    "holds" => {
                        active = Some(t);
                        in_limbo = None;
                    }
                    "lost" | "killed" => {
                        if let Some(from) = active.take() {
                            intervals.push((port, from, t));
                        }
                        if let Some(from) = in_limbo.take() {
                            limbo.push((port, from, t));
                        }
                        paused_active = None;
                    }
                    "paused" => {
                        if let Some(from) = active.take() {
                            intervals.push((port, from, t));
                            paused_active = Some(t);
                        }
                    }
                    "resumed" => {
                        if let Some(paused) = paused_active.take() {
                            let taken = holds
                                .iter()
                                .any(|&(p, h)| p != port && h > paused && h <= t);
                            if taken {
                                in_limbo = Some(t);
                            } else {
                                active = Some(t);
                            }
                        }
                    }
                    _ => {}
                }
            }
            if let Some(from) = active {
                intervals.push((port, from, end));
            }
            if let Some(from) = in_limbo {
                limbo.push((port, from, end));
            }
        }
        for (i, a) in intervals.iter().enumerate() {
            for b in &intervals[i + 1..] {
                if a.0 != b.0 && a.1 < b.2 && b.1 < a.2 {
                    found.push(Violation {
                        invariant: "at no moment are two instances active",
                        at: Some(a.1.max(b.1)),
                        what: format!(
                            "{} active {:.3}..{:.3}, {} active {:.3}..{:.3}",
                            self.name(a.0),
                            secs(a.1),
                            secs(a.2),
                            self.name(b.0),
                            secs(b.1),
                            secs(b.2)
                        ),
                    });
                }
            }
        }
        for call in self.calls.iter().filter(|c| c.is_state_changing()) {
            let within = |&&(p, from, to): &&(u16, SystemTime, SystemTime)| {
                p == call.front && call.at >= from && call.at <= to
            };
            if limbo.iter().any(|l| within(&l)) {
                found.push(Violation {
                    invariant: "an instance whose lock was taken over sends nothing",
                    at: Some(call.at),
                    what: format!(
                        "{} sent {} at {:.3}",
                        self.name(call.front),
                        call.command,
                        secs(call.at)
                    ),
                });
            } else if call.front != 0 && !intervals.iter().any(|i| within(&i)) {
                found.push(Violation {
                    invariant: "only the active instance sends",
                    at: Some(call.at),
                    what: format!(
                        "{} sent {} at {:.3} while not active; its lock lines and life:\n{}",
                        self.name(call.front),
                        call.command,
                        secs(call.at),
                        self.marks_around(call.front, call.at)
                    ),
                });
            }
        }
    }

    /// The instance's lock lines and what the schedule did to it, 20 s either side of `at`.
    fn marks_around(&self, port: u16, at: SystemTime) -> String {
        let near = |t: SystemTime| {
            t.duration_since(at).unwrap_or_else(|e| e.duration()) < Duration::from_secs(20)
        };
        let mut marks: Vec<(SystemTime, String)> = self
            .lock_lines(port)
            .into_iter()
            .filter(|(t, _)| near(*t))
            .map(|(t, holds)| {
                (
                    t,
                    if holds { "holds the lock" } else { "lost it" }.to_string(),
                )
            })
            .collect();
        marks.extend(
            self.lifecycle
                .iter()
                .filter(|l| l.instance == port && near(l.at))
                .map(|l| (l.at, l.what.to_string())),
        );
        marks.sort();
        marks
            .iter()
            .map(|(t, what)| format!("    {:.3}  {what}", secs(*t)))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// `(time, holds)` of the instance's lock lines: it holds the lock, or lost it.
    fn lock_lines(&self, port: u16) -> Vec<(SystemTime, bool)> {
        let log = self.logs.get(&port).map_or("", String::as_str);
        log.lines()
            .filter_map(|line| {
                let holds = line.contains("this instance holds the lock");
                // The keeper's own check, or a delivery's fence, finding the lock gone.
                let lost = line.contains("this instance lost the lock")
                    || line.contains("no longer holds the lock")
                    || line.contains("cannot confirm the lock");
                if !holds && !lost {
                    return None;
                }
                let v: Value = serde_json::from_str(line).ok()?;
                Some((parse_time(v["timestamp"].as_str()?)?, holds))
            })
            .collect()
    }

    /// An event line opening a finding (WARN) is written once per opening of its drift, over
    /// every instance's event log, but for those an instance that took over marks as maybe
    /// written before it (`after_takeover`).
    fn event_lines_once(&self, found: &mut Vec<Violation>) {
        let mut lines: BTreeMap<&str, usize> = BTreeMap::new();
        let mut shown: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for (port, log) in &self.event_logs {
            for line in log.lines() {
                let Ok(v) = serde_json::from_str::<Value>(line) else {
                    continue;
                };
                // A line the instance that took over marked: the one before may have
                // written it too (CloudStack kept no trace of the finding to read back).
                if v["level"] != "WARN" || v["after_takeover"] == true {
                    continue;
                }
                let key = v["key"].as_str().unwrap_or_default();
                for token in self.tokens().keys() {
                    if key.ends_with(&format!(":{token}")) {
                        *lines.entry(token).or_default() += 1;
                        shown
                            .entry(token)
                            .or_default()
                            .push(format!("{}: {line}", self.name(*port)));
                    }
                }
            }
        }
        for (token, n) in lines {
            let openings = self.openings(token);
            if n > openings {
                found.push(Violation {
                    invariant: "an event line is written once per opening of a finding",
                    at: None,
                    what: format!(
                        "{token}: opened {openings} times, {n} WARN event lines:\n{}",
                        shown.get(token).map(|l| l.join("\n")).unwrap_or_default()
                    ),
                });
            }
        }
    }

    /// Once everything settled, one instance is active, and its metrics count the drifts
    /// still open, with nothing left to send.
    fn metrics_agree(&self, found: &mut Vec<Violation>) {
        let mut say = |what: String| {
            found.push(Violation {
                invariant: "the metrics agree once everything settled",
                at: None,
                what,
            });
        };
        let active: Vec<u16> = self
            .metrics
            .iter()
            .filter(|(_, text)| sample(text, "cks_drift_role{role=\"active\"}") == Some(1))
            .map(|(port, _)| *port)
            .collect();
        let [port] = active[..] else {
            say(format!(
                "{} instances say they are active: {:?}",
                active.len(),
                active.iter().map(|p| self.name(*p)).collect::<Vec<_>>()
            ));
            return;
        };
        let text = &self.metrics[&port];
        let open: u64 = text
            .lines()
            .filter(|l| l.starts_with("cks_drift_open_mismatches{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum();
        let drifts = self.tokens().values().filter(|open| **open).count() as u64;
        if open != drifts {
            say(format!(
                "{} counts {open} open mismatches, {drifts} drifts are open",
                self.name(port)
            ));
        }
        let pending = sample(text, "cks_drift_notifications_pending");
        if pending != Some(0) {
            say(format!(
                "{} has {pending:?} notifications still queued",
                self.name(port)
            ));
        }
    }

    /// Every state file is whole: JSON, as written.
    fn state_files_load(&self, found: &mut Vec<Violation>) {
        for (port, text) in &self.state_files {
            // None at all: the instance never held the lock long enough to write one.
            let Some(text) = text else {
                continue;
            };
            if serde_json::from_str::<Value>(text).is_err() {
                found.push(Violation {
                    invariant: "every state file loads",
                    at: None,
                    what: format!(
                        "{}'s state file ({} bytes) is not whole: {:?}",
                        self.name(*port),
                        text.len(),
                        &text[..text.len().min(120)]
                    ),
                });
            }
        }
    }

    /// The seed, the events by kind, the drifts, the invariants and each violation with the
    /// steps around it.
    /// Writes every instance's log, event log and state file, and the summary, under `dir`,
    /// for a failed campaign to be read after its temporary folder is gone. Returns `dir`.
    pub fn keep(&self, dir: &std::path::Path, summary: &str) -> std::path::PathBuf {
        std::fs::create_dir_all(dir).expect("create the folder for the campaign's files");
        let write = |name: String, text: &str| {
            std::fs::write(dir.join(name), text).expect("keep a campaign file");
        };
        for (port, name) in &self.fronts {
            write(
                format!("{name}.log"),
                self.logs.get(port).map_or("", String::as_str),
            );
            write(
                format!("{name}.events.jsonl"),
                self.event_logs.get(port).map_or("", String::as_str),
            );
            if let Some(Some(state)) = self.state_files.get(port) {
                write(format!("{name}.state.json"), state);
            }
        }
        write("summary.txt".to_string(), summary);
        dir.to_path_buf()
    }

    pub fn summary(&self, seed: u64, steps: &[Step], violations: &[Violation]) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "campaign seed {seed:#x}: {} events", steps.len());
        for (kind, n) in count_by_kind(steps) {
            let _ = writeln!(out, "  {n:>4}  {kind}");
        }
        let _ = writeln!(
            out,
            "drifts planted: {} ({} open at the end); alerts {}, annotations {}, calls {} \
             ({} changing state)",
            self.drifts.len(),
            self.drifts.iter().filter(|d| d.closed.is_none()).count(),
            self.alerts.len(),
            self.annotations.len(),
            self.calls.len(),
            self.calls.iter().filter(|c| c.is_state_changing()).count()
        );
        let marked = self
            .event_logs
            .values()
            .flat_map(|log| log.lines())
            .filter(|line| line.contains("\"after_takeover\":true"))
            .count();
        let _ = writeln!(out, "event lines marked after a takeover: {marked}");
        let left_alone = self.alerted_when_left_alone(&mut Vec::new());
        let _ = writeln!(
            out,
            "drifts that ended after lasting {} s with no fault around them: {left_alone}",
            LEFT_ALONE.as_secs()
        );
        // Per kind: drifts planted, and how many of their tokens CloudStack has an alert of
        // (a drift over before a cycle saw it, or held by a storm, has none).
        let mut kinds: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        for d in &self.drifts {
            let marker = format!(":{}]", d.token);
            let alerted = self.alerts.iter().any(|a| a.description.ends_with(&marker));
            let entry = kinds.entry(d.kind).or_default();
            entry.0 += 1;
            entry.1 += usize::from(alerted);
        }
        for (kind, (n, alerted)) in kinds {
            let _ = writeln!(
                out,
                "  {n:>4}  {kind} ({alerted} with an alert of their own)"
            );
        }
        let _ = writeln!(
            out,
            "invariants checked: 7 (notified once, alerted when left alone, nothing invented, one \
             active at a time, event lines once, state files whole, metrics agree); violations: {}",
            violations.len()
        );
        if !violations.is_empty() {
            let _ = writeln!(out, "the steps as applied:");
            for (t, s) in &self.applied {
                let _ = writeln!(out, "    {:.3}  {s}", secs(*t));
            }
            for (port, name) in &self.fronts {
                let _ = writeln!(out, "{name} is API front {port}");
            }
        }
        for v in violations {
            let _ = writeln!(out, "VIOLATION: {}: {}", v.invariant, v.what);
            if let Some(at) = v.at {
                let around: Vec<String> = self
                    .applied
                    .iter()
                    .filter(|(t, _)| {
                        t.duration_since(at).unwrap_or_else(|e| e.duration())
                            < Duration::from_secs(8)
                    })
                    .map(|(t, s)| format!("    {:.3}  {s}", secs(*t)))
                    .collect();
                let _ = writeln!(
                    out,
                    "  steps around {:.3}:\n{}",
                    secs(at),
                    around.join("\n")
                );
            }
        }
        out
    }
}

/// A storm's alert, or a summary standing for findings beyond the caps.
/// The value of the sample `name` (with its labels, as written) in a metrics text.
fn sample(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

fn is_storm_or_summary(text: &str) -> bool {
    let lower = text.to_lowercase();
    lower.contains("storm") || lower.contains("summary") || lower.contains("more finding")
}
