//! CKS node naming: which VM names belong to a cluster, and with which role.
//!
//! CKS names node VMs `<prefix>-control-<hex>`, `<prefix>-node-<hex>` and
//! `<etcd prefix>-<n>-<hex>`, where `<hex>` is the creation time in epoch milliseconds as 11
//! lowercase hex digits. The prefix depends on the release (cloudstack PR #10778, 2025): the
//! new rule lowercases and truncates to 43 characters, the old one keeps case and truncates to
//! 40. Both are matched, so clusters created before an upgrade keep being recognised. The
//! `-master` names of 4.14–4.15 are not matched.
//!
//! Pure functions only; the matching index over all clusters lives in `NameIndex`.

use std::collections::HashMap;

use crate::base::time::Timestamp;

/// The role a VM name says it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeRole {
    Control,
    Worker,
    Etcd,
}

const NEW_PREFIX_MAX: usize = 43;
const OLD_PREFIX_MAX: usize = 40;
const HEX_LEN: usize = 11;

/// `NetUtils.verifyDomainNameLabel(name, true)`: 1–63 of `[A-Za-z0-9-]`, not starting or
/// ending with `-`, not starting with a digit.
fn is_valid_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
        && !b[0].is_ascii_digit()
}

fn truncate(s: &str, max: usize) -> String {
    // Names that reach this point are ASCII, so byte truncation is safe; be defensive anyway.
    s.chars().take(max).collect()
}

fn strip(s: &str, keep_upper: bool) -> String {
    s.chars()
        .filter(|c| {
            c.is_ascii_lowercase()
                || c.is_ascii_digit()
                || *c == '-'
                || (keep_upper && c.is_ascii_uppercase())
        })
        .collect()
}

/// Control and worker prefix under the rule of 4.20.2+, 4.21+ and 4.19 after 4.19.3.
pub fn node_prefix_new(cluster_name: &str, cluster_id: &str) -> String {
    let lower = cluster_name.to_lowercase();
    if is_valid_label(&lower) {
        return truncate(&lower, NEW_PREFIX_MAX);
    }
    let mut stripped = strip(&lower, false);
    if stripped.is_empty() {
        stripped = cluster_id.to_string();
    }
    truncate(&format!("k8s-{stripped}"), NEW_PREFIX_MAX)
}

/// Control and worker prefix under the rule of 4.19.3 and earlier, 4.20.0 and 4.20.1.
pub fn node_prefix_old(cluster_name: &str, cluster_id: &str) -> String {
    let prefix = if is_valid_label(cluster_name) {
        cluster_name.to_string()
    } else {
        let mut stripped = strip(cluster_name, true);
        if stripped.is_empty() {
            stripped = cluster_id.to_string();
        }
        format!("k8s-{stripped}")
    };
    truncate(&prefix, OLD_PREFIX_MAX)
}

/// The etcd prefix (4.21+): original case, `-etcd` appended, then truncated to 40, so names
/// over 35 characters lose part or all of `-etcd`. No `k8s-`.
pub fn etcd_prefix(cluster_name: &str, cluster_id: &str) -> String {
    let mut prefix = if is_valid_label(cluster_name) {
        cluster_name.to_string()
    } else {
        strip(cluster_name, true)
    };
    if prefix.is_empty() {
        prefix = cluster_id.to_string();
    }
    truncate(&format!("{prefix}-etcd"), OLD_PREFIX_MAX)
}

fn is_hex_suffix(s: &str) -> bool {
    s.len() == HEX_LEN
        && s.bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
}

/// Splits a VM name into (prefix, role) if it has the shape of a CKS node name. For etcd
/// shapes the prefix is the etcd prefix. A name can have both shapes (`x-node-<hex>` is also
/// not an etcd name, but `x-1-<hex>` is only etcd), so every candidate is returned.
pub fn split(name: &str) -> Vec<(&str, NodeRole)> {
    let mut out = Vec::new();
    let Some((head, hex)) = name.rsplit_once('-') else {
        return out;
    };
    if !is_hex_suffix(hex) {
        return out;
    }
    if let Some(prefix) = head.strip_suffix("-control") {
        out.push((prefix, NodeRole::Control));
    }
    if let Some(prefix) = head.strip_suffix("-node") {
        out.push((prefix, NodeRole::Worker));
    }
    if let Some((prefix, n)) = head.rsplit_once('-')
        && !n.is_empty()
        && n.bytes().all(|c| c.is_ascii_digit())
    {
        out.push((prefix, NodeRole::Etcd));
    }
    out
}

/// When CKS created a VM, from the hex suffix of its name (epoch milliseconds).
pub fn created_from_name(name: &str) -> Option<Timestamp> {
    let (_, hex) = name.rsplit_once('-')?;
    if !is_hex_suffix(hex) {
        return None;
    }
    let millis = i64::from_str_radix(hex, 16).ok()?;
    Some(Timestamp::from_unix(millis / 1000))
}

/// The prefixes one cluster's node VMs may carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterPrefixes {
    pub new: String,
    pub old: String,
    pub etcd: String,
}

impl ClusterPrefixes {
    pub fn of(cluster_name: &str, cluster_id: &str) -> Self {
        ClusterPrefixes {
            new: node_prefix_new(cluster_name, cluster_id),
            old: node_prefix_old(cluster_name, cluster_id),
            etcd: etcd_prefix(cluster_name, cluster_id),
        }
    }

    /// The role `name` has as a node of this cluster, if it is named as one.
    pub fn role_of(&self, name: &str) -> Option<NodeRole> {
        split(name).into_iter().find_map(|(prefix, role)| {
            let hit = match role {
                NodeRole::Etcd => prefix == self.etcd,
                _ => prefix == self.new || prefix == self.old,
            };
            hit.then_some(role)
        })
    }
}

/// Finds, in time linear in the number of VM names, which clusters of an owner a VM is named
/// for. Keyed by (owner key, prefix); `K` is whatever identifies an owner.
#[derive(Debug)]
pub struct NameIndex<K> {
    nodes: HashMap<(K, Box<str>), Hits>,
    etcd: HashMap<(K, Box<str>), Hits>,
}

/// The clusters under one key of a [`NameIndex`]: nearly always one, held without a list of
/// its own (at 10,000 clusters, 20,000 lists of one were 1 MB).
#[derive(Debug)]
enum Hits {
    One(usize),
    Many(Vec<usize>),
}

impl Hits {
    fn as_slice(&self) -> &[usize] {
        match self {
            Hits::One(i) => std::slice::from_ref(i),
            Hits::Many(list) => list,
        }
    }

    fn add(&mut self, i: usize) {
        match self {
            Hits::One(j) if *j == i => {}
            Hits::One(j) => *self = Hits::Many(vec![*j, i]),
            Hits::Many(list) => {
                if !list.contains(&i) {
                    list.push(i);
                }
            }
        }
    }
}

impl<K: std::hash::Hash + Eq + Clone> NameIndex<K> {
    /// `clusters` yields (owner, cluster name, cluster id); results are indexes into it.
    pub fn new<'a>(clusters: impl IntoIterator<Item = (K, &'a str, &'a str)>) -> Self {
        let mut nodes: HashMap<(K, Box<str>), Hits> = HashMap::new();
        let mut etcd: HashMap<(K, Box<str>), Hits> = HashMap::new();
        for (i, (owner, name, id)) in clusters.into_iter().enumerate() {
            let p = ClusterPrefixes::of(name, id);
            let add = |map: &mut HashMap<(K, Box<str>), Hits>, prefix: String| {
                map.entry((owner.clone(), prefix.into_boxed_str()))
                    .and_modify(|hits| hits.add(i))
                    .or_insert(Hits::One(i));
            };
            add(&mut nodes, p.new);
            add(&mut nodes, p.old);
            add(&mut etcd, p.etcd);
        }
        NameIndex { nodes, etcd }
    }

    /// The clusters (indexes) of `owner` that `vm_name` is named as a node of, with the role.
    pub fn lookup(&self, owner: &K, vm_name: &str) -> Vec<(usize, NodeRole)> {
        let mut out = Vec::new();
        for (prefix, role) in split(vm_name) {
            let map = if role == NodeRole::Etcd {
                &self.etcd
            } else {
                &self.nodes
            };
            if let Some(hits) = map.get(&(owner.clone(), Box::from(prefix))) {
                for &i in hits.as_slice() {
                    if !out.iter().any(|(j, _)| *j == i) {
                        out.push((i, role));
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UUID: &str = "177d0eeb-8db7-455b-9085-33dcc591c8a3";

    #[test]
    fn new_rule_lowercases_and_truncates_to_43() {
        assert_eq!(node_prefix_new("k8s-CLUSTER-01", UUID), "k8s-cluster-01");
        assert_eq!(node_prefix_new("web", UUID), "web");
        let long = "a".repeat(50);
        assert_eq!(node_prefix_new(&long, UUID), "a".repeat(43));
        // A truncated name may end in '-', which gives "--control-".
        let dash = format!("{}-{}", "a".repeat(42), "b".repeat(10));
        assert_eq!(node_prefix_new(&dash, UUID), format!("{}-", "a".repeat(42)));
    }

    #[test]
    fn new_rule_invalid_names() {
        assert_eq!(node_prefix_new("My Cluster_1", UUID), "k8s-mycluster1");
        assert_eq!(node_prefix_new("1st", UUID), "k8s-1st");
        assert_eq!(node_prefix_new("-x-", UUID), "k8s--x-");
        assert_eq!(node_prefix_new("日本", UUID), format!("k8s-{UUID}"));
    }

    #[test]
    fn old_rule_keeps_case_and_truncates_to_40() {
        assert_eq!(node_prefix_old("Prod-Cluster", UUID), "Prod-Cluster");
        assert_eq!(node_prefix_old("My Cluster_1", UUID), "k8s-MyCluster1");
        assert_eq!(node_prefix_old(&"B".repeat(50), UUID), "B".repeat(40));
        assert_eq!(node_prefix_old("!!!", UUID), format!("k8s-{}", &UUID[..36]));
    }

    #[test]
    fn etcd_prefix_rule() {
        assert_eq!(etcd_prefix("Prod", UUID), "Prod-etcd");
        assert_eq!(etcd_prefix("My Cluster", UUID), "MyCluster-etcd");
        // A 36-character uuid plus "-etcd" is 41 characters, cut to 40.
        assert_eq!(etcd_prefix("", UUID), format!("{UUID}-etc"));
        // Names over 35 characters lose part or all of "-etcd".
        assert_eq!(
            etcd_prefix(&"c".repeat(37), UUID),
            format!("{}-et", "c".repeat(37))
        );
        assert_eq!(etcd_prefix(&"c".repeat(45), UUID), "c".repeat(40));
    }

    #[test]
    fn roles_of_names() {
        let p = ClusterPrefixes::of("web", UUID);
        assert_eq!(
            p.role_of("web-control-1803b55c32d"),
            Some(NodeRole::Control)
        );
        assert_eq!(p.role_of("web-node-1803b55f08c"), Some(NodeRole::Worker));
        assert_eq!(p.role_of("web-etcd-1-1803b55f08c"), Some(NodeRole::Etcd));
        assert_eq!(p.role_of("web-etcd-12-1803b55f08c"), Some(NodeRole::Etcd));
    }

    #[test]
    fn names_that_must_not_match() {
        let p = ClusterPrefixes::of("web", UUID);
        for name in [
            "web-2-node-1803b55f08c",     // cluster web-2
            "webapp-node-1803b55f08c",    // cluster webapp
            "web-node-1803b55f08",        // 10 hex digits
            "web-node-1803b55f08cd",      // 12 hex digits
            "web-node-1803B55F08C",       // uppercase hex
            "web-node-1",                 // the 4.14 era
            "web-master",                 // the 4.14 era
            "web-worker-1803b55f08c",     // not a CKS role
            "xweb-node-1803b55f08c",      // prefix not anchored at the start
            "web-node-1803b55f08c.local", // not anchored at the end
            "web-etcd-x-1803b55f08c",     // etcd index not a number
            "web-1-1803b55f08c",          // etcd name without -etcd
            "WEB-node-1803b55f08c",       // another case than either era
        ] {
            assert_eq!(p.role_of(name), None, "{name}");
        }
    }

    #[test]
    fn both_eras_match_a_mixed_case_cluster() {
        let p = ClusterPrefixes::of("Prod-Cluster", UUID);
        assert_eq!(
            p.role_of("Prod-Cluster-node-1803b55f08c"),
            Some(NodeRole::Worker)
        );
        assert_eq!(
            p.role_of("prod-cluster-node-1803b55f08c"),
            Some(NodeRole::Worker)
        );
        assert_eq!(
            p.role_of("Prod-Cluster-etcd-1-1803b55f08c"),
            Some(NodeRole::Etcd)
        );
        assert_eq!(p.role_of("prod-cluster-etcd-1-1803b55f08c"), None);
    }

    #[test]
    fn truncated_prefix_with_trailing_dash() {
        let name = format!("{}-{}", "a".repeat(42), "b".repeat(10));
        let p = ClusterPrefixes::of(&name, UUID);
        let vm = format!("{}--control-1803b55c32d", "a".repeat(42));
        assert_eq!(p.role_of(&vm), Some(NodeRole::Control));
    }

    #[test]
    fn created_time_from_hex() {
        // 0x1803b55c32d ms = 2022-04-18T06:21:57.677Z; the fixture's control VM was created
        // (its record written) at 06:21:58.
        let t = created_from_name("cks-cluster-control-1803b55c32d").unwrap();
        assert_eq!(t.to_cloudstack(), "2022-04-18T06:21:57+0000");
        assert_eq!(created_from_name("cks-cluster-control"), None);
    }

    #[test]
    fn index_is_per_owner_and_anchored() {
        let clusters = [
            ("acct-a", "web", "id1"),
            ("acct-a", "web-2", "id2"),
            ("acct-b", "web", "id3"),
        ];
        let idx = NameIndex::new(clusters.iter().map(|(o, n, i)| (o.to_string(), *n, *i)));
        let a = "acct-a".to_string();
        assert_eq!(
            idx.lookup(&a, "web-node-1803b55f08c"),
            vec![(0, NodeRole::Worker)]
        );
        assert_eq!(
            idx.lookup(&a, "web-2-node-1803b55f08c"),
            vec![(1, NodeRole::Worker)]
        );
        assert_eq!(
            idx.lookup(&"acct-b".to_string(), "web-node-1803b55f08c"),
            vec![(2, NodeRole::Worker)]
        );
        assert_eq!(
            idx.lookup(&"acct-c".to_string(), "web-node-1803b55f08c"),
            vec![]
        );
        assert_eq!(
            idx.lookup(&a, "web-etcd-3-1803b55f08c"),
            vec![(0, NodeRole::Etcd)]
        );
    }
}
