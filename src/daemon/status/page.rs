//! The status page (`/`) and a cluster's page (`/clusters/<id>`): plain HTML written for them,
//! one style sheet from the same origin (`/status.css`), no script and no external asset.
//! Pure: a view in, a page out. Every text of the view is escaped here ([`html`]); a tenant's
//! `<img src=x onerror=...>` for a cluster name shows as those characters.

use std::fmt::Write as _;

use super::{ClusterRow, Finding, MAX_ROWS, Standby, View};
use crate::base::untrusted::escaped;
use crate::engine::cycle::ClusterStatus;

/// The page's Content-Security-Policy: nothing but its own style sheet; no script at all.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'self'; \
     img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The style sheet the pages link.
pub const STYLE: &str = include_str!("status.css");

/// Text for HTML: control and format characters made visible (as in the terminal), then
/// `& < > " '` written as entities, so no tenant text opens a tag or an attribute.
pub fn html(text: &str) -> String {
    let visible = escaped(text);
    let mut out = String::with_capacity(visible.len());
    for c in visible.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A path segment for a link: only the characters of a CloudStack uuid pass as they are.
fn path_segment(id: &str) -> String {
    id.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'-' {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn head(out: &mut String, title: &str, refresh: std::time::Duration) {
    let _ = writeln!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta http-equiv=\"refresh\" content=\"{}\">\
         <title>{}</title><link rel=\"stylesheet\" href=\"/status.css\"></head><body>",
        refresh.as_secs().max(30),
        html(title)
    );
}

fn instance_line(out: &mut String, who: &Standby) {
    let role = if who.standby {
        "standby: another instance holds the lock in the CloudStack database; what follows is \
         what this instance saw when it last checked"
    } else {
        "active: this instance holds the lock and checks"
    };
    let _ = write!(out, "<p class=\"role\" id=\"role\">{}", html(role));
    if let Some(holder) = who.holder.as_ref().filter(|_| who.standby) {
        let _ = write!(out, " (the lock is held by {})", html(holder));
    }
    if let Some(node) = &who.lock_node {
        let _ = write!(out, " (the lock is local to {})", html(node));
    }
    if !who.checking_enabled {
        out.push_str("; checking is disabled (check.enabled = false)");
    }
    out.push_str("</p>\n");
}

/// The status page: who this instance is, the last cycle, the open findings (page `page` of
/// `per_page`), the blind clusters and the clusters that need a look.
pub fn status(
    view: Option<&View>,
    who: &Standby,
    refresh: std::time::Duration,
    page: usize,
    per_page: usize,
) -> String {
    let mut out = String::new();
    head(&mut out, "cks-drift", refresh);
    out.push_str("<h1>cks-drift</h1>\n");
    instance_line(&mut out, who);
    let Some(view) = view else {
        out.push_str("<p id=\"no-cycle\">No cycle has run yet.</p>\n</body></html>\n");
        return out;
    };
    last_cycle(&mut out, view);
    findings_table(&mut out, view, page, per_page);
    blind(&mut out, view);
    attention(&mut out, view);
    out.push_str("</body></html>\n");
    out
}

fn last_cycle(out: &mut String, view: &View) {
    let counts = view.counts();
    let _ = write!(
        out,
        "<h2>Last cycle</h2>\n<p id=\"last-cycle\">Started {} and took {:.1} s: {} clusters \
         ({} checked, {} partial, {} skipped), {} open findings.",
        html(&view.at.to_string()),
        view.duration.as_secs_f64(),
        view.clusters.len(),
        counts.checked,
        counts.partial,
        counts.skipped,
        view.findings.len()
    );
    if let Some(failure) = &view.failure {
        let _ = write!(
            out,
            " <strong class=\"failed\">The cycle after it failed: {}</strong>",
            html(failure)
        );
    }
    out.push_str("</p>\n");
    if view.server_check == Some(crate::cloudstack::server_check::ServerCheck::On) {
        out.push_str(
            "<p id=\"server-check\">CloudStack runs its own VM map check: the mismatches it \
             alerts itself get no CloudStack alert or annotation from cks-drift.</p>\n",
        );
    }
    if let Some((since, held)) = view.storm {
        let _ = writeln!(
            out,
            "<p id=\"storm\" class=\"failed\">A storm since {}: {held} findings' alerts and \
             annotations are held.</p>",
            html(&since.to_string())
        );
    }
}

fn findings_table(out: &mut String, view: &View, page: usize, per_page: usize) {
    let per_page = per_page.clamp(1, MAX_ROWS);
    let total = view.findings.len();
    let _ = writeln!(out, "<h2>Open findings ({total})</h2>");
    if total == 0 {
        out.push_str("<p>None: every checked cluster matches.</p>\n");
        return;
    }
    out.push_str(
        "<table id=\"findings\"><thead><tr><th>Cluster</th><th>Owner</th><th>Kind</th>\
         <th>Subject</th><th>Since</th><th>Alert and annotation</th></tr></thead><tbody>\n",
    );
    let start = (page.max(1) - 1) * per_page;
    for f in view.findings.iter().skip(start).take(per_page) {
        finding_row(out, f, true);
    }
    out.push_str("</tbody></table>\n");
    let pages = total.div_ceil(per_page);
    if pages > 1 {
        let _ = write!(out, "<p class=\"pages\">Page {} of {pages}.", page.max(1));
        if page > 1 {
            let _ = write!(
                out,
                " <a href=\"/?page={}&amp;per_page={per_page}\">Previous</a>",
                page - 1
            );
        }
        if page.max(1) < pages {
            let _ = write!(
                out,
                " <a href=\"/?page={}&amp;per_page={per_page}\">Next</a>",
                page.max(1) + 1
            );
        }
        out.push_str("</p>\n");
    }
}

fn finding_row(out: &mut String, f: &Finding, with_cluster: bool) {
    let subject = f
        .row
        .node
        .clone()
        .or_else(|| {
            f.row
                .vm_name
                .as_ref()
                .map(|n| format!("{n} ({})", f.row.vm_id.as_deref().unwrap_or("?")))
        })
        .or_else(|| f.row.vm_id.clone())
        .unwrap_or_else(|| f.row.key.clone());
    out.push_str("<tr>");
    if with_cluster {
        let _ = write!(
            out,
            "<td><a href=\"/clusters/{}\">{}</a></td><td>{}</td>",
            path_segment(&f.row.cluster_id),
            html(&f.row.cluster),
            html(f.owner.as_deref().unwrap_or("")),
        );
    }
    let _ = writeln!(
        out,
        "<td>{}</td><td title=\"{}\">{}</td><td>{}</td><td>{}</td></tr>",
        f.row.kind.as_str(),
        html(&f.row.reason),
        html(&subject),
        f.since.map(|t| t.to_string()).unwrap_or_default(),
        html(&f.delivery.text()),
    );
}

fn blind(out: &mut String, view: &View) {
    let blind: Vec<&ClusterRow> = view
        .clusters
        .iter()
        .filter(|c| c.blind_since.is_some())
        .take(MAX_ROWS)
        .collect();
    if blind.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "<h2>Blind clusters ({})</h2>\n<ul id=\"blind\">",
        view.counts().blind
    );
    for c in blind {
        let _ = writeln!(
            out,
            "<li><a href=\"/clusters/{}\">{}</a>: nodes not listed since {}: {}</li>",
            path_segment(&c.id),
            html(&c.name),
            c.blind_since.map(|t| t.to_string()).unwrap_or_default(),
            html(c.reason.as_deref().unwrap_or("")),
        );
    }
    out.push_str("</ul>\n");
}

/// The clusters compared only in part or skipped, for a look (at most [`MAX_ROWS`]).
fn attention(out: &mut String, view: &View) {
    let rows: Vec<&ClusterRow> = view
        .clusters
        .iter()
        .filter(|c| c.status != ClusterStatus::Checked)
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "<h2>Clusters not fully checked ({})</h2>\n<table id=\"unchecked\"><thead><tr>\
         <th>Cluster</th><th>Status</th><th>Why</th></tr></thead><tbody>",
        rows.len()
    );
    for c in rows.iter().take(MAX_ROWS) {
        let _ = writeln!(
            out,
            "<tr><td><a href=\"/clusters/{}\">{}</a></td><td>{}</td><td>{}</td></tr>",
            path_segment(&c.id),
            html(&c.name),
            c.status.as_str(),
            html(c.reason.as_deref().unwrap_or("")),
        );
    }
    out.push_str("</tbody></table>\n");
}

/// A cluster's page: what the last cycle saw of it, its findings and its three views side by
/// side. `None` when the view holds no such cluster.
pub fn cluster(
    view: &View,
    who: &Standby,
    id: &str,
    refresh: std::time::Duration,
) -> Option<String> {
    let c = view.cluster(id)?;
    let mut out = String::new();
    head(&mut out, &format!("{} - cks-drift", c.name), refresh);
    let _ = writeln!(
        out,
        "<p><a href=\"/\">cks-drift</a></p>\n<h1 id=\"cluster\">{}</h1>",
        html(&c.name)
    );
    instance_line(&mut out, who);
    let _ = write!(
        out,
        "<p id=\"cluster-line\">Id {}, owner {}, zone {}: {} at {}",
        html(&c.id),
        html(c.owner.as_deref().unwrap_or("unknown")),
        html(c.zone_id.as_deref().unwrap_or("unknown")),
        c.status.as_str(),
        html(&view.at.to_string()),
    );
    if let Some(reason) = &c.reason {
        let _ = write!(out, ": {}", html(reason));
    }
    out.push_str(".</p>\n");
    let findings: Vec<&Finding> = view.findings_of(&c.id).take(MAX_ROWS).collect();
    let _ = writeln!(out, "<h2>Open findings ({})</h2>", c.findings);
    if !findings.is_empty() {
        out.push_str(
            "<table id=\"findings\"><thead><tr><th>Kind</th><th>Subject</th><th>Since</th>\
             <th>Alert and annotation</th></tr></thead><tbody>\n",
        );
        for f in findings {
            finding_row(&mut out, f, false);
        }
        out.push_str("</tbody></table>\n<ul id=\"reasons\">\n");
        for f in view.findings_of(&c.id).take(MAX_ROWS) {
            let _ = writeln!(out, "<li>{}</li>", html(&f.row.reason));
        }
        out.push_str("</ul>\n");
    }
    views(&mut out, c);
    out.push_str("</body></html>\n");
    Some(out)
}

fn views(out: &mut String, c: &ClusterRow) {
    let _ = writeln!(
        out,
        "<h2>Three views</h2>\n<p>The map should hold {} VMs.</p>",
        c.expected_vms
    );
    let Some(v) = &c.views else {
        let Some(map) = &c.map else {
            let _ = writeln!(
                out,
                "<p id=\"views-note\">The last cycle found its {} mapped VMs, its VMs and its \
                 nodes in agreement.</p>",
                c.mapped
            );
            return;
        };
        out.push_str(
            "<p id=\"views-note\">The last cycle kept no VMs or nodes of it to show: its map \
             as the API showed it.</p>\n\
             <table id=\"views\"><thead><tr><th>VM map</th></tr></thead><tbody>\n",
        );
        for (id, name) in map.iter().take(MAX_ROWS) {
            let _ = writeln!(out, "<tr><td>{} ({})</td></tr>", html(name), html(id));
        }
        out.push_str("</tbody></table>\n");
        return;
    };
    out.push_str(
        "<table id=\"views\"><thead><tr><th>VM map</th><th>Other VMs named as its nodes</th>\
         <th>Kubernetes nodes</th></tr></thead><tbody>\n",
    );
    let nodes: &[String] = v.nodes.as_deref().unwrap_or(&[]);
    let rows = v.mapped.len().max(v.named.len()).max(nodes.len()).max(1);
    for i in 0..rows {
        let vm = |cells: &[crate::engine::cycle::VmCell]| {
            cells
                .get(i)
                .map(|c| format!("{} ({}, {})", html(&c.name), html(&c.id), html(&c.state)))
                .unwrap_or_default()
        };
        let node = match (&v.nodes, nodes.get(i)) {
            (None, _) if i == 0 => "not listed".to_string(),
            (_, Some(n)) => html(n),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            vm(&v.mapped),
            vm(&v.named),
            node
        );
    }
    out.push_str("</tbody></table>\n");
    if v.left_out > 0 {
        let _ = writeln!(out, "<p>{} more rows not shown.</p>", v.left_out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_text_opens_no_tag_and_no_attribute() {
        assert_eq!(
            html("<img src=x onerror=alert(1)>"),
            "&lt;img src=x onerror=alert(1)&gt;"
        );
        assert_eq!(html("a\"b'c&d"), "a&quot;b&#39;c&amp;d");
        assert_eq!(html("line\nbreak"), "line\\x0abreak");
        assert_eq!(path_segment("ab-12/../x?y"), "ab-12%2F%2E%2E%2Fx%3Fy");
    }

    #[test]
    fn a_standby_says_who_checks_and_that_what_it_shows_is_its_last_look() {
        let who = Standby {
            standby: true,
            lock_node: None,
            holder: Some("database connection 42 from 10.0.0.5:51234".into()),
            checking_enabled: true,
        };
        let page = status(None, &who, std::time::Duration::from_secs(300), 1, 100);
        assert!(page.contains(
            "<p class=\"role\" id=\"role\">standby: another instance holds the lock in the \
             CloudStack database"
        ));
        assert!(
            page.contains(" (the lock is held by database connection 42 from 10.0.0.5:51234)</p>")
        );
        assert!(page.contains("<p id=\"no-cycle\">No cycle has run yet.</p>"));
        // The page reloads once an interval, never more often than every 30 s.
        assert!(page.contains("<meta http-equiv=\"refresh\" content=\"300\">"));
        let page = status(None, &who, std::time::Duration::from_secs(1), 1, 100);
        assert!(page.contains("<meta http-equiv=\"refresh\" content=\"30\">"));
    }
}
