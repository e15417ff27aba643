//! `Sim::handle` exercised directly: response shapes, CloudStack's listing semantics, alert
//! de-duplication, annotations, jobs, faults and the call log.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use super::*;

const NOW: i64 = 1_750_000_000;

fn world() -> World {
    World::new(SimTime::from_unix(NOW))
}

fn raw(sim: &Sim, command: &str, params: &[(&str, &str)]) -> Answer {
    let map: BTreeMap<String, String> = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    sim.handle(command, &map)
}

fn call(sim: &Sim, command: &str, params: &[(&str, &str)]) -> (u16, Value) {
    let r = raw(sim, command, params);
    let v = serde_json::from_str(&r.body).unwrap_or_else(|e| panic!("{e}: {}", r.body));
    (r.status, v)
}

fn ids(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|x| x["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn cluster_map_skips_removed_and_unknown_vms_but_keeps_destroyed_and_duplicates() {
    let mut w = world();
    let owner = w.admin();
    let c = w.add_cluster("prod", owner, 1, 3, 0);
    let map = w.cluster(&c).unwrap().map.clone();
    let (control, w1, w2, w3) = (&map[0], &map[1], &map[2], &map[3]);
    w.set_vm_state(w1, "Destroyed");
    w.expunge_vm(w2);
    let ghost = w.fresh_id();
    w.add_map_row(&c, &ghost);
    w.add_map_row(&c, control);
    let sim = Sim::new(w);

    let (status, v) = call(&sim, "listKubernetesClusters", &[]);
    assert_eq!(status, 200);
    let r = &v["listkubernetesclustersresponse"];
    assert_eq!(r["count"], 1);
    let cluster = &r["kubernetescluster"][0];
    assert_eq!(cluster["id"], c.as_str());
    assert_eq!(
        (&cluster["controlnodes"], &cluster["size"]),
        (&json!(1), &json!(3))
    );
    assert!(cluster.get("etcdnodes").is_none());
    let vms = &cluster["virtualmachines"];
    assert_eq!(
        ids(vms),
        [control.clone(), w1.clone(), w3.clone(), control.clone()]
    );
    assert_eq!(vms[1]["state"], "Destroyed");
    assert_eq!(vms[0]["state"], "Running");
}

#[test]
fn clusters_are_built_like_cks_builds_them() {
    let mut w = world();
    let owner = w.admin();
    let c = w.add_cluster("Prod_Cluster", owner, 2, 2, 1);
    let sim = Sim::new(w);
    let (_, v) = call(&sim, "listKubernetesClusters", &[("id", &c)]);
    let cluster = &v["listkubernetesclustersresponse"]["kubernetescluster"][0];
    assert_eq!(cluster["etcdnodes"], 1);
    assert_eq!(cluster["masternodes"], 2);
    assert_eq!(cluster["clustertype"], "CloudManaged");
    assert_eq!(cluster["account"], "admin");
    assert_eq!(cluster["domain"], "ROOT");
    let ip = cluster["ipaddress"].as_str().unwrap();
    assert_eq!(cluster["endpoint"], format!("https://{ip}:6443/"));

    let vms = cluster["virtualmachines"].as_array().unwrap();
    let names: Vec<&str> = vms.iter().map(|v| v["name"].as_str().unwrap()).collect();
    let created = SimTime::from_unix(NOW).minus(Duration::from_secs(30 * 86_400));
    let etcd_hex = cks_hex(created.plus(Duration::from_secs(5)), 0);
    assert_eq!(names[0], format!("ProdCluster-etcd-1-{etcd_hex}"));
    let hex_at = |secs: u64, ms: u32| cks_hex(created.plus(Duration::from_secs(secs)), ms);
    assert_eq!(
        names[1],
        format!("k8s-prodcluster-control-{}", hex_at(60, 0))
    );
    assert_eq!(
        names[2],
        format!("k8s-prodcluster-control-{}", hex_at(120, 17))
    );
    assert_eq!(names[3], format!("k8s-prodcluster-node-{}", hex_at(300, 0)));
    assert_eq!(
        names[4],
        format!("k8s-prodcluster-node-{}", hex_at(330, 29))
    );
    for vm in vms {
        let name = vm["name"].as_str().unwrap();
        let hex = name.rsplit('-').next().unwrap();
        assert_eq!(hex.len(), 11, "{name}");
        assert_eq!(vm["displayname"], name);
        assert_eq!(vm["details"]["controlNodeLoginUser"], "cloud");
        assert_eq!(vm["vmtype"], "cksnode");
        assert_eq!(vm["isexternalnode"], false);
        assert!(
            vm["nic"][0]["ipaddress"]
                .as_str()
                .unwrap()
                .starts_with("10.")
        );
        assert!(
            vm.get("ipaddress").is_none(),
            "no top-level ipaddress in the map"
        );
    }
    assert_eq!(vms[0]["isetcdnode"], true);
    assert_eq!(vms[1]["isetcdnode"], false);
}

#[test]
fn guests_see_their_cloudstack_uuid_on_kvm_only() {
    let mut w = world();
    let owner = w.admin();
    let kvm = w.add_vm("on-kvm", owner.clone(), None);
    w.hypervisor = "VMware".into();
    let vmware = w.add_vm("on-vmware", owner, None);
    let kvm = w.vm(&kvm).unwrap();
    assert_eq!(kvm.hypervisor, "KVM");
    assert_eq!(kvm.system_uuid(), kvm.id);
    let vmware = w.vm(&vmware).unwrap();
    assert_eq!(vmware.hypervisor, "VMware");
    let reversed: String = vmware
        .id
        .chars()
        .rev()
        .filter(|c| *c != '-')
        .collect::<String>()
        .to_uppercase();
    let uuid = vmware.system_uuid();
    assert_eq!(uuid.replace('-', ""), reversed);
    assert_eq!(
        uuid.split('-').map(str::len).collect::<Vec<_>>(),
        [8, 4, 4, 4, 12]
    );
    assert_ne!(uuid.to_lowercase(), vmware.id);
}

#[test]
fn direct_access_clusters_have_no_ipaddress_and_project_clusters_no_account() {
    let mut w = world();
    let team = w.add_project("team");
    let mut spec = ClusterSpec::new("shared", team.clone(), 1, 1, 0);
    spec.layout = NetworkLayout::Shared;
    let c = w.add_cluster_with(spec);
    let control = w.cluster(&c).unwrap().map[0].clone();
    let control_ip = w.vm(&control).unwrap().nic.clone().unwrap().ip_address;
    let SimOwner::Project { project_id, .. } = team else {
        unreachable!()
    };
    let sim = Sim::new(w);
    let (_, v) = call(
        &sim,
        "listKubernetesClusters",
        &[("projectid", &project_id)],
    );
    let cluster = &v["listkubernetesclustersresponse"]["kubernetescluster"][0];
    assert_eq!(cluster["endpoint"], format!("https://{control_ip}:6443/"));
    assert!(cluster.get("ipaddress").is_none());
    assert!(cluster.get("account").is_none());
    assert_eq!(cluster["project"], "team");
    assert_eq!(cluster["projectid"], project_id.as_str());
}

#[test]
fn cluster_acl_follows_listall_and_projectid() {
    let mut w = world();
    let admin = w.admin();
    let team = w.add_project("team");
    let dom = w.add_domain("eng");
    let alice = w.add_account("alice", &dom);
    let own = w.add_cluster("own", admin, 1, 1, 0);
    let proj = w.add_cluster("proj", team, 1, 1, 0);
    let other = w.add_cluster("other", alice, 1, 1, 0);
    let sim = Sim::new(w);
    let listed = |params: &[(&str, &str)]| {
        let (status, v) = call(&sim, "listKubernetesClusters", params);
        assert_eq!(status, 200, "{v}");
        let list = &v["listkubernetesclustersresponse"]["kubernetescluster"];
        if list.is_null() {
            Vec::new()
        } else {
            ids(list)
        }
    };
    assert_eq!(listed(&[]), vec![own.clone()]);
    assert_eq!(listed(&[("listall", "true")]), [own.clone(), other.clone()]);
    assert_eq!(
        listed(&[("listall", "true"), ("projectid", "-1")]),
        [own.clone(), proj.clone(), other.clone()]
    );
    assert_eq!(listed(&[("projectid", "-1")]), vec![proj.clone()]);
    assert_eq!(listed(&[("id", &proj)]), vec![proj.clone()]);
    assert_eq!(listed(&[("id", &other)]), vec![other.clone()]);
    assert_eq!(
        listed(&[("account", "alice"), ("domainid", &dom)]),
        vec![other.clone()]
    );
}

#[test]
fn cluster_filters_and_errors() {
    let mut w = world();
    let admin = w.admin();
    let a = w.add_cluster("alpha", admin.clone(), 1, 1, 0);
    let b = w.add_cluster("alpha-2", admin.clone(), 1, 1, 0);
    let gone = w.add_cluster("gone", admin.clone(), 1, 1, 0);
    w.set_cluster_state(&b, "Alert");
    w.destroy_cluster(&gone);
    let mut ext = ClusterSpec::new("ext", admin, 1, 1, 0);
    ext.clustertype = Some("ExternalManaged".into());
    let e = w.add_cluster_with(ext);
    let never = w.fresh_id();
    let sim = Sim::new(w);
    let listed = |params: &[(&str, &str)]| {
        let (_, v) = call(&sim, "listKubernetesClusters", params);
        let list = &v["listkubernetesclustersresponse"]["kubernetescluster"];
        if list.is_null() {
            Vec::new()
        } else {
            ids(list)
        }
    };
    assert_eq!(
        listed(&[("name", "ALPHA")]),
        vec![a.clone()],
        "name is exact, case-insensitive"
    );
    assert_eq!(listed(&[("keyword", "lph")]), [a.clone(), b.clone()]);
    assert_eq!(listed(&[("state", "Alert")]), vec![b.clone()]);
    assert_eq!(
        listed(&[("clustertype", "ExternalManaged")]),
        vec![e.clone()]
    );
    assert_eq!(
        listed(&[("clustertype", "CloudManaged")]),
        [a.clone(), b.clone()]
    );
    assert_eq!(listed(&[("name", "gone")]), Vec::<String>::new());

    let r = raw(&sim, "listKubernetesClusters", &[("id", &gone)]);
    assert_eq!(
        (r.status, r.body.as_str()),
        (200, r#"{"listkubernetesclustersresponse":{}}"#)
    );

    let r = raw(
        &sim,
        "listKubernetesClusters",
        &[("clustertype", "cloudmanaged")],
    );
    assert_eq!(r.status, 431);
    assert_eq!(
        r.body,
        r#"{"listkubernetesclustersresponse":{"uuidList":[],"errorcode":431,"cserrorcode":4350,"errortext":"Unable to resolve cluster type cloudmanaged to a supported value (CloudManaged, ExternalManaged)"}}"#
    );
    let (status, v) = call(&sim, "listKubernetesClusters", &[("id", &never)]);
    assert_eq!(status, 431);
    assert_eq!(v["listkubernetesclustersresponse"]["errorcode"], 431);
}

#[test]
fn vm_lookup_tells_expunged_from_never_existed() {
    let mut w = world();
    let admin = w.admin();
    let vm = w.add_vm("web-1", admin, None);
    w.expunge_vm(&vm);
    let never = w.fresh_id();
    let sim = Sim::new(w);

    let r = raw(&sim, "listVirtualMachines", &[("id", &vm)]);
    assert_eq!(
        (r.status, r.body.as_str()),
        (200, r#"{"listvirtualmachinesresponse":{}}"#)
    );

    let r = raw(&sim, "listVirtualMachines", &[("id", &never)]);
    assert_eq!(r.status, 431);
    assert_eq!(
        r.body,
        format!(
            "{{\"listvirtualmachinesresponse\":{{\"uuidList\":[],\"errorcode\":431,\"cserrorcode\":9999,\
             \"errortext\":\"Unable to execute API command listvirtualmachines due to invalid value. \
             Invalid parameter id value={never} due to incorrect long value format, or entity does not \
             exist or due to incorrect parameter annotation for the field in api cmd class.\"}}}}"
        )
    );
}

#[test]
fn vm_listing_filters_like_the_server() {
    let mut w = world();
    let admin = w.admin();
    let net = w.add_network("n", admin.clone(), NetworkType::Isolated, None);
    let a = w.add_vm("prod-node-1", admin.clone(), Some(&net));
    let b = w.add_vm("prodxnode-2", admin.clone(), None);
    let c = w.add_vm("other", admin.clone(), None);
    let d = w.add_vm("prod-node-3", admin.clone(), None);
    w.set_vm_state(&c, "Destroyed");
    w.set_vm_state(&d, "Expunging");
    let e = w.add_vm("gone", admin, None);
    w.unmanage_vm(&e);
    let sim = Sim::new(w);
    let listed = |params: &[(&str, &str)]| {
        let (status, v) = call(&sim, "listVirtualMachines", params);
        assert_eq!(status, 200, "{v}");
        let list = &v["listvirtualmachinesresponse"]["virtualmachine"];
        if list.is_null() {
            Vec::new()
        } else {
            ids(list)
        }
    };
    assert_eq!(listed(&[]), [a.clone(), b.clone(), c.clone(), d.clone()]);
    assert_eq!(listed(&[("state", "Present")]), [a.clone(), b.clone()]);
    assert_eq!(listed(&[("state", "Destroyed")]), vec![c.clone()]);
    assert_eq!(
        listed(&[("keyword", "prod_node")]),
        [a.clone(), b.clone(), d.clone()]
    );
    assert_eq!(listed(&[("keyword", "prod-node")]), [a.clone(), d.clone()]);
    assert_eq!(listed(&[("name", "prod-node")]), Vec::<String>::new());
    assert_eq!(listed(&[("name", "PROD-NODE-1")]), vec![a.clone()]);
    assert_eq!(listed(&[("networkid", &net)]), vec![a.clone()]);
    assert_eq!(
        listed(&[("ids", &format!("{b},{c}"))]),
        [b.clone(), c.clone()]
    );

    let (_, v) = call(&sim, "listVirtualMachines", &[("id", &a)]);
    let vm = &v["listvirtualmachinesresponse"]["virtualmachine"][0];
    assert_eq!(vm["ipaddress"], vm["nic"][0]["ipaddress"]);
    assert_eq!(vm["nic"][0]["networkid"], net.as_str());
    assert!(vm.get("isetcdnode").is_none());
}

#[test]
fn paging_reports_the_total_and_enforces_the_maximum() {
    let mut w = world();
    let admin = w.admin();
    let all: Vec<String> = (0..7)
        .map(|i| w.add_vm(&format!("vm-{i}"), admin.clone(), None))
        .collect();
    let sim = Sim::new(w);
    sim.set_max_page_size(Some(3));

    let (_, v) = call(&sim, "listVirtualMachines", &[]);
    assert_eq!(v["listvirtualmachinesresponse"]["count"], 7);
    assert_eq!(
        ids(&v["listvirtualmachinesresponse"]["virtualmachine"]),
        all[..3]
    );

    let (_, v) = call(
        &sim,
        "listVirtualMachines",
        &[("page", "3"), ("pagesize", "3")],
    );
    assert_eq!(
        ids(&v["listvirtualmachinesresponse"]["virtualmachine"]),
        all[6..]
    );

    let r = raw(
        &sim,
        "listVirtualMachines",
        &[("page", "4"), ("pagesize", "3")],
    );
    assert_eq!(r.body, r#"{"listvirtualmachinesresponse":{"count":7}}"#);

    let (_, v) = call(&sim, "listVirtualMachines", &[("pagesize", "-1")]);
    assert_eq!(
        ids(&v["listvirtualmachinesresponse"]["virtualmachine"]),
        all
    );

    let (status, v) = call(
        &sim,
        "listVirtualMachines",
        &[("page", "1"), ("pagesize", "4")],
    );
    assert_eq!(status, 431);
    assert_eq!(
        v["listvirtualmachinesresponse"]["errortext"],
        "Page size can't exceed max allowed page size value: 3"
    );
    let (status, _) = call(&sim, "listVirtualMachines", &[("pagesize", "2")]);
    assert_eq!(status, 431);
}

fn generate(sim: &Sim, kind: &str, name: &str, extra: &[(&str, &str)]) -> Value {
    let mut params = vec![
        ("type", kind),
        ("name", name),
        ("description", "drift found"),
    ];
    params.extend_from_slice(extra);
    let (status, v) = call(sim, "generateAlert", &params);
    assert_eq!(status, 200, "{v}");
    let job = v["generatealertresponse"]["jobid"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, v) = call(sim, "queryAsyncJobResult", &[("jobid", &job)]);
    assert_eq!(status, 200, "{v}");
    v["queryasyncjobresultresponse"].clone()
}

fn alert_ids(sim: &Sim) -> Vec<String> {
    let (_, v) = call(sim, "listAlerts", &[]);
    let list = &v["listalertsresponse"]["alert"];
    if list.is_null() {
        Vec::new()
    } else {
        ids(list)
    }
}

#[test]
fn generated_alerts_are_deduplicated_by_type_and_zone_until_archived() {
    let sim = Sim::new(world());
    let zone2 = sim.with_world(|w| w.add_zone("zone-2"));

    let job = generate(&sim, "1001", "CKS.DRIFT", &[]);
    assert_eq!(job["jobstatus"], 1);
    assert_eq!(job["jobresult"], json!({"success": true}));
    let first = alert_ids(&sim);
    assert_eq!(first.len(), 1);

    sim.with_world(|w| w.advance(Duration::from_secs(60)));
    let job = generate(&sim, "1001", "CKS.DRIFT", &[]);
    assert_eq!(
        job["jobstatus"], 1,
        "a suppressed alert still reports success"
    );
    assert_eq!(alert_ids(&sim), first);

    let job = generate(&sim, "1001", "CKS.DRIFT", &[("zoneid", &zone2)]);
    assert_eq!(job["jobstatus"], 1);
    let two = alert_ids(&sim);
    assert_eq!(two.len(), 2);
    assert_eq!(two[1], first[0], "newest first");

    let (status, v) = call(&sim, "archiveAlerts", &[("ids", &first[0])]);
    assert_eq!(
        (status, v),
        (200, json!({"archivealertsresponse": {"success": true}}))
    );
    generate(&sim, "1001", "CKS.DRIFT", &[]);
    let after = alert_ids(&sim);
    assert_eq!(after.len(), 2);
    assert!(!after.contains(&first[0]));

    let (_, v) = call(
        &sim,
        "listAlerts",
        &[("type", "1001"), ("keyword", "DRIFT")],
    );
    let alert = &v["listalertsresponse"]["alert"][0];
    assert_eq!(alert["name"], "CKS.DRIFT");
    assert_eq!(alert["description"], "drift found");
    assert_eq!(alert["type"], 1001);
    assert!(alert.get("zoneid").is_none());
}

#[test]
fn generate_alert_checks_names_and_lengths() {
    let sim = Sim::new(world());
    let job = generate(&sim, "8", "CKS.DRIFT", &[]);
    assert_eq!(job["jobstatus"], 2);
    assert_eq!(job["jobresultcode"], 431);
    assert_eq!(
        job["jobresult"]["errortext"],
        "There is a default alert having type 8 and name ALERT.USERVM"
    );
    assert_eq!(generate(&sim, "8", "alert.uservm", &[])["jobstatus"], 1);

    let long = "x".repeat(1000);
    let (status, v) = call(
        &sim,
        "generateAlert",
        &[("type", "1001"), ("name", "n"), ("description", &long)],
    );
    assert_eq!(status, 431);
    assert_eq!(
        v["generatealertresponse"]["errortext"],
        "Unable to execute API command generatealert due to invalid value. Value greater than max allowed length 999 for param: description"
    );
    assert_eq!(v["generatealertresponse"]["cserrorcode"], 9999);
    // 999 UTF-16 units: an emoji counts two.
    let units = format!("{}😀", "x".repeat(997));
    let (status, _) = call(
        &sim,
        "generateAlert",
        &[("type", "1001"), ("name", "n"), ("description", &units)],
    );
    assert_eq!(status, 200);
    let over = format!("{}😀", "x".repeat(998));
    let (status, _) = call(
        &sim,
        "generateAlert",
        &[("type", "1001"), ("name", "n"), ("description", &over)],
    );
    assert_eq!(status, 431);
    // An empty required value.
    let (status, v) = call(
        &sim,
        "generateAlert",
        &[("type", "1001"), ("name", ""), ("description", "d")],
    );
    assert_eq!(status, 431);
    assert_eq!(v["generatealertresponse"]["cserrorcode"], 4350);
    assert_eq!(
        v["generatealertresponse"]["errortext"],
        "Invalid value provided for API arg: name"
    );
    let (status, v) = call(
        &sim,
        "generateAlert",
        &[("type", "1001"), ("description", "d")],
    );
    assert_eq!(status, 431);
    assert_eq!(v["generatealertresponse"]["cserrorcode"], 9999);
    assert_eq!(
        v["generatealertresponse"]["errortext"],
        "Unable to execute API command generatealert due to missing parameter name"
    );
    let (status, _) = call(
        &sim,
        "generateAlert",
        &[("type", "70000"), ("name", "n"), ("description", "d")],
    );
    assert_eq!(status, 431, "type is a Java short");
}

#[test]
fn jobs_stay_pending_for_the_configured_polls() {
    let sim = Sim::new(world());
    sim.set_job_pending_polls(2);
    let (_, v) = call(
        &sim,
        "generateAlert",
        &[("type", "1001"), ("name", "n"), ("description", "d")],
    );
    let job = v["generatealertresponse"]["jobid"]
        .as_str()
        .unwrap()
        .to_string();
    let poll = || call(&sim, "queryAsyncJobResult", &[("jobid", &job)]).1;
    for _ in 0..2 {
        let r = poll();
        assert_eq!(r["queryasyncjobresultresponse"]["jobstatus"], 0);
        assert!(r["queryasyncjobresultresponse"].get("jobresult").is_none());
        assert!(alert_ids(&sim).is_empty(), "not stored before the job runs");
    }
    assert_eq!(poll()["queryasyncjobresultresponse"]["jobstatus"], 1);
    assert_eq!(alert_ids(&sim).len(), 1);
    assert_eq!(poll()["queryasyncjobresultresponse"]["jobstatus"], 1);
    assert_eq!(alert_ids(&sim).len(), 1, "a job runs once");

    let (status, _) = call(&sim, "queryAsyncJobResult", &[("jobid", "nope")]);
    assert_eq!(status, 431);
}

#[test]
fn archive_and_delete_alerts_need_a_selector() {
    let sim = Sim::new(world());
    generate(&sim, "1001", "a", &[]);
    generate(&sim, "1002", "b", &[]);
    let (status, v) = call(&sim, "archiveAlerts", &[]);
    assert_eq!(status, 431);
    assert_eq!(
        v["archivealertsresponse"]["errortext"],
        "either ids, type, startdate or enddate must be specified"
    );
    let (status, _) = call(&sim, "deleteAlerts", &[("type", "1001")]);
    assert_eq!(status, 200);
    let left = alert_ids(&sim);
    assert_eq!(left.len(), 1);
    let (_, v) = call(&sim, "listAlerts", &[("id", &left[0])]);
    assert_eq!(v["listalertsresponse"]["alert"][0]["type"], 1002);
    let (status, _) = call(&sim, "archiveAlerts", &[("ids", "not-an-alert")]);
    assert_eq!(status, 431);

    sim.with_world(|w| w.advance(Duration::from_secs(86_400)));
    generate(&sim, "1003", "c", &[]);
    let before = SimTime::from_unix(NOW + 3600).to_cloudstack();
    let (status, _) = call(&sim, "archiveAlerts", &[("enddate", &before)]);
    assert_eq!(status, 200);
    let (_, v) = call(&sim, "listAlerts", &[]);
    assert_eq!(v["listalertsresponse"]["count"], 1);
    assert_eq!(v["listalertsresponse"]["alert"][0]["type"], 1003);
    let (status, _) = call(&sim, "archiveAlerts", &[("startdate", "yesterday")]);
    assert_eq!(status, 431);
}

#[test]
fn annotations_round_trip_on_clusters() {
    let mut w = world();
    let admin = w.admin();
    let c = w.add_cluster("prod", admin, 1, 1, 0);
    let sim = Sim::new(w);
    let (status, v) = call(
        &sim,
        "addAnnotation",
        &[
            ("entitytype", "KUBERNETES_CLUSTER"),
            ("entityid", &c),
            ("annotation", "drift: 1 VM unmapped"),
            ("adminsonly", "true"),
        ],
    );
    assert_eq!(status, 200, "{v}");
    let a = &v["addannotationresponse"]["annotation"];
    assert_eq!(a["entityname"], "prod");
    assert_eq!(a["adminsonly"], true);
    let id = a["id"].as_str().unwrap().to_string();

    let (_, v) = call(&sim, "listKubernetesClusters", &[("id", &c)]);
    assert_eq!(
        v["listkubernetesclustersresponse"]["kubernetescluster"][0]["hasannotations"],
        true
    );
    let (_, v) = call(
        &sim,
        "listAnnotations",
        &[("entitytype", "KUBERNETES_CLUSTER"), ("entityid", &c)],
    );
    assert_eq!(v["listannotationsresponse"]["count"], 1);
    assert_eq!(
        v["listannotationsresponse"]["annotation"][0]["annotation"],
        "drift: 1 VM unmapped"
    );

    let (status, v) = call(&sim, "removeAnnotation", &[("id", &id)]);
    assert_eq!(status, 200);
    assert_eq!(
        v["removeannotationresponse"]["annotation"]["id"],
        id.as_str()
    );
    let r = raw(&sim, "listAnnotations", &[("entityid", &c)]);
    assert_eq!(r.body, r#"{"listannotationsresponse":{}}"#);
    // Removing it again: the NullPointerException of `removeAnnotation`.
    let (status, v) = call(&sim, "removeAnnotation", &[("id", &id)]);
    assert_eq!(status, 530);
    assert_eq!(v["removeannotationresponse"]["cserrorcode"], 9999);
    assert_eq!(
        v["removeannotationresponse"]["errortext"],
        "Cannot invoke \"org.apache.cloudstack.annotation.AnnotationVO.getEntityType()\" because \"annotation\" is null"
    );
    let (status, _) = call(&sim, "removeAnnotation", &[("id", "never-existed")]);
    assert_eq!(status, 530);
    added_annotations_are_checked_as_cloudstack_checks_them(&sim, &c);
    annotations_by_id_and_of_a_destroyed_cluster(&sim, &c);
}

fn added_annotations_are_checked_as_cloudstack_checks_them(sim: &Sim, c: &str) {
    // The root admin's annotation is stored without looking the entity up.
    let (status, v) = call(
        sim,
        "addAnnotation",
        &[
            ("entitytype", "KUBERNETES_CLUSTER"),
            ("entityid", "x"),
            ("annotation", "a"),
        ],
    );
    assert_eq!(status, 200, "{v}");
    assert!(
        v["addannotationresponse"]["annotation"]
            .get("entityname")
            .is_none()
    );
    let (status, v) = call(
        sim,
        "addAnnotation",
        &[
            ("entitytype", "kubernetes_cluster"),
            ("entityid", c),
            ("annotation", "a"),
        ],
    );
    assert_eq!(status, 530, "entity types are case-sensitive");
    assert_eq!(
        v["addannotationresponse"]["errortext"],
        "'kubernetes_cluster' is not a valid EntityType to put annotations on"
    );
    let (status, v) = call(sim, "addAnnotation", &[("entitytype", "VM")]);
    assert_eq!(status, 530);
    assert_eq!(
        v["addannotationresponse"]["errortext"],
        "I have to have an entity to set an annotation on!"
    );
    let (_, v) = call(sim, "addAnnotation", &[("entityid", c)]);
    assert_eq!(v["addannotationresponse"]["errortext"], "Name is null");
    // 255 UTF-16 units at most.
    let long = format!("{}😀", "a".repeat(254));
    let (status, v) = call(
        sim,
        "addAnnotation",
        &[
            ("entitytype", "KUBERNETES_CLUSTER"),
            ("entityid", c),
            ("annotation", &long),
        ],
    );
    assert_eq!(status, 431);
    assert_eq!(
        v["addannotationresponse"]["errortext"],
        "Unable to execute API command addannotation due to invalid value. Value greater than max allowed length 255 for param: annotation"
    );
}

fn annotations_by_id_and_of_a_destroyed_cluster(sim: &Sim, c: &str) {
    // `listAnnotations id=` answers only with the creator's `userid`.
    let (_, v) = call(
        sim,
        "addAnnotation",
        &[
            ("entitytype", "KUBERNETES_CLUSTER"),
            ("entityid", c),
            ("annotation", "kept"),
            ("adminsonly", "true"),
        ],
    );
    let kept = v["addannotationresponse"]["annotation"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, v) = call(sim, "listAnnotations", &[("id", &kept)]);
    assert_eq!(v["listannotationsresponse"].get("count"), None);
    let user = sim.with_world(|w| w.admin_user_id.clone());
    let (_, v) = call(sim, "listAnnotations", &[("id", &kept), ("userid", &user)]);
    assert_eq!(v["listannotationsresponse"]["count"], 1);
    let (status, _) = call(sim, "listAnnotations", &[("id", &kept), ("entityid", c)]);
    assert_eq!(status, 431);
    // An unknown entity type is no error for the root admin; it matches nothing.
    let (status, v) = call(sim, "listAnnotations", &[("entitytype", "NOPE")]);
    assert_eq!(status, 200);
    assert_eq!(v["listannotationsresponse"].get("count"), None);

    // Destroying the cluster removes its annotations.
    sim.with_world(|w| w.destroy_cluster(c));
    let (_, v) = call(
        sim,
        "listAnnotations",
        &[("entitytype", "KUBERNETES_CLUSTER"), ("entityid", c)],
    );
    assert_eq!(v["listannotationsresponse"].get("count"), None, "{v}");
}

#[test]
fn values_are_checked_before_the_command_runs() {
    let sim = Sim::new(world());
    // Control characters in any value, LF and CR excepted.
    let (status, v) = call(&sim, "listAlerts", &[("keyword", "a\tb")]);
    assert_eq!(status, 431);
    assert_eq!(
        v["listalertsresponse"]["errortext"],
        "Received value containing illegal ASCII non-printable characters for parameter keyword"
    );
    let (status, _) = call(&sim, "listAlerts", &[("keyword", "a\nb")]);
    assert_eq!(status, 200);
    // `keyword` is 255 units at most.
    let (status, v) = call(&sim, "listAlerts", &[("keyword", &"k".repeat(256))]);
    assert_eq!(status, 431);
    assert_eq!(
        v["listalertsresponse"]["errortext"],
        "Unable to execute API command listalerts due to invalid value. Value greater than max allowed length 255 for param: keyword"
    );
    // An empty UUID is looked up, not skipped.
    let (status, v) = call(&sim, "listVirtualMachines", &[("id", "")]);
    assert_eq!(status, 431);
    assert!(
        v["listvirtualmachinesresponse"]["errortext"]
            .as_str()
            .unwrap()
            .contains("Invalid parameter id value= due to incorrect long value format")
    );
    // `details` values are VMDetails names.
    let (status, v) = call(&sim, "listVirtualMachines", &[("details", "min,Nics")]);
    assert_eq!(status, 431);
    assert_eq!(
        v["listvirtualmachinesresponse"]["errortext"],
        "The details parameter contains a non permitted value. The allowed values are [all, group, nics, stats, secgrp, tmpl, servoff, diskoff, backoff, iso, volume, min, affgrp, vnfnics]"
    );
    assert_eq!(
        call(&sim, "listVirtualMachines", &[("details", "min")]).0,
        200
    );
    // Paging: page 0 is the first page; an empty page size is refused.
    assert_eq!(
        call(&sim, "listNetworks", &[("page", "0"), ("pagesize", "10")]).0,
        200
    );
    let (status, v) = call(&sim, "listNetworks", &[("page", "1"), ("pagesize", "")]);
    assert_eq!(status, 431);
    assert_eq!(
        v["listnetworksresponse"]["errortext"],
        "For input string: \"\""
    );
}

#[test]
fn an_alert_with_a_four_byte_character_is_not_stored() {
    let sim = Sim::new(world());
    let (status, v) = call(
        &sim,
        "generateAlert",
        &[
            ("type", "1001"),
            ("name", "n"),
            ("description", "rocket 🚀"),
        ],
    );
    assert_eq!(status, 200, "{v}");
    let job = v["generatealertresponse"]["jobid"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, v) = call(&sim, "queryAsyncJobResult", &[("jobid", &job)]);
    assert_eq!(
        v["queryasyncjobresultresponse"]["jobstatus"], 1,
        "the job succeeds"
    );
    sim.with_world(|w| assert!(w.alerts.is_empty()));
}

#[test]
fn unknown_commands_are_unauthorized() {
    let sim = Sim::new(world());
    let r = raw(&sim, "listvirtualmachines", &[]);
    assert_eq!(r.status, 401);
    assert_eq!(
        r.body,
        r#"{"errorresponse":{"uuidList":[],"errorcode":401,"errortext":"unable to verify user credentials and/or request signature"}}"#
    );
}

#[test]
fn faults_and_the_call_log() {
    let sim = Sim::new(world());
    sim.fail_next("listVirtualMachines", 2, 503, "<html>busy</html>");
    sim.fail_next_with_error("listAlerts", 1, 530, "boom");
    let params = [("listAll", "true"), ("apikey", "k"), ("signature", "s")];
    for _ in 0..2 {
        let r = raw(&sim, "listVirtualMachines", &params);
        assert_eq!((r.status, r.body.as_str()), (503, "<html>busy</html>"));
    }
    assert_eq!(raw(&sim, "listVirtualMachines", &params).status, 200);
    let r = raw(&sim, "listAlerts", &[]);
    assert_eq!(r.status, 530);
    assert_eq!(
        r.body,
        r#"{"listalertsresponse":{"uuidList":[],"errorcode":530,"cserrorcode":4250,"errortext":"boom"}}"#
    );
    generate(&sim, "1001", "n", &[]);

    assert_eq!(sim.call_count("listVirtualMachines"), 3);
    let first = &sim.calls()[0];
    assert_eq!(first.command, "listVirtualMachines");
    assert_eq!(
        first.params,
        BTreeMap::from([("listall".to_string(), "true".to_string())])
    );
    let writes: Vec<String> = sim
        .state_changing_calls()
        .into_iter()
        .map(|c| c.command)
        .collect();
    assert_eq!(writes, ["generateAlert"]);
    sim.clear_calls();
    assert!(sim.calls().is_empty());
}

#[test]
fn node_vms_can_be_added_mapped_or_stray() {
    let mut w = world();
    let admin = w.admin();
    let c = w.add_cluster("prod", admin, 1, 1, 0);
    w.advance(Duration::from_secs(10));
    let stray = w.add_node_vm(&c, NodeRole::Worker, false);
    let mapped = w.add_node_vm(&c, NodeRole::Worker, true);
    let hex = cks_hex(w.now, 0);
    assert_eq!(w.vm(&stray).unwrap().name, format!("prod-node-{hex}"));
    assert_eq!(w.vm(&stray).unwrap().created, w.now);
    let map = &w.cluster(&c).unwrap().map;
    assert_eq!(map.len(), 3);
    assert_eq!(map[2], mapped);
    assert!(!map.contains(&stray));
    assert!(w.remove_map_row(&c, &mapped));
    assert!(!w.remove_map_row(&c, &mapped));
}

#[test]
fn worlds_are_reproducible() {
    let build = || {
        let mut w = world();
        let admin = w.admin();
        let c = w.add_cluster("prod", admin, 1, 2, 0);
        let map = w.cluster(&c).unwrap().map.clone();
        (c, map)
    };
    assert_eq!(build(), build());
    let (c, map) = build();
    for id in std::iter::once(&c).chain(&map) {
        let parts: Vec<usize> = id.split('-').map(str::len).collect();
        assert_eq!(parts, [8, 4, 4, 4, 12], "{id}");
    }
}

#[test]
fn name_prefixes_follow_both_rules() {
    assert_eq!(node_name_prefix("Prod", "u"), "prod");
    assert_eq!(node_name_prefix("my_cluster", "u"), "k8s-mycluster");
    assert_eq!(node_name_prefix("1abc", "u"), "k8s-1abc");
    assert_eq!(node_name_prefix("___", "uuid-1"), "k8s-uuid-1");
    assert_eq!(node_name_prefix(&"a".repeat(50), "u"), "a".repeat(43));
    assert_eq!(etcd_name_prefix("Prod", "u"), "Prod-etcd");
    assert_eq!(
        etcd_name_prefix(&"b".repeat(38), "u"),
        format!("{}-e", "b".repeat(38))
    );
}

#[test]
fn reads_are_list_get_query_and_find_and_everything_else_changes_state() {
    for read in [
        "listKubernetesClusters",
        "listVirtualMachines",
        "listAlerts",
        "getUser",
        "queryAsyncJobResult",
        "findHostsForMigration",
        "list",
    ] {
        assert!(!is_state_changing(read), "{read}");
    }
    for write in [
        "generateAlert",
        "archiveAlerts",
        "deleteAlerts",
        "addAnnotation",
        "removeAnnotation",
        "deployVirtualMachine",
        // The prefixes are case-sensitive and must be whole.
        "ListVirtualMachines",
        "GetUser",
        "lisVirtualMachines",
        "fin",
        "",
    ] {
        assert!(is_state_changing(write), "{write}");
    }
    let call = |command: &str| Call {
        command: command.to_string(),
        params: BTreeMap::new(),
        front: 0,
        at: std::time::SystemTime::now(),
    };
    assert!(call("addAnnotation").is_state_changing());
    assert!(!call("listAnnotations").is_state_changing());
}

fn on(release: Release, w: &mut World) {
    w.release = release;
}

#[test]
fn cluster_count_is_the_page_rows_before_4_19_1() {
    for (release, counts) in [
        (Release::V4_16, [2, 2, 1]),
        (Release::V4_19_0, [2, 2, 1]),
        (Release::V4_19_1, [5, 5, 5]),
        (Release::V4_22, [5, 5, 5]),
    ] {
        let mut w = world();
        on(release, &mut w);
        let owner = w.admin();
        for n in 0..5 {
            w.add_cluster(&format!("c{n}"), owner.clone(), 1, 1, 0);
        }
        let sim = Sim::new(w);
        for (page, count) in ["1", "2", "3"].into_iter().zip(counts) {
            let (_, v) = call(
                &sim,
                "listKubernetesClusters",
                &[("listall", "true"), ("page", page), ("pagesize", "2")],
            );
            assert_eq!(
                v["listkubernetesclustersresponse"]["count"], count,
                "{release:?} page {page}"
            );
        }
        // Past the end: no rows and, with a count of the page's rows, no count either.
        let (_, v) = call(
            &sim,
            "listKubernetesClusters",
            &[("listall", "true"), ("page", "4"), ("pagesize", "2")],
        );
        let empty = release < Release::V4_19_1;
        assert_eq!(
            v["listkubernetesclustersresponse"] == json!({}),
            empty,
            "{release:?}: {v}"
        );
    }
}

#[test]
fn networks_listed_with_minus_one_and_without_differ_by_release() {
    // A tenant's isolated network, a ROUTED one, a zone-wide Shared one (the admin's) and a
    // project's network.
    let mut w = world();
    let root = w.root_domain_id().to_string();
    let tenant = w.add_account("alice", &root);
    let project = w.add_project("team");
    let layouts = [
        ("iso", tenant.clone(), NetworkLayout::Isolated),
        ("routed", tenant, NetworkLayout::Routed),
        ("shared", w.admin(), NetworkLayout::Shared),
        ("proj", project, NetworkLayout::Isolated),
    ];
    for (name, owner, layout) in layouts {
        w.add_cluster_with(ClusterSpec {
            layout,
            ..ClusterSpec::new(name, owner, 1, 1, 0)
        });
    }
    let names = |sim: &Sim, params: &[(&str, &str)]| -> Vec<String> {
        let (_, v) = call(sim, "listNetworks", params);
        let mut names: Vec<String> = v["listnetworksresponse"]["network"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|n| {
                        n["name"]
                            .as_str()
                            .unwrap()
                            .trim_end_matches("-network")
                            .into()
                    })
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    };
    for (release, minus_one, list_all) in [
        (
            Release::V4_16,
            vec!["proj"],
            vec!["iso", "routed", "shared"],
        ),
        (
            Release::V4_18,
            vec!["proj", "shared"],
            vec!["iso", "routed", "shared"],
        ),
        (
            Release::V4_19_1,
            vec!["iso", "proj", "routed", "shared"],
            vec!["iso", "proj", "routed", "shared"],
        ),
        (
            Release::V4_21,
            vec!["proj", "shared"],
            vec!["iso", "routed", "shared"],
        ),
        (
            Release::V4_22,
            vec!["iso", "proj", "routed", "shared"],
            vec!["iso", "routed", "shared"],
        ),
    ] {
        let mut w = w.clone();
        on(release, &mut w);
        let sim = Sim::new(w);
        assert_eq!(
            names(&sim, &[("listall", "true"), ("projectid", "-1")]),
            minus_one,
            "{release:?}"
        );
        assert_eq!(names(&sim, &[("listall", "true")]), list_all, "{release:?}");
        // `networkmode` from 4.20 on.
        let (_, v) = call(&sim, "listNetworks", &[("listall", "true")]);
        let modes = v["listnetworksresponse"]["network"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.get("networkmode").is_some());
        assert_eq!(modes, release >= Release::V4_20, "{release:?}");
    }
}

#[test]
fn cluster_vms_carry_node_flags_and_clusters_a_type_by_release() {
    for release in Release::SUPPORTED {
        let mut w = world();
        on(release, &mut w);
        let owner = w.admin();
        w.add_cluster("c", owner, 1, 1, 1);
        let sim = Sim::new(w);
        let (_, v) = call(&sim, "listKubernetesClusters", &[]);
        let c = &v["listkubernetesclustersresponse"]["kubernetescluster"][0];
        let vm = &c["virtualmachines"][0];
        let flags = release >= Release::V4_21;
        assert_eq!(vm.get("isetcdnode").is_some(), flags, "{release:?}");
        assert_eq!(vm.get("isexternalnode").is_some(), flags, "{release:?}");
        assert_eq!(
            vm.get("kubernetesnodeversion").is_some(),
            flags,
            "{release:?}"
        );
        assert_eq!(
            c.get("clustertype").is_some(),
            release >= Release::V4_19_0,
            "{release:?}"
        );
        let (_, caps) = call(&sim, "listCapabilities", &[]);
        assert_eq!(
            caps["listcapabilitiesresponse"]["capability"]["cloudstackversion"],
            release.version()
        );
    }
}

#[test]
fn get_user_finds_the_caller_by_its_key_with_its_role_type() {
    let mut w = world();
    w.caller_api_key = "the-key".into();
    let sim = Sim::new(w);
    let (status, v) = call(&sim, "getUser", &[("userapikey", "the-key")]);
    assert_eq!(status, 200);
    let user = &v["getuserresponse"]["user"];
    assert_eq!(user["roletype"], "Admin");
    assert_eq!(user["username"], "admin");
    assert!(user.get("secretkey").is_none());
    let (status, v) = call(&sim, "getUser", &[("userapikey", "another")]);
    assert_eq!(status, 431);
    assert_eq!(
        v["getuserresponse"]["errortext"],
        "User with specified API key does not exist"
    );
    assert_eq!(v["getuserresponse"]["cserrorcode"], 4350);
    let (status, _) = call(&sim, "getUser", &[]);
    assert_eq!(status, 431);
    sim.with_world(|w| w.caller_role_type = "DomainAdmin".into());
    let (_, v) = call(&sim, "getUser", &[("userapikey", "the-key")]);
    assert_eq!(v["getuserresponse"]["user"]["roletype"], "DomainAdmin");
}

#[test]
fn admin_only_annotations_are_listed_to_admin_role_types_alone_and_self_is_the_callers() {
    let mut w = world();
    let owner = w.admin();
    let c = w.add_cluster("c", owner, 1, 1, 0);
    w.annotations.push(SimAnnotation {
        id: "tenant-note".into(),
        user_id: "tenant-user".into(),
        username: "alice".into(),
        entity_type: "KUBERNETES_CLUSTER".into(),
        entity_id: c.clone(),
        annotation: "notes [cks-drift mapped_vm:x]".into(),
        admins_only: false,
        created: SimTime::from_unix(NOW),
        removed: false,
    });
    let sim = Sim::new(w);
    call(
        &sim,
        "addAnnotation",
        &[
            ("annotation", "ours"),
            ("entitytype", "KUBERNETES_CLUSTER"),
            ("entityid", &c),
            ("adminsonly", "true"),
        ],
    );
    let listed = |filter: &str| -> Vec<String> {
        let (_, v) = call(
            &sim,
            "listAnnotations",
            &[
                ("entitytype", "KUBERNETES_CLUSTER"),
                ("entityid", &c),
                ("annotationfilter", filter),
            ],
        );
        v["listannotationsresponse"]["annotation"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|n| n["annotation"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(listed("all"), ["ours", "notes [cks-drift mapped_vm:x]"]);
    assert_eq!(listed("self"), ["ours"]);
    assert_eq!(listed("SELF"), ["ours"]);
    sim.with_world(|w| w.caller_role_type = "DomainAdmin".into());
    assert_eq!(listed("all"), ["notes [cks-drift mapped_vm:x]"]);
    assert_eq!(listed("self"), Vec::<String>::new());
}

#[test]
fn encode_api_response_url_encodes_every_string_of_every_answer() {
    let mut w = world();
    let owner = w.admin();
    let c = w.add_cluster("k8s one", owner, 1, 1, 0);
    let sim = Sim::new(w);
    sim.set_encode_api_response(true);
    let (_, v) = call(&sim, "listKubernetesClusters", &[]);
    let r = &v["listkubernetesclustersresponse"];
    assert_eq!(r["count"], 1);
    let cluster = &r["kubernetescluster"][0];
    assert_eq!(cluster["name"], "k8s%20one");
    assert_eq!(cluster["id"], c.replace('-', "%2D").as_str());
    assert_eq!(cluster["controlnodes"], 1);
    let (_, caps) = call(&sim, "listCapabilities", &[]);
    assert_eq!(
        caps["listcapabilitiesresponse"]["capability"]["cloudstackversion"],
        "4%2E22%2E1%2E0"
    );
    let (status, err) = call(&sim, "listKubernetesClusters", &[("clustertype", "x y")]);
    assert_eq!(status, 431);
    assert!(
        err["listkubernetesclustersresponse"]["errortext"]
            .as_str()
            .unwrap()
            .starts_with("Unable%20to%20resolve"),
        "{err}"
    );
}

mod next_releases;
