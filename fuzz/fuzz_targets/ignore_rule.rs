//! `[[ignore]]` rules, read from the config file and matched against a finding at a time:
//! `ignore::matches`, `first_match` and `expiry_warnings`, with `config::parse_expiry`.
//!
//! Input: a first line `kind|cluster id|cluster name|vm id|vm name|node|now` (now in Unix
//! seconds), then the `[[ignore]]` tables, appended to a config that is otherwise valid.
//!
//! What must hold: a rule stops matching when it expires and nothing else about it depends on
//! the time; a field a rule gives can only narrow what it matches; names match whatever their
//! case, a VM id only that VM and a cluster only by its id or name; the first match is the
//! first rule that matches; exactly the rules expired or expiring within a day are warned
//! about; an expiry, printed, reads back the same.
#![no_main]

use std::path::Path;

use cks_drift::base::id::is_uuid;
use cks_drift::base::time::Timestamp;
use cks_drift::config::{Config, IgnoreRule, parse_expiry};
use cks_drift::diff::{Mismatch, MismatchKind, Subject, VmRef};
use cks_drift::state::ignore::{expiry_warnings, first_match, matches};
use libfuzzer_sys::fuzz_target;

const BASE: &str = r#"
[cloudstack]
url = "https://cloud.example.com/client/api"
[ssh]
private_key = "/etc/cks-drift/id_rsa"
"#;

/// 9999-12-31T23:59:59Z, the last instant the timestamps print in four digits.
const LAST: i64 = 253_402_300_799;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (header, rules) = text.split_once('\n').unwrap_or((text, ""));
    let Some((m, cluster_id, cluster_name, now)) = finding(header) else {
        return;
    };
    let env = |name: &str| Some(format!("secret for {name}"));
    let Ok(config) = Config::from_toml(&format!("{BASE}\n{rules}"), Path::new("c.toml"), &env)
    else {
        return;
    };
    let rules = &config.ignore;
    for rule in rules {
        check_rule(rule, &m, cluster_id, cluster_name, now);
    }
    let first = first_match(rules, cluster_id, cluster_name, &m, now).map(|r| r.number);
    let expected = rules
        .iter()
        .find(|r| matches(r, cluster_id, cluster_name, &m, now))
        .map(|r| r.number);
    assert_eq!(first, expected, "first_match");

    let day = now.plus(std::time::Duration::from_secs(86_400));
    let warned: Vec<String> = expiry_warnings(rules, now)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    let due: Vec<String> = rules
        .iter()
        .filter(|r| r.expires.is_some_and(|t| t <= day))
        .map(|r| format!("ignore[{}].expires", r.number))
        .collect();
    assert_eq!(warned, due, "expiry warnings");
});

fn check_rule(rule: &IgnoreRule, m: &Mismatch, id: &str, name: &str, now: Timestamp) {
    let hit = |r: &IgnoreRule, m: &Mismatch, now: Timestamp| matches(r, id, name, m, now);
    let matched = hit(rule, m, now);

    // Expiry: the only part of a rule that depends on the time.
    let timeless = IgnoreRule {
        expires: None,
        ..rule.clone()
    };
    let live = rule.expires.is_none_or(|t| now < t);
    assert_eq!(
        matched,
        live && hit(&timeless, m, now),
        "rule {}",
        rule.number
    );
    if let Some(t) = rule.expires {
        assert!(
            !hit(rule, m, t),
            "rule {} matches at its expiry",
            rule.number
        );
        assert_eq!(
            hit(rule, m, t.minus(std::time::Duration::from_secs(1))),
            hit(&timeless, m, now)
        );
        let printed = toml::Value::String(t.to_string());
        assert_eq!(
            parse_expiry(&printed),
            Ok(t),
            "expiry {t} printed and read again"
        );
    }

    // A field given only narrows the match.
    if matched {
        for wider in [
            IgnoreRule {
                cluster: None,
                ..rule.clone()
            },
            IgnoreRule {
                kind: None,
                ..rule.clone()
            },
            IgnoreRule {
                vm: None,
                ..rule.clone()
            },
            IgnoreRule {
                node: None,
                ..rule.clone()
            },
        ] {
            assert!(
                hit(&wider, m, now),
                "rule {} without a field matches less",
                rule.number
            );
        }
        if let Some(c) = &rule.cluster {
            assert!(
                c == id || c == name,
                "rule {} matched cluster {id} ({name})",
                rule.number
            );
        }
        if let Some(want) = rule.vm.as_deref().filter(|v| is_uuid(v)) {
            let vm = m
                .vm()
                .expect("a rule with a VM matched a finding with none");
            assert!(
                vm.id.eq_ignore_ascii_case(want),
                "VM {:?} matched by id {want}",
                vm
            );
        }
    }

    // Names of VMs and nodes match whatever their ASCII case.
    let shouted = Mismatch {
        kind: m.kind,
        subject: match &m.subject {
            Subject::Vm(vm) => Subject::Vm(shout(vm)),
            Subject::Node(node) => Subject::Node(node.to_ascii_uppercase()),
            Subject::Conflict { node, is, named } => Subject::Conflict {
                node: node.to_ascii_uppercase(),
                is: shout(is),
                named: shout(named),
            },
            other => other.clone(),
        },
    };
    assert_eq!(
        hit(rule, &shouted, now),
        matched,
        "rule {}: case",
        rule.number
    );
}

fn shout(vm: &VmRef) -> VmRef {
    VmRef {
        id: vm.id.to_ascii_uppercase(),
        name: vm.name.as_ref().map(|n| n.to_ascii_uppercase()),
        state: vm.state.clone(),
    }
}

/// `kind|cluster id|cluster name|vm id|vm name|node|now`.
fn finding(header: &str) -> Option<(Mismatch, &str, &str, Timestamp)> {
    let mut f = header.split('|');
    let kind = f.next()?;
    let kind = MismatchKind::ALL
        .into_iter()
        .find(|k| k.as_str() == kind)
        .unwrap_or(MismatchKind::ALL[kind.len() % 7]);
    let (id, name, vm_id, vm_name, node) = (f.next()?, f.next()?, f.next()?, f.next()?, f.next()?);
    let now = f.next()?.trim().parse::<i64>().ok()?.clamp(0, LAST);
    let vm = VmRef {
        id: vm_id.into(),
        name: (!vm_name.is_empty()).then(|| vm_name.into()),
        state: "Running".into(),
    };
    let subject = match kind {
        MismatchKind::NodeWithoutVm => Subject::Node(node.into()),
        MismatchKind::IdentityConflict => Subject::Conflict {
            node: node.into(),
            is: vm,
            named: VmRef {
                id: "0b1d2c3e-4f50-4617-8a9b-cdef01234567".into(),
                name: Some(node.into()),
                state: "Running".into(),
            },
        },
        MismatchKind::MapCount => Subject::MapRows {
            shown: 2,
            expected: 3,
        },
        MismatchKind::Blind => Subject::Blind {
            reason: "timeout".into(),
            since: Timestamp::from_unix(0),
        },
        _ => Subject::Vm(vm),
    };
    Some((
        Mismatch { kind, subject },
        id,
        name,
        Timestamp::from_unix(now),
    ))
}
