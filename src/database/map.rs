//! Every cluster's VM map from the database: `kubernetes_cluster_vm_map` joined to
//! `vm_instance`, rows whose VM was removed or never existed included, which the API drops
//! (`KubernetesClusterManagerImpl` looks each VM up with a `findById` that adds
//! `removed IS NULL`, and skips the row when nothing is found).
//!
//! The rows are read in one query per cycle; `inventory` matches them against the API's view
//! of each cluster.

use std::collections::HashMap;

use mysql_async::Conn;

use super::schema::Schema;
use super::{Database, DbError};

/// One map row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbRow {
    /// `kubernetes_cluster_vm_map.vm_id`.
    pub vm_id: u64,
    /// Its `vm_instance` row; `None` when no VM has that id.
    pub vm: Option<DbVm>,
}

/// The `vm_instance` row of a map row; the name and state of a removed VM only.
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

/// At most this many map rows in a cycle: beyond, the cycle reads the map through the API.
pub const MAX_MAP_ROWS: usize = 500_000;

/// The map query: columns every release since 4.16 has (4.14 too). `LIMIT`'s one extra row
/// tells a cut from a full read.
fn map_sql() -> String {
    format!(
        "SELECT c.uuid, m.vm_id, v.uuid, v.name, v.state, v.removed IS NOT NULL \
         FROM kubernetes_cluster c \
         JOIN kubernetes_cluster_vm_map m ON m.cluster_id = c.id \
         LEFT JOIN vm_instance v ON v.id = m.vm_id \
         WHERE c.removed IS NULL \
         ORDER BY m.cluster_id, m.id \
         LIMIT {}",
        MAX_MAP_ROWS + 1
    )
}

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
    let map = DbMap {
        schema: Some(schema.clone()),
        ..DbMap::default()
    };
    let map = db
        .fold(
            conn,
            "the VM map query",
            &map_sql(),
            map,
            |mut map, (cluster, vm_id, uuid, name, state, removed): MapRow| {
                map.rows += 1;
                // Past the cap nothing more is kept; the count tells the caller.
                if map.rows > MAX_MAP_ROWS {
                    return map;
                }
                let Some(cluster) = cluster else {
                    return map;
                };
                // A VM not removed is known by its uuid alone (`inventory::hidden_rows`): its
                // name and state are not kept.
                let removed = removed.unwrap_or(0) != 0;
                let vm = name.map(|name| DbVm {
                    uuid,
                    name: if removed { name } else { String::new() },
                    state: if removed {
                        state.unwrap_or_default()
                    } else {
                        String::new()
                    },
                    removed,
                });
                map.clusters
                    .entry(cluster)
                    .or_default()
                    .push(DbRow { vm_id, vm });
                map
            },
        )
        .await?;
    if map.rows > MAX_MAP_ROWS {
        return Err(DbError::TooManyRows {
            what: "the VM map query",
            max: MAX_MAP_ROWS,
        });
    }
    Ok(map)
}
