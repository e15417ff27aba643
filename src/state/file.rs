//! The state file on disk: taken under an exclusive lock before anything else, read (a
//! corrupt file is moved aside, never fatal), and written atomically (temporary file, fsync,
//! rename, fsync of the folder) with mode 0600.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::base::time::Timestamp;
use crate::state::v1::StateV1;
use crate::state::{State, VERSION};

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error(
        "state file {path} is in use by another cks-drift{}; stop it or point state.path \
         elsewhere, or check without notifying (cks-drift check --no-notify neither uses nor \
         locks the state file)",
        holder.map(|p| format!(" (pid {p})")).unwrap_or_default()
    )]
    Locked { path: PathBuf, holder: Option<u32> },
    #[error("cannot {action} {path}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("state file {path} cannot be read: {why}")]
    Unreadable { path: PathBuf, why: ParseError },
    #[error(
        "the state folder {dir} belongs to {owner} and this runs as root: the state file and its \
         lock would become root's, and {owner} (the service) could no longer open them; run it as \
         {owner} (sudo -u {owner} cks-drift ...), or check without notifying (cks-drift check \
         --no-notify neither uses nor writes the state file)"
    )]
    RootInServiceFolder { dir: PathBuf, owner: String },
    #[error(
        "cannot open {path}: permission denied for {user}; it belongs to {owner}: run as {owner} \
         (sudo -u {owner} cks-drift ...), or give it back with chown {owner} {path}"
    )]
    NotOurs {
        path: PathBuf,
        user: String,
        owner: String,
    },
}

/// Why a state file's bytes are not a state, in words that follow "cannot be read: ".
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    #[error("not JSON: {0}")]
    NotJson(serde_json::Error),
    #[error("not a cks-drift state: {0}")]
    NotAState(serde_json::Error),
    #[error("not a cks-drift state (version 1): {0}")]
    NotAStateV1(serde_json::Error),
    #[error("schema version {0}; this release reads versions 1 to {VERSION}")]
    Version(u64),
    #[error("no schema version")]
    NoVersion,
}

/// Refuses root in a state folder another user owns (the service's): what root creates there
/// (a first state file, its lock) the service could not open afterwards.
fn refuse_root_in_service_folder(dir: &Path) -> Result<(), StateError> {
    use std::os::unix::fs::MetadataExt;
    if !nix::unistd::geteuid().is_root() {
        return Ok(());
    }
    match std::fs::metadata(dir) {
        Ok(meta) if meta.uid() != 0 => Err(StateError::RootInServiceFolder {
            dir: dir.to_path_buf(),
            owner: crate::config::secret_file::user_name(meta.uid()),
        }),
        _ => Ok(()),
    }
}

/// The error of opening `path` for writing: for "permission denied", who owns it and what to
/// do.
fn open_error(path: &Path) -> impl FnOnce(std::io::Error) -> StateError + use<> {
    let path = path.to_path_buf();
    move |source| {
        use std::os::unix::fs::MetadataExt;
        if source.kind() == std::io::ErrorKind::PermissionDenied
            && let Ok(meta) = std::fs::symlink_metadata(&path)
        {
            return StateError::NotOurs {
                user: crate::config::secret_file::process_user(),
                owner: crate::config::secret_file::user_name(meta.uid()),
                path,
            };
        }
        StateError::Io {
            action: "open",
            path,
            source,
        }
    }
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> StateError + use<> {
    let path = path.to_path_buf();
    move |source| StateError::Io {
        action,
        path,
        source,
    }
}

/// How long a child process this process is starting may hold a copy of the lock.
const CHILD_HOLDS_AT_MOST: std::time::Duration = std::time::Duration::from_secs(5);
const CHILD_RETRY: std::time::Duration = std::time::Duration::from_millis(10);

/// The lock files this process holds now (by the path it opened them at).
fn held_here() -> std::sync::MutexGuard<'static, std::collections::BTreeSet<PathBuf>> {
    static HELD: std::sync::Mutex<std::collections::BTreeSet<PathBuf>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    HELD.lock().unwrap_or_else(|e| e.into_inner())
}

/// The state file, held under its lock for as long as this value lives.
#[derive(Debug)]
pub struct StateFile {
    path: PathBuf,
    _lock: File,
}

impl Drop for StateFile {
    fn drop(&mut self) {
        held_here().remove(&lock_path(&self.path));
    }
}

/// What opening found besides the state.
#[derive(Debug, Default, PartialEq)]
pub struct OpenNote {
    /// Where a corrupt or unreadable file was moved, and why.
    pub moved_aside: Option<(PathBuf, String)>,
    /// There was no state file.
    pub created: bool,
}

impl StateFile {
    /// Locks `<path>.lock` (exclusive, without waiting) and reads the state. A file that does
    /// not parse is renamed to `<path>.corrupt-<time>` and a fresh state is returned.
    pub fn open(path: &Path, now: Timestamp) -> Result<(StateFile, State, OpenNote), StateError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io("create the folder", dir))?;
            refuse_root_in_service_folder(dir)?;
        }
        let lock_path = lock_path(path);
        let mut lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&lock_path)
            .map_err(open_error(&lock_path))?;
        // The lock belongs to the open file, and a process being started (fork, then exec)
        // holds a copy of every descriptor until its exec closes them. So a lock this very
        // process released a moment ago may still be held by a child it is starting (the
        // lock file then names this process): that holder goes away by itself, and is waited
        // for. Another process's lock is refused at once.
        let mut waited = std::time::Duration::ZERO;
        loop {
            match lock.try_lock() {
                Ok(()) => break,
                Err(std::fs::TryLockError::WouldBlock) => {
                    let mut text = String::new();
                    let _ = lock.rewind();
                    let _ = lock.read_to_string(&mut text);
                    let holder: Option<u32> = text.trim().parse().ok();
                    let child_copy =
                        holder == Some(std::process::id()) && !held_here().contains(&lock_path);
                    if child_copy && waited < CHILD_HOLDS_AT_MOST {
                        std::thread::sleep(CHILD_RETRY);
                        waited += CHILD_RETRY;
                        continue;
                    }
                    return Err(StateError::Locked {
                        path: path.to_path_buf(),
                        holder,
                    });
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(io("lock", &lock_path)(e)),
            }
        }
        lock.set_len(0).map_err(io("write", &lock_path))?;
        lock.rewind().map_err(io("write", &lock_path))?;
        writeln!(lock, "{}", std::process::id()).map_err(io("write", &lock_path))?;
        held_here().insert(lock_path.clone());

        let mut note = OpenNote::default();
        let state = match std::fs::read(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                note.created = true;
                State::default()
            }
            Err(e) => {
                let why = format!("unreadable: {e}");
                note.moved_aside = Some((move_aside(path, now)?, why));
                State::default()
            }
            Ok(bytes) => match parse(&bytes) {
                Ok(state) => state,
                Err(why) => {
                    note.moved_aside = Some((move_aside(path, now)?, why.to_string()));
                    State::default()
                }
            },
        };
        Ok((
            StateFile {
                path: path.to_path_buf(),
                _lock: lock,
            },
            state,
            note,
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the state atomically: a reader (or a crash) sees the old file or the new one,
    /// never a mix.
    pub fn save(&self, state: &State) -> Result<(), StateError> {
        // Compact: the file is for cks-drift, and a large outbox should not double in size.
        // Written as it is serialized: at 10,000 clusters the text is 5 MB, which a buffer
        // growing by doubling held as up to 12 MB at once.
        write_atomic_with(&self.path, |out| {
            serde_json::to_writer(out, state).map_err(std::io::Error::from)
        })
    }
}

fn lock_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".lock");
    PathBuf::from(s)
}

/// Reads the state at `path` without locking it (a running instance holds the lock), for a
/// look that changes nothing; `None` when there is no file.
pub fn read(path: &Path) -> Result<Option<State>, StateError> {
    match std::fs::read(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io("read", path)(e)),
        Ok(bytes) => parse(&bytes)
            .map(Some)
            .map_err(|why| StateError::Unreadable {
                path: path.to_path_buf(),
                why,
            }),
    }
}

/// Reads a state file's bytes, either schema, into the current one; why not, in words.
pub fn parse(bytes: &[u8]) -> Result<State, ParseError> {
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(ParseError::NotJson)?;
    match value.get("version").and_then(|v| v.as_u64()) {
        Some(v) if v == u64::from(VERSION) => {
            serde_json::from_value(value).map_err(ParseError::NotAState)
        }
        Some(1) => serde_json::from_value::<StateV1>(value)
            .map(StateV1::upgrade)
            .map_err(ParseError::NotAStateV1),
        Some(v) => Err(ParseError::Version(v)),
        None => Err(ParseError::NoVersion),
    }
}

fn move_aside(path: &Path, now: Timestamp) -> Result<PathBuf, StateError> {
    let mut target = path.as_os_str().to_owned();
    target.push(format!(".corrupt-{}", now.to_compact()));
    let target = PathBuf::from(target);
    std::fs::rename(path, &target).map_err(io("move aside", path))?;
    Ok(target)
}

/// Temporary file in the same folder, fsync, rename over the target, fsync the folder.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StateError> {
    write_atomic_with(path, |out| out.write_all(bytes))
}

/// [`write_atomic`] of what `write` writes, through a buffer.
fn write_atomic_with(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), StateError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let tmp = tempfile::NamedTempFile::new_in(&dir).map_err(io("create a file in", &dir))?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o600))
        .map_err(io("set the mode of", tmp.path()))?;
    {
        let mut out = std::io::BufWriter::new(tmp.as_file());
        write(&mut out)
            .and_then(|()| out.flush())
            .map_err(io("write", path))?;
    }
    tmp.as_file().sync_all().map_err(io("sync", path))?;
    tmp.persist(path).map_err(|e| StateError::Io {
        action: "replace",
        path: path.to_path_buf(),
        source: e.error,
    })?;
    File::open(&dir)
        .and_then(|d| d.sync_all())
        .map_err(io("sync the folder", &dir))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Timestamp = Timestamp::from_unix(1_800_000_000);

    #[test]
    fn fresh_state_then_round_trip_with_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/state.json");
        let (file, mut state, note) = StateFile::open(&path, NOW).unwrap();
        assert_eq!(
            note,
            OpenNote {
                moved_aside: None,
                created: true
            }
        );
        assert_eq!(state, State::default());
        state.next_id = 42;
        file.save(&state).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        drop(file);
        let (_file, again, note) = StateFile::open(&path, NOW).unwrap();
        assert_eq!(again.next_id, 42);
        assert_eq!(note, OpenNote::default());
    }

    #[test]
    fn second_open_is_refused_with_the_holder_pid() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let (_held, _, _) = StateFile::open(&path, NOW).unwrap();
        let err = StateFile::open(&path, NOW).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "state file {} is in use by another cks-drift (pid {}); stop it or point state.path elsewhere, or check without notifying (cks-drift check --no-notify neither uses nor locks the state file)",
                path.display(),
                std::process::id()
            )
        );
    }

    #[test]
    fn a_released_lock_a_starting_child_still_holds_is_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let (file, _, _) = StateFile::open(&path, NOW).unwrap();
        // What a child process holds between its fork and its exec: a copy of the descriptor,
        // and with it the lock.
        let copy = file._lock.try_clone().unwrap();
        drop(file);
        let child = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(200));
            drop(copy);
        });
        let opened = StateFile::open(&path, NOW);
        child.join().unwrap();
        assert!(opened.is_ok(), "{:?}", opened.err());
    }

    #[test]
    fn root_is_refused_in_a_state_folder_the_service_owns() {
        // The tests run as root in CI; as another user there is no root to refuse.
        if !nix::unistd::geteuid().is_root() {
            eprintln!("not root: nothing to check");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("cks-drift");
        std::fs::create_dir(&folder).unwrap();
        std::os::unix::fs::chown(&folder, Some(65534), Some(65534)).unwrap();
        let err = StateFile::open(&folder.join("state.json"), NOW).unwrap_err();
        let owner = crate::config::secret_file::user_name(65534);
        assert_eq!(
            err.to_string(),
            format!(
                "the state folder {} belongs to {owner} and this runs as root: the state file and its lock would become root's, and {owner} (the service) could no longer open them; run it as {owner} (sudo -u {owner} cks-drift ...), or check without notifying (cks-drift check --no-notify neither uses nor writes the state file)",
                folder.display()
            )
        );
        assert!(!folder.join("state.json.lock").exists(), "nothing created");
    }

    #[test]
    fn corrupt_file_is_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        for (content, why) in [
            (&b"{\"version\": 2, \"clus"[..], "not JSON"),
            (
                &b"{\"version\": 99}"[..],
                "schema version 99; this release reads versions 1 to 2",
            ),
            (&b"[1,2]"[..], "no schema version"),
        ] {
            std::fs::write(&path, content).unwrap();
            let (file, state, note) = StateFile::open(&path, NOW).unwrap();
            assert_eq!(state, State::default());
            let (moved, reason) = note.moved_aside.unwrap();
            assert!(reason.starts_with(why), "{reason}");
            assert_eq!(
                moved,
                dir.path().join("state.json.corrupt-20270115T080000Z")
            );
            assert_eq!(std::fs::read(&moved).unwrap(), content);
            assert!(!path.exists());
            drop(file);
            std::fs::remove_file(&moved).unwrap();
        }
    }

    #[test]
    fn atomic_write_leaves_no_temporary_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("state.json")]);
    }

    /// A finding of a kind added after version 2 (an identity conflict) reads back whole, and
    /// a version 2 file written before it (no `named_vm_*`) still loads.
    #[test]
    fn an_identity_conflict_round_trips_and_earlier_files_still_load() {
        use crate::diff::{Mismatch, MismatchKind, Subject, VmRef};
        use crate::state::Reported;

        let conflict = Mismatch {
            kind: MismatchKind::IdentityConflict,
            subject: Subject::Conflict {
                node: "web-node-2".into(),
                is: VmRef {
                    id: "v1".into(),
                    name: Some("web-node-1".into()),
                    state: "Running".into(),
                },
                named: VmRef {
                    id: "v2".into(),
                    name: Some("web-node-2".into()),
                    state: String::new(),
                },
            },
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let (file, mut state, _) = StateFile::open(&path, NOW).unwrap();
        let entry = state.clusters.entry("c1".into()).or_default();
        entry.name = "web".into();
        entry
            .nodes
            .insert(conflict.key(), Reported::new(&conflict, NOW));
        file.save(&state).unwrap();
        drop(file);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"named_vm_id\":\"v2\""), "{text}");
        let (file, again, _) = StateFile::open(&path, NOW).unwrap();
        assert_eq!(again, state);
        let reported = &again.clusters["c1"].nodes
            [&crate::diff::FindingKey::parse("identity_conflict:web-node-2").unwrap()];
        assert_eq!(reported.mismatch(), Some(conflict));
        drop(file);

        let earlier = r#"{
  "version": 2,
  "clusters": {
    "c1": {
      "name": "web",
      "nodes": {
        "node_without_vm:stray": {"kind": "node_without_vm", "node": "stray", "since": "2027-01-15T08:00:00Z"}
      }
    }
  },
  "next_id": 7
}"#;
        std::fs::write(&path, earlier).unwrap();
        let (_file, state, note) = StateFile::open(&path, NOW).unwrap();
        assert_eq!(note, OpenNote::default());
        assert_eq!(state.next_id, 7);
        let stray = &state.clusters["c1"].nodes
            [&crate::diff::FindingKey::parse("node_without_vm:stray").unwrap()];
        assert_eq!(
            (stray.named_vm_id.as_ref(), stray.named_vm_name.as_ref()),
            (None, None)
        );
        assert_eq!(
            stray.mismatch(),
            Some(Mismatch {
                kind: MismatchKind::NodeWithoutVm,
                subject: Subject::Node("stray".into()),
            })
        );
    }

    #[test]
    fn the_vms_remembered_by_database_id_round_trip_and_are_left_out_when_none() {
        let mut state = State::default();
        let c = state.clusters.entry("c1".into()).or_default();
        c.name = "web".into();
        let vm = crate::snapshot::RememberedVm {
            id: "6a3bd1f1-57d0-4bd6-a2a0-9e2c1b7c0f3e".into(),
            name: "web-node-1".into(),
        };
        c.db_ids.insert(17, vm);
        let written = serde_json::to_value(&state).unwrap();
        assert_eq!(
            written["clusters"]["c1"]["db_ids"],
            serde_json::json!({
                "17": {"id": "6a3bd1f1-57d0-4bd6-a2a0-9e2c1b7c0f3e", "name": "web-node-1"}
            })
        );
        assert_eq!(parse(written.to_string().as_bytes()).unwrap(), state);
        // None remembered: nothing written, so the file is the previous release's.
        state.clusters.get_mut("c1").unwrap().db_ids.clear();
        let written = serde_json::to_value(&state).unwrap();
        assert!(
            written["clusters"]["c1"].get("db_ids").is_none(),
            "{written}"
        );
    }

    #[test]
    fn a_state_file_of_the_previous_release_reads_as_written_and_writes_back_the_same() {
        // Findings by key, alert and annotation records by `<cluster id>/<key>` (a finding's,
        // a summary's, a storm's under `cloud`), a queued notification, a storm and the hourly
        // budget: as the release before the typed keys wrote them.
        let written = r#"{
  "version": 2,
  "clusters": {
    "6a3bd1f1-57d0-4bd6-a2a0-9e2c1b7c0f3e": {
      "name": "web",
      "zone_id": "z1",
      "owner": "acct",
      "owner_id": "account:d1/acct",
      "vms": {
        "map_count:2/3": {"kind": "map_count", "shown": 2, "expected": 3, "since": "2027-01-15T08:00:00Z"},
        "unmapped_vm:v9": {"kind": "unmapped_vm", "vm_id": "v9", "vm_name": "web-node-9", "vm_state": "Running", "since": "2027-01-15T08:00:00Z", "deferred": true}
      },
      "nodes": {
        "node_without_vm:stray": {"kind": "node_without_vm", "node": "stray", "since": "2027-01-15T08:05:00Z", "held": true}
      },
      "map": {"v1": "web-control-1"},
      "expected_vms": 3,
      "vanished": {},
      "listed_at": "2027-01-15T08:05:00Z"
    }
  },
  "outbox": [
    {"id": 6, "attempts": 1, "last_error": "refused", "action": "remove_annotation", "cluster_id": "6a3bd1f1-57d0-4bd6-a2a0-9e2c1b7c0f3e", "key": "unmapped_vm:v8"}
  ],
  "alerts": {
    "6a3bd1f1-57d0-4bd6-a2a0-9e2c1b7c0f3e/map_count:2/3": {"alert_id": "a1", "alert_type": 3000, "zone_id": "z1", "covers": []},
    "6a3bd1f1-57d0-4bd6-a2a0-9e2c1b7c0f3e/summary:20270115T080000Z": {"alert_id": "a2", "alert_type": 3001, "zone_id": null, "covers": ["unmapped_vm:v9"]},
    "cloud/storm:20270115T080500Z": {"alert_id": "a3", "alert_type": 3002, "zone_id": null, "covers": []}
  },
  "annotations": {
    "6a3bd1f1-57d0-4bd6-a2a0-9e2c1b7c0f3e/map_count:2/3": "n1"
  },
  "next_id": 7,
  "storm": {"since": "2027-01-15T08:05:00Z", "key": "storm:20270115T080500Z", "clusters": 6, "checked": 9, "held": 1},
  "raised": {"account:d1/acct": {"alerts": ["2027-01-15T08:00:00Z"]}}
}"#;
        let state: State = serde_json::from_str(written).unwrap();
        let c = &state.clusters["6a3bd1f1-57d0-4bd6-a2a0-9e2c1b7c0f3e"];
        assert!(
            c.vms
                .contains_key(&crate::diff::FindingKey::parse("map_count:2/3").unwrap())
        );
        let storm = crate::state::RecordKey::new("cloud", "storm:20270115T080500Z");
        assert_eq!(state.alerts[&storm].alert_id, "a3");
        let written: serde_json::Value = serde_json::from_str(written).unwrap();
        assert_eq!(serde_json::to_value(&state).unwrap(), written);
    }
}
