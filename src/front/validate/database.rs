//! `validate-config --connect` for `[database]`: the login, the schema and the grants of the
//! user, the map query, and the lock, each a line of its own naming what failed; and a
//! warning when the server is a Galera node or a replica, where the lock is that server's alone.

use super::{Finding, Severity};
use crate::config::DatabaseSettings;
use crate::database::lock::Lock;
use crate::database::{Database, DbError, grants, statements, topology};

/// Privileges a `SHOW GRANTS` line gives beyond reading (cks-drift only reads), or `None`; a
/// line that is no grant the parser knows is not guessed at.
fn broader_than_select(line: &str) -> Option<String> {
    let extra = grants::parse(line)?.beyond_select();
    (!extra.is_empty()).then(|| extra.join(", "))
}

/// The checks, in order; a failed step ends them.
pub async fn connect(settings: &DatabaseSettings) -> Vec<Finding> {
    let mut out = Vec::new();
    let db = Database::new(settings);
    let who = format!("{}@{}", settings.user, db.address());
    let mut conn = match db.connect().await {
        Ok(c) => c,
        // A TLS failure names its own fix.
        Err(e @ DbError::Tls { .. }) => {
            out.push(Finding::error("database", e.to_string()));
            return out;
        }
        Err(e) => {
            out.push(Finding::error(
                "database",
                format!(
                    "{e}; check database.url, the password (database.password_file or \
                     CKS_DRIFT_DB_PASSWORD) and that the user may log in from this host"
                ),
            ));
            return out;
        }
    };
    out.push(Finding::new(
        Severity::Ok,
        "database",
        format!("{who}: logged in"),
    ));
    if let Ok(grants) = db
        .query::<String>(&mut conn, "SHOW GRANTS", statements::SHOW_GRANTS)
        .await
    {
        let broader: Vec<String> = grants
            .iter()
            .filter_map(|g| broader_than_select(g))
            .collect();
        if !broader.is_empty() {
            out.push(Finding::warning(
                "database",
                format!(
                    "{} may also {}: cks-drift only reads, so give it a user with SELECT on \
                     kubernetes_cluster, kubernetes_cluster_vm_map and vm_instance alone (see \
                     docs/database.md)",
                    settings.user,
                    broader.join("; ")
                ),
            ));
        }
    }
    match db.read_map().await {
        Ok(map) => out.push(Finding::new(
            Severity::Ok,
            "database",
            format!(
                "schema of CloudStack {} or later; the VM map query read {} rows of {} clusters",
                map.schema.as_ref().map_or("?", |s| s.release),
                map.rows,
                map.clusters.len()
            ),
        )),
        Err(e) => {
            out.push(Finding::error("database", e.to_string()));
            return out;
        }
    }
    // What the lock will exclude: read here too, as a standby's lock is not read.
    let node = topology::read(&db, &mut conn).await;
    let _ = conn.disconnect().await;
    // The lock as an instance takes it, on a connection of its own.
    let lock = Lock::new(db, settings.lock_interval);
    out.push(lock_step(&lock).await);
    match node {
        Ok(node) if node.is_local() => out.push(Finding::warning(
            "database (lock)",
            crate::database::lock_is_local(&node),
        )),
        Ok(_) => {}
        Err(e) => out.push(Finding::warning(
            "database (lock)",
            format!("cannot tell whether the server is a Galera node or a replica: {e}"),
        )),
    }
    out
}

/// The lock taken and released, as an instance takes it.
async fn lock_step(lock: &Lock) -> Finding {
    match lock.try_acquire().await {
        Ok(true) => {
            lock.release().await;
            Finding::new(
                Severity::Ok,
                "database (lock)",
                "the lock can be taken and released",
            )
        }
        Ok(false) => Finding::new(
            Severity::Ok,
            "database (lock)",
            "the lock is held by another connection: a running instance checks, and one started \
             with this config would stand by",
        ),
        Err(e) => Finding::error("database (lock)", e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_select_and_usage_are_quiet() {
        assert_eq!(
            broader_than_select("GRANT USAGE ON *.* TO `cksdrift`@`%` IDENTIFIED BY PASSWORD '*x'"),
            None
        );
        assert_eq!(
            broader_than_select("GRANT SELECT ON `cloud`.`vm_instance` TO `cksdrift`@`127.0.0.1`"),
            None
        );
        assert_eq!(
            broader_than_select("GRANT ALL PRIVILEGES ON `cloud`.* TO `cloud`@`localhost`"),
            Some("ALL PRIVILEGES".into())
        );
        assert_eq!(
            broader_than_select("GRANT SELECT, INSERT, UPDATE ON `cloud`.* TO `x`@`%`"),
            Some("INSERT, UPDATE".into())
        );
        // Column grants and role grants are no more than they say (issue 34).
        assert_eq!(
            broader_than_select(
                "GRANT SELECT (`id`, `uuid`) ON `cloud`.`vm_instance` TO `cksdrift`@`%`"
            ),
            None
        );
        assert_eq!(
            broader_than_select("GRANT `reader`@`%` TO `cksdrift`@`%`"),
            None
        );
    }
}
