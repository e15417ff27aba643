//! The secret-file rule on plain data: who may read, and the exact warning.

use super::*;

fn allowed() -> Allowed {
    Allowed {
        uids: vec![0, 990],
        gids: vec![0, 990],
        user: "cks-drift".into(),
        group: "cks-drift".into(),
    }
}

fn access(mode: u32, gid: u32) -> Access {
    Access {
        mode,
        gid,
        acl_users: Vec::new(),
        acl_groups: Vec::new(),
        group_reads: mode & 0o040 != 0,
    }
}

#[test]
fn the_owner_and_the_service_group_may_read() {
    for (mode, gid) in [
        (0o600, 64123),
        (0o400, 64123),
        (0o640, 990),
        (0o640, 0),
        (0o660, 990),
    ] {
        assert_eq!(
            readers_beyond(&access(mode, gid), &allowed()),
            None,
            "{mode:o}"
        );
    }
}

#[test]
fn others_and_other_groups_may_not() {
    assert_eq!(
        readers_beyond(&access(0o644, 990), &allowed()),
        Some(Stranger::Others)
    );
    assert_eq!(
        readers_beyond(&access(0o602, 990), &allowed()),
        Some(Stranger::Others)
    );
    assert_eq!(
        readers_beyond(&access(0o640, 64123), &allowed()),
        Some(Stranger::Group(64123))
    );
}

/// `setfacl -m u:cks-drift:r` on the management server's key (cloud:cloud 0600): the mode
/// then shows the mask as group bits (0640), but the owning group reads nothing.
#[test]
fn an_acl_entry_for_the_service_user_is_allowed() {
    let mut acl = 2u32.to_le_bytes().to_vec();
    for (tag, perm, id) in [
        (0x01u16, 6u16, u32::MAX),
        (0x02, 4, 990),
        (0x04, 0, u32::MAX),
        (0x10, 4, u32::MAX),
        (0x20, 0, u32::MAX),
    ] {
        acl.extend(tag.to_le_bytes());
        acl.extend(perm.to_le_bytes());
        acl.extend(id.to_le_bytes());
    }
    let mut a = access(0o640, 64123);
    apply_acl(&mut a, &acl);
    assert_eq!(readers_beyond(&a, &allowed()), None);

    // Another user's entry is not.
    let mut other = acl.clone();
    other[4 + 8 + 4..4 + 8 + 8].copy_from_slice(&64124u32.to_le_bytes());
    let mut a = access(0o640, 64123);
    apply_acl(&mut a, &other);
    assert_eq!(
        readers_beyond(&a, &allowed()),
        Some(Stranger::AclUser(64124))
    );

    // The mask limits an entry: with mask ---, the entry grants nothing.
    let mut masked = other.clone();
    masked[4 + 3 * 8 + 2..4 + 3 * 8 + 4].copy_from_slice(&0u16.to_le_bytes());
    let mut a = access(0o600, 64123);
    apply_acl(&mut a, &masked);
    assert_eq!(readers_beyond(&a, &allowed()), None);
}

#[test]
fn the_warning_states_the_rule_and_the_fix() {
    let path = Path::new("/etc/cks-drift/secret_key");
    assert_eq!(
        warning(
            path,
            "holds a secret",
            0o100644,
            &Stranger::Others,
            &allowed()
        ),
        "/etc/cks-drift/secret_key holds a secret and others may read it (mode 0644); a file \
         holding a secret may be readable by the user cks-drift and the group cks-drift (e.g. \
         0640 root:cks-drift, or an ACL entry for the user cks-drift), never by anybody else: \
         chmod o-rwx /etc/cks-drift/secret_key"
    );
    assert_eq!(
        warning(
            path,
            "holds a secret",
            0o640,
            &Stranger::Group(64123),
            &allowed()
        ),
        "/etc/cks-drift/secret_key holds a secret and the group gid 64123 may read it (mode \
         0640); a file holding a secret may be readable by the user cks-drift and the group \
         cks-drift (e.g. 0640 root:cks-drift, or an ACL entry for the user cks-drift), never by \
         anybody else: chgrp cks-drift /etc/cks-drift/secret_key, or chmod g-rwx \
         /etc/cks-drift/secret_key and give the user cks-drift an ACL entry"
    );
}
