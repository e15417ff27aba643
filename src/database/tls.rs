//! Why a TLS connection to the database failed, read from the driver's error: the server
//! offers no TLS, its certificate names no host or another one, or its issuer is unknown. Each
//! with the setting that fixes it; the text is made where the connection error is shown.
//!
//! mysql_async 0.37 with rustls 0.23 hands a refused certificate back as an `io::Error`
//! (`InvalidData`) wrapping the `rustls::Error` (tokio-rustls does the wrapping); a server
//! without TLS is `DriverError::NoClientSslFlagFromServer`. rustls checks the chain before the
//! name, and reads only the subjectAltName, never the subject's CN.

use std::path::PathBuf;

use rustls::{CertificateError, Error as TlsError};

use super::messages;

/// Why the TLS connection failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsFailure {
    /// The server does not offer TLS (MariaDB's default, `have_ssl` DISABLED).
    #[error("the server offers no TLS; {}", messages::TLS_NOT_OFFERED)]
    NotOffered,
    /// The certificate has no subjectAltName (MySQL's auto-generated certificates).
    #[error(
        "the server's certificate names no host (it has no subjectAltName, and its subject's \
         CN is not read); {}",
        messages::TLS_NO_NAMES
    )]
    NoNames,
    /// The certificate names other hosts than the one checked.
    #[error(
        "the server's certificate is for {} and not for {expected}; {}",
        .presented.join(", "),
        messages::tls_other_names(.presented)
    )]
    OtherNames {
        expected: String,
        presented: Vec<String>,
    },
    /// The certificate's issuer is not a CA cks-drift trusts.
    #[error(
        "the server's certificate is signed by a CA that {}; {}",
        .ca_file.as_ref().map_or_else(
            || "cks-drift does not know".to_string(),
            |p| format!("is not in database.ca_file ({})", p.display()),
        ),
        messages::TLS_UNKNOWN_ISSUER
    )]
    UnknownIssuer { ca_file: Option<PathBuf> },
    /// Another certificate problem (expired, not yet valid, a bad signature...).
    #[error(
        "the server's certificate was refused ({reason}); {}",
        messages::TLS_OTHER
    )]
    Refused { reason: String },
}

/// The TLS failure `e` is, if it is one. `expected` is the name the certificate was checked
/// against (`database.tls_server_name`, else the URL's host).
pub fn classify(
    e: &mysql_async::Error,
    expected: &str,
    ca_file: Option<&PathBuf>,
) -> Option<TlsFailure> {
    let io = match e {
        mysql_async::Error::Driver(mysql_async::DriverError::NoClientSslFlagFromServer) => {
            return Some(TlsFailure::NotOffered);
        }
        mysql_async::Error::Io(mysql_async::IoError::Io(io)) => io,
        _ => return None,
    };
    let TlsError::InvalidCertificate(cert) = io.get_ref()?.downcast_ref::<TlsError>()? else {
        return None;
    };
    Some(certificate(cert, expected, ca_file))
}

fn certificate(cert: &CertificateError, expected: &str, ca_file: Option<&PathBuf>) -> TlsFailure {
    match cert {
        CertificateError::UnknownIssuer => TlsFailure::UnknownIssuer {
            ca_file: ca_file.cloned(),
        },
        CertificateError::NotValidForNameContext { presented, .. } if presented.is_empty() => {
            TlsFailure::NoNames
        }
        CertificateError::NotValidForNameContext { presented, .. } => TlsFailure::OtherNames {
            expected: expected.to_string(),
            // The names come from the server's certificate: bounded and escaped.
            presented: presented.iter().take(10).map(|n| plain_name(n)).collect(),
        },
        other => TlsFailure::Refused {
            reason: crate::base::untrusted::shown(&other.to_string(), 200),
        },
    }
}

/// `DnsName("db.example.com")` and `IpAddress(10.0.0.5)`, as rustls lists a certificate's
/// names, as the names alone.
fn plain_name(presented: &str) -> String {
    let name = presented
        .strip_prefix("DnsName(\"")
        .and_then(|n| n.strip_suffix("\")"))
        .or_else(|| {
            presented
                .strip_prefix("IpAddress(")
                .and_then(|n| n.strip_suffix(')'))
        })
        .unwrap_or(presented);
    crate::base::untrusted::shown(name, 100)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::ServerName;

    fn io(cert: CertificateError) -> mysql_async::Error {
        let io = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            TlsError::InvalidCertificate(cert),
        );
        mysql_async::Error::Io(mysql_async::IoError::Io(io))
    }

    fn context(presented: &[&str]) -> CertificateError {
        CertificateError::NotValidForNameContext {
            expected: ServerName::try_from("127.0.0.1").unwrap(),
            presented: presented.iter().map(|p| p.to_string()).collect(),
        }
    }

    #[test]
    fn each_failure_is_told_apart() {
        let ca = PathBuf::from("/etc/cks-drift/db-ca.pem");
        let no_tls =
            mysql_async::Error::Driver(mysql_async::DriverError::NoClientSslFlagFromServer);
        assert_eq!(classify(&no_tls, "db", None), Some(TlsFailure::NotOffered));
        assert_eq!(
            classify(&io(context(&[])), "127.0.0.1", Some(&ca)),
            Some(TlsFailure::NoNames)
        );
        assert_eq!(
            classify(
                &io(context(&[
                    "DnsName(\"db.example.test\")",
                    "IpAddress(10.0.0.5)"
                ])),
                "127.0.0.1",
                Some(&ca)
            ),
            Some(TlsFailure::OtherNames {
                expected: "127.0.0.1".into(),
                presented: vec!["db.example.test".into(), "10.0.0.5".into()],
            })
        );
        assert_eq!(
            classify(&io(CertificateError::UnknownIssuer), "db", Some(&ca)),
            Some(TlsFailure::UnknownIssuer {
                ca_file: Some(ca.clone())
            })
        );
        let refused = classify(&io(CertificateError::Expired), "db", None).unwrap();
        assert!(matches!(refused, TlsFailure::Refused { .. }), "{refused:?}");
        let refused_conn = mysql_async::Error::Io(mysql_async::IoError::Io(
            std::io::ErrorKind::ConnectionRefused.into(),
        ));
        assert_eq!(classify(&refused_conn, "db", None), None);
    }

    #[test]
    fn the_fix_names_a_setting() {
        let other = TlsFailure::OtherNames {
            expected: "127.0.0.1".into(),
            presented: vec!["10.0.0.5".into(), "db.example.test".into()],
        }
        .to_string();
        assert!(
            other.contains("database.tls_server_name = \"db.example.test\""),
            "{other}"
        );
        assert!(
            TlsFailure::NotOffered
                .to_string()
                .contains("database.tls = false")
        );
        let unknown = TlsFailure::UnknownIssuer { ca_file: None }.to_string();
        assert!(unknown.contains("set database.ca_file"), "{unknown}");
    }
}
