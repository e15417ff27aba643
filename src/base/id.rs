//! The shape of the ids CloudStack gives VMs and clusters.

/// Whether `s` is a UUID (8-4-4-4-12 hexadecimal digits, either case): how CloudStack writes
/// the ids of VMs and clusters, unique in the whole cloud, unlike their names.
pub fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.bytes().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}
