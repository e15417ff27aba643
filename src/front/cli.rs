//! The command line: `check` (one cycle), and the other subcommands. Thin: each subcommand
//! loads the config, builds the sources and calls the same cycle.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::base::error_chain::error_chain;
use crate::base::time::Timestamp;
use crate::config::Config;
use crate::database::Database;
use crate::database::lock::Lock;
use crate::engine::{Engine, Store};
use crate::front::report::{self, exit};

/// The version and the git commit the binary was built from (see `build.rs`).
pub const VERSION: &str = env!("CKS_DRIFT_VERSION");

#[derive(Debug, Parser)]
#[command(
    name = "cks-drift",
    version = VERSION,
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

/// `run`'s help and man page: a Prometheus scrape config for the endpoint on loopback, and
/// for one opened beyond it with TLS and basic authentication.
const SCRAPE_CONFIGS: &str = "Prometheus scrape configs (prometheus.yml):

On loopback (the default http.listen):

  scrape_configs:
    - job_name: cks-drift
      static_configs:
        - targets: ['127.0.0.1:9712']

Beyond loopback, with http.tls_cert_file, http.tls_key_file and http.basic_auth_users:

  scrape_configs:
    - job_name: cks-drift
      scheme: https
      tls_config:
        ca_file: /etc/prometheus/cks-drift-ca.pem
      basic_auth:
        username: prometheus
        password_file: /etc/prometheus/cks-drift.password
      static_configs:
        - targets: ['cks-drift.example.com:9712']";

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
    /// Run as a service: a check every check.interval, /metrics, /healthz, a status page (/)
    /// and its API (/api/v1/) on the socket systemd passes, else on http.listen; reload on
    /// SIGHUP, stop on SIGTERM or SIGINT.
    #[command(after_long_help = SCRAPE_CONFIGS)]
    Run {
        /// The config file.
        #[arg(short, long, default_value = "/etc/cks-drift/cks-drift.toml")]
        config: PathBuf,
    },
    /// Show a check at work: three cycles against a built-in simulated CloudStack, with no
    /// setup, no network and no file outside a temporary folder.
    Demo {
        /// Serve the simulated cloud on loopback instead (its API, and its control nodes over
        /// SSH), with a config to try `check`, `explain`, `validate-config --connect` and `run`
        /// against; until Ctrl-C.
        #[arg(long)]
        serve: bool,
    },
    /// One cluster's map rows, VMs and Kubernetes nodes side by side: which rule made each
    /// finding or why a thing is not one, and what has been reported. Sends nothing.
    Explain {
        /// The cluster, by name or id.
        cluster: String,
        /// The config file.
        #[arg(short, long, default_value = "/etc/cks-drift/cks-drift.toml")]
        config: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Check a config file: every problem at once, each with its key and a fix.
    ValidateConfig {
        /// The config file.
        #[arg(short, long, default_value = "/etc/cks-drift/cks-drift.toml")]
        config: PathBuf,
        /// Also call the API once and run the node listing on one cluster's control node.
        #[arg(long)]
        connect: bool,
    },
    /// Write the man pages and the bash, zsh and fish completions into a folder; used when
    /// the packages are built.
    #[command(hide = true)]
    GenerateAssets {
        /// The folder to write into (created if missing).
        dir: PathBuf,
    },
}

/// Runs the command line and returns the process exit code. `passed` is the socket systemd
/// passed, taken before the runtime's threads started; only `run` serves it.
pub async fn main(cli: Cli, passed: crate::daemon::listen::Passed) -> i32 {
    match cli.command {
        Command::Check {
            config,
            format,
            no_notify,
        } => check(&config, format, no_notify).await,
        Command::Run { config } => {
            // The one shutdown token of the service; SIGTERM and SIGINT cancel it.
            let shutdown = tokio_util::sync::CancellationToken::new();
            match crate::daemon::run(&config, passed, shutdown).await {
                Ok(()) => 0,
                Err(e) => fail(error_chain(&e)),
            }
        }
        Command::Demo { serve } => demo(serve).await,
        Command::ValidateConfig { config, connect } => validate_config(&config, connect).await,
        Command::Explain {
            cluster,
            config,
            format,
        } => explain(&config, &cluster, format).await,
        Command::GenerateAssets { dir } => {
            match crate::front::assets::write(&dir, <Cli as clap::CommandFactory>::command()) {
                Ok(files) => {
                    for f in files {
                        println!("{}", f.display());
                    }
                    0
                }
                Err(e) => fail(error_chain(&e)),
            }
        }
    }
}

/// Logs only when `RUST_LOG` asks: these commands print their own results.
fn quiet_logging() {
    if std::env::var_os("RUST_LOG").is_some() {
        crate::daemon::logging::init("info", crate::config::LogFormat::Text);
    }
}

async fn demo(serve: bool) -> i32 {
    quiet_logging();
    let outcome = if serve {
        crate::front::demo::serve(&mut std::io::stdout())
            .await
            .map_err(|e| error_chain(&e))
    } else {
        crate::front::demo::run(&mut std::io::stdout())
            .await
            .map_err(|e| error_chain(&e))
    };
    match outcome {
        Ok(()) => 0,
        Err(e) => fail(e),
    }
}

async fn validate_config(path: &std::path::Path, connect: bool) -> i32 {
    quiet_logging();
    crate::front::validate::run(path, connect, &mut std::io::stdout()).await
}

async fn explain(path: &std::path::Path, cluster: &str, format: Format) -> i32 {
    quiet_logging();
    let config = match crate::config::Config::load(path) {
        Ok(c) => c,
        Err(e) => return fail(error_chain(&e)),
    };
    crate::front::explain::run(
        &config,
        cluster,
        format == Format::Json,
        &mut std::io::stdout(),
    )
    .await
}

fn fail(message: impl std::fmt::Display) -> i32 {
    eprintln!("cks-drift: {message}");
    exit::CANNOT_RUN
}

async fn check(path: &std::path::Path, format: Format, no_notify: bool) -> i32 {
    let config = match Config::load(path) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    crate::daemon::logging::init(&config.log.level, config.log.format);
    // The state is locked before anything else, so a second instance stops here.
    let store = if no_notify {
        None
    } else {
        match Store::open(&config) {
            Ok(s) => Some(s),
            Err(e) => return fail(error_chain(&e)),
        }
    };
    let mut engine = match Engine::from_config(&config, store) {
        Ok(e) => e,
        Err(e) => return fail(error_chain(&e)),
    };
    // With a database, a check that notifies must be the one active instance: it takes the
    // lock for its one cycle, or stops if a running instance holds it.
    if let (Some(settings), false) = (&config.database, no_notify) {
        let lock = Lock::new(Database::new(settings), settings.lock_interval);
        match lock.try_acquire().await {
            Ok(true) => {
                if let Some(node) = lock.node().filter(|n| n.is_local()) {
                    crate::database::lock::warn_local(&node);
                }
                engine.api.fence_with(lock.clone());
                engine.lock = Some(lock);
            }
            Ok(false) => {
                return fail(
                    "another cks-drift instance holds the lock in the CloudStack database and \
                     notifies; use --no-notify to check without notifying",
                );
            }
            Err(e) => {
                return fail(format!(
                    "{e}; the lock that keeps several instances from notifying twice needs the \
                     database (use --no-notify to check without notifying)"
                ));
            }
        }
    }
    let tick = engine.tick(Timestamp::now()).await;
    if let Some(lock) = &engine.lock {
        lock.release().await;
    }
    let report = match &tick.report {
        Ok(r) => r,
        Err(e) => return fail(crate::engine::diagnose::cycle(e, &config.cloudstack.url)),
    };
    let text = match format {
        Format::Text => {
            let sent = (!no_notify).then_some(&tick.delivered);
            report::to_text(report, tick.new.as_ref()) + "\n" + &report::sent_text(sent)
        }
        Format::Json => report::to_json(report, tick.new.as_ref()),
    };
    print!("{text}");
    if tick.pending > 0 {
        tracing::warn!(
            pending = tick.pending,
            "notifications could not all be delivered; they stay queued in the state file for the \
             next run"
        );
    }
    if let Some(e) = &tick.state_error {
        return fail(error_chain(e));
    }
    report::exit_code(report)
}
