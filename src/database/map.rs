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
    /// What `vm_instance` has of that id.
    pub vm: MapVm,
}

/// The VM of a map row. Most rows' VMs are alive, and of those only the uuid is needed (to
/// compare with the API's map): 32 bytes a row in all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MapVm {
    /// Not removed; its uuid (`None` where the row has none).
    Alive(Option<Uuid>),
    /// `removed` is set: expunged or unmanaged.
    Removed(Box<DbVm>),
    /// No VM has that id.
    Missing,
}

/// The `vm_instance` row of a removed VM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbVm {
    pub uuid: Option<String>,
    pub name: String,
    pub state: String,
}

/// A VM's uuid: in 16 bytes where it is written as CloudStack writes them (lowercase hex,
/// 8-4-4-4-12), so that writing it back gives the same text; as written otherwise.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Uuid {
    Bytes([u8; 16]),
    Text(Box<str>),
}

impl Uuid {
    pub fn new(s: &str) -> Uuid {
        let lower_hex = s.len() == 36
            && s.bytes().enumerate().all(|(i, c)| match i {
                8 | 13 | 18 | 23 => c == b'-',
                _ => c.is_ascii_digit() || (b'a'..=b'f').contains(&c),
            });
        match lower_hex
            .then(|| u128::from_str_radix(&s.replace('-', ""), 16).ok())
            .flatten()
        {
            Some(n) => Uuid::Bytes(n.to_be_bytes()),
            None => Uuid::Text(s.into()),
        }
    }
}

impl std::fmt::Display for Uuid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Uuid::Text(s) => f.write_str(s),
            Uuid::Bytes(b) => {
                let h = format!("{:032x}", u128::from_be_bytes(*b));
                write!(
                    f,
                    "{}-{}-{}-{}-{}",
                    &h[..8],
                    &h[8..12],
                    &h[12..16],
                    &h[16..20],
                    &h[20..]
                )
            }
        }
    }
}

/// The map rows of every cluster not removed, by cluster uuid, in map-id order.
#[derive(Debug, Default)]
pub struct DbMap {
    pub clusters: HashMap<String, Vec<DbRow>>,
    /// Rows read, for the logs and the benchmark.
    pub rows: usize,
    pub schema: Option<Schema>,
}

pub use super::statements::MAX_MAP_ROWS;

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
            &super::statements::map(MAX_MAP_ROWS + 1),
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
                // A VM not removed is known by its uuid alone (`inventory::hidden_rows`).
                let vm = match (name, removed.unwrap_or(0) != 0) {
                    (None, _) => MapVm::Missing,
                    (Some(_), false) => MapVm::Alive(uuid.as_deref().map(Uuid::new)),
                    (Some(name), true) => MapVm::Removed(Box::new(DbVm {
                        uuid,
                        name,
                        state: state.unwrap_or_default(),
                    })),
                };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_written_back_as_read() {
        for s in [
            "6a3bd1f1-57d0-4bd6-a2a0-9e2c1b7c0f3e",
            "00000000-0000-0000-0000-000000000000",
            "6A3BD1F1-57D0-4BD6-A2A0-9E2C1B7C0F3E",
            "not-a-uuid",
            "",
        ] {
            assert_eq!(Uuid::new(s).to_string(), s);
        }
        assert!(matches!(
            Uuid::new("6a3bd1f1-57d0-4bd6-a2a0-9e2c1b7c0f3e"),
            Uuid::Bytes(_)
        ));
        assert_eq!(std::mem::size_of::<DbRow>(), 32);
    }
}
