//! Test doubles that behave like the real things, all on 127.0.0.1. The fake CloudStack API
//! server is the simulator crate's (`cks_drift_sim::FakeCloudStack`).
#![allow(dead_code)]
pub mod alertmanager;
pub mod kube_api;
pub mod pki;
pub mod sshd;

pub mod cloud;
