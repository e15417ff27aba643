//! The CloudStack database, read-only and optional: the exact VM map of every cluster (with the
//! rows the API hides) and a named lock, so that one of several instances checks at a time.
//!
//! Only `SELECT`s are sent, on `kubernetes_cluster`, `kubernetes_cluster_vm_map`,
//! `vm_instance` and `information_schema.COLUMNS`, plus the lock functions, once the lock is
//! taken `SHOW GLOBAL VARIABLES` and `SHOW GLOBAL STATUS` of a few names, and `SHOW GRANTS`
//! when a column is missing, to say why. Every query has a deadline; a failure is an error for
//! the caller to fall back on the API, never a guess.

pub mod grants;
pub mod lock;
pub mod map;
mod messages;
pub mod schema;
pub mod statements;
pub mod tls;
pub mod topology;
pub mod vms;

use std::collections::HashSet;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, SslOpts};

use crate::config::DatabaseSettings;
pub use messages::lock_is_local;

/// Why the database could not be used. The texts never hold the password.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error(
        "cannot connect to the database at {address} within {}",
        crate::base::duration::human_duration(*.within)
    )]
    ConnectTimeout { address: String, within: Duration },
    #[error("cannot connect to the database at {address}: {reason}")]
    Connect { address: String, reason: String },
    #[error("cannot connect to the database at {address} with TLS: {failure}")]
    Tls {
        address: String,
        failure: tls::TlsFailure,
    },
    #[error(
        "the database did not answer {what} within {}",
        crate::base::duration::human_duration(*.within)
    )]
    QueryTimeout {
        what: &'static str,
        within: Duration,
    },
    #[error("the database refused {what}: {reason}")]
    Query { what: &'static str, reason: String },
    #[error("the database refused {what}: {reason}. {refusal}")]
    LockRefused {
        what: &'static str,
        reason: String,
        refusal: lock::LockRefusal,
    },
    #[error(transparent)]
    Schema(#[from] schema::SchemaError),
    #[error("{what} gave more than {max} rows; this cycle reads them through the API")]
    TooManyRows { what: &'static str, max: usize },
}

/// What a cycle read from the database.
#[derive(Debug)]
pub struct DbCycle<T> {
    pub map: map::DbMap,
    /// The VMs, when asked for.
    pub vms: Option<vms::DbVms<T>>,
}

impl<T> DbCycle<T> {
    /// Queries sent after the schema's, and rows read.
    pub fn queries_and_rows(&self) -> (usize, usize) {
        let (q, r) = self.vms.as_ref().map_or((0, 0), |v| (v.queries, v.rows));
        (1 + q, self.map.rows + r)
    }
}

/// How to reach the database: the settings turned into the driver's options.
#[derive(Clone)]
pub struct Database {
    opts: Opts,
    address: String,
    /// The name the server's certificate is checked against, and the CA file, with TLS.
    tls_name: String,
    ca_file: Option<std::path::PathBuf>,
    connect_timeout: Duration,
    query_timeout: Duration,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl Database {
    pub fn new(settings: &DatabaseSettings) -> Database {
        let ssl = settings.tls.then(|| {
            let opts = SslOpts::default()
                // A name other than the host, for the certificate only (not a skipped check).
                .with_danger_tls_hostname_override(settings.tls_server_name.clone());
            match &settings.ca_file {
                Some(ca) => opts.with_root_certs(vec![ca.clone().into()]),
                None => opts,
            }
        });
        let opts = OptsBuilder::default()
            .ip_or_hostname(settings.host.clone())
            .tcp_port(settings.port)
            .user(Some(settings.user.clone()))
            .pass(Some(settings.password.expose().to_string()))
            .db_name(Some(settings.name.clone()))
            // The configured address and nothing else: by default the driver moves a
            // loopback connection over to the server's Unix socket.
            .prefer_socket(false)
            .ssl_opts(ssl)
            // Text queries only: no prepared statements to cache.
            .stmt_cache_size(0);
        Database {
            opts: opts.into(),
            address: format!("{}:{}/{}", settings.host, settings.port, settings.name),
            tls_name: settings
                .tls_server_name
                .clone()
                .unwrap_or_else(|| settings.host.clone()),
            ca_file: settings.ca_file.clone(),
            connect_timeout: settings.connect_timeout,
            query_timeout: settings.query_timeout,
        }
    }

    /// `host:port/name`, for logs.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// A new connection, logged in, within the connect deadline.
    pub async fn connect(&self) -> Result<Conn, DbError> {
        match tokio::time::timeout(self.connect_timeout, Conn::new(self.opts.clone())).await {
            Err(_) => Err(DbError::ConnectTimeout {
                address: self.address.clone(),
                within: self.connect_timeout,
            }),
            Ok(Err(e)) => Err(
                match tls::classify(&e, &self.tls_name, self.ca_file.as_ref()) {
                    Some(failure) => DbError::Tls {
                        address: self.address.clone(),
                        failure,
                    },
                    None => DbError::Connect {
                        address: self.address.clone(),
                        reason: driver_error(&e),
                    },
                },
            ),
            Ok(Ok(conn)) => Ok(conn),
        }
    }

    /// Runs `sql` on `conn` within the query deadline and decodes every row.
    pub async fn query<T>(
        &self,
        conn: &mut Conn,
        what: &'static str,
        sql: &str,
    ) -> Result<Vec<T>, DbError>
    where
        T: mysql_async::prelude::FromRow + Send + 'static,
    {
        self.fold(conn, what, sql, Vec::new(), |mut rows, row| {
            rows.push(row);
            rows
        })
        .await
    }

    /// Runs `sql` on `conn` within the query deadline and folds each row into `init` as it
    /// is decoded: no list of every row is held beside what `f` keeps.
    pub async fn fold<T, U, F>(
        &self,
        conn: &mut Conn,
        what: &'static str,
        sql: &str,
        init: U,
        f: F,
    ) -> Result<U, DbError>
    where
        T: mysql_async::prelude::FromRow + Send + 'static,
        U: Send + 'static,
        F: FnMut(U, T) -> U + Send + 'static,
    {
        match tokio::time::timeout(self.query_timeout, conn.query_fold(sql, init, f)).await {
            Err(_) => Err(DbError::QueryTimeout {
                what,
                within: self.query_timeout,
            }),
            Ok(Err(e)) => {
                let reason = driver_error(&e);
                let refusal = match &e {
                    mysql_async::Error::Server(s) => {
                        lock::LockRefusal::of(s.code, &s.message, conn.server_version())
                    }
                    _ => None,
                };
                Err(match refusal {
                    Some(refusal) => DbError::LockRefused {
                        what,
                        reason,
                        refusal,
                    },
                    None => DbError::Query { what, reason },
                })
            }
            Ok(Ok(folded)) => Ok(folded),
        }
    }

    /// Every cluster's map rows: the schema is checked first, then one query reads them all.
    pub async fn read_map(&self) -> Result<map::DbMap, DbError> {
        self.read_cycle(None, |_| ()).await.map(|read| read.map)
    }

    /// What a cycle reads: every cluster's map rows, and with `known` (the VMs mapped in an
    /// earlier cycle) the VMs it needs, in place of the API's VM listing (`vms`), each turned
    /// by `make` as it is read. One connection, closed at the end.
    pub async fn read_cycle<T: Send + 'static>(
        &self,
        known: Option<&HashSet<&str>>,
        make: fn(vms::DbListedVm) -> T,
    ) -> Result<DbCycle<T>, DbError> {
        let mut conn = self.connect().await?;
        let result = async {
            let schema = schema::probe(self, &mut conn).await?;
            let map = map::read(self, &mut conn, &schema).await?;
            let vms = match known {
                None => None,
                Some(known) => {
                    let mapped: HashSet<&map::Uuid> = map
                        .clusters
                        .values()
                        .flatten()
                        .filter_map(|r| match &r.vm {
                            map::MapVm::Alive(uuid) => uuid.as_ref(),
                            _ => None,
                        })
                        .collect();
                    Some(vms::read(self, &mut conn, known, &mapped, make).await?)
                }
            };
            Ok(DbCycle { map, vms })
        }
        .await;
        // Closing politely is best effort; dropping the connection closes it anyway.
        let _ = tokio::time::timeout(Duration::from_secs(1), conn.disconnect()).await;
        result
    }
}

/// The driver's error on one line. A server error keeps its code, which names the cause
/// (1045 access denied, 1142 a missing grant, 1146 no such table).
fn driver_error(e: &mysql_async::Error) -> String {
    match e {
        mysql_async::Error::Server(s) => format!(
            "error {} ({}): {}",
            s.code,
            s.state,
            crate::base::untrusted::shown(&s.message, 300)
        ),
        other => crate::base::untrusted::shown(&other.to_string(), 300),
    }
}
