//! Every cluster's VM map from the database: `kubernetes_cluster_vm_map` joined to
//! `vm_instance`, rows whose VM was removed or never existed included, which the API drops
//! (`KubernetesClusterManagerImpl` looks each VM up with a `findById` that adds
//! `removed IS NULL`, and skips the row when nothing is found).
//!
//! The rows are read in one query per cycle, then matched against the API's view of each
//! cluster: where the VMs the database says are alive are exactly those the API shows, the
//! rows it hides are the map rows the API cannot show; where they differ, the map changed
//! between the two reads and the cluster is judged on the API alone this cycle.

use std::collections::{BTreeSet, HashMap, HashSet};

use mysql_async::Conn;

use super::schema::Schema;
use super::{Database, DbError};
use crate::snapshot::{VanishedHow, VanishedVm};

/// One map row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbRow {
    /// `kubernetes_cluster_vm_map.vm_id`.
    pub vm_id: u64,
    /// Its `vm_instance` row; `None` when no VM has that id.
    pub vm: Option<DbVm>,
}

/// The `vm_instance` row of a map row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbVm {
    pub uuid: Option<String>,
    pub name: String,
    pub state: String,
    /// `removed` is set: expunged or unmanaged.
    pub removed: bool,
}

/// The map rows of every cluster not removed, by cluster uuid, in map-id order.
#[derive(Debug, Default)]
pub struct DbMap {
    pub clusters: HashMap<String, Vec<DbRow>>,
    /// Rows read, for the logs and the benchmark.
    pub rows: usize,
    pub schema: Option<Schema>,
}

/// The map query: columns every release since 4.16 has (4.14 too).
const MAP_SQL: &str = "SELECT c.uuid, m.vm_id, v.uuid, v.name, v.state, v.removed IS NOT NULL \
     FROM kubernetes_cluster c \
     JOIN kubernetes_cluster_vm_map m ON m.cluster_id = c.id \
     LEFT JOIN vm_instance v ON v.id = m.vm_id \
     WHERE c.removed IS NULL \
     ORDER BY m.cluster_id, m.id";

type MapRow = (
    Option<String>,
    u64,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<i64>,
);

/// Reads every cluster's map rows.
pub async fn read(db: &Database, conn: &mut Conn, schema: &Schema) -> Result<DbMap, DbError> {
    let rows: Vec<MapRow> = db.query(conn, "the VM map query", MAP_SQL).await?;
    let mut map = DbMap {
        rows: rows.len(),
        schema: Some(schema.clone()),
        ..DbMap::default()
    };
    for (cluster, vm_id, uuid, name, state, removed) in rows {
        let Some(cluster) = cluster else {
            continue;
        };
        let vm = name.map(|name| DbVm {
            uuid,
            name,
            state: state.unwrap_or_default(),
            removed: removed.unwrap_or(0) != 0,
        });
        map.clusters
            .entry(cluster)
            .or_default()
            .push(DbRow { vm_id, vm });
    }
    Ok(map)
}

/// The map rows the API does not show, from the database rows of a cluster whose shown VMs
/// are `shown`: a removed VM's row (expunged or unmanaged, under its uuid, so a VM keeps its
/// key from Destroyed to gone) and a row whose VM does not exist (under its numeric id).
/// `None` when the VMs alive in the database are not exactly those shown: the map changed
/// between the reads.
pub fn hidden_rows(rows: &[DbRow], shown: &[&str]) -> Option<Vec<VanishedVm>> {
    let alive: BTreeSet<&str> = rows
        .iter()
        .filter_map(|r| r.vm.as_ref())
        .filter(|vm| !vm.removed)
        .filter_map(|vm| vm.uuid.as_deref())
        .collect();
    let shown: BTreeSet<&str> = shown.iter().copied().collect();
    if alive != shown {
        return None;
    }
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for row in rows {
        let gone = match &row.vm {
            Some(vm) if !vm.removed => continue,
            Some(vm) => VanishedVm {
                id: vm.uuid.clone().unwrap_or_else(|| row.vm_id.to_string()),
                name: Some(vm.name.clone()),
                how: VanishedHow::Expunged,
            },
            None => VanishedVm {
                id: row.vm_id.to_string(),
                name: None,
                how: VanishedHow::DoesNotExist,
            },
        };
        if seen.insert(gone.id.clone()) {
            out.push(gone);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(vm_id: u64, vm: Option<(&str, &str, bool)>) -> DbRow {
        DbRow {
            vm_id,
            vm: vm.map(|(uuid, state, removed)| DbVm {
                uuid: Some(uuid.into()),
                name: format!("name-{uuid}"),
                state: state.into(),
                removed,
            }),
        }
    }

    #[test]
    fn removed_and_unknown_vms_are_the_hidden_rows() {
        let rows = [
            row(1, Some(("a", "Running", false))),
            row(2, Some(("b", "Destroyed", false))),
            row(3, Some(("c", "Expunging", true))),
            row(999_999, None),
            // A duplicate row is one finding.
            row(999_999, None),
        ];
        let hidden = hidden_rows(&rows, &["b", "a"]).unwrap();
        assert_eq!(
            hidden,
            [
                VanishedVm {
                    id: "c".into(),
                    name: Some("name-c".into()),
                    how: VanishedHow::Expunged
                },
                VanishedVm {
                    id: "999999".into(),
                    name: None,
                    how: VanishedHow::DoesNotExist
                },
            ]
        );
    }

    #[test]
    fn a_map_that_changed_between_the_reads_is_not_used() {
        let rows = [row(1, Some(("a", "Running", false)))];
        assert_eq!(hidden_rows(&rows, &["a"]), Some(vec![]));
        assert_eq!(hidden_rows(&rows, &["a", "b"]), None);
        assert_eq!(hidden_rows(&rows, &[]), None);
    }
}
