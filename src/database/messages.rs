//! The database's log lines and problem texts, as an operator reads them: the lock and what an
//! instance does without it, a column that a grant hides, a TLS connection that failed.
//! Wording only; when each is shown belongs to `lock`, `schema` and `tls`.

/// The lock could not be asked for.
pub const LOCK_UNASKED: &str =
    "cannot ask for the lock; this instance stands by until the database answers";

/// Why a column is hidden: a column-level grant on its table.
pub const COLUMN_GRANT: &str = "its grant on the table names columns, and not this one";
/// Why a column is hidden: no grant on its table in `SHOW GRANTS`.
pub const NO_GRANT_SEEN: &str =
    "no line of SHOW GRANTS gives it SELECT on the whole table (a role's grant is not followed)";
