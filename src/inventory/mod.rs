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

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use tracing::{Instrument, debug, info_span, warn};

use crate::cks::{ROOT_SCOPE, login_target, port_for, reached_directly};
use crate::cloudstack::client::Client;
use crate::cloudstack::error::ApiError;
use crate::cloudstack::model::{KubernetesCluster, Network, VirtualMachine};
use crate::cloudstack::release::{Release, network_scopes};
use crate::database::map::{DbMap, DbRow, MapVm, Uuid};
use crate::database::{Database, DbCycle, DbError};
use crate::remote::NodeLister;
use crate::snapshot::{NodeView, PreviousMap, VanishedHow, VanishedVm};

pub mod assemble;
mod record;
mod turns;

pub use record::{ClusterRecord, Owners, VmId, VmRow};
use turns::Turns;

/// A cycle that could not run at all: a listing every cluster needs failed.
#[derive(Debug, thiserror::Error)]
pub enum CycleError {
    /// Another instance holds the database lock (or this one lost it): nothing is checked,
    /// decided or sent here.
    #[error(
        "not the active instance: another instance holds the lock in the CloudStack database, or this one lost it"
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

/// The warning of a node listing that failed.
const PARTIAL: &str = "cannot list the Kubernetes nodes; comparing the VM map with the VMs only";

/// A cluster's node listing: the view, and the failure label of a listing that failed
/// (`connect`, `auth`, ...), for metrics.
pub type NodeListing = (NodeView, Option<&'static str>);

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

/// The release the server runs, or `None` when it is not shown or cannot be read: the
/// listings that depend on it then take the way that is right on every release.
async fn release_or_none(api: &Client) -> Option<Release> {
    match api.version().await {
        Ok(version) => version.as_deref().and_then(Release::parse),
        Err(e) => {
            debug!(error = %e, "cannot read the CloudStack release; networks are listed in every scope");
            None
        }
    }
}

/// The networks `keep` accepts, of every account and project, as `release` must be asked
/// for them (`release::network_scopes`: before 4.22 `projectid=-1` lists project networks
/// alone, so the others are listed without it), merged by id in the order first listed.
/// `extra` narrows every listing (`id`).
pub async fn list_networks(
    api: &Client,
    release: Option<Release>,
    extra: &[(&str, &str)],
    keep: impl Fn(&Network) -> bool,
) -> Result<Vec<Network>, ApiError> {
    let keep = &keep;
    let listings = network_scopes(release).iter().map(|scope| async move {
        let mut params = scope.to_vec();
        params.extend_from_slice(extra);
        api.list_map::<Network, _, _>("listNetworks", "network", &params, |n| {
            keep(&n).then_some(n)
        })
        .await
    });
    let mut seen = HashSet::new();
    let mut networks = Vec::new();
    for listed in futures::future::try_join_all(listings).await? {
        networks.extend(listed.into_iter().filter(|n| seen.insert(n.id.clone())));
    }
    Ok(networks)
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
    let (vanished, from_db) = vanished_rows(
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
        *clusters += from_db;
    }
    Ok(Inventory {
        clusters,
        vms,
        nodes,
        again,
        vanished,
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

/// The database's map, and its VMs when `known` is given (to keep those besides the VMs
/// named like a CKS node); `None` without a database. A failing database is not the
/// cycle's failure: its error is returned inside.
async fn read_database(
    database: Option<&Database>,
    known: Option<&HashSet<&str>>,
) -> Result<Option<Result<DbCycle<(u64, VmRow)>, DbError>>, CycleError> {
    match database {
        None => Ok(None),
        Some(db) => Ok(Some(
            db.read_cycle(known, |vm| (vm.account_id, VmRow::from_database(&vm, None)))
                .await,
        )),
    }
}

/// The first read of the clusters, with the networks CKS reaches directly, then the node
/// listings of the clusters the rules check: the clusters, the indexes of the checkable
/// ones, and the listings.
async fn list_clusters_and_nodes(
    api: &Client,
    lister: Arc<dyn NodeLister>,
    settings: Listing<'_>,
    previous: &HashMap<String, PreviousMap>,
) -> Result<(Vec<ClusterRecord>, Vec<usize>, HashMap<usize, NodeListing>), CycleError> {
    // Of a network, only whether CKS reaches a control node on it directly matters:
    // only the ids of those networks are kept.
    let (clusters, networks) = tokio::join!(
        api.list_map::<KubernetesCluster, _, _>(
            "listKubernetesClusters",
            "kubernetescluster",
            &ROOT_SCOPE,
            |c| Some(ClusterRecord::new(c)),
        ),
        async {
            let release = release_or_none(api).await;
            list_networks(api, release, &[], reached_directly).await
        },
    );
    let clusters = clusters.map_err(|source| CycleError::List {
        what: "Kubernetes clusters",
        source,
    })?;
    // Every string of an answer is URL-encoded when `encode.api.response` is on; a
    // cluster id (a uuid) shows it.
    if clusters
        .iter()
        .any(|c| crate::cloudstack::release::url_encoded(&c.info.id))
    {
        return Err(CycleError::EncodedAnswers);
    }
    let networks = networks.map_err(|source| CycleError::List {
        what: "networks",
        source,
    })?;
    debug!(
        clusters = clusters.len(),
        direct_networks = networks.len(),
        "listed"
    );
    let direct: HashSet<String> = networks.into_iter().map(|n| n.id).collect();
    let checkable: Vec<usize> = (0..clusters.len())
        .filter(|&i| clusters[i].skip.is_none())
        .collect();
    let order = listing_order(&clusters, &checkable, settings.only, previous);
    let nodes = list_nodes(&clusters, &direct, &order, lister, settings).await;
    Ok((clusters, checkable, nodes))
}

/// The checkable clusters in the order their nodes are listed within each owner (only the
/// one asked for, if any); owners take turns (`turns`).
fn listing_order(
    clusters: &[ClusterRecord],
    checkable: &[usize],
    only: Option<&str>,
    previous: &HashMap<String, PreviousMap>,
) -> Vec<usize> {
    // Listed longest ago first (never listed before all), so that every cluster gets
    // its turn when not all listings fit before the deadline: one not reached this cycle
    // is reached first next cycle, however slow the others are. Among clusters listed
    // equally long ago, those whose listing failed (a stalling or refusing node) go
    // last, so that they cannot hold the others back.
    let mut order = checkable.to_vec();
    if let Some(only) = only {
        order.retain(|&i| clusters[i].info.id == only);
    }
    order.sort_by_key(|&i| {
        previous
            .get(&clusters[i].info.id)
            .map_or((None, false), |p| (p.listed_at, p.nodes_failed))
    });
    order
}

/// The VMs, the database's map and where the map came from, out of what the API and the
/// database gave: the VMs are listed through the API only when neither gave them.
async fn vms_and_map(
    api: &Client,
    known: &HashSet<&str>,
    owners: &Owners,
    clusters: &[ClusterRecord],
    listed_vms: Option<Vec<VmRow>>,
    db_read: Option<Result<DbCycle<(u64, VmRow)>, DbError>>,
) -> Result<(Vec<VmRow>, Option<DbMap>, MapSource), CycleError> {
    Ok(match db_read {
        None => (listed_vms.unwrap_or_default(), None, MapSource::Api),
        Some(Ok(read)) => {
            let schema = read.map.schema.as_ref().map_or("", |s| s.release);
            let (queries, rows) = read.queries_and_rows();
            let source = MapSource::Database {
                rows,
                queries,
                vms_read: read.vms.is_some(),
                clusters: 0,
                schema,
            };
            let vms = match (listed_vms, read.vms) {
                (Some(listed), _) => listed,
                (None, Some(db_vms)) => vms_of_database(db_vms, clusters, owners),
                (None, None) => list_vms(api, known, owners).await?,
            };
            (vms, Some(read.map), source)
        }
        Some(Err(e)) => {
            let vms = match listed_vms {
                Some(listed) => {
                    warn!(error = %e, "cannot read the VM map from the database; this cycle reads it through the API alone");
                    listed
                }
                None => {
                    warn!(error = %e, "cannot read the VM map and the VMs from the database; this cycle reads them through the API alone");
                    list_vms(api, known, owners).await?
                }
            };
            (
                vms,
                None,
                MapSource::DatabaseFailed {
                    error: e.to_string(),
                },
            )
        }
    })
}

/// Reads the clusters again: anything whose state or map changed meanwhile is not reported
/// this cycle (an operation ran during the check). Each row is compared with the first
/// read as it is read, and only the outcome is kept. Should an id come twice, its last row
/// decides, for every cluster of the first read with that id.
async fn read_clusters_again(
    api: &Client,
    clusters: &[ClusterRecord],
) -> Result<Vec<Reread>, CycleError> {
    let mut by_id: HashMap<&str, Vec<usize>> = HashMap::with_capacity(clusters.len());
    for (i, c) in clusters.iter().enumerate() {
        by_id.entry(c.info.id.as_str()).or_default().push(i);
    }
    let rows = api
        .list_map::<ClusterFingerprint, _, _>(
            "listKubernetesClusters",
            "kubernetescluster",
            &ROOT_SCOPE,
            |f| {
                let same_id = by_id.get(f.id.as_str())?;
                Some(
                    same_id
                        .iter()
                        .map(|&i| (i, f.compare(&clusters[i])))
                        .collect::<Vec<_>>(),
                )
            },
        )
        .await
        .map_err(|source| CycleError::List {
            what: "Kubernetes clusters (second read)",
            source,
        })?;
    let mut again = vec![Reread::Gone; clusters.len()];
    for (i, reread) in rows.into_iter().flatten() {
        again[i] = reread;
    }
    Ok(again)
}

/// The map rows the API stopped showing, for each of the `unchanged` clusters (checked, and
/// the same in both reads): from the database's map where it fits, else probed through the
/// API one cluster after the other. Also returns how many came from the database.
///
/// `keep_known` is set with a database: gone rows it found stay open while the API decides,
/// since they may not fit the API's count, and a failing database must not resolve them.
async fn vanished_rows(
    api: &Client,
    clusters: &[ClusterRecord],
    unchanged: &[usize],
    vms: &[VmRow],
    db_map: Option<&DbMap>,
    previous: &HashMap<String, PreviousMap>,
    keep_known: bool,
) -> (HashMap<usize, Result<Vec<VanishedVm>, String>>, usize) {
    let listed: HashSet<&VmId> = vms.iter().map(|vm| &vm.id).collect();
    let mut vanished = HashMap::new();
    let mut from_db = 0;
    for &i in unchanged {
        let c = &clusters[i];
        if let Some(hidden) = db_map.and_then(|m| from_database(m, c)) {
            from_db += 1;
            vanished.insert(i, Ok(hidden));
            continue;
        }
        let expected = c.info.expected_vms();
        let probed = probe_vanished(
            api,
            c,
            expected,
            previous.get(&c.info.id),
            &listed,
            keep_known,
        )
        .await;
        if let Err(e) = &probed {
            warn!(cluster = %c.info.name, error = %e, "cannot probe map rows the API stopped showing");
        }
        vanished.insert(i, probed.map_err(|e| e.to_string()));
    }
    (vanished, from_db)
}

/// The VMs named like a CKS node, and those in `known`, from the API's VM listing; the rest
/// (most VMs of a cloud) is dropped while the pages are read.
async fn list_vms(
    api: &Client,
    known: &HashSet<&str>,
    owners: &Owners,
) -> Result<Vec<VmRow>, CycleError> {
    let keep = |vm: VirtualMachine| {
        (!crate::cks::naming::split(&vm.name).is_empty() || known.contains(vm.id.as_str()))
            .then(|| VmRow::listed(vm, owners))
    };
    api.list_map::<VirtualMachine, _, _>(
        "listVirtualMachines",
        "virtualmachine",
        &[("listall", "true"), ("projectid", "-1"), ("details", "min")],
        keep,
    )
    .await
    .map_err(|source| CycleError::List {
        what: "virtual machines",
        source,
    })
}

/// The database's VMs as the VM listing would have given them: each account id becomes the
/// owner of the cluster that account owns (a VM of an account that owns no cluster the API
/// listed has no owner, and is nobody's node).
fn vms_of_database(
    db: crate::database::vms::DbVms<(u64, VmRow)>,
    clusters: &[ClusterRecord],
    owners: &Owners,
) -> Vec<VmRow> {
    let by_uuid: HashMap<&str, &crate::snapshot::Owner> = clusters
        .iter()
        .filter_map(|c| Some((c.info.id.as_str(), c.info.owner.as_ref()?)))
        .collect();
    let mut by_account: HashMap<u64, Arc<crate::snapshot::Owner>> = HashMap::new();
    for (uuid, account) in &db.owners {
        if let Some(owner) = by_uuid.get(uuid.as_str()) {
            by_account
                .entry(*account)
                .or_insert_with(|| owners.shared((*owner).clone()));
        }
    }
    db.vms
        .into_iter()
        .map(|(account, mut vm)| {
            vm.owner = by_account.get(&account).cloned();
            vm
        })
        .collect()
}

/// The map rows of `c` the API hides, from the database, unless its map changed between the
/// reads (then `None`: the API's probe decides).
fn from_database(map: &DbMap, c: &ClusterRecord) -> Option<Vec<VanishedVm>> {
    let shown: Vec<String> = c.map.iter().map(|vm| vm.id.to_string()).collect();
    let shown: Vec<&str> = shown.iter().map(String::as_str).collect();
    let rows = map.clusters.get(&c.info.id).map_or(&[][..], Vec::as_slice);
    let hidden = hidden_rows(rows, &shown);
    if hidden.is_none() {
        // The second read of the clusters saw the same map: not an operation under way.
        warn!(cluster = %c.info.name, cluster_id = %c.info.id, "the database's VM map differs from the API's (their live VMs are not the same); this cluster's hidden map rows are probed through the API this cycle");
    }
    hidden
}

/// The map rows the API does not show, from the database rows of a cluster whose shown VMs
/// are `shown`: a removed VM's row (expunged or unmanaged, under its uuid, so a VM keeps its
/// key from Destroyed to gone) and a row whose VM does not exist (under its numeric id).
/// `None` when the VMs alive in the database are not exactly those shown: the map changed
/// between the reads.
pub fn hidden_rows(rows: &[DbRow], shown: &[&str]) -> Option<Vec<VanishedVm>> {
    let alive: BTreeSet<&Uuid> = rows
        .iter()
        .filter_map(|r| match &r.vm {
            MapVm::Alive(uuid) => uuid.as_ref(),
            _ => None,
        })
        .collect();
    let shown: Vec<Uuid> = shown.iter().map(|s| Uuid::new(s)).collect();
    if alive != shown.iter().collect() {
        return None;
    }
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for row in rows {
        let gone = match &row.vm {
            MapVm::Alive(_) => continue,
            MapVm::Removed(vm) => VanishedVm {
                id: vm.uuid.clone().unwrap_or_else(|| row.vm_id.to_string()),
                name: Some(vm.name.clone()),
                how: VanishedHow::Expunged,
            },
            MapVm::Missing => VanishedVm {
                id: row.vm_id.to_string(),
                name: None,
                how: VanishedHow::DoesNotExist,
            },
        };
        if seen.insert(gone.id.clone()) {
            out.push(gone);
        }
    }
    Some(out)
}

/// What the second cluster read reads of each cluster: its state and the ids of its map, to
/// notice an operation that ran during the check.
#[derive(Debug, serde::Deserialize)]
pub struct ClusterFingerprint {
    pub id: String,
    #[serde(default)]
    pub state: String,
    #[serde(default)]
    virtualmachines: Vec<MapRowId>,
}

/// A cluster in the second read, against the first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reread {
    /// Not in the second read.
    Gone,
    /// Same state, same map.
    Same,
    /// Its state is now this one.
    StateChanged(String),
    /// Same state, another map.
    MapChanged,
}

#[derive(Debug, serde::Deserialize)]
struct MapRowId {
    id: VmId,
}

impl ClusterFingerprint {
    pub fn compare(&self, c: &ClusterRecord) -> Reread {
        if self.state != c.info.state {
            Reread::StateChanged(self.state.clone())
        } else if self
            .virtualmachines
            .iter()
            .map(|vm| &vm.id)
            .eq(c.map.iter().map(|vm| &vm.id))
        {
            Reread::Same
        } else {
            Reread::MapChanged
        }
    }
}

/// A node view per checkable cluster (by index), with the failure label of listings that
/// failed. At most `concurrency` listings run at once; dropping the future aborts
/// those still running.
async fn list_nodes(
    clusters: &[ClusterRecord],
    direct: &HashSet<String>,
    checkable: &[usize],
    lister: Arc<dyn NodeLister>,
    settings: Listing<'_>,
) -> HashMap<usize, (NodeView, Option<&'static str>)> {
    let deadline = tokio::time::Instant::now() + settings.deadline;
    let mut node_views = HashMap::new();
    let mut targets = Vec::with_capacity(checkable.len());
    for &i in checkable {
        let c = &clusters[i];
        let on_direct = c.network_id.as_ref().is_some_and(|id| direct.contains(id));
        match login_target(
            &c.info.id,
            c.endpoint.as_deref(),
            c.login_user.as_deref(),
            port_for(on_direct, c.info.control_nodes),
            settings.default_user,
        ) {
            Ok(mut target) => {
                // Reading stops at the longest list the cluster could be compared with.
                let vms = (c.info.expected_vms() as usize).max(c.map.len());
                target.max_nodes = crate::remote::node_bound(vms);
                targets.push((
                    c.owner_key(),
                    PlannedListing {
                        index: i,
                        target,
                        name: c.info.name.as_str().into(),
                        id: c.info.id.as_str().into(),
                    },
                ));
            }
            Err(reason) => {
                node_views.insert(i, (NodeView::Unknown { reason }, None));
            }
        }
    }
    // The listings are started by a task of their own, so that starting the next as one ends
    // never waits for the pages this task is parsing meanwhile. Held in a JoinSet: dropping
    // this future aborts it, and with it the listings still running.
    let mut driver = tokio::task::JoinSet::new();
    let total = targets.len();
    let turns = Turns::new(targets);
    driver.spawn(
        drive(turns, total, lister, settings.concurrency.max(1), deadline).in_current_span(),
    );
    match driver.join_next().await {
        Some(Ok(listed)) => node_views.extend(listed),
        Some(Err(e)) => warn!(error = %e, "the node listings failed"),
        None => {}
    }
    let reason = format!(
        "the node listing did not finish within the cycle's deadline of {}",
        crate::config::human_duration(settings.deadline)
    );
    for &i in checkable {
        node_views.entry(i).or_insert_with(|| {
            (
                NodeView::Unknown {
                    reason: reason.clone(),
                },
                Some("timeout"),
            )
        });
    }
    node_views
}

/// One node listing to run: the cluster's index, where to log in, and the cluster's name and
/// id for its span.
struct PlannedListing {
    index: usize,
    target: crate::remote::SshTarget,
    name: Box<str>,
    id: Box<str>,
}

/// Runs the `total` node listings of `turns` at most `concurrency` at a time, in their turns,
/// until all are done or `deadline`. Only the listings in flight are tasks, with their spans:
/// the next starts as one ends. (All at once, waiting their turn, 10,000 clusters were 10,000
/// tasks, 4.6 MB, and 10,000 spans, which grow a logging subscriber's registry by 3 MB for
/// good.)
async fn drive(
    mut turns: Turns<PlannedListing>,
    total: usize,
    lister: Arc<dyn NodeLister>,
    concurrency: usize,
    deadline: tokio::time::Instant,
) -> HashMap<usize, NodeListing> {
    let mut listings = tokio::task::JoinSet::new();
    // Whose listing each task is, to give its slot back to the turns when it ends (a task
    // that panicked included).
    let mut owners = HashMap::new();
    let mut node_views = HashMap::new();
    loop {
        while listings.len() < concurrency {
            let Some((
                owner,
                PlannedListing {
                    index: i,
                    target,
                    name,
                    id,
                },
            )) = turns.next()
            else {
                break;
            };
            let span = info_span!("cluster", cluster = %name, id = %id);
            let lister = lister.clone();
            let task = listings.spawn(
                async move {
                    match lister.list_nodes(&target).await {
                        // A list longer than the bound is dropped here, not held until the
                        // cluster is assembled (a lister that does not stop reading at it).
                        Ok(nodes) if nodes.len() > target.max_nodes => {
                            let reason = format!(
                                "the control node listed {} nodes, more than the {} the cluster can have (twice its VMs and 20 more); the list is not compared",
                                nodes.len(),
                                target.max_nodes
                            );
                            (i, NodeView::Unknown { reason }, Some("output"))
                        }
                        Ok(nodes) => (i, NodeView::Listed(nodes), None),
                        Err(e) => {
                            warn!(
                                host = %target.host,
                                port = target.port,
                                user = %target.user,
                                error = %e,
                                "{PARTIAL}"
                            );
                            let reason = e.to_string();
                            (i, NodeView::Unknown { reason }, Some(e.reason()))
                        }
                    }
                }
                .instrument(span),
            );
            owners.insert(task.id(), owner);
        }
        match tokio::time::timeout_at(deadline, listings.join_next_with_id()).await {
            Ok(None) => break,
            Ok(Some(Ok((task, (i, view, failure))))) => {
                if let Some(owner) = owners.remove(&task) {
                    turns.finished(owner);
                }
                node_views.insert(i, (view, failure));
            }
            Ok(Some(Err(e))) => {
                if let Some(owner) = owners.remove(&e.id()) {
                    turns.finished(owner);
                }
                warn!(error = %e, "a node listing task failed");
            }
            Err(_) => {
                // Dropping the set aborts the listings still running (their connections end
                // with them); those not started are not.
                warn!(
                    unfinished = total - node_views.len(),
                    "the node listings did not all finish within the cycle's deadline"
                );
                break;
            }
        }
    }
    // Those whose turn never came: not a failure of theirs, and first next cycle.
    for rest in turns.into_waiting() {
        let reason = "its turn did not come before the cycle's node-listing deadline; it is listed first next cycle".to_string();
        node_views.insert(
            rest.index,
            (NodeView::Unknown { reason }, Some(NOT_STARTED)),
        );
    }
    node_views
}

/// Map rows the API stopped showing: ids mapped last cycle, gone from `virtualmachines` now,
/// while the cluster's expected size did not shrink (a scale-down removes rows legitimately).
/// Each is probed with `listVirtualMachines id=`: an empty list means expunged or unmanaged,
/// error 431 means no such VM. A VM the probe still finds only lost its map row; it is judged
/// like any other VM of the cluster.
///
/// With `keep_known`, the ids already known gone are kept whether or not they fit the count
/// (a database found them, and it is the one to say when their rows are deleted).
async fn probe_vanished(
    api: &Client,
    c: &ClusterRecord,
    expected_vms: u32,
    previous: Option<&PreviousMap>,
    listed: &HashSet<&VmId>,
    keep_known: bool,
) -> Result<Vec<VanishedVm>, ApiError> {
    let Some(prev) = previous else {
        return Ok(vec![]);
    };
    let now_ids: BTreeSet<String> = c.map.iter().map(|vm| vm.id.to_string()).collect();
    // Gone rows can only stand for map entries the API does not show: at most
    // `expected - shown` of them. Beyond that the rows were deleted (a scale-down, a fix in
    // the database) and their findings resolve.
    let mut room = (expected_vms as usize).saturating_sub(now_ids.len());
    let mut out = Vec::new();
    // Already known gone, finding still open: kept without probing again, unless the row
    // came back.
    for (id, (name, how)) in &prev.vanished {
        if !now_ids.contains(id.as_str()) && !listed.contains(&VmId::new(id)) {
            out.push(VanishedVm {
                id: id.clone(),
                name: name.clone(),
                how: *how,
            });
        }
    }
    if keep_known {
        room += out.len();
    }
    // A scale-down removes rows legitimately: nothing new is probed then.
    if expected_vms >= prev.expected_vms {
        for (id, name) in &prev.vms {
            if out.len() >= room {
                break;
            }
            // Still mapped, already known, or the VM exists and only its row went.
            if now_ids.contains(id.as_str())
                || prev.vanished.contains_key(id)
                || listed.contains(&VmId::new(id))
            {
                continue;
            }
            let scope = [
                ("id", id.as_str()),
                ("listall", "true"),
                ("projectid", "-1"),
            ];
            match api
                .list::<VirtualMachine>("listVirtualMachines", "virtualmachine", &scope)
                .await
            {
                Ok(found) if found.is_empty() => out.push(VanishedVm {
                    id: id.clone(),
                    name: Some(name.clone()),
                    how: VanishedHow::Expunged,
                }),
                Ok(_) => {}
                Err(e) if e.code() == Some(431) => out.push(VanishedVm {
                    id: id.clone(),
                    name: Some(name.clone()),
                    how: VanishedHow::DoesNotExist,
                }),
                Err(e) => return Err(e),
            }
        }
    }
    out.truncate(room);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::database::map::DbVm;

    fn row(vm_id: u64, vm: Option<(&str, &str, bool)>) -> DbRow {
        DbRow {
            vm_id,
            vm: match vm {
                None => MapVm::Missing,
                Some((uuid, _, false)) => MapVm::Alive(Some(Uuid::new(uuid))),
                Some((uuid, state, true)) => MapVm::Removed(Box::new(DbVm {
                    uuid: Some(uuid.into()),
                    name: format!("name-{uuid}"),
                    state: state.into(),
                })),
            },
        }
    }

    #[test]
    fn removed_and_unknown_vms_are_the_hidden_rows() {
        let rows = [
            row(1, Some(("a", "Running", false))),
            row(2, Some(("b", "Destroyed", false))),
            row(3, Some(("c", "Expunging", true))),
            row(999_999, None),
            // A duplicate row is one finding.
            row(999_999, None),
        ];
        let hidden = hidden_rows(&rows, &["b", "a"]).unwrap();
        assert_eq!(
            hidden,
            [
                VanishedVm {
                    id: "c".into(),
                    name: Some("name-c".into()),
                    how: VanishedHow::Expunged
                },
                VanishedVm {
                    id: "999999".into(),
                    name: None,
                    how: VanishedHow::DoesNotExist
                },
            ]
        );
    }

    /// A lister whose listing of `host` takes `delays[host]`; it records when each started.
    struct Timed {
        delays: HashMap<String, std::time::Duration>,
        started: std::sync::Mutex<Vec<(String, std::time::Duration)>>,
        epoch: tokio::time::Instant,
    }

    impl NodeLister for Timed {
        fn list_nodes<'a>(
            &'a self,
            target: &'a crate::remote::SshTarget,
        ) -> crate::remote::NodeListFuture<'a> {
            let since = self.epoch.elapsed();
            self.started
                .lock()
                .unwrap()
                .push((target.host.clone(), since));
            let delay = self.delays[&target.host];
            Box::pin(async move {
                tokio::time::sleep(delay).await;
                Ok(vec![])
            })
        }
    }

    /// A Running cluster of `account` (none: no owner) whose control node is `host`.
    fn cluster_at(host: &str, account: Option<&str>) -> ClusterRecord {
        let mut c = serde_json::json!({
            "id": host, "name": host, "state": "Running", "controlnodes": 1, "size": 1,
            "endpoint": format!("https://{host}:6443/"),
        });
        if let Some(account) = account {
            c["account"] = account.into();
            c["domainid"] = "d".into();
        }
        ClusterRecord::new(serde_json::from_value(c).unwrap())
    }

    #[tokio::test(start_paused = true)]
    async fn one_owners_slow_clusters_do_not_hold_back_anothers() {
        // Six clusters of one tenant answering in 10 s, listed longest ago, then one of
        // another tenant answering in 1 s; 2 listings at a time, 25 s for all.
        let mut clusters: Vec<ClusterRecord> = (0..6)
            .map(|n| cluster_at(&format!("10.0.0.{n}"), Some("slowpoke")))
            .collect();
        clusters.push(cluster_at("10.0.1.1", Some("alice")));
        let second = |s: u64| std::time::Duration::from_secs(s);
        let mut delays: HashMap<String, _> = clusters
            .iter()
            .map(|c| (c.info.id.clone(), second(10)))
            .collect();
        delays.insert("10.0.1.1".into(), second(1));
        let lister = Arc::new(Timed {
            delays,
            started: Default::default(),
            epoch: tokio::time::Instant::now(),
        });
        let settings = Listing {
            concurrency: 2,
            default_user: "cloud",
            deadline: second(25),
            only: None,
        };
        let order: Vec<usize> = (0..clusters.len()).collect();
        let nodes = list_nodes(&clusters, &HashSet::new(), &order, lister.clone(), settings).await;
        // alice's cluster takes the second slot at once; the slow tenant's take every slot
        // free after it, in their own order, until the deadline.
        let started = lister.started.lock().unwrap().clone();
        let expected: Vec<(String, std::time::Duration)> = [
            ("10.0.0.0", 0),
            ("10.0.1.1", 0),
            ("10.0.0.1", 1),
            ("10.0.0.2", 10),
            ("10.0.0.3", 11),
            ("10.0.0.4", 20),
            ("10.0.0.5", 21),
        ]
        .iter()
        .map(|&(host, at)| (host.to_string(), second(at)))
        .collect();
        assert_eq!(started, expected);
        let failures: Vec<Option<&str>> = (0..clusters.len()).map(|i| nodes[&i].1).collect();
        assert_eq!(
            failures,
            [
                None,
                None,
                None,
                None,
                Some("timeout"),
                Some("timeout"),
                None
            ]
        );
        assert_eq!(nodes[&6].0, NodeView::Listed(vec![]));
    }

    #[test]
    fn a_map_that_changed_between_the_reads_is_not_used() {
        let rows = [row(1, Some(("a", "Running", false)))];
        assert_eq!(hidden_rows(&rows, &["a"]), Some(vec![]));
        assert_eq!(hidden_rows(&rows, &["a", "b"]), None);
        assert_eq!(hidden_rows(&rows, &[]), None);
    }
}
