//! Config parsing and validation: defaults, every problem named by its key, secrets redacted.

use std::path::Path;
use std::time::Duration;

use super::tables::UNKNOWN_TABLE;
use super::*;

const MINIMAL: &str = r#"
[cloudstack]
url = "https://cloud.example.com/client/api"
api_key = "KEY-abc"
secret_key = "SECRET-xyz"
[ssh]
private_key = "/var/lib/cloudstack/management/.ssh/id_rsa"
"#;

fn no_env(_: &str) -> Option<String> {
    None
}

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::from_toml(text, Path::new("test.toml"), &no_env)
}

fn problems(text: &str) -> Vec<String> {
    match parse(text) {
        Err(ConfigError::Invalid { problems, .. }) => {
            problems.iter().map(|p| p.to_string()).collect()
        }
        other => panic!("expected problems, got {other:?}"),
    }
}

#[test]
fn minimal_config_takes_the_defaults() {
    let c = parse(MINIMAL).unwrap();
    assert_eq!(c.cloudstack.url, "https://cloud.example.com/client/api");
    assert_eq!(c.cloudstack.api_key.expose(), "KEY-abc");
    assert_eq!(c.cloudstack.timeout, Duration::from_secs(30));
    assert_eq!(c.cloudstack.page_size, 500);
    assert!(!c.cloudstack.insecure);
    assert_eq!(c.ssh.user, "cloud");
    assert_eq!(c.ssh.host_key_policy, HostKeyPolicy::AcceptNew);
    assert_eq!(c.ssh.connect_timeout, Duration::from_secs(10));
    assert_eq!(c.ssh.command_timeout, Duration::from_secs(20));
    assert_eq!(
        c.ssh.command,
        format!(
            "sudo -n /opt/bin/kubectl get nodes {}",
            crate::remote::kubectl::LIST_ARGUMENTS
        )
    );
    assert_eq!(
        c.ssh.known_hosts,
        PathBuf::from("/var/lib/cks-drift/known_hosts")
    );
    assert!(c.check.enabled);
    assert_eq!(c.check.interval, Duration::from_secs(300));
    assert_eq!(c.check.initial_delay, Duration::ZERO);
    assert_eq!(c.check.grace_period, Duration::from_secs(900));
    assert_eq!(c.check.concurrency, 8);
    assert_eq!(c.state.path, PathBuf::from("/var/lib/cks-drift/state.json"));
    assert_eq!(
        c.notify.event_log,
        PathBuf::from("/var/lib/cks-drift/events.jsonl")
    );
    assert_eq!(c.notify.alert_types, 3000..=3999);
    assert_eq!(c.notify.alert_cap, 5);
    assert_eq!(c.notify.storm_clusters, StormThreshold::Percent(20));
    assert!(c.notify.alerts && c.notify.annotations);
    assert_eq!(c.http.listen, Some("127.0.0.1:9712".parse().unwrap()));
    assert_eq!(c.log.format, LogFormat::Text);
}

#[test]
fn every_problem_is_reported_with_its_key() {
    let text = r#"
[cloudstack]
url = "cloud.example.com"
secret_key = "s"
timeout = "30"
page_size = 0
colour = "blue"
[ssh]
private_key = "/k"
host_key_policy = "yes"
connect_timeout = "10 parsecs"
[check]
grace_period = 15
concurrency = "8"
interval = "500ms"
[notify]
alert_types = "8"
[http]
listen = "localhost"
[log]
format = "xml"
[extra]
"#;
    assert_eq!(
        problems(text),
        vec![
            "cloudstack.colour: is not a known key; [cloudstack] takes url, api_key, api_key_file, secret_key, secret_key_file, timeout, ca_file, insecure, page_size",
            "extra: is not a known table; the tables are [cloudstack], [ssh], [check], [state], [notify], [http], [log], [database], [alertmanager] and [[ignore]]",
            "cloudstack.url: \"cloud.example.com\" is not a URL (relative URL without a base); e.g. \"https://cloud.example.com/client/api\"",
            "cloudstack.api_key: is missing; set cloudstack.api_key, cloudstack.api_key_file, or the environment variable CKS_DRIFT_API_KEY",
            "cloudstack.timeout: \"30\" has no unit; write e.g. \"30s\" or \"30m\"",
            "cloudstack.page_size: is 0; it must be between 1 and 10000",
            "ssh.host_key_policy: is \"yes\"; use \"strict\", \"accept-new\" or \"off\"",
            "ssh.connect_timeout: \"10 parsecs\" has no unit; write e.g. \"10s\" or \"10m\"",
            "check.interval: is \"500ms\"; it must be at least 1s",
            "check.grace_period: must be a string, not integer",
            "check.concurrency: must be a whole number, not string",
            "notify.alert_types: \"8\" overlaps CloudStack's own alert types (0-33 and those added later); use numbers above 100, e.g. \"3000-3999\"",
            "http.listen: \"localhost\" is not an address:port, e.g. \"127.0.0.1:9712\"; use \"\" to turn the endpoint off",
            "log.format: is \"xml\"; use \"text\" or \"json\"",
        ]
    );
}

#[test]
fn missing_required_keys() {
    let p = problems("");
    assert_eq!(p.len(), 4, "{p:?}");
    assert!(p[0].starts_with("cloudstack.url: is missing"));
    assert!(p[3].starts_with("ssh.private_key: is missing; point it at the management server's key (/var/lib/cloudstack/management/.ssh/id_rsa"));
}

#[test]
fn syntax_errors_name_the_file_and_line() {
    let err = parse("[cloudstack\nurl=").unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with("config file test.toml is not valid TOML: TOML parse error at line 1"),
        "{msg}"
    );
}

#[test]
fn secrets_from_env_and_files() {
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("api_key");
    std::fs::write(&key_file, "FILE-KEY\n").unwrap();
    let text = format!(
        "[cloudstack]\nurl = \"http://127.0.0.1:8080/client/api\"\napi_key_file = {:?}\n[ssh]\nprivate_key = \"/k\"\n",
        key_file.display().to_string()
    );
    let env = |name: &str| (name == ENV_SECRET_KEY).then(|| "ENV-SECRET".to_string());
    let c = Config::from_toml(&text, Path::new("t.toml"), &env).unwrap();
    assert_eq!(c.cloudstack.api_key.expose(), "FILE-KEY");
    assert_eq!(c.cloudstack.secret_key.expose(), "ENV-SECRET");

    // The environment wins over the file.
    let env = |name: &str| Some(format!("ENV-{name}"));
    let c = Config::from_toml(&text, Path::new("t.toml"), &env).unwrap();
    assert_eq!(c.cloudstack.api_key.expose(), "ENV-CKS_DRIFT_API_KEY");

    // Both inline and file: refused.
    let both = text.replace("api_key_file", "api_key = \"x\"\napi_key_file");
    let p = match Config::from_toml(&both, Path::new("t.toml"), &no_env) {
        Err(ConfigError::Invalid { problems, .. }) => problems,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        p[0].to_string(),
        "cloudstack.api_key: is set together with cloudstack.api_key_file; keep one of them"
    );

    // An unreadable secret file is named.
    let missing = text.replace(&key_file.display().to_string(), "/nonexistent/key");
    let p = match Config::from_toml(&missing, Path::new("t.toml"), &no_env) {
        Err(ConfigError::Invalid { problems, .. }) => problems,
        other => panic!("{other:?}"),
    };
    assert!(
        p[0].to_string()
            .starts_with("cloudstack.api_key_file: cannot read /nonexistent/key"),
        "{p:?}"
    );
}

#[test]
fn secrets_never_show_in_debug() {
    let c = parse(MINIMAL).unwrap();
    let dbg = format!("{c:?}");
    assert!(!dbg.contains("KEY-abc"), "{dbg}");
    assert!(!dbg.contains("SECRET-xyz"), "{dbg}");
    assert!(dbg.contains("Secret(<redacted>)"));
    assert_eq!(format!("{}", c.cloudstack.secret_key), "<redacted>");
}

#[test]
fn absurd_durations_are_problems_not_crashes() {
    let text = MINIMAL
        .replace(
            "[cloudstack]",
            "[cloudstack]\ntimeout = \"18446744073709551615d\"",
        )
        .replace(
            "[ssh]",
            "[ssh]\nconnect_timeout = \"99999999999999h\"\ncommand_timeout = \"2h\"",
        );
    let text = format!(
        "{text}[check]\ninterval = \"18446744073709551615s\"\ninitial_delay = \"2d\"\ngrace_period = \"31d\"\n"
    );
    let mut found = problems(&text);
    found.sort();
    assert_eq!(
        found,
        [
            "check.grace_period: is \"31d\"; it must be at most 30d",
            "check.initial_delay: is \"2d\"; it must be at most 1d",
            "check.interval: is \"18446744073709551615s\"; it must be at most 7d",
            "cloudstack.timeout: is \"18446744073709551615d\"; it must be at most 1h",
            "ssh.command_timeout: is \"2h\"; it must be at most 1h",
            "ssh.connect_timeout: is \"99999999999999h\"; it must be at most 10m",
        ]
    );
}

#[test]
fn http_listen_can_be_turned_off() {
    let c = parse(&format!("{MINIMAL}[http]\nlisten = \"\"\n")).unwrap();
    assert_eq!(c.http.listen, None);
}

#[test]
fn event_log_defaults_beside_the_state_file() {
    let c = parse(&format!("{MINIMAL}[state]\npath = \"/tmp/x/state.json\"\n")).unwrap();
    assert_eq!(c.notify.event_log, PathBuf::from("/tmp/x/events.jsonl"));
}

#[test]
fn the_example_config_is_complete_and_valid() {
    let text = include_str!("../../config/cks-drift.toml");
    // Secrets come from files there; give them through the environment instead.
    let text = text
        .replace("api_key_file = \"/etc/cks-drift/api_key\"", "")
        .replace("secret_key_file = \"/etc/cks-drift/secret_key\"", "");
    let env = |name: &str| Some(format!("value-of-{name}"));
    let c = Config::from_toml(&text, Path::new("cks-drift.toml"), &env).unwrap();
    assert_eq!(c.check.interval, Duration::from_secs(300));
    assert_eq!(c.ssh.command, DEFAULT_COMMAND);
    // Every known key appears in the example.
    let example = include_str!("../../config/cks-drift.toml");
    for (table, keys) in tables::TABLES {
        assert!(example.contains(&format!("[{table}]")), "[{table}]");
        for key in *keys {
            let key = key.name;
            assert!(
                example.contains(&format!("\n{key} =")) || example.contains(&format!("# {key} =")),
                "{table}.{key} is not in the example"
            );
        }
    }
}

#[test]
fn one_problem_is_one_line_several_are_listed() {
    let base = "[cloudstack]\napi_key = \"k\"\nsecret_key = \"s\"\n[ssh]\nprivate_key = \"/k\"\n";
    let one = parse(base).map(|_| ()).unwrap_err();
    assert_eq!(
        one.to_string(),
        "config file test.toml: cloudstack.url: is missing; set it to the API endpoint, e.g. \"https://cloud.example.com/client/api\""
    );
    let two = parse(&format!(
        "{base}[check]\ngrace_period = \"15\"\nconcurrency = 0\n"
    ))
    .map(|_| ())
    .unwrap_err();
    assert_eq!(
        two.to_string(),
        "config file test.toml has 3 problems:\n  \
         cloudstack.url: is missing; set it to the API endpoint, e.g. \"https://cloud.example.com/client/api\"\n  \
         check.grace_period: \"15\" has no unit; write e.g. \"15s\" or \"15m\"\n  \
         check.concurrency: is 0; it must be between 1 and 1024"
    );
}

#[test]
fn a_syntax_error_is_one_line() {
    let err = parse("[cloudstack\nurl=").map(|_| ()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "config file test.toml is not valid TOML: TOML parse error at line 1, column 12: unclosed table, expected `]`"
    );
}

#[test]
fn the_database_is_optional_and_its_password_comes_from_a_file_or_the_environment() {
    assert!(parse(MINIMAL).unwrap().database.is_none());
    let dir = tempfile::tempdir().unwrap();
    let password = dir.path().join("db_password");
    std::fs::write(&password, "s3cret\n").unwrap();
    let text = format!(
        "{MINIMAL}[database]\nurl = \"mysql://cksdrift@db.example.com/cloud\"\npassword_file = {:?}\n",
        password.display().to_string()
    );
    let db = parse(&text).unwrap().database.unwrap();
    assert_eq!(
        (
            db.host.as_str(),
            db.port,
            db.user.as_str(),
            db.name.as_str()
        ),
        ("db.example.com", 3306, "cksdrift", "cloud")
    );
    assert_eq!(db.password.expose(), "s3cret");
    assert!(
        db.tls,
        "TLS is on by default for a host other than loopback"
    );
    for host in ["localhost", "127.0.0.1", "[::1]"] {
        let local = text.replace("db.example.com", host);
        assert!(!parse(&local).unwrap().database.unwrap().tls, "{host}");
    }
    let off = parse(&format!("{text}tls = false\n"))
        .unwrap()
        .database
        .unwrap();
    assert!(!off.tls);
    assert_eq!(db.lock_interval, Duration::from_secs(5));
    assert!(!format!("{db:?}").contains("s3cret"));
    let env = |name: &str| (name == ENV_DB_PASSWORD).then(|| "from-env".to_string());
    let db = Config::from_toml(&text, Path::new("t.toml"), &env)
        .unwrap()
        .database
        .unwrap();
    assert_eq!(db.password.expose(), "from-env");
    // A CA file turns TLS on.
    let db = parse(&format!("{text}ca_file = \"/etc/cks-drift/db-ca.pem\"\n"))
        .unwrap()
        .database
        .unwrap();
    assert!(db.tls);
}

#[test]
fn database_problems_name_the_key_and_the_fix() {
    let p = problems(&format!(
        "{MINIMAL}[database]\nurl = \"mysql://cloud:pw@db/cloud\"\ntls = false\nca_file = \"/x.pem\"\nport = 3306\n"
    ));
    assert_eq!(
        p,
        [
            "database.port: is not a key: the port is part of database.url, e.g. \"mysql://cksdrift@db.example.com:3306/cloud\"; [database] takes url, password_file, tls, ca_file, tls_server_name, connect_timeout, query_timeout, lock_interval",
            "database.url: holds a password; keep it out of the URL (it would show in logs) and put it in database.password_file; e.g. \"mysql://cksdrift@db.example.com:3306/cloud\"",
            "database.password_file: is missing; point it at a file holding the password of the database user, or set CKS_DRIFT_DB_PASSWORD",
            "database.tls: is false while database.ca_file is set; remove one of them",
        ]
    );
    let p = problems(&format!(
        "{MINIMAL}[database]\nurl = \"mysql://db.example.com\"\n"
    ));
    assert!(
        p[0].starts_with("database.url: \"mysql://db.example.com\" names no user"),
        "{p:?}"
    );
    let p = problems(&format!("{MINIMAL}[database]\n"));
    assert!(p[0].starts_with("database.url: is missing;"), "{p:?}");
}

#[test]
fn tls_server_name_turns_tls_on_and_must_be_a_name() {
    let db =
        "[database]\nurl = \"mysql://cksdrift@127.0.0.1/cloud\"\npassword_file = \"/dev/null\"\n";
    let env = |name: &str| (name == ENV_DB_PASSWORD).then(|| "from-env".to_string());
    let text = format!("{MINIMAL}{db}tls_server_name = \"db.example.test\"\n");
    let config = Config::from_toml(&text, Path::new("t.toml"), &env).unwrap();
    let settings = config.database.unwrap();
    assert!(settings.tls);
    assert_eq!(settings.tls_server_name.as_deref(), Some("db.example.test"));
    let p = problems(&format!(
        "{MINIMAL}{db}tls = false\ntls_server_name = \"db.example.test\"\n"
    ));
    assert!(
        p.contains(
            &"database.tls: is false while database.tls_server_name is set; remove one of them"
                .to_string()
        ),
        "{p:?}"
    );
    let p = problems(&format!("{MINIMAL}{db}tls_server_name = \"db example\"\n"));
    assert!(
        p.contains(&"database.tls_server_name: \"db example\" is not a host name or an IP address; write one of the names the server's certificate holds (its subjectAltName), e.g. \"db.example.com\"".to_string()),
        "{p:?}"
    );
}

#[test]
fn storm_clusters_is_a_number_a_percentage_or_off() {
    let with = |v: &str| parse(&format!("{MINIMAL}\n[notify]\nstorm_clusters = {v}\n"));
    assert_eq!(
        with("12").unwrap().notify.storm_clusters,
        StormThreshold::Clusters(12)
    );
    assert_eq!(
        with("\"35%\"").unwrap().notify.storm_clusters,
        StormThreshold::Percent(35)
    );
    assert_eq!(
        with("\"off\"").unwrap().notify.storm_clusters,
        StormThreshold::Off
    );
    let how = "give a number of clusters (e.g. 10), a percentage of the checked clusters (e.g. \"20%\"), or \"off\"";
    for (value, problem) in [
        ("0", format!("notify.storm_clusters: is 0; {how}")),
        (
            "\"150%\"",
            format!("notify.storm_clusters: is \"150%\"; {how}"),
        ),
        (
            "\"many\"",
            format!("notify.storm_clusters: is \"many\"; {how}"),
        ),
        (
            "true",
            format!("notify.storm_clusters: must be a number or a string, not boolean; {how}"),
        ),
    ] {
        let text = format!("{MINIMAL}\n[notify]\nstorm_clusters = {value}\n");
        assert_eq!(problems(&text), [problem], "{value}");
    }
}

#[test]
fn ignore_rules_know_every_kind() {
    let kinds: Vec<&str> = crate::diff::MismatchKind::ALL
        .iter()
        .map(|k| k.as_str())
        .collect();
    assert_eq!(kinds, KIND_NAMES);
}

#[test]
fn unknown_keys_get_the_nearest_key_in_any_table_or_why_there_is_none() {
    let p = problems(&format!(
        "{MINIMAL}port = 2222\n[check]\nalert_cap = 3\nintervall = \"5m\"\n[notify]\nalerts_cap = 3\n"
    ));
    assert_eq!(
        p,
        [
            "check.alert_cap: is not a known key; did you mean notify.alert_cap? [check] takes enabled, interval, initial_delay, grace_period, concurrency, blind_after, resolve_after",
            "check.intervall: is not a known key; did you mean check.interval? [check] takes enabled, interval, initial_delay, grace_period, concurrency, blind_after, resolve_after",
            "notify.alerts_cap: is not a known key; did you mean notify.alert_cap? [notify] takes alerts, alert_types, alert_cap, owner_alert_cap, owner_alerts_per_hour, annotations, event_log, storm_clusters, defer_to_server_check",
            "ssh.port: is not a key: there is no port to set: each cluster's port follows CKS, 22 on Shared or ROUTED networks with one control node, else 2222 (the port forwarding rule CKS creates to the first control node); [ssh] takes private_key, user, known_hosts, host_key_policy, connect_timeout, command_timeout, command",
        ]
    );
}

#[test]
fn ignore_rules_are_read_and_every_problem_named() {
    let c = parse(&format!(
        "{MINIMAL}\n[[ignore]]\ncluster = \"web\"\nnode = \"manual-1\"\nreason = \"built by hand\"\nexpires = 2026-12-31T00:00:00Z\nby = \"jdoe\"\n\n[[ignore]]\nkind = \"blind\"\nreason = \"lab\"\nexpires = \"2027-01-15\"\n"
    ))
    .unwrap();
    assert_eq!(c.ignore.len(), 2);
    assert_eq!(c.ignore[0].number, 1);
    assert_eq!(c.ignore[0].node.as_deref(), Some("manual-1"));
    assert_eq!(
        c.ignore[0].expires.map(|t| t.to_string()),
        Some("2026-12-31T00:00:00Z".into())
    );
    assert_eq!(c.ignore[0].by.as_deref(), Some("jdoe"));
    assert_eq!(
        c.ignore[1].expires.map(|t| t.to_string()),
        Some("2027-01-15T00:00:00Z".into()),
        "a date alone is its midnight UTC"
    );
    let p = problems(&format!(
        "{MINIMAL}\n[[ignore]]\nclutser = \"web\"\nreason = \"x\"\n\n[[ignore]]\ncluster = \"web\"\nkind = \"stray\"\n\n[[ignore]]\nvm = \"v1\"\nreason = \"x\"\nexpires = \"2026-12-31T10:00:00\"\n\n[[ignore]]\nnode = \"n\"\nreason = \"x\"\nexpires = \"soon\"\n"
    ));
    let how = "give an RFC 3339 date-time such as 2026-12-31T00:00:00Z, or a date such as 2026-12-31 (its midnight UTC)";
    assert_eq!(
        p,
        [
            "ignore[1].clutser: is not a known field; a rule takes cluster, kind, vm, node, reason, expires, by".to_string(),
            "ignore[1]: matches every finding; give at least one of cluster, kind, vm and node".to_string(),
            "ignore[2].kind: is \"stray\"; the kinds are mapped_vm, unmapped_vm, node_without_vm, vm_not_a_node, map_count, blind, identity_conflict".to_string(),
            "ignore[2].reason: is missing; say why this drift is accepted (it is shown with every finding the rule matches)".to_string(),
            "ignore[3].cluster: is missing: a rule with a VM name names its cluster (by id, or by name), or it matches that VM name in every tenant's cluster; or give the VM's id instead of its name".to_string(),
            format!("ignore[3].expires: is \"2026-12-31T10:00:00\", which has no time zone; {how}"),
            "ignore[4].cluster: is missing: a rule with a node names its cluster (by id, or by name), or it matches that node name in every tenant's cluster".to_string(),
            format!("ignore[4].expires: is \"soon\"; {how}"),
        ]
    );
    assert_eq!(
        problems(&format!("{MINIMAL}\n[ignore]\nreason = \"x\"\n")),
        ["ignore: must be written [[ignore]]: a list of rules, each a table"]
    );
}

#[test]
fn alertmanager_settings_are_read_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "T0KEN\n").unwrap();
    let c = parse(&format!(
        "{MINIMAL}\n[alertmanager]\nurls = [\"http://127.0.0.1:9093/\", \"https://am2.example.com\"]\nbearer_token_file = \"{}\"\ntimeout = \"3s\"\n",
        token.display()
    ))
    .unwrap();
    let am = c.alertmanager.unwrap();
    assert_eq!(
        am.urls,
        ["http://127.0.0.1:9093", "https://am2.example.com"]
    );
    assert!(matches!(&am.auth, AlertmanagerAuth::Bearer(t) if t.expose() == "T0KEN"));
    assert_eq!(am.timeout, Duration::from_secs(3));
    assert!(
        !format!("{am:?}").contains("T0KEN"),
        "the token never shows"
    );
    assert_eq!(
        problems(&format!(
            "{MINIMAL}\n[alertmanager]\nurls = [\"am:9093\"]\nusername = \"u\"\n"
        )),
        [
            "alertmanager.urls: holds \"am:9093\", which is not an http:// or https:// URL; e.g. [\"http://127.0.0.1:9093\"]",
            "alertmanager.password_file: is missing while alertmanager.username is set; point it at a file holding the password",
        ]
    );
    assert_eq!(
        problems(&format!("{MINIMAL}\n[alertmanager]\n")),
        [
            "alertmanager.urls: is missing; list the Alertmanagers, e.g. [\"http://127.0.0.1:9093\"], or remove [alertmanager]"
        ]
    );
}

#[test]
fn credentials_inside_urls_are_refused_and_never_shown() {
    // Alertmanager takes them from its own keys.
    assert_eq!(
        problems(&format!(
            "{MINIMAL}\n[alertmanager]\nurls = [\"https://cks:s3cret-am@am.example.com:9093\"]\n"
        )),
        [
            "alertmanager.urls: holds \"https://cks:<redacted>@am.example.com:9093\", a URL with a user name or password; remove \"user:password@\" from it and set alertmanager.username and alertmanager.password_file (or alertmanager.bearer_token_file) instead",
        ]
    );
    assert_eq!(
        problems(&format!(
            "{MINIMAL}\n[alertmanager]\nurls = [\"https://T0KEN@am.example.com\"]\n"
        ))
        .len(),
        1
    );
    // The API never takes them; its URL shows in every warning at start.
    let text = MINIMAL.replace(
        "https://cloud.example.com/client/api",
        "https://admin:s3cret-cs@cloud.example.com/client/api",
    );
    assert_eq!(
        problems(&text),
        [
            "cloudstack.url: \"https://admin:<redacted>@cloud.example.com/client/api\" holds a user name or password; remove \"user:password@\": CloudStack's API takes the API key and secret key only (cloudstack.api_key_file, cloudstack.secret_key_file)",
        ]
    );
    // A database URL with a password is refused without showing it, even with the wrong
    // scheme or when it does not parse (a '/' in the password ends the host).
    for (url, shown) in [
        (
            "postgres://cksdrift:s3cret-db@db.example.com/cloud",
            "database.url: \"postgres://cksdrift:<redacted>@db.example.com/cloud\" must start with mysql://",
        ),
        (
            "mysql://cksdrift:s3cret/db@db.example.com/cloud",
            "database.url: \"mysql://cksdrift:<redacted>@db.example.com/cloud\" is not a URL",
        ),
        (
            "mysql://cksdrift:s3cret-db@db.example.com/cloud",
            "database.url: holds a password;",
        ),
    ] {
        let text = format!(
            "{MINIMAL}[database]\nurl = \"{url}\"\npassword_file = \"/etc/cks-drift/db_password\"\n"
        );
        let all = problems(&text).join("\n");
        assert!(!all.contains("s3cret"), "{all}");
        assert!(all.contains(shown), "{all}");
    }
}

#[test]
fn a_misspelt_table_is_named_with_the_closest_one() {
    assert_eq!(
        problems(&format!("{MINIMAL}[checks]\ninterval = \"5m\"\n")),
        [format!("checks: {UNKNOWN_TABLE}; did you mean [check]?")]
    );
    assert_eq!(
        problems(&format!(
            "{MINIMAL}[[ignored]]\nkind = \"blind\"\nreason = \"x\"\n"
        )),
        [format!(
            "ignored: {UNKNOWN_TABLE}; did you mean [[ignore]]?"
        )]
    );
}

#[test]
fn a_missing_key_file_says_which_key_and_how_to_create_it() {
    let text = MINIMAL.replace(
        "api_key = \"KEY-abc\"",
        "api_key_file = \"/nonexistent/apikey\"",
    );
    assert_ne!(text, MINIMAL, "MINIMAL gives the API key inline");
    assert_eq!(
        problems(&text),
        [
            "cloudstack.api_key_file: cannot read /nonexistent/apikey: no such file; create it holding the API key of the CloudStack user cks-drift acts as (an Admin; its keys are under Accounts, the user, Generate keys) and nothing else, readable by the service alone: install -m 0640 -g cks-drift /dev/null /nonexistent/apikey, then write the value into it"
        ]
    );
}

/// Found by the `config` fuzz target: a key the file writes quoted (`"" = 1`, `"a b" = 1`)
/// was named bare, so its problem named no key at all, or one the file does not hold.
#[test]
fn a_key_that_is_not_bare_is_named_quoted() {
    assert_eq!(
        problems(&format!("\"\" = 1\n{MINIMAL}")),
        [format!("\"\": {UNKNOWN_TABLE}")]
    );
    let p = problems(&format!(
        "{MINIMAL}\"a b\" = 1\n\n[[ignore]]\nkind = \"blind\"\nreason = \"x\"\n\"\" = 2\n"
    ));
    assert_eq!(p.len(), 2, "{p:?}");
    assert!(p[0].starts_with("ssh.\"a b\": is not a known key"), "{p:?}");
    assert!(
        p[1].starts_with("ignore[1].\"\": is not a known field"),
        "{p:?}"
    );
}
