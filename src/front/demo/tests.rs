//! The demo's scenario through the real engine: what each cycle finds and sends.

use std::collections::BTreeSet;

use super::*;
use crate::diff::MismatchKind;

fn kinds(tick: &Tick) -> Vec<(String, MismatchKind)> {
    let report = tick.report.as_ref().expect("the cycle runs");
    report
        .clusters
        .iter()
        .flat_map(|c| {
            c.mismatches
                .iter()
                .map(|m| (c.cluster.name.clone(), m.kind))
        })
        .collect()
}

fn statuses(tick: &Tick) -> Vec<(String, &'static str)> {
    let report = tick.report.as_ref().expect("the cycle runs");
    report
        .clusters
        .iter()
        .map(|c| (c.cluster.name.clone(), c.status.as_str()))
        .collect()
}

#[tokio::test]
async fn the_scenario_drifts_four_ways_then_matches_again() {
    let dir = tempfile::tempdir().unwrap();
    let start = Timestamp::parse(START).unwrap();
    let scenario = Scenario::build(start);
    let mut engine = engine(&scenario, dir.path(), start).unwrap();

    let first = engine.tick(start).await;
    assert_eq!(
        statuses(&first),
        [
            ("web".to_string(), "checked"),
            ("db".to_string(), "checked"),
            ("ci".to_string(), "skipped"),
            ("edge".to_string(), "skipped"),
            ("analytics".to_string(), "checked"),
        ]
    );
    let db = |k| ("db".to_string(), k);
    assert_eq!(
        kinds(&first),
        [
            db(MismatchKind::MappedVm),
            db(MismatchKind::UnmappedVm),
            db(MismatchKind::NodeWithoutVm),
            db(MismatchKind::VmNotANode),
        ]
    );
    assert_eq!(first.new.as_ref().map(|n| n.len()), Some(4));
    assert_eq!(first.pending, 0);
    let active = scenario.sim.with_world(|w| w.active_alerts().len());
    assert_eq!(active, 4);

    let later = start.plus(INTERVAL);
    scenario.sim.with_world(|w| w.now = later.into());
    let second = engine.tick(later).await;
    assert_eq!(kinds(&second), kinds(&first));
    assert_eq!(second.new.as_ref().map(|n| n.len()), Some(0));

    scenario.undo();
    let last = later.plus(INTERVAL);
    scenario.sim.with_world(|w| w.now = last.into());
    let third = engine.tick(last).await;
    assert_eq!(kinds(&third), []);
    assert_eq!(third.pending, 0);
    let (active, annotations) = scenario.sim.with_world(|w| {
        (
            w.active_alerts().len(),
            w.annotations.iter().filter(|a| !a.removed).count(),
        )
    });
    assert_eq!((active, annotations), (0, 0));
    // Reading only: the demo's ticks change nothing but alerts and annotations.
    let changing: BTreeSet<String> = scenario
        .sim
        .state_changing_calls()
        .into_iter()
        .map(|c| c.command)
        .collect();
    assert_eq!(
        changing,
        BTreeSet::from([
            "addAnnotation".to_string(),
            "archiveAlerts".to_string(),
            "generateAlert".to_string(),
            "removeAnnotation".to_string(),
        ])
    );
}

#[tokio::test]
async fn the_demo_prints_three_cycles() {
    let mut out = Vec::new();
    run(&mut out).await.unwrap();
    let text = String::from_utf8(out).unwrap();
    let headers: Vec<&str> = text.lines().filter(|l| l.starts_with("Cycle ")).collect();
    assert_eq!(
        headers,
        [
            "Cycle 1 at 2026-05-04T09:00:00Z",
            "Cycle 2 at 2026-05-04T09:05:00Z",
            "Cycle 3 at 2026-05-04T09:10:00Z",
        ]
    );
    assert!(
        text.contains("No new mismatches; 4 still open, already reported: nothing was sent.\n"),
        "{text}"
    );
}
