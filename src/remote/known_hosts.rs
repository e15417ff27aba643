//! The `ssh.known_hosts` file, kept per cluster: which recorded host keys speak for a cluster
//! at an address, the line that records a key learned for a cluster, an entry without a
//! cluster given to the first cluster that presents its key, and the entries of clusters
//! CloudStack no longer lists dropped. The SSH exchange that asks is `remote::ssh`.
//!
//! The file stays in OpenSSH's format (`host key-type base64 comment`): the cluster is a
//! `cks-drift-cluster=<id>` word in the comment, so `ssh -o UserKnownHostsFile=` and
//! `ssh-keygen -F/-R` still read and edit it. An address is not a cluster's for good: CloudStack
//! gives a deleted cluster's public IP to whichever tenant asks next, so a key learned for one
//! cluster says nothing about the next cluster at that address.

use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use russh::keys::PublicKey;
use sha1::Sha1;

use super::known_hosts_host;

/// The word of an entry's comment that names the cluster it was learned for.
pub const CLUSTER_MARKER: &str = "cks-drift-cluster=";

/// A recorded key for the host asked about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// 1-based, as an editor counts lines.
    pub line: usize,
    pub key: PublicKey,
    /// The cluster it was learned for, as written in the file ([`cluster_word`]); `None` for
    /// an entry written by hand or by a release that recorded addresses only.
    pub cluster: Option<String>,
}

/// What the file says about a key a cluster's control node presented.
#[derive(Debug, PartialEq, Eq)]
pub enum HostKeyMatch {
    /// A key recorded for this cluster equals it.
    Known,
    /// No key is recorded for this cluster, and an entry without a cluster for this address
    /// equals it: trusted; `lines` are every such entry of the address, to be given to the
    /// cluster.
    Unclaimed { lines: Vec<usize> },
    /// Nothing applies to this cluster: neither its own entries nor any without a cluster.
    New,
    /// The entries that apply (the cluster's own, else those without a cluster) hold other
    /// keys; `line` is the one to remove, `cluster` the cluster it was learned for.
    Changed {
        line: usize,
        cluster: Option<String>,
    },
}

/// `id` as the file spells it: every byte outside `A-Z a-z 0-9 . _ -` percent-encoded, so no
/// id can end the word, the comment or the line. CloudStack's ids are UUIDs, written as they are.
pub fn cluster_word(id: &str) -> String {
    let mut word = String::with_capacity(id.len());
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
            word.push(char::from(b));
        } else {
            word.push_str(&format!("%{b:02X}"));
        }
    }
    word
}

/// The entries of `text` for `host:port`, with the cluster each was learned for. Comment
/// lines, blank lines and `@cert-authority`/`@revoked` lines are skipped; an entry for this
/// host whose key does not parse is an error, as it is for OpenSSH.
pub fn entries_for(text: &str, host: &str, port: u16) -> Result<Vec<Recorded>, russh::keys::Error> {
    let wanted = known_hosts_host(host, port);
    let mut found = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let Some(entry) = Fields::of(line) else {
            continue;
        };
        if !entry.hosts.split(',').any(|p| host_matches(&wanted, p)) {
            continue;
        }
        found.push(Recorded {
            line: index + 1,
            key: russh::keys::parse_public_key_base64(entry.key)?,
            cluster: entry.cluster().map(str::to_string),
        });
    }
    Ok(found)
}

/// The parts of an entry line.
struct Fields<'a> {
    hosts: &'a str,
    key: &'a str,
    comment: Vec<&'a str>,
}

impl<'a> Fields<'a> {
    fn of(line: &'a str) -> Option<Fields<'a>> {
        let mut words = line.split_whitespace();
        let hosts = words.next().filter(|h| !h.starts_with(['#', '@']))?;
        let _key_type = words.next()?;
        let key = words.next()?;
        Some(Fields {
            hosts,
            key,
            comment: words.collect(),
        })
    }

    fn cluster(&self) -> Option<&'a str> {
        self.comment
            .iter()
            .find_map(|w| w.strip_prefix(CLUSTER_MARKER))
    }
}

/// One host pattern of an entry: the host itself, or OpenSSH's hashed form
/// `|1|base64(salt)|base64(HMAC-SHA1(salt, host))`. Wildcards and negations are not read: a
/// control node's address is recorded whole.
fn host_matches(host: &str, pattern: &str) -> bool {
    let Some(hashed) = pattern.strip_prefix("|1|") else {
        return pattern == host;
    };
    let b64 = base64::engine::general_purpose::STANDARD;
    let Some((salt, hash)) = hashed.split_once('|') else {
        return false;
    };
    let (Ok(salt), Ok(hash)) = (b64.decode(salt), b64.decode(hash)) else {
        return false;
    };
    Hmac::<Sha1>::new_from_slice(&salt)
        .map(|mac| mac.chain_update(host).verify_slice(&hash).is_ok())
        .unwrap_or(false)
}

/// Which of `recorded` (the entries for the address) speak for the cluster `cluster` (as
/// [`cluster_word`] spells it), and what they say of `presented`.
///
/// A key recorded for another cluster says nothing: that cluster held the address before
/// (CloudStack hands a released public IP to the next network that asks), and refusing the
/// newcomer would let one tenant's old cluster blind another's new one. A host recorded only
/// with a key of another algorithm counts as changed, not new: learning a second key type
/// would let a man in the middle in by presenting a different key type.
pub fn match_host_key(recorded: &[Recorded], cluster: &str, presented: &PublicKey) -> HostKeyMatch {
    let own: Vec<&Recorded> = recorded
        .iter()
        .filter(|r| r.cluster.as_deref() == Some(cluster))
        .collect();
    let unclaimed: Vec<&Recorded> = recorded.iter().filter(|r| r.cluster.is_none()).collect();
    let applying = if own.is_empty() { &unclaimed } else { &own };
    if applying.is_empty() {
        return HostKeyMatch::New;
    }
    if applying
        .iter()
        .any(|r| r.key.key_data() == presented.key_data())
    {
        return if own.is_empty() {
            HostKeyMatch::Unclaimed {
                lines: unclaimed.iter().map(|r| r.line).collect(),
            }
        } else {
            HostKeyMatch::Known
        };
    }
    let stale = applying
        .iter()
        .find(|r| r.key.algorithm() == presented.algorithm())
        .unwrap_or(&applying[0]);
    HostKeyMatch::Changed {
        line: stale.line,
        cluster: stale.cluster.clone(),
    }
}

/// The entry learned for `cluster` (as [`cluster_word`] spells it): `host key-type base64
/// cks-drift-cluster=<id>`, with its line end.
pub fn learned_line(
    host: &str,
    port: u16,
    key: &PublicKey,
    cluster: &str,
) -> Result<String, russh::keys::Error> {
    let bare = PublicKey::new(key.key_data().clone(), "");
    Ok(format!(
        "{} {} {CLUSTER_MARKER}{cluster}\n",
        known_hosts_host(host, port),
        bare.to_openssh()?
    ))
}

/// `text` with the entries at `lines` given to `cluster`: the marker is added after
/// whatever comment they have. Every other byte is kept.
pub fn claim(text: &str, lines: &[usize], cluster: &str) -> String {
    let mut out = String::with_capacity(text.len() + lines.len() * 64);
    for (index, line) in text.split_inclusive('\n').enumerate() {
        if !lines.contains(&(index + 1)) {
            out.push_str(line);
            continue;
        }
        let (body, end) = match line.strip_suffix("\r\n") {
            Some(body) => (body, "\r\n"),
            None => match line.strip_suffix('\n') {
                Some(body) => (body, "\n"),
                None => (line, "\n"),
            },
        };
        out.push_str(body.trim_end());
        out.push(' ');
        out.push_str(CLUSTER_MARKER);
        out.push_str(cluster);
        out.push_str(end);
    }
    out
}

/// `text` without the entries learned for a cluster `listed` refuses (given the word the file
/// spells its id with), and how many went; `None` when none did. Entries without a cluster
/// and every other line are kept as they are.
pub fn prune(text: &str, listed: impl Fn(&str) -> bool) -> Option<(String, usize)> {
    let mut out = String::with_capacity(text.len());
    let mut dropped = 0;
    for line in text.split_inclusive('\n') {
        let gone = Fields::of(line)
            .and_then(|f| f.cluster())
            .is_some_and(|cluster| !listed(cluster));
        if gone {
            dropped += 1;
        } else {
            out.push_str(line);
        }
    }
    (dropped > 0).then_some((out, dropped))
}

/// The file's text, refusing a symlink (`ELOOP`).
pub fn read_no_follow(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    Ok(text)
}

/// Appends `line` to the file, creating it (mode 0600) and its folder (mode 0700) if missing.
/// One `write`, so a reader never sees half of it.
pub fn append(path: &Path, line: &str) -> std::io::Result<()> {
    create_folder(path)?;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    let mut whole = String::new();
    if file.metadata()?.len() > 0 {
        let mut last = [0u8; 1];
        file.seek(SeekFrom::End(-1))?;
        file.read_exact(&mut last)?;
        if last[0] != b'\n' {
            whole.push('\n');
        }
    }
    whole.push_str(line);
    file.write_all(whole.as_bytes())?;
    file.sync_all()
}

/// Replaces the file with `text`: a temporary file (mode 0600) in the same folder, synced,
/// renamed over it, and the folder synced, so a crash leaves the old file or the new one.
pub fn replace(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o600))?;
    tmp.write_all(text.as_bytes())?;
    tmp.as_file().sync_all()?;
    // A rename replaces a symlink at `path` itself, never the file it points to.
    tmp.persist(path).map_err(|e| e.error)?;
    std::fs::File::open(dir)?.sync_all()
}

fn create_folder(path: &Path) -> std::io::Result<()> {
    match path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        Some(dir) => std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::ssh::host_key::tests::{ED25519_A, ED25519_B};

    // Public host keys only (from ssh-keygen); no secrets here.
    const ECDSA: &str = "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBOx9cjBklFljEgkQFNiQafTwIZql2FpAcBSkIuWkN2ToZaJ57mM6bscSr2f7yzCMk/MvIZynPyfaoYXYHsrClsg=";

    fn public(line: &str) -> PublicKey {
        PublicKey::from_openssh(line).unwrap()
    }

    fn rec(line: usize, key: &str, cluster: Option<&str>) -> Recorded {
        Recorded {
            line,
            key: public(key),
            cluster: cluster.map(str::to_string),
        }
    }

    #[test]
    fn a_key_recorded_for_the_cluster_is_known() {
        let recorded = [rec(1, ED25519_B, Some("c2")), rec(2, ED25519_A, Some("c1"))];
        assert_eq!(
            match_host_key(&recorded, "c1", &public(ED25519_A)),
            HostKeyMatch::Known
        );
    }

    #[test]
    fn a_key_recorded_for_another_cluster_at_the_address_says_nothing() {
        let recorded = [rec(3, ED25519_B, Some("gone"))];
        assert_eq!(
            match_host_key(&recorded, "new", &public(ED25519_A)),
            HostKeyMatch::New
        );
        assert_eq!(
            match_host_key(&[], "new", &public(ED25519_A)),
            HostKeyMatch::New
        );
    }

    #[test]
    fn another_key_for_the_same_cluster_is_changed() {
        let recorded = [
            rec(1, ED25519_A, Some("other")),
            rec(4, ED25519_B, Some("c1")),
        ];
        assert_eq!(
            match_host_key(&recorded, "c1", &public(ED25519_A)),
            HostKeyMatch::Changed {
                line: 4,
                cluster: Some("c1".into())
            }
        );
    }

    #[test]
    fn a_cluster_known_only_by_another_algorithm_is_changed_not_new() {
        let recorded = [rec(7, ECDSA, Some("c1"))];
        assert_eq!(
            match_host_key(&recorded, "c1", &public(ED25519_A)),
            HostKeyMatch::Changed {
                line: 7,
                cluster: Some("c1".into())
            }
        );
    }

    #[test]
    fn a_changed_key_points_at_the_entry_of_its_algorithm() {
        let recorded = [rec(2, ECDSA, Some("c1")), rec(5, ED25519_B, Some("c1"))];
        assert_eq!(
            match_host_key(&recorded, "c1", &public(ED25519_A)),
            HostKeyMatch::Changed {
                line: 5,
                cluster: Some("c1".into())
            }
        );
    }

    #[test]
    fn entries_without_a_cluster_are_trusted_and_claimed_by_the_first_that_presents_them() {
        let recorded = [rec(1, ECDSA, None), rec(2, ED25519_A, None)];
        assert_eq!(
            match_host_key(&recorded, "c1", &public(ED25519_A)),
            HostKeyMatch::Unclaimed { lines: vec![1, 2] }
        );
        // Another key at that address is refused: the entry may pin a cluster still there.
        assert_eq!(
            match_host_key(&recorded, "c1", &public(ED25519_B)),
            HostKeyMatch::Changed {
                line: 2,
                cluster: None
            }
        );
    }

    #[test]
    fn a_cluster_with_its_own_entry_is_judged_by_it_alone() {
        let recorded = [rec(1, ED25519_A, None), rec(2, ED25519_B, Some("c1"))];
        assert_eq!(
            match_host_key(&recorded, "c1", &public(ED25519_A)),
            HostKeyMatch::Changed {
                line: 2,
                cluster: Some("c1".into())
            }
        );
    }

    #[test]
    fn entries_are_read_with_their_cluster_and_editor_line() {
        let text = format!(
            "# control nodes\n\n10.0.0.6 {ED25519_A}\n[10.0.0.5]:2222 {ED25519_B} cks-drift-cluster=c-1\n\
             @revoked [10.0.0.5]:2222 {ED25519_A}\n10.0.0.7,[10.0.0.5]:2222 {ECDSA} ops cks-drift-cluster=c%202\n"
        );
        assert_eq!(
            entries_for(&text, "10.0.0.5", 2222).unwrap(),
            vec![rec(4, ED25519_B, Some("c-1")), rec(6, ECDSA, Some("c%202"))]
        );
        assert_eq!(
            entries_for(&text, "10.0.0.6", 22).unwrap(),
            vec![rec(3, ED25519_A, None)]
        );
        assert_eq!(entries_for(&text, "10.0.0.6", 2222).unwrap(), vec![]);
    }

    #[test]
    fn hashed_host_names_are_matched() {
        // `ssh-keygen -H` of "[10.0.0.5]:2222", salt of 20 zero bytes.
        let salt = [0u8; 20];
        let mac = Hmac::<Sha1>::new_from_slice(&salt)
            .unwrap()
            .chain_update("[10.0.0.5]:2222")
            .finalize()
            .into_bytes();
        let b64 = base64::engine::general_purpose::STANDARD;
        let text = format!("|1|{}|{} {ED25519_A}\n", b64.encode(salt), b64.encode(mac));
        assert_eq!(
            entries_for(&text, "10.0.0.5", 2222).unwrap(),
            vec![rec(1, ED25519_A, None)]
        );
        assert_eq!(entries_for(&text, "10.0.0.5", 22).unwrap(), vec![]);
    }

    #[test]
    fn an_unreadable_key_for_the_host_is_an_error() {
        assert!(entries_for("10.0.0.5 ssh-ed25519 AAAA!\n", "10.0.0.5", 22).is_err());
        assert!(entries_for("10.0.0.6 ssh-ed25519 AAAA!\n", "10.0.0.5", 22).is_ok());
    }

    #[test]
    fn cluster_words_escape_what_could_end_the_word() {
        assert_eq!(
            cluster_word("5a1e7c52-0b8f-4f0e-9d3e-0c7f0f2a9b11"),
            "5a1e7c52-0b8f-4f0e-9d3e-0c7f0f2a9b11"
        );
        assert_eq!(cluster_word("a b\n%é"), "a%20b%0A%25%C3%A9");
    }

    #[test]
    fn a_learned_line_names_its_cluster() {
        assert_eq!(
            learned_line(
                "10.0.0.5",
                2222,
                &public(&format!("{ED25519_A} me@host")),
                "c-1"
            )
            .unwrap(),
            format!("[10.0.0.5]:2222 {ED25519_A} cks-drift-cluster=c-1\n")
        );
        assert_eq!(
            learned_line("10.0.0.6", 22, &public(ED25519_B), "c-2").unwrap(),
            format!("10.0.0.6 {ED25519_B} cks-drift-cluster=c-2\n")
        );
    }

    #[test]
    fn claiming_marks_the_lines_and_keeps_every_other_byte() {
        let text = format!("# ops\r\n10.0.0.6 {ED25519_A} added by ops\r\n10.0.0.7 {ED25519_B}");
        assert_eq!(
            claim(&text, &[2, 3], "c-1"),
            format!(
                "# ops\r\n10.0.0.6 {ED25519_A} added by ops cks-drift-cluster=c-1\r\n\
                 10.0.0.7 {ED25519_B} cks-drift-cluster=c-1\n"
            )
        );
    }

    #[test]
    fn pruning_drops_only_the_entries_of_unlisted_clusters() {
        let text = format!(
            "# ops\n10.0.0.5 {ED25519_A}\n[10.0.0.6]:2222 {ED25519_B} cks-drift-cluster=gone\n\
             [10.0.0.7]:2222 {ECDSA} cks-drift-cluster=kept\n"
        );
        let (pruned, dropped) = prune(&text, |c| c == "kept").unwrap();
        assert_eq!(
            pruned,
            format!(
                "# ops\n10.0.0.5 {ED25519_A}\n[10.0.0.7]:2222 {ECDSA} cks-drift-cluster=kept\n"
            )
        );
        assert_eq!(dropped, 1);
        assert_eq!(prune(&pruned, |c| c == "kept"), None);
    }

    #[test]
    fn appending_creates_the_folder_and_a_private_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/ssh/known_hosts");
        append(&path, "a\n").unwrap();
        append(&path, "b\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a\nb\n");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
    }

    #[test]
    fn appending_ends_an_unterminated_last_line_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("known_hosts");
        std::fs::write(&path, "a").unwrap();
        append(&path, "b\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a\nb\n");
    }

    #[test]
    fn replacing_leaves_a_private_file_and_no_temporary_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("known_hosts");
        std::fs::write(&path, "old\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        replace(&path, "new\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
