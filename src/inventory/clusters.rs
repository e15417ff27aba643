//! The clusters as a cycle reads them: the first read with the networks CKS reaches directly
//! (after which the node listings start), and the second read, after the listings, that
//! tells which clusters changed during the check.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use tracing::debug;

use super::messages::RELEASE_UNKNOWN;
use super::nodes::{list_nodes, listing_order};
use super::{ClusterRecord, CycleError, Listing, NodeListing, VmId};
use crate::cks::{ROOT_SCOPE, reached_directly};
use crate::cloudstack::client::Client;
use crate::cloudstack::error::ApiError;
use crate::cloudstack::model::{KubernetesCluster, Network};
use crate::cloudstack::release::{Release, network_scopes};
use crate::remote::NodeLister;
use crate::snapshot::PreviousMap;

/// The release the server runs, or `None` when it is not shown or cannot be read: the
/// listings that depend on it then take the way that is right on every release.
async fn release_or_none(api: &Client) -> Option<Release> {
    match api.version().await {
        Ok(version) => version.as_deref().and_then(Release::parse),
        Err(e) => {
            debug!(error = %e, "{RELEASE_UNKNOWN}");
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

/// The first read of the clusters, with the networks CKS reaches directly, then the node
/// listings of the clusters the rules check: the clusters, the indexes of the checkable
/// ones, and the listings.
pub(super) async fn list_clusters_and_nodes(
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

/// Reads the clusters again: anything whose state or map changed meanwhile is not reported
/// this cycle (an operation ran during the check). Each row is compared with the first
/// read as it is read, and only the outcome is kept. Should an id come twice, its last row
/// decides, for every cluster of the first read with that id.
pub(super) async fn read_clusters_again(
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
