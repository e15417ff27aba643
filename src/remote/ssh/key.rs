//! The private key of `ssh.private_key`: loaded once, unencrypted, with an error that names
//! the setting and says what to give instead.

use std::path::{Path, PathBuf};

use russh::keys::PrivateKey;

/// The private key in `ssh.private_key` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error(
        "ssh.private_key: {} does not exist; point ssh.private_key at the management server's \
         key or at the private half of the clusters' key pair",
        path.display()
    )]
    Missing { path: PathBuf },
    #[error("ssh.private_key: cannot read {}: {why}", path.display())]
    Denied { path: PathBuf, why: String },
    #[error("ssh.private_key: cannot read {}", path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "ssh.private_key: {} is a public key; give its private half{}",
        path.display(),
        private_half(path)
    )]
    PublicKey { path: PathBuf },
    #[error(
        "ssh.private_key: {} is not a private key (expected PEM RSA, OpenSSH RSA or OpenSSH \
         ed25519)",
        path.display()
    )]
    NotAKey {
        path: PathBuf,
        #[source]
        source: russh::keys::Error,
    },
    #[error(
        "ssh.private_key: {} is encrypted and passphrases are not supported; \
         give an unencrypted key (ssh-keygen -p -N '' -f <copy of the key>)",
        path.display()
    )]
    Encrypted { path: PathBuf },
}

/// Loads an unencrypted private key as [`SshNodeLister::new`](super::SshNodeLister::new) does, to
/// check that it is usable without building a lister.
pub fn load_private_key(path: &Path) -> Result<PrivateKey, KeyError> {
    let bytes = std::fs::read(path).map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            KeyError::Missing {
                path: path.to_path_buf(),
            }
        } else if source.kind() == std::io::ErrorKind::PermissionDenied {
            KeyError::Denied {
                path: path.to_path_buf(),
                why: crate::config::secret_file::permission_denied(path),
            }
        } else {
            KeyError::Unreadable {
                path: path.to_path_buf(),
                source,
            }
        }
    })?;
    let text = String::from_utf8_lossy(&bytes);
    if is_public_key(&text) {
        return Err(KeyError::PublicKey {
            path: path.to_path_buf(),
        });
    }
    russh::keys::decode_secret_key(&text, None).map_err(|source| {
        // PEM with a DEK-Info other than AES-128-CBC, for one, fails as a parse error.
        let marked_encrypted =
            text.contains("Proc-Type: 4,ENCRYPTED") || text.contains("BEGIN ENCRYPTED PRIVATE KEY");
        if matches!(source, russh::keys::Error::KeyIsEncrypted) || marked_encrypted {
            KeyError::Encrypted {
                path: path.to_path_buf(),
            }
        } else {
            KeyError::NotAKey {
                path: path.to_path_buf(),
                source,
            }
        }
    })
}

/// A public key in any of the forms `ssh-keygen` writes or reads: the one-line OpenSSH form
/// (`ssh-rsa AAAA… comment`, what a `.pub` file holds), RFC 4716 or PEM.
fn is_public_key(text: &str) -> bool {
    let text = text.trim_start();
    ["ssh-", "ecdsa-sha2-", "sk-ssh-", "sk-ecdsa-"]
        .iter()
        .any(|p| text.starts_with(p))
        || [
            "---- BEGIN SSH2 PUBLIC KEY",
            "-----BEGIN PUBLIC KEY",
            "-----BEGIN RSA PUBLIC KEY",
        ]
        .iter()
        .any(|p| text.starts_with(p))
}

/// Where the private half of a `.pub` file usually is.
fn private_half(path: &Path) -> String {
    match path.to_str().and_then(|p| p.strip_suffix(".pub")) {
        Some(private) if !private.is_empty() => format!(", usually {private}"),
        _ => String::new(),
    }
}
