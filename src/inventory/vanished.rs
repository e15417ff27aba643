//! The map rows the API stopped showing: from the database's map where it fits, else probed
//! through the API with `listVirtualMachines id=`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use tracing::warn;

use super::messages::{DB_MAP_DIFFERS, PROBE_FAILED};
use super::{ClusterRecord, VmId, VmRow};
use crate::cloudstack::client::Client;
use crate::cloudstack::error::ApiError;
use crate::cloudstack::model::VirtualMachine;
use crate::database::map::{DbMap, DbRow, MapVm, Uuid};
use crate::snapshot::{PreviousMap, RememberedVm, VanishedHow, VanishedVm};

/// What `vanished_rows` found, by cluster index.
#[derive(Debug, Default)]
pub(super) struct Vanished {
    /// The gone map rows of each unchanged cluster, or the API error that stopped the probe.
    pub rows: HashMap<usize, Result<Vec<VanishedVm>, String>>,
    /// Of the clusters whose rows came from the database, the mapped VMs it names dead or
    /// removed, and those it once named, by `vm_instance.id` (see `remembered`).
    pub db_ids: HashMap<usize, BTreeMap<u64, RememberedVm>>,
    /// How many clusters' rows came from the database.
    pub from_db: usize,
}

/// The map rows the API stopped showing, for each of the `unchanged` clusters (checked, and
/// the same in both reads): from the database's map where it fits, else probed through the
/// API one cluster after the other.
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
) -> Vanished {
    let listed: HashSet<&VmId> = vms.iter().map(|vm| &vm.id).collect();
    let mut found = Vanished::default();
    for &i in unchanged {
        let c = &clusters[i];
        let prev = previous.get(&c.info.id);
        if let Some((hidden, db_ids)) = db_map.and_then(|m| from_database(m, c, prev)) {
            found.from_db += 1;
            found.rows.insert(i, Ok(hidden));
            found.db_ids.insert(i, db_ids);
            continue;
        }
        let expected = c.info.expected_vms();
        let probed = probe_vanished(api, c, expected, prev, &listed, keep_known).await;
        if let Err(e) = &probed {
            warn!(cluster = %c.info.name, error = %e, "{PROBE_FAILED}");
        }
        found.rows.insert(i, probed.map_err(|e| e.to_string()));
    }
    found
}

/// The map rows of `c` the API hides, from the database, with the mapped VMs to remember by
/// their database id, unless its map changed between the reads (then `None`: the API's probe
/// decides).
fn from_database(
    map: &DbMap,
    c: &ClusterRecord,
    prev: Option<&PreviousMap>,
) -> Option<(Vec<VanishedVm>, BTreeMap<u64, RememberedVm>)> {
    let shown: Vec<String> = c.map.iter().map(|vm| vm.id.to_string()).collect();
    let shown: Vec<&str> = shown.iter().map(String::as_str).collect();
    let rows = map.clusters.get(&c.info.id).map_or(&[][..], Vec::as_slice);
    let empty = BTreeMap::new();
    let known = prev.map_or(&empty, |p| &p.db_ids);
    let Some(hidden) = hidden_rows(rows, &shown, known) else {
        // The second read of the clusters saw the same map: not an operation under way.
        warn!(cluster = %c.info.name, cluster_id = %c.info.id, "{DB_MAP_DIFFERS}");
        return None;
    };
    let dead: Vec<(String, &str)> = c
        .map
        .iter()
        .filter(|vm| vm.state().is_dead())
        .map(|vm| (vm.id.to_string(), &*vm.name))
        .collect();
    let dead: Vec<(&str, &str)> = dead.iter().map(|(id, name)| (id.as_str(), *name)).collect();
    Some((hidden, remembered(rows, &dead, known)))
}

/// The map rows the API does not show, from the database rows of a cluster whose shown VMs
/// are `shown`: a removed VM's row (expunged or unmanaged, under its uuid, so a VM keeps its
/// key from Destroyed to gone) and a row whose VM does not exist. The latter is under the
/// uuid and name `known` remembers for its id (a VM purged after an earlier cycle saw it
/// dead or removed: it keeps its key), else under its numeric id.
/// `None` when the VMs alive in the database are not exactly those shown: the map changed
/// between the reads.
pub fn hidden_rows(
    rows: &[DbRow],
    shown: &[&str],
    known: &BTreeMap<u64, RememberedVm>,
) -> Option<Vec<VanishedVm>> {
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
            MapVm::Missing => match known.get(&row.vm_id) {
                Some(vm) => VanishedVm {
                    id: vm.id.clone(),
                    name: Some(vm.name.clone()),
                    how: VanishedHow::DoesNotExist,
                },
                None => VanishedVm {
                    id: row.vm_id.to_string(),
                    name: None,
                    how: VanishedHow::DoesNotExist,
                },
            },
        };
        if seen.insert(gone.id.clone()) {
            out.push(gone);
        }
    }
    Some(out)
}

/// The mapped VMs to remember by their database id: those the API shows dead (`dead`, uuid
/// and name), and those removed, while their `vm_instance` row still names them; and of
/// those `known` from earlier cycles, the ones whose row was since purged, while a map row
/// holds their id. An id no map row holds any more is forgotten.
fn remembered(
    rows: &[DbRow],
    dead: &[(&str, &str)],
    known: &BTreeMap<u64, RememberedVm>,
) -> BTreeMap<u64, RememberedVm> {
    let dead: HashMap<Uuid, &str> = dead
        .iter()
        .map(|(id, name)| (Uuid::new(id), *name))
        .collect();
    rows.iter()
        .filter_map(|row| {
            let vm = match &row.vm {
                MapVm::Alive(uuid) => {
                    let uuid = uuid.as_ref()?;
                    RememberedVm {
                        id: uuid.to_string(),
                        name: (*dead.get(uuid)?).to_string(),
                    }
                }
                MapVm::Removed(vm) => RememberedVm {
                    id: vm.uuid.clone()?,
                    name: vm.name.clone(),
                },
                MapVm::Missing => known.get(&row.vm_id)?.clone(),
            };
            Some((row.vm_id, vm))
        })
        .collect()
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
        let hidden = hidden_rows(&rows, &["b", "a"], &BTreeMap::new()).unwrap();
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
        let none = BTreeMap::new();
        assert_eq!(hidden_rows(&rows, &["a"], &none), Some(vec![]));
        assert_eq!(hidden_rows(&rows, &["a", "b"], &none), None);
        assert_eq!(hidden_rows(&rows, &[], &none), None);
    }

    fn known(pairs: &[(u64, &str)]) -> BTreeMap<u64, RememberedVm> {
        pairs
            .iter()
            .map(|&(id, uuid)| {
                let vm = RememberedVm {
                    id: uuid.into(),
                    name: format!("name-{uuid}"),
                };
                (id, vm)
            })
            .collect()
    }

    #[test]
    fn a_purged_row_is_named_by_the_vm_remembered_for_its_id() {
        // Row 2's VM was seen before its `vm_instance` row was purged; row 7's never was.
        let rows = [
            row(1, Some(("a", "Running", false))),
            row(2, None),
            row(7, None),
        ];
        let hidden = hidden_rows(&rows, &["a"], &known(&[(2, "b"), (5, "e")])).unwrap();
        assert_eq!(
            hidden,
            [
                VanishedVm {
                    id: "b".into(),
                    name: Some("name-b".into()),
                    how: VanishedHow::DoesNotExist
                },
                VanishedVm {
                    id: "7".into(),
                    name: None,
                    how: VanishedHow::DoesNotExist
                },
            ]
        );
        // A remembered id does not make a map that changed between the reads usable.
        assert_eq!(hidden_rows(&rows, &["a", "x"], &known(&[(2, "b")])), None);
    }

    #[test]
    fn dead_and_removed_vms_are_remembered_while_a_row_holds_their_id() {
        let rows = [
            row(1, Some(("a", "Running", false))),
            row(2, Some(("b", "Destroyed", false))),
            row(3, Some(("c", "Expunging", true))),
            row(4, None),
            row(6, None),
        ];
        // The API shows `b` destroyed (under the name it lists); 4 was remembered and has
        // since been purged; 5's row is gone; 6 was never seen.
        let was = known(&[(4, "d"), (5, "e")]);
        let now = remembered(&rows, &[("b", "web-node-b")], &was);
        let ids: Vec<(u64, &str, &str)> = now
            .iter()
            .map(|(&id, vm)| (id, vm.id.as_str(), vm.name.as_str()))
            .collect();
        assert_eq!(
            ids,
            [
                (2, "b", "web-node-b"),
                (3, "c", "name-c"),
                (4, "d", "name-d")
            ]
        );
        // Its row deleted too, 4 is forgotten; a removed VM without a uuid names nothing.
        let mut removed = row(3, Some(("c", "Expunging", true)));
        if let MapVm::Removed(vm) = &mut removed.vm {
            vm.uuid = None;
        }
        assert_eq!(remembered(&[removed], &[], &was), BTreeMap::new());
    }

    #[test]
    fn a_vm_keeps_its_key_from_destroyed_to_purged() {
        // Destroyed (alive in the database, dead in the API), then expunged (removed), then
        // purged (no `vm_instance` row); and the same with the expunged stage unseen.
        let stages = [
            row(2, Some(("b", "Destroyed", false))),
            row(2, Some(("b", "Expunging", true))),
            row(2, None),
        ];
        for seen in [&stages[..], &[stages[0].clone(), stages[2].clone()]] {
            let mut was = BTreeMap::new();
            let mut ids = Vec::new();
            for stage in seen {
                let rows = [row(1, Some(("a", "Running", false))), stage.clone()];
                let alive = matches!(stage.vm, MapVm::Alive(_));
                let shown: &[&str] = if alive { &["a", "b"] } else { &["a"] };
                // While alive, the API shows it and the diff keys it by its uuid.
                let hidden = hidden_rows(&rows, shown, &was).unwrap();
                ids.extend(hidden.into_iter().map(|gone| (gone.id, gone.name)));
                let dead: &[(&str, &str)] = if alive { &[("b", "name-b")] } else { &[] };
                was = remembered(&rows, dead, &was);
            }
            let b = ("b".to_string(), Some("name-b".to_string()));
            assert_eq!(ids, vec![b; seen.len() - 1]);
            assert_eq!(was, known(&[(2, "b")]));
        }
    }
}
