//! cks-drift: reports drift between a CloudStack Kubernetes Service cluster's VM map, its VMs
//! in CloudStack and its Kubernetes nodes. Detection only: it never changes anything.
//!
//! The folders follow the pipeline, and each imports only from the ones before it:
//! `base` and `config` (leaves and settings) -> the sources (`cloudstack`, `remote` for the
//! nodes over SSH, `database`) -> `snapshot` (three views of a cluster, as plain data) -> `cks`
//! (CKS's own rules) -> `inventory` (what a cycle reads, and the snapshots built from it) ->
//! `diff` (the pure comparison) -> `state` (ignore rules, the dedupe step, the state file) ->
//! `notify` (delivery) -> `engine` (one tick) -> `daemon` (the service, its endpoint, metrics
//! and logging) -> `front` (what people type and read).
#![forbid(unsafe_code)]
// A function reads as a short list of named phases: see clippy.toml for the bound.
#![warn(clippy::too_many_lines)]

pub mod base;
pub mod cks;
pub mod cloudstack;
pub mod config;
pub mod daemon;
pub mod database;
pub mod diff;
pub mod engine;
pub mod front;
pub mod inventory;
pub mod notify;
pub mod remote;
pub mod snapshot;
pub mod state;
