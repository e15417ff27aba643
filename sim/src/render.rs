//! CloudStack's JSON shapes (`ApiResponseSerializer`) for the simulated server: the response
//! envelopes, error bodies, and each entity as the real response objects show it.
//!
//! Envelopes are written by hand so keys come in the server's order (`count` first,
//! `uuidList` before `errorcode`); entity objects go through serde_json.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::query::ApiError;
use super::world::{
    JobOutcome, SimAlert, SimAnnotation, SimCluster, SimJob, SimNetwork, SimOwner, SimVm, World,
};

/// `<command lower-cased>response`, the key every answer of a command is wrapped in.
pub fn response_key(command: &str) -> String {
    format!("{}response", command.to_lowercase())
}

/// A list answer: `{}` when nothing matched, `{"count":N}` for a page past the end,
/// otherwise `{"count":N,"<item>":[...]}`; `count` is the total, not the page length.
pub fn list_body(command: &str, item_key: &str, count: usize, items: &[Value]) -> String {
    let key = response_key(command);
    if count == 0 {
        return format!("{{\"{key}\":{{}}}}");
    }
    if items.is_empty() {
        return format!("{{\"{key}\":{{\"count\":{count}}}}}");
    }
    let items = serde_json::to_string(items).expect("JSON values serialize");
    format!("{{\"{key}\":{{\"count\":{count},\"{item_key}\":{items}}}}}")
}

/// An answer as the server writes it with `encode.api.response = true`
/// (`ApiResponseSerializer` and `EncodedStringTypeAdapter`, the same on 4.16 to 4.22): every
/// string value at any depth, ids and error texts included, goes through CloudStack's own
/// encoder, which keeps `A-Z a-z 0-9` and writes every other ASCII character as `%XX`
/// (upper-case hex, a space as `%20`) and non-ASCII characters as they are. Keys, numbers
/// and booleans are left alone.
pub fn url_encoded_answer(body: &str) -> String {
    fn encode(s: &str) -> String {
        let mut out = String::with_capacity(s.len() * 3);
        for c in s.chars() {
            if c.is_ascii_alphanumeric() || !c.is_ascii() {
                out.push(c);
            } else {
                out.push_str(&format!("%{:02X}", c as u32));
            }
        }
        out
    }
    fn walk(v: &mut Value) {
        match v {
            Value::String(s) => *s = encode(s),
            Value::Array(items) => items.iter_mut().for_each(walk),
            Value::Object(m) => m.values_mut().for_each(walk),
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
    match serde_json::from_str::<Value>(body) {
        Ok(mut v) => {
            walk(&mut v);
            v.to_string()
        }
        Err(_) => body.to_string(),
    }
}

/// `{"<cmd>response":{"<object key>":{...}}}`.
pub fn object_body(command: &str, object_key: &str, value: &Value) -> String {
    let value = serde_json::to_string(value).expect("JSON values serialize");
    format!(
        "{{\"{}\":{{\"{object_key}\":{value}}}}}",
        response_key(command)
    )
}

/// `{"<cmd>response":{...fields}}`, for job ids and success flags.
pub fn flat_body(command: &str, fields: &Value) -> String {
    let value = serde_json::to_string(fields).expect("JSON values serialize");
    format!("{{\"{}\":{value}}}", response_key(command))
}

/// An error answer under `key` (a command's response key, or `errorresponse`).
pub fn error_body(key: &str, err: &ApiError) -> String {
    let text = serde_json::to_string(&err.text).expect("strings serialize");
    match err.cs_code {
        Some(cs) => format!(
            "{{\"{key}\":{{\"uuidList\":[],\"errorcode\":{},\"cserrorcode\":{cs},\"errortext\":{text}}}}}",
            err.code
        ),
        None => format!(
            "{{\"{key}\":{{\"uuidList\":[],\"errorcode\":{},\"errortext\":{text}}}}}",
            err.code
        ),
    }
}

fn put(m: &mut Map<String, Value>, key: &str, value: impl Into<Value>) {
    m.insert(key.to_string(), value.into());
}

/// `account` or `projectid`+`project`, then `domainid` and `domain`.
fn owner_fields(m: &mut Map<String, Value>, w: &World, owner: &SimOwner) {
    match owner {
        SimOwner::Account { account, .. } => put(m, "account", account.as_str()),
        SimOwner::Project {
            project_id,
            project,
            ..
        } => {
            put(m, "projectid", project_id.as_str());
            put(m, "project", project.as_str());
        }
    }
    put(m, "domainid", owner.domain_id());
    if let Some(d) = w.domain(owner.domain_id()) {
        put(m, "domain", d.name.as_str());
        put(m, "domainpath", d.path.as_str());
    }
}

fn zone_fields(m: &mut Map<String, Value>, w: &World, zone_id: &str) {
    put(m, "zoneid", zone_id);
    if let Some(z) = w.zone(zone_id) {
        put(m, "zonename", z.name.as_str());
    }
}

fn has_annotations(w: &World, entity_id: &str) -> bool {
    w.annotations
        .iter()
        .any(|a| !a.removed && a.entity_id == entity_id)
}

/// Networks (and, for pages of clusters, VMs) by id, built once per answer: a page of
/// clusters refers to thousands of VMs and networks, and a scan of the world for each would
/// cost more than everything else.
pub struct Index<'a> {
    world: &'a World,
    vms: Option<HashMap<&'a str, &'a SimVm>>,
    networks: HashMap<&'a str, &'a SimNetwork>,
}

impl<'a> Index<'a> {
    /// Networks only.
    pub fn new(w: &'a World) -> Self {
        let mut networks = HashMap::with_capacity(w.networks.len());
        for n in &w.networks {
            // The first of equal ids wins, as with `World::network`.
            networks.entry(n.id.as_str()).or_insert(n);
        }
        Index {
            world: w,
            vms: None,
            networks,
        }
    }

    /// Networks and VMs.
    pub fn with_vms(w: &'a World) -> Self {
        let mut vms = HashMap::with_capacity(w.vms.len());
        for vm in &w.vms {
            vms.entry(vm.id.as_str()).or_insert(vm);
        }
        Index {
            vms: Some(vms),
            ..Index::new(w)
        }
    }

    fn vm(&self, id: &str) -> Option<&'a SimVm> {
        match &self.vms {
            Some(vms) => vms.get(id).copied(),
            None => self.world.vm(id),
        }
    }

    /// A VM's internal id: its place in creation order, from 1.
    fn internal_id(&self, id: &str) -> usize {
        self.world
            .vms
            .iter()
            .position(|v| v.id == id)
            .map_or(0, |i| i + 1)
    }

    fn network(&self, id: &str) -> Option<&'a SimNetwork> {
        self.networks.get(id).copied()
    }
}

/// A `UserVmResponse` (full view, with nics). Inside a cluster's `virtualmachines` the
/// entry is a `KubernetesUserVmResponse`: it adds `isetcdnode`/`isexternalnode` (4.21+)
/// and, since the bean copy may lose it, has no top-level `ipaddress`.
pub fn vm_json(w: &World, ix: &Index, vm: &SimVm, in_cluster: bool) -> Value {
    let mut m = Map::new();
    put(&mut m, "id", vm.id.as_str());
    put(&mut m, "name", vm.name.as_str());
    put(&mut m, "displayname", vm.displayname.as_str());
    owner_fields(&mut m, w, &vm.owner);
    put(&mut m, "created", vm.created.to_cloudstack());
    put(&mut m, "lastupdated", vm.lastupdated.to_cloudstack());
    put(&mut m, "state", vm.state.as_str());
    zone_fields(&mut m, w, &vm.zone_id);
    put(&mut m, "instancename", vm.instancename.as_str());
    put(&mut m, "hypervisor", "KVM");
    put(&mut m, "haenable", false);
    put(&mut m, "displayvm", true);
    if let Some(t) = vm.vmtype.as_ref().filter(|_| w.release.has_cks_vm_type()) {
        put(&mut m, "vmtype", t.as_str());
    }
    put(&mut m, "details", json!(vm.details));
    let nics: Vec<Value> = vm
        .nic
        .iter()
        .map(|n| {
            let net = ix.network(&n.network_id);
            json!({
                "id": n.id,
                "networkid": n.network_id,
                "networkname": net.map(|x| x.name.as_str()).unwrap_or_default(),
                "ipaddress": n.ip_address,
                "macaddress": n.mac_address,
                "isdefault": true,
                "traffictype": "Guest",
                "type": net.map(|x| x.network_type.as_str()).unwrap_or("Isolated"),
                "deviceid": "0",
            })
        })
        .collect();
    if !in_cluster && let Some(n) = &vm.nic {
        put(&mut m, "ipaddress", n.ip_address.as_str());
    }
    put(&mut m, "nic", nics);
    put(&mut m, "securitygroup", json!([]));
    put(&mut m, "affinitygroup", json!([]));
    put(&mut m, "tags", json!([]));
    put(&mut m, "hasannotations", has_annotations(w, &vm.id));
    if in_cluster && w.release.has_cluster_node_flags() {
        if let Some(e) = vm.isetcdnode {
            put(&mut m, "isetcdnode", e);
        }
        if let Some(e) = vm.isexternalnode {
            put(&mut m, "isexternalnode", e);
        }
    }
    Value::Object(m)
}

/// A `KubernetesClusterResponse`. `virtualmachines` follows the map rows in order and
/// silently skips rows whose VM is removed or never existed, as `createKubernetesClusterResponse`
/// does (its lookup adds `removed IS NULL`).
pub fn cluster_json(w: &World, ix: &Index, c: &SimCluster) -> Value {
    let mut m = Map::new();
    put(&mut m, "id", c.id.as_str());
    put(&mut m, "name", c.name.as_str());
    put(&mut m, "description", c.name.as_str());
    zone_fields(&mut m, w, &c.zone_id);
    put(
        &mut m,
        "kubernetesversionname",
        c.kubernetes_version.as_str(),
    );
    let network = ix.network(&c.network_id);
    put(&mut m, "networkid", c.network_id.as_str());
    if let Some(n) = network {
        put(&mut m, "associatednetworkname", n.name.as_str());
    }
    owner_fields(&mut m, w, &c.owner);
    put(&mut m, "masternodes", c.control_nodes);
    put(&mut m, "controlnodes", c.control_nodes);
    put(&mut m, "size", c.size);
    if let Some(e) = c.etcd_nodes {
        put(&mut m, "etcdnodes", e);
    }
    put(&mut m, "state", c.state.as_str());
    put(&mut m, "cpunumber", "2");
    put(&mut m, "memory", "2048");
    put(&mut m, "endpoint", c.endpoint.as_str());
    let mut mapped: Vec<&SimVm> = c.map.iter().filter_map(|id| ix.vm(id)).collect();
    if w.release.cluster_vms_by_internal_id() {
        // 4.23 emits the rows from a `HashMap` keyed by the VMs' internal ids (PR 12386),
        // which iterates small `Long` keys in ascending order: creation order here.
        mapped.sort_by_key(|vm| ix.internal_id(&vm.id));
    }
    let vms: Vec<Value> = mapped
        .into_iter()
        .filter(|vm| !vm.removed)
        .map(|vm| {
            let mut row = vm_json(w, ix, vm, true);
            // 4.21: the node's Kubernetes version, from the map row (`kubernetes_node_version`,
            // set at creation and by upgrades); the cluster's version in this world.
            if w.release.has_cluster_node_flags()
                && let Value::Object(m) = &mut row
            {
                let version = c.kubernetes_version.trim_start_matches('v');
                put(m, "kubernetesnodeversion", version);
            }
            row
        })
        .collect();
    put(&mut m, "virtualmachines", vms);
    // Only an isolated (not Shared, not ROUTED) network with one source-NAT IP.
    if let Some(ip) = network
        .filter(|n| !n.is_direct_access())
        .and_then(|n| n.source_nat_ip.as_ref())
    {
        put(&mut m, "ipaddress", ip.address.as_str());
        put(&mut m, "ipaddressid", ip.id.as_str());
    }
    put(&mut m, "autoscalingenabled", false);
    if let Some(t) = c
        .clustertype
        .as_ref()
        .filter(|_| w.release.has_cluster_type())
    {
        put(&mut m, "clustertype", t.as_str());
    }
    put(&mut m, "created", c.created.to_cloudstack());
    put(&mut m, "hasannotations", has_annotations(w, &c.id));
    Value::Object(m)
}

pub fn network_json(w: &World, n: &SimNetwork) -> Value {
    let mut m = Map::new();
    put(&mut m, "id", n.id.as_str());
    put(&mut m, "name", n.name.as_str());
    put(&mut m, "displaytext", n.name.as_str());
    put(&mut m, "traffictype", "Guest");
    put(&mut m, "type", n.network_type.as_str());
    // `ApiResponseHelper.createNetworkResponse`: the ACL type of the network.
    put(
        &mut m,
        "acltype",
        if n.is_domain_wide() {
            "Domain"
        } else {
            "Account"
        },
    );
    if let Some(mode) = n
        .network_mode
        .as_ref()
        .filter(|_| w.release.has_network_mode())
    {
        put(&mut m, "networkmode", mode.as_str());
    }
    put(&mut m, "cidr", n.cidr.as_str());
    zone_fields(&mut m, w, &n.zone_id);
    owner_fields(&mut m, w, &n.owner);
    if let Some(v) = &n.vpc_id {
        put(&mut m, "vpcid", v.as_str());
    }
    put(&mut m, "state", "Implemented");
    put(&mut m, "tags", json!([]));
    Value::Object(m)
}

/// `AlertResponse` has no zone or pod.
pub fn alert_json(a: &SimAlert) -> Value {
    json!({
        "id": a.id,
        "type": a.alert_type,
        "name": a.name,
        "description": a.description,
        "sent": a.sent.to_cloudstack(),
    })
}

pub fn annotation_json(w: &World, a: &SimAnnotation) -> Value {
    let mut m = Map::new();
    put(&mut m, "id", a.id.as_str());
    put(&mut m, "entitytype", a.entity_type.as_str());
    put(&mut m, "entityid", a.entity_id.as_str());
    let name = match a.entity_type.as_str() {
        // `kubernetesClusterDao.findByUuid` skips removed clusters.
        "KUBERNETES_CLUSTER" => w
            .cluster(&a.entity_id)
            .filter(|c| !c.removed)
            .map(|c| c.name.clone()),
        "VM" => w.vm(&a.entity_id).map(|v| v.name.clone()),
        _ => None,
    };
    if let Some(n) = name {
        put(&mut m, "entityname", n);
    }
    put(&mut m, "annotation", a.annotation.as_str());
    put(&mut m, "userid", a.user_id.as_str());
    put(&mut m, "username", a.username.as_str());
    put(&mut m, "adminsonly", a.admins_only);
    put(&mut m, "created", a.created.to_cloudstack());
    if a.removed {
        put(&mut m, "removed", w.now.to_cloudstack());
    }
    Value::Object(m)
}

/// The fields of `queryAsyncJobResult`.
pub fn job_json(w: &World, j: &SimJob) -> Value {
    let admin_account = w
        .accounts
        .first()
        .map(|a| a.id.as_str())
        .unwrap_or_default();
    let mut m = Map::new();
    put(&mut m, "accountid", admin_account);
    put(&mut m, "userid", w.admin_user_id.as_str());
    put(&mut m, "cmd", j.cmd_class.as_str());
    let (status, code) = match &j.outcome {
        JobOutcome::Pending => (0, 0),
        JobOutcome::Succeeded(_) => (1, 0),
        JobOutcome::Failed { code, .. } => (2, *code),
    };
    put(&mut m, "jobstatus", status);
    put(&mut m, "jobprocstatus", 0);
    put(&mut m, "jobresultcode", code);
    put(&mut m, "jobresulttype", "object");
    match &j.outcome {
        JobOutcome::Pending => {}
        JobOutcome::Succeeded(v) => put(&mut m, "jobresult", v.clone()),
        JobOutcome::Failed { code, text } => put(
            &mut m,
            "jobresult",
            json!({"uuidList": [], "errorcode": code, "errortext": text}),
        ),
    }
    put(&mut m, "created", j.created.to_cloudstack());
    if let Some(t) = j.completed {
        put(&mut m, "completed", t.to_cloudstack());
    }
    put(&mut m, "jobid", j.id.as_str());
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_have_the_server_shapes() {
        assert_eq!(
            list_body("listAlerts", "alert", 0, &[]),
            r#"{"listalertsresponse":{}}"#
        );
        assert_eq!(
            list_body("listAlerts", "alert", 7, &[]),
            r#"{"listalertsresponse":{"count":7}}"#
        );
        assert_eq!(
            list_body("listAlerts", "alert", 7, &[json!({"id": "a"})]),
            r#"{"listalertsresponse":{"count":7,"alert":[{"id":"a"}]}}"#
        );
        assert_eq!(
            object_body("addAnnotation", "annotation", &json!({"id": "x"})),
            r#"{"addannotationresponse":{"annotation":{"id":"x"}}}"#
        );
        assert_eq!(
            flat_body("generateAlert", &json!({"jobid": "j"})),
            r#"{"generatealertresponse":{"jobid":"j"}}"#
        );
        assert_eq!(
            error_body(
                "listvirtualmachinesresponse",
                &ApiError::invalid("bad \"x\"")
            ),
            r#"{"listvirtualmachinesresponse":{"uuidList":[],"errorcode":431,"cserrorcode":4350,"errortext":"bad \"x\""}}"#
        );
        let unauthorized = ApiError {
            code: 401,
            cs_code: None,
            text: "no".into(),
        };
        assert_eq!(
            error_body("errorresponse", &unauthorized),
            r#"{"errorresponse":{"uuidList":[],"errorcode":401,"errortext":"no"}}"#
        );
    }
}
