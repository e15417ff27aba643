//! The Prometheus files the packages ship (`packaging/prometheus/`): the alerting rules pass
//! `promtool check rules` and their own unit tests (`promtool test rules`), each alert is tested
//! firing and held back and has its section in docs/runbook.md, and the rules and the Grafana
//! dashboard name only metrics the daemon exposes, in expressions promtool reads.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use cks_drift::daemon::metrics::Metrics;

const RULES: &str = "packaging/prometheus/cks-drift.rules.yml";
const RULE_TESTS: &str = "packaging/prometheus/cks-drift.rules.test.yml";
const DASHBOARD: &str = "packaging/prometheus/cks-drift.dashboard.json";
const RUNBOOK: &str = "docs/runbook.md";
/// Where the rules' `runbook_url` point: the runbook as both packages install it.
const RUNBOOK_URL: &str = "file:///usr/share/doc/cks-drift/docs/runbook.md";

fn path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(path(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

/// Runs promtool with `args`: whether it exited 0, and what it printed.
fn promtool(args: &[&str]) -> (bool, String) {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run promtool (Debian package prometheus)");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

/// The alerts of the rules file, each with its text up to the next one.
fn alerts(rules: &str) -> Vec<(String, String)> {
    rules
        .split("\n      - alert: ")
        .skip(1)
        .map(|block| {
            let (name, rest) = block.split_once('\n').unwrap();
            (name.trim().to_string(), rest.to_string())
        })
        .collect()
}

/// The metric names a text uses: every `cks_drift_…` word.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("cks_drift_") {
        let word: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        rest = &rest[at + word.len()..];
        names.insert(word);
    }
    names
}

/// The metric families the daemon exposes, from its own exposition.
fn exposed() -> BTreeSet<String> {
    Metrics::new(true)
        .render()
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect()
}

#[test]
fn the_alerting_rules_pass_promtool_and_their_unit_tests() {
    let count = alerts(&read(RULES)).len();
    assert_eq!(count, 11);
    let (ok, said) = promtool(&["check", "rules", RULES]);
    assert!(ok, "{said}");
    assert!(
        said.contains(&format!("SUCCESS: {count} rules found")),
        "{said}"
    );
    let (ok, said) = promtool(&["test", "rules", RULE_TESTS]);
    assert!(ok, "{said}");
    assert!(said.contains("SUCCESS"), "{said}");
}

#[test]
fn the_unit_tests_can_fail() {
    // The same tests with one expected description changed: promtool must report it.
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(path(RULES), dir.path().join("cks-drift.rules.yml")).unwrap();
    let tests = read(RULE_TESTS);
    let changed = tests.replacen("for 40m 0s:", "for 41m 0s:", 1);
    assert_ne!(changed, tests);
    let file = dir.path().join("changed.test.yml");
    std::fs::write(&file, changed).unwrap();
    let (ok, said) = promtool(&["test", "rules", file.to_str().unwrap()]);
    assert!(!ok, "{said}");
    assert!(said.contains("CksDriftClusterBlind"), "{said}");
}

/// Each alert waits (`for:`), has a severity, a summary, a description and a runbook link to
/// its own section, and its unit tests show it both firing and held back.
#[test]
fn every_alert_is_documented_and_tested_firing_and_held_back() {
    let rules = read(RULES);
    let tests = read(RULE_TESTS);
    let runbook = read(RUNBOOK);
    let mut names = BTreeSet::new();
    for (name, block) in alerts(&rules) {
        for key in ["for: ", "severity: ", "summary: ", "description: "] {
            assert!(block.contains(key), "{name} has no {key}");
        }
        let anchor = name.to_lowercase();
        assert!(
            block.contains(&format!("runbook_url: {RUNBOOK_URL}#{anchor}\n")),
            "{name}: runbook_url"
        );
        assert!(
            runbook.contains(&format!("\n## {name}\n")),
            "{RUNBOOK} has no section {name}"
        );
        let held_back = format!("alertname: {name}\n        exp_alerts: []\n");
        let firing = format!("alertname: {name}\n        exp_alerts:\n          - exp_labels:");
        assert!(
            tests.contains(&held_back),
            "{name} is never tested held back"
        );
        assert!(tests.contains(&firing), "{name} is never tested firing");
        names.insert(name);
    }
    // And the runbook has no section for an alert that is gone.
    let sections: BTreeSet<String> = runbook
        .lines()
        .filter_map(|l| l.strip_prefix("## CksDrift"))
        .map(|l| format!("CksDrift{l}"))
        .collect();
    assert_eq!(sections, names);
}

#[test]
fn the_rules_and_the_dashboard_name_only_metrics_the_daemon_exposes() {
    let exposed = exposed();
    assert!(
        exposed.contains("cks_drift_state_write_failing"),
        "{exposed:?}"
    );
    for file in [RULES, RULE_TESTS, DASHBOARD] {
        let used = metric_names(&read(file));
        assert!(used.contains("cks_drift_role"), "{file}: {used:?}");
        let unknown: Vec<&String> = used.difference(&exposed).collect();
        assert!(
            unknown.is_empty(),
            "{file} names unknown metrics {unknown:?}"
        );
    }
    let rules = metric_names(&read(RULES));
    for metric in [
        "cks_drift_open_mismatches",
        "cks_drift_blind_seconds",
        "cks_drift_cycles_total",
        "cks_drift_last_success_timestamp_seconds",
        "cks_drift_storm",
        "cks_drift_state_write_failing",
        "cks_drift_notifications_pending",
    ] {
        assert!(rules.contains(metric), "no rule uses {metric}");
    }
}

/// The dashboard's JSON: every panel's queries, with Grafana's variables given values, are
/// PromQL that promtool reads (checked as recording rules).
#[test]
fn the_dashboards_queries_are_promql() {
    let dashboard: serde_json::Value = serde_json::from_str(&read(DASHBOARD)).unwrap();
    assert_eq!(dashboard["uid"], "cks-drift");
    let panels = dashboard["panels"].as_array().unwrap();
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    let mut count = 0;
    for panel in panels {
        let title = panel["title"].as_str().unwrap();
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{title}: no query");
        for target in targets {
            let expr = target["expr"]
                .as_str()
                .unwrap_or_else(|| panic!("{title}: no expr"));
            let expr = expr
                .replace("$__rate_interval", "5m")
                .replace("$job", ".+")
                .replace("$instance", ".+");
            assert!(!expr.contains('$'), "{title}: unknown variable in {expr}");
            count += 1;
            let quoted = serde_json::Value::String(expr).to_string();
            rules.push_str(&format!(
                "      - record: dashboard:query_{count}\n        expr: {quoted}\n"
            ));
        }
    }
    assert!(count >= panels.len());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dashboard.rules.yml");
    std::fs::write(&file, &rules).unwrap();
    let (ok, said) = promtool(&["check", "rules", file.to_str().unwrap()]);
    assert!(ok, "{said}\n{rules}");
    assert!(
        said.contains(&format!("SUCCESS: {count} rules found")),
        "{said}"
    );
    // The check can fail: a query promtool cannot parse is reported.
    std::fs::write(&file, rules.replacen("sum(", "sum((", 1)).unwrap();
    let (ok, said) = promtool(&["check", "rules", file.to_str().unwrap()]);
    assert!(!ok, "{said}");
}
