//! What `ssh.command` lists too little of, or needs a shell for.

use std::time::Duration;

use super::{Finding, Raw};
use crate::base::duration::parse_duration;
use crate::config::DEFAULT_COMMAND;
use crate::remote::ssh::remote_command;

/// What `ssh.command` (or the default) lists too little of, or needs a shell for.
pub(super) fn command_warnings(raw: &Raw<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    let command = raw.str("ssh.command").unwrap_or(DEFAULT_COMMAND);
    if lists_names_only(command) {
        out.push(Finding::warning(
            "ssh.command",
            format!(
                "{command:?} lists node names only (-o name): nodes are then matched to VMs by \
                 name, so a node its tenant renamed is not recognised and one named like another \
                 VM is not caught; list their system UUIDs and provider IDs too with \
                 \"kubectl get nodes {}\" (the default)",
                crate::remote::kubectl::LIST_ARGUMENTS
            ),
        ));
    }
    if lists_no_readiness(command) {
        out.push(Finding::warning(
            "ssh.command",
            format!(
                "{command:?} lists no readiness (no READY column): `cks-drift explain` cannot \
                 say whether each node is Ready; list it too with \"kubectl get nodes {}\" \
                 (the default)",
                crate::remote::kubectl::LIST_ARGUMENTS
            ),
        ));
    }
    if let Some(what) = shell_syntax(command) {
        let timeout = raw
            .str("ssh.command_timeout")
            .and_then(|t| parse_duration(t).ok())
            .unwrap_or(Duration::from_secs(20));
        out.push(Finding::warning(
            "ssh.command",
            format!(
                "{command:?} {what}; it runs on the node as \"{}\", so it must be a simple \
                 command (a program and its arguments): wrap anything else in sh -c '…' or in a \
                 script on the node",
                remote_command("<command>", timeout)
            ),
        ));
    }
    out
}

/// What in `command` needs a shell, if anything: operators, redirections, substitutions, a
/// leading variable assignment or a shell keyword or builtin. Quoted text is not looked at.
pub fn shell_syntax(command: &str) -> Option<String> {
    let mut found: Vec<&'static str> = Vec::new();
    let mut note = |what: &'static str| {
        if !found.contains(&what) {
            found.push(what);
        }
    };
    let mut quote: Option<char> = None;
    let mut chars = command.trim().chars().peekable();
    let mut prev = ' ';
    while let Some(c) = chars.next() {
        match quote {
            Some(q) if c == q => quote = None,
            Some('"') if c == '\\' => {
                chars.next();
            }
            Some('"') if c == '`' => note("a command substitution"),
            Some('"') if c == '$' && chars.peek() == Some(&'(') => note("a command substitution"),
            Some(_) => {}
            None => match c {
                '\'' | '"' => quote = Some(c),
                '\\' => {
                    chars.next();
                }
                '|' => note("a pipe or ||"),
                ';' => note("a ;"),
                '&' => note("& or &&"),
                '<' | '>' => note("a redirection"),
                '`' => note("a command substitution"),
                '$' if chars.peek() == Some(&'(') => note("a command substitution"),
                '(' if prev != '$' => note("parentheses"),
                '\n' => note("a line break"),
                _ => {}
            },
        }
        prev = c;
    }
    let first = command.split_whitespace().next().unwrap_or("");
    const SHELL_WORDS: &[&str] = &[
        "if", "for", "while", "until", "case", "{", "!", "cd", "export", "source", ".", "exec",
        "set", "unset", "alias",
    ];
    if SHELL_WORDS.contains(&first) {
        note("a leading shell keyword or builtin");
    } else if first.contains('=') && !first.starts_with('=') {
        note("a leading variable assignment");
    }
    if found.is_empty() {
        return None;
    }
    Some(format!("uses shell syntax ({})", found.join(", ")))
}

/// Whether `command` asks kubectl for names only (`-o name` and its spellings).
pub fn lists_names_only(command: &str) -> bool {
    let words: Vec<String> = command
        .split_whitespace()
        .map(|w| w.trim_matches(|c| c == '\'' || c == '"').to_string())
        .collect();
    words.iter().enumerate().any(|(i, w)| {
        let next_is_name = words.get(i + 1).is_some_and(|n| n == "name");
        matches!(w.as_str(), "-oname" | "-o=name" | "--output=name")
            || (matches!(w.as_str(), "-o" | "--output") && next_is_name)
    })
}

/// Whether `command` prints custom columns without the nodes' conditions, as the previous
/// default did: nodes are matched as well, but their readiness is not known.
pub fn lists_no_readiness(command: &str) -> bool {
    command.contains("custom-columns") && !command.contains(".status.conditions")
}
