//! The simulated cloud's state as plain data: domains, accounts, projects, zones, Kubernetes
//! clusters with their VM map rows, VMs, networks, alerts, annotations and async jobs, plus
//! builders that lay out clusters the way CKS does and mutators for the faults tests need.
//!
//! No request handling here (that is `commands`), and no locking (that is `Sim`).

use std::collections::BTreeMap;
use std::time::Duration;

use super::time::SimTime;

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
}

impl SimNetwork {
    /// A network every account of a domain may use (ACL type Domain): the zone-wide Shared
    /// networks an admin creates. Account-scoped Shared networks are not modelled.
    pub fn is_domain_wide(&self) -> bool {
        self.network_type == NetworkType::Shared
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

    pub fn add_zone(&mut self, name: &str) -> String {
        let id = self.fresh_id();
        let pod = self.fresh_id();
        self.zones.push(SimZone {
            id: id.clone(),
            name: name.to_string(),
            pod_ids: vec![pod],
        });
        id
    }

    /// A domain directly below ROOT.
    pub fn add_domain(&mut self, name: &str) -> String {
        let id = self.fresh_id();
        self.domains.push(SimDomain {
            id: id.clone(),
            name: name.to_string(),
            path: format!("/{name}/"),
        });
        id
    }

    pub fn add_account(&mut self, name: &str, domain_id: &str) -> SimOwner {
        let id = self.fresh_id();
        self.accounts.push(SimAccount {
            id,
            name: name.to_string(),
            domain_id: domain_id.to_string(),
        });
        SimOwner::Account {
            account: name.to_string(),
            domain_id: domain_id.to_string(),
        }
    }

    /// A project in ROOT.
    pub fn add_project(&mut self, name: &str) -> SimOwner {
        let id = self.fresh_id();
        let domain_id = self.root_domain_id().to_string();
        self.projects.push(SimProject {
            id: id.clone(),
            name: name.to_string(),
            domain_id: domain_id.clone(),
        });
        SimOwner::Project {
            project_id: id,
            project: name.to_string(),
            domain_id,
        }
    }

    pub fn add_network(
        &mut self,
        name: &str,
        owner: SimOwner,
        network_type: NetworkType,
        network_mode: Option<&str>,
    ) -> String {
        let id = self.fresh_id();
        let n = self.networks.len() as u32 + 1;
        let source_nat_ip = if network_type == NetworkType::Isolated {
            Some(SimPublicIp {
                id: self.fresh_id(),
                address: format!("203.0.{}.{}", 113 + n / 250, n % 250 + 1),
            })
        } else {
            None
        };
        self.networks.push(SimNetwork {
            id: id.clone(),
            name: name.to_string(),
            network_type,
            network_mode: network_mode.map(str::to_string),
            zone_id: self.default_zone_id().to_string(),
            owner,
            vpc_id: None,
            cidr: format!("10.{}.{}.0/24", 1 + n / 250, n % 250),
            source_nat_ip,
        });
        id
    }

    /// A plain Running user VM (not a CKS node), created a day ago, on `network_id` if given.
    pub fn add_vm(&mut self, name: &str, owner: SimOwner, network_id: Option<&str>) -> String {
        let created = self.now.minus(Duration::from_secs(86_400));
        self.push_vm(name, owner, network_id, created)
    }

    /// A CloudManaged, Running cluster on its own isolated network, laid out as CKS does.
    pub fn add_cluster(
        &mut self,
        name: &str,
        owner: SimOwner,
        control: u32,
        workers: u32,
        etcd: u32,
    ) -> String {
        self.add_cluster_with(ClusterSpec::new(name, owner, control, workers, etcd))
    }

    /// Builds a cluster: network, then etcd, control and worker VMs (CKS's creation order,
    /// which is also the map-row order), each Running with `controlNodeLoginUser=cloud`.
    pub fn add_cluster_with(&mut self, spec: ClusterSpec) -> String {
        let id = self.fresh_id();
        let (network_type, mode) = match spec.layout {
            NetworkLayout::Isolated => (NetworkType::Isolated, None),
            NetworkLayout::Shared => (NetworkType::Shared, None),
            NetworkLayout::Routed => (NetworkType::Isolated, Some("ROUTED")),
        };
        // A Shared network is the zone-wide kind an admin creates for every tenant: the
        // admin account owns it, not the cluster's owner.
        let network_owner = match spec.layout {
            NetworkLayout::Shared => self.admin(),
            NetworkLayout::Isolated | NetworkLayout::Routed => spec.owner.clone(),
        };
        let network_id = self.add_network(
            &format!("{}-network", spec.name),
            network_owner,
            network_type,
            mode,
        );
        let created = self.now.minus(spec.age);
        self.clusters.push(SimCluster {
            id: id.clone(),
            name: spec.name.clone(),
            zone_id: self.default_zone_id().to_string(),
            state: spec.state.clone(),
            clustertype: spec.clustertype.clone(),
            owner: spec.owner.clone(),
            control_nodes: spec.control,
            size: spec.workers,
            etcd_nodes: (spec.etcd > 0).then_some(spec.etcd),
            endpoint: String::new(),
            network_id: network_id.clone(),
            map: Vec::new(),
            kubernetes_version: "v1.33.1".to_string(),
            created,
            removed: false,
        });

        // etcd host names are computed in one loop, so they share one suffix.
        let etcd_time = created.plus(Duration::from_secs(5));
        for n in 1..=spec.etcd {
            self.push_node(&id, NodeRole::Etcd(n), etcd_time, 0, spec.node_flags, true);
        }
        for i in 0..spec.control {
            let t = created.plus(Duration::from_secs(60 + 60 * u64::from(i)));
            self.push_node(&id, NodeRole::Control, t, 17 * i, spec.node_flags, true);
        }
        for i in 0..spec.workers {
            let t = created.plus(Duration::from_secs(300 + 30 * u64::from(i)));
            self.push_node(&id, NodeRole::Worker, t, 29 * i, spec.node_flags, true);
        }

        let endpoint_host = self.endpoint_host(&id);
        let cluster = self.cluster_mut(&id);
        cluster.endpoint = format!("https://{endpoint_host}:6443/");
        id
    }

    /// A new CKS-named VM for the cluster, created now, owned like the cluster and on its
    /// network. With `mapped`, a map row is appended (counts are left as they are).
    ///
    /// # Panics
    /// If the cluster does not exist.
    pub fn add_node_vm(&mut self, cluster_id: &str, role: NodeRole, mapped: bool) -> String {
        let flags = self
            .cluster(cluster_id)
            .and_then(|c| c.map.iter().find_map(|v| self.vm(v)))
            .is_none_or(|vm| vm.isetcdnode.is_some());
        let now = self.now;
        self.push_node(cluster_id, role, now, 0, flags, mapped)
    }

    /// Sets a VM's state and stamps `lastupdated`, as every state transition does.
    ///
    /// # Panics
    /// If the VM does not exist.
    pub fn set_vm_state(&mut self, vm_id: &str, state: &str) {
        let now = self.now;
        let vm = self.vm_mut(vm_id);
        vm.state = state.to_string();
        vm.lastupdated = now;
    }

    /// Expunges a VM: state Expunging and the row removed, so listings no longer show it.
    pub fn expunge_vm(&mut self, vm_id: &str) {
        self.set_vm_state(vm_id, "Expunging");
        self.vm_mut(vm_id).removed = true;
    }

    /// Unmanages a VM: the row is removed but keeps its state.
    pub fn unmanage_vm(&mut self, vm_id: &str) {
        self.vm_mut(vm_id).removed = true;
    }

    /// Deletes the first map row pointing at `vm_id`; false if there was none.
    pub fn remove_map_row(&mut self, cluster_id: &str, vm_id: &str) -> bool {
        let map = &mut self.cluster_mut(cluster_id).map;
        match map.iter().position(|v| v == vm_id) {
            Some(i) => {
                map.remove(i);
                true
            }
            None => false,
        }
    }

    /// Appends a map row; the VM need not exist.
    pub fn add_map_row(&mut self, cluster_id: &str, vm_id: &str) {
        self.cluster_mut(cluster_id).map.push(vm_id.to_string());
    }

    pub fn set_cluster_state(&mut self, cluster_id: &str, state: &str) {
        self.cluster_mut(cluster_id).state = state.to_string();
    }

    /// Destroys a cluster: state Destroyed and removed, so it is never listed again, and its
    /// annotations removed with it (`KubernetesClusterDestroyWorker`:
    /// `annotationDao.removeByEntityType("KUBERNETES_CLUSTER", uuid)`).
    pub fn destroy_cluster(&mut self, cluster_id: &str) {
        let c = self.cluster_mut(cluster_id);
        c.state = "Destroyed".to_string();
        c.removed = true;
        for a in &mut self.annotations {
            if a.entity_type == "KUBERNETES_CLUSTER" && a.entity_id == cluster_id {
                a.removed = true;
            }
        }
    }

    /// Moves the simulated clock forward.
    pub fn advance(&mut self, by: Duration) {
        self.now = self.now.plus(by);
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

    fn push_vm(
        &mut self,
        name: &str,
        owner: SimOwner,
        network_id: Option<&str>,
        created: SimTime,
    ) -> String {
        let id = self.fresh_id();
        self.next_vm_number += 1;
        let number = self.next_vm_number;
        let nic = network_id.map(|net| self.new_nic(net, number));
        self.vms.push(SimVm {
            id: id.clone(),
            name: name.to_string(),
            displayname: name.to_string(),
            instancename: format!("i-2-{number}-VM"),
            state: "Running".to_string(),
            created,
            lastupdated: created.plus(Duration::from_secs(20)),
            zone_id: self.default_zone_id().to_string(),
            owner,
            vmtype: None,
            isetcdnode: None,
            isexternalnode: None,
            details: BTreeMap::new(),
            nic,
            removed: false,
            hypervisor: self.hypervisor.clone(),
        });
        id
    }

    /// The next free address on `network_id` (from .10 up), with a MAC derived from `number`.
    fn new_nic(&mut self, network_id: &str, number: u64) -> SimNic {
        let cidr_base = self
            .network(network_id)
            .map(|n| n.cidr.trim_end_matches(".0/24").to_string())
            .unwrap_or_else(|| "10.0.0".to_string());
        let host = 10 + self.vms.iter().filter(|v| nic_on(v, network_id)).count();
        SimNic {
            id: self.fresh_id(),
            network_id: network_id.to_string(),
            ip_address: format!("{cidr_base}.{host}"),
            mac_address: format!(
                "02:00:{:02x}:{:02x}:00:01",
                (number >> 8) & 0xff,
                number & 0xff
            ),
        }
    }

    /// Creates a node VM named as CKS names it and, if `mapped`, appends its map row.
    fn push_node(
        &mut self,
        cluster_id: &str,
        role: NodeRole,
        created: SimTime,
        extra_ms: u32,
        flags: bool,
        mapped: bool,
    ) -> String {
        let cluster = self
            .cluster(cluster_id)
            .unwrap_or_else(|| panic!("no cluster {cluster_id} in the simulated world"));
        let (owner, network_id) = (cluster.owner.clone(), cluster.network_id.clone());
        let hex = cks_hex(created, extra_ms);
        let name = match role {
            NodeRole::Control => format!(
                "{}-control-{hex}",
                node_name_prefix(&cluster.name, &cluster.id)
            ),
            NodeRole::Worker => format!(
                "{}-node-{hex}",
                node_name_prefix(&cluster.name, &cluster.id)
            ),
            NodeRole::Etcd(n) => {
                format!("{}-{n}-{hex}", etcd_name_prefix(&cluster.name, &cluster.id))
            }
        };
        let vm_id = self.push_vm(&name, owner, Some(&network_id), created);
        let vm = self.vm_mut(&vm_id);
        vm.vmtype = Some("cksnode".to_string());
        vm.details
            .insert("controlNodeLoginUser".to_string(), "cloud".to_string());
        if flags {
            vm.isetcdnode = Some(matches!(role, NodeRole::Etcd(_)));
            vm.isexternalnode = Some(false);
        }
        if mapped {
            self.cluster_mut(cluster_id).map.push(vm_id.clone());
        }
        vm_id
    }

    /// Where CKS reaches the cluster: the source-NAT IP of an isolated network, otherwise
    /// the address of the control VM (map rows sorted by id, index = etcd count).
    fn endpoint_host(&self, cluster_id: &str) -> String {
        let Some(cluster) = self.cluster(cluster_id) else {
            return String::new();
        };
        let network = self.network(&cluster.network_id);
        if let Some(n) = network.filter(|n| !n.is_direct_access())
            && let Some(ip) = &n.source_nat_ip
        {
            return ip.address.clone();
        }
        let control_index = cluster.etcd_nodes.unwrap_or(0) as usize;
        cluster
            .map
            .get(control_index)
            .and_then(|id| self.vm(id))
            .and_then(|vm| vm.nic.as_ref())
            .map(|nic| nic.ip_address.clone())
            .unwrap_or_default()
    }
}

fn nic_on(vm: &SimVm, network_id: &str) -> bool {
    vm.nic.as_ref().is_some_and(|n| n.network_id == network_id)
}

/// The hexadecimal epoch milliseconds CKS appends to node names.
pub fn cks_hex(created: SimTime, extra_ms: u32) -> String {
    let ms = created.unix() * 1000 + i64::from(extra_ms % 1000);
    format!("{ms:x}")
}

/// The node-name prefix of CloudStack 4.20.2+ / 4.21+: the lowercased name, truncated to 43
/// if it is a valid host-name label, else stripped to `[a-z0-9-]` (the uuid if nothing is
/// left) behind `k8s-`, truncated to 43.
pub fn node_name_prefix(cluster_name: &str, cluster_id: &str) -> String {
    let lower = cluster_name.to_lowercase();
    let prefix = if is_host_label(&lower) {
        lower
    } else {
        let stripped: String = lower
            .chars()
            .filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
            .collect();
        let base = if stripped.is_empty() {
            cluster_id.to_string()
        } else {
            stripped
        };
        format!("k8s-{base}")
    };
    prefix.chars().take(43).collect()
}

/// The etcd host-name prefix: the original-case name (stripped to `[a-zA-Z0-9-]` if it is
/// not a valid label), then `-etcd`, then truncated to 40.
pub fn etcd_name_prefix(cluster_name: &str, cluster_id: &str) -> String {
    let base = if is_host_label(cluster_name) {
        cluster_name.to_string()
    } else {
        let stripped: String = cluster_name
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        if stripped.is_empty() {
            cluster_id.to_string()
        } else {
            stripped
        }
    };
    format!("{base}-etcd").chars().take(40).collect()
}

/// `NetUtils.verifyDomainNameLabel(name, true)`: 1–63 of `[a-zA-Z0-9-]`, not starting or
/// ending with `-`, not starting with a digit.
fn is_host_label(s: &str) -> bool {
    let b = s.as_bytes();
    (1..=63).contains(&b.len())
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
        && !b[0].is_ascii_digit()
}

fn splitmix64(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
