//! The one rule for files that hold secrets (the API key files, the SSH key, the database
//! password, a config with keys written inline): besides its owner, a secret file may be
//! readable by the service's own user and group (`0640 root:cks-drift`, or an ACL entry for
//! the service user), never by anybody else. `validate-config` warns with [`stranger`];
//! read errors name the user the process really runs as ([`process_user`]).
//!
//! Reading the file's mode, owner and POSIX ACL is I/O; judging them is a pure function of
//! plain data ([`readers_beyond`]), where the tests are. Nothing here changes a file.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The account the packaged service runs as (`User=` and `Group=` of the unit).
pub const SERVICE_ACCOUNT: &str = "cks-drift";

/// Who may read a file besides its owner, as the mode and the ACL say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    /// The permission bits (`0o7777` of `st_mode`).
    pub mode: u32,
    pub gid: u32,
    /// Named entries of a POSIX ACL (`user:alice:r--`), already masked.
    pub acl_users: Vec<(u32, bool)>,
    pub acl_groups: Vec<(u32, bool)>,
    /// The owning group's own read permission: the mode's group bits, or with an ACL its
    /// `group::` entry masked (the mode's group bits then show the mask).
    pub group_reads: bool,
}

/// The accounts that may read a secret: the process's own and the packaged service's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowed {
    pub uids: Vec<u32>,
    pub gids: Vec<u32>,
    /// The service's user and group by name, for the rule and the fix.
    pub user: String,
    pub group: String,
}

/// Someone the rule does not allow to read (or, for others, to use) a secret file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stranger {
    /// The mode grants others any permission.
    Others,
    /// The owning group may read it and is not the service's.
    Group(u32),
    /// An ACL entry lets this user read it.
    AclUser(u32),
    /// An ACL entry lets this group read it.
    AclGroup(u32),
}

/// The first reader beyond the owner that the rule does not allow, if any.
pub fn readers_beyond(access: &Access, allowed: &Allowed) -> Option<Stranger> {
    if access.mode & 0o007 != 0 {
        return Some(Stranger::Others);
    }
    if access.group_reads && !allowed.gids.contains(&access.gid) {
        return Some(Stranger::Group(access.gid));
    }
    if let Some((uid, _)) = access
        .acl_users
        .iter()
        .find(|(uid, read)| *read && !allowed.uids.contains(uid))
    {
        return Some(Stranger::AclUser(*uid));
    }
    access
        .acl_groups
        .iter()
        .find(|(gid, read)| *read && !allowed.gids.contains(gid))
        .map(|(gid, _)| Stranger::AclGroup(*gid))
}

/// The rule, as every message states it.
pub fn rule(allowed: &Allowed) -> String {
    format!(
        "a file holding a secret may be readable by the user {} and the group {} (e.g. 0640 \
         root:{}, or an ACL entry for the user {}), never by anybody else",
        allowed.user, allowed.group, allowed.group, allowed.user
    )
}

/// Who a stranger is, and the command that takes its access away.
fn who_and_fix(stranger: &Stranger, mode: u32, path: &Path, allowed: &Allowed) -> (String, String) {
    let p = path.display();
    match stranger {
        Stranger::Others if mode & 0o004 != 0 => {
            ("others may read it".into(), format!("chmod o-rwx {p}"))
        }
        Stranger::Others => (
            "others have access to it".into(),
            format!("chmod o-rwx {p}"),
        ),
        Stranger::Group(gid) => (
            format!("the group {} may read it", group_name(*gid)),
            format!(
                "chgrp {} {p}, or chmod g-rwx {p} and give the user {} an ACL entry",
                allowed.group, allowed.user
            ),
        ),
        Stranger::AclUser(uid) => {
            let name = user_name(*uid);
            (
                format!("the user {name} may read it through an ACL"),
                format!("setfacl -x u:{name} {p}"),
            )
        }
        Stranger::AclGroup(gid) => {
            let name = group_name(*gid);
            (
                format!("the group {name} may read it through an ACL"),
                format!("setfacl -x g:{name} {p}"),
            )
        }
    }
}

/// The warning's text for a stranger: who may read the file, the rule, and the fix.
/// `what` says what the file holds ("holds a secret", "is a private key").
pub fn warning(
    path: &Path,
    what: &str,
    mode: u32,
    stranger: &Stranger,
    allowed: &Allowed,
) -> String {
    let (who, fix) = who_and_fix(stranger, mode, path, allowed);
    format!(
        "{} {what} and {who} (mode {:04o}); {}: {fix}",
        path.display(),
        mode & 0o7777,
        rule(allowed)
    )
}

/// The file's access as the mode and ACL say; `None` for anything but a regular file that
/// can be looked at (that is reported elsewhere, as unreadable).
pub fn access(path: &Path) -> Option<Access> {
    let meta = std::fs::metadata(path).ok().filter(|m| m.is_file())?;
    let mode = meta.mode() & 0o7777;
    let mut access = Access {
        mode,
        gid: meta.gid(),
        acl_users: Vec::new(),
        acl_groups: Vec::new(),
        group_reads: mode & 0o040 != 0,
    };
    if let Some(acl) = read_acl(path) {
        apply_acl(&mut access, &acl);
    }
    Some(access)
}

/// The `system.posix_acl_access` attribute, if the file has one.
fn read_acl(path: &Path) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 4096];
    let n = rustix::fs::getxattr(path, "system.posix_acl_access", &mut buf[..]).ok()?;
    buf.truncate(n);
    Some(buf)
}

/// Reads the kernel's ACL format (a version word, then entries of tag, permission and id,
/// little-endian) into `access`. Named entries and the owning group are limited by the mask.
fn apply_acl(access: &mut Access, acl: &[u8]) {
    const USER: u16 = 0x02;
    const GROUP_OBJ: u16 = 0x04;
    const GROUP: u16 = 0x08;
    const MASK: u16 = 0x10;
    const READ: u16 = 0x04;
    if acl.len() < 4 || u32::from_le_bytes([acl[0], acl[1], acl[2], acl[3]]) != 2 {
        return;
    }
    let entries: Vec<(u16, u16, u32)> = acl[4..]
        .chunks_exact(8)
        .map(|e| {
            (
                u16::from_le_bytes([e[0], e[1]]),
                u16::from_le_bytes([e[2], e[3]]),
                u32::from_le_bytes([e[4], e[5], e[6], e[7]]),
            )
        })
        .collect();
    let mask = entries
        .iter()
        .find(|(tag, ..)| *tag == MASK)
        .map_or(0o7, |(_, perm, _)| *perm);
    for &(tag, perm, id) in &entries {
        let read = perm & mask & READ != 0;
        match tag {
            USER => access.acl_users.push((id, read)),
            GROUP => access.acl_groups.push((id, read)),
            GROUP_OBJ => access.group_reads = read,
            _ => {}
        }
    }
}

/// The accounts allowed by the rule on this host: the process's own, and the packaged
/// service account where it exists. Run as root (as an operator runs `validate-config`), the
/// service account is the one that matters.
pub fn allowed() -> Allowed {
    let uid = nix::unistd::geteuid();
    let gid = nix::unistd::getegid();
    let mut allowed = Allowed {
        uids: vec![uid.as_raw()],
        gids: vec![gid.as_raw()],
        user: user_name(uid.as_raw()),
        group: group_name(gid.as_raw()),
    };
    let service_user = nix::unistd::User::from_name(SERVICE_ACCOUNT).ok().flatten();
    let service_group = nix::unistd::Group::from_name(SERVICE_ACCOUNT)
        .ok()
        .flatten();
    if let Some(u) = &service_user {
        allowed.uids.push(u.uid.as_raw());
    }
    if let Some(g) = &service_group {
        allowed.gids.push(g.gid.as_raw());
    }
    if uid.is_root() {
        allowed.user = SERVICE_ACCOUNT.to_string();
        allowed.group = SERVICE_ACCOUNT.to_string();
    }
    allowed
}

/// The user this process runs as, by name where it has one (`root`, `cks-drift`, `uid 4242`).
pub fn process_user() -> String {
    user_name(nix::unistd::geteuid().as_raw())
}

/// Why this process may not read `path`, and what to do: the user it runs as, then either
/// how to run as the service user or how to give this user read access.
pub fn permission_denied(path: &Path) -> String {
    let user = process_user();
    let p = path.display();
    if user == SERVICE_ACCOUNT {
        format!(
            "permission denied for the user {user}; give it read access: chgrp {user} {p} and \
             chmod 0640 {p}, or setfacl -m u:{user}:r {p} (with search permission on the \
             folders above)"
        )
    } else {
        format!(
            "permission denied for the user {user}; run cks-drift as root or as the user \
             {SERVICE_ACCOUNT} (sudo -u {SERVICE_ACCOUNT} cks-drift …), or give {user} read \
             access (setfacl -m u:{user}:r {p})"
        )
    }
}

/// A user's name, or `uid <n>` where it has none.
pub fn user_name(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(u)) => u.name,
        _ => format!("uid {uid}"),
    }
}

fn group_name(gid: u32) -> String {
    match nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid)) {
        Ok(Some(g)) => g.name,
        _ => format!("gid {gid}"),
    }
}

#[cfg(test)]
mod tests;
