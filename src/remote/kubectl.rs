//! Reads what `kubectl get nodes -o name` printed on a control node into node names. Pure: it
//! neither runs kubectl nor talks SSH (that is `remote::ssh`), and it does not compare the
//! names with anything (that is the diff).

/// Longest excerpt of an offending line kept in a [`ParseError`].
const EXCERPT_CHARS: usize = 80;

/// Longest Kubernetes object name (a DNS-1123 subdomain).
const MAX_NAME_LEN: usize = 253;

/// The output was not a node list. One bad line spoils the whole output: a login banner, an
/// HTML error page or a shell message means the list cannot be trusted, and a partial list
/// would look like missing nodes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line} of the node list is not `node/<name>`: {excerpt:?}")]
pub struct ParseError {
    /// 1-based line number in the output.
    pub line: usize,
    /// The offending line, trimmed and cut to 80 characters.
    pub excerpt: String,
}

/// Parses `node/<name>` lines into names, in output order.
///
/// Surrounding whitespace (including the `\r` of CRLF endings) is trimmed and blank lines are
/// skipped, so empty output is an empty list: kubectl prints "No resources found" to stderr,
/// not stdout. Names are lowercased, since Kubernetes names are lowercase and CloudStack VM
/// names may not be; compare them case-insensitively.
pub fn parse_nodes(stdout: &str) -> Result<Vec<String>, ParseError> {
    let mut names = Vec::new();
    for (index, raw) in stdout.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        let name = line
            .strip_prefix("node/")
            .map(str::to_ascii_lowercase)
            .filter(|name| is_dns1123_subdomain(name))
            .ok_or_else(|| ParseError {
                line: index + 1,
                excerpt: line.chars().take(EXCERPT_CHARS).collect(),
            })?;
        names.push(name);
    }
    Ok(names)
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

    #[test]
    fn reads_names_in_order() {
        let out = "node/prod-control-18a2b3c4d5e\nnode/prod-node-18a2b3c4d6f\n";
        assert_eq!(
            parse_nodes(out),
            Ok(vec![
                "prod-control-18a2b3c4d5e".to_string(),
                "prod-node-18a2b3c4d6f".to_string()
            ])
        );
    }

    #[test]
    fn reads_fully_qualified_names() {
        let out = "node/worker-1.k8s.example.com\nnode/10.1.2.3\n";
        assert_eq!(
            parse_nodes(out),
            Ok(vec![
                "worker-1.k8s.example.com".to_string(),
                "10.1.2.3".to_string()
            ])
        );
    }

    #[test]
    fn skips_blank_lines_and_trims() {
        let out = "\n  node/a  \n\n\t\nnode/b\n\n";
        assert_eq!(parse_nodes(out), Ok(vec!["a".to_string(), "b".to_string()]));
    }

    #[test]
    fn accepts_crlf_line_endings() {
        let out = "node/a\r\nnode/b\r\n";
        assert_eq!(parse_nodes(out), Ok(vec!["a".to_string(), "b".to_string()]));
    }

    #[test]
    fn lowercases_names() {
        assert_eq!(
            parse_nodes("node/Worker-1.Example.COM\n"),
            Ok(vec!["worker-1.example.com".to_string()])
        );
    }

    #[test]
    fn empty_output_is_an_empty_list() {
        assert_eq!(parse_nodes(""), Ok(vec![]));
        assert_eq!(parse_nodes("\n \r\n"), Ok(vec![]));
    }

    #[test]
    fn a_banner_spoils_the_whole_output() {
        let out = "node/a\nWelcome to Ubuntu 22.04 LTS\nnode/b\n";
        assert_eq!(
            parse_nodes(out),
            Err(ParseError {
                line: 2,
                excerpt: "Welcome to Ubuntu 22.04 LTS".to_string()
            })
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
                "line 1 of the node list is not `node/<name>`: {:?}",
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
            "nodes/a",
            "pod/a",
            "a",
            "node/a/b",
        ] {
            assert_eq!(
                parse_nodes(bad),
                Err(ParseError {
                    line: 1,
                    excerpt: bad.to_string()
                }),
                "{bad}"
            );
        }
    }

    #[test]
    fn refuses_names_longer_than_253() {
        let label = "a".repeat(63);
        let ok = [&label[..], &label, &label, &label[..61]].join(".");
        assert_eq!(ok.len(), 253);
        assert_eq!(parse_nodes(&format!("node/{ok}")), Ok(vec![ok.clone()]));
        let too_long = format!("node/{ok}a");
        assert_eq!(parse_nodes(&too_long).unwrap_err().line, 1);
    }
}
