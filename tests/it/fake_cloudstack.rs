//! The fake CloudStack over HTTP, driven by hand-signed requests: its authentication, and
//! the CloudStack behaviours the checker depends on (paging, hidden map rows, VM probes,
//! alert de-duplication, ACL).

use std::sync::Arc;
use std::time::Duration;

use cks_drift::base::time::Timestamp;
use cks_drift::cloudstack::sign;
use cks_drift_sim::{CONTENT_TYPE, FakeCloudStack, Sim, SimTime, World};
use serde_json::{Value, json};

const API_KEY: &str = "fake-api-key";
const SECRET: &str = "fake-secret-key";
const UNAUTHORIZED: &str = "unable to verify user credentials and/or request signature";

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// The command's parameters plus the authentication ones, signed with `secret`.
fn signed(secret: &str, command: &str, params: &[(&str, &str)], expires: Timestamp) -> String {
    let mut all: Vec<(String, String)> = vec![
        ("command".into(), command.into()),
        ("apikey".into(), API_KEY.into()),
        ("response".into(), "json".into()),
        ("signatureversion".into(), "3".into()),
        ("expires".into(), expires.to_cloudstack()),
    ];
    all.extend(params.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    sign::signed_query(secret, &all)
}

fn soon() -> Timestamp {
    Timestamp::now().plus(Duration::from_secs(300))
}

async fn send_get(fake: &FakeCloudStack, query: &str) -> (u16, String) {
    let r = client()
        .get(format!("{}?{query}", fake.url()))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.text().await.unwrap())
}

async fn get(fake: &FakeCloudStack, command: &str, params: &[(&str, &str)]) -> (u16, Value) {
    let (status, body) = send_get(fake, &signed(SECRET, command, params, soon())).await;
    let v = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    (status, v)
}

async fn post(fake: &FakeCloudStack, command: &str, params: &[(&str, &str)]) -> (u16, Value) {
    let r = client()
        .post(fake.url())
        .header("content-type", "application/x-www-form-urlencoded")
        .body(signed(SECRET, command, params, soon()))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let body = r.text().await.unwrap();
    let v = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    (status, v)
}

fn ids(list: &Value) -> Vec<String> {
    match list.as_array() {
        None => Vec::new(),
        Some(items) => items
            .iter()
            .map(|x| x["id"].as_str().unwrap().to_string())
            .collect(),
    }
}

async fn start(world: World) -> FakeCloudStack {
    FakeCloudStack::start(Arc::new(Sim::new(world)), API_KEY, SECRET).await
}

fn world() -> World {
    World::new(SimTime::now())
}

#[tokio::test]
async fn bad_signatures_and_keys_get_401() {
    let mut w = world();
    let admin = w.admin();
    w.add_cluster("prod", admin, 1, 1, 0);
    let fake = start(w).await;
    let unauthorized = |key: &str| {
        format!(r#"{{"{key}":{{"uuidList":[],"errorcode":401,"errortext":"{UNAUTHORIZED}"}}}}"#)
    };

    let q = signed("wrong-secret", "listKubernetesClusters", &[], soon());
    let r = client()
        .get(format!("{}?{q}", fake.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert_eq!(r.headers()["content-type"], CONTENT_TYPE);
    assert_eq!(
        r.text().await.unwrap(),
        unauthorized("listkubernetesclustersresponse")
    );

    // A parameter changed after signing.
    let q = signed(
        SECRET,
        "listKubernetesClusters",
        &[("listall", "true")],
        soon(),
    )
    .replace("listall=true", "listall=false");
    assert_eq!(
        send_get(&fake, &q).await,
        (401, unauthorized("listkubernetesclustersresponse"))
    );

    let past = Timestamp::now().minus(Duration::from_secs(60));
    let q = signed(SECRET, "listKubernetesClusters", &[], past);
    assert_eq!(send_get(&fake, &q).await.0, 401, "expired");

    let q = signed(SECRET, "listKubernetesClusters", &[], soon()).replace(API_KEY, "other-key");
    assert_eq!(send_get(&fake, &q).await.0, 401, "unknown api key");

    let q = signed(SECRET, "listKubernetesClusters", &[], soon());
    let without_expires: String = q
        .split('&')
        .filter(|p| !p.starts_with("expires="))
        .collect::<Vec<_>>()
        .join("&");
    assert_eq!(
        send_get(&fake, &without_expires).await.0,
        401,
        "v3 without expires"
    );

    let q = signed(SECRET, "listVirtualMachinez", &[], soon());
    assert_eq!(
        send_get(&fake, &q).await,
        (401, unauthorized("errorresponse"))
    );

    assert!(
        fake.sim()
            .calls()
            .iter()
            .all(|c| c.command != "listKubernetesClusters")
    );
    let (status, v) = get(&fake, "listKubernetesClusters", &[]).await;
    assert_eq!(status, 200);
    assert_eq!(v["listkubernetesclustersresponse"]["count"], 1);
}

#[tokio::test]
async fn values_are_verified_after_decoding() {
    let mut w = world();
    let admin = w.admin();
    w.add_vm("web a+b~c*", admin, None);
    let fake = start(w).await;
    let (status, v) = get(&fake, "listVirtualMachines", &[("name", "web a+b~c*")]).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v["listvirtualmachinesresponse"]["virtualmachine"][0]["name"],
        "web a+b~c*"
    );
}

#[tokio::test]
async fn pages_carry_the_total_count() {
    let mut w = world();
    let admin = w.admin();
    let all: Vec<String> = (0..5)
        .map(|i| w.add_cluster(&format!("c{i}"), admin.clone(), 1, 1, 0))
        .collect();
    let fake = start(w).await;
    let mut seen = Vec::new();
    for page in ["1", "2", "3"] {
        let (status, v) = get(
            &fake,
            "listKubernetesClusters",
            &[("page", page), ("pagesize", "2")],
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(v["listkubernetesclustersresponse"]["count"], 5);
        seen.extend(ids(
            &v["listkubernetesclustersresponse"]["kubernetescluster"],
        ));
    }
    assert_eq!(seen, all);
    let (_, v) = get(
        &fake,
        "listKubernetesClusters",
        &[("page", "4"), ("pagesize", "2")],
    )
    .await;
    assert_eq!(v, json!({"listkubernetesclustersresponse": {"count": 5}}));

    let (status, v) = get(&fake, "listKubernetesClusters", &[("page", "1")]).await;
    assert_eq!(status, 431);
    assert_eq!(
        v["listkubernetesclustersresponse"]["errortext"],
        "\"pagesize\" parameter is required when \"page\" is specified"
    );
    let (status, v) = get(
        &fake,
        "listKubernetesClusters",
        &[("page", "1"), ("pagesize", "501")],
    )
    .await;
    assert_eq!(status, 431);
    assert_eq!(
        v["listkubernetesclustersresponse"]["errortext"],
        "Page size can't exceed max allowed page size value: 500"
    );
}

#[tokio::test]
async fn cluster_map_hides_expunged_and_unknown_vms() {
    let mut w = world();
    let admin = w.admin();
    let c = w.add_cluster("prod", admin, 1, 3, 0);
    let map = w.cluster(&c).unwrap().map.clone();
    w.set_vm_state(&map[2], "Destroyed");
    w.expunge_vm(&map[3]);
    let never = w.fresh_id();
    w.add_map_row(&c, &never);
    let fake = start(w).await;

    let (status, v) = get(&fake, "listKubernetesClusters", &[("id", &c)]).await;
    assert_eq!(status, 200);
    let cluster = &v["listkubernetesclustersresponse"]["kubernetescluster"][0];
    assert_eq!(cluster["size"], 3);
    let vms = &cluster["virtualmachines"];
    assert_eq!(ids(vms), [map[0].clone(), map[1].clone(), map[2].clone()]);
    let states: Vec<&str> = vms
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["Running", "Running", "Destroyed"]);
}

#[tokio::test]
async fn vm_probe_tells_expunged_from_never_existed() {
    let mut w = world();
    let admin = w.admin();
    let c = w.add_cluster("prod", admin, 1, 1, 0);
    let worker = w.cluster(&c).unwrap().map[1].clone();
    w.expunge_vm(&worker);
    let never = w.fresh_id();
    let fake = start(w).await;

    let (status, v) = get(&fake, "listVirtualMachines", &[("id", &worker)]).await;
    assert_eq!(
        (status, v),
        (200, json!({"listvirtualmachinesresponse": {}}))
    );

    let (status, v) = get(&fake, "listVirtualMachines", &[("id", &never)]).await;
    assert_eq!(status, 431);
    let err = &v["listvirtualmachinesresponse"];
    assert_eq!(err["errorcode"], 431);
    assert_eq!(
        err["errortext"],
        format!(
            "Unable to execute API command listvirtualmachines due to invalid value. Invalid \
             parameter id value={never} due to incorrect long value format, or entity does not \
             exist or due to incorrect parameter annotation for the field in api cmd class."
        )
    );
}

async fn generate_alert(fake: &FakeCloudStack, zone: Option<&str>) -> Value {
    let mut params = vec![
        ("type", "1001"),
        ("name", "CKS.DRIFT"),
        ("description", "cluster prod: 1 unmapped VM"),
    ];
    if let Some(z) = zone {
        params.push(("zoneid", z));
    }
    let (status, v) = post(fake, "generateAlert", &params).await;
    assert_eq!(status, 200, "{v}");
    let job = v["generatealertresponse"]["jobid"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, v) = get(fake, "queryAsyncJobResult", &[("jobid", &job)]).await;
    assert_eq!(status, 200, "{v}");
    v["queryasyncjobresultresponse"].clone()
}

#[tokio::test]
async fn generated_alerts_are_suppressed_until_archived() {
    let w = world();
    let zone = w.default_zone_id().to_string();
    let fake = start(w).await;

    let first = generate_alert(&fake, Some(&zone)).await;
    assert_eq!(
        (&first["jobstatus"], &first["jobresult"]),
        (&json!(1), &json!({"success": true}))
    );
    let second = generate_alert(&fake, Some(&zone)).await;
    assert_eq!(
        second["jobstatus"], 1,
        "the duplicate still reports success"
    );

    let (_, v) = get(&fake, "listAlerts", &[]).await;
    assert_eq!(v["listalertsresponse"]["count"], 1);
    let stored = ids(&v["listalertsresponse"]["alert"]);

    let (status, v) = post(&fake, "archiveAlerts", &[("ids", &stored[0])]).await;
    assert_eq!(
        (status, v),
        (200, json!({"archivealertsresponse": {"success": true}}))
    );
    let (_, v) = get(&fake, "listAlerts", &[]).await;
    assert_eq!(v, json!({"listalertsresponse": {}}));

    let third = generate_alert(&fake, Some(&zone)).await;
    assert_eq!(third["jobstatus"], 1);
    let (_, v) = get(&fake, "listAlerts", &[]).await;
    assert_eq!(v["listalertsresponse"]["count"], 1);
    let now_stored = ids(&v["listalertsresponse"]["alert"]);
    assert_ne!(now_stored, stored, "a new alert after archiving");
    assert_eq!(
        v["listalertsresponse"]["alert"][0]["description"],
        "cluster prod: 1 unmapped VM"
    );
}

#[tokio::test]
async fn listall_without_projectid_skips_project_clusters() {
    let mut w = world();
    let admin = w.admin();
    let team = w.add_project("team");
    let own = w.add_cluster("own", admin, 1, 1, 0);
    let proj = w.add_cluster("proj", team, 1, 1, 0);
    let fake = start(w).await;
    let listed = |v: Value| ids(&v["listkubernetesclustersresponse"]["kubernetescluster"]);

    let (_, v) = get(&fake, "listKubernetesClusters", &[("listall", "true")]).await;
    assert_eq!(listed(v), vec![own.clone()]);
    let (_, v) = get(
        &fake,
        "listKubernetesClusters",
        &[("listall", "true"), ("projectid", "-1")],
    )
    .await;
    assert_eq!(listed(v), [own.clone(), proj.clone()]);
    let (_, v) = get(&fake, "listKubernetesClusters", &[("id", &proj)]).await;
    assert_eq!(listed(v), vec![proj.clone()]);
}

#[tokio::test]
async fn enforced_post_rejects_state_changing_gets() {
    let fake = start(world()).await;
    fake.enforce_post(true);
    let params = [("type", "1001"), ("name", "n"), ("description", "d")];
    let (status, v) = get(&fake, "generateAlert", &params).await;
    assert_eq!(status, 400);
    assert_eq!(
        v,
        json!({"generatealertresponse": {
            "uuidList": [],
            "errorcode": 400,
            "errortext": "State changing command generateAlert needs to be sent using POST request"
        }})
    );
    assert_eq!(fake.sim().call_count("generateAlert"), 0);
    let (status, _) = post(&fake, "generateAlert", &params).await;
    assert_eq!(status, 200);
    let (status, _) = get(&fake, "listAlerts", &[]).await;
    assert_eq!(status, 200, "reads may still use GET");

    let far = Timestamp::now().plus(Duration::from_secs(3600));
    let q = signed(SECRET, "listAlerts", &[], far);
    assert_eq!(send_get(&fake, &q).await.0, 401, "expires too far ahead");
}

#[tokio::test]
async fn only_json_responses_are_served() {
    let fake = start(world()).await;
    let mut params: Vec<(String, String)> = vec![
        ("command".into(), "listAlerts".into()),
        ("apikey".into(), API_KEY.into()),
        ("signatureversion".into(), "3".into()),
        ("expires".into(), soon().to_cloudstack()),
    ];
    let (status, body) = send_get(&fake, &sign::signed_query(SECRET, &params)).await;
    assert_eq!(status, 400);
    assert_eq!(body, "this fake CloudStack answers only response=json");
    params.push(("response".into(), "json".into()));
    let (status, _) = send_get(&fake, &sign::signed_query(SECRET, &params)).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn stops_when_dropped() {
    let fake = start(world()).await;
    let url = fake.url();
    let (status, _) = get(&fake, "listAlerts", &[]).await;
    assert_eq!(status, 200);
    drop(fake);
    // The listener closes once the aborted server task is dropped; wait for that, bounded.
    let mut refused = false;
    for _ in 0..100 {
        if client().get(&url).send().await.is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(refused, "the fake still answers after drop");
}
