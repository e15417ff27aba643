//! Test doubles that behave like the real things, all on 127.0.0.1. The fake CloudStack API
//! server is the simulator's (`cks_drift::sim::FakeCloudStack`).
#![allow(dead_code)]
pub mod kube_api;
pub mod sshd;

pub mod cloud;
