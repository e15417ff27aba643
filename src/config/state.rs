//! `[state]`: where what has been reported is kept.

use std::path::PathBuf;

use super::key::{Default, Key, Kind};
use super::reader::Reader;

/// `[state]`.
#[derive(Debug, Clone)]
pub struct StateSettings {
    pub path: PathBuf,
}

pub const DEFAULT_STATE_PATH: &str = "/var/lib/cks-drift/state.json";

pub const PATH: Key = Key {
    table: "state",
    name: "path",
    default: Default::Is(DEFAULT_STATE_PATH),
    doc: "dedupe state and queued notifications",
    kind: Kind::Text,
};

pub const KEYS: &[&Key] = &[&PATH];

impl Reader<'_> {
    /// `[state]`.
    pub(super) fn state(&mut self) -> StateSettings {
        StateSettings {
            path: self
                .path(&PATH)
                .unwrap_or_else(|| DEFAULT_STATE_PATH.into()),
        }
    }
}
