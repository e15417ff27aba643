//! What one cycle reads, and reading it: every cluster with its VM map, the networks, the VMs
//! named like CKS nodes, each checkable cluster's Kubernetes nodes over SSH (bounded
//! concurrency, started as soon as clusters and networks are in, while the VMs are still
//! read), the clusters read again, and probes of map rows the API stopped showing.
//!
//! With a database, the map rows the API hides come from it (`database::map`), read while the
//! VMs are listed; without one, or when it fails, they are probed through the API.
//!
//! I/O only: which clusters are checked and where SSH goes come from `cks`, and turning the
//! inventory into snapshots is the pure `assemble` beside it. Nothing here changes anything in
//! CloudStack.
//!
//! The rooms: this file is the cycle's read, start to end; `clusters` reads the clusters (both
//! reads) and the networks, `nodes` runs the node listings in their turns, `vms` reads the VMs
//! (from the API or the database), `vanished` finds the map rows the API stopped showing.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use tracing::debug;

use crate::cloudstack::client::Client;
use crate::cloudstack::error::ApiError;
use crate::database::Database;
use crate::remote::NodeLister;
use crate::snapshot::{PreviousMap, RememberedVm, VanishedVm};

pub mod assemble;
mod clusters;
pub mod held;
mod messages;
mod nodes;
mod record;
mod turns;
mod vanished;
mod vms;

pub use clusters::{ClusterFingerprint, Reread, list_networks};
use clusters::{list_clusters_and_nodes, read_clusters_again};
pub use record::{ClusterRecord, Owners, VmId, VmRow};
pub use vanished::hidden_rows;
use vanished::vanished_rows;
use vms::{list_vms, read_database, vms_and_map};

/// A cycle that could not run at all: a listing every cluster needs failed.
#[derive(Debug, thiserror::Error)]
pub enum CycleError {
    /// Another instance holds the database lock (or this one lost it): nothing is checked,
    /// decided or sent here.
    #[error(
        "not the active instance: another instance holds the lock in the CloudStack database, or \
         this one lost it"
    )]
    Standby,
    /// The answers are URL-encoded (`encode.api.response = true`): nothing is compared, since
    /// names and markers would not match.
    #[error("{}", crate::cloudstack::release::ENCODED_ANSWERS)]
    EncodedAnswers,
    /// The API key's role cannot see every cluster or read back cks-drift's own annotations.
    #[error("{0}")]
    Caller(String),
    #[error("cannot list {what}")]
    List {
        what: &'static str,
        #[source]
        source: ApiError,
    },
}

/// The failure label of a cluster whose listing never started: the cycle's listing deadline
/// came before its turn. Not a failure of its control node: it goes first next cycle.
pub const NOT_STARTED: &str = "not_started";

/// A cluster's node listing: the view, and the failure label of a listing that failed
/// (`connect`, `auth`, ...), for metrics.
pub type NodeListing = (held::HeldView, Option<&'static str>);

/// Everything one cycle read.
#[derive(Debug)]
pub struct Inventory {
    /// Every cluster, in the API's order.
    pub clusters: Vec<ClusterRecord>,
    /// The VMs named like a CKS node, and those mapped last cycle; the others were dropped
    /// while the pages were read.
    pub vms: Vec<VmRow>,
    /// By cluster index, for each cluster the rules check.
    pub nodes: HashMap<usize, NodeListing>,
    /// By cluster index, what the second read of the clusters, after the node listings,
    /// found of each.
    pub again: Vec<Reread>,
    /// By cluster index, for each checked cluster that did not change during the check: its
    /// map rows the API stopped showing, or the API error that stopped the probe.
    pub vanished: HashMap<usize, Result<Vec<VanishedVm>, String>>,
    /// By cluster index, for each cluster whose hidden map rows came from the database: the
    /// mapped VMs to remember by their database id (`PreviousMap::db_ids`).
    pub db_ids: HashMap<usize, BTreeMap<u64, RememberedVm>>,
    /// Where the hidden map rows came from.
    pub map_source: MapSource,
}

/// Where a cycle found the map rows the API hides.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum MapSource {
    /// No database: probed through the API.
    #[default]
    Api,
    /// From the database, for `clusters` clusters (the others changed between the reads and
    /// were probed through the API).
    Database {
        /// Rows read and queries sent (the schema's check aside).
        rows: usize,
        queries: usize,
        /// Whether the VMs came from it too (not from `listVirtualMachines`).
        vms_read: bool,
        clusters: usize,
        schema: &'static str,
    },
    /// The database failed: everything was probed through the API.
    DatabaseFailed { error: String },
}

/// How the node listings of a cycle run.
#[derive(Debug, Clone, Copy)]
pub struct Listing<'a> {
    /// Listings in flight at once.
    pub concurrency: usize,
    /// Login user when the first mapped VM has no `controlNodeLoginUser` detail.
    pub default_user: &'a str,
    /// When the listings end, finished or not.
    pub deadline: std::time::Duration,
    /// List this cluster's nodes only (by id): `explain` looks at one cluster.
    pub only: Option<&'a str>,
}

/// Reads one cycle's inventory. `previous` is what earlier cycles saw of each cluster's map
/// (empty on the first cycle).
pub async fn fetch(
    api: &Client,
    lister: Arc<dyn NodeLister>,
    settings: Listing<'_>,
    previous: &HashMap<String, PreviousMap>,
    database: Option<&Database>,
) -> Result<Inventory, CycleError> {
    // Of all VMs, only those named like a CKS node can be a cluster's, and only those mapped
    // last cycle are looked up by id: the rest (most VMs of a cloud) is dropped while the
    // pages are read.
    let known = known_vm_ids(previous);
    let owners = Owners::default();
    // With a database, the VMs come from it (`database::vms`), not from the heaviest listing
    // of the API; `explain` still lists them, to show another owner's VMs named like the
    // cluster's nodes.
    let vms_from_database = database.is_some() && settings.only.is_none();
    let vm_listing = async {
        if vms_from_database {
            Ok(None)
        } else {
            list_vms(api, &known, &owners).await.map(Some)
        }
    };
    // The clusters and the networks are all the node listings need: these start as soon as
    // both are read, while the VMs, the largest listing, are still being read.
    let clusters_and_nodes = list_clusters_and_nodes(api, lister, settings, previous);
    // The database's map (and VMs) are read between the two cluster reads, like the API's
    // VMs: a map that changes meanwhile shows in the second read.
    let db_read = read_database(database, vms_from_database.then_some(&known));
    // Whichever fails first ends the cycle at once; the others are dropped, which aborts the
    // node listings still running.
    let (listed_vms, (clusters, checkable, nodes), db_read) =
        tokio::try_join!(vm_listing, clusters_and_nodes, db_read)?;
    let (vms, db_map, mut map_source) =
        vms_and_map(api, &known, &owners, &clusters, listed_vms, db_read).await?;
    debug!(vms_kept = vms.len(), "VMs listed");
    let again = read_clusters_again(api, &clusters).await?;
    let unchanged: Vec<usize> = checkable
        .into_iter()
        .filter(|&i| again[i] == Reread::Same)
        .collect();
    let found = vanished_rows(
        api,
        &clusters,
        &unchanged,
        &vms,
        db_map.as_ref(),
        previous,
        database.is_some(),
    )
    .await;
    if let MapSource::Database { clusters, .. } = &mut map_source {
        *clusters += found.from_db;
    }
    Ok(Inventory {
        clusters,
        vms,
        nodes,
        again,
        vanished: found.rows,
        db_ids: found.db_ids,
        map_source,
    })
}

/// The ids of the VMs earlier cycles found mapped, or found gone from a map.
fn known_vm_ids(previous: &HashMap<String, PreviousMap>) -> HashSet<&str> {
    previous
        .values()
        .flat_map(|p| p.vms.keys().chain(p.vanished.keys()))
        .map(String::as_str)
        .collect()
}
