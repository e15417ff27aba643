//! The checks of `validate-config` that need no network: every problem with its key, the
//! warnings, the shell-syntax test and the permission test.

use std::os::unix::fs::PermissionsExt;

use super::files::readable_by_strangers;
use super::ssh::{listed, login_cluster};
use super::*;
use crate::cloudstack::model::KubernetesCluster;
use crate::config::{DEFAULT_COMMAND, secret_file};

fn no_env(_: &str) -> Option<String> {
    None
}

fn lines(findings: &[Finding]) -> Vec<String> {
    findings.iter().map(|f| f.to_string()).collect()
}

#[test]
fn simple_commands_pass() {
    for command in [
        DEFAULT_COMMAND,
        "/usr/bin/kubectl --kubeconfig /etc/kubernetes/admin.conf get nodes -o name",
        "sh -c 'kubectl get nodes -o name | sort'",
        "printf 'node/a\\nnode/b\\n'",
        "kubectl get nodes -o \"name\"",
    ] {
        assert_eq!(shell_syntax(command), None, "{command}");
    }
}

#[test]
fn names_only_commands_are_recognised() {
    for command in [
        "sudo -n /opt/bin/kubectl get nodes -o name",
        "kubectl get nodes -oname",
        "kubectl get nodes -o=name --request-timeout=10s",
        "kubectl get nodes --output name",
        "kubectl get nodes --output=name",
        "sh -c 'kubectl get nodes -o name'",
    ] {
        assert!(lists_names_only(command), "{command}");
    }
    for command in [
        DEFAULT_COMMAND,
        "kubectl get nodes -o wide",
        "kubectl get nodes -o custom-columns=NAME:.metadata.name",
        "/usr/local/bin/list-nodes name",
    ] {
        assert!(!lists_names_only(command), "{command}");
    }
}

#[test]
fn commands_without_readiness_are_recognised() {
    assert!(lists_no_readiness(
        "sudo -n /opt/bin/kubectl get nodes --no-headers -o custom-columns=NAME:.metadata.name,\
         UUID:.status.nodeInfo.systemUUID,PROVIDER:.spec.providerID"
    ));
    for command in [
        DEFAULT_COMMAND,
        // Names only is warned about on its own.
        "kubectl get nodes -o name",
        "/usr/local/bin/list-nodes",
    ] {
        assert!(!lists_no_readiness(command), "{command}");
    }
    assert!(shell_syntax(DEFAULT_COMMAND).is_none());
}

#[test]
fn shell_syntax_is_named() {
    let cases = [
        (
            "kubectl get nodes -o name | grep node",
            "uses shell syntax (a pipe or ||)",
        ),
        (
            "cd /tmp; kubectl get nodes",
            "uses shell syntax (a ;, a leading shell keyword or builtin)",
        ),
        ("kubectl get nodes && true", "uses shell syntax (& or &&)"),
        (
            "kubectl get nodes -o name 2>/dev/null",
            "uses shell syntax (a redirection)",
        ),
        (
            "kubectl get nodes --kubeconfig $(ls /etc/*.conf)",
            "uses shell syntax (a command substitution)",
        ),
        (
            "KUBECONFIG=/etc/admin.conf kubectl get nodes -o name",
            "uses shell syntax (a leading variable assignment)",
        ),
        ("(kubectl get nodes)", "uses shell syntax (parentheses)"),
    ];
    for (command, expected) in cases {
        assert_eq!(
            shell_syntax(command).as_deref(),
            Some(expected),
            "{command}"
        );
    }
}

#[test]
fn only_files_open_to_strangers_are_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("secret_key");
    std::fs::write(&path, "SK").unwrap();
    let allowed = secret_file::allowed();
    // The file's group is the one this test runs as: 0640 is within the rule.
    for mode in [0o600, 0o400, 0o640] {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        assert_eq!(
            readable_by_strangers("k", &path, "holds a secret", &allowed),
            None,
            "{mode:o}"
        );
    }
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let p = path.display();
    assert_eq!(
        readable_by_strangers(
            "cloudstack.secret_key_file",
            &path,
            "holds a secret",
            &allowed
        )
        .map(|f| f.to_string()),
        Some(format!(
            "warning: cloudstack.secret_key_file: {p} holds a secret and others may read it \
             (mode 0644); {}: chmod o-rwx {p}",
            secret_file::rule(&allowed)
        ))
    );
}

#[test]
fn every_problem_is_reported_at_once_with_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let text = format!(
        r#"
[cloudstack]
url = "ftp://cloud.example.com/client/api"
api_key = "AK"
secret_key_file = "{d}/no-secret"
ca_file = "{d}/no-ca.pem"
insecure = true

[ssh]
private_key = "{d}/no-key"
host_key_policy = "off"
command = "kubectl get nodes -o name | sort"

[check]
grace_period = "2m"
interval = "5"
"#
    );
    let config_path = dir.path().join("cks-drift.toml");
    std::fs::write(&config_path, &text).unwrap();
    std::fs::set_permissions(&config_path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (findings, config) = check_text(&text, &config_path, &no_env);
    assert!(config.is_none());
    assert_eq!(
        lines(&findings),
        [
            "error: cloudstack.url: \"ftp://cloud.example.com/client/api\" must be an http:// or https:// URL, e.g. \"https://cloud.example.com/client/api\"".to_string(),
            format!("error: cloudstack.secret_key_file: cannot read {d}/no-secret: no such file; create it holding the secret key of the CloudStack user cks-drift acts as (shown beside its API key) and nothing else, readable by the service alone: install -m 0640 -g cks-drift /dev/null {d}/no-secret, then write the value into it"),
            "error: check.interval: \"5\" has no unit; write e.g. \"5s\" or \"5m\"".to_string(),
            format!("error: ssh.private_key: {d}/no-key does not exist; point ssh.private_key at the management server's key or at the private half of the clusters' key pair"),
            format!("error: cloudstack.ca_file: cannot read CA bundle {d}/no-ca.pem: No such file or directory (os error 2)"),
            "warning: cloudstack.insecure: is true: the management server's certificate is not verified, so anything between this host and it can pose as CloudStack; set cloudstack.ca_file to the CA that signed its certificate and remove insecure".to_string(),
            "warning: ssh.host_key_policy: is \"off\": any host key is accepted, so a machine posing as a control node is trusted; use \"accept-new\" (the default) or \"strict\"".to_string(),
            "warning: check.grace_period: is \"2m\", under 5 minutes: VMs of a cluster being created, scaled or upgraded may be reported before the operation ends; use at least \"5m\" (the default is \"15m\")".to_string(),
            format!("warning: ssh.command: \"kubectl get nodes -o name | sort\" lists node names only (-o name): nodes are then matched to VMs by name, so a node its tenant renamed is not recognised and one named like another VM is not caught; list their system UUIDs and provider IDs too with \"kubectl get nodes {}\" (the default)", crate::remote::kubectl::LIST_ARGUMENTS),
            "warning: ssh.command: \"kubectl get nodes -o name | sort\" uses shell syntax (a pipe or ||); it runs on the node as \"timeout 20s <command>\", so it must be a simple command (a program and its arguments): wrap anything else in sh -c '…' or in a script on the node".to_string(),
        ]
    );
}

#[test]
fn inline_secrets_in_a_readable_config_are_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let config_path = dir.path().join("cks-drift.toml");
    let key_file = dir.path().join("api_key");
    std::fs::write(&key_file, "AK\n").unwrap();
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let text = format!(
        "[cloudstack]\nurl = \"https://c.example/client/api\"\napi_key_file = \"{}\"\nsecret_key = \"SK\"\n",
        key_file.display()
    );
    std::fs::write(&config_path, &text).unwrap();
    std::fs::set_permissions(&config_path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (findings, _) = check_text(&text, &config_path, &no_env);
    let c = config_path.display();
    let k = key_file.display();
    let rule = secret_file::rule(&secret_file::allowed());
    let warnings: Vec<String> = findings
        .iter()
        .filter(|f| f.severity == Severity::Warning)
        .map(|f| f.to_string())
        .collect();
    assert_eq!(
        warnings,
        [
            format!(
                "warning: cloudstack.api_key_file: {k} holds a secret and others may read it (mode 0644); {rule}: chmod o-rwx {k}"
            ),
            format!(
                "warning: cloudstack.secret_key: {c} holds cloudstack.secret_key inline and others may read it (mode 0644); {rule}: chmod o-rwx {c}, or move the key to cloudstack.secret_key_file"
            ),
        ]
    );
    // A secret from the environment wins: its file is not used, so not warned about.
    let env = |name: &str| (name == crate::config::ENV_API_KEY).then(|| "ENV".to_string());
    let (findings, _) = check_text(&text, &config_path, &env);
    assert!(
        !findings
            .iter()
            .any(|f| f.key.as_deref() == Some("cloudstack.api_key_file")),
        "{findings:?}"
    );
}

#[test]
fn strict_without_known_hosts_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let kh = dir.path().join("known_hosts");
    let text = format!(
        "[ssh]\nhost_key_policy = \"strict\"\nknown_hosts = \"{}\"\n",
        kh.display()
    );
    let (findings, _) = check_text(&text, &dir.path().join("c.toml"), &no_env);
    let k = kh.display();
    assert!(
        lines(&findings).contains(&format!(
            "error: ssh.known_hosts: {k} does not exist and ssh.host_key_policy is \"strict\", so every control node would be refused; record the nodes' keys there (ssh-keyscan -p 2222 <endpoint address> >> {k}) or use \"accept-new\""
        )),
        "{findings:?}"
    );
}

#[test]
fn a_syntax_error_is_the_only_finding() {
    let (findings, config) = check_text("[cloudstack\n", Path::new("c.toml"), &no_env);
    assert!(config.is_none());
    assert_eq!(
        lines(&findings),
        [
            "error: config file c.toml is not valid TOML: TOML parse error at line 1, column 12: unclosed table, expected `]`"
        ]
    );
}

#[tokio::test]
async fn connect_waits_for_a_config_without_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(&path, "[check]\ninterval = \"5\"\n").unwrap();
    let mut out = Vec::new();
    let code = run(&path, true, &mut out).await;
    let text = String::from_utf8(out).unwrap();
    let p = path.display();
    assert_eq!(code, 2);
    assert_eq!(
        text.lines().rev().take(2).collect::<Vec<_>>(),
        [
            format!(
                "config file {p}: 5 errors, 0 warnings; fix the errors and run validate-config again"
            ),
            "--connect was skipped: fix the errors above first".to_string(),
        ]
    );
}

#[test]
fn storms_turned_off_are_warned_about() {
    let text = "[cloudstack]\nurl = \"https://c.example/client/api\"\napi_key = \"AK\"\nsecret_key = \"SK\"\n[notify]\nstorm_clusters = \"off\"\n";
    let findings = setting_warnings(&Raw(&text.parse().unwrap()));
    assert_eq!(
        lines(&findings),
        [
            "warning: notify.storm_clusters: is \"off\": every finding is alerted on its own however many come at once, so one outage (storage, network, SSH across the cloud) sends an alert and an annotation per finding; the default \"20%\" sends one storm alert instead"
        ]
    );
}

#[test]
fn an_endpoint_beyond_loopback_without_tls_and_passwords_is_warned_about() {
    let base = "[cloudstack]\nurl = \"https://c.example/client/api\"\napi_key = \"AK\"\nsecret_key = \"SK\"\n[http]\n";
    let warned = |http: &str| {
        let text = format!("{base}{http}");
        lines(&setting_warnings(&Raw(&text.parse().unwrap())))
    };
    assert_eq!(warned(""), Vec::<String>::new());
    assert_eq!(
        warned("listen = \"127.0.0.1:9712\"\n"),
        Vec::<String>::new()
    );
    assert_eq!(
        warned("listen = \"0.0.0.0:9712\"\n"),
        [
            "warning: http.listen: is \"0.0.0.0:9712\", beyond loopback, without TLS (http.tls_cert_file, http.tls_key_file) or authentication (http.basic_auth_users); anyone who reaches the port reads every tenant's findings on the status page and its API; set both, or listen on 127.0.0.1"
        ]
    );
    let tls = "listen = \"0.0.0.0:9712\"\ntls_cert_file = \"c.pem\"\ntls_key_file = \"c.key\"\n";
    assert!(warned(tls)[0].contains("without authentication (http.basic_auth_users)"));
    let both = format!("{tls}basic_auth_users = [\"p:$2y$10$x\"]\n");
    assert_eq!(warned(&both), Vec::<String>::new());
}

#[test]
fn a_listing_is_summed_up_with_identities_and_readiness() {
    use crate::remote::Readiness;
    use crate::snapshot::Node;
    let node = |name: &str, uuid: Option<&str>, ready: Option<Readiness>| Node {
        system_uuid: uuid.map(str::to_string),
        ready,
        ..Node::named(name)
    };
    assert_eq!(
        listed(&[
            node("a", Some("u1"), Some(Readiness::Ready)),
            node("b", Some("u2"), Some(Readiness::Unknown)),
            node("c", None, None),
        ]),
        "ssh.command listed 3 nodes, 2 with a system UUID or provider ID; 1 of them Ready"
    );
    assert_eq!(
        listed(&[node("a", Some("u1"), None)]),
        "ssh.command listed 1 node, 1 with a system UUID or provider ID"
    );
    assert_eq!(
        listed(&[node("a", None, None)]),
        "ssh.command listed 1 node, by name only (none with a system UUID or provider ID): they are matched to VMs by name"
    );
    assert_eq!(listed(&[]), "ssh.command listed 0 nodes");
}

#[test]
fn alertmanager_credentials_in_clear_and_insecure_tls_are_warned_about() {
    let text = "[cloudstack]\nurl = \"https://c.example/client/api\"\napi_key = \"AK\"\nsecret_key = \"SK\"\n\
        [alertmanager]\nurls = [\"http://am.example.com:9093\", \"http://127.0.0.1:9093\", \"https://am2.example.com\"]\n\
        username = \"cks\"\npassword_file = \"/etc/cks-drift/am_password\"\ninsecure = true\n";
    let findings = setting_warnings(&Raw(&text.parse().unwrap()));
    assert_eq!(
        lines(&findings),
        [
            "warning: alertmanager.urls: holds http://am.example.com:9093, a plain http:// URL, while alertmanager.username and password_file (or bearer_token_file) are set: the credentials travel in clear with every post, for anything on the way to read and reuse; use https:// (with alertmanager.ca_file for a private CA)",
            "warning: alertmanager.insecure: is true: the Alertmanagers' certificates are not verified, so anything between this host and them can pose as one, drop the alerts and read the credentials; set alertmanager.ca_file to the CA that signed their certificates and remove insecure",
        ]
    );
    // Without credentials a plain URL sends nothing secret; a loopback one never leaves the host.
    let text = "[alertmanager]\nurls = [\"http://am.example.com:9093\"]\n";
    assert!(setting_warnings(&Raw(&text.parse().unwrap())).is_empty());
    let text = "[alertmanager]\nurls = [\"http://localhost:9093\", \"http://[::1]:9093\"]\nbearer_token_file = \"/t\"\n";
    assert!(setting_warnings(&Raw(&text.parse().unwrap())).is_empty());
}

#[test]
fn a_rule_cluster_that_names_no_cluster_or_several_is_warned_about() {
    let cluster = |id: &str, name: &str| -> KubernetesCluster {
        serde_json::from_value(serde_json::json!({"id": id, "name": name})).unwrap()
    };
    let clusters = [
        cluster("c1", "web"),
        cluster("c2", "web"),
        cluster("c3", "db"),
    ];
    let rule = |number: usize, name: &str| crate::config::IgnoreRule {
        number,
        cluster: Some(name.into()),
        kind: None,
        vm: None,
        node: None,
        reason: "known".into(),
        expires: None,
        by: None,
    };
    let rules = [rule(1, "web"), rule(2, "db"), rule(3, "c1"), rule(4, "dB")];
    assert_eq!(
        lines(&cluster_rule_warnings(&rules, &clusters)),
        [
            "warning: ignore[1].cluster: is \"web\", the name of 2 clusters (c1, c2): a name is each tenant's to choose, so the rule matches them all; give the id of the one meant",
            "warning: ignore[4].cluster: is \"dB\", which is neither the id nor the name of any of the 3 clusters listed: the rule matches nothing",
        ]
    );
}

#[test]
fn a_database_elsewhere_in_clear_is_warned_about_only_when_tls_is_turned_off() {
    let base = "[cloudstack]\nurl = \"https://c.example/client/api\"\napi_key = \"AK\"\nsecret_key = \"SK\"\n[database]\n";
    let warnings = |extra: &str| {
        let text = format!("{base}{extra}");
        lines(&setting_warnings(&Raw(&text.parse().unwrap())))
    };
    let remote = "url = \"mysql://cksdrift@db.example.com/cloud\"\n";
    assert_eq!(warnings(remote), Vec::<String>::new(), "on by default");
    assert_eq!(
        warnings(&format!("{remote}tls = false\n")),
        [format!(
            "warning: database.tls: {}",
            crate::config::database_in_clear("db.example.com")
        )]
    );
    assert_eq!(
        warnings("url = \"mysql://cksdrift@127.0.0.1/cloud\"\ntls = false\n"),
        Vec::<String>::new(),
        "loopback never leaves the host"
    );
}

#[test]
fn a_finding_is_one_line_without_control_characters_whatever_it_quotes() {
    let node = "evil\r\nok: ssh: all control nodes verified\x1b[2J\u{9b}1m\u{2028}";
    let finding = Finding::error("ssh (kubectl)", format!("node {node} is not Ready"));
    assert_eq!(
        finding.to_string(),
        "error: ssh (kubectl): node evil\\x0d\\x0aok: ssh: all control nodes verified\\x1b[2J\\x9b1m\\u{2028} is not Ready"
    );
    // Text escaped where the finding was made is not escaped again.
    let shown = crate::base::untrusted::shown("web\x1b\\", 20);
    let finding = Finding::warning("ssh", format!("cluster {shown}"));
    assert_eq!(finding.to_string(), "warning: ssh: cluster web\\x1b\\\\");
}

#[test]
fn the_cluster_not_logged_in_to_is_named_escaped() {
    let cluster: KubernetesCluster = serde_json::from_value(serde_json::json!({
        "id": "c1", "name": "web\r\nok: ssh: all control nodes verified\x1b[2J",
        "state": "Running", "controlnodes": 1, "size": 1,
    }))
    .unwrap();
    assert_eq!(
        login_cluster(&[cluster]).unwrap_err().to_string(),
        format!(
            "cluster web\\x0d\\x0aok: ssh: all control nodes verified\\x1b[2J (c1): {}; SSH was not tried",
            crate::cks::NO_ENDPOINT
        )
    );
}

#[test]
fn says_when_run_would_serve_the_socket_systemd_passes_instead_of_http_listen() {
    let said = |pid: Option<&str>, fds: Option<&str>, names: Option<&str>| {
        passed_socket(passed_fds(42, pid, fds, names)).map(|f| f.to_string())
    };
    // Started by hand: nothing passed, http.listen is bound.
    assert_eq!(said(None, None, None), None);
    assert_eq!(said(Some("7"), Some("1"), None), None);
    assert_eq!(
        said(Some("42"), Some("1"), Some("cks-drift.socket")).as_deref(),
        Some(
            "ok: http.listen: not used: `run` serves the socket systemd passes (fd 3, \
             cks-drift.socket) in its place"
        )
    );
    assert_eq!(
        said(Some("42"), Some("2"), Some("a:b")).as_deref(),
        Some(
            "warning: http.listen: systemd passed 2 sockets (a, b); cks-drift serves one: give \
             cks-drift.socket a single ListenStream=; `run` would bind http.listen instead"
        )
    );
    assert_eq!(
        said(Some("42"), Some("x"), None).as_deref(),
        Some(
            "warning: http.listen: LISTEN_FDS=\"x\" is not what systemd sets (sd_listen_fds(3)); \
             `run` would bind http.listen instead"
        )
    );
}
