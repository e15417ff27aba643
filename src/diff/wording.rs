//! What cks-drift writes into CloudStack about a finding: the alert description, the
//! annotation text and the marker that ends both. Pure; every text is made to fit the
//! parameter it is sent in (see `cloudstack::limits`), with the marker kept whole.
//!
//! The marker lets delivery recognise what CloudStack already stored after an interrupted
//! delivery: `[cks-drift <cluster id>/<key>]` on alerts, `[cks-drift <key>]` on annotations
//! (an annotation is on the cluster already). A key that is long or holds characters outside
//! `[a-z0-9._:/-]` (a node name is the tenant's choice) is written as `<kind>:#<digest>`, so a
//! marker is short, plain ASCII, and fits a `keyword` search.

use sha1::Digest;

use crate::cloudstack::limits::{
    ALERT_DESCRIPTION_LENGTH, ANNOTATION_LENGTH, fit, fit_with_tail, one_line,
};
use crate::diff::{GONE_EXPUNGED, GONE_MISSING, Mismatch, MismatchKind, Subject, VmRef};

/// Keys up to this length (and of plain characters) are written out in markers.
const MARKER_KEY_MAX: usize = 64;

/// How much of a node name an annotation shows; the alert and the event log show it whole.
const ANNOTATION_NODE_MAX: usize = 120;

/// The key as markers write it: itself, or `<kind>:#<12 hex digits of its SHA-1>`.
pub fn marker_key(key: &str) -> String {
    let plain = key.len() <= MARKER_KEY_MAX
        && key.bytes().all(|b| {
            b.is_ascii_lowercase()
                || b.is_ascii_digit()
                || matches!(b, b'.' | b'_' | b':' | b'-' | b'/')
        });
    if plain {
        return key.to_string();
    }
    let kind: String = key
        .split(':')
        .next()
        .unwrap_or("")
        .chars()
        .filter(|c| c.is_ascii_lowercase() || *c == '_')
        .take(32)
        .collect();
    let digest = sha1::Sha1::digest(key.as_bytes());
    let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("{kind}:#{hex}")
}

/// The marker that ends an alert description.
pub fn alert_marker(cluster_id: &str, key: &str) -> String {
    format!(
        "[cks-drift {}/{}]",
        one_line(&fit(cluster_id, 64)),
        marker_key(key)
    )
}

/// The marker that ends an annotation text.
pub fn annotation_marker(key: &str) -> String {
    format!("[cks-drift {}]", marker_key(key))
}

/// The key a text's closing marker holds, as the marker writes it (see [`marker_key`]).
pub fn marked_key(text: &str) -> Option<&str> {
    marker_parts(text).map(|(_, key)| key)
}

/// The cluster id (alert markers only) and the key of a text's closing marker.
pub fn marker_parts(text: &str) -> Option<(Option<&str>, &str)> {
    let start = text.rfind("[cks-drift ")?;
    let inner = text[start + "[cks-drift ".len()..].strip_suffix(']')?;
    // A cluster id has no `:`, a key always has one: a `/` before it ends the cluster id.
    let colon = inner.find(':')?;
    Some(match inner[..colon].rfind('/') {
        Some(slash) => (Some(&inner[..slash]), &inner[slash + 1..]),
        None => (None, inner),
    })
}

/// `text` with its closing marker (if any) replaced by `marker`, fitted to `max`: how a text
/// queued by an older release is sent.
pub fn remarked(text: &str, marker: &str, max: usize) -> String {
    let body = match text.rfind(" [cks-drift ") {
        Some(i) if text.ends_with(']') => &text[..i],
        _ => text,
    };
    fit_with_tail(&one_line(body), marker, max)
}

fn hint(kind: MismatchKind) -> &'static str {
    match kind {
        MismatchKind::MappedVm => {
            "Check whether the VM was destroyed or expunged on purpose, and the cluster's VM map \
             (kubernetes_cluster_vm_map) that still lists it."
        }
        MismatchKind::UnmappedVm => {
            "Check whether the VM is a node of the cluster whose map row was lost, or a stray VM \
             named like one."
        }
        MismatchKind::NodeWithoutVm => {
            "Check the node with kubectl on the control node: a node object left behind, or a \
             machine CloudStack does not know."
        }
        MismatchKind::VmNotANode => {
            "Check kubelet on the VM and whether the node was deleted from Kubernetes."
        }
        MismatchKind::MapCount => {
            "Compare the cluster's VM map in the database with its VMs: rows may point to \
             expunged or unknown VMs."
        }
        MismatchKind::Blind => {
            "Check SSH to the control node and kubectl there (validate-config --connect shows the \
             step that fails); its node-side findings stay as they were until the nodes are \
             listed again."
        }
        MismatchKind::IdentityConflict => {
            "Check the node's system UUID and provider ID with kubectl on the control node \
             (kubectl get node <name> -o yaml): a node its tenant renamed to another VM's name, \
             or a machine posing as that VM. The node is matched to the VM it is, not to the one \
             it is named like."
        }
    }
}

/// The short hint of an annotation.
fn short_hint(kind: MismatchKind) -> &'static str {
    match kind {
        MismatchKind::MappedVm => "Check the VM map row.",
        MismatchKind::UnmappedVm => "Check for a lost map row.",
        MismatchKind::NodeWithoutVm => "Check the node with kubectl.",
        MismatchKind::VmNotANode => "Check kubelet on the VM.",
        MismatchKind::MapCount => "Check the map rows in the database.",
        MismatchKind::Blind => "Check SSH and kubectl on the control node.",
        MismatchKind::IdentityConflict => "Check which machine the node is.",
    }
}

/// Why a cluster's nodes could not be listed, in plain words, from the failure's label
/// (`NodeListError::reason`) and the cycle's reason (tenant text in it is bounded and escaped).
pub fn blind_reason(label: Option<&str>, reason: Option<&str>) -> String {
    let detail = reason
        .unwrap_or("")
        .trim_start_matches("nodes not listed: ")
        .lines()
        .next()
        .unwrap_or("");
    let detail = crate::base::untrusted::shown(detail, 200);
    let what = match label {
        Some("host_key") => {
            "the SSH host key of the control node changed, which may mean a machine is posing as \
             it: verify the new key on the node's console (ssh-keygen -lf \
             /etc/ssh/ssh_host_ed25519_key.pub) before replacing its line in ssh.known_hosts"
        }
        Some("connect") => "SSH to the control node is refused or unreachable",
        Some("timeout") => "SSH or the node listing timed out",
        Some("auth") => "SSH authentication was refused",
        Some("command") => "the node listing command (kubectl) failed",
        Some("output") => "the node listing's output could not be used",
        Some(crate::inventory::NOT_STARTED) => {
            "the node listings of the cycle ran out of time before its turn; it is listed first \
             next cycle"
        }
        _ => return detail,
    };
    if detail.is_empty() {
        what.to_string()
    } else {
        format!("{what} ({detail})")
    }
}

/// `VM <name> (<id>)`, or `VM <id>` when its name is unknown.
fn vm_words(vm: &VmRef) -> String {
    match &vm.name {
        Some(name) => format!("VM {name} ({})", vm.id),
        None => format!("VM {}", vm.id),
    }
}

/// The subject of a finding for a person: `VM <name> (<id>)`, `node <name>` or `VM map`.
pub fn subject(m: &Mismatch) -> String {
    match &m.subject {
        Subject::Vm(VmRef {
            id,
            name: Some(name),
            ..
        }) => format!("VM {name} ({id})"),
        Subject::Vm(VmRef { id, name: None, .. }) => format!("VM {id}"),
        Subject::Node(node) | Subject::Conflict { node, .. } => format!("node {node}"),
        Subject::MapRows { .. } => "VM map".to_string(),
        Subject::Blind { .. } => "Kubernetes nodes".to_string(),
    }
}

/// The subject with the VM's state, as the text report lists findings:
/// `VM <name> (<id>, <state>)`, `node <name>` or `map <shown>/<expected>`.
pub fn subject_with_state(m: &Mismatch) -> String {
    match &m.subject {
        Subject::Vm(VmRef {
            id,
            name: Some(name),
            state,
        }) => format!("VM {name} ({id}, {state})"),
        Subject::Vm(VmRef {
            id,
            name: None,
            state,
        }) => format!("VM {id} ({state})"),
        Subject::Node(node) | Subject::Conflict { node, .. } => format!("node {node}"),
        Subject::MapRows { shown, expected } => format!("map {shown}/{expected}"),
        Subject::Blind { since, .. } => format!("nodes unseen since {since}"),
    }
}

/// What was found, in one sentence naming the cluster: the event description, the reason in
/// the report and the core of the alert.
pub fn reason(cluster: &str, m: &Mismatch) -> String {
    match (&m.subject, m.kind) {
        (Subject::Vm(vm), MismatchKind::MappedVm) => {
            let what = match vm.state.as_str() {
                "Destroyed" => "is destroyed",
                "Expunging" => "has been or is being expunged",
                "Error" => "is in Error state",
                GONE_EXPUNGED => "has been expunged or unmanaged",
                GONE_MISSING => "does not exist",
                _ => "is not usable",
            };
            let who = match &vm.name {
                Some(name) => format!("VM {name} ({})", vm.id),
                None => format!("VM with ID {}", vm.id),
            };
            format!(
                "{who} is one of the VMs of Kubernetes cluster {cluster} in CloudStack, but {what}"
            )
        }
        (Subject::Vm(vm), MismatchKind::UnmappedVm) => format!(
            "VM {} ({}, {}) is named as a node of Kubernetes cluster {cluster} but is not one of \
             its VMs in CloudStack",
            vm.name.as_deref().unwrap_or("?"),
            vm.id,
            vm.state
        ),
        (Subject::Vm(vm), _) => format!(
            "VM {} ({}) of Kubernetes cluster {cluster} is running but is not a Kubernetes node \
             of the cluster",
            vm.name.as_deref().unwrap_or("?"),
            vm.id
        ),
        (Subject::Node(node), _) => format!(
            "Kubernetes node {node} of cluster {cluster} matches no VM of the cluster in CloudStack"
        ),
        (Subject::MapRows { shown, expected }, _) => format!(
            "Kubernetes cluster {cluster} should have {expected} VMs (control nodes + size + etcd \
             nodes) but its VM map shows {shown}: {} map rows are missing or point to removed VMs",
            expected.saturating_sub(*shown)
        ),
        (Subject::Blind { reason, since }, _) => format!(
            "Kubernetes nodes of cluster {cluster} have not been listed since {since}, so its VM \
             map has not been compared with them: {reason}"
        ),
        (Subject::Conflict { node, is, named }, _) => format!(
            "Kubernetes node {node} of cluster {cluster} is named like {} but is {} by its system \
             UUID or provider ID",
            vm_words(named),
            vm_words(is)
        ),
    }
}

/// The alert description (at most 999 units): the cluster and the VM or node first, then
/// what was found, that nothing was changed, what to check, and the marker.
pub fn alert_description(cluster: &str, cluster_id: &str, m: &Mismatch) -> String {
    let body = format!(
        "Kubernetes cluster {cluster}, {}: {}. Nothing was changed. {}",
        subject(m),
        reason(cluster, m),
        hint(m.kind)
    );
    fit_with_tail(
        &one_line(&body),
        &alert_marker(cluster_id, &m.key().to_string()),
        ALERT_DESCRIPTION_LENGTH,
    )
}

/// The description of the alert that sums up the new findings past the cap.
pub fn summary_description(
    cluster: &str,
    cluster_id: &str,
    key: &str,
    rest: &[&Mismatch],
) -> String {
    let list: Vec<String> = rest.iter().map(|m| m.key().to_string()).collect();
    let body = format!(
        "Kubernetes cluster {cluster}: {} more VM map mismatches found at once ({}). Nothing was \
         changed. Each is in the event log and in an annotation on the cluster.",
        rest.len(),
        list.join(", ")
    );
    fit_with_tail(
        &one_line(&body),
        &alert_marker(cluster_id, key),
        ALERT_DESCRIPTION_LENGTH,
    )
}

/// What a finding is, in words that name no cluster, VM or node: the storm alert counts
/// findings by it. A blind finding's reason is cut before its detail.
pub fn cause(m: &Mismatch) -> String {
    let text = match (m.kind, &m.subject) {
        (MismatchKind::MappedVm, Subject::Vm(vm)) => match vm.state.as_str() {
            "Destroyed" => "a mapped VM is destroyed",
            "Expunging" => "a mapped VM is being expunged",
            "Error" => "a mapped VM is in Error state",
            GONE_EXPUNGED => "a mapped VM has been expunged or unmanaged",
            GONE_MISSING => "a map row points to no VM",
            _ => "a mapped VM is not usable",
        },
        (MismatchKind::MappedVm, _) => "a mapped VM is not usable",
        (MismatchKind::UnmappedVm, _) => "a VM named as a node is not in the map",
        (MismatchKind::NodeWithoutVm, _) => "a Kubernetes node matches no VM",
        (MismatchKind::VmNotANode, _) => "a mapped running VM is not a Kubernetes node",
        (MismatchKind::MapCount, _) => "the map has fewer rows than VMs expected",
        (MismatchKind::Blind, Subject::Blind { reason, .. }) => {
            let end = [" (", ": "]
                .iter()
                .filter_map(|sep| reason.find(sep))
                .min()
                .unwrap_or(reason.len());
            let head = reason[..end].trim();
            if !head.is_empty() {
                return fit(head, 120);
            }
            "the nodes could not be listed"
        }
        (MismatchKind::Blind, _) => "the nodes could not be listed",
        (MismatchKind::IdentityConflict, _) => {
            "a node is one VM by its system UUID but named like another"
        }
    };
    text.to_string()
}

/// The cluster id a storm's alert is marked and recorded with (`cloud/storm:<time>`): it is
/// about no one cluster, and no cluster id (a UUID) can be this word.
pub const STORM_SCOPE: &str = "cloud";

/// The `alertname` of every Alertmanager alert.
pub const ALERTMANAGER_ALERTNAME: &str = "KubernetesClusterVmMapDrift";

/// Longest label or annotation value sent to Alertmanager (tenant text is bounded).
const ALERTMANAGER_VALUE_MAX: usize = 1024;

/// The identifying labels of a finding's Alertmanager alert: stable while the finding is
/// open (its fingerprint), so routes, groups and silences can match them.
pub fn alertmanager_labels(
    cluster_id: &str,
    cluster: &str,
    zone_id: Option<&str>,
    owner: Option<&str>,
    m: &Mismatch,
) -> std::collections::BTreeMap<String, String> {
    let value = |s: &str| crate::base::untrusted::shown(s, ALERTMANAGER_VALUE_MAX);
    let mut labels = std::collections::BTreeMap::new();
    labels.insert("alertname".to_string(), ALERTMANAGER_ALERTNAME.to_string());
    labels.insert("cluster".to_string(), value(cluster));
    labels.insert("cluster_id".to_string(), value(cluster_id));
    labels.insert("kind".to_string(), m.kind.as_str().to_string());
    labels.insert("key".to_string(), value(&m.key().to_string()));
    if let Some(vm) = m.vm() {
        labels.insert("vm_id".to_string(), value(&vm.id));
        if let Some(name) = &vm.name {
            labels.insert("vm".to_string(), value(name));
        }
    }
    if let Subject::Node(node) | Subject::Conflict { node, .. } = &m.subject {
        labels.insert("node".to_string(), value(node));
    }
    if let Some(zone) = zone_id {
        labels.insert("zone".to_string(), value(zone));
    }
    if let Some(owner) = owner {
        labels.insert("owner".to_string(), value(owner));
    }
    labels
}

/// Who a cluster is, as an Alertmanager alert labels it.
pub struct LabelledCluster<'a> {
    pub id: &'a str,
    pub name: &'a str,
    pub zone_id: Option<&'a str>,
    pub owner: Option<&'a str>,
}

/// The labels and annotations of the Alertmanager alert that sums up a cluster's findings
/// past `notify.alert_cap` (`kind` and `key` `summary`).
pub fn alertmanager_summary(
    c: &LabelledCluster<'_>,
    rest: &[&Mismatch],
) -> (
    std::collections::BTreeMap<String, String>,
    std::collections::BTreeMap<String, String>,
) {
    let value = |s: &str| crate::base::untrusted::shown(s, ALERTMANAGER_VALUE_MAX);
    let mut labels = std::collections::BTreeMap::new();
    labels.insert("alertname".to_string(), ALERTMANAGER_ALERTNAME.to_string());
    labels.insert("cluster".to_string(), value(c.name));
    labels.insert("cluster_id".to_string(), value(c.id));
    labels.insert("kind".to_string(), "summary".to_string());
    labels.insert("key".to_string(), "summary".to_string());
    if let Some(zone) = c.zone_id {
        labels.insert("zone".to_string(), value(zone));
    }
    if let Some(owner) = c.owner {
        labels.insert("owner".to_string(), value(owner));
    }
    let mut kinds: Vec<(MismatchKind, usize)> = Vec::new();
    for m in rest {
        match kinds.iter_mut().find(|(k, _)| *k == m.kind) {
            Some((_, n)) => *n += 1,
            None => kinds.push((m.kind, 1)),
        }
    }
    kinds.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let kinds: Vec<String> = kinds
        .iter()
        .map(|(k, n)| format!("{} {n}", k.as_str()))
        .collect();
    let mut annotations = std::collections::BTreeMap::new();
    annotations.insert(
        "summary".to_string(),
        value(&format!(
            "{} more VM map findings in Kubernetes cluster {}: {}",
            rest.len(),
            c.name,
            kinds.join(", ")
        )),
    );
    annotations.insert(
        "description".to_string(),
        "More findings than notify.alert_cap (or the tenant's notify.owner_alert_cap) allow as \
         alerts of their own; each is in cks-drift's event log and report. Nothing was changed."
            .to_string(),
    );
    (labels, annotations)
}

/// The labels and annotations of the Alertmanager alert of a storm under way (its alert's
/// `key`, since when, in how many of the clusters checked), which stands for the findings it
/// holds (`kind` `storm`).
pub fn alertmanager_storm(
    key: &str,
    since: crate::base::time::Timestamp,
    clusters: usize,
    checked: usize,
) -> (
    std::collections::BTreeMap<String, String>,
    std::collections::BTreeMap<String, String>,
) {
    let mut labels = std::collections::BTreeMap::new();
    labels.insert("alertname".to_string(), ALERTMANAGER_ALERTNAME.to_string());
    labels.insert("kind".to_string(), "storm".to_string());
    labels.insert("key".to_string(), key.to_string());
    let mut annotations = std::collections::BTreeMap::new();
    annotations.insert(
        "summary".to_string(),
        format!(
            "A storm of VM map findings since {}: new findings in {} of {} checked clusters at \
             once",
            since, clusters, checked
        ),
    );
    annotations.insert(
        "description".to_string(),
        "A cause common to many clusters (storage, network, SSH, a template or an upgrade) is \
         likely. The findings' own alerts are held until it ends; each is in cks-drift's event \
         log and report now. Nothing was changed."
            .to_string(),
    );
    (labels, annotations)
}

/// The annotations of a finding's Alertmanager alert, for people.
pub fn alertmanager_annotations(
    cluster: &str,
    m: &Mismatch,
) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    out.insert(
        "summary".to_string(),
        crate::base::untrusted::shown(
            &format!(
                "{} in Kubernetes cluster {cluster}: {}",
                m.kind.as_str(),
                subject(m)
            ),
            ALERTMANAGER_VALUE_MAX,
        ),
    );
    out.insert(
        "description".to_string(),
        crate::base::untrusted::shown(
            &format!(
                "{}. Nothing was changed. {}",
                reason(cluster, m),
                hint(m.kind)
            ),
            ALERTMANAGER_VALUE_MAX * 2,
        ),
    );
    out.insert("reason".to_string(), cause(m));
    out
}

/// How many causes the storm alert names.
const STORM_CAUSES: usize = 3;

/// The storm alert's description (at most 999 units): how many clusters drifted at once, the
/// findings by kind, the commonest causes, what is held and until when, and the marker.
pub fn storm_description(
    key: &str,
    clusters: usize,
    checked: usize,
    threshold: usize,
    findings: &[&Mismatch],
) -> String {
    let mut kinds: Vec<(MismatchKind, usize)> = Vec::new();
    let mut causes: Vec<(String, usize)> = Vec::new();
    for m in findings {
        match kinds.iter_mut().find(|(k, _)| *k == m.kind) {
            Some((_, n)) => *n += 1,
            None => kinds.push((m.kind, 1)),
        }
        let c = cause(m);
        match causes.iter_mut().find(|(k, _)| *k == c) {
            Some((_, n)) => *n += 1,
            None => causes.push((c, 1)),
        }
    }
    kinds.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    causes.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let kinds: Vec<String> = kinds
        .iter()
        .map(|(k, n)| format!("{} {n}", k.as_str()))
        .collect();
    let causes: Vec<String> = causes
        .iter()
        .take(STORM_CAUSES)
        .map(|(c, n)| format!("{c} ({n})"))
        .collect();
    let body = format!(
        "Kubernetes cluster VM maps: {} new findings in {clusters} of {checked} checked clusters \
         at once, more than notify.storm_clusters ({threshold}): {}. Most common: {}. A cause \
         common to many clusters (storage, network, SSH, a template or an upgrade) is likely. \
         Nothing was changed. Their alerts and annotations are held until no more than \
         {threshold} clusters have findings not yet alerted; each finding is in the event log and \
         the report now.",
        findings.len(),
        kinds.join(", "),
        causes.join("; "),
    );
    fit_with_tail(
        &one_line(&body),
        &alert_marker(STORM_SCOPE, key),
        ALERT_DESCRIPTION_LENGTH,
    )
}

/// The annotation text (at most 255 units): the VM (name; its id is in the marker) or the
/// node, what was found, that nothing was changed, a short hint, and the marker. The
/// cluster is the annotated entity, so it is not named.
pub fn annotation_text(m: &Mismatch) -> String {
    let what = match &m.subject {
        Subject::Vm(vm) => {
            let who = match &vm.name {
                Some(name) => format!("VM {}", fit(name, 80)),
                None => format!("VM {}", vm.id),
            };
            match m.kind {
                MismatchKind::MappedVm => {
                    let state = match vm.state.as_str() {
                        "Destroyed" => "is destroyed",
                        "Expunging" => "is being expunged",
                        "Error" => "is in Error state",
                        GONE_EXPUNGED => "has been expunged or unmanaged",
                        GONE_MISSING => "does not exist",
                        _ => "is not usable",
                    };
                    format!("{who} in the VM map of this cluster {state}.")
                }
                MismatchKind::UnmappedVm => format!(
                    "{who} ({}) is named as a node of this cluster but is not in its VM map.",
                    vm.state
                ),
                _ => format!(
                    "{who} in the VM map of this cluster is running but is not a Kubernetes node."
                ),
            }
        }
        Subject::Node(node) => format!(
            "Kubernetes node {} matches no VM of this cluster.",
            fit(node, ANNOTATION_NODE_MAX)
        ),
        Subject::MapRows { shown, expected } => format!(
            "The VM map of this cluster shows {shown} of {expected} VMs: rows are missing or \
             point to removed VMs."
        ),
        Subject::Blind { reason, since } => format!(
            "The nodes of this cluster have not been listed since {since}: {}.",
            fit(reason, 120)
        ),
        Subject::Conflict { node, is, named } => format!(
            "Kubernetes node {} is named like VM {} but is VM {} by its system UUID or provider \
             ID.",
            fit(node, ANNOTATION_NODE_MAX),
            fit(named.name.as_deref().unwrap_or(&named.id), 80),
            fit(is.name.as_deref().unwrap_or(&is.id), 80)
        ),
    };
    let body = format!("{what} Nothing was changed. {}", short_hint(m.kind));
    fit_with_tail(
        &one_line(&body),
        &annotation_marker(&m.key().to_string()),
        ANNOTATION_LENGTH,
    )
}

#[cfg(test)]
mod tests;
