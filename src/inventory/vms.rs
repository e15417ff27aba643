//! The VMs a cycle keeps (those named like a CKS node, and those mapped before), from the
//! API's VM listing or from the database, and the database's map read beside them.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use tracing::warn;

use super::messages::{DB_MAP_AND_VMS_UNREAD, DB_MAP_UNREAD};
use super::{ClusterRecord, CycleError, MapSource, Owners, VmRow};
use crate::cloudstack::client::Client;
use crate::cloudstack::model::VirtualMachine;
use crate::database::map::DbMap;
use crate::database::{Database, DbCycle, DbError};

/// The database's map, and its VMs when `known` is given (to keep those besides the VMs
/// named like a CKS node); `None` without a database. A failing database is not the
/// cycle's failure: its error is returned inside.
pub(super) async fn read_database(
    database: Option<&Database>,
    known: Option<&HashSet<&str>>,
) -> Result<Option<Result<DbCycle<(u64, VmRow)>, DbError>>, CycleError> {
    match database {
        None => Ok(None),
        Some(db) => Ok(Some(
            db.read_cycle(known, |vm| (vm.account_id, VmRow::from_database(&vm, None)))
                .await,
        )),
    }
}

/// The VMs, the database's map and where the map came from, out of what the API and the
/// database gave: the VMs are listed through the API only when neither gave them.
pub(super) async fn vms_and_map(
    api: &Client,
    known: &HashSet<&str>,
    owners: &Owners,
    clusters: &[ClusterRecord],
    listed_vms: Option<Vec<VmRow>>,
    db_read: Option<Result<DbCycle<(u64, VmRow)>, DbError>>,
) -> Result<(Vec<VmRow>, Option<DbMap>, MapSource), CycleError> {
    Ok(match db_read {
        None => (listed_vms.unwrap_or_default(), None, MapSource::Api),
        Some(Ok(read)) => {
            let schema = read.map.schema.as_ref().map_or("", |s| s.release);
            let (queries, rows) = read.queries_and_rows();
            let source = MapSource::Database {
                rows,
                queries,
                vms_read: read.vms.is_some(),
                clusters: 0,
                schema,
            };
            let vms = match (listed_vms, read.vms) {
                (Some(listed), _) => listed,
                (None, Some(db_vms)) => vms_of_database(db_vms, clusters, owners),
                (None, None) => list_vms(api, known, owners).await?,
            };
            (vms, Some(read.map), source)
        }
        Some(Err(e)) => {
            let vms = match listed_vms {
                Some(listed) => {
                    warn!(error = %e, "{DB_MAP_UNREAD}");
                    listed
                }
                None => {
                    warn!(error = %e, "{DB_MAP_AND_VMS_UNREAD}");
                    list_vms(api, known, owners).await?
                }
            };
            (
                vms,
                None,
                MapSource::DatabaseFailed {
                    error: e.to_string(),
                },
            )
        }
    })
}

/// The VMs named like a CKS node, and those in `known`, from the API's VM listing; the rest
/// (most VMs of a cloud) is dropped while the pages are read.
pub(super) async fn list_vms(
    api: &Client,
    known: &HashSet<&str>,
    owners: &Owners,
) -> Result<Vec<VmRow>, CycleError> {
    let keep = |vm: VirtualMachine| {
        (!crate::cks::naming::split(&vm.name).is_empty() || known.contains(vm.id.as_str()))
            .then(|| VmRow::listed(vm, owners))
    };
    api.list_map::<VirtualMachine, _, _>(
        "listVirtualMachines",
        "virtualmachine",
        &[("listall", "true"), ("projectid", "-1"), ("details", "min")],
        keep,
    )
    .await
    .map_err(|source| CycleError::List {
        what: "virtual machines",
        source,
    })
}

/// The database's VMs as the VM listing would have given them: each account id becomes the
/// owner of the cluster that account owns (a VM of an account that owns no cluster the API
/// listed has no owner, and is nobody's node).
fn vms_of_database(
    db: crate::database::vms::DbVms<(u64, VmRow)>,
    clusters: &[ClusterRecord],
    owners: &Owners,
) -> Vec<VmRow> {
    let by_uuid: HashMap<&str, &crate::snapshot::Owner> = clusters
        .iter()
        .filter_map(|c| Some((c.info.id.as_str(), c.info.owner.as_ref()?)))
        .collect();
    let mut by_account: HashMap<u64, Arc<crate::snapshot::Owner>> = HashMap::new();
    for (uuid, account) in &db.owners {
        if let Some(owner) = by_uuid.get(uuid.as_str()) {
            by_account
                .entry(*account)
                .or_insert_with(|| owners.shared((*owner).clone()));
        }
    }
    db.vms
        .into_iter()
        .map(|(account, mut vm)| {
            vm.owner = by_account.get(&account).cloned();
            vm
        })
        .collect()
}
