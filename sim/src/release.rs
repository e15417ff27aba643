//! Which CloudStack release the simulated server answers as, and every known difference
//! between the releases cks-drift supports that a client can see. Each switch names the
//! source file and the pull request of apache/cloudstack that made the difference; the
//! handlers in `commands` and `render` ask these switches, never the version number.
//!
//! Read against the release branches 4.16, 4.18, 4.19, 4.20, 4.21 and main (4.22); the
//! project's `docs/cloudstack-releases.md` lists the same differences for operators.

/// A release line, with the version `listCapabilities` answers for it. Ordered: a later
/// variant is a later release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Release {
    V4_15,
    V4_16,
    V4_18,
    V4_19_0,
    V4_19_1,
    V4_20,
    V4_21,
    V4_22,
}

impl Release {
    /// The releases cks-drift supports, oldest first: the integration tests run against each.
    pub const SUPPORTED: [Release; 7] = [
        Release::V4_16,
        Release::V4_18,
        Release::V4_19_0,
        Release::V4_19_1,
        Release::V4_20,
        Release::V4_21,
        Release::V4_22,
    ];

    /// The newest release: what a `World` answers as unless told otherwise.
    pub const NEWEST: Release = Release::V4_22;

    /// `listCapabilities`' `cloudstackversion` (`ManagementServerImpl.getVersion`: the
    /// implementation version of the management server's jar, four numbers).
    pub fn version(self) -> &'static str {
        match self {
            Release::V4_15 => "4.15.2.0",
            Release::V4_16 => "4.16.1.0",
            Release::V4_18 => "4.18.2.0",
            Release::V4_19_0 => "4.19.0.0",
            Release::V4_19_1 => "4.19.1.0",
            Release::V4_20 => "4.20.1.0",
            Release::V4_21 => "4.21.0.0",
            Release::V4_22 => "4.22.0.0",
        }
    }

    /// The release a short name names (`4.19.0`, `4.22`), as [`Release::name`] writes it.
    pub fn from_name(name: &str) -> Option<Release> {
        [Release::V4_15]
            .into_iter()
            .chain(Release::SUPPORTED)
            .find(|r| r.name() == name)
    }

    /// The short name the tests print.
    pub fn name(self) -> &'static str {
        match self {
            Release::V4_15 => "4.15",
            Release::V4_16 => "4.16",
            Release::V4_18 => "4.18",
            Release::V4_19_0 => "4.19.0",
            Release::V4_19_1 => "4.19.1",
            Release::V4_20 => "4.20",
            Release::V4_21 => "4.21",
            Release::V4_22 => "4.22",
        }
    }

    /// `listKubernetesClusters` answers the rows of the page as `count`, not the number of
    /// matches: `KubernetesClusterManagerImpl.listKubernetesClusters`
    /// (plugins/integrations/kubernetes-service) built its `ListResponse` with
    /// `setResponses(list)` alone, and `ListResponse.getCount()` falls back to the list's
    /// size. Fixed by PR 8701 "cks: fix list apis response count", first in 4.19.1.
    pub fn counts_cluster_page_rows(self) -> bool {
        self < Release::V4_19_1
    }

    /// Which networks `listNetworks listall=true projectid=-1` shows the root admin
    /// (`NetworkServiceImpl.searchForNetworks` and `buildNetworkSearchCriteria`,
    /// server/src/main/java/com/cloud/network/NetworkServiceImpl.java): on 4.16 (and 4.17.0)
    /// project networks alone, `-1` turning into `skipProjectNetworks = false` and a join on
    /// `account.type = PROJECT` (apache/cloudstack issue 9602); from 4.17.1 (PR 6546) also the
    /// domain-wide networks (a zone-wide Shared network) but still no account's own network
    /// (an Isolated or ROUTED one); everything on 4.19.1 (the PR 9184 rework, undone by PR 9461
    /// in 4.19.2) and from 4.22 (PR 11767, `addProjectNetworksConditionToSearch`).
    pub fn minus_one_networks(self) -> MinusOneNetworks {
        match self {
            Release::V4_15 | Release::V4_16 => MinusOneNetworks::ProjectsOnly,
            Release::V4_19_1 | Release::V4_22 => MinusOneNetworks::All,
            _ => MinusOneNetworks::ProjectsAndDomainWide,
        }
    }

    /// `listNetworks listall=true` without `projectid` shows project networks too: only on
    /// 4.19.1, by the PR 9184 rework of `searchForNetworks`, fixed by PR 9461 (4.19.2, 4.20.0).
    /// Every other release lists the networks of no project there.
    pub fn list_all_networks_include_projects(self) -> bool {
        self == Release::V4_19_1
    }

    /// Networks carry `networkmode` (`NATTED` or `ROUTED`), and ROUTED networks exist: the
    /// routed-network work of 4.20 (`NetworkOffering.NetworkMode`, PR 9470).
    pub fn has_network_mode(self) -> bool {
        self >= Release::V4_20
    }

    /// A cluster's `virtualmachines` rows carry `isetcdnode`, `isexternalnode` and
    /// `kubernetesnodeversion` (`KubernetesUserVmResponse`, PR 9102 in 4.21; the map table
    /// gained `etcd_node`, `external_node` and `kubernetes_node_version` in
    /// `schema-42010to42100.sql`).
    pub fn has_cluster_node_flags(self) -> bool {
        self >= Release::V4_21
    }

    /// VMs that CKS created are listed with `vmtype` `cksnode` (4.20, `UserVmResponse`).
    pub fn has_cks_vm_type(self) -> bool {
        self >= Release::V4_20
    }

    /// `listKubernetesClusters` answers `clustertype` and accepts the `clustertype` filter
    /// (ExternalManaged clusters, PR 7515, first in 4.19.0; `ListKubernetesClustersCmd`).
    pub fn has_cluster_type(self) -> bool {
        self >= Release::V4_19_0
    }

    /// `ApiConstants.VMDetails` has `vnfnics` (4.19.0), which the `details` error lists.
    pub fn has_vnf_nics_detail(self) -> bool {
        self >= Release::V4_19_0
    }
}

/// What `listNetworks listall=true projectid=-1` shows the root admin (see
/// [`Release::minus_one_networks`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MinusOneNetworks {
    ProjectsOnly,
    /// Project networks and domain-wide ones (zone-wide Shared networks).
    ProjectsAndDomainWide,
    All,
}

impl Default for Release {
    fn default() -> Self {
        Release::NEWEST
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn supported_releases_are_in_order_and_answer_distinct_versions() {
        let mut versions: Vec<&str> = Release::SUPPORTED.iter().map(|r| r.version()).collect();
        assert!(Release::SUPPORTED.windows(2).all(|w| w[0] < w[1]));
        versions.dedup();
        assert_eq!(versions.len(), Release::SUPPORTED.len());
        assert_eq!(Release::default(), Release::V4_22);
    }

    #[test]
    fn each_difference_switches_at_its_release() {
        assert!(Release::V4_19_0.counts_cluster_page_rows());
        assert!(!Release::V4_19_1.counts_cluster_page_rows());
        assert_eq!(
            Release::V4_16.minus_one_networks(),
            MinusOneNetworks::ProjectsOnly
        );
        assert_eq!(
            Release::V4_21.minus_one_networks(),
            MinusOneNetworks::ProjectsAndDomainWide
        );
        assert_eq!(Release::V4_19_1.minus_one_networks(), MinusOneNetworks::All);
        assert_eq!(Release::V4_22.minus_one_networks(), MinusOneNetworks::All);
        assert!(Release::V4_19_1.list_all_networks_include_projects());
        assert!(!Release::V4_20.list_all_networks_include_projects());
        assert!(!Release::V4_19_1.has_network_mode());
        assert!(Release::V4_20.has_network_mode());
        assert!(!Release::V4_20.has_cluster_node_flags());
        assert!(Release::V4_21.has_cluster_node_flags());
    }
}
