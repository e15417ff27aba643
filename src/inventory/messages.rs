//! The inventory's log lines and the reasons it records, as an operator reads them. Wording
//! only; when each applies belongs to the listing that meets it.

/// The database could not give the map and the VMs; the API does.
pub const DB_MAP_AND_VMS_UNREAD: &str = "cannot read the VM map and the VMs from the database; \
     this cycle reads them through the API alone";

/// The database could not give the map; the API does.
pub const DB_MAP_UNREAD: &str =
    "cannot read the VM map from the database; this cycle reads it through the API alone";

/// The release could not be read: networks are listed in every scope.
pub const RELEASE_UNKNOWN: &str =
    "cannot read the CloudStack release; networks are listed in every scope";

/// The database's map and the API's disagree on a cluster's live VMs.
pub const DB_MAP_DIFFERS: &str = "the database's VM map differs from the API's (their live VMs \
     are not the same); this cluster's hidden map rows are probed through the API this cycle";

/// Map rows the API stopped showing could not be probed.
pub const PROBE_FAILED: &str = "cannot probe map rows the API stopped showing";

/// Why a cluster's nodes were not listed: the cycle's deadline came first.
pub const TURN_MISSED: &str =
    "its turn did not come before the cycle's node-listing deadline; it is listed first next cycle";
