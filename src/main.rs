//! The `cks-drift` binary: parses the command line and hands over to `cks_drift::front::cli`.
#![forbid(unsafe_code)]

use clap::Parser;

#[tokio::main]
async fn main() {
    let cli = cks_drift::front::cli::Cli::parse();
    let code = cks_drift::front::cli::main(cli).await;
    std::process::exit(code);
}
