//! cks-drift: reports drift between a CloudStack Kubernetes Service cluster's VM map, its VMs
//! in CloudStack and its Kubernetes nodes. Detection only: it never changes anything.
//!
//! The pipeline: `config` -> sources (`cloudstack`, `remote`) -> `snapshot` -> `diff` (pure)
//! -> `state` (dedupe step + file) -> `notify`, driven by `cycle` and `engine`; `report` and
//! `cli` face the user.
#![forbid(unsafe_code)]

pub mod assemble;
pub mod assets;
pub mod cks;
pub mod cli;
pub mod cloudstack;
pub mod config;
pub mod cycle;
pub mod daemon;
pub mod database;
pub mod demo;
pub mod diagnose;
pub mod diff;
pub mod engine;
pub mod error_chain;
pub mod explain;
pub mod identity;
pub mod ignore;
pub mod inventory;
pub mod logging;
pub mod metrics;
pub mod naming;
pub mod notify;
pub mod remote;
pub mod report;
pub mod secret_file;
pub mod snapshot;
pub mod state;
pub mod takeover;
pub mod time;
pub mod untrusted;
pub mod validate;
pub mod wording;
