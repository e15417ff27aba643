//! `[[ignore]]` rules that match nothing: none of the findings in the state file, or a
//! `cluster` no cluster is named; or more than meant: a name several clusters share.

use super::Finding;
use crate::base::untrusted::shown;
use crate::cloudstack::model::KubernetesCluster;
use crate::config::Config;

/// Rules that match none of the findings open after the last cycle, from the state file
/// (expiry aside): a rule with a typo matches nothing, silently.
pub fn unmatched_rules(
    rules: &[crate::config::IgnoreRule],
    state: &crate::state::State,
) -> Vec<usize> {
    rules
        .iter()
        .filter(|rule| {
            let rule = crate::config::IgnoreRule {
                expires: None,
                ..(*rule).clone()
            };
            !state.clusters.iter().any(|(id, c)| {
                c.vms
                    .values()
                    .chain(c.nodes.values())
                    .filter_map(crate::state::Reported::mismatch)
                    .any(|m| {
                        crate::state::ignore::matches(
                            &rule,
                            id,
                            &c.name,
                            &m,
                            crate::base::time::Timestamp::from_unix(0),
                        )
                    })
            })
        })
        .map(|r| r.number)
        .collect()
}

/// Warnings about `[[ignore]]` rules that match none of the findings in the state file.
pub(super) fn unmatched_rule_warnings(config: &Config) -> Vec<Finding> {
    // The findings of the last cycle are in the state file: a rule none of them matches is
    // most likely a typo.
    if !config.ignore.is_empty()
        && let Ok(Some(state)) = crate::state::file::read(&config.state.path)
    {
        return unmatched_rules(&config.ignore, &state)
            .into_iter()
            .map(|n| {
                Finding::warning(
                    &format!("ignore[{n}]"),
                    format!(
                        "matches none of the findings open after the last cycle ({}); check its \
                         cluster, kind, vm and node",
                        config.state.path.display()
                    ),
                )
            })
            .collect();
    }
    Vec::new()
}

/// Warnings about `[[ignore]]` rules whose `cluster` is not one cluster: a name no cluster
/// has (the rule matches nothing), or a name several clusters share (cluster names are each
/// tenant's to choose, so the rule also matches clusters it was not written for).
pub fn cluster_rule_warnings(
    rules: &[crate::config::IgnoreRule],
    clusters: &[KubernetesCluster],
) -> Vec<Finding> {
    let mut out = Vec::new();
    for rule in rules {
        let Some(want) = rule.cluster.as_deref() else {
            continue;
        };
        if clusters.iter().any(|c| c.id == want) {
            continue;
        }
        let named: Vec<&KubernetesCluster> = clusters.iter().filter(|c| c.name == want).collect();
        let key = format!("ignore[{}].cluster", rule.number);
        let want = shown(want, 80);
        match named.len() {
            0 => out.push(Finding::warning(
                &key,
                format!(
                    "is \"{want}\", which is neither the id nor the name of any of the {} \
                     clusters listed: the rule matches nothing",
                    clusters.len()
                ),
            )),
            1 => {}
            n => {
                let ids: Vec<&str> = named.iter().take(5).map(|c| c.id.as_str()).collect();
                out.push(Finding::warning(
                    &key,
                    format!(
                        "is \"{want}\", the name of {n} clusters ({}{}): a name is each tenant's \
                         to choose, so the rule matches them all; give the id of the one meant",
                        ids.join(", "),
                        if n > ids.len() { ", …" } else { "" }
                    ),
                ));
            }
        }
    }
    out
}
