//! One-line explanations of failures for the person at the terminal: which step failed (DNS,
//! TCP connect, TLS, credentials, SSH authentication, host key, the remote command) and what
//! to do about it. Used by `validate-config --connect`, by commands that stop on an error, and
//! by the service's log line of a cycle that failed.
//!
//! The errors themselves, and the decision to retry, belong to their layers; this module only
//! reads them.

use std::error::Error;
use std::fmt;

use crate::base::error_chain::error_chain;
use crate::cloudstack::error::ApiError;
use crate::cloudstack::transport::TransportError;
use crate::engine::cycle::CycleError;
use crate::remote::NodeListError;

/// The step of reaching CloudStack or a control node that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Dns,
    TcpConnect,
    Timeout,
    Tls,
    /// HTTP 401: keys, signature, clock, account or role.
    Credentials,
    /// Something answered, but not as CloudStack's API does.
    Endpoint,
    /// CloudStack answered with one of its own errors.
    Api,
    /// A setting could not be used.
    Config,
    HostKey,
    SshAuth,
    /// The SSH protocol failed after the TCP connection.
    Ssh,
    /// The remote command (kubectl) failed or printed something else than nodes.
    Kubectl,
}

impl Step {
    pub fn label(self) -> &'static str {
        match self {
            Step::Dns => "DNS",
            Step::TcpConnect => "TCP connect",
            Step::Timeout => "timeout",
            Step::Tls => "TLS",
            Step::Credentials => "credentials",
            Step::Endpoint => "endpoint",
            Step::Api => "API",
            Step::Config => "config",
            Step::HostKey => "host key",
            Step::SshAuth => "SSH auth",
            Step::Ssh => "SSH",
            Step::Kubectl => "kubectl",
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// What failed, in one line that ends with what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnosis {
    pub step: Step,
    pub line: String,
}

impl Diagnosis {
    fn new(step: Step, line: impl Into<String>) -> Self {
        Diagnosis {
            step,
            line: line.into(),
        }
    }
}

/// `host` or `host:port` of a URL, for messages.
fn host_port(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(u) => match (u.host_str(), u.port_or_known_default()) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h.to_string(),
            _ => url.to_string(),
        },
        Err(_) => url.to_string(),
    }
}

fn host_of(url: &str) -> String {
    reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_else(|| url.to_string())
}

/// The errors below `e`, outermost first.
fn causes<'a>(e: &'a (dyn Error + 'static)) -> Vec<&'a (dyn Error + 'static)> {
    let mut out = Vec::new();
    let mut next = e.source();
    while let Some(s) = next {
        out.push(s);
        next = s.source();
    }
    out
}

/// The innermost cause's text: the most specific one (`Connection refused (os error 111)`).
fn root_cause(e: &(dyn Error + 'static)) -> String {
    causes(e)
        .last()
        .map(|c| c.to_string())
        .unwrap_or_else(|| e.to_string())
}

/// What a connection failure below an HTTP client was: name resolution, TCP or TLS.
fn connect_step(source: &(dyn Error + 'static), url: &str) -> Step {
    let chain: Vec<&(dyn Error + 'static)> =
        std::iter::once(source).chain(causes(source)).collect();
    if chain.iter().any(|c| {
        let text = c.to_string();
        text.starts_with("dns error") || text.contains("failed to lookup address")
    }) {
        return Step::Dns;
    }
    let tcp = chain.iter().any(|c| {
        c.to_string().starts_with("tcp connect error")
            || c.downcast_ref::<std::io::Error>().is_some_and(|io| {
                use std::io::ErrorKind::*;
                matches!(
                    io.kind(),
                    ConnectionRefused
                        | ConnectionReset
                        | HostUnreachable
                        | NetworkUnreachable
                        | AddrNotAvailable
                        | TimedOut
                )
            })
    });
    if tcp || !url.starts_with("https:") {
        Step::TcpConnect
    } else {
        Step::Tls
    }
}

/// What to do about a refused TLS handshake, by what the TLS library said.
fn tls_advice(cause: &str, url: &str) -> String {
    let host = host_of(url);
    if cause.contains("CaUsedAsEndEntity") {
        // A plain `openssl req -x509` certificate: rustls refuses a CA certificate as the
        // server's own even when it is the pinned CA, so ca_file alone cannot help.
        format!(
            "the management server presents a CA certificate (CA:TRUE) as its own, which is \
             refused even when it is given as cloudstack.ca_file; give the server a certificate \
             signed by a private CA and set cloudstack.ca_file to that CA, or a self-signed \
             certificate with the CA flag off (basicConstraints CA:FALSE) and a subjectAltName \
             for {host}; as a last resort, cloudstack.insecure = true skips verification"
        )
    } else if cause.contains("not valid for") {
        format!(
            "the certificate does not name {host} in its subjectAltName (the common name is not \
             used); issue one with a subjectAltName for {host}, or use the name it holds in \
             cloudstack.url"
        )
    } else {
        "if a private CA signed the management server's certificate, set cloudstack.ca_file to \
         it; if the port speaks plain HTTP, use an http:// URL"
            .to_string()
    }
}

/// Explains a failed API call to the management server at `url`.
pub fn api(e: &ApiError, url: &str) -> Diagnosis {
    match e {
        ApiError::Transport { source, .. } => transport(source, url),
        ApiError::Unauthorized { url, command } => Diagnosis::new(
            Step::Credentials,
            format!(
                "cloudstack at {url} refused {command} with HTTP 401 (unable to verify user \
                 credentials and/or request signature); check cloudstack.api_key and \
                 cloudstack.secret_key (or CKS_DRIFT_API_KEY and CKS_DRIFT_SECRET_KEY), that this \
                 host's clock is right (requests expire), that the account and user are enabled, \
                 and that the key's role may call {command}"
            ),
        ),
        ApiError::Http {
            status: 502..=504, ..
        } => Diagnosis::new(
            Step::Endpoint,
            format!(
                "{e}; the management server, or a proxy in front of it, is not available: \
                 try again later, and check the management server's log"
            ),
        ),
        ApiError::Http { .. } | ApiError::Decode { .. } => Diagnosis::new(
            Step::Endpoint,
            format!(
                "{e}; {url} does not answer as CloudStack's API: cloudstack.url must be the API \
                 endpoint, e.g. \"https://cloud.example.com/client/api\""
            ),
        ),
        ApiError::Config { .. } => Diagnosis::new(Step::Config, e.to_string()),
        ApiError::PageSizeTooLarge { .. }
        | ApiError::CloudStack { .. }
        | ApiError::AsyncJobFailed { .. }
        | ApiError::AsyncJobTimeout { .. }
        | ApiError::Fenced { .. } => Diagnosis::new(Step::Api, e.to_string()),
    }
}

fn transport(e: &TransportError, url: &str) -> Diagnosis {
    match e {
        TransportError::Connect { source, .. } => {
            let source: &(dyn Error + 'static) = source.as_ref();
            let cause = root_cause(source);
            match connect_step(source, url) {
                Step::Dns => Diagnosis::new(
                    Step::Dns,
                    format!(
                        "cannot resolve {} (cloudstack.url): {cause}; check the host name in \
                         cloudstack.url and this host's DNS resolver",
                        host_of(url)
                    ),
                ),
                Step::Tls => Diagnosis::new(
                    Step::Tls,
                    // rustls words it `Other(OtherError(CaUsedAsEndEntity))`.
                    format!(
                        "TLS with {} failed: {}; {}",
                        host_port(url),
                        if cause.contains("CaUsedAsEndEntity") {
                            "invalid peer certificate: CaUsedAsEndEntity"
                        } else {
                            &cause
                        },
                        tls_advice(&cause, url)
                    ),
                ),
                _ => Diagnosis::new(
                    Step::TcpConnect,
                    format!(
                        "cannot connect to {} (cloudstack.url): {cause}; check that the management \
                         server is up, the host and port in cloudstack.url, and firewalls",
                        host_port(url)
                    ),
                ),
            }
        }
        TransportError::Timeout { seconds, .. } => Diagnosis::new(
            Step::Timeout,
            format!(
                "no answer from {url} within {seconds} s (cloudstack.timeout); check the host and \
                 port in cloudstack.url and firewalls, or raise cloudstack.timeout"
            ),
        ),
        TransportError::TooLarge { .. } => Diagnosis::new(
            Step::Endpoint,
            format!(
                "{e}; cloudstack.url must be the management server's API endpoint, e.g. \
                 \"https://cloud.example.com/client/api\""
            ),
        ),
        TransportError::Other { source, .. } => Diagnosis::new(
            Step::Endpoint,
            format!(
                "request to {url} failed: {}; check that cloudstack.url is the management \
                 server's API endpoint, e.g. \"https://cloud.example.com/client/api\"",
                root_cause(source.as_ref())
            ),
        ),
    }
}

/// Explains a failed node listing on a control node.
pub fn node_list(e: &NodeListError) -> Diagnosis {
    let chained = error_chain(e);
    match e {
        NodeListError::Dns { .. } => Diagnosis::new(
            Step::Dns,
            format!(
                "{chained}; the cluster's endpoint names a host this machine cannot resolve: check \
                 this host's DNS resolver"
            ),
        ),
        NodeListError::Connect { port, .. } => Diagnosis::new(
            Step::TcpConnect,
            format!(
                "{chained}; check that the control node runs and that port {port} is reachable \
                 from this host (CKS forwards port 2222 of the network's public IP to the first \
                 control node)"
            ),
        ),
        NodeListError::Timeout { stage, .. } => Diagnosis::new(
            if matches!(stage, crate::remote::Stage::Command) {
                Step::Kubectl
            } else {
                Step::Timeout
            },
            format!(
                "{chained}; check the network path to the control node, or raise {}",
                stage.setting()
            ),
        ),
        NodeListError::HostKeyUnknown {
            host,
            port,
            known_hosts,
        } => Diagnosis::new(
            Step::HostKey,
            format!(
                "{chained}; add the node's key (ssh-keyscan -p {port} {host} >> {}) or set \
                 ssh.host_key_policy = \"accept-new\"",
                known_hosts.display()
            ),
        ),
        NodeListError::HostKeyChanged { .. } | NodeListError::HostCertificate { .. } => {
            Diagnosis::new(Step::HostKey, chained)
        }
        NodeListError::KnownHosts { path, .. } => Diagnosis::new(
            Step::HostKey,
            format!(
                "{chained}; fix or move away {} (ssh.known_hosts)",
                path.display()
            ),
        ),
        NodeListError::Auth { user, .. } => Diagnosis::new(
            Step::SshAuth,
            format!(
                "{chained}; authorize the key's public half for {user} on the control node, or \
                 set ssh.private_key to the key the cluster was created with"
            ),
        ),
        NodeListError::Ssh { stage, .. } => Diagnosis::new(
            match stage {
                crate::remote::Stage::Auth => Step::SshAuth,
                crate::remote::Stage::Command => Step::Kubectl,
                _ => Step::Ssh,
            },
            chained,
        ),
        NodeListError::Command { .. } => Diagnosis::new(
            Step::Kubectl,
            format!(
                "{chained}; run ssh.command by hand on the control node as the login user: it \
                 needs passwordless sudo (sudo -n) and kubectl at the path given"
            ),
        ),
        NodeListError::Output { .. }
        | NodeListError::OutputTooLarge { .. }
        | NodeListError::TooManyNodes { .. }
        | NodeListError::LineTooLong { .. } => Diagnosis::new(
            Step::Kubectl,
            format!(
                "{chained}; ssh.command must print one node a line, as kubectl get nodes {} \
                 does (name, readiness, system UUID, provider ID), or node/<name> lines as -o \
                 name does",
                crate::remote::kubectl::LIST_ARGUMENTS
            ),
        ),
    }
}

/// Explains a cycle that could not run, for the management server at `url`.
pub fn cycle(e: &CycleError, url: &str) -> String {
    match e {
        CycleError::List { what, source } => {
            let d = api(source, url);
            format!("cannot list {what}: {} ({})", d.line, d.step)
        }
        CycleError::Standby | CycleError::EncodedAnswers | CycleError::Caller(_) => e.to_string(),
    }
}

/// [`cycle`] for a cycle that could not reach CloudStack at all (its name, a connection,
/// TLS, the keys), where the error chain alone does not say what to check; `None` when
/// CloudStack answered, as its own error text says what went wrong.
pub fn unreachable(e: &CycleError, url: &str) -> Option<String> {
    let CycleError::List { what, source } = e else {
        return None;
    };
    let d = api(source, url);
    matches!(
        d.step,
        Step::Dns | Step::TcpConnect | Step::Timeout | Step::Tls | Step::Credentials
    )
    .then(|| format!("cannot list {what}: {} ({})", d.line, d.step))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A link of an error chain: its text and its cause.
    #[derive(Debug)]
    struct Link(&'static str, Option<Box<dyn Error + Send + Sync>>);

    impl fmt::Display for Link {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }

    impl Error for Link {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.1.as_deref().map(|e| e as &(dyn Error + 'static))
        }
    }

    /// A chain of plain texts, outermost first, ending in `last`.
    fn chain(
        texts: &[&'static str],
        last: Box<dyn Error + Send + Sync>,
    ) -> Box<dyn Error + Send + Sync> {
        texts
            .iter()
            .rev()
            .fold(last, |cause, text| Box::new(Link(text, Some(cause))))
    }

    fn connect(url: &str, source: Box<dyn Error + Send + Sync>) -> ApiError {
        ApiError::Transport {
            command: "listKubernetesClusters".into(),
            source: TransportError::Connect {
                url: url.into(),
                source,
            },
        }
    }

    const URL: &str = "https://cloud.example.com/client/api";

    #[test]
    fn dns_failures_name_the_host() {
        let e = connect(
            URL,
            chain(
                &["client error (Connect)", "dns error"],
                Box::new(Link(
                    "failed to lookup address information: Name or service not known",
                    None,
                )),
            ),
        );
        assert_eq!(
            api(&e, URL),
            Diagnosis::new(
                Step::Dns,
                "cannot resolve cloud.example.com (cloudstack.url): failed to lookup address \
                 information: Name or service not known; check the host name in cloudstack.url \
                 and this host's DNS resolver"
            )
        );
    }

    #[test]
    fn refused_connections_are_tcp() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let e = connect(URL, chain(&["client error (Connect)"], Box::new(refused)));
        let d = api(&e, URL);
        assert_eq!(d.step, Step::TcpConnect);
        assert_eq!(
            d.line,
            "cannot connect to cloud.example.com:443 (cloudstack.url): connection refused; check \
             that the management server is up, the host and port in cloudstack.url, and firewalls"
        );
    }

    #[test]
    fn other_https_connect_failures_are_tls() {
        let e = connect(
            URL,
            chain(
                &["client error (Connect)"],
                Box::new(Link("invalid peer certificate: UnknownIssuer", None)),
            ),
        );
        let d = api(&e, URL);
        assert_eq!(d.step, Step::Tls);
        assert_eq!(
            d.line,
            "TLS with cloud.example.com:443 failed: invalid peer certificate: UnknownIssuer; if a \
             private CA signed the management server's certificate, set cloudstack.ca_file to \
             it; if the port speaks plain HTTP, use an http:// URL"
        );
        // Over plain HTTP there is no TLS to blame.
        let plain = "http://cloud.example.com:8080/client/api";
        assert_eq!(api(&e, plain).step, Step::TcpConnect);
    }

    #[test]
    fn unauthorized_says_which_settings_to_check() {
        let e = ApiError::Unauthorized {
            url: URL.into(),
            command: "listKubernetesClusters".into(),
        };
        let d = api(&e, URL);
        assert_eq!(d.step, Step::Credentials);
        assert!(
            d.line.starts_with(
                "cloudstack at https://cloud.example.com/client/api refused \
                 listKubernetesClusters with HTTP 401"
            ),
            "{}",
            d.line
        );
        assert!(
            d.line
                .contains("check cloudstack.api_key and cloudstack.secret_key"),
            "{}",
            d.line
        );
    }

    #[test]
    fn a_page_that_is_not_the_api_points_at_the_url() {
        let e = ApiError::Http {
            command: "listKubernetesClusters".into(),
            status: 404,
            snippet: "<html>Not Found</html>".into(),
        };
        assert_eq!(
            api(&e, URL),
            Diagnosis::new(
                Step::Endpoint,
                "cloudstack command listKubernetesClusters got an unexpected HTTP 404 answer: \
                 <html>Not Found</html>; https://cloud.example.com/client/api does not answer as \
                 CloudStack's API: cloudstack.url must be the API endpoint, e.g. \
                 \"https://cloud.example.com/client/api\""
            )
        );
    }

    #[test]
    fn node_listing_failures_map_to_their_step() {
        let auth = NodeListError::Auth {
            user: "cloud".into(),
            host: "10.0.0.5".into(),
            port: 2222,
            key_file: "/k".into(),
            offered: "rsa-sha2-512".into(),
        };
        assert_eq!(node_list(&auth).step, Step::SshAuth);
        let changed = NodeListError::HostKeyChanged {
            host: "10.0.0.5".into(),
            port: 2222,
            presented: "ssh-ed25519".into(),
            known_hosts: "/kh".into(),
            line: 1,
            cluster: Some("c1".into()),
        };
        assert_eq!(
            node_list(&changed),
            Diagnosis::new(Step::HostKey, changed.to_string())
        );
        let command = NodeListError::Command {
            host: "10.0.0.5".into(),
            port: 2222,
            exit: crate::remote::RemoteExit::Status(1),
            stderr: "sudo: a password is required".into(),
        };
        assert_eq!(
            node_list(&command).line,
            "command on 10.0.0.5:2222 exited with status 1: sudo: a password is required; run \
             ssh.command by hand on the control node as the login user: it needs passwordless \
             sudo (sudo -n) and kubectl at the path given"
        );
        assert_eq!(node_list(&command).step, Step::Kubectl);
    }
}
