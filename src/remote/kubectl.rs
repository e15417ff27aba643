//! Reads what the node-listing command printed on a control node into nodes: the columns of
//! `kubectl get nodes` with [`LIST_ARGUMENTS`] (name, readiness, system UUID, provider ID),
//! the three columns of the previous release's default (no readiness), or the `node/<name>`
//! lines of `kubectl get nodes -o name`, the command of earlier releases, which gives names
//! only. Pure: it neither runs kubectl nor talks SSH (that is `remote::ssh`), and it does not
//! compare the nodes with anything (that is the diff).

use std::fmt;

use super::{Node, Readiness};

/// What the default `ssh.command` passes to `kubectl get nodes`: one line per node, its name,
/// the status of its `Ready` condition, its system UUID and its provider ID. The readiness
/// column needs a jsonpath filter, whose brackets, parentheses and double quotes a shell would
/// read, so the whole `-o` argument is in single quotes: the one quoting every login shell
/// (sh, bash, dash, zsh, fish) reads the same way. Readiness comes second so that each line
/// says which columns it has (see [`columns_line`]).
pub const LIST_ARGUMENTS: &str = "--no-headers -o 'custom-columns=NAME:.metadata.name,\
READY:.status.conditions[?(@.type==\"Ready\")].status,\
UUID:.status.nodeInfo.systemUUID,PROVIDER:.spec.providerID'";

/// Longest excerpt of an offending line kept in a [`ParseError`].
const EXCERPT_CHARS: usize = 80;

/// Longest Kubernetes object name (a DNS-1123 subdomain).
const MAX_NAME_LEN: usize = 253;

/// Longest system UUID taken. SMBIOS UUIDs are 36 characters; other platforms print other
/// shapes, never this long.
const MAX_UUID_LEN: usize = 128;

/// Longest provider ID taken (`<provider>://<path>`; CloudStack's is 49 characters).
const MAX_PROVIDER_ID_LEN: usize = 512;

/// What kubectl's custom-columns printer shows for a field that is not set.
const NONE: &str = "<none>";

/// The two outputs a node-listing command may print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeFormat {
    /// `<name> <ready> <system uuid> <provider id>` columns ([`LIST_ARGUMENTS`]), or the
    /// previous default's `<name> <system uuid> <provider id>`.
    Columns,
    /// `node/<name>` lines (`-o name`): names only.
    Names,
}

impl fmt::Display for NodeFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NodeFormat::Columns => "`<name> <ready> <system uuid> <provider id>`",
            NodeFormat::Names => "`node/<name>`",
        })
    }
}

/// The output was not a node list. One bad line spoils the whole output: a login banner, an
/// HTML error page or a shell message means the list cannot be trusted, and a partial list
/// would look like missing nodes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line} of the node list is not {format}: {excerpt:?}")]
pub struct ParseError {
    /// 1-based line number in the output.
    pub line: usize,
    /// The offending line, trimmed and cut to 80 characters.
    pub excerpt: String,
    /// The format the output's first line chose.
    pub format: NodeFormat,
}

/// Parses a node list, in output order. Its first line decides the format: `node/<name>`
/// lines (names only), else columns; every line must then be of that format.
///
/// Surrounding whitespace (including the `\r` of CRLF endings) is trimmed and blank lines are
/// skipped, so empty output is an empty list: kubectl prints "No resources found" to stderr,
/// not stdout. Names and system UUIDs are lowercased, since Kubernetes names and CloudStack
/// UUIDs are lowercase while CloudStack VM names and SMBIOS UUIDs may not be; compare them
/// case-insensitively.
pub fn parse_nodes(stdout: &str) -> Result<Vec<Node>, ParseError> {
    let mut lines = stdout
        .lines()
        .enumerate()
        .map(|(index, raw)| (index + 1, raw.trim()))
        .filter(|(_, line)| !line.is_empty())
        .peekable();
    let format = match lines.peek() {
        Some((_, first)) if first.starts_with("node/") => NodeFormat::Names,
        _ => NodeFormat::Columns,
    };
    lines
        .map(|(number, line)| {
            let node = match format {
                NodeFormat::Names => name_line(line),
                NodeFormat::Columns => columns_line(line),
            };
            node.ok_or_else(|| ParseError {
                line: number,
                excerpt: line.chars().take(EXCERPT_CHARS).collect(),
                format,
            })
        })
        .collect()
}

fn name_line(line: &str) -> Option<Node> {
    let name = line.strip_prefix("node/")?.to_ascii_lowercase();
    is_dns1123_subdomain(&name).then(|| Node::named(name))
}

/// One line of custom columns. kubectl pads the columns with spaces and prints `<none>` for a
/// field that is not set, but nothing for a field set to the empty string. Only the system
/// UUID can be that (the API omits an empty `providerID`, never an empty `systemUUID`), so a
/// line has one field fewer when it is. kubectl does not escape what the fields hold: a field
/// with a space or a control character spoils the line.
///
/// Which columns a line has follows from its fields, since a system UUID is never a condition
/// status:
///
/// | fields | columns |
/// |---|---|
/// | 4 | name, ready, system UUID, provider ID ([`LIST_ARGUMENTS`]) |
/// | 3, the second `True`, `False` or `Unknown` | name, ready, provider ID (empty system UUID) |
/// | 3, else | name, system UUID, provider ID (the previous default) |
/// | 2 | name, provider ID (the previous default, empty system UUID) |
///
/// A `<none>` second of three fields is a missing readiness or system UUID; either way both
/// are unknown. A node whose `Ready` condition kubectl prints as anything but one status
/// (`False,True` for a doubled condition) spoils the line like any other malformed field.
fn columns_line(line: &str) -> Option<Node> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let (name, ready, uuid, provider) = match fields.as_slice() {
        [name, ready, uuid, provider] => (*name, Some(*ready), Some(*uuid), *provider),
        [name, second, provider] if Readiness::parse(second).is_some() => {
            (*name, Some(*second), None, *provider)
        }
        [name, uuid, provider] => (*name, None, Some(*uuid), *provider),
        [name, provider] => (*name, None, None, *provider),
        _ => return None,
    };
    let name = name.to_ascii_lowercase();
    if !is_dns1123_subdomain(&name) {
        return None;
    }
    let ready = match ready {
        None | Some(NONE) => None,
        Some(status) => Some(Readiness::parse(status)?),
    };
    let system_uuid = match uuid {
        None | Some(NONE) => None,
        // kubectl joins several values with commas, as it does for a doubled `Ready`
        // condition in a line with an empty system UUID; no platform's UUID has one.
        // `<none>` is kubectl's only placeholder: `<None>` (found by the `node_list` fuzz
        // target) is no UUID either, and lowercased it would pass for a node's UUID.
        Some(uuid) => Some(
            plain(uuid, MAX_UUID_LEN)
                .filter(|uuid| !uuid.contains([',', '<', '>']))?
                .to_ascii_lowercase(),
        ),
    };
    // A provider ID is `<provider>://<path>`, or one of the bare names of cloud provider
    // releases that set no id; requiring either keeps a banner line of the right word count
    // from passing for a node.
    let provider_id = match provider {
        NONE => None,
        id => Some(
            plain(id, MAX_PROVIDER_ID_LEN)
                .filter(|id| id.contains("://") || BARE_PROVIDER_IDS.contains(id))?,
        ),
    };
    Some(Node {
        name,
        system_uuid,
        provider_id: provider_id.map(str::to_string),
        ready,
    })
}

/// Provider IDs without a VM id: apache/cloudstack-kubernetes-provider v1.1.0 and v1.1.1 set
/// the bare provider name (`external-cloudstack`); v1.0.0 and v1.2.0 on (PR 85) set
/// `external-cloudstack://<vm uuid>`, the Cluster API provider `cloudstack:///<vm uuid>`.
const BARE_PROVIDER_IDS: [&str; 2] = ["external-cloudstack", "cloudstack"];

/// `field` if it is at most `max` printable ASCII characters.
fn plain(field: &str, max: usize) -> Option<&str> {
    (field.len() <= max && field.bytes().all(|b| b.is_ascii_graphic())).then_some(field)
}

/// Kubernetes' `IsDNS1123Subdomain`: at most 253 characters, dot-separated labels of
/// lowercase letters, digits and `-`, each starting and ending with a letter or digit.
fn is_dns1123_subdomain(name: &str) -> bool {
    name.len() <= MAX_NAME_LEN
        && name.split('.').all(|label| {
            let bytes = label.as_bytes();
            let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
            match (bytes.first(), bytes.last()) {
                (Some(first), Some(last)) => {
                    alnum(first) && alnum(last) && bytes.iter().all(|b| alnum(b) || *b == b'-')
                }
                _ => false,
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const UUID: &str = "0f9e8d7c-6b5a-4c3d-2e1f-0a9b8c7d6e5f";

    fn names(list: &[&str]) -> Vec<Node> {
        list.iter().map(|n| Node::named(*n)).collect()
    }

    fn node(name: &str, uuid: Option<&str>, provider: Option<&str>) -> Node {
        Node::identified(name, uuid, provider)
    }

    fn with_ready(node: Node, ready: Readiness) -> Node {
        Node {
            ready: Some(ready),
            ..node
        }
    }

    #[test]
    fn reads_names_in_order() {
        let out = "node/prod-control-18a2b3c4d5e\nnode/prod-node-18a2b3c4d6f\n";
        assert_eq!(
            parse_nodes(out),
            Ok(names(&[
                "prod-control-18a2b3c4d5e",
                "prod-node-18a2b3c4d6f"
            ]))
        );
    }

    #[test]
    fn reads_fully_qualified_names() {
        let out = "node/worker-1.k8s.example.com\nnode/10.1.2.3\n";
        assert_eq!(
            parse_nodes(out),
            Ok(names(&["worker-1.k8s.example.com", "10.1.2.3"]))
        );
    }

    #[test]
    fn skips_blank_lines_and_trims() {
        let out = "\n  node/a  \n\n\t\nnode/b\n\n";
        assert_eq!(parse_nodes(out), Ok(names(&["a", "b"])));
    }

    #[test]
    fn accepts_crlf_line_endings() {
        let out = "node/a\r\nnode/b\r\n";
        assert_eq!(parse_nodes(out), Ok(names(&["a", "b"])));
        let out = format!("a {UUID} <none>\r\nb <none> <none>\r\n");
        assert_eq!(
            parse_nodes(&out),
            Ok(vec![node("a", Some(UUID), None), node("b", None, None)])
        );
    }

    #[test]
    fn lowercases_names() {
        assert_eq!(
            parse_nodes("node/Worker-1.Example.COM\n"),
            Ok(names(&["worker-1.example.com"]))
        );
    }

    #[test]
    fn empty_output_is_an_empty_list() {
        assert_eq!(parse_nodes(""), Ok(vec![]));
        assert_eq!(parse_nodes("\n \r\n"), Ok(vec![]));
    }

    /// What the real kubectl 1.32 printed for [`LIST_ARGUMENTS`]: padded columns, `<none>` for
    /// a field not set (no `Ready` condition, no provider ID), nothing for an empty system UUID.
    #[test]
    fn reads_readiness_columns_as_kubectl_pads_them() {
        let out = "\
web-control-18a2b3c4d5e   True      0F9E8D7C-6B5A-4C3D-2E1F-0A9B8C7D6E5F   cloudstack:///0f9e8d7c-6b5a-4c3d-2e1f-0a9b8c7d6e5f
web-node-18a2b3c4d6f      Unknown   <none>                                 <none>
web-node-18a2b3c4d7a      False                                            <none>
web-node-18a2b3c4d8b      <none>                                           <none>
manual.k8s.example.com    True      ec2d4a8e-1111-2222-3333-444455556666   external-cloudstack:///abc
";
        assert_eq!(
            parse_nodes(out),
            Ok(vec![
                with_ready(
                    node(
                        "web-control-18a2b3c4d5e",
                        Some(UUID),
                        Some("cloudstack:///0f9e8d7c-6b5a-4c3d-2e1f-0a9b8c7d6e5f")
                    ),
                    Readiness::Ready
                ),
                with_ready(node("web-node-18a2b3c4d6f", None, None), Readiness::Unknown),
                with_ready(
                    node("web-node-18a2b3c4d7a", None, None),
                    Readiness::NotReady
                ),
                node("web-node-18a2b3c4d8b", None, None),
                with_ready(
                    node(
                        "manual.k8s.example.com",
                        Some("ec2d4a8e-1111-2222-3333-444455556666"),
                        Some("external-cloudstack:///abc")
                    ),
                    Readiness::Ready
                ),
            ])
        );
        assert_eq!(
            parse_nodes("a   True   cloudstack:///x\n"),
            Ok(vec![with_ready(
                node("a", None, Some("cloudstack:///x")),
                Readiness::Ready
            )])
        );
    }

    /// The cloud provider's v1.1.x set the bare provider name: a node, with no VM id in it. A
    /// bare word that is no provider's name is not a provider ID.
    #[test]
    fn reads_the_bare_provider_id_of_cloud_provider_releases_that_set_no_id() {
        let out =
            "web-node-1   True   4230B1D7-0000-0000-0000-000000000000   external-cloudstack\n";
        assert_eq!(
            parse_nodes(out),
            Ok(vec![with_ready(
                node(
                    "web-node-1",
                    Some("4230b1d7-0000-0000-0000-000000000000"),
                    Some("external-cloudstack")
                ),
                Readiness::Ready
            )])
        );
        assert_eq!(parse_nodes("no resources found\n").unwrap_err().line, 1);
    }

    /// A doubled `Ready` condition prints as `False,True`: not one status, so not a node list.
    #[test]
    fn refuses_readiness_that_is_not_one_status() {
        for bad in [
            format!("a False,True {UUID} <none>"),
            format!("a true {UUID} <none>"),
            format!("a Ready {UUID} <none>"),
            "a False,True <none>".to_string(),
        ] {
            assert_eq!(parse_nodes(&bad).unwrap_err().line, 1, "{bad}");
        }
    }

    /// What the real kubectl 1.32 printed for the previous default, which had no readiness
    /// column: still read, readiness unknown.
    #[test]
    fn reads_columns_as_kubectl_pads_them() {
        let out = "\
web-control-18a2b3c4d5e   0F9E8D7C-6B5A-4C3D-2E1F-0A9B8C7D6E5F   cloudstack:///0f9e8d7c-6b5a-4c3d-2e1f-0a9b8c7d6e5f
web-node-18a2b3c4d6f                                           <none>
web-node-18a2b3c4d7a      <none>                                 <none>
manual.k8s.example.com    ec2d4a8e-1111-2222-3333-444455556666   external-cloudstack:///abc
";
        assert_eq!(
            parse_nodes(out),
            Ok(vec![
                node(
                    "web-control-18a2b3c4d5e",
                    Some(UUID),
                    Some("cloudstack:///0f9e8d7c-6b5a-4c3d-2e1f-0a9b8c7d6e5f")
                ),
                node("web-node-18a2b3c4d6f", None, None),
                node("web-node-18a2b3c4d7a", None, None),
                node(
                    "manual.k8s.example.com",
                    Some("ec2d4a8e-1111-2222-3333-444455556666"),
                    Some("external-cloudstack:///abc")
                ),
            ])
        );
    }

    #[test]
    fn an_empty_system_uuid_leaves_two_columns() {
        assert_eq!(
            parse_nodes("a   cloudstack:///x\n"),
            Ok(vec![node("a", None, Some("cloudstack:///x"))])
        );
    }

    #[test]
    fn a_banner_spoils_the_whole_output() {
        let out = "node/a\nWelcome to Ubuntu 22.04 LTS\nnode/b\n";
        assert_eq!(
            parse_nodes(out),
            Err(ParseError {
                line: 2,
                excerpt: "Welcome to Ubuntu 22.04 LTS".to_string(),
                format: NodeFormat::Names,
            })
        );
        let out = format!("System restart required\na {UUID} <none>\n");
        assert_eq!(
            parse_nodes(&out),
            Err(ParseError {
                line: 1,
                excerpt: "System restart required".to_string(),
                format: NodeFormat::Columns,
            })
        );
    }

    #[test]
    fn one_format_per_output() {
        let out = format!("node/a\na {UUID} <none>\n");
        assert_eq!(parse_nodes(&out).unwrap_err().line, 2);
        let out = format!("a {UUID} <none>\nnode/b\n");
        assert_eq!(
            parse_nodes(&out),
            Err(ParseError {
                line: 2,
                excerpt: "node/b".to_string(),
                format: NodeFormat::Columns,
            })
        );
    }

    #[test]
    fn a_header_line_is_refused() {
        let out = format!("NAME   UUID   PROVIDER\na {UUID} <none>\n");
        let err = parse_nodes(&out).unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 1 of the node list is not `<name> <ready> <system uuid> <provider id>`: \
             \"NAME   UUID   PROVIDER\""
        );
    }

    #[test]
    fn refuses_fields_a_node_cannot_have() {
        let long_uuid = "u".repeat(129);
        let long_provider = format!("cloudstack:///{}", "p".repeat(500));
        for bad in [
            "a".to_string(),
            format!("a {UUID} <none> extra"),
            format!("-a {UUID} <none>"),
            format!("a_b {UUID} <none>"),
            format!("a {UUID} not-a-provider-id"),
            format!("a {UUID} cloudstack:///x\u{1b}[2J"),
            "a u\u{1b}[2J <none>".to_string(),
            format!("a {long_uuid} <none>"),
            format!("a {UUID} {long_provider}"),
            format!("a {UUID} cloudstack:///é"),
            "a <None> <none>".to_string(),
            "a True <NONE> <none>".to_string(),
        ] {
            assert_eq!(
                parse_nodes(&bad),
                Err(ParseError {
                    line: 1,
                    excerpt: bad.chars().take(80).collect(),
                    format: NodeFormat::Columns,
                }),
                "{bad}"
            );
        }
        // The longest fields taken.
        let uuid = "u".repeat(128);
        let provider = format!("cloudstack:///{}", "p".repeat(498));
        assert_eq!(provider.len(), 512);
        assert_eq!(
            parse_nodes(&format!("a {uuid} {provider}")),
            Ok(vec![node("a", Some(&uuid), Some(&provider))])
        );
    }

    #[test]
    fn an_html_page_is_refused_with_a_truncated_excerpt() {
        let line = format!(
            "<html><head><title>502 Bad Gateway</title></head>{}",
            "x".repeat(200)
        );
        let err = parse_nodes(&line).unwrap_err();
        assert_eq!(err.line, 1);
        assert_eq!(err.excerpt, line.chars().take(80).collect::<String>());
        assert_eq!(
            err.to_string(),
            format!(
                "line 1 of the node list is not `<name> <ready> <system uuid> <provider id>`: {:?}",
                err.excerpt
            )
        );
    }

    #[test]
    fn refuses_names_that_are_not_dns_subdomains() {
        for bad in [
            "node/",
            "node/-a",
            "node/a-",
            "node/a..b",
            "node/.a",
            "node/a_b",
            "node/a b",
            "node/a/b",
        ] {
            assert_eq!(
                parse_nodes(bad),
                Err(ParseError {
                    line: 1,
                    excerpt: bad.to_string(),
                    format: NodeFormat::Names,
                }),
                "{bad}"
            );
        }
        for bad in ["nodes/a", "pod/a", "a"] {
            assert_eq!(parse_nodes(bad).unwrap_err().line, 1, "{bad}");
        }
    }

    #[test]
    fn refuses_names_longer_than_253() {
        let label = "a".repeat(63);
        let ok = [&label[..], &label, &label, &label[..61]].join(".");
        assert_eq!(ok.len(), 253);
        assert_eq!(
            parse_nodes(&format!("node/{ok}")),
            Ok(vec![Node::named(ok.clone())])
        );
        assert_eq!(
            parse_nodes(&format!("{ok} <none> <none>")),
            Ok(vec![Node::named(ok.clone())])
        );
        let too_long = format!("node/{ok}a");
        assert_eq!(parse_nodes(&too_long).unwrap_err().line, 1);
        assert_eq!(
            parse_nodes(&format!("{ok}a <none> <none>"))
                .unwrap_err()
                .line,
            1
        );
    }
}
