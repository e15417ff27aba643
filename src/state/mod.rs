//! Dedupe state: what has been reported per cluster, what each cluster's map looked like, the
//! alerts and annotations the daemon raised, and the notifications not yet delivered.
//!
//! `step` is the pure dedupe (report in, state and notifications out); `file` persists the
//! state atomically under an exclusive lock; `v1` reads the files of the first release.
//! Delivery lives in `notify`.
//!
//! These are the state file's own serde types: a finding is recorded in a form of its own
//! (`Recorded`), so the file's format does not change when the diff's types do.

pub mod file;
pub mod ignore;
pub mod standing;
pub mod step;
pub mod v1;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::base::time::Timestamp;
use crate::diff::{FindingKey, Mismatch, MismatchKind, Side, Subject, VmRef};
use crate::snapshot::{RememberedVm, VanishedHow};

/// The schema version written by this release. Version 1 files are read and converted.
pub const VERSION: u32 = 2;

/// Everything persisted between cycles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct State {
    pub version: u32,
    /// By cluster id.
    #[serde(default)]
    pub clusters: BTreeMap<String, ClusterState>,
    /// Notifications decided but not yet delivered, in order.
    #[serde(default)]
    pub outbox: Vec<Outgoing>,
    /// Alerts this daemon raised and CloudStack stored, by what each is about.
    #[serde(default)]
    pub alerts: BTreeMap<RecordKey, AlertRecord>,
    /// Annotations this daemon added, by what each is about: the annotation id.
    #[serde(default)]
    pub annotations: BTreeMap<RecordKey, String>,
    /// Source of outbox ids.
    #[serde(default)]
    pub next_id: u64,
    /// The storm under way, if one is: new findings in too many clusters at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storm: Option<Storm>,
    /// What was reported was read back from CloudStack and no step has run since: the next
    /// step's new findings may have been told by the instance before (see
    /// [`Notification::Event`]'s `after_takeover`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_back: bool,
    /// The clusters stepped with their nodes listed since the read-back: their later new
    /// findings are this instance's own. `read_back` ends once every cluster checked is here.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub read_back_seen: BTreeSet<String>,
    /// When alerts and annotations were raised in the last hour, by tenant (`Owner::key`):
    /// what `notify.owner_alerts_per_hour` counts.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub raised: BTreeMap<String, Raised>,
}

/// What was raised for one tenant's clusters in the last hour, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Raised {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alerts: Vec<Timestamp>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub annotations: Vec<Timestamp>,
}

pub use crate::diff::wording::STORM_SCOPE;

/// A storm: one cycle brought new findings in more clusters than `notify.storm_clusters`.
/// While it lasts, the alerts and annotations of new findings are held (their findings are
/// marked `held`); the storm's own alert says what happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Storm {
    pub since: Timestamp,
    /// The key of its alert, `storm:<compact time>`.
    pub key: String,
    /// Clusters with new findings in the cycle that began it, and clusters checked then.
    pub clusters: usize,
    pub checked: usize,
    /// Findings held since it began (those resolved meanwhile included).
    #[serde(default)]
    pub held: usize,
    /// Held findings told since, when their tenant's storm ended, and their clusters.
    #[serde(default, skip_serializing_if = "is_zero_usize")]
    pub released: usize,
    #[serde(default, skip_serializing_if = "is_zero_usize")]
    pub released_clusters: usize,
    /// The tenants it held when its alert was raised (0: not known, as after a takeover).
    /// Once it holds twice as many, its alert is raised anew to say so.
    #[serde(default, skip_serializing_if = "is_zero_usize")]
    pub alerted_tenants: usize,
}

fn is_zero_usize(n: &usize) -> bool {
    *n == 0
}

impl Default for State {
    fn default() -> Self {
        State {
            version: VERSION,
            clusters: BTreeMap::new(),
            outbox: Vec::new(),
            alerts: BTreeMap::new(),
            annotations: BTreeMap::new(),
            next_id: 1,
            storm: None,
            read_back: false,
            read_back_seen: BTreeSet::new(),
            raised: BTreeMap::new(),
        }
    }
}

/// One cluster's remembered findings and map.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterState {
    pub name: String,
    #[serde(default)]
    pub zone_id: Option<String>,
    /// Who owns it: the project's name, or the account's (an Alertmanager label).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The owner, unique in the cloud (`Owner::key`): what the per-owner alert cap counts by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_id: Option<String>,
    /// Reported mismatches of the VM side (map against VMs), by key (written in its string
    /// form).
    #[serde(default, deserialize_with = "findings")]
    pub vms: BTreeMap<FindingKey, Reported>,
    /// Reported mismatches of the node side (map against Kubernetes nodes), by key.
    #[serde(default, deserialize_with = "findings")]
    pub nodes: BTreeMap<FindingKey, Reported>,
    /// The mapped VM ids (with names) last seen, to find rows the API stops showing.
    #[serde(default)]
    pub map: BTreeMap<String, String>,
    #[serde(default)]
    pub expected_vms: u32,
    /// Mapped VMs found gone, kept while their finding is open.
    #[serde(default)]
    pub vanished: BTreeMap<String, VanishedRecord>,
    /// With a database: the mapped VMs it showed dead or removed, by `vm_instance.id`, with
    /// their uuid and name, kept while a map row holds that id. Once CloudStack purges the
    /// `vm_instance` row (4.20+), the map row names its VM by these, not by the number.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub db_ids: BTreeMap<u64, RememberedVm>,
    /// Its nodes could not be listed the last time a listing of them ran.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nodes_failed: bool,
    /// When a listing of its nodes last ran (started, whatever its outcome): the next cycle
    /// lists the clusters listed longest ago first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listed_at: Option<Timestamp>,
    /// When its three views were last all compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compared_at: Option<Timestamp>,
    /// While its nodes cannot be listed: since when they have not been (the last full
    /// comparison, or the first failure), and for how many cycles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unseen_since: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unseen_cycles: u32,
}

/// A side's records by key. A key this release cannot read (a kind it does not know) is
/// dropped with its record, like a resolved finding, rather than refusing the whole file.
fn findings<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<FindingKey, Reported>, D::Error> {
    let written = BTreeMap::<String, Reported>::deserialize(d)?;
    Ok(written
        .into_iter()
        .filter_map(|(key, r)| Some((FindingKey::parse(&key)?, r)))
        .collect())
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

pub use crate::snapshot::tenant;

impl State {
    /// The tenant the findings of cluster `cluster_id` count toward (see `tenant`).
    pub fn tenant_of(&self, cluster_id: &str) -> String {
        let owner = self
            .clusters
            .get(cluster_id)
            .and_then(|c| c.owner_id.as_deref());
        tenant(owner, cluster_id)
    }
}

impl ClusterState {
    /// The tenant its findings count toward (`Owner::key`); a cluster of unknown owner is a
    /// tenant of its own. Storms, caps and Alertmanager's caps all count by it.
    pub fn tenant(&self, cluster_id: &str) -> String {
        tenant(self.owner_id.as_deref(), cluster_id)
    }

    pub fn side(&self, side: Side) -> &BTreeMap<FindingKey, Reported> {
        match side {
            Side::Vms => &self.vms,
            Side::Nodes => &self.nodes,
        }
    }

    pub fn side_mut(&mut self, side: Side) -> &mut BTreeMap<FindingKey, Reported> {
        match side {
            Side::Vms => &mut self.vms,
            Side::Nodes => &mut self.nodes,
        }
    }
}

/// A reported finding, as it was when first reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reported {
    /// `mapped_vm`, `unmapped_vm`, `node_without_vm`, `vm_not_a_node`, `map_count`, `blind`
    /// or `identity_conflict`.
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_state: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// For `map_count`: the map rows shown and expected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shown: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<u32>,
    /// For `blind`: why the nodes could not be listed, and since when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blind_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blind_since: Option<Timestamp>,
    /// For `identity_conflict`: the VM the node's name is (`vm_*` is the VM it is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub named_vm_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub named_vm_name: Option<String>,
    pub since: Timestamp,
    /// Its alert and annotation are held by a storm: nothing was sent for it but the event.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub held: bool,
    /// Its alert waits for its tenant's budget (`notify.owner_alert_cap`,
    /// `owner_alerts_per_hour`, the alert types kept for others): it is raised once there is
    /// room, unless the finding is gone by then.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deferred: bool,
    /// The management server's own VM map check alerts it (`notify.defer_to_server_check`):
    /// cks-drift raised no CloudStack alert or annotation for it, or took them back.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub server: bool,
    /// Since when the cycles that compared its side have not found it: it counts as gone
    /// once that is `check.resolve_after` ago, and is open until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub absent_since: Option<Timestamp>,
    /// The `[[ignore]]` rule that matches it: it raises no alert, annotation or Alertmanager
    /// alert.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignored: Option<crate::state::ignore::Ignored>,
}

impl Reported {
    pub fn new(m: &Mismatch, since: Timestamp) -> Self {
        let mut r = Reported {
            kind: m.kind.as_str().to_string(),
            vm_id: None,
            vm_name: None,
            vm_state: None,
            node: None,
            shown: None,
            expected: None,
            blind_reason: None,
            blind_since: None,
            named_vm_id: None,
            named_vm_name: None,
            since,
            held: false,
            deferred: false,
            server: false,
            absent_since: None,
            ignored: None,
        };
        match &m.subject {
            Subject::Vm(vm) => {
                r.vm_id = Some(vm.id.clone());
                r.vm_name = vm.name.clone();
                r.vm_state = Some(vm.state.clone());
            }
            Subject::Node(node) => r.node = Some(node.clone()),
            Subject::MapRows { shown, expected } => {
                r.shown = Some(*shown);
                r.expected = Some(*expected);
            }
            Subject::Blind { reason, since } => {
                r.blind_reason = Some(reason.clone());
                r.blind_since = Some(*since);
            }
            Subject::Conflict { node, is, named } => {
                r.node = Some(node.clone());
                r.vm_id = Some(is.id.clone());
                r.vm_name = is.name.clone();
                r.vm_state = Some(is.state.clone());
                r.named_vm_id = Some(named.id.clone());
                r.named_vm_name = named.name.clone();
            }
        }
        r
    }

    /// The finding it records; `None` for a record this release cannot read (an unknown
    /// kind, a subject missing), which is then dropped like a resolved one.
    pub fn mismatch(&self) -> Option<Mismatch> {
        let kind = MismatchKind::ALL
            .into_iter()
            .find(|k| k.as_str() == self.kind)?;
        let subject = match kind {
            MismatchKind::NodeWithoutVm => Subject::Node(self.node.clone()?),
            MismatchKind::MapCount => Subject::MapRows {
                shown: self.shown?,
                expected: self.expected?,
            },
            MismatchKind::Blind => Subject::Blind {
                reason: self.blind_reason.clone().unwrap_or_default(),
                since: self.blind_since.unwrap_or(self.since),
            },
            MismatchKind::IdentityConflict => Subject::Conflict {
                node: self.node.clone()?,
                is: VmRef {
                    id: self.vm_id.clone().unwrap_or_default(),
                    name: self.vm_name.clone(),
                    state: self.vm_state.clone().unwrap_or_default(),
                },
                named: VmRef {
                    id: self.named_vm_id.clone().unwrap_or_default(),
                    name: self.named_vm_name.clone(),
                    state: String::new(),
                },
            },
            _ => Subject::Vm(VmRef {
                id: self.vm_id.clone()?,
                name: self.vm_name.clone(),
                state: self.vm_state.clone().unwrap_or_default(),
            }),
        };
        Some(Mismatch { kind, subject })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VanishedRecord {
    pub name: Option<String>,
    pub how: VanishedHow,
}

/// An alert CloudStack stored for this daemon.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlertRecord {
    pub alert_id: String,
    pub alert_type: u32,
    pub zone_id: Option<String>,
    /// For a summary alert: the keys it stands for; archived once none is open.
    #[serde(default)]
    pub covers: Vec<String>,
}

/// Event level, as CloudStack names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Level {
    Info,
    Warn,
}

/// The event type every event of this check carries.
pub const EVENT_TYPE: &str = "KUBERNETES.CLUSTER.VM.MAP.CHECK";

/// A notification to deliver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Notification {
    /// A line in the event log (and the log stream).
    Event {
        level: Level,
        cluster_id: String,
        cluster: String,
        #[serde(default)]
        key: Option<String>,
        #[serde(default)]
        kind: Option<String>,
        #[serde(default)]
        vm_id: Option<String>,
        #[serde(default)]
        vm_name: Option<String>,
        #[serde(default)]
        node: Option<String>,
        description: String,
        time: Timestamp,
        /// Written in the first step after what was reported was read back from CloudStack (a
        /// takeover, a lost state) about a finding found there without a trace: the instance
        /// before may have written the same line (a storm held the finding's alert and
        /// annotation, or they were still queued).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        after_takeover: bool,
    },
    /// `generateAlert` for one mismatch, or a summary (`covers` non-empty).
    RaiseAlert {
        cluster_id: String,
        zone_id: Option<String>,
        key: String,
        description: String,
        #[serde(default)]
        covers: Vec<String>,
    },
    /// `archiveAlerts` of the alert recorded under `<cluster id>/<key>`.
    ArchiveAlert { cluster_id: String, key: String },
    /// `addAnnotation` (admin only) on the cluster.
    AddAnnotation {
        cluster_id: String,
        key: String,
        text: String,
    },
    /// `removeAnnotation` of the annotation recorded under `<cluster id>/<key>`.
    RemoveAnnotation { cluster_id: String, key: String },
    /// The finding's Alertmanager alert, sent once more with `endsAt`: resolved. (Open
    /// findings are sent every cycle from the state, not through the outbox.)
    ResolveAlertmanager {
        cluster_id: String,
        key: String,
        labels: BTreeMap<String, String>,
        annotations: BTreeMap<String, String>,
        starts_at: Timestamp,
        ends_at: Timestamp,
    },
}

impl Notification {
    /// What it is about, if anything: later notifications about the same thing wait for
    /// earlier ones.
    pub fn subject(&self) -> Option<RecordKey> {
        match self {
            Notification::Event { .. } => None,
            Notification::RaiseAlert {
                cluster_id, key, ..
            }
            | Notification::ArchiveAlert { cluster_id, key }
            | Notification::AddAnnotation {
                cluster_id, key, ..
            }
            | Notification::RemoveAnnotation { cluster_id, key }
            | Notification::ResolveAlertmanager {
                cluster_id, key, ..
            } => Some(RecordKey::new(cluster_id, key)),
        }
    }

    /// The cluster id and the finding's key it is about (`""` for an event about a whole
    /// cluster), for logs.
    pub fn finding(&self) -> (&str, &str) {
        match self {
            Notification::Event {
                cluster_id, key, ..
            } => (cluster_id, key.as_deref().unwrap_or("")),
            Notification::RaiseAlert {
                cluster_id, key, ..
            }
            | Notification::ArchiveAlert { cluster_id, key }
            | Notification::AddAnnotation {
                cluster_id, key, ..
            }
            | Notification::RemoveAnnotation { cluster_id, key }
            | Notification::ResolveAlertmanager {
                cluster_id, key, ..
            } => (cluster_id, key),
        }
    }

    /// What it does, as the state file names it: `event`, `raise_alert`, ….
    pub fn action(&self) -> &'static str {
        match self {
            Notification::Event { .. } => "event",
            Notification::RaiseAlert { .. } => "raise_alert",
            Notification::ArchiveAlert { .. } => "archive_alert",
            Notification::AddAnnotation { .. } => "add_annotation",
            Notification::RemoveAnnotation { .. } => "remove_annotation",
            Notification::ResolveAlertmanager { .. } => "resolve_alertmanager",
        }
    }

    /// The channel, for metrics: `event_log`, `alert`, `annotation` or `alertmanager`.
    pub fn channel(&self) -> &'static str {
        match self {
            Notification::Event { .. } => "event_log",
            Notification::RaiseAlert { .. } | Notification::ArchiveAlert { .. } => "alert",
            Notification::AddAnnotation { .. } | Notification::RemoveAnnotation { .. } => {
                "annotation"
            }
            Notification::ResolveAlertmanager { .. } => "alertmanager",
        }
    }
}

/// A queued notification with its id and delivery attempts so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outgoing {
    pub id: u64,
    #[serde(default)]
    pub attempts: u32,
    #[serde(default)]
    pub last_error: Option<String>,
    #[serde(flatten)]
    pub notification: Notification,
}

/// What an alert or annotation record is about: a cluster (or `STORM_SCOPE`, the whole cloud)
/// and the key of a finding, a summary or a storm. The state file writes it
/// `<cluster id>/<key>`; a cluster id holds no `/`, a key may.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RecordKey {
    pub cluster_id: String,
    pub key: String,
}

impl RecordKey {
    pub fn new(cluster_id: &str, key: &str) -> RecordKey {
        RecordKey {
            cluster_id: cluster_id.to_string(),
            key: key.to_string(),
        }
    }

    /// A finding's record.
    pub fn finding(cluster_id: &str, key: &FindingKey) -> RecordKey {
        RecordKey {
            cluster_id: cluster_id.to_string(),
            key: key.to_string(),
        }
    }
}

impl std::fmt::Display for RecordKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.cluster_id, self.key)
    }
}

/// Compares with the string form the state file writes.
impl PartialEq<str> for RecordKey {
    fn eq(&self, s: &str) -> bool {
        s.split_once('/')
            .is_some_and(|(cluster_id, key)| cluster_id == self.cluster_id && key == self.key)
    }
}

#[cfg(test)]
impl From<&str> for RecordKey {
    /// The key a test writes as the state file does.
    fn from(s: &str) -> RecordKey {
        let (cluster_id, key) = s.split_once('/').expect("<cluster id>/<key>");
        RecordKey::new(cluster_id, key)
    }
}

impl Serialize for RecordKey {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for RecordKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<RecordKey, D::Error> {
        let written = String::deserialize(d)?;
        let (cluster_id, key) = written.split_once('/').ok_or_else(|| {
            serde::de::Error::custom(format!("record key {written:?} is not <cluster id>/<key>"))
        })?;
        Ok(RecordKey::new(cluster_id, key))
    }
}
