//! cks-drift: reports drift between a CloudStack Kubernetes Service cluster's VM map, its VMs
//! in CloudStack and its Kubernetes nodes. Detection only: it never changes anything.
//!
//! The pipeline: `config` -> sources (`cloudstack`, `remote`) -> `snapshot` -> `diff` (pure)
//! -> `report`, driven by `cycle`.
#![forbid(unsafe_code)]

pub mod cloudstack;
pub mod config;
pub mod sim;
pub mod snapshot;
pub mod time;
