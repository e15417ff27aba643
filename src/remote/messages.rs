//! The remote sources' log lines, as an operator reads them: what happened to the recorded
//! host keys. Wording only; when each is logged belongs to `ssh`.

/// The host keys of clusters no longer listed could not be forgotten.
pub const HOST_KEYS_KEPT: &str =
    "cannot forget the host keys of clusters CloudStack no longer lists; they are kept";

/// A matching recorded key could not be marked as the cluster's.
pub const HOST_KEY_NOT_MARKED: &str = "the host key recorded for the address matches; it cannot \
     be marked as the cluster's, so another cluster at this address later would be trusted with \
     it too: let the service write the file";
