//! The map rows the API stopped showing: from the database's map where it fits, else probed
//! through the API with `listVirtualMachines id=`.

use std::collections::{BTreeSet, HashMap, HashSet};

use tracing::warn;

use super::messages::{DB_MAP_DIFFERS, PROBE_FAILED};
use super::{ClusterRecord, VmId, VmRow};
use crate::cloudstack::client::Client;
use crate::cloudstack::error::ApiError;
use crate::cloudstack::model::VirtualMachine;
use crate::database::map::{DbMap, DbRow, MapVm, Uuid};
use crate::snapshot::{PreviousMap, VanishedHow, VanishedVm};

/// The map rows the API stopped showing, for each of the `unchanged` clusters (checked, and
/// the same in both reads): from the database's map where it fits, else probed through the
/// API one cluster after the other. Also returns how many came from the database.
///
/// `keep_known` is set with a database: gone rows it found stay open while the API decides,
/// since they may not fit the API's count, and a failing database must not resolve them.
pub(super) async fn vanished_rows(
    api: &Client,
    clusters: &[ClusterRecord],
    unchanged: &[usize],
    vms: &[VmRow],
    db_map: Option<&DbMap>,
    previous: &HashMap<String, PreviousMap>,
    keep_known: bool,
) -> (HashMap<usize, Result<Vec<VanishedVm>, String>>, usize) {
    let listed: HashSet<&VmId> = vms.iter().map(|vm| &vm.id).collect();
    let mut vanished = HashMap::new();
    let mut from_db = 0;
    for &i in unchanged {
        let c = &clusters[i];
        if let Some(hidden) = db_map.and_then(|m| from_database(m, c)) {
            from_db += 1;
            vanished.insert(i, Ok(hidden));
            continue;
        }
        let expected = c.info.expected_vms();
        let probed = probe_vanished(
            api,
            c,
            expected,
            previous.get(&c.info.id),
            &listed,
            keep_known,
        )
        .await;
        if let Err(e) = &probed {
            warn!(cluster = %c.info.name, error = %e, "{PROBE_FAILED}");
        }
        vanished.insert(i, probed.map_err(|e| e.to_string()));
    }
    (vanished, from_db)
}

/// The map rows of `c` the API hides, from the database, unless its map changed between the
/// reads (then `None`: the API's probe decides).
fn from_database(map: &DbMap, c: &ClusterRecord) -> Option<Vec<VanishedVm>> {
    let shown: Vec<String> = c.map.iter().map(|vm| vm.id.to_string()).collect();
    let shown: Vec<&str> = shown.iter().map(String::as_str).collect();
    let rows = map.clusters.get(&c.info.id).map_or(&[][..], Vec::as_slice);
    let hidden = hidden_rows(rows, &shown);
    if hidden.is_none() {
        // The second read of the clusters saw the same map: not an operation under way.
        warn!(cluster = %c.info.name, cluster_id = %c.info.id, "{DB_MAP_DIFFERS}");
    }
    hidden
}

/// The map rows the API does not show, from the database rows of a cluster whose shown VMs
/// are `shown`: a removed VM's row (expunged or unmanaged, under its uuid, so a VM keeps its
/// key from Destroyed to gone) and a row whose VM does not exist (under its numeric id).
/// `None` when the VMs alive in the database are not exactly those shown: the map changed
/// between the reads.
pub fn hidden_rows(rows: &[DbRow], shown: &[&str]) -> Option<Vec<VanishedVm>> {
    let alive: BTreeSet<&Uuid> = rows
        .iter()
        .filter_map(|r| match &r.vm {
            MapVm::Alive(uuid) => uuid.as_ref(),
            _ => None,
        })
        .collect();
    let shown: Vec<Uuid> = shown.iter().map(|s| Uuid::new(s)).collect();
    if alive != shown.iter().collect() {
        return None;
    }
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for row in rows {
        let gone = match &row.vm {
            MapVm::Alive(_) => continue,
            MapVm::Removed(vm) => VanishedVm {
                id: vm.uuid.clone().unwrap_or_else(|| row.vm_id.to_string()),
                name: Some(vm.name.clone()),
                how: VanishedHow::Expunged,
            },
            MapVm::Missing => VanishedVm {
                id: row.vm_id.to_string(),
                name: None,
                how: VanishedHow::DoesNotExist,
            },
        };
        if seen.insert(gone.id.clone()) {
            out.push(gone);
        }
    }
    Some(out)
}

/// Map rows the API stopped showing: ids mapped last cycle, gone from `virtualmachines` now,
/// while the cluster's expected size did not shrink (a scale-down removes rows legitimately).
/// Each is probed with `listVirtualMachines id=`: an empty list means expunged or unmanaged,
/// error 431 means no such VM. A VM the probe still finds only lost its map row; it is judged
/// like any other VM of the cluster.
///
/// With `keep_known`, the ids already known gone are kept whether or not they fit the count
/// (a database found them, and it is the one to say when their rows are deleted).
async fn probe_vanished(
    api: &Client,
    c: &ClusterRecord,
    expected_vms: u32,
    previous: Option<&PreviousMap>,
    listed: &HashSet<&VmId>,
    keep_known: bool,
) -> Result<Vec<VanishedVm>, ApiError> {
    let Some(prev) = previous else {
        return Ok(vec![]);
    };
    let now_ids: BTreeSet<String> = c.map.iter().map(|vm| vm.id.to_string()).collect();
    // Gone rows can only stand for map entries the API does not show: at most
    // `expected - shown` of them. Beyond that the rows were deleted (a scale-down, a fix in
    // the database) and their findings resolve.
    let mut room = (expected_vms as usize).saturating_sub(now_ids.len());
    let mut out = Vec::new();
    // Already known gone, finding still open: kept without probing again, unless the row
    // came back.
    for (id, (name, how)) in &prev.vanished {
        if !now_ids.contains(id.as_str()) && !listed.contains(&VmId::new(id)) {
            out.push(VanishedVm {
                id: id.clone(),
                name: name.clone(),
                how: *how,
            });
        }
    }
    if keep_known {
        room += out.len();
    }
    // A scale-down removes rows legitimately: nothing new is probed then.
    if expected_vms >= prev.expected_vms {
        for (id, name) in &prev.vms {
            if out.len() >= room {
                break;
            }
            // Still mapped, already known, or the VM exists and only its row went.
            if now_ids.contains(id.as_str())
                || prev.vanished.contains_key(id)
                || listed.contains(&VmId::new(id))
            {
                continue;
            }
            let scope = [
                ("id", id.as_str()),
                ("listall", "true"),
                ("projectid", "-1"),
            ];
            match api
                .list::<VirtualMachine>("listVirtualMachines", "virtualmachine", &scope)
                .await
            {
                Ok(found) if found.is_empty() => out.push(VanishedVm {
                    id: id.clone(),
                    name: Some(name.clone()),
                    how: VanishedHow::Expunged,
                }),
                Ok(_) => {}
                Err(e) if e.code() == Some(431) => out.push(VanishedVm {
                    id: id.clone(),
                    name: Some(name.clone()),
                    how: VanishedHow::DoesNotExist,
                }),
                Err(e) => return Err(e),
            }
        }
    }
    out.truncate(room);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::database::map::DbVm;

    fn row(vm_id: u64, vm: Option<(&str, &str, bool)>) -> DbRow {
        DbRow {
            vm_id,
            vm: match vm {
                None => MapVm::Missing,
                Some((uuid, _, false)) => MapVm::Alive(Some(Uuid::new(uuid))),
                Some((uuid, state, true)) => MapVm::Removed(Box::new(DbVm {
                    uuid: Some(uuid.into()),
                    name: format!("name-{uuid}"),
                    state: state.into(),
                })),
            },
        }
    }

    #[test]
    fn removed_and_unknown_vms_are_the_hidden_rows() {
        let rows = [
            row(1, Some(("a", "Running", false))),
            row(2, Some(("b", "Destroyed", false))),
            row(3, Some(("c", "Expunging", true))),
            row(999_999, None),
            // A duplicate row is one finding.
            row(999_999, None),
        ];
        let hidden = hidden_rows(&rows, &["b", "a"]).unwrap();
        assert_eq!(
            hidden,
            [
                VanishedVm {
                    id: "c".into(),
                    name: Some("name-c".into()),
                    how: VanishedHow::Expunged
                },
                VanishedVm {
                    id: "999999".into(),
                    name: None,
                    how: VanishedHow::DoesNotExist
                },
            ]
        );
    }

    #[test]
    fn a_map_that_changed_between_the_reads_is_not_used() {
        let rows = [row(1, Some(("a", "Running", false)))];
        assert_eq!(hidden_rows(&rows, &["a"]), Some(vec![]));
        assert_eq!(hidden_rows(&rows, &["a", "b"]), None);
        assert_eq!(hidden_rows(&rows, &[]), None);
    }
}
