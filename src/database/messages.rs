//! The database's log lines and problem texts, as an operator reads them: the lock and what an
//! instance does without it, a column that a grant hides, a TLS connection that failed.
//! Wording only; when each is shown belongs to `lock`, `topology`, `schema` and `tls`.

use super::topology::{Node, NodeKind};

/// The lock could not be asked for.
pub const LOCK_UNASKED: &str =
    "cannot ask for the lock; this instance stands by until the database answers";

/// The database refuses the lock itself (a server setting, not an outage).
pub const LOCK_REFUSED: &str = "the database refuses the lock; this instance stands by and asks \
     again every lock_interval";

/// The releases that refuse `GET_LOCK` under wsrep (MDEV-30473), each series' first fixed
/// release after it (MDEV-31325) being the next.
pub const WSREP_REFUSING: [(u16, u16, u16); 6] = [
    (10, 4, 29),
    (10, 5, 20),
    (10, 6, 13),
    (10, 9, 6),
    (10, 10, 4),
    (10, 11, 3),
];

/// Why a MariaDB release with `wsrep_on = ON` refused `GET_LOCK` (error 1235), and what to do.
pub fn wsrep_refusal(version: (u16, u16, u16)) -> String {
    let (major, minor, patch) = version;
    let upgrade = if WSREP_REFUSING.contains(&version) {
        format!("{major}.{minor}.{} or later", patch + 1)
    } else {
        "the next release of its series or later".to_string()
    };
    format!(
        "MariaDB {major}.{minor}.{patch} refuses GET_LOCK while wsrep_on = ON (Galera): \
         MDEV-30473 made 10.4.29, 10.5.20, 10.6.13, 10.9.6, 10.10.4 and 10.11.3 refuse it, and \
         MDEV-31325 allowed it again in the next release of each series. Upgrade MariaDB to \
         {upgrade} (the lock is then local to each node: see docs/several-management-servers.md), \
         or remove [database] and run a single instance of cks-drift"
    )
}

/// Why Percona XtraDB Cluster refused `GET_LOCK`, and what to do.
pub const PXC_REFUSAL: &str = "Percona XtraDB Cluster refuses GET_LOCK while pxc_strict_mode = \
     ENFORCING: set pxc_strict_mode to PERMISSIVE (it then logs a warning), or MASTER when every \
     write goes to one node (the lock is local to each node either way: see \
     docs/several-management-servers.md), or remove [database] and run a single instance of \
     cks-drift";

/// The lock was taken on a Galera node or a replica: it excludes only instances connected to
/// that same server.
pub fn lock_is_local(node: &Node) -> String {
    match node.kind {
        NodeKind::Galera => format!(
            "the lock is taken on {node}: GET_LOCK is local to that node, so an instance \
             connected to another node of the cluster holds the lock too and alerts every \
             mismatch again. Make every instance reach the same node (database.url naming \
             that node in every config, or a proxy that sends every connection to a single \
             writer)"
        ),
        NodeKind::Replica | NodeKind::Server => format!(
            "the lock is taken on {node}: GET_LOCK is local to that server, so an instance \
             connected to its primary or to another replica holds the lock too and alerts \
             every mismatch again (and a replica may lag). Point database.url of every instance \
             at the same server, the primary"
        ),
    }
}

/// Why a column is hidden: a column-level grant on its table.
pub const COLUMN_GRANT: &str = "its grant on the table names columns, and not this one";
/// Why a column is hidden: no grant on its table in `SHOW GRANTS`.
pub const NO_GRANT_SEEN: &str =
    "no line of SHOW GRANTS gives it SELECT on the whole table (a role's grant is not followed)";

/// What to do about a server that offers no TLS.
pub const TLS_NOT_OFFERED: &str = "MariaDB ships with TLS off (SHOW VARIABLES LIKE 'have_ssl' \
     says DISABLED): give the server ssl_cert and ssl_key (see docs/database.md, TLS to the \
     database), or set database.tls = false if the network to the database is trusted (TLS is on \
     by default for a host other than loopback)";

/// What to do about a certificate without subjectAltName.
pub const TLS_NO_NAMES: &str = "MySQL's auto-generated certificates are like this. Give the \
     server a certificate with subjectAltName DNS:<its host name> (or IP:<its address>), signed \
     by the CA in database.ca_file, or set database.tls = false if the network to the database \
     is trusted";

/// What to do about a certificate from an unknown CA.
pub const TLS_UNKNOWN_ISSUER: &str = "set database.ca_file to the PEM of the CA that signed \
     the server's certificate (MySQL's auto-generated one is ca.pem in its data directory), or \
     database.tls = false if the network to the database is trusted";

/// What to do about another refused certificate.
pub const TLS_OTHER: &str = "renew or replace the server's certificate, or set database.tls = \
     false if the network to the database is trusted";

/// What to do about a certificate for other names: connect by one of them, or check against one.
pub fn tls_other_names(presented: &[String]) -> String {
    // An IP address in the URL is the usual case; the certificate's first DNS name is the
    // setting to suggest.
    match presented
        .iter()
        .find(|n| n.parse::<std::net::IpAddr>().is_err())
    {
        Some(name) => format!(
            "write that host in database.url, or set database.tls_server_name = \"{name}\" \
             (the certificate is checked against it; the connection still goes to the URL's host)"
        ),
        None => "write one of those addresses in database.url, or set \
                 database.tls_server_name to one of them"
            .to_string(),
    }
}
