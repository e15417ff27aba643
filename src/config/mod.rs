//! Configuration: the raw TOML (serde, mirrors the file) and the validated settings the rest
//! of the program uses (`Duration`s, paths, secrets). `Config::from_toml` turns one into the
//! other and reports every problem with its full key.

pub mod secret_file;

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// A secret value (API key, secret key). `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

/// The problem of a table no release knows.
const UNKNOWN_TABLE: &str = "is not a known table; the tables are [cloudstack], [ssh], [check], \
     [state], [notify], [http], [log], [database], [alertmanager] and [[ignore]]";

/// The problem of a table no release knows, with the closest known table's name.
fn unknown_table(table: &str) -> String {
    let closest = KNOWN_KEYS
        .iter()
        .map(|(t, _)| *t)
        .chain(["ignore"])
        .map(|t| (strsim::jaro_winkler(table, t), t))
        .filter(|(score, _)| *score >= 0.85)
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match closest {
        Some((_, "ignore")) => format!("{UNKNOWN_TABLE}; did you mean [[ignore]]?"),
        Some((_, t)) => format!("{UNKNOWN_TABLE}; did you mean [{t}]?"),
        None => UNKNOWN_TABLE.to_string(),
    }
}

/// A key of the file as TOML writes it: bare when it can be, else quoted (`""`, `"a b"`), so
/// that a problem always names the key the file holds.
fn key_name(key: &str) -> std::borrow::Cow<'_, str> {
    let bare = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if bare {
        key.into()
    } else {
        format!("{key:?}").into()
    }
}

/// What the secret a `*_file` key names is, for the message of a file that is missing.
fn secret_of(key: &str) -> &'static str {
    match key {
        "cloudstack.api_key_file" => {
            "the API key of the CloudStack user cks-drift acts as (an Admin; its keys are under Accounts, the user, Generate keys)"
        }
        "cloudstack.secret_key_file" => {
            "the secret key of the CloudStack user cks-drift acts as (shown beside its API key)"
        }
        "database.password_file" => "the password of the database user",
        "alertmanager.password_file" => "the password of alertmanager.username",
        "alertmanager.bearer_token_file" => "the bearer token the Alertmanagers take",
        _ => "the secret",
    }
}

/// The problem of a config without `ssh.private_key`.
const PRIVATE_KEY_MISSING: &str = "is missing; point it at the management server's key \
     (/var/lib/cloudstack/management/.ssh/id_rsa on Debian/Ubuntu packages, \
     /var/cloudstack/management/.ssh/id_rsa on EL) or the private half of the cluster's key pair";

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }

    /// The secret itself, for signing only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// `[cloudstack]`.
#[derive(Debug, Clone)]
pub struct CloudStackSettings {
    /// The API endpoint, e.g. `https://cloud.example.com/client/api`.
    pub url: String,
    pub api_key: Secret,
    pub secret_key: Secret,
    /// Deadline of one HTTP request.
    pub timeout: Duration,
    /// PEM bundle of a private CA that signs the management server's certificate.
    pub ca_file: Option<PathBuf>,
    /// Skip TLS certificate verification (warned about at start).
    pub insecure: bool,
    /// Rows per page of every list call (at most the server's `default.page.size`).
    pub page_size: u32,
}

/// How the SSH host key of a control node is checked against `known_hosts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostKeyPolicy {
    /// Only hosts already in `known_hosts`, with the same key.
    Strict,
    /// Learn a host seen for the first time; refuse a changed key.
    AcceptNew,
    /// No check at all (what CloudStack itself does).
    Off,
}

/// `[ssh]`.
#[derive(Debug, Clone)]
pub struct SshSettings {
    pub private_key: PathBuf,
    /// Fallback login user when the first mapped VM has no `controlNodeLoginUser` detail.
    pub user: String,
    pub known_hosts: PathBuf,
    pub host_key_policy: HostKeyPolicy,
    /// TCP connect, key exchange and authentication.
    pub connect_timeout: Duration,
    /// The remote command, from exec to exit.
    pub command_timeout: Duration,
    /// Run on the control node; prints a node per line: name, system UUID and provider ID
    /// columns, or `node/<name>` (names only).
    pub command: String,
}

/// `[check]`.
#[derive(Debug, Clone)]
pub struct CheckSettings {
    pub enabled: bool,
    pub interval: Duration,
    pub initial_delay: Duration,
    pub grace_period: Duration,
    /// Clusters checked at once (node listings in flight).
    pub concurrency: usize,
    /// How long a cluster's nodes may go unlisted before it is a `blind` finding.
    pub blind_after: Duration,
    /// How long a finding must stay absent before it counts as gone (its INFO line, its
    /// alert archived, its annotation removed): a finding that flaps is told once.
    pub resolve_after: Duration,
}

/// `[state]`.
#[derive(Debug, Clone)]
pub struct StateSettings {
    pub path: PathBuf,
}

/// `[notify]`.
#[derive(Debug, Clone)]
pub struct NotifySettings {
    /// Raise a CloudStack alert per new mismatch.
    pub alerts: bool,
    /// Alert type numbers the daemon may use, one per open mismatch in a zone.
    pub alert_types: std::ops::RangeInclusive<u32>,
    /// Alerts per cluster and cycle before the rest are summed up in one.
    pub alert_cap: usize,
    /// Alerts (and, apart, annotations) all the clusters of one tenant hold at once: an
    /// account, or the projects of one domain together (`Owner::key`).
    pub owner_alert_cap: usize,
    /// Alerts (and, apart, annotations) raised for one tenant's clusters in any hour.
    pub owner_alerts_per_hour: usize,
    /// Keep an admin-only annotation on the cluster per open mismatch.
    pub annotations: bool,
    /// JSON-lines event log.
    pub event_log: PathBuf,
    /// How many clusters with new findings in one cycle make a storm.
    pub storm_clusters: StormThreshold,
}

/// The fewest clusters a percentage in `notify.storm_clusters` stands for: in a small cloud,
/// a few clusters drifting at once are still told one by one.
pub const STORM_MIN_CLUSTERS: usize = 5;

/// `notify.storm_clusters`: more clusters than this with new findings in one cycle are a
/// storm, told in one alert while the per-finding alerts and annotations wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StormThreshold {
    /// Every finding is told on its own, however many come at once.
    Off,
    /// A number of clusters.
    Clusters(usize),
    /// A percentage of the clusters checked in the cycle, and never fewer than
    /// [`STORM_MIN_CLUSTERS`].
    Percent(u32),
}

impl StormThreshold {
    /// The number of clusters for a cycle that checked `checked`; `None` when storms are off.
    pub fn clusters(self, checked: usize) -> Option<usize> {
        match self {
            StormThreshold::Off => None,
            StormThreshold::Clusters(n) => Some(n),
            StormThreshold::Percent(p) => {
                Some((checked * p as usize / 100).max(STORM_MIN_CLUSTERS))
            }
        }
    }
}

impl std::fmt::Display for StormThreshold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StormThreshold::Off => f.write_str("off"),
            StormThreshold::Clusters(n) => write!(f, "{n}"),
            StormThreshold::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// `notify.storm_clusters`'s default: Cluster API's MachineHealthCheck and cluster-autoscaler
/// stop acting one by one at a share of the fleet of this order.
pub const DEFAULT_STORM_CLUSTERS: StormThreshold = StormThreshold::Percent(20);

/// Reads `notify.storm_clusters`: a number, `"<p>%"` or `"off"`.
pub fn parse_storm_clusters(value: &toml::Value) -> Result<StormThreshold, String> {
    const HOW: &str = "give a number of clusters (e.g. 10), a percentage of the checked clusters (e.g. \"20%\"), or \"off\"";
    match value {
        toml::Value::Integer(n) if (1..=1_000_000).contains(n) => {
            Ok(StormThreshold::Clusters(*n as usize))
        }
        toml::Value::Integer(n) => Err(format!("is {n}; {HOW}")),
        toml::Value::String(s) if s.trim() == "off" => Ok(StormThreshold::Off),
        toml::Value::String(s) => match s.trim().strip_suffix('%').map(|p| p.trim().parse::<u32>())
        {
            Some(Ok(p)) if (1..=100).contains(&p) => Ok(StormThreshold::Percent(p)),
            _ => Err(format!("is {s:?}; {HOW}")),
        },
        other => Err(format!(
            "must be a number or a string, not {}; {HOW}",
            other.type_str()
        )),
    }
}

/// `[http]`.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// Where `/metrics` and `/healthz` listen; `None` when turned off (`listen = ""`).
    pub listen: Option<std::net::SocketAddr>,
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// `[log]`.
#[derive(Debug, Clone)]
pub struct LogSettings {
    /// A tracing filter directive, e.g. `info` or `cks_drift=debug`; `RUST_LOG` overrides it.
    pub level: String,
    pub format: LogFormat,
}

/// `[database]`: the CloudStack database, read for the exact VM map and for the lock that lets
/// one of several instances check at a time.
#[derive(Debug, Clone, PartialEq)]
pub struct DatabaseSettings {
    /// `mysql://user@host:port/name` as configured (it holds no password).
    pub url: String,
    pub host: String,
    pub port: u16,
    pub user: String,
    /// The database name, `cloud` in CloudStack's packages.
    pub name: String,
    pub password: Secret,
    /// Encrypt the connection and verify the server's certificate.
    pub tls: bool,
    /// PEM bundle of the CA that signs the database server's certificate (implies `tls`).
    pub ca_file: Option<PathBuf>,
    /// TCP connect and login.
    pub connect_timeout: Duration,
    /// One query, from sending it to its last row.
    pub query_timeout: Duration,
    /// How often a standby instance asks for the lock, and the active one confirms it holds it.
    pub lock_interval: Duration,
}

/// The whole validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub cloudstack: CloudStackSettings,
    pub ssh: SshSettings,
    pub check: CheckSettings,
    pub state: StateSettings,
    pub notify: NotifySettings,
    pub http: HttpSettings,
    pub log: LogSettings,
    /// `None` without a `[database]` table: everything is read through the API.
    pub database: Option<DatabaseSettings>,
    /// `None` without an `[alertmanager]` table.
    pub alertmanager: Option<AlertmanagerSettings>,
    /// `[[ignore]]`: drift an operator has accepted, in file order.
    pub ignore: Vec<IgnoreRule>,
    /// The files secrets were read from (`cloudstack.api_key_file`, ...), by key: their
    /// access is checked at start as `validate-config` checks it.
    pub secret_files: Vec<(String, PathBuf)>,
}

/// `[alertmanager]`: where every open finding is also an alert.
#[derive(Debug, Clone)]
pub struct AlertmanagerSettings {
    /// Base URLs of the Alertmanagers of one cluster (`/api/v2/alerts` is added); each gets
    /// every alert.
    pub urls: Vec<String>,
    pub auth: AlertmanagerAuth,
    pub ca_file: Option<PathBuf>,
    pub insecure: bool,
    /// Deadline of one request.
    pub timeout: Duration,
    /// Added to every alert's annotations when set.
    pub runbook_url: Option<String>,
}

/// An example of `alertmanager.urls`, for its problems.
const ALERTMANAGER_URLS_EXAMPLE: &str = "e.g. [\"http://127.0.0.1:9093\"]";

/// How cks-drift authenticates to Alertmanager.
#[derive(Debug, Clone)]
pub enum AlertmanagerAuth {
    None,
    Basic { username: String, password: Secret },
    Bearer(Secret),
}

/// The kinds of finding, as the report names them: what `[[ignore]]`'s `kind` may be.
pub const KIND_NAMES: [&str; 7] = [
    "mapped_vm",
    "unmapped_vm",
    "node_without_vm",
    "vm_not_a_node",
    "map_count",
    "blind",
    "identity_conflict",
];

/// Whether `s` is a UUID (8-4-4-4-12 hexadecimal digits, either case): how CloudStack writes
/// the ids of VMs and clusters, unique in the whole cloud, unlike their names.
pub fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.bytes().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// One `[[ignore]]` rule: findings it matches are reported, marked ignored, and not alerted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoreRule {
    /// 1-based position among the `[[ignore]]` tables, as messages and metrics name it.
    pub number: usize,
    /// Cluster name or id.
    pub cluster: Option<String>,
    pub kind: Option<String>,
    /// VM name or id.
    pub vm: Option<String>,
    /// Node name.
    pub node: Option<String>,
    pub reason: String,
    pub expires: Option<crate::base::time::Timestamp>,
    pub by: Option<String>,
}

/// The key of `field` in the `[[ignore]]` rule at 1-based position `number`.
fn rule_key(number: usize, field: &str) -> String {
    format!("ignore[{number}].{field}")
}

/// The fields of an `[[ignore]]` rule.
const IGNORE_FIELDS: [&str; 7] = ["cluster", "kind", "vm", "node", "reason", "expires", "by"];

/// `expires`: an RFC 3339 date-time, or a date alone (its midnight UTC); a TOML date-time or a
/// string.
pub fn parse_expiry(value: &toml::Value) -> Result<crate::base::time::Timestamp, String> {
    const HOW: &str = "give an RFC 3339 date-time such as 2026-12-31T00:00:00Z, or a date such as 2026-12-31 (its midnight UTC)";
    let text = match value {
        toml::Value::String(s) => s.trim().to_string(),
        toml::Value::Datetime(d) => d.to_string(),
        other => {
            return Err(format!(
                "must be a date-time, not {}; {HOW}",
                other.type_str()
            ));
        }
    };
    let full = if text.len() == 10 {
        format!("{text}T00:00:00Z")
    } else {
        text.clone()
    };
    let zoned = full.ends_with('Z')
        || full.ends_with('z')
        || full.len() > 19 && matches!(full.as_bytes()[full.len() - 6], b'+' | b'-');
    match crate::base::time::Timestamp::parse(&full) {
        Some(t) if zoned => Ok(t),
        Some(_) => Err(format!("is {text:?}, which has no time zone; {HOW}")),
        None => Err(format!("is {text:?}; {HOW}")),
    }
}

/// One problem with the configuration, named by its full key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub key: String,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

/// Why a configuration could not be used: every problem found, not just the first.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {reason}")]
    Read { path: PathBuf, reason: String },
    #[error("config file {path} is not valid TOML: {detail}")]
    Syntax { path: PathBuf, detail: String },
    #[error("config file {}{}", path.display(), list_problems(problems))]
    Invalid {
        path: PathBuf,
        problems: Vec<Problem>,
    },
}

/// One problem on the same line; several on lines of their own below a count.
fn list_problems(problems: &[Problem]) -> String {
    match problems {
        [one] => format!(": {one}"),
        _ => format!(
            " has {} problems:\n{}",
            problems.len(),
            problems
                .iter()
                .map(|p| format!("  {p}"))
                .collect::<Vec<_>>()
                .join("\n")
        ),
    }
}

/// A TOML error on one line: where it is, then what is wrong (the source excerpt between
/// them is left out).
fn one_line(e: &toml::de::Error) -> String {
    let text = e.to_string();
    let place = text.lines().next().unwrap_or("").trim();
    let what = e.message().split_whitespace().collect::<Vec<_>>().join(" ");
    if place.is_empty() || place == what {
        what
    } else {
        format!("{place}: {what}")
    }
}

/// Environment variables that override the secret keys (for containers and systemd
/// credentials).
pub const ENV_API_KEY: &str = "CKS_DRIFT_API_KEY";
pub const ENV_SECRET_KEY: &str = "CKS_DRIFT_SECRET_KEY";
/// The environment variable that gives the database password (it wins over `password_file`).
pub const ENV_DB_PASSWORD: &str = "CKS_DRIFT_DB_PASSWORD";

pub const DEFAULT_STATE_PATH: &str = "/var/lib/cks-drift/state.json";
pub const DEFAULT_KNOWN_HOSTS: &str = "/var/lib/cks-drift/known_hosts";
/// Lists each node's name, readiness, system UUID and provider ID
/// (`remote::kubectl::LIST_ARGUMENTS`).
pub const DEFAULT_COMMAND: &str = "sudo -n /opt/bin/kubectl get nodes --no-headers \
    -o 'custom-columns=NAME:.metadata.name,READY:.status.conditions[?(@.type==\"Ready\")].status,\
    UUID:.status.nodeInfo.systemUUID,PROVIDER:.spec.providerID'";
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9712";
/// `check.blind_after`'s default.
pub const DEFAULT_BLIND_AFTER: Duration = Duration::from_secs(30 * 60);

/// Every key the file may hold, by table. Anything else is reported as unknown.
const KNOWN_KEYS: &[(&str, &[&str])] = &[
    (
        "cloudstack",
        &[
            "url",
            "api_key",
            "api_key_file",
            "secret_key",
            "secret_key_file",
            "timeout",
            "ca_file",
            "insecure",
            "page_size",
        ],
    ),
    (
        "ssh",
        &[
            "private_key",
            "user",
            "known_hosts",
            "host_key_policy",
            "connect_timeout",
            "command_timeout",
            "command",
        ],
    ),
    (
        "check",
        &[
            "enabled",
            "interval",
            "initial_delay",
            "grace_period",
            "concurrency",
            "blind_after",
            "resolve_after",
        ],
    ),
    ("state", &["path"]),
    (
        "notify",
        &[
            "alerts",
            "alert_types",
            "alert_cap",
            "owner_alert_cap",
            "owner_alerts_per_hour",
            "annotations",
            "event_log",
            "storm_clusters",
        ],
    ),
    ("http", &["listen"]),
    ("log", &["level", "format"]),
    (
        "database",
        &[
            "url",
            "password_file",
            "tls",
            "ca_file",
            "connect_timeout",
            "query_timeout",
            "lock_interval",
        ],
    ),
    (
        "alertmanager",
        &[
            "urls",
            "username",
            "password_file",
            "bearer_token_file",
            "ca_file",
            "insecure",
            "timeout",
            "runbook_url",
        ],
    ),
];

/// The warning of a plain `http://` API endpoint, at start and in `validate-config`.
pub const PLAIN_HTTP: &str = "is a plain http:// URL: every request's signature and the answers \
     travel in clear, so anything on the way can read them, replay a request within its expiry \
     and forge answers; use https:// (with cloudstack.ca_file for a private CA)";

/// `localhost` or a loopback address: a connection that never leaves the host.
pub fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The warning of `database.tls = false` for a database on another host, at start and in
/// `validate-config`.
pub fn database_in_clear(host: &str) -> String {
    format!(
        "is false while the database is on {host}: the password, the VM map and the lock's \
         answers travel in clear and can be read or changed on the way; remove the line (TLS \
         is on by default for a host other than loopback), with database.ca_file for a private CA"
    )
}

/// The warning of `ssh.host_key_policy = "off"`, at start and in `validate-config`.
pub const HOST_KEYS_OFF: &str = "is \"off\": any host key is accepted, so a machine posing as a \
     control node is trusted; use \"accept-new\" (the default) or \"strict\"";

const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(86_400);

/// Keys that do not exist on purpose, and why: what people look for and where it comes from.
const NOT_KEYS: &[(&str, &str)] = &[
    (
        "ssh.port",
        "there is no port to set: each cluster's port follows CKS, 22 on Shared or ROUTED \
         networks with one control node, else 2222 (the port forwarding rule CKS creates to \
         the first control node)",
    ),
    (
        "ssh.host",
        "there is no host to set: each cluster's control node is reached at the address of \
         its endpoint",
    ),
    (
        "ssh.passphrase",
        "passphrases are not supported; give an unencrypted key (ssh-keygen -p -N '' -f \
         <copy of the key>)",
    ),
    (
        "database.port",
        "the port is part of database.url, e.g. \"mysql://cksdrift@db.example.com:3306/cloud\"",
    ),
    (
        "database.password",
        "a password is never written in the config; put it in database.password_file or \
         CKS_DRIFT_DB_PASSWORD",
    ),
];

/// The problem of an unknown key: the reason where it does not exist on purpose, else the
/// nearest known key in any table ("did you mean"), then the keys its table takes.
fn unknown_key(table: &str, key: &str) -> String {
    let full = format!("{table}.{key}");
    let takes = KNOWN_KEYS
        .iter()
        .find(|(t, _)| *t == table)
        .map(|(_, keys)| format!("[{table}] takes {}", keys.join(", ")))
        .unwrap_or_default();
    if let Some((_, why)) = NOT_KEYS.iter().find(|(k, _)| *k == full) {
        return format!("is not a key: {why}; {takes}");
    }
    // The same name in another table first (a key put in the wrong table), then the closest
    // spelling anywhere.
    let everywhere = KNOWN_KEYS
        .iter()
        .flat_map(|(t, keys)| keys.iter().map(move |k| (*t, *k)));
    let best = everywhere
        .map(|(t, k)| {
            let score = if k == key {
                1.0
            } else {
                strsim::jaro_winkler(key, k) - if t == table { 0.0 } else { 0.05 }
            };
            (score, t, k)
        })
        .filter(|(score, ..)| *score >= 0.85)
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match best {
        Some((_, t, k)) => format!("is not a known key; did you mean {t}.{k}? {takes}"),
        None => format!("is not a known key; {takes}"),
    }
}

/// A duration as people write it in the config: `0s`, `1m30s`, `5m`, `1h30m`, `7d`, `250ms`
/// (whole milliseconds below a second, or when a second is not whole).
pub fn human_duration(d: Duration) -> String {
    let mut secs = d.as_secs();
    if d.subsec_nanos() != 0 {
        return format!("{}ms", d.as_millis());
    }
    if secs == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    for (unit, size) in [("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)] {
        if secs >= size {
            out.push_str(&format!("{}{unit}", secs / size));
            secs %= size;
        }
    }
    out
}

/// A measured duration, rounded as people would say it: `340ms`, `1.5s`, `12s`, `5m12s`.
pub fn human_elapsed(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else if d < MINUTE {
        let tenths = (d.as_millis() + 50) / 100;
        match tenths % 10 {
            0 => format!("{}s", tenths / 10),
            t => format!("{}.{t}s", tenths / 10),
        }
    } else {
        human_duration(Duration::from_secs(d.as_secs_f64().round() as u64))
    }
}

/// Parses a duration with a unit: `500ms`, `30s`, `5m`, `1h`, `1d`, or a sum like `1h30m`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("is empty; give a number with a unit, e.g. \"30s\" or \"5m\"".into());
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return Err(format!(
                "{s:?} is not a duration; use e.g. \"30s\", \"5m\", \"1h\""
            ));
        }
        let n: u64 = rest[..digits]
            .parse()
            .map_err(|_| format!("{s:?} has a number too large"))?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(|c| c.is_ascii_alphabetic()).count();
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let part = match unit {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n.saturating_mul(60)),
            "h" => Duration::from_secs(n.saturating_mul(3600)),
            "d" => Duration::from_secs(n.saturating_mul(86_400)),
            "" => {
                return Err(format!(
                    "{s:?} has no unit; write e.g. \"{n}s\" or \"{n}m\""
                ));
            }
            other => {
                return Err(format!(
                    "{s:?} has an unknown unit {other:?}; use ms, s, m, h or d"
                ));
            }
        };
        total = total
            .checked_add(part)
            .ok_or_else(|| format!("{s:?} is too long a duration"))?;
    }
    Ok(total)
}

/// Reads typed values out of the TOML tables, collecting every problem with its full key.
struct Reader<'a> {
    root: &'a toml::Table,
    problems: Vec<Problem>,
    /// The files secrets were read from, by key.
    secret_files: Vec<(String, PathBuf)>,
}

impl<'a> Reader<'a> {
    fn problem(&mut self, key: &str, message: impl Into<String>) {
        self.problems.push(Problem {
            key: key.to_string(),
            message: message.into(),
        });
    }

    fn value(&self, key: &str) -> Option<&'a toml::Value> {
        let (table, name) = key.split_once('.')?;
        self.root.get(table)?.as_table()?.get(name)
    }

    fn string(&mut self, key: &str) -> Option<String> {
        match self.value(key)? {
            toml::Value::String(s) => Some(s.clone()),
            other => {
                self.problem(key, format!("must be a string, not {}", other.type_str()));
                None
            }
        }
    }

    fn bool(&mut self, key: &str, default: bool) -> bool {
        match self.value(key) {
            None => default,
            Some(toml::Value::Boolean(b)) => *b,
            Some(other) => {
                self.problem(
                    key,
                    format!("must be true or false, not {}", other.type_str()),
                );
                default
            }
        }
    }

    fn int(&mut self, key: &str, default: i64, min: i64, max: i64) -> i64 {
        match self.value(key) {
            None => default,
            Some(toml::Value::Integer(n)) if (min..=max).contains(n) => *n,
            Some(toml::Value::Integer(n)) => {
                self.problem(key, format!("is {n}; it must be between {min} and {max}"));
                default
            }
            Some(other) => {
                self.problem(
                    key,
                    format!("must be a whole number, not {}", other.type_str()),
                );
                default
            }
        }
    }

    /// A duration between `min` and `max`: past `max` a setting makes no sense, and a
    /// deadline that far ahead would overflow the clock.
    fn duration(&mut self, key: &str, default: &str, min: Duration, max: Duration) -> Duration {
        let text = self.string(key).unwrap_or_else(|| default.to_string());
        match parse_duration(&text) {
            Ok(d) if d >= min && d <= max => d,
            Ok(d) if d < min => {
                let min_text = human_duration(min);
                self.problem(key, format!("is {text:?}; it must be at least {min_text}"));
                parse_duration(default).unwrap_or(min)
            }
            Ok(_) => {
                let max_text = human_duration(max);
                self.problem(key, format!("is {text:?}; it must be at most {max_text}"));
                parse_duration(default).unwrap_or(min)
            }
            Err(e) => {
                self.problem(key, e);
                parse_duration(default).unwrap_or(min)
            }
        }
    }

    fn path(&mut self, key: &str) -> Option<PathBuf> {
        let s = self.string(key)?;
        if s.trim().is_empty() {
            self.problem(key, "is empty; give a file path");
            return None;
        }
        Some(PathBuf::from(s))
    }

    /// A secret from `<key>`, `<key>_file` or the environment (which wins).
    fn secret(
        &mut self,
        key: &str,
        env_name: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Secret {
        if let Some(v) = env(env_name).filter(|v| !v.trim().is_empty()) {
            return Secret::new(v.trim());
        }
        let file_key = format!("{key}_file");
        let inline = self.string(key);
        let file = self.path(&file_key);
        match (inline, file) {
            (Some(_), Some(_)) => {
                self.problem(
                    key,
                    format!("is set together with {file_key}; keep one of them"),
                );
                Secret::new("")
            }
            (Some(v), None) if !v.trim().is_empty() => Secret::new(v.trim()),
            (None, Some(path)) => self.secret_file(&file_key, &path),
            _ => {
                self.problem(
                    key,
                    format!(
                        "is missing; set {key}, {file_key}, or the environment variable {env_name}"
                    ),
                );
                Secret::new("")
            }
        }
    }
}

/// The tables of the file, one method each: every key read with its default, and every
/// problem recorded with its full key.
impl Reader<'_> {
    /// Tables and keys no release knows, each problem naming the closest known one.
    fn unknown_keys(&mut self) {
        for (table, value) in self.root {
            if table == "ignore" {
                // An array of tables, read (and checked) by `ignore_rules`.
                continue;
            }
            match KNOWN_KEYS.iter().find(|(t, _)| t == table) {
                None => self.problem(&key_name(table), unknown_table(table)),
                Some((_, keys)) => match value.as_table() {
                    None => self.problem(table, "must be a table"),
                    Some(t) => {
                        for key in t.keys() {
                            if !keys.contains(&key.as_str()) {
                                self.problem(
                                    &format!("{table}.{}", key_name(key)),
                                    unknown_key(table, key),
                                );
                            }
                        }
                    }
                },
            }
        }
    }

    /// `[cloudstack]`.
    fn cloudstack(&mut self, env: &dyn Fn(&str) -> Option<String>) -> CloudStackSettings {
        let url = self.cloudstack_url();
        let api_key = self.secret("cloudstack.api_key", ENV_API_KEY, env);
        let secret_key = self.secret("cloudstack.secret_key", ENV_SECRET_KEY, env);
        CloudStackSettings {
            url,
            api_key,
            secret_key,
            timeout: self.duration("cloudstack.timeout", "30s", Duration::from_secs(1), HOUR),
            ca_file: self.path("cloudstack.ca_file"),
            insecure: self.bool("cloudstack.insecure", false),
            page_size: self.int("cloudstack.page_size", 500, 1, 10_000) as u32,
        }
    }

    /// `cloudstack.url`: an http:// or https:// endpoint, without a query string or
    /// credentials. Kept as written (trimmed) even when it has a problem.
    fn cloudstack_url(&mut self) -> String {
        let Some(u) = self.string("cloudstack.url") else {
            self.problem("cloudstack.url", "is missing; set it to the API endpoint, e.g. \"https://cloud.example.com/client/api\"");
            return String::new();
        };
        let u = u.trim().to_string();
        // Messages never show a password written into the URL.
        let shown = redacted_url(&u);
        match reqwest::Url::parse(&u) {
            Ok(parsed)
                if matches!(parsed.scheme(), "http" | "https") && parsed.host().is_some() =>
            {
                if parsed.query().is_some() {
                    self.problem("cloudstack.url", format!("{shown:?} has a query string; give only the endpoint, e.g. \"https://cloud.example.com/client/api\""));
                }
                // It would be sent as basic auth, and shown in every warning naming
                // the URL; the API takes the API key and secret key only.
                if !parsed.username().is_empty() || parsed.password().is_some() {
                    self.problem("cloudstack.url", format!("{shown:?} holds a user name or password; remove \"user:password@\": CloudStack's API takes the API key and secret key only (cloudstack.api_key_file, cloudstack.secret_key_file)"));
                }
            }
            Ok(_) => {
                self.problem("cloudstack.url", format!("{shown:?} must be an http:// or https:// URL, e.g. \"https://cloud.example.com/client/api\""));
            }
            Err(e) => {
                self.problem("cloudstack.url", format!("{shown:?} is not a URL ({e}); e.g. \"https://cloud.example.com/client/api\""));
            }
        }
        u
    }

    /// `[ssh]`.
    fn ssh(&mut self) -> SshSettings {
        let private_key = self.path("ssh.private_key").unwrap_or_else(|| {
            if self.value("ssh.private_key").is_none() {
                self.problem("ssh.private_key", PRIVATE_KEY_MISSING);
            }
            PathBuf::new()
        });
        let host_key_policy = self.host_key_policy();
        let user = self.string("ssh.user").unwrap_or_else(|| "cloud".into());
        if user.trim().is_empty() {
            self.problem("ssh.user", "is empty; CKS nodes use \"cloud\"");
        }
        let command = self
            .string("ssh.command")
            .unwrap_or_else(|| DEFAULT_COMMAND.into());
        if command.trim().is_empty() {
            self.problem(
                "ssh.command",
                format!("is empty; the default is {DEFAULT_COMMAND:?}"),
            );
        }
        SshSettings {
            private_key,
            user,
            known_hosts: self
                .path("ssh.known_hosts")
                .unwrap_or_else(|| DEFAULT_KNOWN_HOSTS.into()),
            host_key_policy,
            connect_timeout: self.duration(
                "ssh.connect_timeout",
                "10s",
                Duration::from_millis(100),
                10 * MINUTE,
            ),
            command_timeout: self.duration(
                "ssh.command_timeout",
                "20s",
                Duration::from_secs(1),
                HOUR,
            ),
            command,
        }
    }

    /// `ssh.host_key_policy`, `accept-new` when it is not set.
    fn host_key_policy(&mut self) -> HostKeyPolicy {
        match self.string("ssh.host_key_policy").as_deref() {
            None | Some("accept-new") => HostKeyPolicy::AcceptNew,
            Some("strict") => HostKeyPolicy::Strict,
            Some("off") => HostKeyPolicy::Off,
            Some(other) => {
                self.problem(
                    "ssh.host_key_policy",
                    format!("is {other:?}; use \"strict\", \"accept-new\" or \"off\""),
                );
                HostKeyPolicy::AcceptNew
            }
        }
    }

    /// `[check]`.
    fn check(&mut self) -> CheckSettings {
        CheckSettings {
            enabled: self.bool("check.enabled", true),
            interval: self.duration("check.interval", "5m", Duration::from_secs(1), 7 * DAY),
            initial_delay: self.duration("check.initial_delay", "0s", Duration::ZERO, DAY),
            grace_period: self.duration("check.grace_period", "15m", Duration::ZERO, 30 * DAY),
            concurrency: self.int("check.concurrency", 8, 1, 1024) as usize,
            blind_after: self.duration("check.blind_after", "30m", Duration::ZERO, 30 * DAY),
            resolve_after: self.duration("check.resolve_after", "15m", Duration::ZERO, DAY),
        }
    }

    /// `[state]`.
    fn state(&mut self) -> StateSettings {
        StateSettings {
            path: self
                .path("state.path")
                .unwrap_or_else(|| DEFAULT_STATE_PATH.into()),
        }
    }

    /// `[notify]`; the event log is beside the state file at `state_path` unless it is set.
    fn notify(&mut self, state_path: &std::path::Path) -> NotifySettings {
        let event_log = self.path("notify.event_log").unwrap_or_else(|| {
            state_path
                .parent()
                .unwrap_or(std::path::Path::new("."))
                .join("events.jsonl")
        });
        let alert_types = self.alert_types();
        NotifySettings {
            alerts: self.bool("notify.alerts", true),
            alert_types,
            alert_cap: self.int("notify.alert_cap", 5, 1, 1000) as usize,
            owner_alert_cap: self.int("notify.owner_alert_cap", 100, 1, 100_000) as usize,
            owner_alerts_per_hour: self.int("notify.owner_alerts_per_hour", 20, 1, 100_000)
                as usize,
            annotations: self.bool("notify.annotations", true),
            event_log,
            storm_clusters: self.storm_clusters(),
        }
    }

    /// `notify.alert_types`, `3000-3999` when it is not set.
    fn alert_types(&mut self) -> std::ops::RangeInclusive<u32> {
        let text = self
            .string("notify.alert_types")
            .unwrap_or_else(|| "3000-3999".into());
        match parse_range(&text) {
            Ok(range) => range,
            Err(e) => {
                self.problem("notify.alert_types", e);
                3000..=3999
            }
        }
    }

    /// `notify.storm_clusters`, [`DEFAULT_STORM_CLUSTERS`] when it is not set.
    fn storm_clusters(&mut self) -> StormThreshold {
        match self.value("notify.storm_clusters") {
            None => DEFAULT_STORM_CLUSTERS,
            Some(v) => parse_storm_clusters(v).unwrap_or_else(|e| {
                self.problem("notify.storm_clusters", e);
                DEFAULT_STORM_CLUSTERS
            }),
        }
    }

    /// `[http]`.
    fn http(&mut self) -> HttpSettings {
        let listen_text = self
            .string("http.listen")
            .unwrap_or_else(|| DEFAULT_LISTEN.into());
        let listen = if listen_text.trim().is_empty() {
            None
        } else {
            match listen_text.trim().parse() {
                Ok(addr) => Some(addr),
                Err(_) => {
                    self.problem("http.listen", format!("{listen_text:?} is not an address:port, e.g. {DEFAULT_LISTEN:?}; use \"\" to turn the endpoint off"));
                    None
                }
            }
        };
        HttpSettings { listen }
    }

    /// `[log]`.
    fn log(&mut self) -> LogSettings {
        let format = match self.string("log.format").as_deref() {
            None | Some("text") => LogFormat::Text,
            Some("json") => LogFormat::Json,
            Some(other) => {
                self.problem(
                    "log.format",
                    format!("is {other:?}; use \"text\" or \"json\""),
                );
                LogFormat::Text
            }
        };
        let log = LogSettings {
            level: self.string("log.level").unwrap_or_else(|| "info".into()),
            format,
        };
        if tracing_subscriber::EnvFilter::try_new(&log.level).is_err() {
            self.problem(
                "log.level",
                format!(
                    "{:?} is not a log filter; use e.g. \"info\" or \"debug\"",
                    log.level
                ),
            );
        }
        log
    }
}

impl Reader<'_> {
    /// A secret read from the file at `path`, named by `key` when it cannot be read.
    fn secret_file(&mut self, key: &str, path: &std::path::Path) -> Secret {
        self.secret_files
            .push((key.to_string(), path.to_path_buf()));
        match std::fs::read_to_string(path) {
            Ok(v) if !v.trim().is_empty() => Secret::new(v.trim()),
            Ok(_) => {
                self.problem(key, format!("file {} is empty", path.display()));
                Secret::new("")
            }
            Err(e) => {
                let why = match e.kind() {
                    std::io::ErrorKind::PermissionDenied => {
                        crate::config::secret_file::permission_denied(path)
                    }
                    std::io::ErrorKind::NotFound => format!(
                        "no such file; create it holding {} and nothing else, readable by the service alone: install -m 0640 -g cks-drift /dev/null {p}, then write the value into it",
                        secret_of(key),
                        p = path.display()
                    ),
                    _ => e.to_string(),
                };
                self.problem(key, format!("cannot read {}: {why}", path.display()));
                Secret::new("")
            }
        }
    }

    /// `[alertmanager]`, when the file has one.
    fn alertmanager(&mut self) -> Option<AlertmanagerSettings> {
        self.root.get("alertmanager")?.as_table()?;
        let urls = self.alertmanager_urls();
        let auth = self.alertmanager_auth();
        let runbook_url = self
            .string("alertmanager.runbook_url")
            .map(|u| u.trim().to_string());
        Some(AlertmanagerSettings {
            urls,
            auth,
            ca_file: self.path("alertmanager.ca_file"),
            insecure: self.bool("alertmanager.insecure", false),
            timeout: self.duration(
                "alertmanager.timeout",
                "10s",
                Duration::from_millis(100),
                10 * MINUTE,
            ),
            runbook_url,
        })
    }

    /// `alertmanager.urls`: the usable URLs it lists, each without a trailing `/`.
    fn alertmanager_urls(&mut self) -> Vec<String> {
        match self.value("alertmanager.urls") {
            None => {
                self.problem(
                    "alertmanager.urls",
                    format!(
                        "is missing; list the Alertmanagers, {ALERTMANAGER_URLS_EXAMPLE}, or remove [alertmanager]"
                    ),
                );
                Vec::new()
            }
            Some(toml::Value::Array(items)) => {
                let urls = items
                    .iter()
                    .filter_map(|item| self.alertmanager_url(item))
                    .collect();
                if items.is_empty() {
                    self.problem(
                        "alertmanager.urls",
                        format!("is empty; {ALERTMANAGER_URLS_EXAMPLE}"),
                    );
                }
                urls
            }
            Some(other) => {
                self.problem(
                    "alertmanager.urls",
                    format!(
                        "must be a list of URLs, not {}; {ALERTMANAGER_URLS_EXAMPLE}",
                        other.type_str()
                    ),
                );
                Vec::new()
            }
        }
    }

    /// One item of `alertmanager.urls`: an http:// or https:// URL without credentials, else
    /// `None` and its problem.
    fn alertmanager_url(&mut self, item: &toml::Value) -> Option<String> {
        let parsed = item
            .as_str()
            .map(str::trim)
            .map(|u| (u, reqwest::Url::parse(u)));
        match parsed {
            // Credentials in the URL would be sent as basic auth and shown in every
            // warning naming the URL; the auth keys keep them out of both.
            Some((u, Ok(p))) if !p.username().is_empty() || p.password().is_some() => {
                self.problem(
                    "alertmanager.urls",
                    format!(
                        "holds {:?}, a URL with a user name or password; remove \
                         \"user:password@\" from it and set alertmanager.username and \
                         alertmanager.password_file (or alertmanager.bearer_token_file) \
                         instead",
                        redacted_url(u)
                    ),
                );
                None
            }
            Some((u, Ok(p))) if matches!(p.scheme(), "http" | "https") => {
                Some(u.trim_end_matches('/').to_string())
            }
            _ => {
                self.problem(
                    "alertmanager.urls",
                    format!(
                        "holds {}, which is not an http:// or https:// URL; {ALERTMANAGER_URLS_EXAMPLE}",
                        redacted_url(&item.to_string())
                    ),
                );
                None
            }
        }
    }

    /// How cks-drift authenticates to the Alertmanagers: basic auth (`username` and
    /// `password_file`), a bearer token, or neither; never both.
    fn alertmanager_auth(&mut self) -> AlertmanagerAuth {
        let username = self.string("alertmanager.username");
        let password = self.path("alertmanager.password_file");
        let bearer = self.path("alertmanager.bearer_token_file");
        match (username, password, bearer) {
            (None, None, None) => AlertmanagerAuth::None,
            (Some(_), _, Some(_)) | (_, Some(_), Some(_)) => {
                self.problem(
                    "alertmanager.bearer_token_file",
                    "is set together with basic auth (username, password_file); keep one of them",
                );
                AlertmanagerAuth::None
            }
            (None, None, Some(path)) => {
                AlertmanagerAuth::Bearer(self.secret_file("alertmanager.bearer_token_file", &path))
            }
            (Some(username), Some(path), None) => AlertmanagerAuth::Basic {
                username,
                password: self.secret_file("alertmanager.password_file", &path),
            },
            (Some(_), None, None) => {
                self.problem(
                    "alertmanager.password_file",
                    "is missing while alertmanager.username is set; point it at a file holding the password",
                );
                AlertmanagerAuth::None
            }
            (None, Some(_), None) => {
                self.problem(
                    "alertmanager.username",
                    "is missing while alertmanager.password_file is set",
                );
                AlertmanagerAuth::None
            }
        }
    }

    /// `[[ignore]]`, in file order.
    fn ignore_rules(&mut self) -> Vec<IgnoreRule> {
        let Some(value) = self.root.get("ignore") else {
            return Vec::new();
        };
        let Some(items) = value.as_array() else {
            self.problem(
                "ignore",
                "must be written [[ignore]]: a list of rules, each a table",
            );
            return Vec::new();
        };
        items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| self.ignore_rule(i + 1, item))
            .collect()
    }

    /// The `[[ignore]]` rule at 1-based position `number`; `None` when it is not a table.
    /// A rule with problems is still returned: the problems refuse the whole config.
    fn ignore_rule(&mut self, number: usize, item: &toml::Value) -> Option<IgnoreRule> {
        let Some(t) = item.as_table() else {
            self.problem(&format!("ignore[{number}]"), "must be a table");
            return None;
        };
        for key in t.keys() {
            if !IGNORE_FIELDS.contains(&key.as_str()) {
                self.problem(
                    &rule_key(number, &key_name(key)),
                    format!(
                        "is not a known field; a rule takes {}",
                        IGNORE_FIELDS.join(", ")
                    ),
                );
            }
        }
        // The fields are read in this order, and their problems are listed in it.
        let rule = IgnoreRule {
            number,
            cluster: self.rule_text(number, t, "cluster"),
            kind: self.rule_text(number, t, "kind"),
            vm: self.rule_text(number, t, "vm"),
            node: self.rule_text(number, t, "node"),
            reason: self.rule_text(number, t, "reason").unwrap_or_default(),
            expires: None,
            by: self.rule_text(number, t, "by"),
        };
        self.rule_scope(&rule);
        // An empty or mistyped reason has its problem already.
        if !t.contains_key("reason") {
            self.problem(
                &rule_key(number, "reason"),
                "is missing; say why this drift is accepted (it is shown with every finding the rule matches)",
            );
        }
        let expires = self.rule_expiry(number, t);
        Some(IgnoreRule { expires, ..rule })
    }

    /// A text field of rule `number`: trimmed, and `None` when it is absent, empty or not a
    /// string (with the problem of the last two).
    fn rule_text(&mut self, number: usize, t: &toml::Table, field: &str) -> Option<String> {
        match t.get(field)? {
            toml::Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
            toml::Value::String(_) => {
                self.problem(&rule_key(number, field), "is empty");
                None
            }
            other => {
                self.problem(
                    &rule_key(number, field),
                    format!("must be a string, not {}", other.type_str()),
                );
                None
            }
        }
    }

    /// Problems with what a rule matches: a kind no finding has, every finding, or a name
    /// in every tenant's clusters.
    fn rule_scope(&mut self, rule: &IgnoreRule) {
        let number = rule.number;
        if let Some(k) = &rule.kind
            && !KIND_NAMES.contains(&k.as_str())
        {
            self.problem(
                &rule_key(number, "kind"),
                format!("is {k:?}; the kinds are {}", KIND_NAMES.join(", ")),
            );
        }
        if rule.cluster.is_none() && rule.kind.is_none() && rule.vm.is_none() && rule.node.is_none()
        {
            self.problem(
                &format!("ignore[{number}]"),
                "matches every finding; give at least one of cluster, kind, vm and node",
            );
        }
        // A name is the tenant's to choose and not unique: a VM or node name without a
        // cluster would match that name in every tenant's cluster. A VM's id is unique in
        // the whole cloud.
        if rule.cluster.is_none() {
            if rule.node.is_some() {
                self.problem(
                    &rule_key(number, "cluster"),
                    "is missing: a rule with a node names its cluster (by id, or by name), or it matches that node name in every tenant's cluster",
                );
            } else if rule.vm.as_deref().is_some_and(|v| !is_uuid(v)) {
                self.problem(
                    &rule_key(number, "cluster"),
                    "is missing: a rule with a VM name names its cluster (by id, or by name), or it matches that VM name in every tenant's cluster; or give the VM's id instead of its name",
                );
            }
        }
    }

    /// `expires` of rule `number`, when it has one that parses.
    fn rule_expiry(
        &mut self,
        number: usize,
        t: &toml::Table,
    ) -> Option<crate::base::time::Timestamp> {
        match parse_expiry(t.get("expires")?) {
            Ok(when) => Some(when),
            Err(e) => {
                self.problem(&rule_key(number, "expires"), e);
                None
            }
        }
    }

    /// `[database]`, when the file has one.
    fn database(&mut self, env: &dyn Fn(&str) -> Option<String>) -> Option<DatabaseSettings> {
        self.root.get("database")?.as_table()?;
        const EXAMPLE: &str = "e.g. \"mysql://cksdrift@db.example.com:3306/cloud\"";
        let url = match self.string("database.url") {
            Some(u) => u.trim().to_string(),
            None => {
                self.problem(
                    "database.url",
                    format!("is missing; set it to the CloudStack database, {EXAMPLE}, or remove [database] to read everything through the API"),
                );
                String::new()
            }
        };
        let (host, port, user, name) = match parse_database_url(&url) {
            Ok(parts) => parts,
            Err(e) if url.is_empty() => {
                let _ = e;
                (String::new(), 3306, String::new(), String::new())
            }
            Err(e) => {
                self.problem("database.url", format!("{e}; {EXAMPLE}"));
                (String::new(), 3306, String::new(), String::new())
            }
        };
        let password = match env(ENV_DB_PASSWORD).filter(|v| !v.trim().is_empty()) {
            Some(v) => Secret::new(v.trim()),
            None => match self.path("database.password_file") {
                Some(path) => self.secret_file("database.password_file", &path),
                None => {
                    if self.value("database.password_file").is_none() {
                        let whose = if user.is_empty() {
                            "the database user".to_string()
                        } else {
                            format!("{user:?}")
                        };
                        self.problem(
                            "database.password_file",
                            format!("is missing; point it at a file holding the password of {whose}, or set {ENV_DB_PASSWORD}"),
                        );
                    }
                    Secret::new("")
                }
            },
        };
        let ca_file = self.path("database.ca_file");
        // On by default for a database on another host: the login, the map rows and the
        // lock's answers are not to travel in clear.
        let tls = self.bool(
            "database.tls",
            ca_file.is_some() || (!host.is_empty() && !is_loopback(&host)),
        );
        if !tls && ca_file.is_some() {
            self.problem(
                "database.tls",
                "is false while database.ca_file is set; remove one of them",
            );
        }
        Some(DatabaseSettings {
            url,
            host,
            port,
            user,
            name,
            password,
            tls,
            ca_file,
            connect_timeout: self.duration(
                "database.connect_timeout",
                "10s",
                Duration::from_millis(100),
                10 * MINUTE,
            ),
            query_timeout: self.duration(
                "database.query_timeout",
                "30s",
                Duration::from_secs(1),
                HOUR,
            ),
            lock_interval: self.duration(
                "database.lock_interval",
                "5s",
                Duration::from_millis(100),
                10 * MINUTE,
            ),
        })
    }
}

/// `mysql://user@host:port/name`: host, port (3306 when absent), user and database name. A
/// password in the URL is refused: it would show wherever the URL is logged.
pub fn parse_database_url(raw: &str) -> Result<(String, u16, String, String), String> {
    // Messages show the URL without its password, even one that does not parse.
    let url = redacted_url(raw);
    let parsed = reqwest::Url::parse(raw).map_err(|e| format!("{url:?} is not a URL ({e})"))?;
    if !matches!(parsed.scheme(), "mysql" | "mariadb") {
        return Err(format!("{url:?} must start with mysql://"));
    }
    if parsed.password().is_some() {
        return Err(
            "holds a password; keep it out of the URL (it would show in logs) and put it in database.password_file"
                .into(),
        );
    }
    let user = percent_encoding::percent_decode_str(parsed.username())
        .decode_utf8_lossy()
        .into_owned();
    if user.is_empty() {
        return Err(format!(
            "{url:?} names no user; write mysql://<user>@<host>/<database>"
        ));
    }
    let host = match parsed.host_str() {
        Some(h) if !h.is_empty() => h.trim_start_matches('[').trim_end_matches(']').to_string(),
        _ => return Err(format!("{url:?} names no host")),
    };
    let name = parsed.path().trim_start_matches('/').to_string();
    if name.is_empty() || name.contains('/') {
        return Err(format!(
            "{url:?} must name one database after the host, e.g. /cloud"
        ));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(format!(
            "{url:?} has options after the database name; use the [database] keys instead"
        ));
    }
    Ok((host, parsed.port().unwrap_or(3306), user, name))
}

/// `url` with the password of its user information replaced by `<redacted>`, for messages:
/// `mysql://cksdrift:<redacted>@db.example.com/cloud`. Textual, so that a URL that does not
/// parse (where a password is most likely to be misquoted) is redacted too: everything up to
/// the last `@` after the scheme is user information, and a user name without a password
/// stays.
pub fn redacted_url(url: &str) -> std::borrow::Cow<'_, str> {
    let start = url.find("://").map_or(0, |i| i + 3);
    let Some(at) = url[start..].rfind('@').map(|i| start + i) else {
        return url.into();
    };
    match url[start..at].split_once(':') {
        Some((user, _)) => format!("{}{user}:<redacted>{}", &url[..start], &url[at..]).into(),
        None => url.into(),
    }
}

impl Config {
    /// Reads and validates a config file; secrets may come from the process environment.
    pub fn load(path: &std::path::Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.to_path_buf(),
            reason: match e.kind() {
                std::io::ErrorKind::NotFound => {
                    "no such file; pass the right path with -c (the package installs /etc/cks-drift/cks-drift.toml; in a source tree, start from config/cks-drift.toml)"
                        .into()
                }
                std::io::ErrorKind::PermissionDenied => crate::config::secret_file::permission_denied(path),
                _ => e.to_string(),
            },
        })?;
        Config::from_toml(&text, path, &|name| std::env::var(name).ok())
    }

    /// Validates a config text. `env` looks up environment variables (a seam for tests).
    pub fn from_toml(
        text: &str,
        path: &std::path::Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let root: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| ConfigError::Syntax {
                path: path.to_path_buf(),
                detail: one_line(&e),
            })?;
        let mut r = Reader {
            root: &root,
            problems: Vec::new(),
            secret_files: Vec::new(),
        };
        r.unknown_keys();
        // The tables are read in this order, and their problems are listed in it.
        let cloudstack = r.cloudstack(env);
        let ssh = r.ssh();
        let check = r.check();
        let state = r.state();
        let notify = r.notify(&state.path);
        let http = r.http();
        let log = r.log();
        let database = r.database(env);
        let alertmanager = r.alertmanager();
        let ignore = r.ignore_rules();

        if r.problems.is_empty() {
            Ok(Config {
                cloudstack,
                ssh,
                check,
                state,
                notify,
                http,
                log,
                database,
                alertmanager,
                ignore,
                secret_files: r.secret_files,
            })
        } else {
            Err(ConfigError::Invalid {
                path: path.to_path_buf(),
                problems: r.problems,
            })
        }
    }
}

/// `"3000-3999"` (or a single `"3000"`): alert types for the daemon. Types up to 33 are
/// CloudStack's own and are refused.
fn parse_range(text: &str) -> Result<std::ops::RangeInclusive<u32>, String> {
    let (lo, hi) = text.split_once('-').unwrap_or((text, text));
    let parse = |s: &str| {
        s.trim()
            .parse::<u32>()
            .map_err(|_| format!("{text:?} is not a range of numbers like \"3000-3999\""))
    };
    let (lo, hi) = (parse(lo)?, parse(hi)?);
    if lo > hi {
        return Err(format!("{text:?} starts above its end"));
    }
    if lo <= 100 {
        return Err(format!(
            "{text:?} overlaps CloudStack's own alert types (0-33 and those added later); use numbers above 100, e.g. \"3000-3999\""
        ));
    }
    if hi > i16::MAX as u32 {
        return Err(format!(
            "{text:?} goes past 32767, the largest alert type CloudStack stores"
        ));
    }
    Ok(lo..=hi)
}

#[cfg(test)]
mod tests;
