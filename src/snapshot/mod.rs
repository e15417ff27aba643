//! The three views of one cluster, as plain data: its VM map, its VMs in CloudStack and its
//! Kubernetes nodes, and who the cluster is (`ClusterIdentity`). Built by `cycle` from the
//! sources; read by the pure `diff`, and the identity by every stage after it.
//!
//! Nothing here does I/O. A view that could not be read is marked unknown, never empty.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::base::time::Timestamp;
pub use crate::remote::Node;

/// A VM state as CloudStack names it. Unknown states are kept verbatim.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum VmState {
    Running,
    Stopped,
    Starting,
    Stopping,
    Migrating,
    Destroyed,
    Expunging,
    Error,
    Other(String),
}

impl VmState {
    pub fn parse(s: &str) -> Self {
        match s {
            "Running" => VmState::Running,
            "Stopped" => VmState::Stopped,
            "Starting" => VmState::Starting,
            "Stopping" => VmState::Stopping,
            "Migrating" => VmState::Migrating,
            "Destroyed" => VmState::Destroyed,
            "Expunging" => VmState::Expunging,
            "Error" => VmState::Error,
            other => VmState::Other(other.to_string()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            VmState::Running => "Running",
            VmState::Stopped => "Stopped",
            VmState::Starting => "Starting",
            VmState::Stopping => "Stopping",
            VmState::Migrating => "Migrating",
            VmState::Destroyed => "Destroyed",
            VmState::Expunging => "Expunging",
            VmState::Error => "Error",
            VmState::Other(s) => s,
        }
    }

    /// Destroyed, Expunging or Error: a VM that cannot serve as a node.
    pub fn is_dead(&self) -> bool {
        matches!(
            self,
            VmState::Destroyed | VmState::Expunging | VmState::Error
        )
    }
}

/// A VM as the checker sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Vm {
    pub id: String,
    /// The host name (`name`), which CKS also uses as the Kubernetes node name.
    pub name: String,
    pub state: VmState,
    pub created: Option<Timestamp>,
    /// Last state change (`lastupdated`, 4.16+).
    pub last_updated: Option<Timestamp>,
    /// An etcd VM (`isetcdnode`, or named like one); never a Kubernetes node.
    pub etcd: bool,
}

/// Who owns a cluster and its VMs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Owner {
    Account {
        domain_id: String,
        account: String,
    },
    Project {
        project_id: String,
        /// The domain the project is in, where the API says.
        domain_id: Option<String>,
    },
}

impl Owner {
    /// The tenant the owner counts toward, one string unique in the cloud: what per-tenant
    /// limits (alert caps, storms, listing turns) count by. An account is a tenant (its name
    /// is unique only within its domain); the projects of one domain are one tenant together,
    /// because users may create projects (`allow.user.create.projects`) but not domains, so
    /// that a tenant cannot multiply its share by making projects.
    pub fn key(&self) -> String {
        match self {
            Owner::Account { domain_id, account } => format!("account:{domain_id}/{account}"),
            Owner::Project {
                domain_id: Some(d), ..
            } => format!("projects-of-domain:{d}"),
            Owner::Project { project_id, .. } => format!("project:{project_id}"),
        }
    }
}

/// Who a cluster is: made once, when its snapshot is assembled, and carried whole from there
/// to the report, the dedupe step and the state. Nothing downstream rebuilds it field by field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterIdentity {
    pub id: String,
    pub name: String,
    pub zone_id: Option<String>,
    /// Who owns it as shown: the project's name, else the account's.
    pub owner: Option<String>,
    /// The owner, unique in the cloud (`Owner::key`): what per-tenant limits count by.
    pub owner_id: Option<String>,
}

impl ClusterIdentity {
    pub fn new(info: &ClusterInfo, owner_name: Option<String>) -> ClusterIdentity {
        ClusterIdentity {
            id: info.id.clone(),
            name: info.name.clone(),
            zone_id: info.zone_id.clone(),
            owner: owner_name,
            owner_id: info.owner.as_ref().map(Owner::key),
        }
    }

    /// The tenant its findings count toward: its owner's key, or for a cluster of unknown
    /// owner, the cluster itself (see `state::tenant`).
    pub fn tenant(&self) -> String {
        tenant(self.owner_id.as_deref(), &self.id)
    }
}

/// The tenant a cluster's findings count toward: its owner's key (`Owner::key`), or for a
/// cluster of unknown owner, the cluster itself.
pub fn tenant(owner_id: Option<&str>, cluster_id: &str) -> String {
    owner_id.map_or_else(|| format!("cluster:{cluster_id}"), str::to_string)
}

/// The cluster's own record, from `listKubernetesClusters`.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterInfo {
    pub id: String,
    pub name: String,
    pub zone_id: Option<String>,
    pub state: String,
    pub owner: Option<Owner>,
    pub control_nodes: u32,
    /// Worker count; includes externally added nodes.
    pub size: u32,
    pub etcd_nodes: u32,
}

impl ClusterInfo {
    /// Map rows the cluster should have: `controlnodes + size + etcdnodes`.
    pub fn expected_vms(&self) -> u32 {
        self.control_nodes + self.size + self.etcd_nodes
    }
}

/// What became of a mapped VM id that vanished from the cluster's `virtualmachines`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VanishedHow {
    /// `listVirtualMachines id=` gave an empty list: expunged or unmanaged.
    Expunged,
    /// `listVirtualMachines id=` gave error 431: no such VM.
    DoesNotExist,
}

/// A mapped VM as its `vm_instance` row named it, remembered by the row's numeric id
/// (`vm_instance.id`, the map's `vm_id`) from the cycle that saw it dead or removed: once
/// the row is purged, the map row still names it by this uuid and name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RememberedVm {
    /// Its uuid.
    pub id: String,
    pub name: String,
}

/// A map row the API no longer shows, confirmed gone by a probe.
#[derive(Debug, Clone, PartialEq)]
pub struct VanishedVm {
    pub id: String,
    /// The name it had when last seen in the map.
    pub name: Option<String>,
    pub how: VanishedHow,
}

/// The Kubernetes nodes of a cluster, or why they are not known.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeView {
    /// The nodes as the node-listing command gave them, in its order.
    Listed(Vec<Node>),
    /// The nodes could not be listed; the node side is not compared.
    Unknown { reason: String },
}

/// Everything `diff` needs about one cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterSnapshot {
    pub cluster: ClusterInfo,
    /// The VM map as the API shows it (`virtualmachines`), duplicates removed, order kept.
    pub mapped: Vec<Vm>,
    /// The owner's VMs named as nodes of this cluster (mapped or not).
    pub named: Vec<Vm>,
    /// Ids among `named` that are in the map of another cluster.
    pub mapped_elsewhere: BTreeSet<String>,
    /// Map rows the API hides, confirmed gone (see `VanishedVm`).
    pub vanished: Vec<VanishedVm>,
    pub nodes: NodeView,
}

/// What the previous cycle saw of a cluster's map, to find rows the API stopped showing.
#[derive(Debug, Clone, Default)]
pub struct PreviousMap {
    /// Mapped VM ids with their last known names.
    pub vms: BTreeMap<String, String>,
    pub expected_vms: u32,
    /// Ids already known to be gone, kept while their finding is open.
    pub vanished: BTreeMap<String, (Option<String>, VanishedHow)>,
    /// The mapped VMs seen dead or removed in the database, by `vm_instance.id`, kept while a
    /// map row holds that id.
    pub db_ids: BTreeMap<u64, RememberedVm>,
    /// Its nodes could not be listed the last time a listing ran: among clusters listed
    /// equally long ago, it waits for the others.
    pub nodes_failed: bool,
    /// When a listing of its nodes last ran (started, whatever its outcome); `None` when
    /// never. Each owner's listings run oldest first, so that every cluster gets its turn.
    pub listed_at: Option<crate::base::time::Timestamp>,
}
