//! The markers that end cks-drift's alerts and annotations (`[cks-drift <cluster id>/<key>]`,
//! `[cks-drift <key>]`), read back from what CloudStack stored to recognise its own, and the
//! finding keys in them. A description holds tenant text (VM and node names, a blind
//! reason) before its marker.
//!
//! Input: a finding (its kind and tenant-chosen names), a cluster name and id, and a text an
//! older release queued, all taken from the bytes by `arbitrary`; the same bytes are also
//! read as a text that may or may not end with a marker.
//!
//! What must hold: a finding key parses back to itself; its marker form is short plain ASCII
//! of the same kind; an alert description and an annotation fit their parameters, hold no
//! character CloudStack refuses, and read back to the marker written into them; a re-marked
//! text ends with its new marker; any text reads as a marker only if it ends with one.
#![no_main]

use cks_drift::base::time::Timestamp;
use cks_drift::cloudstack::limits::{
    ALERT_DESCRIPTION_LENGTH, ANNOTATION_LENGTH, is_refused_control, java_len,
};
use cks_drift::diff::wording::{
    alert_description, annotation_marker, annotation_text, marked_key, marker_key, marker_parts,
    remarked,
};
use cks_drift::diff::{FindingKey, Mismatch, MismatchKind, Subject, VmRef};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    any_text(&String::from_utf8_lossy(data));
    let mut u = Unstructured::new(data);
    let _ = finding_round_trip(&mut u);
});

/// A text read for its closing marker, and as a finding key.
fn any_text(text: &str) {
    if let Some((cluster, key)) = marker_parts(text) {
        assert!(
            text.ends_with(']') && text.contains("[cks-drift "),
            "{text:?}"
        );
        assert!(key.contains(':'), "{key:?}");
        if let Some(cluster) = cluster {
            assert!(!cluster.contains(':'), "{cluster:?}");
        }
        assert_eq!(marked_key(text), Some(key));
    }
    if let Some(key) = FindingKey::parse(text) {
        assert_eq!(key.to_string(), text, "a key does not print as it was read");
    }
}

fn finding_round_trip(u: &mut Unstructured) -> Result<()> {
    let m = mismatch(u)?;
    let cluster: String = u.arbitrary()?;
    let cluster_id: String = u.arbitrary()?;
    let queued: String = u.arbitrary()?;

    let key = m.key();
    let text = key.to_string();
    assert_eq!(FindingKey::parse(&text), Some(key.clone()), "{text:?}");

    let marked = marker_key(&text);
    assert!(marked.len() <= 64, "{marked:?}");
    assert!(
        marked
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._:/-#".contains(&b)),
        "{marked:?}"
    );
    assert_eq!(
        FindingKey::parse(&marked).map(|k| k.kind),
        Some(m.kind),
        "{marked:?}"
    );
    if !marked.contains('#') {
        assert_eq!(marked, text);
    }

    let description = alert_description(&cluster, &cluster_id, &m);
    sendable(&description, ALERT_DESCRIPTION_LENGTH);
    // CloudStack's ids: UUIDs, or at least plain lowercase words.
    let plain_id = !cluster_id.is_empty()
        && cluster_id.len() <= 64
        && cluster_id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if plain_id {
        assert_eq!(
            marker_parts(&description),
            Some((Some(cluster_id.as_str()), marked.as_str())),
            "{description:?}"
        );
    }

    let note = annotation_text(&m);
    sendable(&note, ANNOTATION_LENGTH);
    assert_eq!(
        marker_parts(&note),
        Some((None, marked.as_str())),
        "{note:?}"
    );

    let marker = annotation_marker(&text);
    let again = remarked(&queued, &marker, ANNOTATION_LENGTH);
    assert!(again.ends_with(&marker), "{again:?}");
    assert!(java_len(&again) <= ANNOTATION_LENGTH, "{again:?}");
    assert_eq!(marked_key(&again), Some(marked.as_str()), "{again:?}");
    Ok(())
}

/// Fits `max` UTF-16 units and holds nothing CloudStack refuses or its `utf8` tables cannot
/// store.
fn sendable(text: &str, max: usize) {
    assert!(java_len(text) <= max, "{} units: {text:?}", java_len(text));
    assert!(
        text.chars()
            .all(|c| !is_refused_control(c) && c.len_utf16() == 1),
        "{text:?}"
    );
}

fn mismatch(u: &mut Unstructured) -> Result<Mismatch> {
    let kind = *u.choose(&MismatchKind::ALL)?;
    let subject = match kind {
        MismatchKind::MappedVm | MismatchKind::UnmappedVm | MismatchKind::VmNotANode => {
            Subject::Vm(vm(u)?)
        }
        MismatchKind::NodeWithoutVm => Subject::Node(u.arbitrary()?),
        MismatchKind::MapCount => Subject::MapRows {
            shown: u.arbitrary()?,
            expected: u.arbitrary()?,
        },
        MismatchKind::Blind => Subject::Blind {
            reason: u.arbitrary()?,
            since: Timestamp::from_unix(u.int_in_range(0..=253_402_300_799)?),
        },
        MismatchKind::IdentityConflict => Subject::Conflict {
            node: u.arbitrary()?,
            is: vm(u)?,
            named: vm(u)?,
        },
    };
    Ok(Mismatch { kind, subject })
}

fn vm(u: &mut Unstructured) -> Result<VmRef> {
    Ok(VmRef {
        id: u.arbitrary()?,
        name: u.arbitrary()?,
        state: u.arbitrary()?,
    })
}
