//! A private, real MariaDB server holding CloudStack's `kubernetes_cluster`,
//! `kubernetes_cluster_vm_map` and `vm_instance` tables as they would describe a simulated
//! [`World`](crate::World): what the tests and benchmarks of cks-drift's database source read.
//!
//! The server runs from a fresh temporary data directory on a free loopback port and dies with
//! its handle. This module talks to it only through MariaDB's own command-line programs
//! (`mariadb-install-db`, `mariadbd`, `mariadb-admin`, `mariadb`), never through the client
//! library cks-drift uses, so that a bug in that client cannot be agreed with by the harness
//! that fills its tables. It holds no drift logic and no other CloudStack table.
//!
//! Column names, types and the release that added each column follow CloudStack's
//! `KubernetesClusterVO`, `KubernetesClusterVmMapVO`, `VMInstanceVO`, `setup/db/create-schema.sql`
//! and the `schema-*.sql` upgrade files, in `utf8mb3` as CloudStack's `utf8` tables are.
//! Foreign keys to tables the harness does not create are left out; the index InnoDB makes
//! for each is kept under its name.
//!
//! The rooms: `server` runs the server process and its clients, `schema` creates the tables
//! and the reader, `mirror` writes a world's rows, `sql` writes SQL text.

mod mirror;
mod schema;
mod server;
mod sql;
#[cfg(test)]
mod tests;

/// The server's buffer pool as started, in bytes: what the mirror sizes a large world's
/// against (`mirror::server_sizing`) and the server starts with.
const BUFFER_POOL: u64 = 16 << 20;

pub use mirror::vm_db_id;
pub use server::{GALERA_CLUSTER, GALERA_NODE, PrivateMariaDb, ServerTls};

/// The database CloudStack's tables live in.
pub const DATABASE: &str = "cloud";
/// The read-only account cks-drift connects as.
pub const READER: &str = "cksdrift";
/// The tables [`READER`] may read, and nothing else.
pub const READABLE_TABLES: [&str; 3] = [
    "kubernetes_cluster",
    "kubernetes_cluster_vm_map",
    "vm_instance",
];

/// Which CloudStack release's columns the tables have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schema {
    /// The newest release's (4.22): `cluster_type` (4.19), `etcd_node_count` and the map's
    /// `etcd_node`/`external_node` flags (4.21), `csi_enabled` (4.22) and the rest.
    Newest,
    /// CloudStack 4.16's: `control_node_count` and the map's `control_node` exist, nothing
    /// added by 4.17 or later does.
    V4_16,
}
