//! `[[ignore]]` rules: drift an operator has accepted. Pure: which rule, if any, matches a
//! finding at a given time. What a matched finding still gets (the report, the event log)
//! and what it does not (alerts, annotations, Alertmanager) is the dedupe step's business.

use serde::{Deserialize, Serialize};

use crate::base::time::Timestamp;
use crate::config::IgnoreRule;
use crate::diff::Mismatch;

/// The rule that matched a finding, as the state records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ignored {
    /// The rule's position among the `[[ignore]]` tables, from 1.
    pub rule: usize,
    pub reason: String,
}

impl Ignored {
    pub fn of(rule: &IgnoreRule) -> Self {
        Ignored {
            rule: rule.number,
            reason: rule.reason.clone(),
        }
    }
}

/// Whether `rule` matches the finding `m` of cluster `cluster_id` (`cluster_name`) at `now`:
/// it has not expired, and every field it gives matches (names of VMs and nodes
/// case-insensitively, since Kubernetes lowercases them).
pub fn matches(
    rule: &IgnoreRule,
    cluster_id: &str,
    cluster_name: &str,
    m: &Mismatch,
    now: Timestamp,
) -> bool {
    if rule.expires.is_some_and(|t| t <= now) {
        return false;
    }
    let cluster = rule
        .cluster
        .as_deref()
        .is_none_or(|c| c == cluster_id || c == cluster_name);
    let kind = rule.kind.as_deref().is_none_or(|k| k == m.kind.as_str());
    // A rule's VM given as a UUID is that VM's id and nothing else: a tenant may name its own
    // VM like another VM's id.
    let vm = rule.vm.as_deref().is_none_or(|want| {
        m.vm().is_some_and(|vm| {
            if crate::base::id::is_uuid(want) {
                vm.id.eq_ignore_ascii_case(want)
            } else {
                vm.name
                    .as_deref()
                    .is_some_and(|n| n.eq_ignore_ascii_case(want))
            }
        })
    });
    let node = rule
        .node
        .as_deref()
        .is_none_or(|want| m.node().is_some_and(|n| n.eq_ignore_ascii_case(want)));
    cluster && kind && vm && node
}

/// The first rule that matches, if any.
pub fn first_match<'a>(
    rules: &'a [IgnoreRule],
    cluster_id: &str,
    cluster_name: &str,
    m: &Mismatch,
    now: Timestamp,
) -> Option<&'a IgnoreRule> {
    rules
        .iter()
        .find(|r| matches(r, cluster_id, cluster_name, m, now))
}

/// The findings of `cluster` among `found` that an `[[ignore]]` rule matches at `now`, each
/// with the first rule that does.
pub fn matched<'a>(
    rules: &'a [IgnoreRule],
    cluster: &'a crate::snapshot::ClusterIdentity,
    found: &'a [Mismatch],
    now: Timestamp,
) -> impl Iterator<Item = (crate::diff::FindingKey, &'a IgnoreRule)> + 'a {
    found.iter().filter_map(move |m| {
        let rule = first_match(rules, &cluster.id, &cluster.name, m, now)?;
        Some((m.key(), rule))
    })
}

/// Warnings about `[[ignore]]` rules at `now`: expired ones (they match nothing), and those
/// that expire within a day (their findings are alerted then). `(key, message)`; the
/// service logs the same at start and on reload.
pub fn expiry_warnings(
    rules: &[crate::config::IgnoreRule],
    now: crate::base::time::Timestamp,
) -> Vec<(String, String)> {
    let day = now.plus(std::time::Duration::from_secs(86_400));
    rules
        .iter()
        .filter_map(|r| {
            let expires = r.expires?;
            let key = format!("ignore[{}].expires", r.number);
            if expires <= now {
                Some((
                    key,
                    format!(
                        "is {expires}, in the past: the rule matches nothing and its findings are \
                         alerted; remove the rule or move the date"
                    ),
                ))
            } else if expires <= day {
                Some((
                    key,
                    format!(
                        "is {expires}, within a day: then the findings it matches are alerted; \
                         move the date if the drift is still accepted"
                    ),
                ))
            } else {
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::{MismatchKind, Subject, VmRef};

    fn rule(f: impl FnOnce(&mut IgnoreRule)) -> IgnoreRule {
        let mut r = IgnoreRule {
            number: 1,
            cluster: None,
            kind: None,
            vm: None,
            node: None,
            reason: "known".into(),
            expires: None,
            by: None,
        };
        f(&mut r);
        r
    }

    fn vm(kind: MismatchKind) -> Mismatch {
        Mismatch {
            kind,
            subject: Subject::Vm(VmRef {
                id: V1.into(),
                name: Some("Web-Node-1".into()),
                state: "Running".into(),
            }),
        }
    }

    fn node(name: &str) -> Mismatch {
        Mismatch {
            kind: MismatchKind::NodeWithoutVm,
            subject: Subject::Node(name.into()),
        }
    }

    const NOW: i64 = 1_800_000_000;
    const V1: &str = "6a3c4f2e-2b7e-4a59-9c11-0d2f3e4b5a61";

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_unix(secs)
    }

    #[test]
    fn every_field_given_must_match() {
        let m = vm(MismatchKind::UnmappedVm);
        let yes = |r: IgnoreRule| matches(&r, "c1", "web", &m, at(NOW));
        assert!(yes(rule(|r| r.cluster = Some("web".into()))));
        assert!(yes(rule(|r| r.cluster = Some("c1".into()))));
        assert!(!yes(rule(|r| r.cluster = Some("db".into()))));
        assert!(yes(rule(|r| r.kind = Some("unmapped_vm".into()))));
        assert!(!yes(rule(|r| r.kind = Some("mapped_vm".into()))));
        assert!(yes(rule(|r| r.vm = Some(V1.into()))));
        assert!(yes(rule(|r| r.vm = Some(V1.to_uppercase()))));
        assert!(yes(rule(|r| r.vm = Some("web-node-1".into()))));
        assert!(!yes(rule(|r| {
            r.vm = Some("6a3c4f2e-2b7e-4a59-9c11-0d2f3e4b5a62".into())
        })));
        assert!(!yes(rule(|r| r.vm = Some("web-node-2".into()))));
        assert!(
            !yes(rule(|r| r.node = Some("web-node-1".into()))),
            "a VM finding has no node"
        );
        assert!(!yes(rule(|r| {
            r.cluster = Some("web".into());
            r.kind = Some("mapped_vm".into());
        })));
        let n = node("manual-1");
        assert!(matches(
            &rule(|r| r.node = Some("Manual-1".into())),
            "c1",
            "web",
            &n,
            at(NOW)
        ));
        assert!(!matches(
            &rule(|r| r.vm = Some("manual-1".into())),
            "c1",
            "web",
            &n,
            at(NOW)
        ));
    }

    #[test]
    fn a_vm_named_like_another_vms_id_is_not_that_vm() {
        let other = "0b1d2c3e-4f50-4617-8a9b-cdef01234567";
        let m = Mismatch {
            kind: MismatchKind::UnmappedVm,
            subject: Subject::Vm(VmRef {
                id: V1.into(),
                name: Some(other.into()),
                state: "Running".into(),
            }),
        };
        let r = rule(|r| r.vm = Some(other.into()));
        assert!(!matches(&r, "c1", "web", &m, at(NOW)));
    }

    #[test]
    fn an_expired_rule_matches_nothing() {
        let m = vm(MismatchKind::UnmappedVm);
        let r = rule(|r| {
            r.cluster = Some("web".into());
            r.expires = Some(at(NOW));
        });
        assert!(matches(&r, "c1", "web", &m, at(NOW - 1)));
        assert!(!matches(&r, "c1", "web", &m, at(NOW)));
    }

    #[test]
    fn expired_rules_and_those_expiring_within_a_day_are_warned_about() {
        let rules = [
            rule(|r| r.expires = Some(at(NOW - 60))),
            rule(|r| {
                r.number = 2;
                r.expires = Some(at(NOW + 3600));
            }),
            rule(|r| {
                r.number = 3;
                r.expires = Some(at(NOW + 2 * 86_400));
            }),
            rule(|r| r.number = 4),
        ];
        assert_eq!(
            expiry_warnings(&rules, at(NOW)),
            [
                (
                    "ignore[1].expires".to_string(),
                    format!(
                        "is {}, in the past: the rule matches nothing and its findings are alerted; remove the rule or move the date",
                        at(NOW - 60)
                    )
                ),
                (
                    "ignore[2].expires".to_string(),
                    format!(
                        "is {}, within a day: then the findings it matches are alerted; move the date if the drift is still accepted",
                        at(NOW + 3600)
                    )
                ),
            ]
        );
    }

    #[test]
    fn the_first_matching_rule_wins() {
        let rules = [
            rule(|r| r.kind = Some("mapped_vm".into())),
            rule(|r| {
                r.number = 2;
                r.cluster = Some("web".into());
            }),
            rule(|r| {
                r.number = 3;
                r.vm = Some(V1.into());
            }),
        ];
        let m = vm(MismatchKind::UnmappedVm);
        assert_eq!(
            first_match(&rules, "c1", "web", &m, at(NOW)).map(|r| r.number),
            Some(2)
        );
    }
}
