//! What the lock is taken on: a lone server, a node of a Galera cluster, or a replica (or a
//! read-only server). `GET_LOCK` is local to the server that runs it: Galera does not
//! replicate it, nor does replication, so instances connected to two nodes, or to a primary
//! and its replica, both hold "the" lock. Read once each time the lock is taken, with
//! statements a user with `SELECT` on three tables may run (`SHOW SLAVE STATUS` needs a
//! privilege it lacks): `SHOW GLOBAL VARIABLES` and `SHOW GLOBAL STATUS` filtered by name,
//! which on MySQL simply leave out the variables only MariaDB has, and the other way round.

use std::collections::BTreeMap;

use mysql_async::Conn;

use super::{Database, DbError};

use super::statements::{TOPOLOGY_STATUS as STATUS, TOPOLOGY_VARIABLES as VARIABLES};

/// How far the lock reaches, the label `kind` of `cks_drift_database_lock_node_info`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    /// A lone server (or a primary): every instance connected to it shares the lock.
    Server,
    /// A node of a Galera cluster (`wsrep_on = ON`): the lock is the node's alone.
    Galera,
    /// A replica (replication threads run) or a read-only server: the lock is its alone.
    Replica,
}

impl NodeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeKind::Server => "server",
            NodeKind::Galera => "galera",
            NodeKind::Replica => "replica",
        }
    }
}

/// The server the lock was taken on, as it describes itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub kind: NodeKind,
    /// `wsrep_node_name` on a Galera node, else the host name (`hostname`).
    pub name: String,
    /// The server's host name (`hostname`), `?` when it does not say.
    pub host: String,
    /// `wsrep_cluster_name`, on a Galera node.
    pub cluster: Option<String>,
    /// `wsrep_cluster_size`, on a Galera node: the nodes in its component now.
    pub size: Option<u64>,
    /// Replication threads run (`Slave_running` ON, or `Slaves_running` above 0).
    pub replicating: bool,
    /// `read_only` (or MySQL's `super_read_only`) is ON.
    pub read_only: bool,
}

/// The longest name kept from the server: names are the operator's, but shown in logs,
/// labels and `/healthz`, bounded and escaped like any text read from elsewhere.
const NAME_MAX: usize = 64;

fn is_on(value: Option<&String>) -> bool {
    value.is_some_and(|v| v.eq_ignore_ascii_case("ON") || v == "1")
}

impl Node {
    /// The node the variables and status (name in lower case → value) describe.
    pub fn from_variables(values: &BTreeMap<String, String>) -> Node {
        let get = |name: &str| values.get(name).filter(|v| !v.is_empty());
        let shown = |v: &String| crate::base::untrusted::shown(v, NAME_MAX);
        let host = get("hostname").map_or_else(|| "?".to_string(), shown);
        let galera = is_on(get("wsrep_on"));
        let replicating = is_on(get("slave_running"))
            || get("slaves_running")
                .and_then(|v| v.parse::<u64>().ok())
                .is_some_and(|n| n > 0);
        let read_only = is_on(get("read_only")) || is_on(get("super_read_only"));
        let kind = if galera {
            NodeKind::Galera
        } else if replicating || read_only {
            NodeKind::Replica
        } else {
            NodeKind::Server
        };
        let name = match (galera, get("wsrep_node_name")) {
            (true, Some(name)) => shown(name),
            _ => host.clone(),
        };
        Node {
            kind,
            name,
            host,
            cluster: get("wsrep_cluster_name").filter(|_| galera).map(shown),
            size: get("wsrep_cluster_size")
                .filter(|_| galera)
                .and_then(|v| v.parse().ok()),
            replicating,
            read_only,
        }
    }

    /// Whether instances connected elsewhere can hold the lock at the same time: on a Galera
    /// node or a replica.
    pub fn is_local(&self) -> bool {
        self.kind != NodeKind::Server
    }
}

impl std::fmt::Display for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            NodeKind::Server => write!(f, "server {}", self.name),
            NodeKind::Galera => {
                write!(f, "Galera node {}", self.name)?;
                if self.host != self.name {
                    write!(f, " (host {})", self.host)?;
                }
                if let Some(cluster) = &self.cluster {
                    write!(f, " of cluster {cluster}")?;
                }
                match self.size {
                    Some(1) => write!(f, ", 1 node"),
                    Some(n) => write!(f, ", {n} nodes"),
                    None => Ok(()),
                }
            }
            NodeKind::Replica => {
                let why = match (self.replicating, self.read_only) {
                    (true, true) => "replication running, read_only ON",
                    (true, false) => "replication running",
                    _ => "read_only ON",
                };
                write!(f, "replica {} ({why})", self.name)
            }
        }
    }
}

/// Reads what `conn`'s server is.
pub async fn read(db: &Database, conn: &mut Conn) -> Result<Node, DbError> {
    let mut values = BTreeMap::new();
    for (what, sql) in [
        ("the server's variables", VARIABLES),
        ("its status", STATUS),
    ] {
        let rows: Vec<(String, Option<String>)> = db.query(conn, what, sql).await?;
        values.extend(
            rows.into_iter()
                .map(|(name, value)| (name.to_ascii_lowercase(), value.unwrap_or_default())),
        );
    }
    Ok(Node::from_variables(&values))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(pairs: &[(&str, &str)]) -> Node {
        Node::from_variables(
            &pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn a_lone_mariadb_or_mysql_is_a_server() {
        let mariadb = node(&[
            ("hostname", "db1"),
            ("wsrep_on", "OFF"),
            ("wsrep_node_name", "db1"),
            ("wsrep_cluster_name", "my_wsrep_cluster"),
            ("read_only", "OFF"),
            ("slave_running", "OFF"),
            ("slaves_running", "0"),
        ]);
        assert_eq!(mariadb.kind, NodeKind::Server);
        assert_eq!(mariadb.cluster, None);
        assert!(!mariadb.is_local());
        assert_eq!(mariadb.to_string(), "server db1");
        // MySQL has no wsrep or Slave_running; super_read_only is its own.
        let mysql = node(&[
            ("hostname", "db2"),
            ("read_only", "OFF"),
            ("super_read_only", "OFF"),
        ]);
        assert_eq!(mysql.kind, NodeKind::Server);
        assert_eq!(node(&[]).to_string(), "server ?");
    }

    #[test]
    fn a_galera_node_is_named_with_its_cluster() {
        let n = node(&[
            ("hostname", "db1.example"),
            ("wsrep_on", "ON"),
            ("wsrep_node_name", "node1"),
            ("wsrep_cluster_name", "cloud"),
            ("wsrep_cluster_size", "3"),
            ("read_only", "OFF"),
        ]);
        assert_eq!(n.kind, NodeKind::Galera);
        assert!(n.is_local());
        assert_eq!(
            n.to_string(),
            "Galera node node1 (host db1.example) of cluster cloud, 3 nodes"
        );
        let same = node(&[
            ("hostname", "node1"),
            ("wsrep_on", "ON"),
            ("wsrep_node_name", "node1"),
            ("wsrep_cluster_size", "1"),
        ]);
        assert_eq!(same.to_string(), "Galera node node1, 1 node");
    }

    #[test]
    fn a_running_replica_or_a_read_only_server_is_a_replica() {
        let running = node(&[("hostname", "r1"), ("slave_running", "ON")]);
        assert_eq!(running.kind, NodeKind::Replica);
        assert_eq!(running.to_string(), "replica r1 (replication running)");
        let named = node(&[
            ("hostname", "r2"),
            ("slaves_running", "2"),
            ("read_only", "ON"),
        ]);
        assert_eq!(
            named.to_string(),
            "replica r2 (replication running, read_only ON)"
        );
        let mysql = node(&[("hostname", "r3"), ("super_read_only", "ON")]);
        assert_eq!(mysql.to_string(), "replica r3 (read_only ON)");
    }

    #[test]
    fn names_are_bounded_and_escaped() {
        let n = node(&[
            ("wsrep_on", "ON"),
            ("wsrep_node_name", "a\nb"),
            ("hostname", "h"),
        ]);
        assert!(!n.name.contains('\n'), "{:?}", n.name);
        let long = "x".repeat(200);
        let n = node(&[("hostname", &long)]);
        assert_eq!(n.name.chars().count(), NAME_MAX);
    }
}
