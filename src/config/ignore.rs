//! `[[ignore]]`: drift an operator has accepted, one rule a table; the fields of a rule, what
//! it may match, and when it expires.

use super::key::{Default, Key, Kind, key_name};
use super::messages::{
    IGNORE_NO_REASON, IGNORE_NODE_WITHOUT_CLUSTER, IGNORE_VM_NAME_WITHOUT_CLUSTER,
};
use super::reader::Reader;
use crate::base::id::is_uuid;
use crate::base::time::Timestamp;

/// One `[[ignore]]` rule: findings it matches are reported, marked ignored, and not alerted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoreRule {
    /// 1-based position among the `[[ignore]]` tables, as messages and metrics name it.
    pub number: usize,
    /// Cluster name or id.
    pub cluster: Option<String>,
    pub kind: Option<String>,
    /// VM name or id.
    pub vm: Option<String>,
    /// Node name.
    pub node: Option<String>,
    pub reason: String,
    pub expires: Option<Timestamp>,
    pub by: Option<String>,
}

/// The kinds of finding, as the report names them: what `[[ignore]]`'s `kind` may be.
pub const KIND_NAMES: [&str; 7] = [
    "mapped_vm",
    "unmapped_vm",
    "node_without_vm",
    "vm_not_a_node",
    "map_count",
    "blind",
    "identity_conflict",
];

const fn field(name: &'static str, doc: &'static str) -> Key {
    Key {
        table: "ignore",
        name,
        default: Default::Unset,
        doc,
        kind: Kind::Text,
    }
}

/// The fields of an `[[ignore]]` rule, in the order messages list them. Not in
/// `tables::TABLES`: `[[ignore]]` is a list of tables, read by [`Reader::ignore_rules`].
pub const FIELDS: &[&Key] = &[
    &field("cluster", "cluster name or id"),
    &field("kind", "a kind of finding"),
    &field("vm", "VM name or id"),
    &field("node", "node name"),
    &field("reason", "why this drift is accepted"),
    &field("expires", "when the rule ends"),
    &field("by", "who accepted it"),
];

/// The key of `field` in the `[[ignore]]` rule at 1-based position `number`.
fn rule_key(number: usize, field: &str) -> String {
    format!("ignore[{number}].{field}")
}

/// How to write `expires`, at the end of every problem with it.
const EXPIRY_HOW: &str = "give an RFC 3339 date-time such as 2026-12-31T00:00:00Z, or a date \
     such as 2026-12-31 (its midnight UTC)";

/// Why `expires` is not a point in time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpiryError {
    /// Neither a string nor a TOML date-time.
    #[error("must be a date-time, not {kind}; {EXPIRY_HOW}")]
    NotADateTime { kind: &'static str },
    /// A local date-time: it would end at a different moment on every host.
    #[error("is {text:?}, which has no time zone; {EXPIRY_HOW}")]
    NoTimeZone { text: String },
    #[error("is {text:?}; {EXPIRY_HOW}")]
    Unreadable { text: String },
}

/// `expires`: an RFC 3339 date-time, or a date alone (its midnight UTC); a TOML date-time or a
/// string.
pub fn parse_expiry(value: &toml::Value) -> Result<Timestamp, ExpiryError> {
    let text = match value {
        toml::Value::String(s) => s.trim().to_string(),
        toml::Value::Datetime(d) => d.to_string(),
        other => {
            return Err(ExpiryError::NotADateTime {
                kind: other.type_str(),
            });
        }
    };
    let full = if text.len() == 10 {
        format!("{text}T00:00:00Z")
    } else {
        text.clone()
    };
    let zoned = full.ends_with('Z')
        || full.ends_with('z')
        || full.len() > 19 && matches!(full.as_bytes()[full.len() - 6], b'+' | b'-');
    match Timestamp::parse(&full) {
        Some(t) if zoned => Ok(t),
        Some(_) => Err(ExpiryError::NoTimeZone { text }),
        None => Err(ExpiryError::Unreadable { text }),
    }
}

impl Reader<'_> {
    /// `[[ignore]]`, in file order.
    pub(super) fn ignore_rules(&mut self) -> Vec<IgnoreRule> {
        let Some(value) = self.root.get("ignore") else {
            return Vec::new();
        };
        let Some(items) = value.as_array() else {
            self.problem(
                "ignore",
                "must be written [[ignore]]: a list of rules, each a table",
            );
            return Vec::new();
        };
        items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| self.ignore_rule(i + 1, item))
            .collect()
    }

    /// The `[[ignore]]` rule at 1-based position `number`; `None` when it is not a table.
    /// A rule with problems is still returned: the problems refuse the whole config.
    fn ignore_rule(&mut self, number: usize, item: &toml::Value) -> Option<IgnoreRule> {
        let Some(t) = item.as_table() else {
            self.problem(&format!("ignore[{number}]"), "must be a table");
            return None;
        };
        for key in t.keys() {
            if !FIELDS.iter().any(|f| f.name == key) {
                let names: Vec<&str> = FIELDS.iter().map(|f| f.name).collect();
                self.problem(
                    &rule_key(number, &key_name(key)),
                    format!("is not a known field; a rule takes {}", names.join(", ")),
                );
            }
        }
        // The fields are read in this order, and their problems are listed in it.
        let rule = IgnoreRule {
            number,
            cluster: self.rule_text(number, t, "cluster"),
            kind: self.rule_text(number, t, "kind"),
            vm: self.rule_text(number, t, "vm"),
            node: self.rule_text(number, t, "node"),
            reason: self.rule_text(number, t, "reason").unwrap_or_default(),
            expires: None,
            by: self.rule_text(number, t, "by"),
        };
        self.rule_scope(&rule);
        // An empty or mistyped reason has its problem already.
        if !t.contains_key("reason") {
            self.problem(&rule_key(number, "reason"), IGNORE_NO_REASON);
        }
        let expires = self.rule_expiry(number, t);
        Some(IgnoreRule { expires, ..rule })
    }

    /// A text field of rule `number`: trimmed, and `None` when it is absent, empty or not a
    /// string (with the problem of the last two).
    fn rule_text(&mut self, number: usize, t: &toml::Table, field: &str) -> Option<String> {
        match t.get(field)? {
            toml::Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
            toml::Value::String(_) => {
                self.problem(&rule_key(number, field), "is empty");
                None
            }
            other => {
                self.problem(
                    &rule_key(number, field),
                    format!("must be a string, not {}", other.type_str()),
                );
                None
            }
        }
    }

    /// Problems with what a rule matches: a kind no finding has, every finding, or a name
    /// in every tenant's clusters.
    fn rule_scope(&mut self, rule: &IgnoreRule) {
        let number = rule.number;
        if let Some(k) = &rule.kind
            && !KIND_NAMES.contains(&k.as_str())
        {
            self.problem(
                &rule_key(number, "kind"),
                format!("is {k:?}; the kinds are {}", KIND_NAMES.join(", ")),
            );
        }
        if rule.cluster.is_none() && rule.kind.is_none() && rule.vm.is_none() && rule.node.is_none()
        {
            self.problem(
                &format!("ignore[{number}]"),
                "matches every finding; give at least one of cluster, kind, vm and node",
            );
        }
        // A name is the tenant's to choose and not unique: a VM or node name without a
        // cluster would match that name in every tenant's cluster. A VM's id is unique in
        // the whole cloud.
        if rule.cluster.is_none() {
            if rule.node.is_some() {
                self.problem(&rule_key(number, "cluster"), IGNORE_NODE_WITHOUT_CLUSTER);
            } else if rule.vm.as_deref().is_some_and(|v| !is_uuid(v)) {
                self.problem(&rule_key(number, "cluster"), IGNORE_VM_NAME_WITHOUT_CLUSTER);
            }
        }
    }

    /// `expires` of rule `number`, when it has one that parses.
    fn rule_expiry(&mut self, number: usize, t: &toml::Table) -> Option<Timestamp> {
        match parse_expiry(t.get("expires")?) {
            Ok(when) => Some(when),
            Err(e) => {
                self.problem(&rule_key(number, "expires"), e.to_string());
                None
            }
        }
    }
}
