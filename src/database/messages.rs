//! The database's log lines, as an operator reads them: the lock and what an instance does
//! without it. Wording only; when each is logged belongs to `lock`.

/// The lock could not be asked for.
pub const LOCK_UNASKED: &str =
    "cannot ask for the lock; this instance stands by until the database answers";
