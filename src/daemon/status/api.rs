//! The read-only JSON API of the endpoint, `/api/v1/…`: the status, the open findings (the
//! fields of `check --format json`, with where each stands), the clusters and one cluster.
//! Lists are paged (`page` from 1, `per_page` up to [`MAX_ROWS`]). Pure: a view in, a body out.

use serde::Serialize;
use serde_json::{Value, json};

use super::{ClusterRow, DEFAULT_ROWS, Finding, MAX_ROWS, Standby, View};
use crate::engine::findings::FindingRow;

/// Why a request is refused, as the API answers it: `{"error": "..."}` with its status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub status: u16,
    pub error: String,
}

/// `page` and `per_page` of a query string; anything else in it is ignored.
pub fn paging(query: Option<&str>) -> Result<(usize, usize), Refused> {
    let mut page = 1;
    let mut per_page = DEFAULT_ROWS;
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let number = || {
            value
                .parse::<usize>()
                .ok()
                .filter(|n| *n >= 1)
                .ok_or(Refused {
                    status: 400,
                    error: format!("{name} must be a whole number from 1"),
                })
        };
        match name {
            "page" => page = number()?,
            "per_page" => per_page = number()?,
            _ => {}
        }
    }
    if per_page > MAX_ROWS {
        return Err(Refused {
            status: 400,
            error: format!("per_page is at most {MAX_ROWS}"),
        });
    }
    Ok((page, per_page))
}

fn no_cycle() -> Refused {
    Refused {
        status: 503,
        error: "no cycle has run yet".into(),
    }
}

/// `/api/v1/status`.
pub fn status(view: Option<&View>, who: &Standby) -> Value {
    let instance = json!({
        "role": if who.standby { "standby" } else { "active" },
        "lock_node": who.lock_node,
        "lock_holder": who.holder,
        "checking_enabled": who.checking_enabled,
    });
    let Some(view) = view else {
        return json!({"instance": instance, "last_cycle": null});
    };
    json!({
        "instance": instance,
        "last_cycle": {
            "started": view.at.to_string(),
            "duration_seconds": (view.duration.as_secs_f64() * 1000.0).round() / 1000.0,
            "failure_after": view.failure,
            "clusters": view.clusters.len(),
            "counts": view.counts(),
        },
        "server_check": view.server_check.map(|c| c.as_str()),
        "storm": view.storm.map(|(since, held)| json!({"since": since.to_string(), "held": held})),
        "open_findings": view.findings.len(),
    })
}

#[derive(Serialize)]
struct FindingJson<'a> {
    #[serde(flatten)]
    row: &'a FindingRow,
    owner: Option<&'a str>,
    since: Option<String>,
    delivery: &'static str,
    delivery_text: String,
}

fn finding(f: &Finding) -> FindingJson<'_> {
    FindingJson {
        row: &f.row,
        owner: f.owner.as_deref(),
        since: f.since.map(|t| t.to_string()),
        delivery: f.delivery.as_str(),
        delivery_text: f.delivery.text(),
    }
}

fn page_of<T>(all: &[T], page: usize, per_page: usize) -> &[T] {
    let start = ((page - 1) * per_page).min(all.len());
    &all[start..(start + per_page).min(all.len())]
}

/// `/api/v1/findings`.
pub fn findings(view: Option<&View>, query: Option<&str>) -> Result<Value, Refused> {
    let (page, per_page) = paging(query)?;
    let view = view.ok_or_else(no_cycle)?;
    let rows: Vec<FindingJson> = page_of(&view.findings, page, per_page)
        .iter()
        .map(finding)
        .collect();
    Ok(json!({
        "total": view.findings.len(),
        "page": page,
        "per_page": per_page,
        "findings": rows,
    }))
}

fn cluster_json(c: &ClusterRow) -> Value {
    json!({
        "id": c.id,
        "name": c.name,
        "owner": c.owner,
        "zone_id": c.zone_id,
        "status": c.status,
        "reason": c.reason,
        "findings": c.findings,
        "blind_since": c.blind_since.map(|t| t.to_string()),
    })
}

/// `/api/v1/clusters`.
pub fn clusters(view: Option<&View>, query: Option<&str>) -> Result<Value, Refused> {
    let (page, per_page) = paging(query)?;
    let view = view.ok_or_else(no_cycle)?;
    let rows: Vec<Value> = page_of(&view.clusters, page, per_page)
        .iter()
        .map(cluster_json)
        .collect();
    Ok(json!({
        "total": view.clusters.len(),
        "page": page,
        "per_page": per_page,
        "clusters": rows,
    }))
}

/// `/api/v1/clusters/<id>`: the cluster, its map, its three views and its findings.
pub fn cluster(view: Option<&View>, id: &str) -> Result<Value, Refused> {
    let view = view.ok_or_else(no_cycle)?;
    let c = view.cluster(id).ok_or_else(|| Refused {
        status: 404,
        error: "no such cluster in the last cycle".into(),
    })?;
    let vms = |cells: &[crate::engine::cycle::VmCell]| -> Vec<Value> {
        cells
            .iter()
            .map(|v| json!({"id": v.id, "name": v.name, "state": v.state}))
            .collect()
    };
    let mut out = cluster_json(c);
    out["map"] = match &c.map {
        Some(rows) => rows
            .iter()
            .take(MAX_ROWS)
            .map(|(id, name)| json!({"vm_id": id, "vm_name": name}))
            .collect(),
        None => Value::Null,
    };
    out["mapped"] = json!(c.mapped);
    out["expected_vms"] = json!(c.expected_vms);
    out["views"] = match &c.views {
        Some(v) => json!({
            "mapped": vms(&v.mapped),
            "named": vms(&v.named),
            "nodes": v.nodes,
            "left_out": v.left_out,
        }),
        None => Value::Null,
    };
    // At most [`MAX_ROWS`]; `findings` counts them all.
    out["open_findings"] = view
        .findings_of(&c.id)
        .take(MAX_ROWS)
        .map(|f| serde_json::to_value(finding(f)).unwrap_or(Value::Null))
        .collect();
    out["at"] = json!(view.at.to_string());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paging_is_bounded_and_says_what_is_wrong() {
        assert_eq!(paging(None), Ok((1, DEFAULT_ROWS)));
        assert_eq!(paging(Some("page=3&per_page=20&x=y")), Ok((3, 20)));
        assert_eq!(paging(Some("per_page=501")).unwrap_err().status, 400);
        assert_eq!(
            paging(Some("page=0")).unwrap_err().error,
            "page must be a whole number from 1"
        );
        assert_eq!(page_of(&[1, 2, 3], 2, 2), &[3]);
        assert_eq!(page_of(&[1, 2, 3], 9, 2), &[] as &[i32]);
    }
}
