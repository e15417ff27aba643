//! The notifiers' log lines, as an operator reads them: what was not delivered and what
//! happens to it. Wording only; when each is logged belongs to the notifier.

/// An event line found in the log after an interrupted delivery.
pub const EVENT_ALREADY_WRITTEN: &str = "the event is in the event log already; not written again";

/// `generateAlert` succeeded but the alert was not stored under its type.
pub const ALERT_NOT_STORED: &str = "CloudStack did not store the alert (another un-archived alert \
     holds this type); trying another type";

/// The WARN line of a notification that stays queued.
pub const NOT_DELIVERED: &str = "notification not delivered; it stays queued for the next cycle";

/// The ERROR line of a notification CloudStack refused for good.
pub const REFUSED: &str =
    "CloudStack refused the notification for good; it is dropped and nothing else waits for it";

/// A queued alert or annotation not sent because its finding ended before it reached
/// CloudStack (its archive or removal is queued behind it).
pub const ENDED_BEFORE_SENT: &str = "not sent: the finding ended before this reached CloudStack; \
     its event lines tell it";
