//! The commands the simulated management server answers, with CloudStack's semantics:
//! listings (ACL, filters, paging, `count`), alerts with their de-duplication, annotations
//! and async jobs.
//!
//! Each handler reads `Params`, reads or changes the `World`, and returns the JSON body or
//! an `ApiError`. Fault injection and the HTTP status live in `Sim`; signing and HTTP in
//! `signature` and `http`.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::time::SimTime;

use super::query::{Acl, ApiError, Params, like_contains, paging, sql_eq};
use super::release::MinusOneNetworks;
use super::render::{
    Index, alert_json, annotation_json, cluster_json, flat_body, job_json, list_body, network_json,
    object_body, vm_json,
};
use super::world::{
    CALLER_ACCOUNT, JobOutcome, JobWork, SimAlert, SimAnnotation, SimCluster, SimJob, SimNetwork,
    SimVm, World,
};

/// Server settings the handlers honour.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// `default.page.size`: the default and the maximum page size; `None` means -1.
    pub max_page_size: Option<u32>,
    /// How many `queryAsyncJobResult` calls see a new job as pending before it runs.
    pub job_pending_polls: u32,
    /// `encode.api.response`: every string of every answer URL-encoded (see
    /// `render::url_encoded_answer`).
    pub encode_api_response: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            max_page_size: Some(super::query::DEFAULT_PAGE_SIZE),
            job_pending_polls: 0,
            encode_api_response: false,
        }
    }
}

/// Every command the simulator implements; anything else is answered like an unknown API.
pub const COMMANDS: &[&str] = &[
    "listKubernetesClusters",
    "listVirtualMachines",
    "listNetworks",
    "listAlerts",
    "archiveAlerts",
    "deleteAlerts",
    "generateAlert",
    "queryAsyncJobResult",
    "addAnnotation",
    "listAnnotations",
    "removeAnnotation",
    "listCapabilities",
    "getUser",
    "listAlertTypes",
    "listConfigurations",
];

/// Runs `command`; `None` if the simulator does not know it.
pub fn execute(
    w: &mut World,
    s: &Settings,
    command: &str,
    params: &BTreeMap<String, String>,
) -> Option<Result<String, ApiError>> {
    let p = Params::new(command, params);
    let result = match command {
        "listKubernetesClusters" => list_kubernetes_clusters(w, s, &p),
        "listVirtualMachines" => list_virtual_machines(w, s, &p),
        "listNetworks" => list_networks(w, s, &p),
        "listAlerts" => list_alerts(w, s, &p),
        "archiveAlerts" => archive_alerts(w, &p, false),
        "deleteAlerts" => archive_alerts(w, &p, true),
        "generateAlert" => generate_alert(w, s, &p),
        "queryAsyncJobResult" => query_async_job_result(w, &p),
        "addAnnotation" => add_annotation(w, &p),
        "listAnnotations" => list_annotations(w, s, &p),
        "removeAnnotation" => remove_annotation(w, &p),
        "listCapabilities" => Ok(list_capabilities(w, &p)),
        "getUser" => get_user(w, &p),
        "listAlertTypes" if w.release.has_list_alert_types() => Ok(list_alert_types(w, &p)),
        "listConfigurations" => list_configurations(w, s, &p),
        _ => return None,
    };
    Some(result)
}

/// `listCapabilities` (`ListCapabilitiesCmd`, any role): a few of its fields, with the
/// release's `cloudstackversion` and the fields that came with a release
/// (`CapabilitiesResponse`).
fn list_capabilities(w: &World, p: &Params) -> String {
    let mut capability = json!({
            "securitygroupsenabled": false,
            "dynamicrolesenabled": true,
            "cloudstackversion": w.release.version(),
            "userpublictemplateenabled": true,
            "supportELB": "false",
            "projectinviterequired": false,
            "allowusercreateprojects": true,
            "customdiskofferingminsize": 1,
            "customdiskofferingmaxsize": 1024,
            "kubernetesserviceenabled": true,
            "kubernetesclusterexperimentalfeaturesenabled": false,
            "apilimitinterval": 1,
            "apilimitmax": 25,
    });
    if w.release.has_additional_config_capability() {
        capability["additionalconfigenabled"] = json!(false);
    }
    if w.release.has_snapshot_chain_size_capability() {
        capability["snapshotshowchainsize"] = json!(false);
    }
    object_body(&p.command, "capability", &capability)
}

/// `listAlertTypes` (`ListAlertTypesCmd`, a `BaseCmd`: no paging; 4.19.1 on): every default
/// alert type, one entry per name (`AlertType.getAlertTypes()` is a set of types, and a
/// number two types share is listed twice), `count` their number.
fn list_alert_types(w: &World, p: &Params) -> String {
    let rows: Vec<Value> = w
        .release
        .default_alert_types()
        .into_iter()
        .flat_map(|(t, names)| names.into_iter().map(move |n| (t, n)))
        .map(|(t, name)| {
            let mut row = json!({"alerttypeid": t, "name": name});
            if w.release.has_repetition_allowed() {
                // `AlertManagerImpl`'s types raised in-server without de-duplication.
                row["repetitionallowed"] = json!(false);
            }
            row
        })
        .collect();
    list_body(&p.command, "alerttype", rows.len(), &rows)
}

/// The setting of the management server's own VM map check (apache/cloudstack PR 14666,
/// `KubernetesClusterService`): global, dynamic, default true.
pub const VM_MAP_CHECK_SETTING: &str = "cloud.kubernetes.cluster.vm.map.check.enabled";

/// `listConfigurations` (`ListCfgsByCmd`, `ManagementServerImpl.searchForConfigurations`):
/// global settings whose name holds `name` (`LIKE %name%`), by name, paged. The world knows
/// two: `encode.api.response` and, on a server with its own VM map check, that check's
/// setting. `component`, `group`, `subgroup`, `defaultvalue`, `displaytext` and `type` came in
/// 4.18 (`ConfigurationResponse`).
fn list_configurations(w: &World, s: &Settings, p: &Params) -> Result<String, ApiError> {
    let mut rows: Vec<(&str, String, &str, &str, &str)> = vec![(
        "encode.api.response",
        s.encode_api_response.to_string(),
        "false",
        "Advanced",
        "ManagementServer",
    )];
    if let Some(on) = w.vm_map_check {
        rows.push((
            VM_MAP_CHECK_SETTING,
            on.to_string(),
            "true",
            "Advanced",
            "KubernetesClusterService",
        ));
    }
    rows.sort_by_key(|r| r.0);
    let name = p.get("name");
    let rows: Vec<Value> = rows
        .into_iter()
        .filter(|r| name.is_none_or(|n| like_contains(r.0, n)))
        .map(|(name, value, default, category, component)| {
            let mut row = json!({
                "category": category,
                "name": name,
                "value": value,
                "description": "",
                "isdynamic": name == VM_MAP_CHECK_SETTING,
            });
            if w.release >= crate::release::Release::V4_18 {
                row["component"] = json!(component);
                row["defaultvalue"] = json!(default);
                row["displaytext"] = json!(name);
                row["type"] = json!("Boolean");
            }
            row
        })
        .collect();
    let page = paging(p, s.max_page_size)?;
    let count = rows.len();
    Ok(list_body(
        &p.command,
        "configuration",
        count,
        &page.apply(rows),
    ))
}

/// `getUser userapikey=` (`GetUserCmd`, an admin command; the same on 4.16 to 4.22.1; on
/// 4.23 the key is looked up in `cloud.api_keypair`, PR 9504, with the same answer and the
/// same error, PR 12938): the user that holds the key, or 431 / 4350. `secretkey` is left out, as it is unless
/// `use.secret.key.in.response` is true.
fn get_user(w: &World, p: &Params) -> Result<String, ApiError> {
    let key = p.required("userapikey")?;
    if w.caller_api_key.is_empty() || key != w.caller_api_key {
        return Err(ApiError::invalid(
            "User with specified API key does not exist",
        ));
    }
    // On 4.23 the answer's `apikey` is the user's newest key pair
    // (`ApiKeyPairDao.getLastApiKeyCreatedByUser`), not the one asked about.
    let apikey = match &w.caller_newer_api_key {
        Some(newer) if w.release.has_api_key_pairs() => newer.clone(),
        _ => w.caller_api_key.clone(),
    };
    let domain = w.root_domain_id().to_string();
    let role_name = match w.caller_role_type.as_str() {
        "Admin" => "Root Admin",
        "ResourceAdmin" => "Resource Admin",
        "DomainAdmin" => "Domain Admin",
        _ => "User",
    };
    Ok(object_body(
        &p.command,
        "user",
        &json!({
            "id": w.admin_user_id,
            "username": CALLER_ACCOUNT,
            "firstname": "Admin",
            "lastname": "User",
            "created": w.now.to_cloudstack(),
            "state": "enabled",
            "account": CALLER_ACCOUNT,
            "accounttype": if w.caller_role_type == "Admin" { 1 } else { 0 },
            "usersource": "native",
            "roleid": "role-1",
            "roletype": w.caller_role_type,
            "rolename": role_name,
            "domainid": domain,
            "domain": "ROOT",
            "apikey": apikey,
            "iscallerchilddomain": false,
            "isdefault": true,
        }),
    ))
}

const CLUSTER_TYPES: &[&str] = &["CloudManaged", "ExternalManaged"];

fn list_kubernetes_clusters(w: &World, s: &Settings, p: &Params) -> Result<String, ApiError> {
    let page = paging(p, s.max_page_size)?;
    let id = p.uuid("id", |v| w.clusters.iter().any(|c| sql_eq(&c.id, v)))?;
    // `clustertype` is a parameter from 4.19.0 on; an older server ignores it as it ignores
    // any name it does not declare.
    let clustertype = p
        .get("clustertype")
        .filter(|_| w.release.has_cluster_type());
    if let Some(t) = clustertype {
        // A case-sensitive enum: `valueOf` fails on anything else.
        if !CLUSTER_TYPES.contains(&t) {
            return Err(ApiError::invalid(format!(
                "Unable to resolve cluster type {t} to a supported value (CloudManaged, ExternalManaged)"
            )));
        }
    }
    let acl = Acl::from_params(p, w, id.is_some())?;
    let (name, keyword, state) = (p.get("name"), p.get("keyword"), p.get("state"));
    let matches: Vec<&SimCluster> = w
        .clusters
        .iter()
        .filter(|c| !c.removed && acl.admits(&c.owner, w))
        .filter(|c| id.is_none_or(|v| sql_eq(&c.id, v)))
        .filter(|c| name.is_none_or(|v| sql_eq(&c.name, v)))
        .filter(|c| keyword.is_none_or(|k| like_contains(&c.name, k)))
        .filter(|c| state.is_none_or(|v| sql_eq(&c.state, v)))
        .filter(|c| {
            // Rows created before 4.19 were upgraded to CloudManaged.
            clustertype.is_none_or(|t| c.clustertype.as_deref().unwrap_or("CloudManaged") == t)
        })
        .collect();
    // Only the requested page is rendered: the count needs the matches, not their JSON.
    let matched = matches.len();
    let ix = Index::with_vms(w);
    let page = page.apply(matches);
    if w.release.cluster_vms_by_internal_id() {
        // `Collectors.toMap(vmId, row)` without a merge function (PR 12386): a VM mapped
        // twice throws `IllegalStateException`, which `ApiServer` answers with 530.
        for c in &page {
            if let Some(twice) = c
                .map
                .iter()
                .enumerate()
                .find(|(i, id)| c.map[..*i].contains(id))
            {
                let internal = w
                    .vms
                    .iter()
                    .position(|v| v.id == *twice.1)
                    .map_or(0, |i| i + 1);
                return Err(runtime_error(format!(
                    "Duplicate key {internal} (attempted merging values KubernetesClusterVmMapVO and \
                     KubernetesClusterVmMapVO)"
                )));
            }
        }
    }
    let rendered: Vec<Value> = page.into_iter().map(|c| cluster_json(w, &ix, c)).collect();
    // Before 4.19.1 `count` is the rows of this page (see `Release::counts_cluster_page_rows`).
    let count = if w.release.counts_cluster_page_rows() {
        rendered.len()
    } else {
        matched
    };
    Ok(list_body(&p.command, "kubernetescluster", count, &rendered))
}

fn list_virtual_machines(w: &World, s: &Settings, p: &Params) -> Result<String, ApiError> {
    let page = paging(p, s.max_page_size)?;
    let vm_exists = |v: &str| w.vms.iter().any(|vm| sql_eq(&vm.id, v));
    let id = p.uuid("id", vm_exists)?;
    let ids = p.uuid_list("ids", vm_exists)?;
    if id.is_some() && ids.is_some() {
        return Err(ApiError::invalid(
            "Specify either id or ids but not both parameters",
        ));
    }
    let zone = p.uuid("zoneid", |v| w.zone(v).is_some())?;
    let network = p.uuid("networkid", |v| w.network(v).is_some())?;
    // `ListVMsCmd.getDetails`: each item is `VMDetails.valueOf`, case-sensitive, untrimmed
    // (`StringTokenizer` on ","); an empty list means all details. `vnfnics` joined the enum,
    // and so the error's list, in 4.19.0.
    let allowed: Vec<&str> = VM_DETAILS
        .iter()
        .copied()
        .filter(|d| *d != "vnfnics" || w.release.has_vnf_nics_detail())
        .collect();
    if let Some(raw) = p.raw("details")
        && raw
            .split(',')
            .any(|d| !d.is_empty() && !allowed.contains(&d))
    {
        return Err(ApiError::invalid(format!(
            "The details parameter contains a non permitted value. The allowed values are [{}]",
            allowed.join(", ")
        )));
    }
    let acl = Acl::from_params(p, w, id.is_some())?;
    let (name, keyword, state) = (p.get("name"), p.get("keyword"), p.get("state"));
    let matches: Vec<&SimVm> = w
        .vms
        .iter()
        .filter(|vm| !vm.removed && acl.admits(&vm.owner, w))
        .filter(|vm| id.is_none_or(|v| sql_eq(&vm.id, v)))
        .filter(|vm| {
            ids.as_ref()
                .is_none_or(|l| l.iter().any(|v| sql_eq(&vm.id, v)))
        })
        .filter(|vm| zone.is_none_or(|z| vm.zone_id == z))
        .filter(|vm| network.is_none_or(|n| vm.nic.as_ref().is_some_and(|x| x.network_id == n)))
        .filter(|vm| name.is_none_or(|v| sql_eq(&vm.name, v)))
        .filter(|vm| {
            keyword.is_none_or(|k| {
                like_contains(&vm.displayname, k)
                    || like_contains(&vm.name, k)
                    || like_contains(&vm.instancename, k)
                    || vm
                        .nic
                        .as_ref()
                        .is_some_and(|n| like_contains(&n.ip_address, k))
                    || sql_eq(&vm.state, k)
            })
        })
        .filter(|vm| match state {
            // Admins see Destroyed and Expunging VMs unless they ask for Present ones.
            None => true,
            Some(st) if st.eq_ignore_ascii_case("present") => {
                !sql_eq(&vm.state, "Destroyed") && !sql_eq(&vm.state, "Expunging")
            }
            Some(st) => sql_eq(&vm.state, st),
        })
        .collect();
    let count = matches.len();
    let ix = Index::new(w);
    let rendered: Vec<Value> = page
        .apply(matches)
        .into_iter()
        .map(|vm| vm_json(w, &ix, vm, false))
        .collect();
    Ok(list_body(&p.command, "virtualmachine", count, &rendered))
}

/// `ApiConstants.VMDetails`, in declaration order.
const VM_DETAILS: &[&str] = &[
    "all", "group", "nics", "stats", "secgrp", "tmpl", "servoff", "diskoff", "backoff", "iso",
    "volume", "min", "affgrp", "vnfnics",
];

fn list_networks(w: &World, s: &Settings, p: &Params) -> Result<String, ApiError> {
    let page = paging(p, s.max_page_size)?;
    let id = p.uuid("id", |v| w.network(v).is_some())?;
    let zone = p.uuid("zoneid", |v| w.zone(v).is_some())?;
    let mut acl = Acl::from_params(p, w, id.is_some())?;
    // What `projectid=-1`, or `listall` without it, selects differs by release (see
    // `Release::minus_one_networks`).
    let minus_one = match p.get("projectid") {
        Some("-1") => w.release.minus_one_networks(),
        _ => MinusOneNetworks::All,
    };
    match minus_one {
        MinusOneNetworks::ProjectsOnly => acl.only_projects(),
        MinusOneNetworks::ProjectsAndDomainWide | MinusOneNetworks::All => {}
    }
    if p.get("projectid").is_none() && w.release.list_all_networks_include_projects() {
        acl.with_projects();
    }
    let (keyword, kind) = (p.get("keyword"), p.get("type"));
    let matches: Vec<&SimNetwork> = w
        .networks
        .iter()
        .filter(|n| acl.admits(&n.owner, w))
        .filter(|n| {
            // 4.17.1 to 4.21 with `projectid=-1`: project networks, domain networks and the
            // networks with `network_permissions` rows (PR 6546's join); not an account's own.
            minus_one != MinusOneNetworks::ProjectsAndDomainWide
                || n.owner.is_project()
                || n.is_domain_wide()
                || !n.permitted.is_empty()
        })
        .filter(|n| id.is_none_or(|v| n.id == v))
        .filter(|n| zone.is_none_or(|z| n.zone_id == z))
        .filter(|n| kind.is_none_or(|t| sql_eq(n.network_type.as_str(), t)))
        .filter(|n| keyword.is_none_or(|k| like_contains(&n.name, k)))
        .collect();
    let count = matches.len();
    let rendered: Vec<Value> = page
        .apply(matches)
        .into_iter()
        .map(|n| network_json(w, n))
        .collect();
    Ok(list_body(&p.command, "network", count, &rendered))
}

/// `listAlerts`: `ListAlertsCmd` (api/.../command/admin/resource) declares `id`, `type` and,
/// since 4.3 (so on every supported release), `name`, both plain STRINGs; and
/// `ManagementServerImpl.searchForAlerts` ANDs them: `id`, `type` and `name` as EQ (MySQL's
/// case-insensitive collation), `keyword` as LIKE `%kw%` on the subject, un-archived rows
/// only, newest `lastSent` first.
fn list_alerts(w: &World, s: &Settings, p: &Params) -> Result<String, ApiError> {
    let page = paging(p, s.max_page_size)?;
    let id = p.uuid("id", |v| w.alerts.iter().any(|a| a.id == v))?;
    let (kind, name, keyword) = (p.get("type"), p.get("name"), p.get("keyword"));
    let matches: Vec<Value> = w
        .active_alerts()
        .into_iter()
        .filter(|a| id.is_none_or(|v| a.id == v))
        .filter(|a| kind.is_none_or(|t| a.alert_type.to_string() == t.trim()))
        .filter(|a| name.is_none_or(|n| sql_eq(&a.name, n)))
        .filter(|a| keyword.is_none_or(|k| like_contains(&a.description, k)))
        .map(alert_json)
        .collect();
    let count = matches.len();
    Ok(list_body(&p.command, "alert", count, &page.apply(matches)))
}

/// `archiveAlerts` (or, with `delete`, `deleteAlerts`) by `ids` and/or `type`.
fn archive_alerts(w: &mut World, p: &Params, delete: bool) -> Result<String, ApiError> {
    let ids = p.uuid_list("ids", |v| w.alerts.iter().any(|a| a.id == v))?;
    let kind = p.number("type")?;
    let start = date_param(p, "startdate")?;
    let end = date_param(p, "enddate")?;
    // `ManagementServerImpl.archiveAlerts` / `deleteAlerts`: a lone `startdate` is not enough.
    if ids.is_none() && kind.is_none() && end.is_none() {
        return Err(ApiError::invalid(
            "either ids, type, startdate or enddate must be specified",
        ));
    }
    if start.is_some() && end.is_none() {
        return Err(ApiError::invalid(
            "enddate must be specified with startdate parameter",
        ));
    }
    let selected: Vec<usize> = w
        .alerts
        .iter()
        .enumerate()
        .filter(|(_, a)| !a.archived)
        .filter(|(_, a)| ids.as_ref().is_none_or(|l| l.contains(&a.id.as_str())))
        .filter(|(_, a)| kind.is_none_or(|t| i64::from(a.alert_type) == t))
        .filter(|(_, a)| start.is_none_or(|t| a.sent >= t) && end.is_none_or(|t| a.sent <= t))
        .map(|(i, _)| i)
        .collect();
    // `AlertDaoImpl.archiveAlert` / `deleteAlert` select only un-archived rows and refuse the
    // whole request, before changing anything, when fewer rows than ids were selected (an
    // archived alert, or an id given twice); `ArchiveAlertsCmd` / `DeleteAlertsCmd` then
    // throw `ServerApiException(INTERNAL_ERROR)`: 530 / 9999.
    if ids.as_ref().is_some_and(|l| selected.len() < l.len()) {
        let verb = if delete { "delete" } else { "archive" };
        return Err(ApiError {
            code: 530,
            cs_code: Some(super::query::CS_SERVER_API),
            text: format!("Unable to {verb} Alerts, one or more parameters has invalid values"),
        });
    }
    if delete {
        for i in selected.into_iter().rev() {
            w.alerts.remove(i);
        }
    } else {
        for i in selected {
            w.alerts[i].archived = true;
        }
    }
    Ok(flat_body(&p.command, &json!({"success": true})))
}

/// A date parameter: `yyyy-MM-dd` (midnight UTC) or `yyyy-MM-ddTHH:mm:ss` with an offset.
fn date_param(p: &Params, name: &str) -> Result<Option<SimTime>, ApiError> {
    let Some(raw) = p.get(name) else {
        return Ok(None);
    };
    let full = if raw.len() == 10 {
        format!("{raw}T00:00:00Z")
    } else {
        raw.to_string()
    };
    match SimTime::parse(&full) {
        Some(t) => Ok(Some(t)),
        None => Err(ApiError::param(format!(
            "Unable to parse date {raw} for command {}, please pass dates in the format mentioned in the api documentation",
            p.command
        ))),
    }
}

/// `generateAlert`: parameters are checked synchronously (required, lengths, uuids); the
/// rest happens in the async job (see [`run_job`]).
fn generate_alert(w: &mut World, s: &Settings, p: &Params) -> Result<String, ApiError> {
    let raw_type = p.required("type")?;
    let name = p.required("name")?;
    let description = p.required("description")?;
    // Lengths and emptiness were checked with the declared parameters (`params`).
    let alert_type: i16 = raw_type
        .trim()
        .parse()
        .map_err(|_| p.bad_value("type", raw_type))?;
    let zone_id = p.uuid("zoneid", |v| w.zone(v).is_some())?;
    let pod_id = p.uuid("podid", |v| {
        w.zones.iter().any(|z| z.pod_ids.iter().any(|x| x == v))
    })?;
    let work = JobWork::GenerateAlert {
        alert_type,
        name: name.to_string(),
        description: description.to_string(),
        zone_id: zone_id.map(str::to_string),
        pod_id: pod_id.map(str::to_string),
    };
    let job_id = submit_job(
        w,
        s,
        "org.apache.cloudstack.api.command.admin.alert.GenerateAlertCmd",
        work,
    );
    Ok(flat_body(&p.command, &json!({"jobid": job_id})))
}

fn submit_job(w: &mut World, s: &Settings, cmd_class: &str, work: JobWork) -> String {
    let id = w.fresh_id();
    w.jobs.push(SimJob {
        id: id.clone(),
        cmd_class: cmd_class.to_string(),
        created: w.now,
        completed: None,
        outcome: JobOutcome::Pending,
        polls_until_done: s.job_pending_polls,
        work: Some(work),
    });
    if s.job_pending_polls == 0 {
        run_job(w, &id);
    }
    id
}

/// Completes a job: performs its work and records the outcome.
fn run_job(w: &mut World, job_id: &str) {
    let Some(index) = w.jobs.iter().position(|j| j.id == job_id) else {
        return;
    };
    let Some(work) = w.jobs[index].work.take() else {
        return;
    };
    let outcome = match work {
        JobWork::GenerateAlert {
            alert_type,
            name,
            description,
            zone_id,
            pod_id,
        } => match store_alert(w, alert_type, &name, &description, zone_id, pod_id) {
            Ok(()) => JobOutcome::Succeeded(json!({"success": true})),
            Err(e) => JobOutcome::Failed {
                code: e.code,
                text: e.text,
            },
        },
    };
    let now = w.now;
    let job = &mut w.jobs[index];
    job.outcome = outcome;
    job.completed = Some(now);
}

/// `AlertManagerImpl.sendAlert` for an API-generated alert: nothing is stored while an
/// un-archived alert of the same type in the same zone (and pod, if given) exists, and the
/// caller is told it succeeded all the same.
fn store_alert(
    w: &mut World,
    alert_type: i16,
    name: &str,
    description: &str,
    zone_id: Option<String>,
    pod_id: Option<String>,
) -> Result<(), ApiError> {
    let defaults = w.release.default_alert_types();
    if let Some((_, names)) = defaults.iter().find(|(t, _)| *t == alert_type)
        && !names.iter().any(|n| n.eq_ignore_ascii_case(name))
    {
        // Raised inside the job; the job dispatcher turns it into a 431 job failure.
        return Err(ApiError::invalid(format!(
            "There is a default alert having type {alert_type} and name {}",
            names[0]
        )));
    }
    // The `alert` table is `utf8` (three bytes a character): a four-byte character fails the
    // insert, and `AlertManagerImpl.sendAlert` catches and only logs that, so the job still
    // succeeds and nothing is stored.
    if name
        .chars()
        .chain(description.chars())
        .any(|c| c.len_utf8() > 3)
    {
        return Ok(());
    }
    let duplicate = w.alerts.iter().any(|a| {
        !a.archived
            && a.alert_type == alert_type
            && a.zone_id == zone_id
            && (pod_id.is_none() || a.pod_id == pod_id)
    });
    if duplicate {
        return Ok(());
    }
    let id = w.fresh_id();
    w.alerts.push(SimAlert {
        id,
        alert_type,
        name: name.to_string(),
        description: description.to_string(),
        zone_id,
        pod_id,
        sent: w.now,
        archived: false,
    });
    Ok(())
}

fn query_async_job_result(w: &mut World, p: &Params) -> Result<String, ApiError> {
    let job_id = p.required("jobid")?;
    let Some(index) = w.jobs.iter().position(|j| j.id == job_id) else {
        return Err(p.unknown_uuid("jobid", job_id));
    };
    let job = &mut w.jobs[index];
    if job.outcome == JobOutcome::Pending {
        if job.polls_until_done > 0 {
            job.polls_until_done -= 1;
        } else {
            let id = job.id.clone();
            run_job(w, &id);
        }
    }
    Ok(flat_body(&p.command, &job_json(w, &w.jobs[index])))
}

/// `AnnotationService.EntityType`: what `addAnnotation` accepts (`valueOf`, case-sensitive).
const ANNOTATION_TYPES: &[&str] = &[
    "VM",
    "VOLUME",
    "SNAPSHOT",
    "VM_SNAPSHOT",
    "INSTANCE_GROUP",
    "SSH_KEYPAIR",
    "USER_DATA",
    "NETWORK",
    "VPC",
    "PUBLIC_IP_ADDRESS",
    "VPN_CUSTOMER_GATEWAY",
    "TEMPLATE",
    "ISO",
    "KUBERNETES_CLUSTER",
    "SERVICE_OFFERING",
    "DISK_OFFERING",
    "NETWORK_OFFERING",
    "ZONE",
    "POD",
    "CLUSTER",
    "HOST",
    "DOMAIN",
    "PRIMARY_STORAGE",
    "SECONDARY_STORAGE",
    "VR",
    "SYSTEM_VM",
    "AUTOSCALE_VM_GROUP",
    "MANAGEMENT_SERVER",
    "OBJECT_STORAGE",
];

/// An exception `ApiServer` turns into INTERNAL_ERROR for the root admin: 530, cserrorcode
/// 9999, the exception's message.
fn runtime_error(text: impl Into<String>) -> ApiError {
    ApiError {
        code: 530,
        cs_code: Some(super::query::CS_SERVER_API),
        text: text.into(),
    }
}

/// `AddAnnotationCmd.execute` and `AnnotationManagerImpl.addAnnotation` for the root admin:
/// the entity is never looked up (`checkAnnotationPermissions` returns early for admins), so
/// an annotation on a removed or unknown entity is stored all the same.
fn add_annotation(w: &mut World, p: &Params) -> Result<String, ApiError> {
    let Some(entity_id) = p.raw("entityid") else {
        // `Preconditions.checkNotNull`.
        return Err(runtime_error(
            "I have to have an entity to set an annotation on!",
        ));
    };
    let Some(entity_type) = p.raw("entitytype") else {
        // `EntityType.valueOf(null)`.
        return Err(runtime_error("Name is null"));
    };
    if !ANNOTATION_TYPES.contains(&entity_type) {
        // `Preconditions.checkState`: an IllegalStateException, so 530 and not 431.
        return Err(runtime_error(format!(
            "'{entity_type}' is not a valid EntityType to put annotations on"
        )));
    }
    let id = w.fresh_id();
    let annotation = SimAnnotation {
        id,
        user_id: w.admin_user_id.clone(),
        username: CALLER_ACCOUNT.to_string(),
        entity_type: entity_type.to_string(),
        entity_id: entity_id.to_string(),
        annotation: p.raw("annotation").unwrap_or("").to_string(),
        admins_only: p.flag("adminsonly"),
        created: w.now,
        removed: false,
    };
    let body = object_body(&p.command, "annotation", &annotation_json(w, &annotation));
    w.annotations.push(annotation);
    Ok(body)
}

/// `ListAnnotationsCmd.execute` and `AnnotationManagerImpl.getAnnotationsForApiCmd` for the
/// root admin, whose annotations every one here is.
fn list_annotations(w: &World, s: &Settings, p: &Params) -> Result<String, ApiError> {
    let page = paging(p, s.max_page_size)?;
    let (id, entity_type, entity_id) = (p.raw("id"), p.raw("entitytype"), p.raw("entityid"));
    let not_blank = |v: Option<&str>| v.is_some_and(|v| !v.trim().is_empty());
    if not_blank(id) && not_blank(entity_type) {
        return Err(ApiError::param(
            // Spelled as in `ListAnnotationsCmd.execute`.
            "I can search for an anotation on an entity or for a specific annotation, not both",
        ));
    }
    if not_blank(id) && (entity_type.is_some() || entity_id.is_some()) {
        return Err(ApiError::param(
            "I will either search for a specific annotation or for annotations on an entity, not both",
        ));
    }
    let filter = p.get("annotationfilter").unwrap_or("all");
    let keyword = p.get("keyword").filter(|k| !k.trim().is_empty());
    let caller = w.admin_user_id.as_str();
    // `AnnotationManagerImpl.isCallingUserAdmin` accepts `RoleType.Admin` alone: for any
    // other caller `adminsOnly = false` is added, so admin-only annotations are not listed.
    let admin = w.caller_role_type == "Admin";
    let mine_only = filter.eq_ignore_ascii_case("self");
    let mut matches: Vec<(usize, &SimAnnotation)> = if let Some(id) = id {
        // `getSingleAnnotationListByUuid`: only when `userid` is the creator's and the
        // annotation is admins-only (the caller is an admin); `keyword` is ignored here.
        w.annotations
            .iter()
            .enumerate()
            .filter(|(_, a)| !a.removed && a.id == id)
            .filter(|(_, a)| p.get("userid") == Some(caller) && a.admins_only)
            .filter(|_| filter == "all" || filter.eq_ignore_ascii_case("self"))
            .collect()
    } else {
        w.annotations
            .iter()
            .enumerate()
            .filter(|(_, a)| !a.removed)
            .filter(|(_, a)| admin || !a.admins_only)
            // `annotationfilter=self`: the caller's own (`AnnotationDaoImpl`, by user id).
            .filter(|(_, a)| !mine_only || a.user_id == caller)
            // A plain string comparison: an unknown type matches nothing.
            .filter(|(_, a)| entity_type.is_none_or(|t| t.is_empty() || a.entity_type == t))
            .filter(|(_, a)| entity_id.is_none_or(|e| a.entity_id == e))
            .filter(|(_, a)| keyword.is_none_or(|k| like_contains(&a.annotation, k)))
            .collect()
    };
    // Newest first.
    matches.sort_by(|a, b| b.1.created.cmp(&a.1.created).then(b.0.cmp(&a.0)));
    let items: Vec<Value> = matches
        .into_iter()
        .map(|(_, a)| annotation_json(w, a))
        .collect();
    let count = items.len();
    Ok(list_body(
        &p.command,
        "annotation",
        count,
        &page.apply(items),
    ))
}

/// `AnnotationManagerImpl.removeAnnotation`: `findByUuid` skips removed rows, and building
/// the refusal for a missing one dereferences it: a NullPointerException, which `ApiServer`
/// answers with 530 / 9999 and (Java 17's helpful message) this text.
fn remove_annotation(w: &mut World, p: &Params) -> Result<String, ApiError> {
    let id = p.required("id")?;
    let Some(a) = w.annotations.iter_mut().find(|a| a.id == id && !a.removed) else {
        return Err(runtime_error(
            "Cannot invoke \"org.apache.cloudstack.annotation.AnnotationVO.getEntityType()\" because \"annotation\" is null",
        ));
    };
    a.removed = true;
    // The answer shows the annotation as it was before removal.
    let mut shown = a.clone();
    shown.removed = false;
    Ok(object_body(
        &p.command,
        "annotation",
        &annotation_json(w, &shown),
    ))
}
