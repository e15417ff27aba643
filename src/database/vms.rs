//! The VMs a cycle needs, from `vm_instance` instead of `listVirtualMachines`: on a real
//! management server each page of that listing is a query of `user_vm_view` and its
//! rendering, the heaviest list call CloudStack has, every cycle and for every VM of the cloud.
//! Here the database hands over only the rows a cycle looks at:
//!
//! - the VMs of the accounts (and projects) that own a cluster, not removed, whose name has the
//!   shape of a CKS node (`…-<11 characters>`): through `i_vm_instance__account_id`, so the
//!   other tenants' VMs are never read;
//! - the VMs mapped to a cluster in an earlier cycle and in no map now, by uuid (the unique
//!   key `uc_vm_instance_uuid`): usually none.
//!
//! An owner is an account id here; the cycle turns it into the API's owner through the
//! cluster it owns (`kubernetes_cluster.account_id`, a project's own account for a project's
//! cluster, as `vm_instance.account_id` is for its VMs).

use std::collections::{HashMap, HashSet};

use mysql_async::Conn;

use super::{Database, DbError, statements};
use crate::base::time::Timestamp;

pub use super::statements::MAX_VM_ROWS;

/// Uuids asked for in one query.
const UUIDS_PER_QUERY: usize = 500;

/// One `vm_instance` row, as `listVirtualMachines` would have shown it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbListedVm {
    pub uuid: String,
    pub name: String,
    pub state: String,
    /// `created` and `update_time` (the API's `lastupdated`).
    pub created: Option<Timestamp>,
    pub updated: Option<Timestamp>,
    /// `vm_instance.account_id`: the owner, by the account's id.
    pub account_id: u64,
}

/// What the cycle reads of VMs from the database: each VM as the caller's `make` turned it
/// while it was decoded (no row is held longer than that).
#[derive(Debug)]
pub struct DbVms<T> {
    pub vms: Vec<T>,
    /// Each cluster not removed, by uuid: its owner's account id.
    pub owners: HashMap<String, u64>,
    /// Queries sent and rows read, for the logs and the benchmark.
    pub queries: usize,
    pub rows: usize,
}

/// The query for the VMs among `uuids` (each quoted; a uuid holds no quote, `base::id::is_uuid`).
fn by_uuid(uuids: &[&str]) -> String {
    let list: Vec<String> = uuids.iter().map(|u| format!("'{u}'")).collect();
    statements::vms_by_uuid(list.join(","))
}

type Row = (
    Option<String>,
    String,
    String,
    Option<String>,
    Option<String>,
    u64,
);

fn listed((uuid, name, state, created, updated, account_id): Row) -> Option<DbListedVm> {
    Some(DbListedVm {
        uuid: uuid?,
        name,
        state,
        created: created.as_deref().and_then(Timestamp::parse),
        updated: updated.as_deref().and_then(Timestamp::parse),
        account_id,
    })
}

/// Each row turned into a VM by `make` as it is decoded; rows past `max` are counted, not
/// kept.
fn keep_listed<T: Send + 'static>(
    max: usize,
    make: fn(DbListedVm) -> T,
) -> impl FnMut((Vec<T>, usize), Row) -> (Vec<T>, usize) + Send + 'static {
    move |(mut vms, mut rows), row| {
        rows += 1;
        if rows <= max
            && let Some(vm) = listed(row)
        {
            vms.push(make(vm));
        }
        (vms, rows)
    }
}

/// Reads the clusters' owners and the VMs a cycle needs, each turned by `make`. `known` are
/// the VMs mapped in an earlier cycle, `mapped` those in a map now (read with the map): only
/// the known ones in no map are asked for by uuid. A uuid not written as CloudStack writes
/// them (a hand-edited state) is not asked for: the API's probe decides about it.
pub async fn read<T: Send + 'static>(
    db: &Database,
    conn: &mut Conn,
    known: &HashSet<&str>,
    mapped: &HashSet<&super::map::Uuid>,
    make: fn(DbListedVm) -> T,
) -> Result<DbVms<T>, DbError> {
    let owners: Vec<(Option<String>, u64)> = db
        .query(conn, "the clusters' owners query", statements::OWNERS)
        .await?;
    let mut out = DbVms {
        vms: Vec::new(),
        queries: 1,
        rows: owners.len(),
        owners: owners
            .into_iter()
            .filter_map(|(uuid, account)| Some((uuid?, account)))
            .collect(),
    };
    let (named, rows) = db
        .fold(
            conn,
            "the node VMs query",
            &statements::node_vms(MAX_VM_ROWS + 1),
            (Vec::new(), 0),
            keep_listed(MAX_VM_ROWS, make),
        )
        .await?;
    out.queries += 1;
    out.rows += rows;
    if rows > MAX_VM_ROWS {
        return Err(DbError::TooManyRows {
            what: "the node VMs query",
            max: MAX_VM_ROWS,
        });
    }
    out.vms = named;
    let mut asked: Vec<&str> = known
        .iter()
        .copied()
        .filter(|id| !mapped.contains(&super::map::Uuid::new(id)) && crate::base::id::is_uuid(id))
        .collect();
    asked.sort_unstable();
    for chunk in asked.chunks(UUIDS_PER_QUERY) {
        let (found, rows) = db
            .fold(
                conn,
                "the earlier mapped VMs query",
                &by_uuid(chunk),
                (Vec::new(), 0),
                keep_listed(UUIDS_PER_QUERY, make),
            )
            .await?;
        out.queries += 1;
        out.rows += rows;
        out.vms.extend(found);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_quoted_one_by_one() {
        assert_eq!(by_uuid(&["a", "b"]), statements::vms_by_uuid("'a','b'"));
        assert!(by_uuid(&["a"]).contains("v.uuid IN ('a') AND NOT ("));
    }
}
