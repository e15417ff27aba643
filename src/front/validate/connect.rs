//! The connection test of `validate-config --connect`: its steps in order, the first that
//! fails ending it.

use super::cloudstack::{
    alert_types, api_failure, key_holder, server_check, server_release, single_attempt_client,
};
use super::rules::{cluster_rule_warnings, unmatched_rule_warnings};
use super::ssh::ssh_login;
use super::{Finding, Severity};
use crate::cloudstack::model::KubernetesCluster;
use crate::config::Config;

/// The connection test: one API call with the configured keys, then `ssh.command` on the
/// control node of the first cluster that is checked (Running or Alert, CloudManaged) and
/// has an endpoint.
pub async fn connect(config: &Config) -> Vec<Finding> {
    let mut out = unmatched_rule_warnings(config);
    if let Err(last) = connection_steps(config, &mut out).await {
        out.push(last);
    }
    out
}

/// The steps of the connection test, in order: the API and its clusters, the release, the
/// key's holder, then SSH. Each adds what it showed to `out`; the first that fails ends the
/// test and returns its finding.
async fn connection_steps(config: &Config, out: &mut Vec<Finding>) -> Result<(), Finding> {
    let url = &config.cloudstack.url;
    let api = single_attempt_client(config).map_err(|e| api_failure(&e, url))?;
    let clusters: Vec<KubernetesCluster> = api
        .list(
            "listKubernetesClusters",
            "kubernetescluster",
            &crate::cks::ROOT_SCOPE,
        )
        .await
        .map_err(|e| api_failure(&e, url))?;
    out.push(Finding::new(
        Severity::Ok,
        "cloudstack API",
        format!(
            "{url} accepted the keys and answered listKubernetesClusters ({} cluster{})",
            clusters.len(),
            if clusters.len() == 1 { "" } else { "s" }
        ),
    ));
    out.extend(cluster_rule_warnings(&config.ignore, &clusters));
    let (finding, release) = server_release(&api, url).await?;
    out.push(finding);
    out.push(key_holder(&api, config.cloudstack.api_key.expose()).await?);
    out.push(alert_types(&api, release, &config.notify.alert_types).await?);
    out.push(server_check(&api, config, url).await?);
    out.push(ssh_login(config, &api, release, &clusters).await?);
    Ok(())
}
