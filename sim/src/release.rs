//! Which CloudStack release the simulated server answers as, and every known difference
//! between the releases cks-drift supports that a client can see. Each switch names the
//! source file and the pull request of apache/cloudstack that made the difference; the
//! handlers in `commands` and `render` ask these switches, never the version number.
//!
//! Read against the release points 4.16, 4.18, 4.19, 4.20, 4.21, 4.22.0, 4.22.1 and `main` of
//! 2026-06-11 (4.23.0.0-SNAPSHOT); the project's `docs/cloudstack-releases.md` lists the same
//! differences for operators.

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
    /// 4.22.0.0 as released (the same code as `main` of 2025-10-30).
    V4_22,
    V4_22_1,
    /// `main` of 2026-06-11, 4.23.0.0-SNAPSHOT: API key pairs (PR 9504), per-node-type
    /// affinity groups (PR 12386).
    V4_23,
}

impl Release {
    /// The releases cks-drift supports, oldest first: the integration tests run against each.
    pub const SUPPORTED: [Release; 9] = [
        Release::V4_16,
        Release::V4_18,
        Release::V4_19_0,
        Release::V4_19_1,
        Release::V4_20,
        Release::V4_21,
        Release::V4_22,
        Release::V4_22_1,
        Release::V4_23,
    ];

    /// The newest release made: what a `World` answers as unless told otherwise.
    pub const NEWEST: Release = Release::V4_22_1;

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
            Release::V4_22_1 => "4.22.1.0",
            Release::V4_23 => "4.23.0.0-SNAPSHOT",
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
            Release::V4_22 => "4.22.0",
            Release::V4_22_1 => "4.22.1",
            Release::V4_23 => "4.23",
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
            Release::V4_19_1 | Release::V4_22 | Release::V4_22_1 | Release::V4_23 => {
                MinusOneNetworks::All
            }
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

    /// `listAlertTypes` exists (`ListAlertTypesCmd`, PR 8630, first in 4.19.1): the default
    /// alert types, each `alerttypeid` and `name`; `repetitionallowed` too on 4.23 (PR 11325,
    /// `AlertTypeResponse`). Before, the command is unknown.
    pub fn has_list_alert_types(self) -> bool {
        self >= Release::V4_19_1
    }

    /// `AlertTypeResponse` answers `repetitionallowed` (PR 11325, on `main` only).
    pub fn has_repetition_allowed(self) -> bool {
        self >= Release::V4_23
    }

    /// The default alert types (`AlertService.AlertType`, created with `isDefault`), by number
    /// with every name the number has: `generateAlert` refuses a number of these under any
    /// other name. Several names share a number where a pull request reused one; the server
    /// asks whichever its `HashSet` yields first.
    /// - 4.16: 0 to 32, one name each (32 `ALERT.VM.SNAPSHOT`).
    /// - 4.17 (PR 5786): `ALERT.NETWORK.IPV6SUBNET` at 10.
    /// - 4.18 (PR 6426): `ALERT.VR.PUBLIC.IFACE.MTU` and `ALERT.VR.PRIVATE.IFACE.MTU` at 32.
    /// - 4.21 (PR 9752, PR 10140): `ALERT.TYPE.EXTENSION.PATH.NOT.READY` at 33,
    ///   `ALERT.STORAGE.OBJECT` at 20 and `ALERT.STORAGE.BACKUP` at 21.
    /// - 4.22.1 (PR 12527, `schema-42200to42210.sql`): the MTU types move to 33 and 34.
    /// - 4.23 (`main`, PR 12193): `ALERT.S2S.VPN.GATEWAY.OBSOLETE.PARAMETERS` at 34.
    ///
    /// The 4.20 line took PR 12527 in 4.20.3, after the 4.20.1 modelled here.
    pub fn default_alert_types(self) -> Vec<(i16, Vec<&'static str>)> {
        let mut types: Vec<(i16, Vec<&'static str>)> = DEFAULT_ALERT_TYPES_4_16
            .iter()
            .map(|(t, n)| (*t, vec![*n]))
            .collect();
        let mut add = |t: i16, name: &'static str| match types.iter_mut().find(|(n, _)| *n == t) {
            Some((_, names)) => names.push(name),
            None => types.push((t, vec![name])),
        };
        if self >= Release::V4_18 {
            add(10, "ALERT.NETWORK.IPV6SUBNET");
        }
        let (public_mtu, private_mtu) = if self >= Release::V4_22_1 {
            (33, 34)
        } else {
            (32, 32)
        };
        if self >= Release::V4_18 {
            add(public_mtu, "ALERT.VR.PUBLIC.IFACE.MTU");
            add(private_mtu, "ALERT.VR.PRIVATE.IFACE.MTU");
        }
        if self >= Release::V4_21 {
            add(33, "ALERT.TYPE.EXTENSION.PATH.NOT.READY");
            add(20, "ALERT.STORAGE.OBJECT");
            add(21, "ALERT.STORAGE.BACKUP");
        }
        if self >= Release::V4_23 {
            add(34, "ALERT.S2S.VPN.GATEWAY.OBSOLETE.PARAMETERS");
        }
        types.sort_by_key(|(t, _)| *t);
        types
    }

    /// The text of a command the caller's role does not allow
    /// (`DynamicRoleBasedAPIAccessChecker.checkAccess`, `UnavailableCommandException`): PR 6412
    /// (4.18) named the account as its `toString`, PR 9840 (4.20.1) by the user's uuid, PR 9504
    /// (4.23) by the account's name.
    pub fn unavailable_command_text(self, command: &str, account: &str, user_id: &str) -> String {
        match self {
            Release::V4_15 | Release::V4_16 => {
                format!("The API {command} does not exist or is not available for this account.")
            }
            Release::V4_18 | Release::V4_19_0 | Release::V4_19_1 => format!(
                "The API [{command}] does not exist or is not available for the account \
                 Account [{{\"id\": 2, \"name\": \"{account}\", \"uuid\": \"{user_id}\"}}]."
            ),
            Release::V4_23 => format!(
                "The API [{command}] does not exist or is not available for the account {account}."
            ),
            _ => format!(
                "The API [{command}] does not exist or is not available for the account for user \
                 id [{user_id}]."
            ),
        }
    }

    /// `listCapabilities` answers `additionalconfigenabled` (PR 11719: 4.20.2 and 4.22.0, not
    /// 4.21.0; the 4.20 modelled here is 4.20.1).
    pub fn has_additional_config_capability(self) -> bool {
        self >= Release::V4_22
    }

    /// `listCapabilities` answers `snapshotshowchainsize` (PR 12468, 4.22.1).
    pub fn has_snapshot_chain_size_capability(self) -> bool {
        self >= Release::V4_22_1
    }

    /// API keys live in `cloud.api_keypair` (PR 9504, `schema-42210to42300.sql`): a user may
    /// hold several key pairs, each with its own permission rules that can only narrow the
    /// account's role (`ApiKeyPairManagerImpl`). `getUser userapikey=` finds the user through
    /// the pair (`AccountManagerImpl.getUserByApiKey`) and answers as `apikey` the user's
    /// newest pair, not necessarily the one asked about.
    pub fn has_api_key_pairs(self) -> bool {
        self >= Release::V4_23
    }

    /// `listKubernetesClusters` builds `virtualmachines` from a `HashMap` keyed by the VMs'
    /// internal ids, collected with `Collectors.toMap` without a merge function
    /// (`KubernetesClusterManagerImpl.createKubernetesClusterResponse`, PR 12386): the rows
    /// come in internal-id order, not map order, and two map rows of one VM fail the whole
    /// listing with 530 (`IllegalStateException: Duplicate key`).
    pub fn cluster_vms_by_internal_id(self) -> bool {
        self >= Release::V4_23
    }
}

/// The default alert types of 4.16.0 (`AlertService.AlertType`; the numbers of the capacity
/// types are `Capacity`'s).
const DEFAULT_ALERT_TYPES_4_16: &[(i16, &str)] = &[
    (0, "ALERT.MEMORY"),
    (1, "ALERT.CPU"),
    (2, "ALERT.STORAGE"),
    (3, "ALERT.STORAGE.ALLOCATED"),
    (4, "ALERT.NETWORK.PUBLICIP"),
    (5, "ALERT.NETWORK.PRIVATEIP"),
    (6, "ALERT.STORAGE.SECONDARY"),
    (7, "ALERT.COMPUTE.HOST"),
    (8, "ALERT.USERVM"),
    (9, "ALERT.SERVICE.DOMAINROUTER"),
    (10, "ALERT.SERVICE.CONSOLEPROXY"),
    (11, "ALERT.NETWORK.ROUTING"),
    (12, "ALERT.STORAGE.MISC"),
    (13, "ALERT.USAGE"),
    (14, "ALERT.MANAGEMENT"),
    (15, "ALERT.NETWORK.DOMAINROUTERMIGRATE"),
    (16, "ALERT.SERVICE.CONSOLEPROXYMIGRATE"),
    (17, "ALERT.USERVM.MIGRATE"),
    (18, "ALERT.NETWORK.VLAN"),
    (19, "ALERT.SERVICE.SSVM"),
    (20, "ALERT.USAGE.RESULT"),
    (21, "ALERT.STORAGE.DELETE"),
    (22, "ALERT.RESOURCE.COUNT"),
    (23, "ALERT.USAGE.SANITY"),
    (24, "ALERT.NETWORK.DIRECTPUBLICIP"),
    (25, "ALERT.STORAGE.LOCAL"),
    (26, "ALERT.RESOURCE.EXCEED"),
    (27, "ALERT.TYPE.SYNC"),
    (28, "ALERT.UPLOAD.FAILED"),
    (29, "ALERT.OOBM.AUTHERROR"),
    (30, "ALERT.HA.ACTION"),
    (31, "ALERT.CA.CERT"),
    (32, "ALERT.VM.SNAPSHOT"),
];

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
        assert_eq!(Release::default(), Release::V4_22_1);
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
        assert!(!Release::V4_19_0.has_list_alert_types());
        assert!(Release::V4_19_1.has_list_alert_types());
        assert!(!Release::V4_22_1.has_api_key_pairs());
        assert!(Release::V4_23.has_api_key_pairs());
    }

    fn names(release: Release, t: i16) -> Vec<&'static str> {
        release
            .default_alert_types()
            .into_iter()
            .find(|(n, _)| *n == t)
            .map(|(_, names)| names)
            .unwrap_or_default()
    }

    #[test]
    fn default_alert_types_follow_each_release() {
        let highest = |r: Release| r.default_alert_types().last().map(|(t, _)| *t);
        assert_eq!(highest(Release::V4_16), Some(32));
        assert_eq!(highest(Release::V4_20), Some(32));
        assert_eq!(highest(Release::V4_21), Some(33));
        assert_eq!(highest(Release::V4_22), Some(33));
        assert_eq!(highest(Release::V4_22_1), Some(34));
        assert_eq!(
            names(Release::V4_16, 10),
            vec!["ALERT.SERVICE.CONSOLEPROXY"]
        );
        assert_eq!(names(Release::V4_20, 32).len(), 3);
        assert_eq!(names(Release::V4_22_1, 32), vec!["ALERT.VM.SNAPSHOT"]);
        assert_eq!(
            names(Release::V4_22_1, 33),
            vec![
                "ALERT.VR.PUBLIC.IFACE.MTU",
                "ALERT.TYPE.EXTENSION.PATH.NOT.READY"
            ]
        );
        assert_eq!(
            names(Release::V4_22_1, 34),
            vec!["ALERT.VR.PRIVATE.IFACE.MTU"]
        );
        assert_eq!(
            names(Release::V4_23, 34),
            vec![
                "ALERT.VR.PRIVATE.IFACE.MTU",
                "ALERT.S2S.VPN.GATEWAY.OBSOLETE.PARAMETERS"
            ]
        );
    }
}
