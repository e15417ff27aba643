//! Which of CloudStack's columns the connected database has. The query for the map uses only
//! columns every release since 4.16 has, and says which release's schema it found; an older
//! release is refused by name, and a table or column that is missing is named with what it
//! means (not CloudStack's database, or a grant that hides it, with the `GRANT` to run).
//!
//! Names from CloudStack's source: `KubernetesClusterVO`, `KubernetesClusterVmMapVO`,
//! `VMInstanceVO` and the upgrade files `schema-41310to41400.sql` (the tables, 4.14),
//! `schema-41520to41600.sql` (`control_node_count`, the map's `control_node`, 4.16),
//! `schema-41810to41900.sql` (`cluster_type`, 4.19) and `schema-42010to42100.sql`
//! (`etcd_node_count`, the map's `etcd_node` and `external_node`, 4.21), all under
//! `engine/schema/src/main/resources/META-INF/db/`.

use std::collections::{BTreeMap, BTreeSet};

use mysql_async::Conn;

use super::grants::{self, Access, Grant};
use super::{Database, DbError};

/// The tables read, each with the columns the map and VM queries need.
pub const REQUIRED: &[(&str, &[&str])] = &[
    (
        "kubernetes_cluster",
        &["id", "uuid", "removed", "account_id"],
    ),
    ("kubernetes_cluster_vm_map", &["id", "cluster_id", "vm_id"]),
    (
        "vm_instance",
        &[
            "id",
            "uuid",
            "name",
            "state",
            "removed",
            "type",
            "created",
            "update_time",
            "account_id",
        ],
    ),
];

/// What the connected schema is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schema {
    /// The oldest release whose columns it has: `4.21`, `4.19` or `4.16`.
    pub release: &'static str,
}

/// Why a column is not visible to the user, as its grants tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hidden {
    /// Its grant on the table names columns, and not this one.
    ColumnGrant,
    /// No line of `SHOW GRANTS` gives `SELECT` on the table (it may come from a role).
    NoGrantSeen,
}

/// Why the connected database is not one cks-drift can read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// A table is missing from `information_schema`: no grant, or not CloudStack's database.
    #[error(
        "the table {table} is not visible to this user: grant it SELECT on {table} \
         (see docs/database.md), or check that the URL names CloudStack's database (cloud)"
    )]
    TableNotVisible { table: &'static str },
    /// A table lacks a column every release since 4.16 has, while the user may read all of it.
    #[error(
        "the table {table} has no column {column}: this is not the database of a \
         CloudStack release cks-drift knows (4.16 or later)"
    )]
    MissingColumn {
        table: &'static str,
        column: &'static str,
    },
    /// A column is hidden from the user by its grants.
    #[error(
        "the column {column} of {table} is not visible to this user: {}; as an \
         administrator, run {grant}",
        match .hidden {
            Hidden::ColumnGrant => super::messages::COLUMN_GRANT,
            Hidden::NoGrantSeen => super::messages::NO_GRANT_SEEN,
        }
    )]
    ColumnNotGranted {
        table: &'static str,
        column: &'static str,
        hidden: Hidden,
        /// The statement that grants the whole table to this user.
        grant: String,
    },
    /// The tables are those of a release before 4.16.
    #[error(
        "the tables are those of CloudStack {looks_like} (kubernetes_cluster_vm_map has no \
         column control_node, added by 4.16): cks-drift reads the database of 4.16 or later; \
         upgrade CloudStack, or remove [database] to read everything through the API"
    )]
    TooOld { looks_like: &'static str },
}

/// What the columns visible to the user lack, before the grants tell why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shortfall {
    Table(&'static str),
    Column {
        table: &'static str,
        column: &'static str,
    },
    /// No `control_node` in the map: 4.14 or 4.15, or a grant that hides it.
    Before416,
}

/// The map's column that 4.16 added (`schema-41520to41600.sql`, which also renamed
/// `kubernetes_cluster.master_node_count` to `control_node_count`). Nothing cks-drift reads
/// tells 4.14 from 4.15.
const MAP_4_16: &str = "control_node";

/// Reads and checks the schema. When something is missing, the user's grants are read too, to
/// tell a grant that hides a column from a column that is not there.
pub async fn probe(db: &Database, conn: &mut Conn) -> Result<Schema, DbError> {
    let rows: Vec<(String, String)> = db
        .query(conn, "the column list", super::statements::COLUMNS)
        .await?;
    let mut columns: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (table, column) in rows {
        columns
            .entry(table.to_ascii_lowercase())
            .or_default()
            .insert(column.to_ascii_lowercase());
    }
    let shortfall = match judge(&columns) {
        Ok(schema) => return Ok(schema),
        Err(s) => s,
    };
    let lines: Vec<String> = db
        .query(conn, "SHOW GRANTS", super::statements::SHOW_GRANTS)
        .await?;
    let grants: Vec<Grant> = lines.iter().filter_map(|l| grants::parse(l)).collect();
    let who: Vec<(Option<String>, String)> =
        db.query(conn, "the user", super::statements::WHO).await?;
    let (database, user) = who.into_iter().next().unwrap_or_default();
    Err(explain(
        shortfall,
        &grants,
        database.as_deref().unwrap_or_default(),
        &user,
    )
    .into())
}

/// The schema of the columns found, or what is missing.
pub fn judge(columns: &BTreeMap<String, BTreeSet<String>>) -> Result<Schema, Shortfall> {
    for &(table, needed) in REQUIRED {
        let Some(has) = columns.get(table) else {
            return Err(Shortfall::Table(table));
        };
        if let Some(&column) = needed.iter().find(|c| !has.contains(**c)) {
            return Err(Shortfall::Column { table, column });
        }
    }
    let has = |table: &str, column: &str| columns.get(table).is_some_and(|c| c.contains(column));
    let release = if has("kubernetes_cluster", "etcd_node_count") {
        "4.21"
    } else if has("kubernetes_cluster", "cluster_type") {
        "4.19"
    } else if has("kubernetes_cluster_vm_map", MAP_4_16) {
        "4.16"
    } else {
        return Err(Shortfall::Before416);
    };
    Ok(Schema { release })
}

/// What a shortfall means, given the user's grants: a grant that hides a column, or a
/// database that is not (or not yet) one cks-drift reads. `user` is `CURRENT_USER()`.
pub fn explain(shortfall: Shortfall, grants: &[Grant], database: &str, user: &str) -> SchemaError {
    let (table, column) = match shortfall {
        Shortfall::Table(table) => return SchemaError::TableNotVisible { table },
        Shortfall::Column { table, column } => (table, column),
        Shortfall::Before416 => ("kubernetes_cluster_vm_map", MAP_4_16),
    };
    let hidden = match grants::select_access(grants, database, table) {
        Access::Whole if shortfall == Shortfall::Before416 => {
            return SchemaError::TooOld {
                looks_like: "4.14 or 4.15",
            };
        }
        Access::Whole => return SchemaError::MissingColumn { table, column },
        Access::Columns(_) => Hidden::ColumnGrant,
        Access::None => Hidden::NoGrantSeen,
    };
    SchemaError::ColumnNotGranted {
        table,
        column,
        hidden,
        grant: grant_statement(database, table, user),
    }
}

/// `GRANT SELECT ON `db`.`table` TO 'user'@'host';` for `CURRENT_USER()`'s `user@host`.
fn grant_statement(database: &str, table: &str, user: &str) -> String {
    let (name, host) = user.rsplit_once('@').unwrap_or((user, "%"));
    let quote = |s: &str| format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"));
    format!(
        "GRANT SELECT ON `{}`.`{table}` TO {}@{};",
        database.replace('`', "``"),
        quote(name),
        quote(host)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const VM_COLUMNS: &[&str] = &[
        "id",
        "uuid",
        "name",
        "state",
        "removed",
        "type",
        "created",
        "update_time",
        "account_id",
    ];

    fn columns(spec: &[(&str, &[&str])]) -> BTreeMap<String, BTreeSet<String>> {
        spec.iter()
            .map(|(t, cs)| (t.to_string(), cs.iter().map(|c| c.to_string()).collect()))
            .collect()
    }

    #[test]
    fn the_release_is_read_from_the_columns() {
        let v416 = columns(&[
            (
                "kubernetes_cluster",
                &["id", "uuid", "removed", "account_id", "control_node_count"],
            ),
            (
                "kubernetes_cluster_vm_map",
                &["id", "cluster_id", "vm_id", "control_node"],
            ),
            ("vm_instance", VM_COLUMNS),
        ]);
        assert_eq!(judge(&v416), Ok(Schema { release: "4.16" }));
        assert_eq!(judge(&required(true)), Ok(Schema { release: "4.16" }));
        let v421 = columns(&[
            (
                "kubernetes_cluster",
                &[
                    "id",
                    "uuid",
                    "removed",
                    "account_id",
                    "cluster_type",
                    "etcd_node_count",
                ],
            ),
            (
                "kubernetes_cluster_vm_map",
                &[
                    "id",
                    "cluster_id",
                    "vm_id",
                    "control_node",
                    "etcd_node",
                    "external_node",
                ],
            ),
            ("vm_instance", VM_COLUMNS),
        ]);
        assert_eq!(judge(&v421), Ok(Schema { release: "4.21" }));
    }

    /// The columns of `REQUIRED`, with the map's `control_node` or without.
    fn required(control_node: bool) -> BTreeMap<String, BTreeSet<String>> {
        let mut c: BTreeMap<String, BTreeSet<String>> = REQUIRED
            .iter()
            .map(|(t, cs)| (t.to_string(), cs.iter().map(|c| c.to_string()).collect()))
            .collect();
        if control_node {
            c.get_mut("kubernetes_cluster_vm_map")
                .unwrap()
                .insert("control_node".into());
        }
        c
    }

    fn grants(lines: &[&str]) -> Vec<Grant> {
        lines.iter().map(|l| grants::parse(l).unwrap()).collect()
    }

    #[test]
    fn a_missing_table_or_column_is_named() {
        let mut no_vms = required(true);
        no_vms.remove("vm_instance");
        assert_eq!(judge(&no_vms), Err(Shortfall::Table("vm_instance")));
        let e = explain(Shortfall::Table("vm_instance"), &[], "cloud", "u@%").to_string();
        assert!(
            e.contains("vm_instance is not visible") && e.contains("grant"),
            "{e}"
        );
        let mut no_vm_id = required(true);
        no_vm_id
            .get_mut("kubernetes_cluster_vm_map")
            .unwrap()
            .remove("vm_id");
        let short = judge(&no_vm_id).unwrap_err();
        let whole = grants(&["GRANT SELECT ON `cloud`.* TO `cksdrift`@`%`"]);
        let e = explain(short, &whole, "cloud", "cksdrift@%").to_string();
        assert!(
            e.contains("kubernetes_cluster_vm_map has no column vm_id"),
            "{e}"
        );
    }

    #[test]
    fn a_column_hidden_by_a_column_grant_is_named_as_a_grant() {
        let mut narrow = required(true);
        narrow.get_mut("vm_instance").unwrap().remove("update_time");
        let short = judge(&narrow).unwrap_err();
        let lines = grants(&[
            "GRANT USAGE ON *.* TO `cksdrift`@`10.0.0.%`",
            "GRANT SELECT (`id`, `uuid`) ON `cloud`.`vm_instance` TO `cksdrift`@`10.0.0.%`",
        ]);
        assert_eq!(
            explain(short.clone(), &lines, "cloud", "cksdrift@10.0.0.%").to_string(),
            "the column update_time of vm_instance is not visible to this user: its grant on \
             the table names columns, and not this one; as an administrator, run GRANT SELECT \
             ON `cloud`.`vm_instance` TO 'cksdrift'@'10.0.0.%';"
        );
        // No grant seen at all (a role's, say): a grant is still what to look at.
        let e = explain(short, &lines[..1], "cloud", "cksdrift@10.0.0.%");
        assert!(
            matches!(
                e,
                SchemaError::ColumnNotGranted {
                    hidden: Hidden::NoGrantSeen,
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn a_schema_before_4_16_is_refused_by_its_release() {
        let old = required(false);
        assert_eq!(judge(&old), Err(Shortfall::Before416));
        let whole = grants(&["GRANT SELECT ON `cloud`.`kubernetes_cluster_vm_map` TO `u`@`%`"]);
        let e = explain(Shortfall::Before416, &whole, "cloud", "u@%");
        assert_eq!(
            e,
            SchemaError::TooOld {
                looks_like: "4.14 or 4.15"
            }
        );
        assert!(e.to_string().contains("CloudStack 4.14 or 4.15"), "{e}");
        // The same columns behind a column grant are a grant, not a release.
        let narrow = grants(&[
            "GRANT SELECT (`id`, `cluster_id`, `vm_id`) ON `cloud`.`kubernetes_cluster_vm_map` \
             TO `u`@`%`",
        ]);
        let e = explain(Shortfall::Before416, &narrow, "cloud", "u@%").to_string();
        assert!(
            e.starts_with("the column control_node of kubernetes_cluster_vm_map is not visible"),
            "{e}"
        );
    }
}
