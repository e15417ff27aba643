//! What a cycle keeps of each cluster and VM it lists: compact records made from each row as
//! its page is read, so that the listings are never held as the API wrote them.
//!
//! At 10,000 clusters a cycle keeps about 40,000 map rows and as many VMs named like nodes;
//! as `cloudstack::model` rows (a dozen strings each) they were most of the cycle's memory.
//! A record keeps only what `assemble`, `diff` and `explain` read: ids as 16 bytes, states
//! and times parsed, owners shared, the rest dropped. Pure: no I/O.

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Deserializer};

use crate::base::time::Timestamp;
use crate::cks::{cluster_info, owner_of_cluster, owner_of_vm, skip_reason};
use crate::cloudstack::model::{KubernetesCluster, VirtualMachine};
use crate::snapshot::{ClusterInfo, Owner, VmState};

/// A CloudStack id. CloudStack's ids are lowercase UUIDs, kept as their 16 bytes; anything
/// else (a simulated or older cloud may answer other strings) is kept as written. Two ids are
/// equal exactly when their strings are, and [`fmt::Display`] gives the string back.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct VmId(IdRepr);

#[derive(Clone, PartialEq, Eq, Hash)]
enum IdRepr {
    Uuid([u8; 16]),
    Other(Box<str>),
}

impl VmId {
    pub fn new(s: &str) -> VmId {
        VmId(match uuid_bytes(s) {
            Some(b) => IdRepr::Uuid(b),
            None => IdRepr::Other(s.into()),
        })
    }
}

/// The 16 bytes of `s` if it is a UUID in CloudStack's form (lowercase hex, 8-4-4-4-12), so
/// that writing them back gives `s` exactly.
pub(crate) fn uuid_bytes(s: &str) -> Option<[u8; 16]> {
    let b = s.as_bytes();
    if b.len() != 36 {
        return None;
    }
    let mut out = [0u8; 16];
    let mut n = 0;
    let mut high = None;
    for (i, &c) in b.iter().enumerate() {
        if matches!(i, 8 | 13 | 18 | 23) {
            if c != b'-' {
                return None;
            }
            continue;
        }
        let v = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            _ => return None,
        };
        match high.take() {
            None => high = Some(v),
            Some(h) => {
                out[n] = (h << 4) | v;
                n += 1;
            }
        }
    }
    Some(out)
}

/// Writes the 16 bytes of a UUID in CloudStack's form, the inverse of [`uuid_bytes`].
pub(crate) fn write_uuid(f: &mut impl fmt::Write, b: &[u8; 16]) -> fmt::Result {
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            f.write_str("-")?;
        }
        write!(f, "{byte:02x}")?;
    }
    Ok(())
}

impl fmt::Display for VmId {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match &self.0 {
            IdRepr::Other(s) => f.write_str(s),
            IdRepr::Uuid(b) => write_uuid(f, b),
        }
    }
}

impl fmt::Debug for VmId {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{:?}", self.to_string())
    }
}

impl<'de> Deserialize<'de> for VmId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Id;
        impl serde::de::Visitor<'_> for Id {
            type Value = VmId;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an id")
            }

            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<VmId, E> {
                Ok(VmId::new(s))
            }
        }
        d.deserialize_str(Id)
    }
}

/// A VM as a cycle keeps it: from `listVirtualMachines`, or a row of a cluster's map. 88
/// bytes and its name.
#[derive(Debug, Clone, PartialEq)]
pub struct VmRow {
    pub id: VmId,
    pub name: Box<str>,
    state: RowState,
    created: RowTime,
    last_updated: RowTime,
    /// `isetcdnode`.
    pub etcd: bool,
    /// Who owns it; only for the VM listing (a map row's owner is its cluster's). Shared:
    /// a cloud has far fewer owners than VMs.
    pub owner: Option<Arc<Owner>>,
}

impl VmRow {
    /// A row of a cluster's map: no owner.
    pub fn mapped(vm: VirtualMachine) -> VmRow {
        VmRow {
            id: VmId::new(&vm.id),
            name: vm.name.into_boxed_str(),
            state: RowState::new(&vm.state),
            created: RowTime::new(vm.created.as_deref()),
            last_updated: RowTime::new(vm.lastupdated.as_deref()),
            etcd: vm.isetcdnode.unwrap_or(false),
            owner: None,
        }
    }

    pub fn state(&self) -> VmState {
        self.state.get()
    }

    pub fn created(&self) -> Option<Timestamp> {
        self.created.get()
    }

    /// `lastupdated`.
    pub fn last_updated(&self) -> Option<Timestamp> {
        self.last_updated.get()
    }

    /// A VM read from the database in place of the VM listing (`database::vms`), with the
    /// owner its account id stands for.
    pub fn from_database(
        vm: &crate::database::vms::DbListedVm,
        owner: Option<Arc<Owner>>,
    ) -> VmRow {
        VmRow {
            id: VmId::new(&vm.uuid),
            name: vm.name.clone().into_boxed_str(),
            state: RowState::new(&vm.state),
            created: RowTime::of(vm.created),
            last_updated: RowTime::of(vm.updated),
            etcd: false,
            owner,
        }
    }

    /// A row of the VM listing, with its owner taken from `owners`.
    pub fn listed(vm: VirtualMachine, owners: &Owners) -> VmRow {
        let owner = owner_of_vm(&vm).map(|o| owners.shared(o));
        VmRow {
            owner,
            ..VmRow::mapped(vm)
        }
    }
}

/// A VM state in 16 bytes rather than [`VmState`]'s 24: the states CloudStack has by their
/// place in [`KNOWN_STATES`], any other as written.
#[derive(Debug, Clone, PartialEq)]
enum RowState {
    Known(u8),
    Other(Box<str>),
}

const KNOWN_STATES: [VmState; 8] = [
    VmState::Running,
    VmState::Stopped,
    VmState::Starting,
    VmState::Stopping,
    VmState::Migrating,
    VmState::Destroyed,
    VmState::Expunging,
    VmState::Error,
];

impl RowState {
    fn new(s: &str) -> RowState {
        match VmState::parse(s) {
            VmState::Other(other) => RowState::Other(other.into_boxed_str()),
            known => RowState::Known(
                KNOWN_STATES
                    .iter()
                    .position(|k| *k == known)
                    .map_or(0, |p| p as u8),
            ),
        }
    }

    fn get(&self) -> VmState {
        match self {
            RowState::Known(p) => KNOWN_STATES[usize::from(*p)].clone(),
            RowState::Other(s) => VmState::Other(s.to_string()),
        }
    }
}

/// A time as [`Timestamp::parse`] reads it, in 8 bytes rather than an `Option`'s 16: none
/// (absent or unreadable) is `i64::MIN`, which no CloudStack time parses to.
#[derive(Debug, Clone, Copy, PartialEq)]
struct RowTime(i64);

impl RowTime {
    fn new(s: Option<&str>) -> RowTime {
        RowTime(
            s.and_then(Timestamp::parse)
                .map_or(i64::MIN, Timestamp::unix),
        )
    }

    fn of(t: Option<Timestamp>) -> RowTime {
        RowTime(t.map_or(i64::MIN, Timestamp::unix))
    }

    fn get(self) -> Option<Timestamp> {
        (self.0 != i64::MIN).then(|| Timestamp::from_unix(self.0))
    }
}

/// The owners met so far, each held once.
#[derive(Debug, Default)]
pub struct Owners(Mutex<HashSet<Arc<Owner>>>);

impl Owners {
    pub fn shared(&self, owner: Owner) -> Arc<Owner> {
        // A panic elsewhere cannot leave the set half-changed: insertion is one call.
        let mut set = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(known) = set.get(&owner) {
            return known.clone();
        }
        let owner = Arc::new(owner);
        set.insert(owner.clone());
        owner
    }
}

/// A cluster as a cycle keeps it: its record for the comparison, and what the node listing,
/// `assemble` and `explain` read of the rest.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterRecord {
    pub info: ClusterInfo,
    /// `zonename`, shown by `explain`.
    pub zone_name: Option<String>,
    /// The project's name, else the account's.
    pub owner_name: Option<String>,
    /// Why it is not checked, if it is not (`cks::skip_reason`).
    pub skip: Option<String>,
    pub endpoint: Option<String>,
    pub network_id: Option<String>,
    /// The first map row's `controlNodeLoginUser` detail, where CKS logs in.
    pub login_user: Option<String>,
    /// The VM map as the API shows it (`virtualmachines`), in its order.
    pub map: Box<[VmRow]>,
}

impl ClusterRecord {
    /// The key its owner's limits count it by: the alert cap (`owner_alert_cap`) and the
    /// node listings' turns. `None` when the API names no owner.
    pub fn owner_key(&self) -> Option<String> {
        self.info.owner.as_ref().map(Owner::key)
    }

    pub fn new(c: KubernetesCluster) -> ClusterRecord {
        let info = cluster_info(&c);
        let skip = skip_reason(&c);
        debug_assert_eq!(info.owner, owner_of_cluster(&c));
        let KubernetesCluster {
            zonename,
            account,
            project,
            endpoint,
            networkid,
            virtualmachines,
            ..
        } = c;
        let login_user = virtualmachines
            .first()
            .and_then(|vm| vm.details.get("controlNodeLoginUser"))
            .cloned();
        ClusterRecord {
            info,
            zone_name: zonename,
            owner_name: project.or(account),
            skip,
            endpoint,
            network_id: networkid,
            login_user,
            map: virtualmachines.into_iter().map(VmRow::mapped).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_keep_their_string() {
        for s in [
            "6a3bd1f1-57d0-4bd6-a2a0-9e2c1b7c0f3e",
            "00000000-0000-0000-0000-000000000000",
            "ffffffff-ffff-ffff-ffff-ffffffffffff",
            // Not CloudStack's form: kept as written.
            "6A3BD1F1-57D0-4BD6-A2A0-9E2C1B7C0F3E",
            "6a3bd1f157d04bd6a2a09e2c1b7c0f3e",
            "6a3bd1f1-57d0-4bd6-a2a0-9e2c1b7c0f3g",
            "6a3bd1f1+57d0-4bd6-a2a0-9e2c1b7c0f3e",
            "vm-1",
            "",
            "ü",
        ] {
            assert_eq!(VmId::new(s).to_string(), s);
        }
        assert!(matches!(
            VmId::new("6a3bd1f1-57d0-4bd6-a2a0-9e2c1b7c0f3e").0,
            IdRepr::Uuid(_)
        ));
        assert_ne!(
            VmId::new("6a3bd1f1-57d0-4bd6-a2a0-9e2c1b7c0f3e"),
            VmId::new("6A3BD1F1-57D0-4BD6-A2A0-9E2C1B7C0F3E")
        );
        let id: VmId = serde_json::from_str(r#""vm-1""#).unwrap();
        assert_eq!(id, VmId::new("vm-1"));
    }

    #[test]
    fn a_cluster_keeps_what_is_read_of_it() {
        let c: KubernetesCluster = serde_json::from_value(serde_json::json!({
            "id": "c", "name": "n", "state": "Running", "controlnodes": 1, "size": 2,
            "account": "acct", "domainid": "d", "zonename": "z1",
            "endpoint": "https://10.1.1.10:6443/", "networkid": "net",
            "virtualmachines": [
                {"id": "v1", "name": "n-control-1", "state": "Running",
                 "created": "2024-06-05T07:51:22+0000", "lastupdated": "bad",
                 "details": {"controlNodeLoginUser": "core"}},
                {"id": "v2", "name": "n-node-2", "state": "Weird", "isetcdnode": true}
            ]
        }))
        .unwrap();
        let r = ClusterRecord::new(c.clone());
        assert_eq!(r.info, cluster_info(&c));
        assert_eq!(r.skip, None);
        assert_eq!(r.owner_name.as_deref(), Some("acct"));
        assert_eq!(r.zone_name.as_deref(), Some("z1"));
        assert_eq!(r.login_user.as_deref(), Some("core"));
        assert_eq!(r.map.len(), 2);
        assert_eq!(
            r.map[0].created(),
            Timestamp::parse("2024-06-05T07:51:22+0000")
        );
        assert_eq!(r.map[0].last_updated(), None);
        assert_eq!(r.map[0].state(), VmState::Running);
        assert_eq!(r.map[1].state(), VmState::Other("Weird".into()));
        assert!(r.map[1].etcd && !r.map[0].etcd);
    }

    #[test]
    fn states_and_times_read_back() {
        for s in [
            "Running",
            "Stopped",
            "Starting",
            "Stopping",
            "Migrating",
            "Destroyed",
            "Expunging",
            "Error",
            "Shutdown",
            "",
        ] {
            assert_eq!(RowState::new(s).get(), VmState::parse(s), "{s}");
        }
        for s in [
            Some("2024-06-05T07:51:22+0000"),
            Some("1970-01-01T00:00:00Z"),
            Some("0001-01-01T00:00:00Z"),
            Some("bad"),
            None,
        ] {
            assert_eq!(RowTime::new(s).get(), s.and_then(Timestamp::parse), "{s:?}");
        }
        // What the rows are for: 80,000 of them at 10,000 clusters.
        assert!(std::mem::size_of::<VmRow>() <= 88);
    }

    #[test]
    fn owners_are_held_once() {
        let owners = Owners::default();
        let vm = |account: &str| -> VirtualMachine {
            serde_json::from_value(serde_json::json!({
                "id": "v", "name": "x", "account": account, "domainid": "d"
            }))
            .unwrap()
        };
        let a = VmRow::listed(vm("a"), &owners);
        let b = VmRow::listed(vm("a"), &owners);
        let c = VmRow::listed(vm("c"), &owners);
        assert!(Arc::ptr_eq(
            a.owner.as_ref().unwrap(),
            b.owner.as_ref().unwrap()
        ));
        assert_eq!(
            c.owner.as_deref(),
            Some(&Owner::Account {
                domain_id: "d".into(),
                account: "c".into()
            })
        );
    }
}
