//! The private server against the world: the rows a mirror writes, the columns of each
//! schema, the reader's grants, a killed and restarted server.

use std::time::{Duration, Instant};

use super::sql::datetime;
use super::*;
use crate::time::SimTime;
use crate::world::{ClusterSpec, SimVm, World};

const NOW: i64 = 1_750_000_000;

/// `'2025-06-15 15:06:40'` for [`NOW`], as the batch client prints a `DATETIME`.
fn printed(t: SimTime) -> String {
    let mut s = String::new();
    datetime(&mut s, t);
    s.trim_matches('\'').to_string()
}

fn columns(db: &PrivateMariaDb, table: &str) -> String {
    db.sql(&format!(
        "SELECT GROUP_CONCAT(COLUMN_NAME ORDER BY ORDINAL_POSITION) \
         FROM information_schema.COLUMNS \
         WHERE TABLE_SCHEMA = 'cloud' AND TABLE_NAME = '{table}'"
    ))
    .trim_end()
    .to_string()
}

/// Two clusters (one with an etcd node, one destroyed), an expunged worker, a map row of
/// a VM that never existed, a duplicated row and a VM whose name needs escaping.
pub(super) struct Fixture {
    pub(super) world: World,
    pub(super) prod: String,
    pub(super) expunged: String,
    pub(super) ghost: String,
    pub(super) tenant_vm: String,
}

pub(super) fn fixture() -> Fixture {
    let mut w = World::new(SimTime::from_unix(NOW));
    let owner = w.admin();
    let prod = w.add_cluster_with(ClusterSpec::new("prod", owner.clone(), 2, 2, 1));
    let old = w.add_cluster("old", owner.clone(), 1, 1, 0);
    w.destroy_cluster(&old);
    let map = w.cluster(&prod).unwrap().map.clone();
    let expunged = map[3].clone();
    w.advance(Duration::from_secs(3600));
    w.expunge_vm(&expunged);
    let ghost = w.fresh_id();
    w.add_map_row(&prod, &ghost);
    w.add_map_row(&prod, &map[1]);
    // CloudStack's columns are utf8mb3: three bytes a character at most.
    let tenant_vm = w.add_vm("o'brien\\ \"x\" ; -- ü€\n", owner, None);
    Fixture {
        world: w,
        prod,
        expunged,
        ghost,
        tenant_vm,
    }
}

#[test]
fn mirrors_the_world_and_lets_the_reader_select_exactly_three_tables() {
    let started = Instant::now();
    let db = PrivateMariaDb::start(Schema::Newest);
    eprintln!("started in {:?}", started.elapsed());
    let mut f = fixture();
    let w = &f.world;
    db.mirror(w);

    let counts = db.sql(
        "SELECT (SELECT COUNT(*) FROM vm_instance), (SELECT COUNT(*) FROM kubernetes_cluster), \
         (SELECT COUNT(*) FROM kubernetes_cluster_vm_map)",
    );
    // prod: etcd, 2 control, 2 workers; old (its map rows stay): control and worker; one
    // free VM. prod's map has two rows more.
    assert_eq!(counts, "8\t2\t9\n");

    assert_clusters_and_map(&db, &f);
    assert_vms(&db, &f);
    assert_reader_grants(&db);
    assert_a_mirror_rewrites_what_changed(&db, &mut f);
    assert_rows_may_give_only_some_columns(&db);
    assert_the_read_columns_are_as_deployed(&db);
}

/// The clusters' rows, and the map rows of `prod` with their flags.
fn assert_clusters_and_map(db: &PrivateMariaDb, f: &Fixture) {
    let w = &f.world;
    let prod = w.cluster(&f.prod).unwrap();
    let old = &w.clusters[1];
    assert_eq!(
        db.sql(
            "SELECT id, uuid, name, state, control_node_count, node_count, etcd_node_count, \
             cluster_type, zone_id, created, removed FROM kubernetes_cluster ORDER BY id"
        ),
        format!(
            "1\t{}\tprod\tRunning\t2\t2\t1\tCloudManaged\t1\t{}\tNULL\n\
             2\t{}\told\tDestroyed\t1\t1\tNULL\tCloudManaged\t1\t{}\t{}\n",
            prod.id,
            printed(prod.created),
            old.id,
            printed(old.created),
            printed(old.created)
        )
    );

    // Map rows in map order: etcd, control, control, worker (expunged), worker, then the
    // row of a VM that never existed and a duplicate of the first control VM.
    let ids: Vec<u64> = prod.map.iter().map(|v| vm_db_id(w, v)).collect();
    assert_eq!(ids[..5], [1, 2, 3, 4, 5]);
    let ghost_id = vm_db_id(w, &f.ghost);
    assert!(ghost_id >= 1_000_000_000);
    assert_eq!(
        db.sql(
            "SELECT id, vm_id, control_node, etcd_node, external_node \
             FROM kubernetes_cluster_vm_map WHERE cluster_id = 1 ORDER BY id"
        ),
        format!(
            "1\t1\t0\t1\t0\n2\t2\t1\t0\t0\n3\t3\t1\t0\t0\n4\t4\t0\t0\t0\n5\t5\t0\t0\t0\n\
             6\t{ghost_id}\t0\t0\t0\n7\t2\t0\t0\t0\n"
        )
    );
}

/// The VMs' rows: an expunged one, and tenant text byte for byte.
fn assert_vms(db: &PrivateMariaDb, f: &Fixture) {
    let w = &f.world;
    let expunged = w.vm(&f.expunged).unwrap();
    assert_eq!(
        db.sql(&format!(
            "SELECT id, name, instance_name, state, type, vm_type, created, update_time, \
             removed FROM vm_instance WHERE uuid = '{}'",
            f.expunged
        )),
        format!(
            "4\t{}\t{}\tExpunging\tUser\tUser\t{}\t{}\t{}\n",
            expunged.name,
            expunged.instancename,
            printed(expunged.created),
            printed(w.now),
            printed(w.now)
        )
    );
    assert_eq!(
        db.sql("SELECT COUNT(*) FROM vm_instance WHERE removed IS NULL"),
        "7\n"
    );
    // Tenant text arrives byte for byte.
    let tenant = w.vm(&f.tenant_vm).unwrap();
    let hex: String = tenant.name.bytes().map(|b| format!("{b:02X}")).collect();
    assert_eq!(
        db.sql(&format!(
            "SELECT HEX(name) FROM vm_instance WHERE uuid = '{}'",
            f.tenant_vm
        )),
        format!("{hex}\n")
    );
}

fn assert_reader_grants(db: &PrivateMariaDb) {
    // The reader: SELECT on the three tables, nothing else; GET_LOCK needs no grant.
    db.sql("CREATE TABLE user (id bigint unsigned PRIMARY KEY, username varchar(255))");
    db.sql("INSERT INTO user VALUES (1, 'admin')");
    assert_eq!(db.sql("SELECT username FROM user"), "admin\n");
    for table in READABLE_TABLES {
        let rows = db
            .sql_as_reader(&format!("SELECT COUNT(*) FROM {table}"))
            .unwrap();
        assert!(
            rows.trim_end().parse::<u64>().unwrap() > 0,
            "{table}: {rows}"
        );
    }
    let denied = db.sql_as_reader("SELECT * FROM user").unwrap_err();
    assert!(
        denied.contains(
            "SELECT command denied to user 'cksdrift'@'127.0.0.1' for table `cloud`.`user`"
        ),
        "{denied}"
    );
    let denied = db
        .sql_as_reader("UPDATE vm_instance SET state = 'Stopped'")
        .unwrap_err();
    assert!(denied.contains("UPDATE command denied"), "{denied}");
    let denied = db.sql_as_reader("SELECT * FROM mysql.user").unwrap_err();
    assert!(denied.contains("SELECT command denied"), "{denied}");
    let grants = db.sql_as_reader("SHOW GRANTS").unwrap();
    let mut grants: Vec<&str> = grants.lines().skip(1).collect();
    grants.sort_unstable();
    assert_eq!(
        grants,
        [
            "GRANT SELECT ON `cloud`.`kubernetes_cluster_vm_map` TO `cksdrift`@`127.0.0.1`",
            "GRANT SELECT ON `cloud`.`kubernetes_cluster` TO `cksdrift`@`127.0.0.1`",
            "GRANT SELECT ON `cloud`.`vm_instance` TO `cksdrift`@`127.0.0.1`",
        ]
    );
    assert_eq!(
        db.sql_as_reader("SELECT GET_LOCK('KubernetesCluster.GC.Lock', 0)"),
        Ok("1\n".to_string())
    );
    let refused = db.run_as_reader("wrong", "SELECT 1").unwrap_err();
    assert!(
        refused.contains("Access denied for user 'cksdrift'@'127.0.0.1'"),
        "{refused}"
    );
}

fn assert_a_mirror_rewrites_what_changed(db: &PrivateMariaDb, f: &mut Fixture) {
    // A mirror after changes writes the changed world; mirroring it again changes nothing.
    db.mirror(&f.world);
    let prod_id = f.prod.clone();
    f.world.remove_map_row(&prod_id, &f.ghost);
    f.world.set_cluster_state(&prod_id, "Alert");
    f.world.set_vm_state(&f.tenant_vm, "Stopped");
    db.mirror(&f.world);
    let mirrored = checksums(db);
    db.mirror(&f.world);
    assert_eq!(checksums(db), mirrored);
    assert_eq!(
        db.sql(
            "SELECT COUNT(*), GROUP_CONCAT(vm_id ORDER BY id) FROM kubernetes_cluster_vm_map \
             WHERE cluster_id = 1"
        ),
        "6\t1,2,3,4,5,2\n"
    );
    assert_eq!(
        db.sql("SELECT state FROM kubernetes_cluster WHERE id = 1"),
        "Alert\n"
    );
}

fn assert_rows_may_give_only_some_columns(db: &PrivateMariaDb) {
    // A test may insert rows giving only the columns that matter to it, and those the path
    // reads that CloudStack gives no default.
    db.sql(
        "INSERT INTO vm_instance (id, uuid, name, instance_name, state, type, created, \
         account_id) VALUES (100, 'hand-vm', 'hand', 'i-2-100-VM', 'Running', 'User', \
         '2025-06-15 15:06:40', 2);
         INSERT INTO kubernetes_cluster (uuid, name, state, account_id) \
         VALUES ('hand-c', 'hand', 'Running', 2);
         INSERT INTO kubernetes_cluster_vm_map (cluster_id, vm_id) \
         SELECT id, 100 FROM kubernetes_cluster WHERE uuid = 'hand-c'",
    );
    assert_eq!(
        db.sql(
            "SELECT c.control_node_count, c.cluster_type, c.removed, m.control_node, v.type \
             FROM kubernetes_cluster c JOIN kubernetes_cluster_vm_map m ON m.cluster_id = c.id \
             JOIN vm_instance v ON v.id = m.vm_id WHERE c.uuid = 'hand-c'"
        ),
        "0\tCloudManaged\tNULL\t0\tUser\n"
    );
}

/// What the path reads is declared as CloudStack declares it: utf8mb3 text, its `NOT NULL`s
/// without defaults, its keys under its names.
fn assert_the_read_columns_are_as_deployed(db: &PrivateMariaDb) {
    assert_eq!(
        db.sql(
            "SELECT TABLE_NAME, TABLE_COLLATION FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = 'cloud' ORDER BY TABLE_NAME"
        ),
        "kubernetes_cluster\tutf8mb3_general_ci\n\
         kubernetes_cluster_vm_map\tutf8mb3_general_ci\n\
         user\tutf8mb3_general_ci\n\
         vm_instance\tutf8mb3_general_ci\n"
    );
    assert_eq!(
        db.sql(
            "SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, IFNULL(COLUMN_DEFAULT, '-'), \
             IFNULL(COLLATION_NAME, '-') FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = 'cloud' AND TABLE_NAME = 'vm_instance' AND COLUMN_NAME IN \
             ('id', 'uuid', 'name', 'state', 'removed', 'type', 'created', 'update_time', \
             'account_id') ORDER BY ORDINAL_POSITION"
        ),
        "id\tbigint(20) unsigned\tNO\t-\t-\n\
         name\tvarchar(255)\tNO\t-\tutf8mb3_general_ci\n\
         uuid\tvarchar(40)\tYES\tNULL\tutf8mb3_general_ci\n\
         state\tvarchar(32)\tNO\t-\tutf8mb3_general_ci\n\
         update_time\tdatetime\tYES\tNULL\t-\n\
         created\tdatetime\tNO\t-\t-\n\
         removed\tdatetime\tYES\tNULL\t-\n\
         type\tvarchar(32)\tNO\t-\tutf8mb3_general_ci\n\
         account_id\tbigint(20) unsigned\tNO\t-\t-\n"
    );
    // The keys the path's queries can use, under CloudStack's names.
    assert_eq!(
        db.sql(
            "SELECT TABLE_NAME, INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS \
             WHERE TABLE_SCHEMA = 'cloud' AND COLUMN_NAME IN ('id', 'uuid', 'account_id', \
             'removed', 'cluster_id') ORDER BY TABLE_NAME, INDEX_NAME"
        ),
        "kubernetes_cluster\tPRIMARY\tid\n\
         kubernetes_cluster_vm_map\tfk_kubernetes_cluster_vm_map__cluster_id\tcluster_id\n\
         kubernetes_cluster_vm_map\tPRIMARY\tid\n\
         user\tPRIMARY\tid\n\
         vm_instance\tfk_vm_instance__account_id\taccount_id\n\
         vm_instance\tid\tid\n\
         vm_instance\ti_vm_instance__removed\tremoved\n\
         vm_instance\tPRIMARY\tid\n\
         vm_instance\tuc_vm_instance_uuid\tuuid\n"
    );
    // A row without what CloudStack gives no default is refused, as on CloudStack's server
    // (strict mode); so is a character of four bytes.
    let refused = db
        .run_root(
            Some(DATABASE),
            "INSERT INTO vm_instance (id, uuid, name, instance_name, state, type, account_id) \
             VALUES (101, 'no-created', 'x', 'i-2-101-VM', 'Running', 'User', 2)",
        )
        .unwrap_err();
    assert!(
        refused.contains("Field 'created' doesn't have a default value"),
        "{refused}"
    );
    let refused = db
        .run_root(
            Some(DATABASE),
            "INSERT INTO vm_instance (id, uuid, name, instance_name, state, type, created, \
             account_id) VALUES (102, 'rocket', 'r🚀', 'i-2-102-VM', 'Running', 'User', \
             NOW(), 2)",
        )
        .unwrap_err();
    assert!(refused.contains("Incorrect string value"), "{refused}");
}

#[test]
fn the_4_16_schema_has_none_of_the_later_columns() {
    let db = PrivateMariaDb::start(Schema::V4_16);
    assert_eq!(
        columns(&db, "kubernetes_cluster"),
        "id,uuid,name,description,zone_id,kubernetes_version_id,service_offering_id,\
         template_id,network_id,control_node_count,node_count,account_id,domain_id,state,\
         key_pair,cores,memory,node_root_disk_size,endpoint,created,removed,gc,\
         autoscaling_enabled,minsize,maxsize"
    );
    assert_eq!(
        columns(&db, "kubernetes_cluster_vm_map"),
        "id,cluster_id,vm_id,control_node"
    );
    let f = fixture();
    db.mirror(&f.world);
    assert_eq!(
        db.sql(
            "SELECT vm_id, control_node FROM kubernetes_cluster_vm_map \
             WHERE cluster_id = 1 ORDER BY id"
        ),
        format!(
            "1\t0\n2\t1\n3\t1\n4\t0\n5\t0\n{}\t0\n2\t0\n",
            vm_db_id(&f.world, &f.ghost)
        )
    );
    assert_eq!(
        db.sql("SELECT control_node_count, node_count FROM kubernetes_cluster ORDER BY id"),
        "2\t2\n1\t1\n"
    );
    // 4.16's kubernetes_version_id has no NULL; the harness's default stands in.
    assert_eq!(
        db.sql("SELECT kubernetes_version_id FROM kubernetes_cluster WHERE id = 1"),
        "1\n"
    );
}

#[test]
fn a_killed_server_refuses_connections_and_restarts_with_its_rows_on_its_port() {
    let mut db = PrivateMariaDb::start(Schema::Newest);
    let f = fixture();
    db.mirror(&f.world);
    let port = db.port();
    assert!(db.is_running());

    db.kill();
    assert!(!db.is_running());
    let refused = db
        .sql_as_reader("SELECT COUNT(*) FROM vm_instance")
        .unwrap_err();
    assert!(
        refused.contains("ERROR 2002 (HY000): Can't connect to server on '127.0.0.1'"),
        "{refused}"
    );
    // Killing a killed server changes nothing.
    db.kill();

    let restarted = Instant::now();
    db.restart();
    eprintln!("restarted in {:?}", restarted.elapsed());
    assert!(db.is_running());
    assert_eq!(db.port(), port);
    assert_eq!(
        db.sql_as_reader("SELECT COUNT(*) FROM vm_instance"),
        Ok("8\n".to_string())
    );
    assert_eq!(db.url(), format!("mysql://cksdrift@127.0.0.1:{port}/cloud"));
}

#[test]
fn a_galera_node_is_one_synced_node_of_its_cluster_and_restarts_as_one() {
    let mut db = PrivateMariaDb::start_galera(Schema::Newest);
    let f = fixture();
    db.mirror(&f.world);
    assert!(db.is_galera());
    let wsrep = "SHOW GLOBAL VARIABLES WHERE Variable_name IN \
                 ('wsrep_on', 'wsrep_node_name', 'wsrep_cluster_name')";
    let variables = format!(
        "wsrep_cluster_name\t{GALERA_CLUSTER}\nwsrep_node_name\t{GALERA_NODE}\nwsrep_on\tON\n"
    );
    assert_eq!(db.sql_as_reader(wsrep), Ok(variables.clone()));
    let status = "SHOW GLOBAL STATUS WHERE Variable_name IN \
                  ('wsrep_cluster_size', 'wsrep_cluster_status', 'wsrep_ready')";
    let synced = "wsrep_cluster_size\t1\nwsrep_cluster_status\tPrimary\nwsrep_ready\tON\n";
    assert_eq!(db.sql_as_reader(status).as_deref(), Ok(synced));

    let port = db.port();
    db.restart();
    assert_eq!(db.port(), port);
    assert_eq!(db.sql_as_reader(wsrep), Ok(variables));
    assert_eq!(db.sql_as_reader(status).as_deref(), Ok(synced));
    assert_eq!(
        db.sql_as_reader("SELECT COUNT(*) FROM vm_instance"),
        Ok("8\n".to_string())
    );
}

/// A lone server has no cluster.
#[test]
fn a_lone_server_is_no_galera_node() {
    let db = PrivateMariaDb::start(Schema::V4_16);
    assert!(!db.is_galera());
    assert_eq!(
        db.sql_as_reader("SHOW GLOBAL VARIABLES LIKE 'wsrep_on'"),
        Ok("wsrep_on\tOFF\n".to_string())
    );
}

/// A world of 10 000 clusters (5 VMs each) and 100 000 other VMs, built by copying
/// rows rather than through the builders, whose lookups are linear.
fn large_world() -> World {
    let mut w = World::new(SimTime::from_unix(NOW));
    let owner = w.admin();
    let template_cluster = w.add_cluster_with(ClusterSpec::new("k8s", owner.clone(), 1, 3, 1));
    let template_vm = w.add_vm("app", owner, None);
    let cluster = w.cluster(&template_cluster).unwrap().clone();
    let node: SimVm = w.vm(&cluster.map[1]).unwrap().clone();
    let free: SimVm = w.vm(&template_vm).unwrap().clone();
    w.clusters.clear();
    w.vms.clear();
    for i in 0..10_000 {
        let mut c = cluster.clone();
        c.id = w.fresh_id();
        c.name = format!("k8s{i:05}");
        c.map.clear();
        for n in 0..5 {
            let mut vm = node.clone();
            vm.id = w.fresh_id();
            vm.name = format!("k8s{i:05}-node-{n}");
            vm.instancename = format!("i-2-{}-VM", w.vms.len() + 1);
            c.map.push(vm.id.clone());
            w.vms.push(vm);
        }
        w.clusters.push(c);
    }
    for i in 0..100_000 {
        let mut vm = free.clone();
        vm.id = w.fresh_id();
        vm.name = format!("app{i:06}");
        vm.instancename = format!("i-2-{}-VM", w.vms.len() + 1);
        w.vms.push(vm);
    }
    w
}

/// Seconds on the server: `cargo test --release -p cks-drift-sim mariadb -- --ignored
/// --nocapture` prints them.
#[test]
#[ignore = "mirrors 150 000 VMs; a benchmark more than a test"]
fn mirrors_ten_thousand_clusters_in_seconds() {
    let mut world = large_world();
    let db = PrivateMariaDb::start(Schema::Newest);
    let first = Instant::now();
    db.mirror(&world);
    eprintln!("first mirror: {:?}", first.elapsed());

    // A step of a benchmark: a hundred VMs stop, a cluster goes, a map row goes.
    for i in (0..150_000).step_by(1_500) {
        let vm = world.vms[i].id.clone();
        world.set_vm_state(&vm, "Stopped");
    }
    let gone = world.clusters[5_000].id.clone();
    world.destroy_cluster(&gone);
    let row = world.clusters[7_000].map[2].clone();
    let owner = world.clusters[7_000].id.clone();
    world.remove_map_row(&owner, &row);
    let step = Instant::now();
    db.mirror(&world);
    eprintln!("mirror of a step: {:?}", step.elapsed());
    let mirrored = checksums(&db);
    db.mirror(&world);
    assert_eq!(checksums(&db), mirrored);
    assert_eq!(
        db.sql(
            "SELECT (SELECT COUNT(*) FROM vm_instance), (SELECT COUNT(*) FROM kubernetes_cluster), \
             (SELECT COUNT(*) FROM kubernetes_cluster_vm_map), \
             (SELECT COUNT(*) FROM vm_instance WHERE state = 'Stopped')"
        ),
        "150000\t10000\t49999\t100\n"
    );
}

/// `CHECKSUM TABLE` of the three tables: equal when their rows are.
fn checksums(db: &PrivateMariaDb) -> String {
    let out = db.run_root(
        Some(DATABASE),
        "CHECKSUM TABLE kubernetes_cluster, kubernetes_cluster_vm_map, vm_instance",
    );
    out.unwrap()
}
