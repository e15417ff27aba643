//! Integration tests: the fake CloudStack, a real OpenSSH sshd on loopback and the real
//! kubectl against a small fake Kubernetes API.

mod alertmanager;
mod blind;
mod campaign;
mod check;
mod cli;
mod container;
mod daemon;
mod database;
mod dedupe;
mod explain;
mod fairness;
mod fake_cloudstack;
mod galera;
mod hardening;
mod identity;
mod ignore;
mod prometheus;
mod refusals;
mod releases;
mod server_check;
mod ssh;
mod status_page;
mod storm;
mod support;
mod tenant;
mod tls;
