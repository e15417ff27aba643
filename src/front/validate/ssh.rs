//! The connection test's SSH step: `ssh.command` on the control node of the first cluster
//! that is checked and has an endpoint, and what its listing gave.

use super::cloudstack::api_failure;
use super::{Finding, Severity};
use crate::base::untrusted::{escaped, shown};
use crate::cloudstack::client::Client;
use crate::cloudstack::model::KubernetesCluster;
use crate::cloudstack::release::Release;
use crate::config::Config;
use crate::engine::diagnose;
use crate::remote::NodeLister;
use crate::remote::ssh::SshNodeLister;

/// The most characters of a cluster's name shown, escapes counted as written (CloudStack
/// takes names of up to 255).
const NAME_SHOWN: usize = 255;

/// `ssh.command` on the control node of the cluster [`login_cluster`] picks: what it
/// listed, or an error naming the step that failed, or a warning saying why SSH was not
/// tried.
pub(super) async fn ssh_login(
    config: &Config,
    api: &Client,
    release: Option<Release>,
    clusters: &[KubernetesCluster],
) -> Result<Finding, Finding> {
    let cluster =
        login_cluster(clusters).map_err(|why| Finding::warning("ssh", why.to_string()))?;
    let lister = SshNodeLister::new(&config.ssh)
        .map_err(|e| Finding::error("ssh", crate::base::error_chain::error_chain(&e)))?;
    let network = match cluster.networkid.as_deref() {
        None => None,
        Some(id) => crate::inventory::list_networks(api, release, &[("id", id)], |_| true)
            .await
            .map_err(|e| api_failure(&e, &config.cloudstack.url))?
            .pop(),
    };
    let target = crate::cks::ssh_target(cluster, network.as_ref(), &config.ssh.user)
        .map_err(|e| Finding::warning("ssh", e.to_string()))?;
    // The name is the tenant's; the user and host come from its VM's detail and its
    // endpoint, checked but shown escaped all the same.
    let who = format!(
        "cluster {}, {}@{}:{}",
        shown(&cluster.name, NAME_SHOWN),
        escaped(&target.user),
        escaped(&target.host),
        target.port
    );
    match lister.list_nodes(&target).await {
        Ok(nodes) => Ok(Finding::new(
            Severity::Ok,
            "ssh",
            format!("{who}: {}", listed(&nodes)),
        )),
        Err(e) => {
            // The error quotes the control node's stderr, as the tenant's node wrote it.
            let d = diagnose::node_list(&e);
            Err(Finding::error(
                &format!("ssh ({})", d.step),
                format!("{who}: {}", escaped(&d.line)),
            ))
        }
    }
}

/// Why the connection test does not try SSH.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum NoLogin {
    #[error("no Running or Alert CloudManaged cluster to log in to; SSH was not tried")]
    NoCluster,
    /// The first checked cluster has no endpoint yet; `name` and `id` are shown escaped.
    #[error(
        "cluster {name} ({id}): {}; SSH was not tried",
        crate::cks::NO_ENDPOINT
    )]
    NoEndpoint { name: String, id: String },
}

/// The cluster the connection test logs in to: the first that is checked and has an
/// endpoint; else why SSH is not tried.
pub(super) fn login_cluster(clusters: &[KubernetesCluster]) -> Result<&KubernetesCluster, NoLogin> {
    let checked: Vec<&KubernetesCluster> = clusters
        .iter()
        .filter(|c| crate::cks::skip_reason(c).is_none())
        .collect();
    if let Some(cluster) = checked
        .iter()
        .find(|c| crate::cks::endpoint_host(c.endpoint.as_deref()).is_some())
    {
        return Ok(cluster);
    }
    Err(match checked.first() {
        None => NoLogin::NoCluster,
        Some(c) => NoLogin::NoEndpoint {
            name: shown(&c.name, NAME_SHOWN),
            id: escaped(&c.id).into_owned(),
        },
    })
}

/// What a node listing gave, for the connection test: how many nodes, how many of them carry
/// an identity (a system UUID or provider ID) to be matched by, and how many are Ready where
/// readiness is listed.
pub(super) fn listed(nodes: &[crate::snapshot::Node]) -> String {
    let summary = identities(nodes);
    if nodes.iter().all(|n| n.ready.is_none()) {
        return summary;
    }
    let ready = nodes
        .iter()
        .filter(|n| n.ready == Some(crate::remote::Readiness::Ready))
        .count();
    format!("{summary}; {ready} of them Ready")
}

fn identities(nodes: &[crate::snapshot::Node]) -> String {
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    let known = nodes
        .iter()
        .filter(|n| n.system_uuid.is_some() || n.provider_id.is_some())
        .count();
    let head = format!(
        "ssh.command listed {} node{}",
        nodes.len(),
        plural(nodes.len())
    );
    match (nodes.len(), known) {
        (0, _) => head,
        (_, 0) => format!(
            "{head}, by name only (none with a system UUID or provider ID): they are matched to \
             VMs by name"
        ),
        _ => format!("{head}, {known} with a system UUID or provider ID"),
    }
}
