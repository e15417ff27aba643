//! The control node's host key, checked during key exchange against `known_hosts` under
//! `ssh.host_key_policy`, and the channels a control node may try to open towards us (all
//! refused). Reading and writing the file is `remote::known_hosts`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex as StdMutex, PoisonError};

use russh::client;
use russh::keys::{PublicKey, PublicKeyOrCertificate};
use tracing::{debug, info, warn};

use crate::config::HostKeyPolicy;
use crate::remote::NodeListError;
use crate::remote::known_hosts::{self, HostKeyMatch};
use crate::remote::messages::HOST_KEY_NOT_MARKED;

/// Checks the server's host key during key exchange. russh turns a refusal into a bare
/// `UnknownKey`, so the reason is left in `refusal` for the caller.
pub(super) struct HostKeyCheck {
    /// The cluster, as `known_hosts` spells its id.
    pub(super) cluster: String,
    pub(super) host: String,
    pub(super) port: u16,
    pub(super) known_hosts: PathBuf,
    pub(super) policy: HostKeyPolicy,
    pub(super) lock: Arc<tokio::sync::Mutex<()>>,
    pub(super) refusal: Arc<StdMutex<Option<NodeListError>>>,
}

impl client::Handler for HostKeyCheck {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        server_key: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        match self.verify(server_key).await {
            Ok(()) => Ok(true),
            Err(refusal) => {
                debug!(error = %refusal, "host key refused");
                *self.refusal.lock().unwrap_or_else(PoisonError::into_inner) = Some(refusal);
                Ok(false)
            }
        }
    }

    // A control node is the tenant's machine: every channel it tries to open towards us (a
    // forwarded port, an agent, X11, a session) is refused. Dropping `reply` rejects it.

    async fn server_channel_open_forwarded_tcpip(
        &mut self,
        _: russh::Channel<client::Msg>,
        _: &str,
        _: u32,
        _: &str,
        _: u32,
        _reply: client::ChannelOpenHandle,
        _: &mut client::Session,
    ) -> Result<(), Self::Error> {
        refused_channel("forwarded-tcpip");
        Ok(())
    }

    async fn server_channel_open_forwarded_streamlocal(
        &mut self,
        _: russh::Channel<client::Msg>,
        _: &str,
        _reply: client::ChannelOpenHandle,
        _: &mut client::Session,
    ) -> Result<(), Self::Error> {
        refused_channel("forwarded-streamlocal");
        Ok(())
    }

    async fn server_channel_open_agent_forward(
        &mut self,
        _: russh::Channel<client::Msg>,
        _reply: client::ChannelOpenHandle,
        _: &mut client::Session,
    ) -> Result<(), Self::Error> {
        refused_channel("agent forwarding");
        Ok(())
    }

    async fn server_channel_open_session(
        &mut self,
        _: russh::Channel<client::Msg>,
        _reply: client::ChannelOpenHandle,
        _: &mut client::Session,
    ) -> Result<(), Self::Error> {
        refused_channel("session");
        Ok(())
    }

    async fn server_channel_open_direct_tcpip(
        &mut self,
        _: russh::Channel<client::Msg>,
        _: &str,
        _: u32,
        _: &str,
        _: u32,
        _reply: client::ChannelOpenHandle,
        _: &mut client::Session,
    ) -> Result<(), Self::Error> {
        refused_channel("direct-tcpip");
        Ok(())
    }

    async fn server_channel_open_direct_streamlocal(
        &mut self,
        _: russh::Channel<client::Msg>,
        _: &str,
        _reply: client::ChannelOpenHandle,
        _: &mut client::Session,
    ) -> Result<(), Self::Error> {
        refused_channel("direct-streamlocal");
        Ok(())
    }

    async fn server_channel_open_x11(
        &mut self,
        _: russh::Channel<client::Msg>,
        _: &str,
        _: u32,
        _reply: client::ChannelOpenHandle,
        _: &mut client::Session,
    ) -> Result<(), Self::Error> {
        refused_channel("x11");
        Ok(())
    }
}

fn refused_channel(kind: &'static str) {
    info!(channel = kind, "the control node opened a channel; refused");
}

impl HostKeyCheck {
    async fn verify(&self, server_key: &PublicKeyOrCertificate) -> Result<(), NodeListError> {
        if self.policy == HostKeyPolicy::Off {
            debug!("host key not checked (ssh.host_key_policy = off)");
            return Ok(());
        }
        let key = match server_key {
            PublicKeyOrCertificate::PublicKey { key, .. } => key,
            PublicKeyOrCertificate::Certificate(_) => {
                return Err(NodeListError::HostCertificate {
                    host: self.host.clone(),
                    port: self.port,
                });
            }
        };
        let _guard = self.lock.lock().await;
        let (text, found) = self.lookup(key)?;
        match found {
            HostKeyMatch::Known => {
                debug!(algorithm = key.algorithm().as_str(), "host key known");
                Ok(())
            }
            // `strict` leaves the operator's file as written: its entries stand for the
            // address, whichever cluster is there.
            HostKeyMatch::Unclaimed { .. } if self.policy == HostKeyPolicy::Strict => {
                debug!(algorithm = key.algorithm().as_str(), "host key known");
                Ok(())
            }
            HostKeyMatch::Unclaimed { lines } => {
                // The key matches an entry for the address: it is trusted whether or not the
                // entry can be marked as the cluster's (a folder the service may not write).
                let claimed = known_hosts::claim(&text, &lines, &self.cluster);
                match known_hosts::replace(&self.known_hosts, &claimed) {
                    Ok(()) => info!(
                        known_hosts = %self.known_hosts.display(),
                        entries = lines.len(),
                        "the host key recorded for the address is now the cluster's"
                    ),
                    Err(e) => warn!(
                        known_hosts = %self.known_hosts.display(),
                        error = %crate::base::error_chain::error_chain(&e),
                        "{HOST_KEY_NOT_MARKED}"
                    ),
                }
                Ok(())
            }
            HostKeyMatch::Changed { line, cluster } => Err(NodeListError::HostKeyChanged {
                host: self.host.clone(),
                port: self.port,
                presented: key.algorithm().as_str().to_string(),
                known_hosts: self.known_hosts.clone(),
                line,
                cluster,
            }),
            HostKeyMatch::New if self.policy == HostKeyPolicy::Strict => {
                Err(NodeListError::HostKeyUnknown {
                    host: self.host.clone(),
                    port: self.port,
                    known_hosts: self.known_hosts.clone(),
                })
            }
            HostKeyMatch::New => {
                let line = known_hosts::learned_line(&self.host, self.port, key, &self.cluster)
                    .map_err(|e| self.file_error(e))?;
                known_hosts::append(&self.known_hosts, &line)
                    .map_err(|e| self.file_error(e.into()))?;
                info!(
                    known_hosts = %self.known_hosts.display(),
                    algorithm = key.algorithm().as_str(),
                    "learned the host key of a new cluster"
                );
                Ok(())
            }
        }
    }

    /// The file's text and what it says of `key` for this cluster.
    fn lookup(&self, key: &PublicKey) -> Result<(String, HostKeyMatch), NodeListError> {
        // A symlink is refused, as it is when writing.
        let text = match known_hosts::read_no_follow(&self.known_hosts) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok((String::new(), HostKeyMatch::New));
            }
            Err(e) => return Err(self.file_error(e.into())),
        };
        let recorded = known_hosts::entries_for(&text, &self.host, self.port)
            .map_err(|e| self.file_error(e))?;
        let found = known_hosts::match_host_key(&recorded, &self.cluster, key);
        Ok((text, found))
    }

    fn file_error(&self, source: russh::keys::Error) -> NodeListError {
        NodeListError::KnownHosts {
            path: self.known_hosts.clone(),
            source,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    // Public host keys only (from ssh-keygen); no secrets here.
    pub(crate) const ED25519_A: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGxBFHSA4HziROuowlujBbjRpX7LFBT5aZLdp09KGpFt";
    pub(crate) const ED25519_B: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEOEBH6TGyDlRlFiBgvt8fSNDuhTP0uNeC2yQfxVNruH";

    fn public(line: &str) -> PublicKey {
        PublicKey::from_openssh(line).unwrap()
    }

    #[test]
    fn lookup_reports_the_editor_line_of_a_changed_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("known_hosts");
        std::fs::write(
            &path,
            format!(
                "# rebuilt nodes go here\n10.0.0.6 {ED25519_A}\n\
                 [10.0.0.5]:2222 {ED25519_B} cks-drift-cluster=c-1\n"
            ),
        )
        .unwrap();
        let check = HostKeyCheck {
            cluster: "c-1".into(),
            host: "10.0.0.5".into(),
            port: 2222,
            known_hosts: path.clone(),
            policy: HostKeyPolicy::Strict,
            lock: Arc::default(),
            refusal: Arc::default(),
        };
        assert_eq!(
            check.lookup(&public(ED25519_A)).unwrap().1,
            HostKeyMatch::Changed {
                line: 3,
                cluster: Some("c-1".into())
            }
        );
        assert_eq!(
            check.lookup(&public(ED25519_B)).unwrap().1,
            HostKeyMatch::Known
        );
    }
}
