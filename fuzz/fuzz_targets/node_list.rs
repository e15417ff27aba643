//! The node listing: what a tenant's control node prints for the default `ssh.command` (four
//! columns), the previous default (three or two columns) and `kubectl get nodes -o name`,
//! read as the SSH lister reads it: through the line bound as it arrives, in pieces split
//! anywhere, then parsed.
//!
//! Input: byte 0 picks the bound (`node_bound` of a VM count, or a small one), byte 1 how the
//! output is split into pieces, the rest is the command's stdout.
//!
//! What must hold: the bound refuses the same outputs however they are split, exactly those
//! with more lines than it allows or a line over `LINE_LIMIT`; a parsed list never holds more
//! nodes than its bound, nor more than the output's lines; every node has the shape the
//! parser promises; printing the list again and parsing it gives the same list; an error
//! names a line of the output and carries at most 80 characters of it.
#![no_main]

use cks_drift::remote::ssh::{LINE_LIMIT, LineBound};
use cks_drift::remote::{Node, Readiness, node_bound, parse_nodes};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let [bound_byte, split, stdout @ ..] = data else {
        return;
    };
    let max_nodes = if bound_byte & 0x80 == 0 {
        usize::from(bound_byte % 32)
    } else {
        node_bound(usize::from(bound_byte & 0x7f))
    };

    // The bound, on the whole output at once and in pieces.
    let whole = LineBound::new(max_nodes).take(stdout).is_ok();
    let mut pieces = LineBound::new(max_nodes);
    let mut rest = stdout;
    let mut step = usize::from(*split) | 1;
    let mut split_ok = true;
    while !rest.is_empty() {
        let n = step.min(rest.len());
        if pieces.take(&rest[..n]).is_err() {
            split_ok = false;
            break;
        }
        rest = &rest[n..];
        step = (step * 7 + 3) % 61 + 1;
    }
    assert_eq!(
        whole, split_ok,
        "the bound depends on how the output is split"
    );
    let lines: Vec<&[u8]> = stdout.split_inclusive(|&b| b == b'\n').collect();
    let expected = lines.len() <= max_nodes && lines.iter().all(|line| line.len() <= LINE_LIMIT);
    assert_eq!(whole, expected, "the bound refused the wrong output");

    // The lister parses what the bound let through, lossily decoded.
    let text = String::from_utf8_lossy(stdout);
    let line_count = text.lines().count();
    let filled = text.lines().filter(|l| !l.trim().is_empty()).count();
    match parse_nodes(&text) {
        Ok(nodes) => {
            assert!(nodes.len() <= filled, "more nodes than lines");
            if whole {
                assert!(
                    nodes.len() <= max_nodes,
                    "{} nodes read under a bound of {max_nodes}",
                    nodes.len()
                );
            }
            for node in &nodes {
                check_shape(node);
            }
            let again = parse_nodes(&render(&nodes)).expect("a printed list parses");
            assert_eq!(again, nodes, "printed and parsed again, the list changed");
        }
        Err(e) => {
            assert!(
                (1..=line_count).contains(&e.line),
                "line {} of {line_count}",
                e.line
            );
            assert!(e.excerpt.chars().count() <= 80);
            let line = text.lines().nth(e.line - 1).unwrap().trim();
            assert!(
                line.starts_with(&e.excerpt),
                "the excerpt is not of its line"
            );
            assert!(!line.is_empty(), "a blank line refused");
        }
    }
});

/// The shapes `parse_nodes` promises: a lowercase DNS-1123 subdomain, a lowercase printable
/// system UUID without commas, a printable provider ID with `://`.
fn check_shape(node: &Node) {
    let name = node.name.as_bytes();
    assert!(!name.is_empty() && name.len() <= 253, "{node:?}");
    assert!(
        name.iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-' || *b == b'.'),
        "{node:?}"
    );
    if let Some(uuid) = &node.system_uuid {
        assert!(uuid.len() <= 128 && !uuid.is_empty(), "{node:?}");
        assert!(
            uuid.bytes()
                .all(|b| b.is_ascii_graphic() && !b.is_ascii_uppercase() && b != b','),
            "{node:?}"
        );
        assert_ne!(uuid, "<none>");
    }
    if let Some(id) = &node.provider_id {
        // `<provider>://<path>`, or the bare name of cloud provider releases that set no VM id.
        let bare = matches!(id.as_str(), "external-cloudstack" | "cloudstack");
        assert!(id.len() <= 512 && (id.contains("://") || bare), "{node:?}");
        assert!(id.bytes().all(|b| b.is_ascii_graphic()), "{node:?}");
    }
}

/// The list as the default command prints it, `<none>` for what is not set.
fn render(nodes: &[Node]) -> String {
    let mut out = String::new();
    for node in nodes {
        let ready = match node.ready {
            Some(Readiness::Ready) => "True",
            Some(Readiness::NotReady) => "False",
            Some(Readiness::Unknown) => "Unknown",
            None => "<none>",
        };
        out.push_str(&format!(
            "{}   {ready}   {}   {}\n",
            node.name,
            node.system_uuid.as_deref().unwrap_or("<none>"),
            node.provider_id.as_deref().unwrap_or("<none>"),
        ));
    }
    out
}
