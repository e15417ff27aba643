//! The records a simulated world is made of, as plain data: owners, domains, accounts,
//! projects, zones, clusters with their map rows, VMs and their NICs, networks, alerts,
//! annotations, async jobs, and the shape of a cluster to build.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::time::SimTime;

/// The account every simulated call is made as: the root admin `admin` in domain `ROOT`.
pub const CALLER_ACCOUNT: &str = "admin";
pub const ROOT_DOMAIN: &str = "ROOT";

/// Who owns a cluster, VM or network. Project-owned resources carry no account in responses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SimOwner {
    Account {
        account: String,
        domain_id: String,
    },
    Project {
        project_id: String,
        project: String,
        domain_id: String,
    },
}

impl SimOwner {
    pub fn domain_id(&self) -> &str {
        match self {
            SimOwner::Account { domain_id, .. } | SimOwner::Project { domain_id, .. } => domain_id,
        }
    }

    pub fn is_project(&self) -> bool {
        matches!(self, SimOwner::Project { .. })
    }

    /// The account's name; `None` for a project.
    pub fn account_name(&self) -> Option<&str> {
        match self {
            SimOwner::Account { account, .. } => Some(account),
            SimOwner::Project { .. } => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct SimDomain {
    pub id: String,
    pub name: String,
    /// `/` for ROOT, `/<name>/` below it; a recursive listing matches by path prefix.
    pub path: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SimAccount {
    pub id: String,
    pub name: String,
    pub domain_id: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SimProject {
    pub id: String,
    pub name: String,
    pub domain_id: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SimZone {
    pub id: String,
    pub name: String,
    pub pod_ids: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SimCluster {
    pub id: String,
    pub name: String,
    pub zone_id: String,
    pub state: String,
    /// `CloudManaged` / `ExternalManaged`; `None` models a server older than 4.19.
    pub clustertype: Option<String>,
    pub owner: SimOwner,
    pub control_nodes: u32,
    /// Worker count (includes external nodes, as in CloudStack).
    pub size: u32,
    /// `None` when the cluster has no etcd nodes (or the server predates 4.21).
    pub etcd_nodes: Option<u32>,
    pub endpoint: String,
    pub network_id: String,
    /// VM ids of the `kubernetes_cluster_vm_map` rows in map-id order. May hold duplicates,
    /// ids of removed VMs and ids that never existed, exactly like the real table.
    pub map: Vec<String>,
    pub kubernetes_version: String,
    pub created: SimTime,
    /// Set for destroyed clusters: never listed again.
    pub removed: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SimNic {
    pub id: String,
    pub network_id: String,
    pub ip_address: String,
    pub mac_address: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SimVm {
    pub id: String,
    /// The host name (`vm_instance.name`).
    pub name: String,
    pub displayname: String,
    /// Internal `i-<account>-<id>-VM`.
    pub instancename: String,
    pub state: String,
    pub created: SimTime,
    /// Last state change (`vm_instance.update_time`).
    pub lastupdated: SimTime,
    pub owner: SimOwner,
    pub zone_id: String,
    /// `cksnode` for VMs CKS created (4.20+); `None` for other VMs or older servers.
    pub vmtype: Option<String>,
    /// Only shown inside a cluster's `virtualmachines` (4.21+).
    pub isetcdnode: Option<bool>,
    pub isexternalnode: Option<bool>,
    /// Displayable VM details, e.g. `controlNodeLoginUser`.
    pub details: BTreeMap<String, String>,
    pub nic: Option<SimNic>,
    /// Expunged or unmanaged: the row exists with `removed` set, so the API never lists it,
    /// but a uuid lookup still resolves it.
    pub removed: bool,
    /// `KVM`, `VMware`, `XenServer`, …: decides the system UUID its guest sees.
    pub hypervisor: String,
}

impl SimVm {
    /// The SMBIOS system UUID the guest sees, which its kubelet reports as
    /// `status.nodeInfo.systemUUID`. On KVM, CloudStack gives the libvirt domain the VM's own
    /// UUID; other hypervisors give the machine one of their own (here: the VM's UUID with its
    /// hex digits reversed, uppercase as VMware prints it).
    pub fn system_uuid(&self) -> String {
        if self.hypervisor == "KVM" {
            return self.id.clone();
        }
        let mut digits: Vec<char> = self
            .id
            .chars()
            .filter(char::is_ascii_hexdigit)
            .map(|c| c.to_ascii_uppercase())
            .collect();
        digits.reverse();
        let mut out = String::with_capacity(36);
        for (i, c) in digits.into_iter().enumerate() {
            if matches!(i, 8 | 12 | 16 | 20) {
                out.push('-');
            }
            out.push(c);
        }
        out
    }
}

/// Guest type of a network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkType {
    Isolated,
    Shared,
    L2,
}

impl NetworkType {
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkType::Isolated => "Isolated",
            NetworkType::Shared => "Shared",
            NetworkType::L2 => "L2",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct SimPublicIp {
    pub id: String,
    pub address: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SimNetwork {
    pub id: String,
    pub name: String,
    pub network_type: NetworkType,
    /// `NATTED` or `ROUTED` (4.20+); `None` for older servers.
    pub network_mode: Option<String>,
    pub zone_id: String,
    pub owner: SimOwner,
    pub vpc_id: Option<String>,
    pub cidr: String,
    /// The source-NAT public IP of an isolated network.
    pub source_nat_ip: Option<SimPublicIp>,
    /// A Shared network of ACL type Account (`createNetwork account=` or `projectid=`): its
    /// owner's alone, listed as the owner's Isolated networks are.
    pub account_scoped: bool,
    /// Accounts it is shared with through `createNetworkPermissions` (4.17 on; the
    /// `network_permissions` table).
    pub permitted: Vec<String>,
}

impl SimNetwork {
    /// A network every account of a domain may use (ACL type Domain): the zone-wide Shared
    /// networks an admin creates, not the account-scoped ones.
    pub fn is_domain_wide(&self) -> bool {
        self.network_type == NetworkType::Shared && !self.account_scoped
    }

    /// Shared networks and ROUTED mode: VMs are reached on their own address.
    pub fn is_direct_access(&self) -> bool {
        self.network_type == NetworkType::Shared || self.network_mode.as_deref() == Some("ROUTED")
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct SimAlert {
    pub id: String,
    pub alert_type: i16,
    pub name: String,
    /// Subject and content.
    pub description: String,
    /// `None` stands for data center 0, which is what an alert without `zoneid` gets.
    pub zone_id: Option<String>,
    pub pod_id: Option<String>,
    pub sent: SimTime,
    pub archived: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SimAnnotation {
    pub id: String,
    /// The author: the caller's user for annotations added through the API.
    pub user_id: String,
    pub username: String,
    pub entity_type: String,
    pub entity_id: String,
    pub annotation: String,
    pub admins_only: bool,
    pub created: SimTime,
    pub removed: bool,
}

/// What an async job does when it completes.
#[derive(Debug, Clone, PartialEq)]
pub enum JobWork {
    GenerateAlert {
        alert_type: i16,
        name: String,
        description: String,
        zone_id: Option<String>,
        pod_id: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum JobOutcome {
    Pending,
    Succeeded(serde_json::Value),
    Failed { code: u16, text: String },
}

#[derive(Debug, Clone, PartialEq)]
pub struct SimJob {
    pub id: String,
    /// The command's Java class, as `queryAsyncJobResult` reports it in `cmd`.
    pub cmd_class: String,
    pub created: SimTime,
    pub completed: Option<SimTime>,
    pub outcome: JobOutcome,
    /// Queries still to answer "pending" before the job runs.
    pub polls_until_done: u32,
    pub work: Option<JobWork>,
}

/// Role of a CKS node VM, which decides its host name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeRole {
    Control,
    Worker,
    /// The n-th etcd node (1-based).
    Etcd(u32),
}

/// How a cluster's network is laid out, which decides its endpoint and `ipaddress`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkLayout {
    /// Isolated network with a source-NAT public IP (the endpoint's host).
    Isolated,
    /// Zone-wide Shared network, owned by the admin account: the endpoint is the first
    /// control VM's own address.
    Shared,
    /// Isolated network in ROUTED mode: direct access like Shared.
    Routed,
    /// Shared network of ACL type Account, owned by the cluster's owner (an account or a
    /// project): direct access.
    SharedOfOwner,
    /// Shared network of ACL type Account owned by another account of the domain (`bob`) and
    /// shared with the cluster's owner through `createNetworkPermissions` (4.17 on).
    SharedByPermission,
}

/// A cluster to build with [`World::add_cluster_with`].
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    pub name: String,
    pub owner: SimOwner,
    pub control: u32,
    pub workers: u32,
    pub etcd: u32,
    pub layout: NetworkLayout,
    pub clustertype: Option<String>,
    pub state: String,
    /// How long ago the cluster was created.
    pub age: Duration,
    /// `false` builds VMs as a server before 4.21 lists them (no `isetcdnode`/`isexternalnode`).
    pub node_flags: bool,
}

impl ClusterSpec {
    pub fn new(name: &str, owner: SimOwner, control: u32, workers: u32, etcd: u32) -> Self {
        ClusterSpec {
            name: name.to_string(),
            owner,
            control,
            workers,
            etcd,
            layout: NetworkLayout::Isolated,
            clustertype: Some("CloudManaged".to_string()),
            state: "Running".to_string(),
            age: Duration::from_secs(30 * 86_400),
            node_flags: true,
        }
    }
}

/// An event of the `event` table, as the management server's own VM map check records them
/// (`ActionEventUtils.onActionEvent`: on the cluster, `display` false).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimEvent {
    pub id: String,
    /// `KUBERNETES.CLUSTER.VM.MAP.CHECK`.
    pub event_type: String,
    /// `WARN` for a mismatch, `INFO` when the cluster matches again.
    pub level: String,
    pub description: String,
    /// The cluster's uuid.
    pub resource_id: String,
    pub created: SimTime,
}
