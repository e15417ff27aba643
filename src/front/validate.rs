//! `validate-config`: every problem of a config file at once, each on its own line with its
//! full key and a fix; warnings about risky settings; and with `--connect`, one API call and
//! one SSH login to show that the credentials work, naming the step that failed.
//!
//! Parsing and validating the settings belongs to `config` (reused here as is); this module
//! adds the checks that read the files the config names, the warnings, and the connection
//! test. It changes nothing, except that `accept-new` may learn a host key, as a check would.

use std::fmt;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::base::duration::parse_duration;
use crate::base::untrusted::{controls_escaped, escaped, shown};
use crate::cloudstack::client::{Client, ClientOptions};
use crate::cloudstack::http::{HttpTransport, read_ca_bundle};
use crate::cloudstack::model::KubernetesCluster;
use crate::cloudstack::release::Release;
use crate::cloudstack::retry::RetryPolicy;
use crate::config::secret_file;
use crate::config::{Config, ConfigError, DEFAULT_COMMAND};
use crate::daemon::listen::{PassedError, PassedFd, passed_fds};
use crate::engine::diagnose;
use crate::remote::NodeLister;
use crate::remote::ssh::{SshNodeLister, load_private_key, remote_command};

/// The most characters of a cluster's name shown, escapes counted as written (CloudStack
/// takes names of up to 255).
const NAME_SHOWN: usize = 255;

/// Grace periods shorter than this are warned about.
pub const SHORT_GRACE: Duration = Duration::from_secs(5 * 60);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// The daemon would refuse to start, or a check would fail.
    Error,
    /// Works, but is risky or probably not meant.
    Warning,
    /// A connection test that succeeded.
    Ok,
}

/// One line of the result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub severity: Severity,
    /// The full key (`check.grace_period`), or the step of a connection test; `None` for the
    /// file as a whole.
    pub key: Option<String>,
    /// What is wrong, then what to do.
    pub message: String,
}

impl Finding {
    fn new(severity: Severity, key: &str, message: impl Into<String>) -> Self {
        Finding {
            severity,
            key: Some(key.to_string()),
            message: message.into(),
        }
    }

    fn error(key: &str, message: impl Into<String>) -> Self {
        Finding::new(Severity::Error, key, message)
    }

    fn warning(key: &str, message: impl Into<String>) -> Self {
        Finding::new(Severity::Warning, key, message)
    }
}

/// One line, with no control character whatever the finding quotes: tenant text is escaped
/// where it is quoted (with its backslashes doubled, so that it cannot forge an escape), and
/// this is the guard for any text that was not, without escaping twice what already was.
impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let label = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Ok => "ok",
        };
        let message = controls_escaped(&self.message);
        match &self.key {
            Some(key) => write!(f, "{label}: {}: {message}", controls_escaped(key)),
            None => write!(f, "{label}: {message}"),
        }
    }
}

/// The findings about a config text, errors first, and the validated config when it has no
/// error of its own. `env` looks up environment variables (a seam for tests).
pub fn check_text(
    text: &str,
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> (Vec<Finding>, Option<Config>) {
    let mut findings = Vec::new();
    let config = match Config::from_toml(text, path, env) {
        Ok(c) => Some(c),
        Err(ConfigError::Invalid { problems, .. }) => {
            findings.extend(
                problems
                    .into_iter()
                    .map(|p| Finding::error(&p.key, p.message)),
            );
            None
        }
        Err(other) => return (vec![whole_file(other.to_string())], None),
    };
    let Ok(raw) = text.parse::<toml::Table>() else {
        let message = format!("config file {} is not valid TOML", path.display());
        return (vec![whole_file(message)], None);
    };
    let raw = Raw(&raw);
    findings.extend(file_errors(&raw));
    let usable = findings.is_empty();
    findings.extend(setting_warnings(&raw));
    findings.extend(permission_warnings(&raw, path, env));
    if let Some(c) = &config {
        findings.extend(
            crate::state::ignore::expiry_warnings(&c.ignore, crate::base::time::Timestamp::now())
                .into_iter()
                .map(|(key, message)| Finding::warning(&key, message)),
        );
    }
    (findings, config.filter(|_| usable))
}

/// Rules that match none of the findings open after the last cycle, from the state file
/// (expiry aside): a rule with a typo matches nothing, silently.
pub fn unmatched_rules(
    rules: &[crate::config::IgnoreRule],
    state: &crate::state::State,
) -> Vec<usize> {
    rules
        .iter()
        .filter(|rule| {
            let rule = crate::config::IgnoreRule {
                expires: None,
                ..(*rule).clone()
            };
            !state.clusters.iter().any(|(id, c)| {
                c.vms
                    .values()
                    .chain(c.nodes.values())
                    .filter_map(crate::state::Reported::mismatch)
                    .any(|m| {
                        crate::state::ignore::matches(
                            &rule,
                            id,
                            &c.name,
                            &m,
                            crate::base::time::Timestamp::from_unix(0),
                        )
                    })
            })
        })
        .map(|r| r.number)
        .collect()
}

/// An error about the file as a whole.
fn whole_file(message: String) -> Finding {
    Finding {
        severity: Severity::Error,
        key: None,
        message,
    }
}

/// Reads and checks a config file.
pub fn check_file(path: &Path) -> (Vec<Finding>, Option<Config>) {
    match std::fs::read_to_string(path) {
        Ok(text) => check_text(&text, path, &|name| std::env::var(name).ok()),
        Err(_) => {
            // `load` words the reasons (missing, permission denied).
            let message = match Config::load(path) {
                Err(e) => e.to_string(),
                Ok(_) => format!("cannot read config file {}", path.display()),
            };
            (vec![whole_file(message)], None)
        }
    }
}

/// The raw TOML, read leniently: a value of the wrong type is `None` here (`config` reports
/// it).
struct Raw<'a>(&'a toml::Table);

impl Raw<'_> {
    fn value(&self, key: &str) -> Option<&toml::Value> {
        let (table, name) = key.split_once('.')?;
        self.0.get(table)?.as_table()?.get(name)
    }

    fn str(&self, key: &str) -> Option<&str> {
        self.value(key)?.as_str()
    }

    /// A non-empty path setting.
    fn path(&self, key: &str) -> Option<&Path> {
        self.str(key)
            .filter(|s| !s.trim().is_empty())
            .map(Path::new)
    }
}

/// Files named by the config that cannot be used: the SSH key and the CA bundle. (The
/// secret key files are read, and reported, by `config`.)
fn file_errors(raw: &Raw<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(path) = raw.path("ssh.private_key")
        && let Err(e) = load_private_key(path)
    {
        let text = crate::base::error_chain::error_chain(&e);
        let text = text.strip_prefix("ssh.private_key: ").unwrap_or(&text);
        out.push(Finding::error("ssh.private_key", text));
    }
    if let Some(path) = raw.path("cloudstack.ca_file")
        && let Err(e) = read_ca_bundle(path)
    {
        let text = match &e {
            crate::cloudstack::error::ApiError::Config { problem, .. } => problem.clone(),
            other => other.to_string(),
        };
        out.push(Finding::error("cloudstack.ca_file", text));
    }
    let strict = raw.str("ssh.host_key_policy") == Some("strict");
    let known_hosts = raw
        .path("ssh.known_hosts")
        .unwrap_or(Path::new(crate::config::DEFAULT_KNOWN_HOSTS));
    if strict && !known_hosts.exists() {
        out.push(Finding::error(
            "ssh.known_hosts",
            format!(
                "{} does not exist and ssh.host_key_policy is \"strict\", so every control node \
                 would be refused; record the nodes' keys there (ssh-keyscan -p 2222 <endpoint \
                 address> >> {}) or use \"accept-new\"",
                known_hosts.display(),
                known_hosts.display()
            ),
        ));
    }
    out
}

/// Settings that work but are risky or probably not meant.
fn setting_warnings(raw: &Raw<'_>) -> Vec<Finding> {
    let mut out = exposure_warnings(raw);
    out.extend(alertmanager_warnings(raw));
    out.extend(noise_warnings(raw));
    out.extend(command_warnings(raw));
    out
}

/// Connections that trust whoever answers or travel in clear: to CloudStack, its database
/// and the control nodes.
fn exposure_warnings(raw: &Raw<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    if raw
        .value("cloudstack.insecure")
        .and_then(toml::Value::as_bool)
        == Some(true)
    {
        out.push(Finding::warning(
            "cloudstack.insecure",
            "is true: the management server's certificate is not verified, so anything between \
             this host and it can pose as CloudStack; set cloudstack.ca_file to the CA that \
             signed its certificate and remove insecure",
        ));
    }
    if raw
        .str("cloudstack.url")
        .is_some_and(|u| u.trim().to_ascii_lowercase().starts_with("http://"))
    {
        out.push(Finding::warning(
            "cloudstack.url",
            crate::config::PLAIN_HTTP,
        ));
    }
    if let Some(url) = raw.str("database.url")
        && raw.value("database.tls").and_then(toml::Value::as_bool) == Some(false)
        && let Ok((host, ..)) = crate::config::parse_database_url(url.trim())
        && !crate::config::is_loopback(&host)
    {
        out.push(Finding::warning(
            "database.tls",
            crate::config::database_in_clear(&host),
        ));
    }
    if raw.str("ssh.host_key_policy") == Some("off") {
        out.push(Finding::warning(
            "ssh.host_key_policy",
            crate::config::HOST_KEYS_OFF,
        ));
    }
    out
}

/// The risks `notify::alertmanager` sees in `[alertmanager]`, when the file has one.
fn alertmanager_warnings(raw: &Raw<'_>) -> Vec<Finding> {
    if !raw.0.get("alertmanager").is_some_and(toml::Value::is_table) {
        return Vec::new();
    }
    let urls: Vec<&str> = raw
        .value("alertmanager.urls")
        .and_then(toml::Value::as_array)
        .map(|a| a.iter().filter_map(toml::Value::as_str).collect())
        .unwrap_or_default();
    let credentials = [
        "alertmanager.username",
        "alertmanager.password_file",
        "alertmanager.bearer_token_file",
    ]
    .iter()
    .any(|key| raw.value(key).is_some());
    let insecure = raw
        .value("alertmanager.insecure")
        .and_then(toml::Value::as_bool)
        == Some(true);
    crate::notify::alertmanager::risks(&urls, credentials, insecure)
        .into_iter()
        .map(|(key, message)| Finding::warning(key, message))
        .collect()
}

/// Settings that tell too soon or too much: a short grace period, storms turned off.
fn noise_warnings(raw: &Raw<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(text) = raw.str("check.grace_period")
        && let Ok(grace) = parse_duration(text)
        && grace < SHORT_GRACE
    {
        out.push(Finding::warning(
            "check.grace_period",
            format!(
                "is {text:?}, under 5 minutes: VMs of a cluster being created, scaled or upgraded \
                 may be reported before the operation ends; use at least \"5m\" (the default is \
                 \"15m\")"
            ),
        ));
    }
    if raw.str("notify.storm_clusters").map(str::trim) == Some("off") {
        out.push(Finding::warning(
            "notify.storm_clusters",
            "is \"off\": every finding is alerted on its own however many come at once, so one \
             outage (storage, network, SSH across the cloud) sends an alert and an annotation per \
             finding; the default \"20%\" sends one storm alert instead",
        ));
    }
    out
}

/// What `ssh.command` (or the default) lists too little of, or needs a shell for.
fn command_warnings(raw: &Raw<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    let command = raw.str("ssh.command").unwrap_or(DEFAULT_COMMAND);
    if lists_names_only(command) {
        out.push(Finding::warning(
            "ssh.command",
            format!(
                "{command:?} lists node names only (-o name): nodes are then matched to VMs by \
                 name, so a node its tenant renamed is not recognised and one named like another \
                 VM is not caught; list their system UUIDs and provider IDs too with \
                 \"kubectl get nodes {}\" (the default)",
                crate::remote::kubectl::LIST_ARGUMENTS
            ),
        ));
    }
    if lists_no_readiness(command) {
        out.push(Finding::warning(
            "ssh.command",
            format!(
                "{command:?} lists no readiness (no READY column): `cks-drift explain` cannot \
                 say whether each node is Ready; list it too with \"kubectl get nodes {}\" \
                 (the default)",
                crate::remote::kubectl::LIST_ARGUMENTS
            ),
        ));
    }
    if let Some(what) = shell_syntax(command) {
        let timeout = raw
            .str("ssh.command_timeout")
            .and_then(|t| parse_duration(t).ok())
            .unwrap_or(Duration::from_secs(20));
        out.push(Finding::warning(
            "ssh.command",
            format!(
                "{command:?} {what}; it runs on the node as \"{}\", so it must be a simple \
                 command (a program and its arguments): wrap anything else in sh -c '…' or in a \
                 script on the node",
                remote_command("<command>", timeout)
            ),
        ));
    }
    out
}

/// What in `command` needs a shell, if anything: operators, redirections, substitutions, a
/// leading variable assignment or a shell keyword or builtin. Quoted text is not looked at.
pub fn shell_syntax(command: &str) -> Option<String> {
    let mut found: Vec<&'static str> = Vec::new();
    let mut note = |what: &'static str| {
        if !found.contains(&what) {
            found.push(what);
        }
    };
    let mut quote: Option<char> = None;
    let mut chars = command.trim().chars().peekable();
    let mut prev = ' ';
    while let Some(c) = chars.next() {
        match quote {
            Some(q) if c == q => quote = None,
            Some('"') if c == '\\' => {
                chars.next();
            }
            Some('"') if c == '`' => note("a command substitution"),
            Some('"') if c == '$' && chars.peek() == Some(&'(') => note("a command substitution"),
            Some(_) => {}
            None => match c {
                '\'' | '"' => quote = Some(c),
                '\\' => {
                    chars.next();
                }
                '|' => note("a pipe or ||"),
                ';' => note("a ;"),
                '&' => note("& or &&"),
                '<' | '>' => note("a redirection"),
                '`' => note("a command substitution"),
                '$' if chars.peek() == Some(&'(') => note("a command substitution"),
                '(' if prev != '$' => note("parentheses"),
                '\n' => note("a line break"),
                _ => {}
            },
        }
        prev = c;
    }
    let first = command.split_whitespace().next().unwrap_or("");
    const SHELL_WORDS: &[&str] = &[
        "if", "for", "while", "until", "case", "{", "!", "cd", "export", "source", ".", "exec",
        "set", "unset", "alias",
    ];
    if SHELL_WORDS.contains(&first) {
        note("a leading shell keyword or builtin");
    } else if first.contains('=') && !first.starts_with('=') {
        note("a leading variable assignment");
    }
    if found.is_empty() {
        return None;
    }
    Some(format!("uses shell syntax ({})", found.join(", ")))
}

/// A warning when someone the secret-file rule does not allow may read `path` (see
/// `secret_file`).
fn readable_by_strangers(
    key: &str,
    path: &Path,
    what: &str,
    allowed: &secret_file::Allowed,
) -> Option<Finding> {
    let access = secret_file::access(path)?;
    let stranger = secret_file::readers_beyond(&access, allowed)?;
    Some(Finding::warning(
        key,
        secret_file::warning(path, what, access.mode, &stranger, allowed),
    ))
}

/// Files holding secrets that the rule does not allow others to read: the key files, the SSH
/// key (when it is one), and the config itself when it holds a key inline.
fn permission_warnings(
    raw: &Raw<'_>,
    config_path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let allowed = secret_file::allowed();
    let env_set = |name: &str| env(name).is_some_and(|v| !v.trim().is_empty());
    for (key, env_name) in [
        ("cloudstack.api_key", crate::config::ENV_API_KEY),
        ("cloudstack.secret_key", crate::config::ENV_SECRET_KEY),
    ] {
        if env_set(env_name) {
            continue;
        }
        let file_key = format!("{key}_file");
        if let Some(path) = raw.path(&file_key) {
            out.extend(readable_by_strangers(
                &file_key,
                path,
                "holds a secret",
                &allowed,
            ));
        }
        if raw.str(key).is_some_and(|v| !v.trim().is_empty())
            && let Some(warning) =
                readable_by_strangers(key, config_path, &format!("holds {key} inline"), &allowed)
        {
            out.push(Finding {
                message: format!("{}, or move the key to {file_key}", warning.message),
                ..warning
            });
        }
    }
    // A file that is not a usable private key has its error already; its mode is moot.
    if let Some(path) = raw.path("ssh.private_key")
        && load_private_key(path).is_ok()
    {
        out.extend(readable_by_strangers(
            "ssh.private_key",
            path,
            "is a private key",
            &allowed,
        ));
    }
    out
}

fn api_failure(e: &crate::cloudstack::error::ApiError, url: &str) -> Finding {
    let d = diagnose::api(e, url);
    Finding::error(&format!("cloudstack API ({})", d.step), d.line)
}

/// Which CloudStack answers, and what cks-drift does differently on it; an error for a
/// release older than 4.16 or an answer that names none.
async fn server_release(api: &Client, url: &str) -> Result<(Finding, Option<Release>), Finding> {
    let version = api.version().await.map_err(|e| api_failure(&e, url))?;
    let Some(version) = version else {
        return Ok((
            Finding::warning(
                "cloudstack release",
                "listCapabilities does not show cloudstackversion (expose.cloudstack.version.api.list.capabilities is false): the release is unknown, so cks-drift reads the networks in every scope, which is right on every release but costs more calls; set it to true to let cks-drift tell",
            ),
            None,
        ));
    };
    if crate::cloudstack::release::url_encoded(&version) {
        return Err(Finding::error(
            "cloudstack answers",
            crate::cloudstack::release::ENCODED_ANSWERS,
        ));
    }
    let release = Release::parse(&version);
    let version = shown(&version, 64);
    let Some(release) = release else {
        return Err(Finding::error(
            "cloudstack release",
            format!(
                "listCapabilities answered cloudstackversion \"{version}\", which names no release; cks-drift supports CloudStack {} and later",
                Release::OLDEST
            ),
        ));
    };
    if !release.supported() {
        return Err(Finding::error(
            "cloudstack release",
            format!(
                "CloudStack {version} is older than {}, the oldest release cks-drift supports: its Kubernetes Service keeps the VM map differently; upgrade CloudStack first",
                Release::OLDEST
            ),
        ));
    }
    let differences = release.differences();
    let message = if differences.is_empty() {
        format!("CloudStack {version}: nothing is done differently on this release")
    } else {
        format!(
            "CloudStack {version}; on this release: {}",
            differences.join("; ")
        )
    };
    Ok((
        Finding::new(Severity::Ok, "cloudstack release", message),
        Some(release),
    ))
}

/// Who holds the API key and whether its role is of type Admin: an error for any other
/// type, a warning when CloudStack does not say (a role without `getUser`).
async fn key_holder(api: &Client, api_key: &str) -> Result<Finding, Finding> {
    match api.caller(api_key).await {
        Ok(user) => match crate::cloudstack::release::role_problem(&user) {
            Some(problem) => Err(Finding::error("cloudstack key", problem)),
            None => Ok(Finding::new(
                Severity::Ok,
                "cloudstack key",
                format!(
                    "held by user {} of account {}, role {} (type Admin)",
                    shown(user.username.as_deref().unwrap_or(&user.id), 80),
                    shown(user.account.as_deref().unwrap_or("?"), 80),
                    shown(user.rolename.as_deref().unwrap_or("?"), 80),
                ),
            )),
        },
        Err(e) => Ok(Finding::warning(
            "cloudstack key",
            format!(
                "cannot tell the type of the key's role ({}); it must be Admin, or cks-drift's own annotations are not read back and other domains' clusters are not checked: allow getUser to the role, or check its type by hand",
                crate::base::error_chain::error_chain(&e)
            ),
        )),
    }
}

/// The connection test: one API call with the configured keys, then `ssh.command` on the
/// control node of the first cluster that is checked (Running or Alert, CloudManaged) and
/// has an endpoint.
pub async fn connect(config: &Config) -> Vec<Finding> {
    let mut out = unmatched_rule_warnings(config);
    if let Err(last) = connection_steps(config, &mut out).await {
        out.push(last);
    }
    out
}

/// Warnings about `[[ignore]]` rules that match none of the findings in the state file.
fn unmatched_rule_warnings(config: &Config) -> Vec<Finding> {
    // The findings of the last cycle are in the state file: a rule none of them matches is
    // most likely a typo.
    if !config.ignore.is_empty()
        && let Ok(Some(state)) = crate::state::file::read(&config.state.path)
    {
        return unmatched_rules(&config.ignore, &state)
            .into_iter()
            .map(|n| {
                Finding::warning(
                    &format!("ignore[{n}]"),
                    format!(
                        "matches none of the findings open after the last cycle ({}); check its cluster, kind, vm and node",
                        config.state.path.display()
                    ),
                )
            })
            .collect();
    }
    Vec::new()
}

/// The steps of the connection test, in order: the API and its clusters, the release, the
/// key's holder, then SSH. Each adds what it showed to `out`; the first that fails ends the
/// test and returns its finding.
async fn connection_steps(config: &Config, out: &mut Vec<Finding>) -> Result<(), Finding> {
    let url = &config.cloudstack.url;
    let api = single_attempt_client(config).map_err(|e| api_failure(&e, url))?;
    let clusters: Vec<KubernetesCluster> = api
        .list(
            "listKubernetesClusters",
            "kubernetescluster",
            &crate::cks::ROOT_SCOPE,
        )
        .await
        .map_err(|e| api_failure(&e, url))?;
    out.push(Finding::new(
        Severity::Ok,
        "cloudstack API",
        format!(
            "{url} accepted the keys and answered listKubernetesClusters ({} cluster{})",
            clusters.len(),
            if clusters.len() == 1 { "" } else { "s" }
        ),
    ));
    out.extend(cluster_rule_warnings(&config.ignore, &clusters));
    let (finding, release) = server_release(&api, url).await?;
    out.push(finding);
    out.push(key_holder(&api, config.cloudstack.api_key.expose()).await?);
    out.push(ssh_login(config, &api, release, &clusters).await?);
    Ok(())
}

/// A client of the configured API that sends each request once.
fn single_attempt_client(config: &Config) -> Result<Client, crate::cloudstack::error::ApiError> {
    let transport = HttpTransport::new(&config.cloudstack)?;
    // One attempt: the point is to show what fails, at once.
    let options = ClientOptions {
        page_size: config.cloudstack.page_size,
        retry: RetryPolicy {
            attempts: 1,
            ..RetryPolicy::default()
        },
        ..ClientOptions::default()
    };
    Ok(Client::with_transport(Arc::new(transport), options).with_endpoint(&config.cloudstack.url))
}

/// `ssh.command` on the control node of the cluster [`login_cluster`] picks: what it
/// listed, or an error naming the step that failed, or a warning saying why SSH was not
/// tried.
async fn ssh_login(
    config: &Config,
    api: &Client,
    release: Option<Release>,
    clusters: &[KubernetesCluster],
) -> Result<Finding, Finding> {
    let cluster = login_cluster(clusters).map_err(|why| Finding::warning("ssh", why))?;
    let lister = SshNodeLister::new(&config.ssh)
        .map_err(|e| Finding::error("ssh", crate::base::error_chain::error_chain(&e)))?;
    let network = match cluster.networkid.as_deref() {
        None => None,
        Some(id) => crate::inventory::list_networks(api, release, &[("id", id)], |_| true)
            .await
            .map_err(|e| api_failure(&e, &config.cloudstack.url))?
            .pop(),
    };
    let target = crate::cks::ssh_target(cluster, network.as_ref(), &config.ssh.user)
        .map_err(|reason| Finding::warning("ssh", reason))?;
    // The name is the tenant's; the user and host come from its VM's detail and its
    // endpoint, checked but shown escaped all the same.
    let who = format!(
        "cluster {}, {}@{}:{}",
        shown(&cluster.name, NAME_SHOWN),
        escaped(&target.user),
        escaped(&target.host),
        target.port
    );
    match lister.list_nodes(&target).await {
        Ok(nodes) => Ok(Finding::new(
            Severity::Ok,
            "ssh",
            format!("{who}: {}", listed(&nodes)),
        )),
        Err(e) => {
            // The error quotes the control node's stderr, as the tenant's node wrote it.
            let d = diagnose::node_list(&e);
            Err(Finding::error(
                &format!("ssh ({})", d.step),
                format!("{who}: {}", escaped(&d.line)),
            ))
        }
    }
}

/// The cluster the connection test logs in to: the first that is checked and has an
/// endpoint; else why SSH is not tried.
fn login_cluster(clusters: &[KubernetesCluster]) -> Result<&KubernetesCluster, String> {
    let checked: Vec<&KubernetesCluster> = clusters
        .iter()
        .filter(|c| crate::cks::skip_reason(c).is_none())
        .collect();
    if let Some(cluster) = checked
        .iter()
        .find(|c| crate::cks::endpoint_host(c.endpoint.as_deref()).is_some())
    {
        return Ok(cluster);
    }
    Err(match checked.first() {
        None => {
            "no Running or Alert CloudManaged cluster to log in to; SSH was not tried".to_string()
        }
        Some(c) => format!(
            "cluster {} ({}): {}; SSH was not tried",
            shown(&c.name, NAME_SHOWN),
            escaped(&c.id),
            crate::cks::NO_ENDPOINT
        ),
    })
}

/// Warnings about `[[ignore]]` rules whose `cluster` is not one cluster: a name no cluster
/// has (the rule matches nothing), or a name several clusters share (cluster names are each
/// tenant's to choose, so the rule also matches clusters it was not written for).
pub fn cluster_rule_warnings(
    rules: &[crate::config::IgnoreRule],
    clusters: &[KubernetesCluster],
) -> Vec<Finding> {
    let mut out = Vec::new();
    for rule in rules {
        let Some(want) = rule.cluster.as_deref() else {
            continue;
        };
        if clusters.iter().any(|c| c.id == want) {
            continue;
        }
        let named: Vec<&KubernetesCluster> = clusters.iter().filter(|c| c.name == want).collect();
        let key = format!("ignore[{}].cluster", rule.number);
        let want = shown(want, 80);
        match named.len() {
            0 => out.push(Finding::warning(
                &key,
                format!(
                    "is \"{want}\", which is neither the id nor the name of any of the {} clusters listed: the rule matches nothing",
                    clusters.len()
                ),
            )),
            1 => {}
            n => {
                let ids: Vec<&str> = named.iter().take(5).map(|c| c.id.as_str()).collect();
                out.push(Finding::warning(
                    &key,
                    format!(
                        "is \"{want}\", the name of {n} clusters ({}{}): a name is each tenant's to choose, so the rule matches them all; give the id of the one meant",
                        ids.join(", "),
                        if n > ids.len() { ", …" } else { "" }
                    ),
                ));
            }
        }
    }
    out
}

/// What a node listing gave, for the connection test: how many nodes, how many of them carry
/// an identity (a system UUID or provider ID) to be matched by, and how many are Ready where
/// readiness is listed.
fn listed(nodes: &[crate::snapshot::Node]) -> String {
    let summary = identities(nodes);
    if nodes.iter().all(|n| n.ready.is_none()) {
        return summary;
    }
    let ready = nodes
        .iter()
        .filter(|n| n.ready == Some(crate::remote::Readiness::Ready))
        .count();
    format!("{summary}; {ready} of them Ready")
}

fn identities(nodes: &[crate::snapshot::Node]) -> String {
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    let known = nodes
        .iter()
        .filter(|n| n.system_uuid.is_some() || n.provider_id.is_some())
        .count();
    let head = format!(
        "ssh.command listed {} node{}",
        nodes.len(),
        plural(nodes.len())
    );
    match (nodes.len(), known) {
        (0, _) => head,
        (_, 0) => format!(
            "{head}, by name only (none with a system UUID or provider ID): they are matched to VMs by name"
        ),
        _ => format!("{head}, {known} with a system UUID or provider ID"),
    }
}

/// Whether `command` asks kubectl for names only (`-o name` and its spellings).
pub fn lists_names_only(command: &str) -> bool {
    let words: Vec<String> = command
        .split_whitespace()
        .map(|w| w.trim_matches(|c| c == '\'' || c == '"').to_string())
        .collect();
    words.iter().enumerate().any(|(i, w)| {
        let next_is_name = words.get(i + 1).is_some_and(|n| n == "name");
        matches!(w.as_str(), "-oname" | "-o=name" | "--output=name")
            || (matches!(w.as_str(), "-o" | "--output") && next_is_name)
    })
}

/// Whether `command` prints custom columns without the nodes' conditions, as the previous
/// default did: nodes are matched as well, but their readiness is not known.
pub fn lists_no_readiness(command: &str) -> bool {
    command.contains("custom-columns") && !command.contains(".status.conditions")
}

/// Runs `validate-config` and returns the exit code: 2 on any error, else 0.
pub async fn run(path: &Path, connect_too: bool, out: &mut dyn Write) -> i32 {
    let (mut findings, config) = check_file(path);
    let var = |name: &str| std::env::var(name).ok();
    let passed = passed_fds(
        std::process::id(),
        var("LISTEN_PID").as_deref(),
        var("LISTEN_FDS").as_deref(),
        var("LISTEN_FDNAMES").as_deref(),
    );
    findings.extend(passed_socket(passed));
    let has_errors = |f: &[Finding]| f.iter().any(|f| f.severity == Severity::Error);
    let mut skipped = None;
    if connect_too {
        match &config {
            Some(c) => {
                findings.extend(connect(c).await);
                if let Some(db) = &c.database {
                    findings.extend(database::connect(db).await);
                }
            }
            None => {
                skipped = Some("--connect was skipped: fix the errors above first");
            }
        }
    }
    let count = |s: Severity| findings.iter().filter(|f| f.severity == s).count();
    let (errors, warnings) = (count(Severity::Error), count(Severity::Warning));
    let mut text = String::new();
    for f in &findings {
        text.push_str(&f.to_string());
        text.push('\n');
    }
    if let Some(s) = skipped {
        text.push_str(s);
        text.push('\n');
    }
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let summary = match (errors, warnings) {
        (0, 0) => format!("config file {} is valid", path.display()),
        (0, w) => format!(
            "config file {} is valid, with {}",
            path.display(),
            plural(w, "warning", "warnings")
        ),
        (e, w) => format!(
            "config file {}: {}, {}; fix the errors and run validate-config again",
            path.display(),
            plural(e, "error", "errors"),
            plural(w, "warning", "warnings")
        ),
    };
    text.push_str(&summary);
    text.push('\n');
    let _ = out.write_all(text.as_bytes());
    if has_errors(&findings) {
        crate::front::report::exit::CANNOT_RUN
    } else {
        crate::front::report::exit::MATCHES
    }
}

/// Whether `run`, started as this command was, would serve a socket systemd passed in place
/// of `http.listen` (handed a socket as cks-drift.socket hands one, by systemd-socket-activate
/// say).
/// Nothing when systemd passed this process none: `run` binds `http.listen`.
pub fn passed_socket(passed: Result<Vec<PassedFd>, PassedError>) -> Option<Finding> {
    let refused = |e: &PassedError| {
        Finding::warning(
            "http.listen",
            format!("{e}; `run` would bind http.listen instead"),
        )
    };
    match passed {
        Ok(fds) => match fds.as_slice() {
            [] => None,
            [one] => Some(Finding::new(
                Severity::Ok,
                "http.listen",
                format!(
                    "not used: `run` serves the socket systemd passes (fd {}, {}) in its place",
                    one.fd, one.name
                ),
            )),
            several => Some(refused(&PassedError::Several {
                count: several.len(),
                names: several
                    .iter()
                    .map(|f| f.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })),
        },
        Err(e) => Some(refused(&e)),
    }
}

mod database;

#[cfg(test)]
mod tests;
