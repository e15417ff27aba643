//! The simulated cloud's state as plain data: domains, accounts, projects, zones, Kubernetes
//! clusters with their VM map rows, VMs, networks, alerts, annotations and async jobs, plus
//! builders that lay out clusters the way CKS does and mutators for the faults tests need.
//!
//! No request handling here (that is `commands`), and no locking (that is `Sim`).
//!
//! The rooms: this file holds the `World` and its lookups; `model` the records it is made of,
//! `build` the builders, `faults` the changes tests make, `naming` CKS's names for nodes.

mod build;
mod faults;
mod model;
mod naming;
mod vm_map_check;

pub use model::{
    CALLER_ACCOUNT, ClusterSpec, JobOutcome, JobWork, NetworkLayout, NetworkType, NodeRole,
    ROOT_DOMAIN, SimAccount, SimAlert, SimAnnotation, SimCluster, SimDomain, SimEvent, SimJob,
    SimNetwork, SimNic, SimOwner, SimProject, SimPublicIp, SimVm, SimZone,
};
pub use naming::{cks_hex, etcd_name_prefix, node_name_prefix};
pub use vm_map_check::VM_MAP_CHECK_EVENT;

use super::time::SimTime;

/// Everything the simulated management server knows. Vectors are in creation order, which
/// is the internal-id order CloudStack sorts listings by.
#[derive(Debug, Clone)]
pub struct World {
    /// The release the server answers as (see `release`).
    pub release: crate::release::Release,
    /// The simulated clock: creation times, `lastupdated`, alert `sent`.
    pub now: SimTime,
    pub domains: Vec<SimDomain>,
    pub accounts: Vec<SimAccount>,
    pub projects: Vec<SimProject>,
    pub zones: Vec<SimZone>,
    pub clusters: Vec<SimCluster>,
    pub vms: Vec<SimVm>,
    pub networks: Vec<SimNetwork>,
    pub alerts: Vec<SimAlert>,
    pub annotations: Vec<SimAnnotation>,
    pub jobs: Vec<SimJob>,
    /// Id of the caller's user, reported by async jobs and annotations.
    pub admin_user_id: String,
    /// The role type of the caller's role (`getUser`'s `roletype`): `Admin` unless a test
    /// says otherwise (`ResourceAdmin`, `DomainAdmin`, `User`).
    pub caller_role_type: String,
    /// The caller's API key, which `getUser userapikey=` finds; set by the HTTP server.
    pub caller_api_key: String,
    /// On 4.23 (key pairs): the API key of a key pair the caller's user made after the one
    /// it signs with; `getUser` then answers it as `apikey`.
    pub caller_newer_api_key: Option<String>,
    /// On 4.23 (key pairs): the commands the rules of the caller's key pair allow, when it has
    /// rules of its own (`None`: the role's). Any other command is refused before it runs.
    pub caller_key_pair_allows: Option<Vec<String>>,
    /// Commands the caller's role (a custom one of type Admin) has no rule for: refused with
    /// 432 before they run.
    pub caller_role_denies: Vec<String>,
    /// The management server's own VM map check (apache/cloudstack PR 14666): `None` on a
    /// release without it, else its setting `cloud.kubernetes.cluster.vm.map.check.enabled`.
    pub vm_map_check: Option<bool>,
    /// What the server's own VM map check reported, per cluster id: the keys it holds in the
    /// cluster details `vmMapCheckReportedVmDrift` / `vmMapCheckReportedNodeDrift`.
    pub vm_map_check_reported: std::collections::BTreeMap<String, Vec<String>>,
    /// Events the server recorded (`listEvents`), oldest first: the VM map check's.
    pub events: Vec<SimEvent>,
    /// The hypervisor of the VMs created from now on (`KVM` unless a test says otherwise).
    pub hypervisor: String,
    next_id: u64,
    next_vm_number: u64,
}

impl World {
    /// A world with domain ROOT, account `admin` and one zone with one pod.
    pub fn new(now: SimTime) -> Self {
        let mut w = World {
            release: crate::release::Release::NEWEST,
            now,
            domains: Vec::new(),
            accounts: Vec::new(),
            projects: Vec::new(),
            zones: Vec::new(),
            clusters: Vec::new(),
            vms: Vec::new(),
            networks: Vec::new(),
            alerts: Vec::new(),
            annotations: Vec::new(),
            jobs: Vec::new(),
            admin_user_id: String::new(),
            caller_role_type: "Admin".to_string(),
            caller_api_key: String::new(),
            caller_newer_api_key: None,
            caller_key_pair_allows: None,
            caller_role_denies: Vec::new(),
            vm_map_check: None,
            vm_map_check_reported: std::collections::BTreeMap::new(),
            events: Vec::new(),
            hypervisor: "KVM".to_string(),
            next_id: 0,
            next_vm_number: 0,
        };
        let root = w.fresh_id();
        w.domains.push(SimDomain {
            id: root.clone(),
            name: ROOT_DOMAIN.to_string(),
            path: "/".to_string(),
        });
        let admin = w.fresh_id();
        w.accounts.push(SimAccount {
            id: admin,
            name: CALLER_ACCOUNT.to_string(),
            domain_id: root,
        });
        w.admin_user_id = w.fresh_id();
        w.add_zone("zone-1");
        w
    }

    /// A new uuid-shaped id, deterministic for a given sequence of calls. Ids are scrambled
    /// so that their order says nothing about creation order, as with real uuids.
    pub fn fresh_id(&mut self) -> String {
        self.next_id += 1;
        let hi = splitmix64(self.next_id);
        let lo = splitmix64(hi ^ self.next_id.rotate_left(32));
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            hi >> 32,
            (hi >> 16) & 0xffff,
            hi & 0xfff,
            0x8000 | ((lo >> 48) & 0x3fff),
            lo & 0xffff_ffff_ffff
        )
    }

    pub fn root_domain_id(&self) -> &str {
        &self.domains[0].id
    }

    /// The caller's own account: what a listing without `listall` returns.
    pub fn admin(&self) -> SimOwner {
        SimOwner::Account {
            account: CALLER_ACCOUNT.to_string(),
            domain_id: self.root_domain_id().to_string(),
        }
    }

    pub fn default_zone_id(&self) -> &str {
        &self.zones[0].id
    }

    pub fn cluster(&self, id: &str) -> Option<&SimCluster> {
        self.clusters.iter().find(|c| c.id == id)
    }

    /// # Panics
    /// If the cluster does not exist.
    pub fn cluster_mut(&mut self, id: &str) -> &mut SimCluster {
        self.clusters
            .iter_mut()
            .find(|c| c.id == id)
            .unwrap_or_else(|| panic!("no cluster {id} in the simulated world"))
    }

    pub fn cluster_by_name(&self, name: &str) -> Option<&SimCluster> {
        self.clusters.iter().find(|c| c.name == name && !c.removed)
    }

    pub fn vm(&self, id: &str) -> Option<&SimVm> {
        self.vms.iter().find(|v| v.id == id)
    }

    /// # Panics
    /// If the VM does not exist.
    pub fn vm_mut(&mut self, id: &str) -> &mut SimVm {
        self.vms
            .iter_mut()
            .find(|v| v.id == id)
            .unwrap_or_else(|| panic!("no VM {id} in the simulated world"))
    }

    pub fn vm_by_name(&self, name: &str) -> Option<&SimVm> {
        self.vms.iter().find(|v| v.name == name && !v.removed)
    }

    pub fn network(&self, id: &str) -> Option<&SimNetwork> {
        self.networks.iter().find(|n| n.id == id)
    }

    pub fn domain(&self, id: &str) -> Option<&SimDomain> {
        self.domains.iter().find(|d| d.id == id)
    }

    pub fn zone(&self, id: &str) -> Option<&SimZone> {
        self.zones.iter().find(|z| z.id == id)
    }

    pub fn project(&self, id: &str) -> Option<&SimProject> {
        self.projects.iter().find(|p| p.id == id)
    }

    /// The un-archived alerts, newest first, as `listAlerts` shows them.
    pub fn active_alerts(&self) -> Vec<&SimAlert> {
        let mut out: Vec<(usize, &SimAlert)> = self
            .alerts
            .iter()
            .enumerate()
            .filter(|(_, a)| !a.archived)
            .collect();
        out.sort_by(|a, b| b.1.sent.cmp(&a.1.sent).then(b.0.cmp(&a.0)));
        out.into_iter().map(|(_, a)| a).collect()
    }
}

fn splitmix64(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
