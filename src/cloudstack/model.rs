//! The parts of CloudStack's API responses that cks-drift reads, as serde types.
//!
//! Only fields the checker uses are declared; everything else in a response is ignored, so
//! newer or older management servers with extra or missing optional fields parse the same.

use serde::{Deserialize, Deserializer};

/// One entry of `listKubernetesClusters` (`kubernetescluster`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct KubernetesCluster {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub zoneid: Option<String>,
    #[serde(default)]
    pub zonename: Option<String>,
    #[serde(default)]
    pub state: String,
    /// `CloudManaged` or `ExternalManaged` (4.19.0+); absent before, which means CloudManaged.
    #[serde(default)]
    pub clustertype: Option<String>,
    #[serde(default)]
    pub account: Option<String>,
    #[serde(default)]
    pub domainid: Option<String>,
    #[serde(default)]
    pub projectid: Option<String>,
    #[serde(default)]
    pub project: Option<String>,
    #[serde(default, deserialize_with = "lenient_u32")]
    pub controlnodes: Option<u32>,
    #[serde(default, deserialize_with = "lenient_u32")]
    pub masternodes: Option<u32>,
    #[serde(default, deserialize_with = "lenient_u32")]
    pub size: Option<u32>,
    #[serde(default, deserialize_with = "lenient_u32")]
    pub etcdnodes: Option<u32>,
    #[serde(default)]
    pub endpoint: Option<String>,
    #[serde(default)]
    pub networkid: Option<String>,
    #[serde(default)]
    pub virtualmachines: Vec<VirtualMachine>,
}

/// One entry of `listVirtualMachines` (`virtualmachine`) or of a cluster's `virtualmachines`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct VirtualMachine {
    pub id: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub state: String,
    #[serde(default)]
    pub created: Option<String>,
    #[serde(default)]
    pub lastupdated: Option<String>,
    #[serde(default)]
    pub account: Option<String>,
    #[serde(default)]
    pub domainid: Option<String>,
    #[serde(default)]
    pub projectid: Option<String>,
    #[serde(default)]
    pub isetcdnode: Option<bool>,
    /// The details the checker reads; the others are dropped while the answer is read.
    #[serde(default)]
    pub details: VmDetails,
}

/// The VM details cks-drift reads: `controlNodeLoginUser`, where CKS logs in. A VM has a
/// dozen others (disk sizes, keyboard, boot type, ...); as a map, even one entry would cost a
/// B-tree leaf of about 550 bytes, for every VM of every cluster, twice per cycle.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VmDetails {
    control_node_login_user: Option<String>,
}

/// The detail [`VmDetails`] keeps.
const LOGIN_USER: &str = "controlNodeLoginUser";

impl VmDetails {
    /// The value of detail `name`, if it is one the checker keeps and the VM has it.
    pub fn get(&self, name: &str) -> Option<&String> {
        match name {
            LOGIN_USER => self.control_node_login_user.as_ref(),
            _ => None,
        }
    }

    pub fn clear(&mut self) {
        *self = VmDetails::default();
    }
}

/// One entry of `listNetworks` (`network`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Network {
    pub id: String,
    #[serde(default)]
    pub name: Option<String>,
    /// Guest type: `Isolated`, `Shared` or `L2`.
    #[serde(default, rename = "type")]
    pub network_type: Option<String>,
    /// `NATTED` or `ROUTED` (4.20+).
    #[serde(default)]
    pub networkmode: Option<String>,
    #[serde(default)]
    pub vpcid: Option<String>,
}

/// The `user` of `getUser`: who holds an API key, and the type of its role. Anything else in
/// the answer (which may hold the secret key) is not read.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct User {
    pub id: String,
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub account: Option<String>,
    /// `Admin`, `ResourceAdmin`, `DomainAdmin` or `User` (4.16 and later).
    #[serde(default)]
    pub roletype: Option<String>,
    #[serde(default)]
    pub rolename: Option<String>,
}

/// One entry of `listAlerts` (`alert`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Alert {
    pub id: String,
    #[serde(default, deserialize_with = "lenient_i64")]
    pub r#type: Option<i64>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub zoneid: Option<String>,
    #[serde(default)]
    pub sent: Option<String>,
}

/// One entry of `listAnnotations` (`annotation`), or the object `addAnnotation` returns.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Annotation {
    pub id: String,
    #[serde(default)]
    pub entityid: Option<String>,
    #[serde(default)]
    pub entitytype: Option<String>,
    #[serde(default)]
    pub annotation: Option<String>,
    /// Shown to admins only: cks-drift writes nothing else, and a tenant cannot write one.
    #[serde(default)]
    pub adminsonly: Option<bool>,
}

impl Annotation {
    /// Whether cks-drift may take this annotation for one of its own: admin-only (listed with
    /// `annotationfilter=self`, so written by the API key's own user). A tenant may annotate
    /// its own cluster with any text, a forged marker included, but never admin-only.
    pub fn ours(&self) -> bool {
        self.adminsonly == Some(true)
    }
}

/// Reads a `details` object keeping only what [`VmDetails`] holds; the other values are
/// skipped without being copied.
impl<'de> Deserialize<'de> for VmDetails {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Kept)
    }
}

struct Kept;

impl<'de> serde::de::Visitor<'de> for Kept {
    type Value = VmDetails;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a map of VM details")
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(VmDetails::default())
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut kept = VmDetails::default();
        while let Some(key) = map.next_key::<DetailKey>()? {
            match key {
                DetailKey::LoginUser => kept.control_node_login_user = Some(map.next_value()?),
                DetailKey::Other => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(kept)
    }
}

/// A detail's name, told apart without copying it.
enum DetailKey {
    LoginUser,
    Other,
}

impl<'de> Deserialize<'de> for DetailKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Key;
        impl serde::de::Visitor<'_> for Key {
            type Value = DetailKey;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a detail name")
            }

            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<DetailKey, E> {
                Ok(if key == LOGIN_USER {
                    DetailKey::LoginUser
                } else {
                    DetailKey::Other
                })
            }
        }
        d.deserialize_str(Key)
    }
}

/// CloudStack writes some numbers as strings, depending on the field and the release.
fn lenient_u32<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    Ok(lenient_i64(d)?.and_then(|n| u32::try_from(n).ok()))
}

fn lenient_i64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Num {
        Int(i64),
        Str(String),
        Other(serde::de::IgnoredAny),
    }
    Ok(match Option::<Num>::deserialize(d)? {
        Some(Num::Int(n)) => Some(n),
        Some(Num::Str(s)) => s.trim().parse().ok(),
        Some(Num::Other(_)) | None => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(file: &str, command: &str) -> serde_json::Value {
        let path = format!(
            "{}/tests/fixtures/cloudstack-api/{file}",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap();
        let all: serde_json::Value = serde_json::from_str(&text).unwrap();
        all[command].clone()
    }

    #[test]
    fn parses_real_cluster_listing() {
        let v = fixture("KubernetesService.json", "listKubernetesClusters");
        let list = &v["listkubernetesclustersresponse"]["kubernetescluster"];
        let clusters: Vec<KubernetesCluster> = serde_json::from_value(list.clone()).unwrap();
        assert_eq!(clusters.len(), 1);
        let c = &clusters[0];
        assert_eq!(c.name, "cks-cluster");
        assert_eq!(c.state, "Starting");
        assert_eq!(c.controlnodes, Some(1));
        assert_eq!(c.size, Some(1));
        assert_eq!(c.etcdnodes, None);
        assert_eq!(c.clustertype, None);
        assert_eq!(c.account.as_deref(), Some("admin"));
        assert_eq!(c.virtualmachines.len(), 2);
        assert_eq!(c.virtualmachines[0].name, "cks-cluster-control-1803b55c32d");
        assert_eq!(c.virtualmachines[1].state, "Starting");
        assert_eq!(
            c.virtualmachines[0].created.as_deref(),
            Some("2022-04-18T06:21:58+0000")
        );
        // Details the checker does not read are not kept.
        assert_eq!(c.virtualmachines[0].details.get("rootdisksize"), None);
    }

    #[test]
    fn parses_real_vm_and_network_listings() {
        let v = fixture("VirtualMachineService.json", "listVirtualMachines");
        // The sample keeps the command's own case as its response key.
        let list = &v["listVirtualMachines"]["virtualmachine"];
        let vms: Vec<VirtualMachine> = serde_json::from_value(list.clone()).unwrap();
        assert!(!vms.is_empty());
        assert!(
            vms.iter()
                .all(|vm| !vm.id.is_empty() && !vm.state.is_empty())
        );

        let v = fixture("NetworkService.json", "listNetworks");
        let list = &v["listnetworksresponse"]["network"];
        let nets: Vec<Network> = serde_json::from_value(list.clone()).unwrap();
        assert!(!nets.is_empty());
        assert!(nets.iter().all(|n| n.network_type.is_some()));
    }

    #[test]
    fn only_the_details_the_checker_reads_are_kept() {
        let vm: VirtualMachine = serde_json::from_str(
            r#"{"id":"v","details":{"rootdisksize":"8","controlNodeLoginUser":"core","Message.ReservedCapacityFreed.Flag":"false"}}"#,
        )
        .unwrap();
        assert_eq!(
            vm.details.get("controlNodeLoginUser").map(String::as_str),
            Some("core")
        );
        let vm: VirtualMachine =
            serde_json::from_str(r#"{"id":"v","details":{"rootdisksize":"8"}}"#).unwrap();
        assert_eq!(vm.details, VmDetails::default());
        let vm: VirtualMachine = serde_json::from_str(r#"{"id":"v","details":null}"#).unwrap();
        assert_eq!(vm.details, VmDetails::default());
        assert!(serde_json::from_str::<VirtualMachine>(r#"{"id":"v","details":[1]}"#).is_err());
    }

    #[test]
    fn numbers_as_strings_are_accepted() {
        let c: KubernetesCluster = serde_json::from_str(
            r#"{"id":"x","name":"n","controlnodes":"3","size":2,"etcdnodes":"bad"}"#,
        )
        .unwrap();
        assert_eq!(
            (c.controlnodes, c.size, c.etcdnodes),
            (Some(3), Some(2), None)
        );
    }
}

/// A default alert type of `listAlertTypes`: its number (a Java `short`) and name.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct AlertType {
    #[serde(rename = "alerttypeid")]
    pub id: i32,
    #[serde(default)]
    pub name: String,
}
