//! Which CloudStack release answers, and what cks-drift does differently on it: the version
//! from `listCapabilities` (`cloudstackversion`), parsed, and one function per known
//! difference between the supported releases (4.16 and later). The differences themselves
//! are listed, with their source files and pull requests, in `docs/cloudstack-releases.md`.
//!
//! Pure: reading the version is the caller's (`Client::release`).

use std::fmt;

/// A release's first three numbers (`4.20.1` of `4.20.1.0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Release {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl Release {
    const fn new(major: u32, minor: u32, patch: u32) -> Release {
        Release {
            major,
            minor,
            patch,
        }
    }

    /// The oldest release cks-drift supports.
    pub const OLDEST: Release = Release::new(4, 16, 0);
    /// `listKubernetesClusters` answers the total as `count` from here on (PR 8701).
    const CLUSTER_COUNT_FIXED: Release = Release::new(4, 19, 1);
    /// `listAlertTypes` answers from here on (PR 8630).
    pub const LISTS_ALERT_TYPES: Release = Release::new(4, 19, 1);
    /// `listNetworks projectid=-1` lists every network from here on (PR 11767).
    const MINUS_ONE_LISTS_ALL_NETWORKS: Release = Release::new(4, 22, 0);

    /// Reads `cloudstackversion`: `4.20.1.0`, `4.22.0.0-SNAPSHOT`, `4.19.3.0-1` and the like.
    /// `None` for anything that does not start with three numbers.
    pub fn parse(version: &str) -> Option<Release> {
        let mut numbers = version.trim().split(['.', '-']).map(|part| {
            let digits: &str = &part[..part.bytes().take_while(u8::is_ascii_digit).count()];
            (digits.len() == part.len() && !digits.is_empty())
                .then(|| digits.parse::<u32>().ok())
                .flatten()
        });
        let major = numbers.next()??;
        let minor = numbers.next()??;
        let patch = numbers.next().flatten().unwrap_or(0);
        Some(Release::new(major, minor, patch))
    }

    /// Whether cks-drift supports this release (4.16 and later).
    pub fn supported(self) -> bool {
        self >= Release::OLDEST
    }

    /// Whether `listNetworks listall=true projectid=-1` leaves networks out, so that the
    /// others need a listing of their own (`listall=true` alone, which lists every network of
    /// no project): `NetworkServiceImpl.searchForNetworks` lists project networks alone there
    /// on 4.16, adds domain-wide ones (zone-wide Shared networks) from 4.17.1 (PR 6546) but no
    /// account's own network (an Isolated or ROUTED one) until PR 11767 (4.22).
    pub fn minus_one_leaves_networks_out(self) -> bool {
        self < Release::MINUS_ONE_LISTS_ALL_NETWORKS
    }

    /// Whether `listKubernetesClusters` answers the rows of the page as `count`
    /// (`KubernetesClusterManagerImpl.listKubernetesClusters` before PR 8701, 4.19.1). Paging
    /// never trusts `count` to end a list, so this only changes what is said about it.
    pub fn counts_cluster_page_rows(self) -> bool {
        self < Release::CLUSTER_COUNT_FIXED
    }

    /// What cks-drift does differently on this release, one line each, for
    /// `validate-config --connect`.
    pub fn differences(self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.counts_cluster_page_rows() {
            out.push(
                "listKubernetesClusters answers the rows of the page as its count (fixed in \
                 4.19.1): clusters are read page by page until a page comes back short",
            );
        }
        if self.minus_one_leaves_networks_out() {
            out.push(
                "listNetworks with projectid=-1 leaves accounts' own networks out (fixed in \
                 4.22): networks are also listed without projectid, and both listings are merged",
            );
        }
        if self.major == 4 && self.minor < 21 {
            out.push(
                "clusters' VMs carry no isetcdnode/isexternalnode (added in 4.21): etcd nodes are \
                 told by their names",
            );
        }
        out
    }
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// Whether a text CloudStack answered was URL-encoded on its way out, as every string of
/// every answer is when the global setting `encode.api.response` is true
/// (`ApiResponseSerializer`; `%` followed by two hex digits, space as `%20`). A uuid or a
/// version never holds a `%` otherwise, so one of those is the test.
pub fn url_encoded(text: &str) -> bool {
    text.as_bytes()
        .windows(3)
        .any(|w| w[0] == b'%' && w[1].is_ascii_hexdigit() && w[2].is_ascii_hexdigit())
}

/// What is said of answers that are URL-encoded.
pub const ENCODED_ANSWERS: &str = "CloudStack URL-encodes its answers (the global setting \
     encode.api.response is true), so names and markers cannot be compared; set \
     encode.api.response to false and restart the management servers";

/// Why the API key's user cannot serve cks-drift, if it cannot: its role must be of type
/// Admin (whatever its name). `AnnotationManagerImpl.isCallingUserAdmin` accepts
/// `RoleType.Admin` alone, so for any other caller `listAnnotations` leaves out admin-only
/// annotations, cks-drift's own, and listings are scoped to the caller's domain.
pub fn role_problem(user: &crate::cloudstack::model::User) -> Option<String> {
    let role_type = user.roletype.as_deref().unwrap_or("");
    if role_type == "Admin" {
        return None;
    }
    let shown = if role_type.is_empty() {
        "no role type".to_string()
    } else {
        format!(
            "a role of type {}",
            crate::base::untrusted::shown(role_type, 40)
        )
    };
    Some(format!(
        "the API key's user {} has {shown}; cks-drift needs a role of type Admin (any name): for \
         other callers CloudStack lists no admin-only annotations, cks-drift's own, and leaves \
         out the clusters of other domains; give the key to a user of an account whose role is of \
         type Admin",
        crate::base::untrusted::shown(user.username.as_deref().unwrap_or(&user.id), 80)
    ))
}

/// How the networks are listed on a release: the scopes to list, merged by id. An unknown
/// release gets both, which is right on every release (on 4.22 the second only repeats).
pub fn network_scopes(
    release: Option<Release>,
) -> &'static [&'static [(&'static str, &'static str)]] {
    const MINUS_ONE: &[(&str, &str)] = &[("listall", "true"), ("projectid", "-1")];
    const LIST_ALL: &[(&str, &str)] = &[("listall", "true")];
    match release {
        Some(r) if !r.minus_one_leaves_networks_out() => &[MINUS_ONE],
        _ => &[MINUS_ONE, LIST_ALL],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_to_their_first_three_numbers() {
        for (text, expected) in [
            ("4.20.1.0", Some(Release::new(4, 20, 1))),
            ("4.22.0.0-SNAPSHOT", Some(Release::new(4, 22, 0))),
            ("4.19.3.0-1", Some(Release::new(4, 19, 3))),
            (" 4.16.1.0 ", Some(Release::new(4, 16, 1))),
            ("4.18", Some(Release::new(4, 18, 0))),
            ("4", None),
            ("", None),
            ("four.20", None),
            ("4.2x.1", None),
        ] {
            assert_eq!(Release::parse(text), expected, "{text}");
        }
        assert_eq!(Release::new(4, 19, 0).to_string(), "4.19.0");
    }

    #[test]
    fn encoded_answers_are_told_by_their_escapes() {
        assert!(url_encoded("4%2E20%2E1%2E0"));
        assert!(url_encoded("0b1e%2D42"));
        assert!(!url_encoded("4.20.1.0"));
        assert!(!url_encoded("100%"));
        assert!(!url_encoded("%zz"));
    }

    #[test]
    fn each_difference_switches_at_its_release() {
        let r = |v| Release::parse(v).unwrap();
        assert!(!r("4.15.2.0").supported());
        assert!(r("4.16.0.0").supported());
        assert!(r("4.19.0.0").counts_cluster_page_rows());
        assert!(!r("4.19.1.0").counts_cluster_page_rows());
        assert!(r("4.21.0.0").minus_one_leaves_networks_out());
        assert!(!r("4.22.0.0").minus_one_leaves_networks_out());
        assert_eq!(network_scopes(Some(r("4.22.0.0"))).len(), 1);
        assert_eq!(network_scopes(Some(r("4.20.1.0"))).len(), 2);
        assert_eq!(network_scopes(None).len(), 2);
        assert_eq!(r("4.16.1.0").differences().len(), 3);
        assert_eq!(r("4.22.0.0").differences(), Vec::<&str>::new());
    }
}
