//! Gathering what an explanation needs: the cluster asked for, found by name or id, the
//! inventory with only its nodes listed, and the state file read without its lock.

use std::path::Path;
use std::sync::Arc;

use super::{Explanation, explanation, strangers};
use crate::base::time::Timestamp;
use crate::cloudstack::client::Client;
use crate::cloudstack::model::KubernetesCluster;
use crate::config::Config;
use crate::diff::Policy;
use crate::inventory::ClusterRecord;
use crate::inventory::assemble::assemble;
use crate::state::State;

/// Why `explain` could not explain.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    #[error("no Kubernetes cluster is named or has the id {0:?}; `cks-drift check` lists them")]
    NotFound(String),
    #[error("{count} Kubernetes clusters are named {name:?} ({ids}); give the id instead")]
    Ambiguous {
        name: String,
        count: usize,
        ids: String,
    },
    #[error(transparent)]
    Cycle(#[from] crate::inventory::CycleError),
    /// The CloudStack API client could not be built.
    #[error(transparent)]
    Client(#[from] crate::cloudstack::error::ApiError),
    /// The SSH node lister could not be built: its private key.
    #[error(transparent)]
    Ssh(#[from] crate::remote::ssh::KeyError),
    /// The state file could not be read.
    #[error(transparent)]
    State(#[from] crate::state::file::StateError),
}

/// A cluster as some listing holds it: `explain` looks one up in the API's listing, then in
/// the cycle's inventory.
pub trait Listed {
    fn id(&self) -> &str;
    fn name(&self) -> &str;
}

impl Listed for KubernetesCluster {
    fn id(&self) -> &str {
        &self.id
    }
    fn name(&self) -> &str {
        &self.name
    }
}

impl Listed for ClusterRecord {
    fn id(&self) -> &str {
        &self.info.id
    }
    fn name(&self) -> &str {
        &self.info.name
    }
}

/// The one cluster named (by name or id) among `clusters`.
pub fn pick<'a, C: Listed>(clusters: &'a [C], wanted: &str) -> Result<&'a C, ExplainError> {
    if let Some(c) = clusters.iter().find(|c| c.id() == wanted) {
        return Ok(c);
    }
    let named: Vec<&C> = clusters.iter().filter(|c| c.name() == wanted).collect();
    match named.as_slice() {
        // Shown with `{:?}`, which escapes control characters.
        [] => Err(ExplainError::NotFound(wanted.to_string())),
        [one] => Ok(one),
        many => Err(ExplainError::Ambiguous {
            name: wanted.to_string(),
            count: many.len(),
            ids: many.iter().map(|c| c.id()).collect::<Vec<_>>().join(", "),
        }),
    }
}

/// Reads the inventory with only `cluster`'s nodes listed, and explains it.
pub async fn explain(
    config: &Config,
    wanted: &str,
    now: Timestamp,
) -> Result<Explanation, ExplainError> {
    let api = Client::new(&config.cloudstack)?;
    let lister = crate::remote::ssh::SshNodeLister::new(&config.ssh)?;
    let state = read_state(&config.state.path)?;
    let previous = state
        .as_ref()
        .map(crate::state::step::previous_maps)
        .unwrap_or_default();
    let database = config.database.as_ref().map(crate::database::Database::new);
    // The cluster is looked up first, so that only its nodes are listed.
    let clusters: Vec<KubernetesCluster> = api
        .list(
            "listKubernetesClusters",
            "kubernetescluster",
            &crate::cks::ROOT_SCOPE,
        )
        .await
        .map_err(|source| crate::inventory::CycleError::List {
            what: "Kubernetes clusters",
            source,
        })?;
    let id = pick(&clusters, wanted)?.id.clone();
    drop(clusters);
    let listing = crate::inventory::Listing {
        concurrency: 1,
        default_user: &config.ssh.user,
        deadline: crate::engine::node_deadline(config),
        only: Some(&id),
    };
    let inventory = crate::inventory::fetch(
        &api,
        Arc::new(lister),
        listing,
        &previous,
        database.as_ref(),
    )
    .await?;
    let raw = pick(&inventory.clusters, &id)?.clone();
    let strangers = strangers(&raw, &inventory.vms);
    let assembled = assemble(inventory)
        .find(|a| a.cluster.id == id)
        .ok_or_else(|| ExplainError::NotFound(id.clone()))?;
    let policy = Policy {
        grace_period: config.check.grace_period,
    };
    Ok(explanation(
        &raw,
        &assembled,
        &strangers,
        &policy,
        now,
        state.as_ref(),
    ))
}

/// The state file's content, read without its lock (a running instance keeps it); `None`
/// when there is none.
fn read_state(path: &Path) -> Result<Option<State>, ExplainError> {
    Ok(crate::state::file::read(path)?)
}
