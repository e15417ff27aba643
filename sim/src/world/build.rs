//! Builders of the world: zones, domains, accounts, projects, networks, VMs, and clusters laid
//! out the way CKS lays them out (node VMs, their names, the map and the endpoint).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::time::SimTime;

use super::naming::{cks_hex, etcd_name_prefix, node_name_prefix};
use super::{
    ClusterSpec, NetworkLayout, NetworkType, NodeRole, SimAccount, SimCluster, SimDomain,
    SimNetwork, SimNic, SimOwner, SimProject, SimPublicIp, SimVm, SimZone, World,
};

impl World {
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
            account_scoped: false,
            permitted: Vec::new(),
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
            NetworkLayout::Shared
            | NetworkLayout::SharedOfOwner
            | NetworkLayout::SharedByPermission => (NetworkType::Shared, None),
            NetworkLayout::Routed => (NetworkType::Isolated, Some("ROUTED")),
        };
        // A zone-wide Shared network is the kind an admin creates for every tenant: the
        // admin account owns it, not the cluster's owner.
        let network_owner = match spec.layout {
            NetworkLayout::Shared => self.admin(),
            NetworkLayout::SharedByPermission => SimOwner::Account {
                account: "bob".to_string(),
                domain_id: spec.owner.domain_id().to_string(),
            },
            NetworkLayout::Isolated | NetworkLayout::Routed | NetworkLayout::SharedOfOwner => {
                spec.owner.clone()
            }
        };
        let network_id = self.add_network(
            &format!("{}-network", spec.name),
            network_owner,
            network_type,
            mode,
        );
        if matches!(
            spec.layout,
            NetworkLayout::SharedOfOwner | NetworkLayout::SharedByPermission
        ) {
            let grantee = spec.owner.account_name().map(str::to_string);
            let n = self
                .networks
                .iter_mut()
                .find(|n| n.id == network_id)
                .expect("the network just added");
            n.account_scoped = true;
            if spec.layout == NetworkLayout::SharedByPermission {
                n.permitted.extend(grantee);
            }
        }
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
