//! The event log: one JSON object per line, appended and synced, plus the same event on the
//! log stream. CloudStack has no API that creates an event, so this is where the
//! `KUBERNETES.CLUSTER.VM.MAP.CHECK` events live.
//!
//! Appending is idempotent: each line carries the id of the outbox item it delivers, and a
//! line already among the log's last lines is not written again. A delivery batch cut short
//! by a crash is delivered again from the saved outbox, and its lines must not repeat (alerts
//! and annotations are recognised by their markers instead).

use std::collections::HashSet;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::notify::messages::EVENT_ALREADY_WRITTEN;
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
    /// The outbox item's id: two events alike in every other field stay two lines.
    id: u64,
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
    /// The instance before may have written this line too (see `Notification::Event`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    after_takeover: bool,
}

/// The most of the log's end that [`Tail::read`] reads, whatever the lines' length: a bound
/// on memory should the file end in something that is not lines.
const TAIL_BYTES_MAX: u64 = 16 * 1024 * 1024;

/// The last lines of the event log, read when delivery starts: what a crash in the middle of
/// the previous delivery may have written already.
#[derive(Debug, Default)]
pub struct Tail {
    lines: HashSet<String>,
    /// The log ends in a line cut short (a crash in the middle of a write): the next line
    /// must start on a line of its own.
    cut: bool,
}

impl Tail {
    /// The last `count` lines of `path` (none when it does not exist yet). Read backwards in
    /// blocks, so that a long log costs no more than its end.
    pub fn read(path: &Path, count: usize) -> Result<Tail, EventLogError> {
        let err = |source| EventLogError {
            path: path.to_path_buf(),
            source,
        };
        let mut file = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
        {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Tail::default()),
            Err(e) => return Err(err(e)),
        };
        let len = file.seek(SeekFrom::End(0)).map_err(err)?;
        let floor = len.saturating_sub(TAIL_BYTES_MAX);
        let mut start = len;
        let mut blocks: Vec<Vec<u8>> = Vec::new();
        let mut newlines = 0;
        // One line more than asked for: the first one found may be cut.
        while start > floor && newlines <= count {
            let step = (start - floor).min(64 * 1024);
            start -= step;
            let mut block = vec![0; step as usize];
            file.seek(SeekFrom::Start(start)).map_err(err)?;
            file.read_exact(&mut block).map_err(err)?;
            newlines += block.iter().filter(|&&b| b == b'\n').count();
            blocks.push(block);
        }
        blocks.reverse();
        let end = blocks.concat();
        let cut = end.last().is_some_and(|&b| b != b'\n');
        let text = String::from_utf8_lossy(&end);
        let mut lines: Vec<&str> = text.split_terminator('\n').collect();
        if start > 0 && !lines.is_empty() {
            lines.remove(0);
        }
        let skip = lines.len().saturating_sub(count);
        Ok(Tail {
            lines: lines[skip..].iter().map(|l| l.to_string()).collect(),
            cut,
        })
    }
}

/// Appends an event (a `Notification::Event`, queued as outbox item `id`; anything else is
/// ignored) to `path`, creating its folders, and logs it, unless the very line is in `tail`:
/// then it was written before a crash, and logged then. Whether it was written now.
pub fn append(
    path: &Path,
    id: u64,
    n: &Notification,
    tail: &mut Tail,
) -> Result<bool, EventLogError> {
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
        after_takeover,
    } = n
    else {
        return Ok(false);
    };
    let line = Line {
        id,
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
        after_takeover: *after_takeover,
    };
    let mut text = crate::base::untrusted::json_visible(
        serde_json::to_string(&line).expect("events serialize"),
    );
    if tail.lines.contains(&text) {
        tracing::debug!(id, path = %path.display(), "{EVENT_ALREADY_WRITTEN}");
        return Ok(false);
    }
    text.push('\n');
    if tail.cut {
        text.insert(0, '\n');
    }
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
    tail.cut = false;
    match level {
        Level::Warn => {
            tracing::warn!(
                event = EVENT_TYPE,
                cluster = %cluster,
                cluster_id = %cluster_id,
                key = key.as_deref().unwrap_or(""),
                "{description}"
            )
        }
        Level::Info => {
            tracing::info!(
                event = EVENT_TYPE,
                cluster = %cluster,
                cluster_id = %cluster_id,
                "{description}"
            )
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::time::Timestamp;

    fn event(key: &str) -> Notification {
        Notification::Event {
            level: Level::Warn,
            cluster_id: "c-1".into(),
            cluster: "web".into(),
            key: Some(key.into()),
            kind: Some("unmapped_vm".into()),
            vm_id: None,
            vm_name: None,
            node: None,
            description: format!("{key} found"),
            time: Timestamp::parse("2026-11-30T10:00:00Z").unwrap(),
            after_takeover: false,
        }
    }

    fn lines(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn a_line_in_the_tail_is_not_written_again_and_each_line_has_its_id() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log/events.jsonl");
        let mut tail = Tail::read(&path, 50).unwrap();
        assert!(append(&path, 7, &event("a"), &mut tail).unwrap());
        assert!(append(&path, 8, &event("b"), &mut tail).unwrap());
        assert_eq!(
            lines(&path)[0],
            "{\"id\":7,\"time\":\"2026-11-30T10:00:00Z\",\"type\":\"KUBERNETES.CLUSTER.VM.MAP.CHECK\",\"level\":\"WARN\",\"cluster_id\":\"c-1\",\"cluster\":\"web\",\"key\":\"a\",\"kind\":\"unmapped_vm\",\"description\":\"a found\"}"
        );
        // Delivered again, as after a crash: read from the log's end, the lines are there.
        let mut tail = Tail::read(&path, 50).unwrap();
        assert!(!append(&path, 7, &event("a"), &mut tail).unwrap());
        assert!(!append(&path, 8, &event("b"), &mut tail).unwrap());
        // The same event under another id is another line.
        assert!(append(&path, 9, &event("a"), &mut tail).unwrap());
        assert_eq!(lines(&path).len(), 3);
    }

    #[test]
    fn the_tail_is_the_last_lines_however_long_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let mut tail = Tail::default();
        // Lines longer than a block, and more of them than the tail holds.
        let long = "x".repeat(70 * 1024);
        for id in 0..6 {
            append(&path, id, &event(&format!("{id}{long}")), &mut tail).unwrap();
        }
        let tail = Tail::read(&path, 2).unwrap();
        let all = lines(&path);
        let expected: HashSet<String> = all[4..].iter().cloned().collect();
        assert_eq!(tail.lines, expected);
        assert!(!tail.cut);
        assert!(
            Tail::read(&dir.path().join("none"), 2)
                .unwrap()
                .lines
                .is_empty()
        );
    }

    #[test]
    fn a_line_cut_by_a_crash_does_not_swallow_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        std::fs::write(&path, "{\"id\":1,\"time\":\"2026-11-30T10:00:00Z\",\"ty").unwrap();
        let mut tail = Tail::read(&path, 50).unwrap();
        assert!(tail.cut);
        assert!(append(&path, 1, &event("a"), &mut tail).unwrap());
        assert!(append(&path, 2, &event("b"), &mut tail).unwrap());
        let all = lines(&path);
        assert_eq!(all.len(), 3, "{all:?}");
        assert!(all[1].starts_with("{\"id\":1,") && all[2].starts_with("{\"id\":2,"));
        for line in &all[1..] {
            serde_json::from_str::<serde_json::Value>(line).unwrap();
        }
    }
}
