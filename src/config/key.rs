//! The declaration of a setting (`Key`: table, name, default, bounds, what it holds), and how
//! a problem names a key. What follows from the list of them is in `tables`.

use std::time::Duration;

/// One setting of the file, declared once in the file of its table.
#[derive(Debug)]
pub struct Key {
    pub table: &'static str,
    pub name: &'static str,
    pub default: Default,
    /// What the key holds. For a `*_file` key of a secret, the secret the file holds, as the
    /// message of a missing file names it.
    pub doc: &'static str,
    pub kind: Kind,
}

/// What an absent key stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Default {
    /// There is none: the file must set it.
    Required,
    /// Absent means not used.
    Unset,
    /// It follows from other settings, as `docs/configuration.md` words it.
    Derived(&'static str),
    /// This value, as the file writes it (a string without its quotes).
    Is(&'static str),
}

/// The type of a value, with its bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Bool,
    Int {
        min: i64,
        max: i64,
    },
    /// Past `max` a setting makes no sense, and a deadline that far ahead would overflow the
    /// clock.
    Duration {
        min: Duration,
        max: Duration,
    },
    /// A string; its table's reader checks what it holds (a path, a URL, a choice...).
    Text,
    /// A list of strings.
    List,
}

impl Key {
    /// `table.name`, as problems name the key.
    pub fn full(&self) -> String {
        format!("{}.{}", self.table, self.name)
    }

    /// The default as the file writes it; `""` when there is none.
    pub fn default_text(&self) -> &'static str {
        match self.default {
            Default::Is(text) => text,
            _ => "",
        }
    }
}

/// A key of the file as TOML writes it: bare when it can be, else quoted (`""`, `"a b"`), so
/// that a problem always names the key the file holds.
pub fn key_name(key: &str) -> std::borrow::Cow<'_, str> {
    let bare = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if bare {
        key.into()
    } else {
        format!("{key:?}").into()
    }
}
