//! One active checker among several instances: a named lock in the CloudStack database
//! (`GET_LOCK`), held on a connection of its own, which the server releases when that
//! connection ends (a crash, a cut network, a killed process). CloudStack's own `GlobalLock`
//! works the same way (`framework/db/.../GlobalLock.java`, `DbUtil.getGlobalLock`).
//!
//! The holder is `Active`: it runs cycles and sends notifications, and confirms it still holds
//! the lock before each. The others are `Standby` and ask again every `lock_interval`. A
//! lost or doubtful connection makes the holder a standby at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mysql_async::Conn;
use tokio::sync::{Mutex, watch};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::messages::LOCK_UNASKED;
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Term {
    pub role: Role,
    pub taken: u64,
}

/// Who holds the lock, as a standby that did not get it sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// Nobody by the time it looked: the next attempt may take it.
    Free,
    /// A connection of this database user: another instance sharing the credentials.
    SameUser,
    /// A connection this user cannot see (without `PROCESS`, a user sees only its own
    /// connections): another database user's, which may be no instance of cks-drift at all.
    OtherUser,
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
        *self.term.borrow()
    }

    /// Who held the lock at this instance's last attempt that did not get it.
    pub fn holder(&self) -> Option<Holder> {
        *self.holder.lock().unwrap_or_else(|e| e.into_inner())
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
            *guard = Some(conn);
            self.set(Role::Active);
            Ok(true)
        } else {
            let holder = self.holder_on(&mut conn).await;
            *self.holder.lock().unwrap_or_else(|e| e.into_inner()) = holder;
            let _ = tokio::time::timeout(Duration::from_secs(1), conn.disconnect()).await;
            Ok(false)
        }
    }

    /// Who holds the lock: its connection among this user's own (`information_schema.
    /// PROCESSLIST` shows a user without `PROCESS` only those). `None` when that cannot be
    /// read.
    async fn holder_on(&self, conn: &mut Conn) -> Option<Holder> {
        let rows: Vec<(Option<u64>, i64)> = self
            .db
            .query(conn, "the lock holder", statements::LOCK_HOLDER)
            .await
            .ok()?;
        match rows.first()? {
            (None, _) => Some(Holder::Free),
            (Some(_), 0) => Some(Holder::OtherUser),
            (Some(_), _) => Some(Holder::SameUser),
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
                self.set(Role::Standby);
                false
            }
            Err(e) => {
                warn!(error = %e, "cannot confirm the lock; its connection is closed");
                *guard = None;
                self.set(Role::Standby);
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
            self.set(Role::Standby);
            info!("the lock is released");
        }
    }

    fn set(&self, role: Role) {
        self.term.send_if_modified(|t| {
            if t.role == role {
                return false;
            }
            t.role = role;
            if role == Role::Active {
                t.taken += 1;
            }
            true
        });
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
                        info!(
                            database = %self.db.address(),
                            "this instance holds the lock: it checks and notifies"
                        );
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
                            warn!(
                                error = %e,
                                "{LOCK_UNASKED}"
                            );
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
