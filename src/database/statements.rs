//! Every statement cks-drift sends to CloudStack's database, as sent, in one place:
//! `docs/database.md` quotes each of them verbatim for a DBA to review, and a test checks that
//! it does (and that it quotes nothing else).
//!
//! The texts are built here and nowhere else; `schema`, `map`, `vms`, `lock` and
//! `validate-config --connect` send them. Besides these, the driver (mysql_async 0.37) sends
//! [`DRIVER_SETTINGS`] by itself after every login.

use std::fmt::Display;

/// Sent by the driver itself after every login (`Conn::read_settings`): the two settings it
/// sizes its packets and its idle check by. cks-drift does not send it; it is here because a
/// DBA sees it.
pub const DRIVER_SETTINGS: &str = "SELECT @@max_allowed_packet,@@wait_timeout";

/// `validate-config --connect`: what the user may do, to warn when it is more than `SELECT`.
pub const SHOW_GRANTS: &str = "SHOW GRANTS";

/// The columns of the three tables, as `information_schema` shows them to this user (a table
/// it holds no privilege on is not shown at all).
pub const COLUMNS: &str = "SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMNS \
     WHERE TABLE_SCHEMA = DATABASE() \
     AND TABLE_NAME IN ('kubernetes_cluster', 'kubernetes_cluster_vm_map', 'vm_instance')";

/// Every cluster's map rows, at most `limit` (one more than are kept, to tell a cut from a full
/// read): columns every release since 4.14 has.
pub fn map(limit: impl Display) -> String {
    format!(
        "SELECT c.uuid, m.vm_id, v.uuid, v.name, v.state, v.removed IS NOT NULL \
         FROM kubernetes_cluster c \
         JOIN kubernetes_cluster_vm_map m ON m.cluster_id = c.id \
         LEFT JOIN vm_instance v ON v.id = m.vm_id \
         WHERE c.removed IS NULL \
         ORDER BY m.cluster_id, m.id \
         LIMIT {limit}"
    )
}

/// The owner of every cluster not removed.
pub const OWNERS: &str = "SELECT uuid, account_id FROM kubernetes_cluster WHERE removed IS NULL";

/// The columns of a VM, with times as the API writes them (CloudStack keeps them in UTC).
const VM_COLUMNS: &str = "v.uuid, v.name, v.state, \
     DATE_FORMAT(v.created, '%Y-%m-%dT%H:%i:%s+0000'), \
     DATE_FORMAT(v.update_time, '%Y-%m-%dT%H:%i:%s+0000'), v.account_id";

/// A VM the node VMs query reads: one of a cluster owner's, named like a node
/// (`naming::split` wants an 11-digit hex suffix after the last `-`; `_` matches one
/// character).
const NAMED: &str = "v.name LIKE '%-___________' AND v.account_id IN \
     (SELECT k.account_id FROM kubernetes_cluster k WHERE k.removed IS NULL)";

/// The clusters' owners' VMs named like a node, at most `limit`.
pub fn node_vms(limit: impl Display) -> String {
    format!(
        "SELECT {VM_COLUMNS} FROM vm_instance v \
         WHERE v.removed IS NULL AND v.type = 'User' AND {NAMED} \
         LIMIT {limit}"
    )
}

/// The VMs among `quoted_uuids` (each quoted, separated by commas) that are not removed, but
/// for those [`node_vms`] read.
pub fn vms_by_uuid(quoted_uuids: impl Display) -> String {
    format!(
        "SELECT {VM_COLUMNS} FROM vm_instance v \
         WHERE v.removed IS NULL AND v.type = 'User' AND v.uuid IN ({quoted_uuids}) \
         AND NOT ({NAMED})"
    )
}

/// The lock's name: per database, so that two clouds on one server do not exclude each other
/// (a name is at most 64 characters).
macro_rules! lock_name {
    () => {
        "LEFT(CONCAT('cks-drift.', DATABASE()), 64)"
    };
}

/// The lock's name as the lock functions are given it.
pub const LOCK_NAME: &str = lock_name!();

/// First on the lock's connection: its idle timeout, `seconds` (see `lock::idle_timeout`).
pub fn lock_idle_timeout(seconds: impl Display) -> String {
    format!("SET SESSION wait_timeout = {seconds}")
}

/// Asks for the lock without waiting.
pub const LOCK_TAKE: &str = concat!("SELECT GET_LOCK(", lock_name!(), ", 0)");

/// Who holds the lock, when this instance did not get it: the holder's connection, and
/// whether it is among this user's own (`information_schema.PROCESSLIST` shows a user without
/// `PROCESS` only those).
pub const LOCK_HOLDER: &str = concat!(
    "SELECT IS_USED_LOCK(",
    lock_name!(),
    "), (SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = IS_USED_LOCK(",
    lock_name!(),
    ")), (SELECT HOST FROM information_schema.PROCESSLIST WHERE ID = IS_USED_LOCK(",
    lock_name!(),
    "))"
);

/// Whether this instance still holds the lock, every `lock_interval`.
pub const LOCK_CHECK: &str = concat!("SELECT IS_USED_LOCK(", lock_name!(), ") = CONNECTION_ID()");

/// Gives the lock up, at shutdown.
pub const LOCK_RELEASE: &str = concat!("SELECT RELEASE_LOCK(", lock_name!(), ")");

/// When a column is missing: the database and the account the grants are for, to name them in
/// the `GRANT` to run.
pub const WHO: &str = "SELECT DATABASE(), CURRENT_USER()";

/// The variables `topology` reads: the host, Galera's, and whether the server only reads.
pub const TOPOLOGY_VARIABLES: &str = "SHOW GLOBAL VARIABLES WHERE Variable_name IN \
     ('hostname', 'wsrep_on', 'wsrep_node_name', 'wsrep_cluster_name', 'read_only', \
     'super_read_only')";

/// The status `topology` reads: Galera's cluster size and whether replication threads run
/// (MariaDB's `Slave_running` for the default connection, `Slaves_running` for all of them).
pub const TOPOLOGY_STATUS: &str = "SHOW GLOBAL STATUS WHERE Variable_name IN \
     ('wsrep_cluster_size', 'Slave_running', 'Slaves_running')";

/// At most this many map rows in a cycle (the map query asks for one more, to tell): beyond,
/// the cycle reads the map through the API.
pub const MAX_MAP_ROWS: usize = 500_000;

/// At most this many rows of VMs in a cycle: beyond, the cycle reads them through the API
/// (a cloud has fewer CKS nodes than this by far; more is a database to look at).
pub const MAX_VM_ROWS: usize = 500_000;

/// Every statement, as `docs/database.md` quotes it: the parameters a cycle fills in are shown
/// as `<seconds>` and `<uuids>`, the row caps as they are.
pub fn documented() -> Vec<String> {
    let limit = MAX_MAP_ROWS + 1;
    let vm_limit = MAX_VM_ROWS + 1;
    vec![
        DRIVER_SETTINGS.to_string(),
        SHOW_GRANTS.to_string(),
        COLUMNS.to_string(),
        map(limit),
        OWNERS.to_string(),
        node_vms(vm_limit),
        vms_by_uuid("<uuids>"),
        lock_idle_timeout("<seconds>"),
        LOCK_TAKE.to_string(),
        LOCK_HOLDER.to_string(),
        LOCK_CHECK.to_string(),
        LOCK_RELEASE.to_string(),
        TOPOLOGY_VARIABLES.to_string(),
        TOPOLOGY_STATUS.to_string(),
        WHO.to_string(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOCS: &str = include_str!("../../docs/database.md");

    /// The statements of the docs' block that lists them: each ends with `;`, may be written
    /// over several lines, and `--` lines are comments.
    fn quoted_in_docs() -> Vec<String> {
        let start = DOCS
            .find("<!-- statements -->")
            .expect("docs/database.md marks the statements with <!-- statements -->");
        let block = &DOCS[start..];
        let block = &block[block.find("```sql").expect("a sql block") + 6..];
        let block = &block[..block.find("```").expect("the block ends")];
        let text: String = block
            .lines()
            .filter(|l| !l.trim_start().starts_with("--"))
            .map(|l| format!("{} ", l.trim()))
            .collect();
        text.split(';')
            .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|s| !s.is_empty())
            .collect()
    }

    #[test]
    fn the_docs_quote_every_statement_sent_and_nothing_else() {
        let docs = quoted_in_docs();
        let sent = documented();
        for statement in &sent {
            assert!(
                docs.contains(statement),
                "docs/database.md does not quote:\n{statement}\nit quotes:\n{}",
                docs.join("\n")
            );
        }
        for quoted in &docs {
            assert!(
                sent.contains(quoted),
                "docs/database.md quotes a statement cks-drift does not send:\n{quoted}"
            );
        }
    }

    #[test]
    fn the_statements_are_one_line_with_single_spaces() {
        // As a DBA sees them in the process list, and as the docs' lines join.
        for statement in documented() {
            assert!(
                !statement.contains("  ") && !statement.contains('\n'),
                "{statement}"
            );
        }
    }

    #[test]
    fn the_uuid_query_keeps_out_what_the_node_query_read() {
        assert_eq!(
            vms_by_uuid("'a','b'"),
            format!(
                "SELECT {VM_COLUMNS} FROM vm_instance v WHERE v.removed IS NULL AND \
                 v.type = 'User' AND v.uuid IN ('a','b') AND NOT ({NAMED})"
            )
        );
        assert!(node_vms(7).contains("LIKE '%-___________'"));
        assert!(node_vms(7).ends_with("LIMIT 7"));
    }
}
