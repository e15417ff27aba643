//! Integration tests: the fake CloudStack, a real OpenSSH sshd on loopback and the real
//! kubectl against a small fake Kubernetes API.

mod cli;
mod fake_cloudstack;
mod ssh;
mod support;
