//! One active checker among several instances: a named lock in the CloudStack database
//! (`GET_LOCK`), held on a connection of its own, which the server releases when that
//! connection ends (a crash, a cut network, a killed process). CloudStack's own `GlobalLock`
//! works the same way (`framework/db/.../GlobalLock.java`, `DbUtil.getGlobalLock`).
//!
//! The holder is `Active`: it runs cycles and sends notifications, and confirms it still holds
//! the lock before each. The others are `Standby` and ask again every `lock_interval`. A
//! lost or doubtful connection makes the holder a standby at once.
//!
//! The lock is the server's alone: on a Galera node or a replica it excludes only the
//! instances connected to that same server. Each time it is taken, the server is read
//! (`topology`) and, if so, an instance says so.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mysql_async::Conn;
use tokio::sync::{Mutex, watch};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::messages::{LOCK_REFUSED, LOCK_UNASKED, PXC_REFUSAL, lock_is_local, wsrep_refusal};
use super::topology::{self, Node};
use super::{Database, DbError, statements};

/// What an instance does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// It holds the lock: it checks and notifies.
    Active,
    /// Another instance holds the lock, or the database cannot be reached: it waits.
    Standby,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Active => "active",
            Role::Standby => "standby",
        }
    }
}

/// The role, and how many times this instance has taken the lock (each time is a takeover of
/// what another instance may have reported meanwhile).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    pub role: Role,
    pub taken: u64,
    /// While active: the server the lock was taken on, when it could be read.
    pub node: Option<Arc<Node>>,
    /// While standing by: who holds the lock, in words ([`Holder::describe`]).
    pub holder: Option<String>,
}

/// The server refuses `GET_LOCK` itself, by a setting or a release: asking again changes
/// nothing until an operator does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LockRefusal {
    /// MariaDB's error 1235 (42000) "This version of MariaDB doesn't yet support 'GET_LOCK in
    /// cluster (WSREP_ON=ON)'" (MDEV-30473), with the server's version.
    #[error("{}", wsrep_refusal(*.version))]
    Wsrep { version: (u16, u16, u16) },
    /// Percona XtraDB Cluster with `pxc_strict_mode = ENFORCING`.
    #[error("{PXC_REFUSAL}")]
    PxcStrictMode,
}

impl LockRefusal {
    /// The refusal a server error is, if it is one: told by its code and by its text naming
    /// `GET_LOCK` (the same code has other causes).
    pub fn of(code: u16, message: &str, version: (u16, u16, u16)) -> Option<LockRefusal> {
        let upper = message.to_ascii_uppercase();
        if !upper.contains("GET_LOCK") {
            return None;
        }
        if code == 1235 && upper.contains("WSREP") {
            Some(LockRefusal::Wsrep { version })
        } else if upper.contains("PXC_STRICT_MODE") {
            Some(LockRefusal::PxcStrictMode)
        } else {
            None
        }
    }
}

/// Who holds the lock, as a standby that did not get it sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// Nobody by the time it looked: the next attempt may take it.
    Free,
    /// A connection of this database user: another instance sharing the credentials, with
    /// the connection's id and the host and port it comes from (`PROCESSLIST.HOST`).
    SameUser {
        connection: u64,
        host: Option<String>,
    },
    /// A connection this user cannot see (without `PROCESS`, a user sees only its own
    /// connections): another database user's, which may be no instance of cks-drift at all.
    OtherUser,
}

/// A change is sent to CloudStack only right after the lock is confirmed still held, on its
/// own connection: a holder that lost it (its connection ended, or the process was paused
/// while another took over) sends nothing more, retries included.
impl crate::cloudstack::client::Fence for Lock {
    fn holds(&self) -> futures::future::BoxFuture<'_, bool> {
        Box::pin(self.confirm())
    }
}

impl Holder {
    /// Who holds it, in words for the status page; `None` when nobody does.
    pub fn describe(&self) -> Option<String> {
        match self {
            Holder::Free => None,
            Holder::SameUser { connection, host } => Some(match host {
                Some(host) => format!("database connection {connection} from {host}"),
                None => format!("database connection {connection}"),
            }),
            Holder::OtherUser => Some(
                "a connection of another database user (maybe no instance of cks-drift)".into(),
            ),
        }
    }
}

/// The lock and its connection.
pub struct Lock {
    db: Database,
    interval: Duration,
    conn: Mutex<Option<Conn>>,
    term: watch::Sender<Term>,
    /// Who held the lock at this standby's last attempt.
    holder: std::sync::Mutex<Option<Holder>>,
    /// The lock has been held by another database user's connection for a while: possibly no
    /// instance checks (see `keep`).
    held_elsewhere: Arc<AtomicBool>,
}

impl std::fmt::Debug for Lock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock")
            .field("db", &self.db)
            .field("term", &*self.term.borrow())
            .finish_non_exhaustive()
    }
}

/// The lock connection's `wait_timeout`: three lock intervals, at least 10 s, whole seconds.
/// The connection is the lock's alone, so no other query keeps it busy meanwhile.
pub fn idle_timeout(interval: Duration) -> Duration {
    Duration::from_secs((3.0 * interval.as_secs_f64()).ceil().max(10.0) as u64)
}

impl Lock {
    pub fn new(db: Database, interval: Duration) -> Arc<Lock> {
        let (term, _) = watch::channel(Term {
            role: Role::Standby,
            taken: 0,
            node: None,
            holder: None,
        });
        Arc::new(Lock {
            db,
            interval,
            conn: Mutex::new(None),
            term,
            holder: std::sync::Mutex::new(None),
            held_elsewhere: Arc::new(AtomicBool::new(false)),
        })
    }

    /// The role and term now.
    pub fn term(&self) -> Term {
        self.term.borrow().clone()
    }

    /// The server this instance holds the lock on (`None` when it does not, or when that
    /// server could not be read).
    pub fn node(&self) -> Option<Arc<Node>> {
        self.term.borrow().node.clone()
    }

    /// Who held the lock at this instance's last attempt that did not get it.
    pub fn holder(&self) -> Option<Holder> {
        self.holder
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Set while the lock has been held by another database user's connection for three lock
    /// intervals or more (the metric `cks_drift_lock_held_elsewhere`).
    pub fn held_elsewhere(&self) -> Arc<AtomicBool> {
        self.held_elsewhere.clone()
    }

    /// Follows every change of role.
    pub fn watch(&self) -> watch::Receiver<Term> {
        self.term.subscribe()
    }

    /// Asks for the lock once, without waiting for it: `Ok(true)` when this instance holds it
    /// now (also when it already did).
    pub async fn try_acquire(&self) -> Result<bool, DbError> {
        let mut guard = self.conn.lock().await;
        if guard.is_some() {
            drop(guard);
            return Ok(self.confirm().await);
        }
        *self.holder.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let mut conn = self.db.connect().await?;
        // A host that is lost without closing its connection (power, a cut network) would
        // hold the lock until the server's `wait_timeout` (8 hours by default) or TCP
        // keepalive (about 2 hours) ends it. The holder uses its connection every
        // `lock_interval`, so a session timeout of a few intervals frees the lock soon
        // after the holder stops, and never while it runs.
        let _: Vec<Option<i64>> = self
            .db
            .query(
                &mut conn,
                "the lock connection's idle timeout",
                &statements::lock_idle_timeout(idle_timeout(self.interval).as_secs()),
            )
            .await?;
        let got: Vec<Option<i64>> = self
            .db
            .query(&mut conn, "the lock request", statements::LOCK_TAKE)
            .await?;
        if got.first() == Some(&Some(1)) {
            // What the lock excludes depends on the server: read once per taking.
            let node = match topology::read(&self.db, &mut conn).await {
                Ok(node) => Some(Arc::new(node)),
                Err(e) => {
                    debug!(error = %e, "cannot tell what kind of server holds the lock");
                    None
                }
            };
            *guard = Some(conn);
            self.set(Role::Active, node);
            Ok(true)
        } else {
            let holder = self.holder_on(&mut conn).await;
            let said = holder.as_ref().and_then(Holder::describe);
            self.term.send_if_modified(|t| {
                let changed = t.holder != said;
                t.holder.clone_from(&said);
                changed
            });
            *self.holder.lock().unwrap_or_else(|e| e.into_inner()) = holder;
            let _ = tokio::time::timeout(Duration::from_secs(1), conn.disconnect()).await;
            Ok(false)
        }
    }

    /// Who holds the lock: its connection among this user's own (`information_schema.
    /// PROCESSLIST` shows a user without `PROCESS` only those). `None` when that cannot be
    /// read.
    async fn holder_on(&self, conn: &mut Conn) -> Option<Holder> {
        let rows: Vec<(Option<u64>, i64, Option<String>)> = self
            .db
            .query(conn, "the lock holder", statements::LOCK_HOLDER)
            .await
            .ok()?;
        match rows.first()? {
            (None, _, _) => Some(Holder::Free),
            (Some(_), 0, _) => Some(Holder::OtherUser),
            (Some(id), _, host) => Some(Holder::SameUser {
                connection: *id,
                // The server's text, bounded as any other it sends.
                host: host
                    .as_deref()
                    .map(|h| crate::base::untrusted::shown(h, 100)),
            }),
        }
    }

    /// Whether this instance still holds the lock, asked on the lock's own connection. Any
    /// doubt (an error, no answer within the query deadline) ends the connection, which
    /// releases the lock on the server, and makes this instance a standby.
    pub async fn confirm(&self) -> bool {
        let mut guard = self.conn.lock().await;
        let Some(conn) = guard.as_mut() else {
            return false;
        };
        let answer: Result<Vec<Option<i64>>, DbError> = self
            .db
            .query(conn, "the lock check", statements::LOCK_CHECK)
            .await;
        match answer {
            Ok(rows) if rows.first() == Some(&Some(1)) => true,
            Ok(_) => {
                warn!("the database says this instance no longer holds the lock");
                *guard = None;
                self.set(Role::Standby, None);
                false
            }
            Err(e) => {
                warn!(error = %e, "cannot confirm the lock; its connection is closed");
                *guard = None;
                self.set(Role::Standby, None);
                false
            }
        }
    }

    /// Gives the lock up (at shutdown), so that a standby takes over at its next attempt.
    pub async fn release(&self) {
        let mut guard = self.conn.lock().await;
        if let Some(mut conn) = guard.take() {
            let _: Result<Vec<Option<i64>>, DbError> = self
                .db
                .query(&mut conn, "the lock release", statements::LOCK_RELEASE)
                .await;
            let _ = tokio::time::timeout(Duration::from_secs(1), conn.disconnect()).await;
            self.set(Role::Standby, None);
            info!("the lock is released");
        }
    }

    fn set(&self, role: Role, node: Option<Arc<Node>>) {
        self.term.send_if_modified(|t| {
            if t.role == role {
                return false;
            }
            t.role = role;
            t.node = node;
            if role == Role::Active {
                t.holder = None;
            }
            if role == Role::Active {
                t.taken += 1;
            }
            true
        });
    }

    /// Says that this instance holds the lock, on which server, and warns when the lock
    /// excludes only the instances connected to that server (a Galera node, a replica).
    pub fn announce_active(&self) {
        let node = self.node();
        let shown = node.as_ref().map_or("?".to_string(), |n| n.to_string());
        info!(
            database = %self.db.address(),
            node = %shown,
            "this instance holds the lock: it checks and notifies"
        );
        if let Some(node) = node.filter(|n| n.is_local()) {
            warn_local(&node);
        }
    }

    /// Follows who holds the lock while this instance stands by: once another database user's
    /// connection has held it for `idle_timeout` (three lock intervals, at least 10 s), warns
    /// once and sets `held_elsewhere`; says so again when an instance holds it.
    fn watch_holder(&self, since: &mut Option<Instant>) {
        let elsewhere =
            self.term().role == Role::Standby && self.holder() == Some(Holder::OtherUser);
        if !elsewhere {
            *since = None;
            if self.held_elsewhere.swap(false, Ordering::Relaxed) {
                info!("the lock is no longer held by another database user");
            }
            return;
        }
        let since = *since.get_or_insert_with(Instant::now);
        if since.elapsed() >= idle_timeout(self.interval)
            && !self.held_elsewhere.swap(true, Ordering::Relaxed)
        {
            warn!(
                database = %self.db.address(),
                "the lock has been held for {} by a connection of another database user: it may \
                 be no instance of cks-drift, and then none checks. Give every instance the same \
                 database user, or find the holder with SELECT \
                 IS_USED_LOCK(LEFT(CONCAT('cks-drift.', DATABASE()), 64)) and SHOW PROCESSLIST as \
                 an administrator",
                crate::base::duration::human_duration(since.elapsed())
            );
        }
    }

    /// Holds or asks for the lock every `lock_interval` until `shutdown`, then releases it.
    /// Logs each change of role once, and a database that cannot be reached once per outage.
    pub async fn keep(self: Arc<Self>, shutdown: CancellationToken) {
        let mut unreachable = false;
        let mut announced_standby = false;
        let mut elsewhere_since = None;
        loop {
            match self.term().role {
                Role::Active => {
                    if !self.confirm().await {
                        warn!("this instance lost the lock: it stands by and sends nothing more");
                        announced_standby = true;
                    }
                }
                Role::Standby => match self.try_acquire().await {
                    Ok(true) => {
                        unreachable = false;
                        announced_standby = false;
                        self.announce_active();
                    }
                    Ok(false) => {
                        if unreachable {
                            info!("the database answers again");
                            unreachable = false;
                        }
                        if !announced_standby {
                            info!("another instance holds the lock: this one stands by");
                            announced_standby = true;
                        }
                    }
                    Err(e) => {
                        if unreachable {
                            debug!(error = %e, "the lock cannot be asked for");
                        } else {
                            warn_unasked(&e);
                            unreachable = true;
                        }
                    }
                },
            }
            self.watch_holder(&mut elsewhere_since);
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(self.interval) => {}
            }
        }
        self.release().await;
    }
}

/// The warning of a lock that is local to one node or replica, naming it.
pub fn warn_local(node: &Node) {
    warn!(
        node = %node.name,
        kind = node.kind.as_str(),
        "{}",
        lock_is_local(node)
    );
}

/// The warning of a lock that could not be asked for: the server's refusal with its cause
/// and fix, or an outage.
fn warn_unasked(e: &DbError) {
    match e {
        DbError::LockRefused { .. } => warn!(error = %e, "{LOCK_REFUSED}"),
        _ => warn!(error = %e, "{LOCK_UNASKED}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// MariaDB 10.11.3's answer under wsrep (its test result file `galera_locks_funcs`).
    const WSREP_1235: &str =
        "This version of MariaDB doesn't yet support 'GET_LOCK in cluster (WSREP_ON=ON)'";

    #[test]
    fn a_wsrep_refusal_names_its_cause_and_the_release_to_upgrade_to() {
        let refusal = LockRefusal::of(1235, WSREP_1235, (10, 11, 3));
        assert_eq!(
            refusal,
            Some(LockRefusal::Wsrep {
                version: (10, 11, 3)
            })
        );
        let text = refusal.unwrap().to_string();
        for part in [
            "MariaDB 10.11.3 refuses GET_LOCK while wsrep_on = ON",
            "MDEV-30473",
            "10.4.29, 10.5.20, 10.6.13, 10.9.6, 10.10.4 and 10.11.3",
            "MDEV-31325",
            "Upgrade MariaDB to 10.11.4 or later",
            "remove [database] and run a single instance",
        ] {
            assert!(text.contains(part), "{part:?} not in {text}");
        }
        let other = LockRefusal::of(1235, WSREP_1235, (10, 6, 13)).unwrap();
        assert!(other.to_string().contains("to 10.6.14 or later"), "{other}");
        // A version outside the known list still gets a way out.
        let unknown = LockRefusal::of(1235, WSREP_1235, (11, 0, 1)).unwrap();
        assert!(
            unknown
                .to_string()
                .contains("to the next release of its series or later"),
            "{unknown}"
        );
    }

    #[test]
    fn the_whole_error_carries_the_servers_words_and_the_fix() {
        let e = DbError::LockRefused {
            what: "the lock request",
            reason: format!("error 1235 (42000): {WSREP_1235}"),
            refusal: LockRefusal::Wsrep {
                version: (10, 6, 13),
            },
        };
        let text = e.to_string();
        assert!(
            text.starts_with(
                "the database refused the lock request: error 1235 (42000): This version of \
                 MariaDB doesn't yet support 'GET_LOCK in cluster (WSREP_ON=ON)'. MariaDB 10.6.13 \
                 refuses GET_LOCK"
            ),
            "{text}"
        );
    }

    #[test]
    fn percona_strict_mode_is_told_by_its_words() {
        let pxc = "Percona-XtraDB-Cluster prohibits use of GET_LOCK with pxc_strict_mode = \
                   ENFORCING";
        let refusal = LockRefusal::of(1105, pxc, (8, 0, 36));
        assert_eq!(refusal, Some(LockRefusal::PxcStrictMode));
        assert!(
            refusal
                .unwrap()
                .to_string()
                .contains("set pxc_strict_mode to PERMISSIVE"),
        );
    }

    #[test]
    fn other_errors_are_no_refusal_of_the_lock() {
        // The same code for another unsupported feature.
        let other =
            "This version of MariaDB doesn't yet support 'LIMIT & IN/ALL/ANY/SOME subquery'";
        assert_eq!(LockRefusal::of(1235, other, (10, 11, 3)), None);
        assert_eq!(
            LockRefusal::of(1142, "SELECT command denied to user", (10, 11, 3)),
            None
        );
        assert_eq!(
            LockRefusal::of(1105, "GET_LOCK failed for an unknown reason", (10, 11, 3)),
            None
        );
    }
}
