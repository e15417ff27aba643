//! CKS's names for a cluster's nodes: the epoch suffix, the node and etcd name prefixes and
//! the host-name label rule they follow.

use crate::time::SimTime;

/// The hexadecimal epoch milliseconds CKS appends to node names.
pub fn cks_hex(created: SimTime, extra_ms: u32) -> String {
    let ms = created.unix() * 1000 + i64::from(extra_ms % 1000);
    format!("{ms:x}")
}

/// The node-name prefix of CloudStack 4.20.2+ / 4.21+: the lowercased name, truncated to 43
/// if it is a valid host-name label, else stripped to `[a-z0-9-]` (the uuid if nothing is
/// left) behind `k8s-`, truncated to 43.
pub fn node_name_prefix(cluster_name: &str, cluster_id: &str) -> String {
    let lower = cluster_name.to_lowercase();
    let prefix = if is_host_label(&lower) {
        lower
    } else {
        let stripped: String = lower
            .chars()
            .filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
            .collect();
        let base = if stripped.is_empty() {
            cluster_id.to_string()
        } else {
            stripped
        };
        format!("k8s-{base}")
    };
    prefix.chars().take(43).collect()
}

/// The etcd host-name prefix: the original-case name (stripped to `[a-zA-Z0-9-]` if it is
/// not a valid label), then `-etcd`, then truncated to 40.
pub fn etcd_name_prefix(cluster_name: &str, cluster_id: &str) -> String {
    let base = if is_host_label(cluster_name) {
        cluster_name.to_string()
    } else {
        let stripped: String = cluster_name
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        if stripped.is_empty() {
            cluster_id.to_string()
        } else {
            stripped
        }
    };
    format!("{base}-etcd").chars().take(40).collect()
}

/// `NetUtils.verifyDomainNameLabel(name, true)`: 1–63 of `[a-zA-Z0-9-]`, not starting or
/// ending with `-`, not starting with a digit.
fn is_host_label(s: &str) -> bool {
    let b = s.as_bytes();
    (1..=63).contains(&b.len())
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
        && !b[0].is_ascii_digit()
}
