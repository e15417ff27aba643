//! The node-listing command on an open connection: the command as sent (bounded on the
//! control node too), one exec, and the bounds on what it prints, since a tenant's control
//! node may print anything. Connecting and the host key are the parent's and `host_key`'s.

use std::time::Duration;

use russh::client;
use russh::{ChannelMsg, Sig};
use tokio::time::timeout;
use tracing::debug;

use super::SshNodeLister;
use super::host_key::HostKeyCheck;
use crate::remote::{NodeListError, RemoteExit, SshTarget, Stage};

/// Most stdout kept. A node list is about 130 bytes a node with its system UUID and provider
/// ID (40 with names only), so this is far beyond any cluster; more means the output is not
/// a node list, and a cut list would look like missing nodes, so it is refused rather than
/// truncated.
const STDOUT_LIMIT: usize = 4 * 1024 * 1024;
/// Longest stdout line read: a node line is a name (at most 253 characters), its readiness,
/// a system UUID and a provider ID. A longer line ends the listing at once.
pub const LINE_LIMIT: usize = 4096;
/// Most stderr kept; the rest is read and dropped.
const STDERR_LIMIT: usize = 64 * 1024;
/// Longest stderr line carried in an error.
const STDERR_LINE_CHARS: usize = 200;
/// Exit status of coreutils `timeout` when it had to stop the command.
const TIMEOUT_EXIT_STATUS: u32 = 124;

impl SshNodeLister {
    pub(super) async fn run_command(
        &self,
        handle: &client::Handle<HostKeyCheck>,
        target: &SshTarget,
    ) -> Result<String, NodeListError> {
        let command = remote_command(&self.command, self.command_timeout);
        debug!(command = %command, "running command");
        let output = timeout(
            self.command_timeout,
            exec(handle, &command, target.max_nodes),
        )
        .await
        .map_err(|_| self.timeout(target, Stage::Command))?
        .map_err(|failure| match failure {
            ExecFailure::Ssh(source) => NodeListError::Ssh {
                host: target.host.clone(),
                port: target.port,
                stage: Stage::Command,
                source,
            },
            ExecFailure::TooLarge => NodeListError::OutputTooLarge {
                host: target.host.clone(),
                port: target.port,
                limit: STDOUT_LIMIT,
            },
            ExecFailure::TooManyLines => NodeListError::TooManyNodes {
                host: target.host.clone(),
                port: target.port,
                max_nodes: target.max_nodes,
            },
            ExecFailure::LineTooLong => NodeListError::LineTooLong {
                host: target.host.clone(),
                port: target.port,
                limit: LINE_LIMIT,
            },
        })?;
        debug!(
            exit = ?output.exit,
            stdout_bytes = output.stdout.len(),
            stderr_bytes = output.stderr.len(),
            "command finished"
        );
        let exit = match output.exit {
            Some(RemoteExit::Status(0)) => {
                return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
            }
            Some(RemoteExit::Status(TIMEOUT_EXIT_STATUS)) => {
                return Err(self.timeout(target, Stage::Command));
            }
            Some(exit) => exit,
            None => RemoteExit::Unknown,
        };
        Err(NodeListError::Command {
            host: target.host.clone(),
            port: target.port,
            exit,
            stderr: last_line(&output.stderr),
        })
    }
}

/// The command as sent to the control node: `timeout <N>s <command>`, with N the command
/// timeout rounded up to whole seconds (at least 1).
///
/// Without a terminal the remote command gets no hangup when we disconnect, so a hung
/// kubectl would otherwise outlive every cycle. `timeout` comes first so that a command
/// starting with `sudo -n` needs no sudo rule for `timeout` itself; it stops the whole
/// command (sudo passes the signal on) and exits 124, which reads as a command timeout. The
/// configured command must therefore be a simple command (a program and its arguments), not
/// a shell pipeline or assignment.
pub fn remote_command(command: &str, bound: Duration) -> String {
    let seconds = bound.as_secs() + u64::from(bound.subsec_nanos() > 0);
    format!("timeout {}s {}", seconds.max(1), command.trim())
}

struct CommandOutput {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    exit: Option<RemoteExit>,
}

/// Why a command's output was not read to its end.
#[derive(Debug)]
pub enum ExecFailure {
    Ssh(russh::Error),
    TooLarge,
    /// More lines than `max_nodes`.
    TooManyLines,
    /// A line longer than [`LINE_LIMIT`].
    LineTooLong,
}

/// Counts stdout's lines as they arrive, so that a control node printing far more than a node
/// list is stopped at the bound, not held whole (a tenant's control node may print anything).
/// Public for the fuzz target that feeds it with [`parse_nodes`](crate::remote::parse_nodes).
pub struct LineBound {
    /// Lines allowed: `max_nodes`. None for a header: no node list has one (`parse_nodes`
    /// refuses every header line), so a line for it would only let one node more through.
    max_lines: usize,
    lines: usize,
    /// Bytes of the line not yet ended.
    open: usize,
}

impl LineBound {
    pub fn new(max_nodes: usize) -> LineBound {
        LineBound {
            max_lines: max_nodes,
            lines: 0,
            open: 0,
        }
    }

    /// Takes the next piece of stdout; an error once the output is past the bound.
    pub fn take(&mut self, data: &[u8]) -> Result<(), ExecFailure> {
        for piece in data.split_inclusive(|&b| b == b'\n') {
            self.open += piece.len();
            if self.open > LINE_LIMIT {
                return Err(ExecFailure::LineTooLong);
            }
            if piece.ends_with(b"\n") {
                self.lines += 1;
                self.open = 0;
            }
        }
        // An unended last line counts too.
        let lines = self.lines + usize::from(self.open > 0);
        if lines > self.max_lines {
            return Err(ExecFailure::TooManyLines);
        }
        Ok(())
    }
}

/// Runs one command and reads until the channel is gone: OpenSSH sends the exit status
/// before the last data may have been handed over, so stopping at `ExitStatus` or `Eof`
/// could lose output.
async fn exec(
    handle: &client::Handle<HostKeyCheck>,
    command: &str,
    max_nodes: usize,
) -> Result<CommandOutput, ExecFailure> {
    let mut bound = LineBound::new(max_nodes);
    let mut channel = handle
        .channel_open_session()
        .await
        .map_err(ExecFailure::Ssh)?;
    channel
        .exec(true, command)
        .await
        .map_err(ExecFailure::Ssh)?;
    let mut output = CommandOutput {
        stdout: Vec::new(),
        stderr: Vec::new(),
        exit: None,
    };
    while let Some(msg) = channel.wait().await {
        match msg {
            ChannelMsg::Data { data } => {
                if output.stdout.len() + data.len() > STDOUT_LIMIT {
                    return Err(ExecFailure::TooLarge);
                }
                bound.take(&data)?;
                output.stdout.extend_from_slice(&data);
            }
            ChannelMsg::ExtendedData { data, ext: 1 } => {
                let room = STDERR_LIMIT - output.stderr.len();
                output
                    .stderr
                    .extend_from_slice(&data[..data.len().min(room)]);
            }
            ChannelMsg::ExitStatus { exit_status } => {
                output.exit = Some(RemoteExit::Status(exit_status));
            }
            ChannelMsg::ExitSignal {
                signal_name,
                core_dumped,
                ..
            } => {
                output.exit = Some(RemoteExit::Signal {
                    name: signal_label(&signal_name),
                    core_dumped,
                });
            }
            ChannelMsg::Failure => debug!("server refused the exec request"),
            _ => {}
        }
    }
    Ok(output)
}

fn signal_label(signal: &Sig) -> String {
    let name = match signal {
        Sig::ABRT => "ABRT",
        Sig::ALRM => "ALRM",
        Sig::FPE => "FPE",
        Sig::HUP => "HUP",
        Sig::ILL => "ILL",
        Sig::INT => "INT",
        Sig::KILL => "KILL",
        Sig::PIPE => "PIPE",
        Sig::QUIT => "QUIT",
        Sig::SEGV => "SEGV",
        Sig::TERM => "TERM",
        Sig::USR1 => "USR1",
        Sig::Custom(name) => name,
    };
    name.to_string()
}

/// The last non-blank line, trimmed and cut to 200 characters. The last line is the summary:
/// kubectl logs several klog lines (`E1130 ... memcache.go:265] ...`) before "The connection
/// to the server ... was refused", and sudo without `-n` says "a terminal is required" before
/// "a password is required".
fn last_line(stderr: &[u8]) -> String {
    String::from_utf8_lossy(stderr)
        .lines()
        .map(str::trim)
        .rfind(|line| !line.is_empty())
        .unwrap_or_default()
        .chars()
        .take(STDERR_LINE_CHARS)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdout_is_stopped_past_the_bound_of_lines_or_a_line_too_long() {
        // Two nodes, in pieces that split lines anywhere.
        let mut bound = LineBound::new(2);
        for piece in [&b"node-a  Tr"[..], b"ue\nno", b"de-b  True\n"] {
            assert!(bound.take(piece).is_ok());
        }
        assert!(matches!(bound.take(b"x"), Err(ExecFailure::TooManyLines)));
        let mut bound = LineBound::new(2);
        assert!(matches!(
            bound.take(b"a\nb\nc\nd\n"),
            Err(ExecFailure::TooManyLines)
        ));
        let mut bound = LineBound::new(5_000);
        assert!(bound.take(&[b'a'; LINE_LIMIT]).is_ok());
        assert!(matches!(bound.take(b"a"), Err(ExecFailure::LineTooLong)));
        let mut bound = LineBound::new(5_000);
        let mut line = vec![b'a'; LINE_LIMIT - 1];
        line.push(b'\n');
        assert!(bound.take(&line).is_ok());
    }

    /// Found by the `node_list` fuzz target: the bound let one line more through, for a
    /// header, but no header is a node line (`parse_nodes` refuses every one), so a list of
    /// `max_nodes + 1` nodes was read whole.
    #[test]
    fn no_more_lines_than_the_bound_of_nodes_are_read() {
        let mut bound = LineBound::new(2);
        assert!(bound.take(b"node/a\nnode/b\n").is_ok());
        assert!(matches!(
            bound.take(b"node/c\n"),
            Err(ExecFailure::TooManyLines)
        ));
        let mut bound = LineBound::new(0);
        assert!(bound.take(b"").is_ok());
        assert!(matches!(bound.take(b"n"), Err(ExecFailure::TooManyLines)));
    }

    #[test]
    fn remote_command_rounds_the_bound_up_to_whole_seconds() {
        let cmd = "sudo -n /opt/bin/kubectl get nodes -o name";
        assert_eq!(
            remote_command(cmd, Duration::from_secs(20)),
            "timeout 20s sudo -n /opt/bin/kubectl get nodes -o name"
        );
        assert_eq!(
            remote_command(cmd, Duration::from_millis(20_001)),
            "timeout 21s sudo -n /opt/bin/kubectl get nodes -o name"
        );
        assert_eq!(
            remote_command(cmd, Duration::from_millis(300)),
            "timeout 1s sudo -n /opt/bin/kubectl get nodes -o name"
        );
        assert_eq!(
            remote_command(&format!("  {cmd}\n"), Duration::from_secs(5)),
            "timeout 5s sudo -n /opt/bin/kubectl get nodes -o name"
        );
    }

    #[test]
    fn last_stderr_line_skips_blank_lines_and_is_cut() {
        assert_eq!(last_line(b""), "");
        assert_eq!(last_line(b"\n \n"), "");
        let sudo = b"sudo: a terminal is required to read the password\n  sudo: a password is required\r\n\n";
        assert_eq!(last_line(sudo), "sudo: a password is required");
        assert_eq!(last_line("x".repeat(300).as_bytes()), "x".repeat(200));
    }

    #[test]
    fn signal_labels() {
        assert_eq!(signal_label(&Sig::TERM), "TERM");
        assert_eq!(signal_label(&Sig::Custom("XCPU".into())), "XCPU");
    }
}
