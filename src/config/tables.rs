//! The tables of the file and the keys each takes, from the keys' declarations: what a table
//! or key no release knows is, with the closest known one ("did you mean"), or why it does
//! not exist.

use super::key::{Key, key_name};
use super::reader::Reader;

/// Every table but `[[ignore]]` with the keys it takes, in the order messages list them.
/// Anything else in the file is reported as unknown.
pub const TABLES: &[(&str, &[&Key])] = &[
    ("cloudstack", super::cloudstack::KEYS),
    ("ssh", super::ssh::KEYS),
    ("check", super::check::KEYS),
    ("state", super::state::KEYS),
    ("notify", super::notify::KEYS),
    ("http", super::http::KEYS),
    ("log", super::log::KEYS),
    ("database", super::database::KEYS),
    ("alertmanager", super::alertmanager::KEYS),
];

/// The keys `table` takes, `None` for a table no release knows.
pub fn table_keys(table: &str) -> Option<&'static [&'static Key]> {
    TABLES
        .iter()
        .find(|(t, _)| *t == table)
        .map(|(_, keys)| *keys)
}

/// The problem of a table no release knows.
pub(super) const UNKNOWN_TABLE: &str = "is not a known table; the tables are [cloudstack], \
     [ssh], [check], [state], [notify], [http], [log], [database], [alertmanager] and \
     [[ignore]]";

/// The problem of a table no release knows, with the closest known table's name.
pub fn unknown_table(table: &str) -> String {
    let closest = TABLES
        .iter()
        .map(|(t, _)| *t)
        .chain(["ignore"])
        .map(|t| (strsim::jaro_winkler(table, t), t))
        .filter(|(score, _)| *score >= 0.85)
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match closest {
        Some((_, "ignore")) => format!("{UNKNOWN_TABLE}; did you mean [[ignore]]?"),
        Some((_, t)) => format!("{UNKNOWN_TABLE}; did you mean [{t}]?"),
        None => UNKNOWN_TABLE.to_string(),
    }
}

/// Keys that do not exist on purpose, and why: what people look for and where it comes from.
const NOT_KEYS: &[(&str, &str)] = &[
    (
        "ssh.port",
        "there is no port to set: each cluster's port follows CKS, 22 on Shared or ROUTED \
         networks with one control node, else 2222 (the port forwarding rule CKS creates to \
         the first control node)",
    ),
    (
        "ssh.host",
        "there is no host to set: each cluster's control node is reached at the address of \
         its endpoint",
    ),
    (
        "ssh.passphrase",
        "passphrases are not supported; give an unencrypted key (ssh-keygen -p -N '' -f \
         <copy of the key>)",
    ),
    (
        "database.port",
        "the port is part of database.url, e.g. \"mysql://cksdrift@db.example.com:3306/cloud\"",
    ),
    (
        "database.password",
        "a password is never written in the config; put it in database.password_file or \
         CKS_DRIFT_DB_PASSWORD",
    ),
];

/// The problem of an unknown key: the reason where it does not exist on purpose, else the
/// nearest known key in any table ("did you mean"), then the keys its table takes.
pub fn unknown_key(table: &str, key: &str) -> String {
    let full = format!("{table}.{key}");
    let takes = table_keys(table)
        .map(|keys| {
            let names: Vec<&str> = keys.iter().map(|k| k.name).collect();
            format!("[{table}] takes {}", names.join(", "))
        })
        .unwrap_or_default();
    if let Some((_, why)) = NOT_KEYS.iter().find(|(k, _)| *k == full) {
        return format!("is not a key: {why}; {takes}");
    }
    // The same name in another table first (a key put in the wrong table), then the closest
    // spelling anywhere.
    let everywhere = TABLES.iter().flat_map(|(_, keys)| keys.iter());
    let best = everywhere
        .map(|k| {
            let score = if k.name == key {
                1.0
            } else {
                strsim::jaro_winkler(key, k.name) - if k.table == table { 0.0 } else { 0.05 }
            };
            (score, k.table, k.name)
        })
        .filter(|(score, ..)| *score >= 0.85)
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match best {
        Some((_, t, k)) => format!("is not a known key; did you mean {t}.{k}? {takes}"),
        None => format!("is not a known key; {takes}"),
    }
}

/// Tables and keys no release knows, each problem naming the closest known one.
pub(super) fn unknown_keys(r: &mut Reader<'_>) {
    for (table, value) in r.root {
        if table == "ignore" {
            // An array of tables, read (and checked) by `ignore_rules`.
            continue;
        }
        match table_keys(table) {
            None => r.problem(&key_name(table), unknown_table(table)),
            Some(keys) => match value.as_table() {
                None => r.problem(table, "must be a table"),
                Some(t) => {
                    for name in t.keys() {
                        if !keys.iter().any(|k| k.name == name) {
                            r.problem(
                                &format!("{table}.{}", key_name(name)),
                                unknown_key(table, name),
                            );
                        }
                    }
                }
            },
        }
    }
}
