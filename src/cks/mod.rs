//! The rules of CloudStack Kubernetes Service that cks-drift follows, in one place: whose
//! resources a listing covers (owner scope), which clusters are checked and why the others
//! are skipped, and where SSH goes and as whom. Pure functions of what the API answered;
//! the cycle, `validate-config`, the demo and the benchmark all use them.

pub mod naming;

use crate::cloudstack::model::{KubernetesCluster, Network, VirtualMachine};
use crate::remote::SshTarget;
use crate::snapshot::{ClusterInfo, Owner};

/// List every account's and project's resources, not only the caller's.
pub const ROOT_SCOPE: [(&str, &str); 2] = [("listall", "true"), ("projectid", "-1")];

/// Why a cluster's nodes are not listed when it has no endpoint.
pub const NO_ENDPOINT: &str = "the cluster has no endpoint address to reach its control node \
     over SSH; CloudStack records one when the cluster first starts, so until then only its VM \
     map and VMs are compared";

/// Why cks-drift does not log in to a cluster's control node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoginError {
    /// No `endpoint` yet: see [`NO_ENDPOINT`].
    #[error("{NO_ENDPOINT}")]
    NoEndpoint,
    /// The `controlNodeLoginUser` detail is not a plain user name (see
    /// [`is_plain_user_name`]); `shown` is the detail escaped and cut for display.
    #[error(
        "the controlNodeLoginUser detail of the cluster's first VM is not a plain user \
         name (\"{shown}\"); cks-drift does not log in as it"
    )]
    NotPlainUser { shown: String },
}

/// The owner of a cluster or VM: its project if it has one (project resources carry no
/// account), else its account in its domain.
fn owner(
    projectid: &Option<String>,
    domainid: &Option<String>,
    account: &Option<String>,
) -> Option<Owner> {
    match (projectid, domainid, account) {
        (Some(p), d, _) if !p.is_empty() => Some(Owner::Project {
            project_id: p.clone(),
            domain_id: d.clone().filter(|d| !d.is_empty()),
        }),
        (_, Some(d), Some(a)) => Some(Owner::Account {
            domain_id: d.clone(),
            account: a.clone(),
        }),
        _ => None,
    }
}

pub fn owner_of_cluster(c: &KubernetesCluster) -> Option<Owner> {
    owner(&c.projectid, &c.domainid, &c.account)
}

pub fn owner_of_vm(vm: &VirtualMachine) -> Option<Owner> {
    owner(&vm.projectid, &vm.domainid, &vm.account)
}

/// The cluster's own record as the comparison reads it.
pub fn cluster_info(c: &KubernetesCluster) -> ClusterInfo {
    ClusterInfo {
        id: c.id.clone(),
        name: c.name.clone(),
        zone_id: c.zoneid.clone(),
        state: c.state.clone(),
        owner: owner_of_cluster(c),
        control_nodes: c.controlnodes.or(c.masternodes).unwrap_or(1),
        size: c.size.unwrap_or(0),
        etcd_nodes: c.etcdnodes.unwrap_or(0),
    }
}

/// Why a cluster is not checked, if it is not: only CloudManaged clusters in Running or
/// Alert state are. Other states are operations under way or a stopped/failed cluster.
pub fn skip_reason(c: &KubernetesCluster) -> Option<String> {
    if c.clustertype.as_deref() == Some("ExternalManaged") {
        return Some("ExternalManaged cluster: its VMs are not managed by CloudStack".into());
    }
    match c.state.as_str() {
        "Running" | "Alert" => None,
        other => Some(format!(
            "state {other}: only Running and Alert clusters are checked"
        )),
    }
}

/// The SSH host from the cluster's `endpoint` (`https://<ip>:6443/`).
pub fn endpoint_host(endpoint: Option<&str>) -> Option<String> {
    let url = reqwest::Url::parse(endpoint?.trim()).ok()?;
    let host = url
        .host_str()?
        .trim_start_matches('[')
        .trim_end_matches(']');
    (!host.is_empty()).then(|| host.to_string())
}

/// Port 22 on Shared or ROUTED networks with one control node (CKS then reaches the control
/// VM directly); otherwise 2222, the public port forwarded to the first control node.
pub fn ssh_port(network: Option<&Network>, control_nodes: u32) -> u16 {
    port_for(network.is_some_and(reached_directly), control_nodes)
}

/// Whether CKS reaches a single control node on `n` directly (Shared or ROUTED), rather than
/// through the network's public port forward.
pub fn reached_directly(n: &Network) -> bool {
    n.network_type
        .as_deref()
        .is_some_and(|t| t.eq_ignore_ascii_case("Shared"))
        || n.networkmode
            .as_deref()
            .is_some_and(|m| m.eq_ignore_ascii_case("ROUTED"))
}

/// [`ssh_port`] for a network already judged by [`reached_directly`].
pub fn port_for(direct: bool, control_nodes: u32) -> u16 {
    if direct && control_nodes <= 1 {
        22
    } else {
        2222
    }
}

/// Where CKS itself logs in to a cluster's control node: the host of its `endpoint`, the
/// port for its network (see [`ssh_port`]), and the first mapped VM's `controlNodeLoginUser`
/// detail, else `default_user`. `network` is the cluster's network, if it was listed.
///
/// The detail is the tenant's to set: anything but a plain user name (see
/// [`is_plain_user_name`]) is a reason not to log in at all, and the cluster is compared
/// map-to-VMs only.
pub fn ssh_target(
    c: &KubernetesCluster,
    network: Option<&Network>,
    default_user: &str,
) -> Result<SshTarget, LoginError> {
    let detail = c
        .virtualmachines
        .first()
        .and_then(|vm| vm.details.get("controlNodeLoginUser"));
    login_target(
        &c.id,
        c.endpoint.as_deref(),
        detail.map(String::as_str),
        ssh_port(network, cluster_info(c).control_nodes),
        default_user,
    )
}

/// [`ssh_target`] from what a cycle keeps of a cluster: its id, its `endpoint`, its first
/// map row's `controlNodeLoginUser` detail and the port.
pub fn login_target(
    cluster_id: &str,
    endpoint: Option<&str>,
    login_detail: Option<&str>,
    port: u16,
    default_user: &str,
) -> Result<SshTarget, LoginError> {
    let host = endpoint_host(endpoint).ok_or(LoginError::NoEndpoint)?;
    let detail = login_detail.filter(|u| !u.trim().is_empty());
    let user = match detail {
        Some(u) if !is_plain_user_name(u) => {
            return Err(LoginError::NotPlainUser {
                shown: crate::base::untrusted::shown(u, 64),
            });
        }
        Some(u) => u.to_string(),
        None => default_user.to_string(),
    };
    Ok(SshTarget {
        cluster_id: cluster_id.to_string(),
        host,
        port,
        user,
        max_nodes: crate::remote::MAX_NODES,
    })
}

/// 1 to 32 characters of `A-Z a-z 0-9 . _ -`, not starting with `-` or `.`: what a login
/// name is on the control node images CKS uses, and nothing a shell or sudo reads otherwise.
pub fn is_plain_user_name(u: &str) -> bool {
    (1..=32).contains(&u.len())
        && u.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && !u.starts_with(['-', '.'])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(t: &str, mode: Option<&str>) -> Network {
        Network {
            id: "n".into(),
            name: None,
            network_type: Some(t.into()),
            networkmode: mode.map(Into::into),
            vpcid: None,
        }
    }

    #[test]
    fn ssh_port_follows_cks() {
        assert_eq!(ssh_port(Some(&net("Isolated", None)), 1), 2222);
        assert_eq!(ssh_port(Some(&net("Shared", None)), 1), 22);
        assert_eq!(ssh_port(Some(&net("Shared", None)), 3), 2222);
        assert_eq!(ssh_port(Some(&net("Isolated", Some("ROUTED"))), 1), 22);
        assert_eq!(ssh_port(Some(&net("Isolated", Some("NATTED"))), 1), 2222);
        assert_eq!(ssh_port(None, 1), 2222);
    }

    #[test]
    fn endpoint_hosts() {
        assert_eq!(
            endpoint_host(Some("https://10.0.57.163:6443/")),
            Some("10.0.57.163".into())
        );
        assert_eq!(
            endpoint_host(Some("https://[fd00::5]:6443/")),
            Some("fd00::5".into())
        );
        assert_eq!(endpoint_host(Some("")), None);
        assert_eq!(endpoint_host(None), None);
    }

    #[test]
    fn ssh_targets_follow_cks() {
        let c: KubernetesCluster = serde_json::from_value(serde_json::json!({
            "id": "c", "name": "n", "state": "Running", "controlnodes": 1,
            "endpoint": "https://10.1.1.10:6443/",
            "virtualmachines": [{"id": "v1", "details": {"controlNodeLoginUser": "core"}}]
        }))
        .unwrap();
        assert_eq!(
            ssh_target(&c, Some(&net("Shared", None)), "cloud"),
            Ok(SshTarget {
                cluster_id: "c".into(),
                host: "10.1.1.10".into(),
                port: 22,
                user: "core".into(),
                max_nodes: crate::remote::MAX_NODES
            })
        );
        let mut plain = c.clone();
        plain.virtualmachines[0].details.clear();
        assert_eq!(
            ssh_target(&plain, None, "cloud"),
            Ok(SshTarget {
                cluster_id: "c".into(),
                host: "10.1.1.10".into(),
                port: 2222,
                user: "cloud".into(),
                max_nodes: crate::remote::MAX_NODES
            })
        );
        let mut no_endpoint = c;
        no_endpoint.endpoint = None;
        assert_eq!(
            ssh_target(&no_endpoint, None, "cloud"),
            Err(LoginError::NoEndpoint)
        );
    }

    fn cluster(state: &str, ty: Option<&str>) -> KubernetesCluster {
        serde_json::from_value(serde_json::json!({
            "id": "c", "name": "n", "state": state, "clustertype": ty
        }))
        .unwrap()
    }

    #[test]
    fn which_clusters_are_checked() {
        assert_eq!(skip_reason(&cluster("Running", Some("CloudManaged"))), None);
        assert_eq!(skip_reason(&cluster("Alert", None)), None);
        for state in [
            "Scaling",
            "Starting",
            "Stopped",
            "Upgrading",
            "RemovingNodes",
            "Error",
            "Created",
        ] {
            assert_eq!(
                skip_reason(&cluster(state, None)),
                Some(format!(
                    "state {state}: only Running and Alert clusters are checked"
                ))
            );
        }
        assert_eq!(
            skip_reason(&cluster("Running", Some("ExternalManaged"))),
            Some("ExternalManaged cluster: its VMs are not managed by CloudStack".into())
        );
    }

    #[test]
    fn only_a_plain_login_user_is_taken_from_the_tenant() {
        for ok in ["cloud", "core", "ubuntu", "k8s_admin", "a.b-c", "U1"] {
            assert!(is_plain_user_name(ok), "{ok}");
        }
        for bad in [
            "",
            "-oProxyCommand=x",
            ".hidden",
            "root\nforged",
            "a b",
            "x;reboot",
            "$(id)",
            "ünïcode",
            &"a".repeat(33),
        ] {
            assert!(!is_plain_user_name(bad), "{bad:?}");
        }
        let c: KubernetesCluster = serde_json::from_value(serde_json::json!({
            "id": "c", "name": "n", "state": "Running", "controlnodes": 1,
            "endpoint": "https://10.1.1.10:6443/",
            "virtualmachines": [{"id": "v1", "details": {"controlNodeLoginUser": "root\u{1b}[2J"}}]
        }))
        .unwrap();
        assert_eq!(
            ssh_target(&c, None, "cloud").map_err(|e| e.to_string()),
            Err(
                "the controlNodeLoginUser detail of the cluster's first VM is not a plain user \
                 name (\"root\\x1b[2J\"); cks-drift does not log in as it"
                    .to_string()
            )
        );
    }
}
