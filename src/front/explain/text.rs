//! The text form of an explanation: a few aligned tables, tenant text escaped.

use super::{Explanation, ReportedLine};
use crate::base::time::Timestamp;
use crate::base::untrusted::escaped;

fn opt_time(t: Option<Timestamp>) -> String {
    t.map_or_else(|| "-".to_string(), |t| t.to_string())
}

/// The text form: a few aligned tables. Tenant text is escaped.
pub fn to_text(e: &Explanation) -> String {
    // Every section ends with a line break; a blank line parts them.
    [
        header_text(e),
        map_text(e),
        vms_text(e),
        nodes_text(e),
        findings_text(e),
        reported_text(e),
    ]
    .join("\n")
}

/// Appends `line` and a line break.
fn push_line(out: &mut String, line: String) {
    out.push_str(&line);
    out.push('\n');
}

/// The cluster, and how far it was compared.
fn header_text(e: &Explanation) -> String {
    let mut out = String::new();
    let c = &e.cluster;
    push_line(
        &mut out,
        format!(
            "Kubernetes cluster {} ({}), {}, zone {}, owned by {}",
            escaped(&c.name),
            c.id,
            escaped(&c.state),
            c.zone.as_deref().map_or("?".into(), escaped),
            escaped(&c.owner)
        ),
    );
    let how = match e.status {
        "checked" => "map, VMs and Kubernetes nodes compared".to_string(),
        "partial" => format!(
            "map and VMs compared; the nodes were not: {}",
            escaped(e.reason.as_deref().unwrap_or(""))
        ),
        _ => format!(
            "not compared: {}",
            escaped(e.reason.as_deref().unwrap_or(""))
        ),
    };
    push_line(
        &mut out,
        format!(
            "{how}, at {}, grace period {}",
            e.at,
            crate::base::duration::human_duration(std::time::Duration::from_secs(
                e.grace_period_seconds
            ))
        ),
    );
    out
}

fn map_text(e: &Explanation) -> String {
    let mut out = String::new();
    let c = &e.cluster;
    push_line(
        &mut out,
        format!(
            "Map: {} rows, {} expected ({} control + {} workers + {} etcd)",
            e.map.len(),
            e.expected_vms,
            c.control_nodes,
            c.size,
            c.etcd_nodes
        ),
    );
    for row in &e.map {
        push_line(
            &mut out,
            format!(
                "  {:<36}  {:<10}  {}",
                row.vm_id,
                escaped(&row.state),
                row.vm_name.as_deref().map_or("?".into(), escaped)
            ),
        );
    }
    out
}

fn vms_text(e: &Explanation) -> String {
    let mut out = String::new();
    push_line(&mut out, format!("VMs: {}", e.vms.len()));
    for vm in &e.vms {
        push_line(
            &mut out,
            format!(
                "  {} ({}), {}, {}{}, created {}, last change {}",
                escaped(&vm.name),
                vm.id,
                escaped(&vm.state),
                if vm.mapped { "mapped" } else { "not mapped" },
                vm.role.map_or(String::new(), |r| format!(", {r}")),
                opt_time(vm.created),
                opt_time(vm.last_change)
            ),
        );
        push_line(&mut out, format!("      {}", escaped(&vm.verdict)));
    }
    out
}

fn nodes_text(e: &Explanation) -> String {
    let mut out = String::new();
    let Some(nodes) = &e.nodes else {
        push_line(&mut out, "Kubernetes nodes: not listed".to_string());
        return out;
    };
    push_line(&mut out, format!("Kubernetes nodes: {}", nodes.len()));
    for n in nodes {
        push_line(
            &mut out,
            format!(
                "  {}, {}, system UUID {}{}{}",
                escaped(&n.name),
                n.ready.unwrap_or("readiness not listed"),
                n.system_uuid.as_deref().map_or("-".into(), escaped),
                n.provider_id
                    .as_deref()
                    .map_or(String::new(), |p| format!(", provider ID {}", escaped(p))),
                n.vm.as_deref()
                    .map_or(String::new(), |v| format!(" -> VM {}", escaped(v)))
            ),
        );
        push_line(&mut out, format!("      {}", escaped(&n.verdict)));
    }
    out
}

fn findings_text(e: &Explanation) -> String {
    let mut out = String::new();
    if e.findings.is_empty() {
        push_line(&mut out, "Findings: none".to_string());
        return out;
    }
    push_line(&mut out, format!("Findings: {}", e.findings.len()));
    for f in &e.findings {
        push_line(
            &mut out,
            format!(
                "  {} ({})",
                escaped(&f.key),
                f.since.map_or("not reported yet".to_string(), |t| format!(
                    "reported since {t}"
                ))
            ),
        );
        push_line(&mut out, format!("      {}", escaped(&f.reason)));
    }
    out
}

/// What the state file holds, and the notifications pending.
fn reported_text(e: &Explanation) -> String {
    let mut out = String::new();
    match &e.reported {
        None => push_line(&mut out, "Reported: no state file".to_string()),
        Some(r) if r.is_empty() => push_line(
            &mut out,
            format!(
                "Reported: nothing open in the state file; {} notifications pending",
                e.pending
            ),
        ),
        Some(r) => {
            push_line(
                &mut out,
                format!(
                    "Reported (state file): {}; {} notifications pending",
                    r.len(),
                    e.pending
                ),
            );
            for line in r {
                push_line(
                    &mut out,
                    format!(
                        "  {} since {}: {}{}",
                        escaped(&line.key),
                        line.since,
                        sent_text(line),
                        if line.kept {
                            "; kept: the nodes were not listed, so it is neither found again nor \
                             resolved"
                        } else if line.open {
                            ""
                        } else {
                            "; no longer found, resolves at the next cycle"
                        }
                    ),
                );
            }
        }
    }
    out
}

/// What was sent about a reported finding: `alert, annotation`, `event only`, ...
fn sent_text(line: &ReportedLine) -> String {
    let mut sent = Vec::new();
    if line.alert {
        sent.push("alert");
    }
    if line.annotation {
        sent.push("annotation");
    }
    if line.held {
        sent.push("held by a storm");
    }
    if sent.is_empty() {
        sent.push("event only");
    }
    sent.join(", ")
}
