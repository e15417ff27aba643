//! State files of the first release (schema version 1), read and converted to the current
//! schema: everything but the recorded findings has the same form; a finding was recorded as
//! the diff's output type then, with a map count's `shown/expected` in `vm_state`.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::base::time::Timestamp;
use crate::diff::FindingKey;
use crate::state::{
    AlertRecord, ClusterState, Outgoing, RecordKey, Reported, State, VERSION, VanishedRecord,
};

#[derive(Debug, Deserialize)]
pub struct StateV1 {
    #[serde(default)]
    clusters: BTreeMap<String, ClusterV1>,
    #[serde(default)]
    outbox: Vec<Outgoing>,
    #[serde(default)]
    alerts: BTreeMap<RecordKey, AlertRecord>,
    #[serde(default)]
    annotations: BTreeMap<RecordKey, String>,
    #[serde(default)]
    next_id: u64,
}

#[derive(Debug, Deserialize)]
struct ClusterV1 {
    name: String,
    #[serde(default)]
    zone_id: Option<String>,
    #[serde(default)]
    vms: BTreeMap<String, ReportedV1>,
    #[serde(default)]
    nodes: BTreeMap<String, ReportedV1>,
    #[serde(default)]
    map: BTreeMap<String, String>,
    #[serde(default)]
    expected_vms: u32,
    #[serde(default)]
    vanished: BTreeMap<String, VanishedRecord>,
}

#[derive(Debug, Deserialize)]
struct ReportedV1 {
    mismatch: MismatchV1,
    since: Timestamp,
}

#[derive(Debug, Deserialize)]
struct MismatchV1 {
    kind: String,
    vm_id: Option<String>,
    vm_name: Option<String>,
    vm_state: Option<String>,
    node: Option<String>,
}

impl ReportedV1 {
    fn upgrade(self) -> Reported {
        let m = self.mismatch;
        let counts = (m.kind == "map_count")
            .then(|| m.vm_state.as_deref()?.split_once('/'))
            .flatten()
            .and_then(|(s, e)| Some((s.parse().ok()?, e.parse().ok()?)));
        Reported {
            server: false,
            blind_reason: None,
            blind_since: None,
            named_vm_id: None,
            named_vm_name: None,
            vm_state: if counts.is_some() { None } else { m.vm_state },
            shown: counts.map(|c| c.0),
            expected: counts.map(|c| c.1),
            kind: m.kind,
            vm_id: m.vm_id,
            vm_name: m.vm_name,
            node: m.node,
            since: self.since,
            held: false,
            deferred: false,
            absent_since: None,
            ignored: None,
        }
    }
}

impl StateV1 {
    /// The same state in the current schema: every reported finding, alert and annotation
    /// record and queued notification carried over.
    pub fn upgrade(self) -> State {
        let side = |m: BTreeMap<String, ReportedV1>| {
            m.into_iter()
                .filter_map(|(k, r)| Some((FindingKey::parse(&k)?, r.upgrade())))
                .collect::<BTreeMap<_, _>>()
        };
        State {
            version: VERSION,
            clusters: self
                .clusters
                .into_iter()
                .map(|(id, c)| {
                    (
                        id,
                        ClusterState {
                            name: c.name,
                            zone_id: c.zone_id,
                            owner: None,
                            owner_id: None,
                            vms: side(c.vms),
                            nodes: side(c.nodes),
                            map: c.map,
                            expected_vms: c.expected_vms,
                            vanished: c.vanished,
                            db_ids: BTreeMap::new(),
                            nodes_failed: false,
                            listed_at: None,
                            compared_at: None,
                            unseen_since: None,
                            unseen_cycles: 0,
                        },
                    )
                })
                .collect(),
            outbox: self.outbox,
            alerts: self.alerts,
            annotations: self.annotations,
            next_id: self.next_id,
            storm: None,
            read_back: false,
            read_back_seen: Default::default(),
            raised: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::base::time::Timestamp;
    use crate::diff::{Mismatch, MismatchKind, Subject, VmRef};
    use crate::state::file::StateFile;
    use crate::state::step::{Coverage, Observed, StepSettings, step};

    /// A state file as the first release wrote it: six findings of one cluster reported, two
    /// of them gone VMs, alerts and annotations recorded, three notifications still queued.
    const V1: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/state-v1.json"
    ));
    const CLUSTER: &str = "5d1c0064-7a2b-4c3d-8e9f-0a1b2c3d4e5f";

    fn vm(kind: MismatchKind, n: u32, state: &str) -> Mismatch {
        Mismatch {
            kind,
            subject: Subject::Vm(VmRef {
                id: format!("5d1c{n:04x}-7a2b-4c3d-8e9f-0a1b2c3d4e5f"),
                name: Some(format!("web-node-19d57bd0a{n:02x}")),
                state: state.into(),
            }),
        }
    }

    /// The same six findings, as this release's diff gives them.
    fn same_findings() -> Vec<Mismatch> {
        vec![
            Mismatch {
                kind: MismatchKind::MapCount,
                subject: Subject::MapRows {
                    shown: 2,
                    expected: 4,
                },
            },
            vm(MismatchKind::MappedVm, 1, "Destroyed"),
            vm(MismatchKind::MappedVm, 2, "Expunged"),
            vm(MismatchKind::UnmappedVm, 3, "Running"),
            Mismatch {
                kind: MismatchKind::NodeWithoutVm,
                subject: Subject::Node("manual-node".into()),
            },
            vm(MismatchKind::VmNotANode, 4, "Running"),
        ]
    }

    #[test]
    fn a_first_release_state_file_carries_over_and_nothing_is_reported_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        std::fs::write(&path, V1).unwrap();
        let now = Timestamp::from_unix(1_800_000_600);
        let (file, mut state, note) = StateFile::open(&path, now).unwrap();
        assert_eq!(note.moved_aside, None);
        assert_eq!(state.version, 2);
        let c = &state.clusters[CLUSTER];
        assert_eq!(c.vms.len() + c.nodes.len(), 6);
        let count = &c.vms[&crate::diff::FindingKey::parse("map_count:2/4").unwrap()];
        assert_eq!(
            (count.shown, count.expected, count.vm_state.as_deref()),
            (Some(2), Some(4), None)
        );
        assert_eq!(c.vanished.len(), 1);
        let queued: Vec<&str> = state
            .outbox
            .iter()
            .map(|o| o.notification.action())
            .collect();
        assert_eq!(queued, ["event", "add_annotation", "raise_alert"]);
        assert_eq!(state.outbox[0].attempts, 2);
        assert!(state.outbox[0].last_error.is_some());
        assert_eq!((state.alerts.len(), state.annotations.len()), (3, 5));
        let next_id = state.next_id;

        // The findings are still there: nothing new, nothing resolved, nothing queued.
        let observed = [Observed {
            left_to_server: Default::default(),
            cluster: crate::snapshot::ClusterIdentity {
                id: CLUSTER.into(),
                name: "web".into(),
                zone_id: Some("5d1c00c8-7a2b-4c3d-8e9f-0a1b2c3d4e5f".into()),
                owner: None,
                owner_id: None,
            },
            blind_reason: None,
            listed: true,
            coverage: Coverage::Full,
            mismatches: same_findings(),
            mapped: vec![],
            expected_vms: 4,
            db_ids: None,
            ignored: Default::default(),
        }];
        let settings = StepSettings {
            alerts: true,
            annotations: true,
            alert_cap: 3,
            owner_alert_cap: 1000,
            blind_after: crate::config::DEFAULT_BLIND_AFTER,
            resolve_after: std::time::Duration::ZERO,
            owner_alerts_per_hour: 100_000,
            alert_types: 1000,
            storm: crate::config::StormThreshold::Off,
            alertmanager: false,
        };
        let outcome = step(&mut state, &observed, &settings, now);
        assert!(outcome.new.is_empty(), "{:?}", outcome.new);
        assert_eq!(outcome.open[CLUSTER], {
            let mut all = same_findings();
            all.sort_by_key(|m| (m.kind, m.key()));
            all
        });
        assert_eq!(state.outbox.len(), 3);
        assert_eq!(state.next_id, next_id);
        assert_eq!(
            state.clusters[CLUSTER].vms[&crate::diff::FindingKey::parse("map_count:2/4").unwrap()]
                .since,
            Timestamp::parse("2027-01-15T08:00:00Z").unwrap()
        );

        // Written back in this release's format, and read again the same.
        file.save(&state).unwrap();
        drop(file);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("{\"version\":2,"));
        assert!(!text.contains("\"mismatch\""));
        let (_file, again, _) = StateFile::open(&path, now).unwrap();
        assert_eq!(again, state);
    }
}
