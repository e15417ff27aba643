//! The management server's own VM map check (apache/cloudstack PR 14666: a release that
//! carries it has the global, dynamic setting `cloud.kubernetes.cluster.vm.map.check.enabled`,
//! default true; a release without it has no such setting): whether it is there, and on.
//! Read each cycle with `listConfigurations name=`, which matches names with `LIKE %name%`
//! (`ManagementServerImpl.searchForConfigurations`), so the name is compared exactly here.

use serde::Deserialize;

/// The setting whose presence shows the check, and whose value turns it on.
pub const SETTING: &str = "cloud.kubernetes.cluster.vm.map.check.enabled";

/// A row of `listConfigurations`: only its name and value are read.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Configuration {
    pub name: String,
    #[serde(default)]
    pub value: Option<String>,
}

/// What the management server does about VM map drift itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServerCheck {
    /// The release has no such check.
    Absent,
    /// It has the check, switched off.
    Off,
    /// It has the check, on: it alerts each mismatch it finds by name.
    On,
}

impl ServerCheck {
    /// Reads the rows `listConfigurations name=SETTING` answered. A value other than
    /// `true`/`false` reads as `ConfigKey` reads it (`Boolean.parseBoolean`: anything but
    /// `true`, in any case, is false).
    pub fn from_rows(rows: &[Configuration]) -> ServerCheck {
        match rows.iter().find(|r| r.name == SETTING) {
            None => ServerCheck::Absent,
            Some(r)
                if r.value
                    .as_deref()
                    .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) =>
            {
                ServerCheck::On
            }
            Some(_) => ServerCheck::Off,
        }
    }

    /// As the metric's label and the JSON report name it.
    pub fn as_str(self) -> &'static str {
        match self {
            ServerCheck::Absent => "absent",
            ServerCheck::Off => "off",
            ServerCheck::On => "on",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, value: &str) -> Configuration {
        Configuration {
            name: name.into(),
            value: Some(value.into()),
        }
    }

    #[test]
    fn the_setting_is_found_by_its_exact_name_and_read_as_java_reads_a_boolean() {
        assert_eq!(ServerCheck::from_rows(&[]), ServerCheck::Absent);
        let longer = format!("{SETTING}.extra");
        assert_eq!(
            ServerCheck::from_rows(&[row(&longer, "true")]),
            ServerCheck::Absent
        );
        assert_eq!(
            ServerCheck::from_rows(&[row(SETTING, "TRUE")]),
            ServerCheck::On
        );
        assert_eq!(
            ServerCheck::from_rows(&[row(SETTING, "false")]),
            ServerCheck::Off
        );
        assert_eq!(
            ServerCheck::from_rows(&[row(SETTING, "yes")]),
            ServerCheck::Off
        );
    }
}
