//! The command line: `check` (one cycle), and the other subcommands. Thin: each subcommand
//! loads the config, builds the sources and calls the same cycle.

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};

use crate::cloudstack::client::Client;
use crate::config::Config;
use crate::cycle::{CycleSettings, run_cycle};
use crate::diff::Policy;
use crate::remote::ssh::SshNodeLister;
use crate::report::{self, exit};
use crate::time::Timestamp;

#[derive(Debug, Parser)]
#[command(
    name = "cks-drift",
    version,
    about = "Reports drift between CloudStack Kubernetes Service VM maps, VMs and Kubernetes nodes"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one check cycle and print the report on stdout.
    Check {
        /// The config file.
        #[arg(short, long, default_value = "/etc/cks-drift/cks-drift.toml")]
        config: PathBuf,
        /// Report format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Send no notification and neither create nor lock the state file.
        #[arg(long)]
        no_notify: bool,
    },
}

/// Runs the command line and returns the process exit code.
pub async fn main(cli: Cli) -> i32 {
    match cli.command {
        Command::Check {
            config,
            format,
            no_notify,
        } => check(&config, format, no_notify).await,
    }
}

fn fail(message: impl std::fmt::Display) -> i32 {
    eprintln!("cks-drift: {message}");
    exit::CANNOT_RUN
}

async fn check(path: &std::path::Path, format: Format, _no_notify: bool) -> i32 {
    let config = match Config::load(path) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    crate::logging::init(&config.log.level, config.log.format);
    if config.cloudstack.insecure {
        tracing::warn!(url = %config.cloudstack.url, "TLS certificate verification is off (cloudstack.insecure = true)");
    }
    let api = match Client::new(&config.cloudstack) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let lister = match SshNodeLister::new(&config.ssh) {
        Ok(l) => Arc::new(l),
        Err(e) => return fail(e),
    };
    let settings = CycleSettings {
        policy: Policy {
            grace_period: config.check.grace_period,
        },
        concurrency: config.check.concurrency,
        default_user: config.ssh.user.clone(),
    };
    let report = match run_cycle(
        &api,
        lister,
        &settings,
        &Default::default(),
        Timestamp::now(),
    )
    .await
    {
        Ok(r) => r,
        Err(e) => return fail(error_chain(&e)),
    };
    let text = match format {
        Format::Text => report::to_text(&report, None),
        Format::Json => report::to_json(&report, None),
    };
    print!("{text}");
    report::exit_code(&report)
}

/// An error with its causes, on one line: `a: b: c`.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}
