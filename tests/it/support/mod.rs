//! Test doubles that behave like the real things, all on 127.0.0.1.
#![allow(dead_code)]
pub mod kube_api;
pub mod sshd;

pub mod cloud;
pub mod fake_cloudstack;
