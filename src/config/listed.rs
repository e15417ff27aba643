//! The keys as declared against what people read: `config/cks-drift.toml` and the table of
//! `docs/configuration.md` list every key with its true default, and each default is a value
//! its key accepts.

use super::key::{Default, Key, Kind};
use super::tables::TABLES;
use super::{check, ignore, notify};
use crate::base::duration::parse_duration;

const EXAMPLE: &str = include_str!("../../config/cks-drift.toml");
const DOCS: &str = include_str!("../../docs/configuration.md");

/// Every key a file may hold, `[[ignore]]`'s fields included.
fn every_key() -> impl Iterator<Item = &'static Key> {
    TABLES
        .iter()
        .flat_map(|(_, keys)| keys.iter().copied())
        .chain(ignore::FIELDS.iter().copied())
}

/// The example with its commented-out settings and tables turned on (`# url = ...`,
/// `# [database]`), as TOML. Prose comments stay comments.
fn example_with_every_key() -> toml::Table {
    let setting = |line: &str| {
        let Some(rest) = line.strip_prefix("# ") else {
            return false;
        };
        rest.starts_with('[')
            || rest.split_once(" = ").is_some_and(|(name, _)| {
                !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
            })
    };
    let text: String = EXAMPLE
        .lines()
        .map(|line| if setting(line) { &line[2..] } else { line })
        .map(|line| format!("{line}\n"))
        .collect();
    text.parse()
        .expect("the example, its settings turned on, is TOML")
}

/// The value of `key` in the example, as the file writes it (a string without its quotes).
fn example_value(root: &toml::Table, key: &Key) -> Option<String> {
    let table = root.get(key.table)?;
    let table = match table {
        toml::Value::Array(rules) => rules.first()?,
        other => other,
    };
    match table.as_table()?.get(key.name)? {
        toml::Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// The problem of `key` in the example, if any.
fn example_problem(root: &toml::Table, key: &Key) -> Option<String> {
    let full = key.full();
    let Some(value) = example_value(root, key) else {
        return Some(format!("{full} is not in config/cks-drift.toml"));
    };
    match key.default {
        Default::Is(text) if value != text => Some(format!(
            "{full} is {value:?} in config/cks-drift.toml, but its default is {text:?}"
        )),
        _ => None,
    }
}

/// The rows of the table of keys in the docs: each key named in the first cell, with the
/// default the second cell gives it. `a.b, c` names `a.b` and `a.c`; `x, y` in the second cell
/// gives each key its own default when there are as many as keys.
fn docs_rows() -> Vec<(String, String)> {
    let mut rows = Vec::new();
    for line in DOCS.lines() {
        let cells: Vec<&str> = line.split(" | ").collect();
        let (Some(first), Some(default)) = (cells.first(), cells.get(1)) else {
            continue;
        };
        let Some(first) = first.strip_prefix("| `") else {
            continue;
        };
        let (table, names) = match first.strip_prefix("[[ignore]]` ") {
            Some(names) => ("ignore".to_string(), names.to_string()),
            None => match first.split_once('.') {
                Some((table, _)) => (
                    table.to_string(),
                    first.replacen(&format!("{table}."), "", 99),
                ),
                None => continue,
            },
        };
        let names: Vec<String> = names
            .split([',', '/'])
            .map(|n| n.trim().trim_matches('`').to_string())
            .map(|n| {
                n.strip_prefix(&format!("{table}."))
                    .map_or(n.clone(), str::to_string)
            })
            .collect();
        let parts: Vec<&str> = default.split(", ").collect();
        let own =
            parts.len() == names.len() && parts.iter().all(|p| p.starts_with('`') || *p == "none");
        for (i, name) in names.iter().enumerate() {
            let default = if own { parts[i] } else { default };
            rows.push((format!("{table}.{name}"), default.to_string()));
        }
    }
    rows
}

/// Whether `cell`, the docs' default of a key, says what `default` is.
fn docs_say(cell: &str, default: Default) -> bool {
    match default {
        Default::Required => cell.starts_with("(required"),
        Default::Unset => cell.starts_with("none"),
        Default::Derived(text) => cell == text,
        Default::Is(text) => cell == format!("`{text}`") || cell == format!("`\"{text}\"`"),
    }
}

#[test]
fn the_example_config_sets_every_key_to_its_default() {
    let root = example_with_every_key();
    // The example's one `[[ignore]]` rule shows a rule, not every field of one.
    let problems: Vec<String> = every_key()
        .filter(|key| key.table != "ignore")
        .filter_map(|key| example_problem(&root, key))
        .collect();
    assert_eq!(problems, Vec::<String>::new());
}

#[test]
fn the_docs_list_every_key_with_its_default() {
    let rows = docs_rows();
    let mut problems = Vec::new();
    for key in every_key() {
        let full = key.full();
        match rows.iter().find(|(name, _)| *name == full) {
            None => problems.push(format!("{full} is not in docs/configuration.md")),
            Some((_, cell)) if !docs_say(cell, key.default) => problems.push(format!(
                "{full}: docs/configuration.md says {cell:?}, but its default is {:?}",
                key.default
            )),
            Some(_) => {}
        }
    }
    for (name, _) in &rows {
        if !every_key().any(|k| k.full() == *name) {
            problems.push(format!(
                "docs/configuration.md lists {name}, which is not a key"
            ));
        }
    }
    assert_eq!(problems, Vec::<String>::new());
}

#[test]
fn every_default_is_a_value_its_key_takes() {
    for key in every_key() {
        let Default::Is(text) = key.default else {
            continue;
        };
        let full = key.full();
        match key.kind {
            Kind::Bool => assert!(matches!(text, "true" | "false"), "{full}"),
            Kind::Int { min, max } => {
                let n: i64 = text.parse().unwrap_or_else(|_| panic!("{full}: {text:?}"));
                assert!((min..=max).contains(&n), "{full}: {n}");
            }
            Kind::Duration { min, max } => {
                let d = parse_duration(text).unwrap_or_else(|e| panic!("{full}: {e}"));
                assert!(d >= min && d <= max, "{full}: {text}");
            }
            Kind::Text | Kind::List => {}
        }
    }
    assert_eq!(
        parse_duration(check::BLIND_AFTER.default_text()),
        Ok(check::DEFAULT_BLIND_AFTER)
    );
    assert_eq!(
        notify::parse_storm_clusters(&toml::Value::String(
            notify::STORM_CLUSTERS.default_text().into()
        )),
        Ok(notify::DEFAULT_STORM_CLUSTERS)
    );
}

#[test]
fn the_docs_rows_are_read_as_they_are_written() {
    let rows = docs_rows();
    let find = |name: &str| {
        rows.iter()
            .find(|(n, _)| n == name)
            .map(|(_, d)| d.as_str())
    };
    assert_eq!(find("database.query_timeout"), Some("`30s`"));
    assert_eq!(find("alertmanager.insecure"), Some("`false`"));
    assert_eq!(find("alertmanager.bearer_token_file"), Some("none"));
    assert_eq!(find("cloudstack.api_key_file"), Some("(required)"));
    assert_eq!(find("ignore.expires"), Some("none"));
}
