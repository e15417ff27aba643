//! The event log: one JSON object per line, appended and synced, plus the same event on the
//! log stream. CloudStack has no API that creates an event, so this is where the
//! `KUBERNETES.CLUSTER.VM.MAP.CHECK` events live.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::state::{EVENT_TYPE, Level, Notification};

#[derive(Debug, thiserror::Error)]
#[error("cannot append to the event log {path}")]
pub struct EventLogError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

#[derive(Serialize)]
struct Line<'a> {
    time: String,
    #[serde(rename = "type")]
    event_type: &'static str,
    level: Level,
    cluster_id: &'a str,
    cluster: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    vm_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    vm_name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    node: Option<&'a str>,
    description: &'a str,
}

/// Appends an event (a `Notification::Event`; anything else is ignored) to `path`, creating
/// its folders, and logs it.
pub fn append(path: &Path, n: &Notification) -> Result<(), EventLogError> {
    let Notification::Event {
        level,
        cluster_id,
        cluster,
        key,
        kind,
        vm_id,
        vm_name,
        node,
        description,
        time,
    } = n
    else {
        return Ok(());
    };
    let line = Line {
        time: time.to_string(),
        event_type: EVENT_TYPE,
        level: *level,
        cluster_id,
        cluster,
        key: key.as_deref(),
        kind: kind.as_deref(),
        vm_id: vm_id.as_deref(),
        vm_name: vm_name.as_deref(),
        node: node.as_deref(),
        description,
    };
    let mut text = serde_json::to_string(&line).expect("events serialize");
    text.push('\n');
    let err = |source| EventLogError {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    // Not through a symlink, and readable by the service's group at most, whatever the umask.
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o640)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(err)?;
    file.write_all(text.as_bytes()).map_err(err)?;
    file.sync_data().map_err(err)?;
    match level {
        Level::Warn => {
            tracing::warn!(event = EVENT_TYPE, cluster = %cluster, cluster_id = %cluster_id, key = key.as_deref().unwrap_or(""), "{description}")
        }
        Level::Info => {
            tracing::info!(event = EVENT_TYPE, cluster = %cluster, cluster_id = %cluster_id, "{description}")
        }
    }
    Ok(())
}
