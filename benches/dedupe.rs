//! The dedupe step at scale: one cluster reports N findings, then they all resolve. Prints the
//! step's time for each (release build: `cargo bench --bench dedupe [-- N ...]`).

use std::time::Instant;

use cks_drift::base::time::Timestamp;
use cks_drift::diff::{Mismatch, MismatchKind, Subject};
use cks_drift::state::State;
use cks_drift::state::step::{Coverage, Observed, StepSettings, step};

fn observed(findings: usize) -> Vec<Observed> {
    vec![Observed {
        left_to_server: Default::default(),
        cluster: cks_drift::snapshot::ClusterIdentity {
            id: "c1".into(),
            name: "web".into(),
            zone_id: Some("z1".into()),
            owner: None,
            owner_id: None,
        },
        blind_reason: None,
        listed: true,
        coverage: Coverage::Full,
        mismatches: (0..findings)
            .map(|i| Mismatch {
                kind: MismatchKind::NodeWithoutVm,
                subject: Subject::Node(format!("fake-node-{i:06}")),
            })
            .collect(),
        mapped: vec![],
        expected_vms: 3,
        db_ids: None,
        ignored: Default::default(),
    }]
}

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![1_000, 10_000]
    } else {
        sizes
    };
    let settings = StepSettings {
        alerts: true,
        annotations: true,
        alert_cap: 5,
        owner_alert_cap: 1000,
        blind_after: cks_drift::config::DEFAULT_BLIND_AFTER,
        resolve_after: std::time::Duration::ZERO,
        owner_alerts_per_hour: 100_000,
        alert_types: 1000,
        storm: cks_drift::config::StormThreshold::Off,
        alertmanager: false,
    };
    println!("| findings | report step | resolve step | notifications queued |");
    println!("| ---: | ---: | ---: | ---: |");
    for n in sizes {
        let mut state = State::default();
        let now = Timestamp::from_unix(1_800_000_000);
        let t = Instant::now();
        step(&mut state, &observed(n), &settings, now);
        let report = t.elapsed();
        // Delivered meanwhile: records as delivery leaves them.
        for o in state.outbox.drain(..) {
            if let cks_drift::state::Notification::AddAnnotation {
                cluster_id, key, ..
            } = o.notification
            {
                let rk = cks_drift::state::RecordKey::new(&cluster_id, &key);
                state.annotations.insert(rk, format!("a-{key}"));
            }
        }
        let t = Instant::now();
        step(&mut state, &observed(0), &settings, now);
        let resolve = t.elapsed();
        println!(
            "| {n} | {:.3} s | {:.3} s | {} |",
            report.as_secs_f64(),
            resolve.as_secs_f64(),
            state.outbox.len()
        );
    }
}
