//! The `cks-drift` binary: parses the command line and hands over to `cks_drift::front::cli`.
#![forbid(unsafe_code)]

use cks_drift::daemon::listen::Passed;
use cks_drift::front::cli::{Cli, Command};
use clap::Parser;

fn main() {
    let cli = Cli::parse();
    // Taking systemd's socket unsets LISTEN_PID and LISTEN_FDS; the environment is changed
    // here, while the process has one thread, as changing it races with threads reading it.
    let passed = match cli.command {
        Command::Run { .. } => Passed::take(),
        _ => Passed::Nothing,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("cks-drift: cannot start the async runtime: {e}");
            std::process::exit(2);
        }
    };
    let code = runtime.block_on(cks_drift::front::cli::main(cli, passed));
    std::process::exit(code);
}
