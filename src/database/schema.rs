//! Which of CloudStack's columns the connected database has. The query for the map uses only
//! columns every release since 4.16 has, and says which release's schema it found; a table or
//! column that is missing is named with what it means (not CloudStack's database, or a
//! missing grant).
//!
//! Names from CloudStack's source: `KubernetesClusterVO`, `KubernetesClusterVmMapVO`,
//! `VMInstanceVO` and the upgrade files `schema-41310to41400.sql` (the tables, 4.14),
//! `schema-41520to41600.sql` (`control_node_count`, the map's `control_node`, 4.16),
//! `schema-41810to41900.sql` (`cluster_type`, 4.19) and `schema-42010to42100.sql`
//! (`etcd_node_count`, the map's `etcd_node` and `external_node`, 4.21), all under
//! `engine/schema/src/main/resources/META-INF/db/`.

use std::collections::{BTreeMap, BTreeSet};

use mysql_async::Conn;

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
    /// The oldest release whose columns it has: `4.21`, `4.19`, `4.16` or `4.14`.
    pub release: &'static str,
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
    /// A table lacks a column every release since 4.16 has.
    #[error(
        "the table {table} has no column {column}: this is not the database of a \
         CloudStack release cks-drift knows (4.16 or later)"
    )]
    MissingColumn {
        table: &'static str,
        column: &'static str,
    },
}

/// Reads and checks the schema.
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
    Ok(judge(&columns)?)
}

/// The schema of the columns found, or what is missing.
pub fn judge(columns: &BTreeMap<String, BTreeSet<String>>) -> Result<Schema, SchemaError> {
    for &(table, needed) in REQUIRED {
        let Some(has) = columns.get(table) else {
            return Err(SchemaError::TableNotVisible { table });
        };
        if let Some(&column) = needed.iter().find(|c| !has.contains(**c)) {
            return Err(SchemaError::MissingColumn { table, column });
        }
    }
    let has = |table: &str, column: &str| columns.get(table).is_some_and(|c| c.contains(column));
    let release = if has("kubernetes_cluster", "etcd_node_count") {
        "4.21"
    } else if has("kubernetes_cluster", "cluster_type") {
        "4.19"
    } else if has("kubernetes_cluster_vm_map", "control_node") {
        "4.16"
    } else {
        "4.14"
    };
    Ok(Schema { release })
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

    #[test]
    fn a_missing_table_or_column_is_named() {
        let no_vms = columns(&[
            (
                "kubernetes_cluster",
                &["id", "uuid", "removed", "account_id"],
            ),
            ("kubernetes_cluster_vm_map", &["id", "cluster_id", "vm_id"]),
        ]);
        let e = judge(&no_vms).unwrap_err().to_string();
        assert!(
            e.contains("vm_instance is not visible") && e.contains("grant"),
            "{e}"
        );
        let no_vm_id = columns(&[
            (
                "kubernetes_cluster",
                &["id", "uuid", "removed", "account_id"],
            ),
            ("kubernetes_cluster_vm_map", &["id", "cluster_id"]),
            ("vm_instance", VM_COLUMNS),
        ]);
        let e = judge(&no_vm_id).unwrap_err().to_string();
        assert!(
            e.contains("kubernetes_cluster_vm_map has no column vm_id"),
            "{e}"
        );
    }
}
