//! The schema: the database, the three tables as the chosen release has them, and the
//! read-only account granted `SELECT` on them alone.

use std::fmt::Write as _;

use super::sql::quoted;
use super::{DATABASE, READABLE_TABLES, READER, Schema};

/// The database, the tables and the read-only account.
pub(super) fn setup_sql(schema: Schema, password: &str) -> String {
    let mut sql = String::new();
    // The root accounts `--auth-root-authentication-method=normal` creates for TCP have no
    // password; only the socket one is needed.
    sql.push_str("DELETE FROM mysql.global_priv WHERE User = 'root' AND Host <> 'localhost';\n");
    sql.push_str("FLUSH PRIVILEGES;\n");
    let _ = writeln!(
        sql,
        "CREATE DATABASE `{DATABASE}` DEFAULT CHARACTER SET utf8mb3 \
         COLLATE utf8mb3_general_ci;\nUSE `{DATABASE}`;"
    );
    sql.push_str(&table_ddl(schema));
    for host in ["127.0.0.1", "localhost"] {
        let account = format!("'{READER}'@'{host}'");
        let _ = writeln!(
            sql,
            "CREATE USER {account} IDENTIFIED BY {};",
            quoted(password)
        );
        for table in READABLE_TABLES {
            let _ = writeln!(sql, "GRANT SELECT ON `{DATABASE}`.`{table}` TO {account};");
        }
    }
    sql
}

/// CloudStack's tables are `utf8` (`ENGINE=InnoDB DEFAULT CHARSET=utf8` in
/// `setup/db/create-schema.sql` and every `schema-*.sql`), which MariaDB and MySQL read as
/// `utf8mb3` with its default collation `utf8mb3_general_ci`: what the harness creates too,
/// so that text the path reads is stored (and refused) as deployed.
const TABLE_OPTIONS: &str = "ENGINE=InnoDB DEFAULT CHARSET=utf8mb3 COLLATE=utf8mb3_general_ci";

/// `CREATE TABLE` of the three tables for `schema`.
///
/// Every column the path reads (`src/database/schema.rs` `REQUIRED`) has CloudStack's type,
/// `NULL`/`NOT NULL` and default, and every table CloudStack's keys under CloudStack's names.
/// Foreign keys to tables the harness does not create are left out, but the index InnoDB
/// makes for each (named after the key) is kept. Where CloudStack has `NOT NULL` without a
/// default on a column the path does not read (zone, offering, owner domain...), the
/// harness adds a default, so that a test can insert a row giving only the columns that
/// matter to it.
fn table_ddl(schema: Schema) -> String {
    let newest = schema == Schema::Newest;
    let mut sql = String::new();
    vm_instance_ddl(&mut sql);
    kubernetes_cluster_ddl(&mut sql, newest);
    vm_map_ddl(&mut sql, newest);
    sql
}

fn vm_instance_ddl(sql: &mut String) {
    // setup/db/create-schema.sql (the table as created since 3.0, uuid and
    // uc_vm_instance_uuid included), then display_vm and dynamically_scalable (4.2), power_*
    // (4.3), user_id (4.12) and backup_* (schema-41300to41400.sql, 4.14). Columns of later
    // releases are not read and not modelled, so both schemas share this table.
    //
    // Read by the path, as create-schema.sql has them: id, uuid, name, state, update_time,
    // created, removed, type, account_id (no defaults: a row must give type, created and
    // account_id). Keys: create-schema.sql's i_vm_instance__* and uc_vm_instance_uuid, and
    // the indexes InnoDB makes for its foreign keys fk_vm_instance__host_id, __last_host_id,
    // __account_id and __service_offering_id (create-schema declares no other index on those
    // columns, so the account index is fk_vm_instance__account_id; template_id's key uses
    // the declared i_vm_instance__template_id); i_vm_instance__instance_name is added by the
    // step `addIndexForVMInstance` of CloudStack's Java upgrades.
    let _ = write!(
        sql,
        "CREATE TABLE `vm_instance` (
  `id` bigint unsigned UNIQUE NOT NULL,
  `name` varchar(255) NOT NULL,
  `uuid` varchar(40),
  `instance_name` varchar(255) NOT NULL COMMENT 'name of the vm instance running on the hosts',
  `state` varchar(32) NOT NULL,
  `vm_template_id` bigint unsigned,
  `guest_os_id` bigint unsigned NOT NULL DEFAULT 1,
  `private_mac_address` varchar(17),
  `private_ip_address` char(40),
  `pod_id` bigint unsigned,
  `data_center_id` bigint unsigned NOT NULL DEFAULT 1 COMMENT 'Data Center the instance belongs to',
  `host_id` bigint unsigned,
  `last_host_id` bigint unsigned,
  `proxy_id` bigint unsigned NULL,
  `proxy_assign_time` DATETIME NULL,
  `vnc_password` varchar(255) NOT NULL DEFAULT '' COMMENT 'vnc password',
  `ha_enabled` tinyint(1) NOT NULL DEFAULT 0,
  `limit_cpu_use` tinyint(1) unsigned NOT NULL DEFAULT 0,
  `update_count` bigint unsigned NOT NULL DEFAULT 0,
  `update_time` datetime COMMENT 'date the destroy was requested',
  `created` datetime NOT NULL COMMENT 'date created',
  `removed` datetime COMMENT 'date removed if not null',
  `type` varchar(32) NOT NULL COMMENT 'type of vm it is',
  `vm_type` varchar(32) NOT NULL DEFAULT 'User' COMMENT 'vm type',
  `account_id` bigint unsigned NOT NULL COMMENT 'user id of owner',
  `domain_id` bigint unsigned NOT NULL DEFAULT 1,
  `service_offering_id` bigint unsigned NOT NULL DEFAULT 1 COMMENT 'service offering id',
  `reservation_id` char(40),
  `hypervisor_type` char(32),
  `display_vm` tinyint(1) NOT NULL DEFAULT 1,
  `dynamically_scalable` tinyint(1) unsigned NOT NULL DEFAULT 0,
  `power_state` varchar(74) DEFAULT 'PowerUnknown',
  `power_state_update_time` datetime,
  `power_state_update_count` int DEFAULT 0,
  `power_host` bigint unsigned,
  `user_id` bigint unsigned NOT NULL DEFAULT 1 COMMENT 'user id of VM deployer',
  `backup_offering_id` bigint unsigned DEFAULT NULL,
  `backup_external_id` varchar(255) DEFAULT NULL,
  `backup_volumes` text DEFAULT NULL,
  PRIMARY KEY (`id`),
  INDEX `i_vm_instance__removed` (`removed`),
  INDEX `i_vm_instance__type` (`type`),
  INDEX `i_vm_instance__pod_id` (`pod_id`),
  INDEX `i_vm_instance__update_time` (`update_time`),
  INDEX `i_vm_instance__update_count` (`update_count`),
  INDEX `i_vm_instance__state` (`state`),
  INDEX `i_vm_instance__data_center_id` (`data_center_id`),
  INDEX `fk_vm_instance__host_id` (`host_id`),
  INDEX `fk_vm_instance__last_host_id` (`last_host_id`),
  INDEX `i_vm_instance__template_id` (`vm_template_id`),
  INDEX `fk_vm_instance__account_id` (`account_id`),
  INDEX `fk_vm_instance__service_offering_id` (`service_offering_id`),
  CONSTRAINT `uc_vm_instance_uuid` UNIQUE (`uuid`),
  INDEX `i_vm_instance__instance_name` (`instance_name`)
) {TABLE_OPTIONS};
"
    );
}

fn kubernetes_cluster_ddl(sql: &mut String, newest: bool) {
    // schema-41300to41400.sql (4.14: "Schema upgrade from 4.13.0.0 to 4.14.0.0") with
    // schema-41520to41600.sql's rename of master_node_count to control_node_count and its
    // autoscaling columns (4.16); 4.17+ below. Read by the path: id, uuid, removed and
    // account_id, as 4.14 has them (account_id NOT NULL without a default: a row must give
    // it). The fk_cluster__* indexes are those InnoDB makes for its foreign keys.
    let version_null = if newest { "NULL" } else { "NOT NULL DEFAULT 1" };
    let _ = write!(
        sql,
        "CREATE TABLE `kubernetes_cluster` (
  `id` bigint unsigned NOT NULL auto_increment,
  `uuid` varchar(40) DEFAULT NULL,
  `name` varchar(255) NOT NULL,
  `description` varchar(4096),
  `zone_id` bigint unsigned NOT NULL DEFAULT 1,
  `kubernetes_version_id` bigint unsigned {version_null},
  `service_offering_id` bigint unsigned,
  `template_id` bigint unsigned,
  `network_id` bigint unsigned,
  `control_node_count` bigint NOT NULL default '0',
  `node_count` bigint NOT NULL default '0',
  `account_id` bigint unsigned NOT NULL COMMENT 'the ID of owner account',
  `domain_id` bigint unsigned NOT NULL DEFAULT 1,
  `state` char(32) NOT NULL,
  `key_pair` varchar(40),
  `cores` bigint unsigned NOT NULL DEFAULT 2,
  `memory` bigint unsigned NOT NULL DEFAULT 2048,
  `node_root_disk_size` bigint(20) unsigned DEFAULT 0,
  `endpoint` varchar(255),
  `created` datetime NOT NULL DEFAULT CURRENT_TIMESTAMP,
  `removed` datetime COMMENT 'date removed or null, if still present',
  `gc` tinyint unsigned NOT NULL DEFAULT 1,
  `autoscaling_enabled` tinyint(1) unsigned NOT NULL DEFAULT 0,
  `minsize` bigint,
  `maxsize` bigint,
"
    );
    if newest {
        sql.push_str(
            "  `security_group_id` bigint unsigned DEFAULT NULL,
  `cluster_type` varchar(64) DEFAULT 'CloudManaged',
  `control_node_service_offering_id` bigint unsigned,
  `worker_node_service_offering_id` bigint unsigned,
  `etcd_node_service_offering_id` bigint unsigned,
  `etcd_node_count` bigint unsigned,
  `control_node_template_id` bigint unsigned,
  `worker_node_template_id` bigint unsigned,
  `etcd_node_template_id` bigint unsigned,
  `cni_config_id` bigint unsigned,
  `cni_config_details` varchar(4096),
  `csi_enabled` tinyint(1) unsigned NOT NULL DEFAULT 0,
",
        );
    }
    let _ = write!(
        sql,
        "  PRIMARY KEY (`id`),
  INDEX `fk_cluster__zone_id` (`zone_id`),
  INDEX `fk_cluster__kubernetes_version_id` (`kubernetes_version_id`),
  INDEX `fk_cluster__service_offering_id` (`service_offering_id`),
  INDEX `fk_cluster__template_id` (`template_id`),
  INDEX `fk_cluster__network_id` (`network_id`)
) {TABLE_OPTIONS};
"
    );
}

fn vm_map_ddl(sql: &mut String, newest: bool) {
    // schema-41300to41400.sql (4.14): id, cluster_id and vm_id, all read by the path, and
    // the one foreign key, on cluster_id; control_node 4.16; the rest 4.21. No foreign key on
    // vm_id: rows of VMs that never existed are possible and the harness keeps them.
    sql.push_str(
        "CREATE TABLE `kubernetes_cluster_vm_map` (
  `id` bigint unsigned NOT NULL auto_increment,
  `cluster_id` bigint unsigned NOT NULL COMMENT 'the ID of the Kubernetes cluster',
  `vm_id` bigint unsigned NOT NULL COMMENT 'the ID of the VM',
  `control_node` tinyint(1) unsigned NOT NULL DEFAULT 0,
",
    );
    if newest {
        sql.push_str(
            "  `etcd_node` tinyint(1) unsigned NOT NULL DEFAULT 0,
  `external_node` tinyint(1) unsigned NOT NULL DEFAULT 0,
  `manual_upgrade` tinyint(1) unsigned NOT NULL DEFAULT 0,
  `kubernetes_node_version` varchar(40),
",
        );
    }
    let _ = write!(
        sql,
        "  PRIMARY KEY (`id`),
  CONSTRAINT `fk_kubernetes_cluster_vm_map__cluster_id` FOREIGN KEY `fk_kubernetes_cluster_vm_map__cluster_id` (`cluster_id`) REFERENCES `kubernetes_cluster` (`id`) ON DELETE CASCADE
) {TABLE_OPTIONS};
"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_schema_has_the_4_19_to_4_22_columns() {
        // Checked on the DDL text: a server start per schema is spent elsewhere.
        let ddl = table_ddl(Schema::Newest);
        for column in [
            "`cluster_type` varchar(64) DEFAULT 'CloudManaged'",
            "`etcd_node_count` bigint unsigned,",
            "`csi_enabled` tinyint(1) unsigned NOT NULL DEFAULT 0",
            "`etcd_node` tinyint(1) unsigned NOT NULL DEFAULT 0",
            "`external_node` tinyint(1) unsigned NOT NULL DEFAULT 0",
            "`kubernetes_version_id` bigint unsigned NULL",
        ] {
            assert!(ddl.contains(column), "{column}");
            assert!(!table_ddl(Schema::V4_16).contains(column), "{column}");
        }
    }
}
