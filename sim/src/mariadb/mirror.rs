//! The mirror of a world into the three tables: the numeric ids CloudStack's sequences would
//! give, the rows of VMs, clusters and map, and the buffer pool a large world needs.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::BUFFER_POOL;
use super::Schema;
use super::sql::{datetime, quote, rows};
use crate::world::{SimCluster, SimOwner, World};

/// Where the synthetic ids of VMs that never existed start (see [`vm_db_id`]).
const SYNTHETIC_VM_IDS: u64 = 1_000_000_000;

/// The numeric id [`PrivateMariaDb::mirror`](super::PrivateMariaDb::mirror) gives a VM uuid: its
/// position in `world.vms` plus one, or for a uuid no VM has (a map row of a VM that never
/// existed) a stable id at or above 1 000 000 000: that plus the uuid's 64-bit FNV-1a hash
/// modulo 1 000 000 000.
pub fn vm_db_id(world: &World, uuid: &str) -> u64 {
    match world.vms.iter().position(|vm| vm.id == uuid) {
        Some(i) => i as u64 + 1,
        None => synthetic_vm_id(uuid),
    }
}

fn synthetic_vm_id(uuid: &str) -> u64 {
    SYNTHETIC_VM_IDS + fnv1a64(uuid.as_bytes()) % SYNTHETIC_VM_IDS
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// The statements [`PrivateMariaDb::mirror`](super::PrivateMariaDb::mirror) runs: in one
/// transaction, every row deleted and the world's inserted (map rows go first and come back last,
/// after the clusters and VMs they name).
pub(super) fn mirror_sql(world: &World, schema: Schema) -> String {
    let newest = schema == Schema::Newest;
    let ids = WorldIds::new(world);
    let vms = vm_inserts(world, &ids);
    let clusters = cluster_inserts(world, &ids, newest);
    let map_rows: Vec<(usize, MapRow)> = world
        .clusters
        .iter()
        .enumerate()
        .flat_map(|(i, c)| map_rows(c, &ids).map(move |r| (i + 1, r)))
        .collect();
    let map = map_inserts(&map_rows, newest);

    let mut sql = String::with_capacity(vms.len() + clusters.len() + map.len() + 4096);
    // A small buffer pool makes a large mirror crawl (every index page is read back from
    // disk); it grows with the world, and only for large ones.
    if let Some(pool) = buffer_pool_for(world.vms.len(), world.clusters.len(), map_rows.len()) {
        let _ = writeln!(
            sql,
            "SET GLOBAL innodb_buffer_pool_size = GREATEST(@@GLOBAL.innodb_buffer_pool_size, {pool});"
        );
    }
    sql.push_str(
        "START TRANSACTION;\nDELETE FROM `kubernetes_cluster_vm_map`;\n\
         DELETE FROM `kubernetes_cluster`;\nDELETE FROM `vm_instance`;\n",
    );
    sql.push_str(&clusters);
    sql.push_str(&vms);
    sql.push_str(&map);
    sql.push_str("COMMIT;\n");
    sql
}

/// The `vm_instance` rows.
fn vm_inserts(world: &World, ids: &WorldIds<'_>) -> String {
    rows(
        world.vms.len(),
        "INSERT INTO `vm_instance` (`id`, `uuid`, `name`, `instance_name`, `state`, `type`, \
         `vm_type`, `hypervisor_type`, `data_center_id`, `account_id`, `domain_id`, `created`, \
         `update_time`, `removed`) VALUES\n",
        |row, i| {
            let vm = &world.vms[i];
            let _ = write!(row, "({},", i + 1);
            quote(row, &vm.id);
            row.push(',');
            quote(row, &vm.name);
            row.push(',');
            quote(row, &vm.instancename);
            row.push(',');
            quote(row, &vm.state);
            let _ = write!(
                row,
                ",'User','User','KVM',{},{},{},",
                ids.zone(&vm.zone_id),
                ids.account(&vm.owner),
                ids.domain(vm.owner.domain_id())
            );
            datetime(row, vm.created);
            row.push(',');
            datetime(row, vm.lastupdated);
            row.push(',');
            // The sim keeps no removal time; expunging stamps `lastupdated`.
            if vm.removed {
                datetime(row, vm.lastupdated);
            } else {
                row.push_str("NULL");
            }
            row.push(')');
        },
    )
}

/// The `kubernetes_cluster` rows, with the columns of `schema`.
fn cluster_inserts(world: &World, ids: &WorldIds<'_>, newest: bool) -> String {
    let mut columns = vec![
        "uuid",
        "name",
        "zone_id",
        "kubernetes_version_id",
        "service_offering_id",
        "network_id",
        "control_node_count",
        "node_count",
        "account_id",
        "domain_id",
        "state",
        "cores",
        "memory",
        "endpoint",
        "created",
        "removed",
    ];
    if newest {
        columns.extend(["cluster_type", "etcd_node_count"]);
    }
    let head = format!(
        "INSERT INTO `kubernetes_cluster` (`id`, {}) VALUES\n",
        columns
            .iter()
            .map(|c| format!("`{c}`"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    rows(world.clusters.len(), &head, |row, i| {
        let c = &world.clusters[i];
        let _ = write!(row, "({},", i + 1);
        quote(row, &c.id);
        row.push(',');
        quote(row, &c.name);
        let _ = write!(
            row,
            ",{},1,1,{},{},{},{},{},",
            ids.zone(&c.zone_id),
            ids.network(&c.network_id),
            c.control_nodes,
            c.size,
            ids.account(&c.owner),
            ids.domain(c.owner.domain_id())
        );
        quote(row, &c.state);
        let nodes = u64::from(c.control_nodes) + u64::from(c.size);
        let _ = write!(row, ",{},{},", 2 * nodes, 2048 * nodes);
        quote(row, &c.endpoint);
        row.push(',');
        datetime(row, c.created);
        row.push(',');
        // Nor a cluster's; its creation time stands in, which keeps the row as it was
        // from one mirror to the next.
        if c.removed {
            datetime(row, c.created);
        } else {
            row.push_str("NULL");
        }
        if newest {
            row.push(',');
            match &c.clustertype {
                Some(t) => quote(row, t),
                None => row.push_str("NULL"),
            }
            match c.etcd_nodes {
                Some(n) => {
                    let _ = write!(row, ",{n}");
                }
                None => row.push_str(",NULL"),
            }
        }
        row.push(')');
    })
}

/// The `kubernetes_cluster_vm_map` rows, numbered from 1 in map order, cluster by cluster.
fn map_inserts(map_rows: &[(usize, MapRow)], newest: bool) -> String {
    let mut head = String::from(
        "INSERT INTO `kubernetes_cluster_vm_map` (`id`, `cluster_id`, `vm_id`, `control_node`",
    );
    if newest {
        head.push_str(", `etcd_node`, `external_node`");
    }
    head.push_str(") VALUES\n");
    rows(map_rows.len(), &head, |row, i| {
        let (cluster, r) = &map_rows[i];
        let _ = write!(
            row,
            "({},{cluster},{},{}",
            i + 1,
            r.vm_id,
            u8::from(r.control)
        );
        if newest {
            let _ = write!(row, ",{},{}", u8::from(r.etcd), u8::from(r.external));
        }
        row.push(')');
    })
}

/// The most a mirror grows it to.
const BUFFER_POOL_MAX: u64 = 256 << 20;

/// A buffer pool that holds the three tables with their indexes beside the server's own
/// pages, rounded up to a MiB, or `None` while they are small enough for the one the server
/// starts with. About 640 bytes a VM row (eight indexes), 400 a cluster row and 100 a map
/// row, measured on 150 000 VMs.
fn buffer_pool_for(vms: usize, clusters: usize, map_rows: usize) -> Option<u64> {
    let tables = 640 * vms as u64 + 400 * clusters as u64 + 100 * map_rows as u64;
    (tables > BUFFER_POOL / 4).then(|| {
        (BUFFER_POOL + tables)
            .div_ceil(1 << 20)
            .saturating_mul(1 << 20)
            .min(BUFFER_POOL_MAX)
    })
}

/// One `kubernetes_cluster_vm_map` row as the mirror writes it.
struct MapRow {
    vm_id: u64,
    control: bool,
    etcd: bool,
    external: bool,
}

/// A cluster's map rows. CKS flags as control the control VMs only (`addKubernetesClusterVm`
/// with `isControlNode`), and in the world's map order etcd VMs come first, so the flag goes
/// to the first `control_nodes` rows that are not etcd nodes.
fn map_rows<'a>(c: &'a SimCluster, ids: &'a WorldIds<'a>) -> impl Iterator<Item = MapRow> + 'a {
    let mut controls_left = c.control_nodes;
    c.map.iter().map(move |uuid| {
        let index = ids.vm_index.get(uuid.as_str()).copied();
        let vm = index.map(|i| &ids.world.vms[i]);
        let etcd = vm.and_then(|v| v.isetcdnode).unwrap_or(false);
        let external = vm.and_then(|v| v.isexternalnode).unwrap_or(false);
        let control = !etcd && controls_left > 0;
        if control {
            controls_left -= 1;
        }
        MapRow {
            vm_id: index.map_or_else(|| synthetic_vm_id(uuid), |i| i as u64 + 1),
            control,
            etcd,
            external,
        }
    })
}

/// Numeric ids of the world's things: position in their vector plus one, as CloudStack's
/// sequences would number them in creation order. Owner accounts of projects come after the
/// plain accounts. Unknown uuids get 0.
struct WorldIds<'a> {
    world: &'a World,
    vm_index: HashMap<&'a str, usize>,
    zones: HashMap<&'a str, u64>,
    domains: HashMap<&'a str, u64>,
    networks: HashMap<&'a str, u64>,
    accounts: HashMap<(&'a str, &'a str), u64>,
    projects: HashMap<&'a str, u64>,
}

impl<'a> WorldIds<'a> {
    fn new(world: &'a World) -> Self {
        fn positions<'a, T>(
            items: &'a [T],
            id: impl Fn(&'a T) -> &'a str,
        ) -> HashMap<&'a str, u64> {
            let mut map = HashMap::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                map.entry(id(item)).or_insert(i as u64 + 1);
            }
            map
        }
        let mut vm_index = HashMap::with_capacity(world.vms.len());
        for (i, vm) in world.vms.iter().enumerate() {
            vm_index.entry(vm.id.as_str()).or_insert(i);
        }
        let mut accounts = HashMap::new();
        for (i, a) in world.accounts.iter().enumerate() {
            accounts
                .entry((a.name.as_str(), a.domain_id.as_str()))
                .or_insert(i as u64 + 1);
        }
        let first_project_account = world.accounts.len() as u64;
        let projects = positions(&world.projects, |p| p.id.as_str())
            .into_iter()
            .map(|(id, n)| (id, first_project_account + n))
            .collect();
        WorldIds {
            world,
            vm_index,
            zones: positions(&world.zones, |z| z.id.as_str()),
            domains: positions(&world.domains, |d| d.id.as_str()),
            networks: positions(&world.networks, |n| n.id.as_str()),
            accounts,
            projects,
        }
    }

    fn zone(&self, uuid: &str) -> u64 {
        self.zones.get(uuid).copied().unwrap_or(0)
    }

    fn domain(&self, uuid: &str) -> u64 {
        self.domains.get(uuid).copied().unwrap_or(0)
    }

    fn network(&self, uuid: &str) -> u64 {
        self.networks.get(uuid).copied().unwrap_or(0)
    }

    fn account(&self, owner: &SimOwner) -> u64 {
        match owner {
            SimOwner::Account { account, domain_id } => self
                .accounts
                .get(&(account.as_str(), domain_id.as_str()))
                .copied(),
            SimOwner::Project { project_id, .. } => self.projects.get(project_id.as_str()).copied(),
        }
        .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mariadb::tests::fixture;

    #[test]
    fn fnv1a_matches_the_published_vectors_and_synthetic_ids_stay_clear_of_real_ones() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
        let id = synthetic_vm_id("no-such-vm");
        assert!(
            (SYNTHETIC_VM_IDS..2 * SYNTHETIC_VM_IDS).contains(&id),
            "{id}"
        );
        assert_eq!(
            id,
            SYNTHETIC_VM_IDS + fnv1a64(b"no-such-vm") % SYNTHETIC_VM_IDS
        );

        let f = fixture();
        assert_eq!(vm_db_id(&f.world, &f.world.vms[0].id), 1);
        assert_eq!(vm_db_id(&f.world, &f.tenant_vm), f.world.vms.len() as u64);
        assert_eq!(vm_db_id(&f.world, &f.ghost), synthetic_vm_id(&f.ghost));
    }

    #[test]
    fn the_buffer_pool_grows_for_large_worlds_only() {
        assert_eq!(buffer_pool_for(8, 2, 9), None);
        assert_eq!(buffer_pool_for(5_000, 500, 2_000), None);
        assert_eq!(buffer_pool_for(150_000, 10_000, 50_000), Some(117 << 20));
        assert_eq!(buffer_pool_for(10_000_000, 0, 0), Some(BUFFER_POOL_MAX));
    }

    #[test]
    fn a_mirror_rewrites_every_row_in_one_transaction() {
        let f = fixture();
        let sql = mirror_sql(&f.world, Schema::Newest);
        let statements: Vec<&str> = sql.lines().filter(|l| !l.starts_with('(')).collect();
        assert_eq!(
            statements,
            [
                "START TRANSACTION;",
                "DELETE FROM `kubernetes_cluster_vm_map`;",
                "DELETE FROM `kubernetes_cluster`;",
                "DELETE FROM `vm_instance`;",
                "INSERT INTO `kubernetes_cluster` (`id`, `uuid`, `name`, `zone_id`, \
                 `kubernetes_version_id`, `service_offering_id`, `network_id`, \
                 `control_node_count`, `node_count`, `account_id`, `domain_id`, `state`, `cores`, \
                 `memory`, `endpoint`, `created`, `removed`, `cluster_type`, `etcd_node_count`) \
                 VALUES",
                "INSERT INTO `vm_instance` (`id`, `uuid`, `name`, `instance_name`, `state`, \
                 `type`, `vm_type`, `hypervisor_type`, `data_center_id`, `account_id`, \
                 `domain_id`, `created`, `update_time`, `removed`) VALUES",
                "INSERT INTO `kubernetes_cluster_vm_map` (`id`, `cluster_id`, `vm_id`, \
                 `control_node`, `etcd_node`, `external_node`) VALUES",
                "COMMIT;",
            ]
        );
        // Every row: 2 clusters, 8 VMs, 9 map rows.
        assert_eq!(
            sql.lines().filter(|l| l.starts_with('(')).count(),
            2 + 8 + 9
        );
    }
}
