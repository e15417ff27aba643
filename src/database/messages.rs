//! The database's log lines and problem texts, as an operator reads them: the lock and what an
//! instance does without it, a column that a grant hides, a TLS connection that failed.
//! Wording only; when each is shown belongs to `lock`, `schema` and `tls`.

/// The lock could not be asked for.
pub const LOCK_UNASKED: &str =
    "cannot ask for the lock; this instance stands by until the database answers";

/// Why a column is hidden: a column-level grant on its table.
pub const COLUMN_GRANT: &str = "its grant on the table names columns, and not this one";
/// Why a column is hidden: no grant on its table in `SHOW GRANTS`.
pub const NO_GRANT_SEEN: &str =
    "no line of SHOW GRANTS gives it SELECT on the whole table (a role's grant is not followed)";

/// What to do about a server that offers no TLS.
pub const TLS_NOT_OFFERED: &str = "MariaDB ships with TLS off (SHOW VARIABLES LIKE 'have_ssl' \
     says DISABLED): give the server ssl_cert and ssl_key (see docs/database.md, TLS to the \
     database), or set database.tls = false if the network to the database is trusted (TLS is on \
     by default for a host other than loopback)";

/// What to do about a certificate without subjectAltName.
pub const TLS_NO_NAMES: &str = "MySQL's auto-generated certificates are like this. Give the \
     server a certificate with subjectAltName DNS:<its host name> (or IP:<its address>), signed \
     by the CA in database.ca_file, or set database.tls = false if the network to the database \
     is trusted";

/// What to do about a certificate from an unknown CA.
pub const TLS_UNKNOWN_ISSUER: &str = "set database.ca_file to the PEM of the CA that signed \
     the server's certificate (MySQL's auto-generated one is ca.pem in its data directory), or \
     database.tls = false if the network to the database is trusted";

/// What to do about another refused certificate.
pub const TLS_OTHER: &str = "renew or replace the server's certificate, or set database.tls = \
     false if the network to the database is trusted";

/// What to do about a certificate for other names: connect by one of them, or check against one.
pub fn tls_other_names(presented: &[String]) -> String {
    // An IP address in the URL is the usual case; the certificate's first DNS name is the
    // setting to suggest.
    match presented
        .iter()
        .find(|n| n.parse::<std::net::IpAddr>().is_err())
    {
        Some(name) => format!(
            "write that host in database.url, or set database.tls_server_name = \"{name}\" \
             (the certificate is checked against it; the connection still goes to the URL's host)"
        ),
        None => "write one of those addresses in database.url, or set \
                 database.tls_server_name to one of them"
            .to_string(),
    }
}
