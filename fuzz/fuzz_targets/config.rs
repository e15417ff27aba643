//! The config file, from TOML text to validated settings (`Config::from_toml`).
//!
//! Input: byte 0 says whether the secrets come from the environment (bit 0), the rest is the
//! file's text.
//!
//! What must hold: the text either loads, and then every setting is within the bounds its
//! validation promises and no secret shows in `Debug`, or it is refused with a one-line
//! syntax error, or with problems that each name a key and say something, of a size bounded
//! by the text's.
#![no_main]

use std::path::Path;
use std::time::Duration;

use cks_drift::base::id::is_uuid;
use cks_drift::config::{Config, ConfigError, KIND_NAMES, parse_database_url};
use libfuzzer_sys::fuzz_target;

/// What the environment gives for each secret when byte 0 asks for it.
const SECRET: &str = "FUZZ-SECRET-3f9a";

fuzz_target!(|data: &[u8]| {
    let [flags, text @ ..] = data else {
        return;
    };
    // A config file is read as UTF-8 (`read_to_string`): anything else is refused earlier.
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    let from_env = flags & 1 == 1;
    let env = |name: &str| from_env.then(|| format!("{SECRET}-{name}"));
    match Config::from_toml(text, Path::new("/etc/cks-drift/cks-drift.toml"), &env) {
        Ok(config) => check_loaded(&config, text, from_env),
        Err(ConfigError::Syntax { detail, .. }) => {
            assert!(!detail.trim().is_empty(), "a syntax error without detail");
            assert!(
                !detail.contains('\n'),
                "a syntax error on several lines: {detail}"
            );
            assert!(detail.len() <= 4 * text.len() + 1_000, "{detail}");
        }
        Err(ConfigError::Invalid { problems, .. }) => {
            assert!(!problems.is_empty(), "invalid without a problem");
            let bound = 16 * text.len() + 1_500;
            for p in &problems {
                assert!(!p.key.is_empty(), "a problem naming no key: {p:?}");
                assert!(
                    !p.message.trim().is_empty(),
                    "a problem saying nothing: {p:?}"
                );
                assert!(
                    p.message.len() <= bound,
                    "a message of {} bytes",
                    p.message.len()
                );
            }
        }
        Err(e @ ConfigError::Read { .. }) => panic!("from_toml read nothing, yet: {e}"),
    }
});

fn check_loaded(config: &Config, text: &str, from_env: bool) {
    if from_env && !text.contains(SECRET) {
        let shown = format!("{config:?}");
        assert!(!shown.contains(SECRET), "a secret shows in Debug: {shown}");
        assert!(config.cloudstack.api_key.expose().starts_with(SECRET));
    }
    let cs = &config.cloudstack;
    assert!(
        endpoint_ok(&cs.url),
        "cloudstack.url {:?} was taken",
        cs.url
    );
    assert!((1..=10_000).contains(&cs.page_size));
    within(
        cs.timeout,
        Duration::from_secs(1),
        Duration::from_secs(3_600),
    );
    assert!(!cs.api_key.expose().trim().is_empty());
    assert!(!cs.secret_key.expose().trim().is_empty());

    let ssh = &config.ssh;
    assert!(!ssh.user.trim().is_empty());
    assert!(!ssh.command.trim().is_empty());
    within(
        ssh.connect_timeout,
        Duration::from_millis(100),
        Duration::from_secs(600),
    );
    within(
        ssh.command_timeout,
        Duration::from_secs(1),
        Duration::from_secs(3_600),
    );

    let check = &config.check;
    assert!((1..=1024).contains(&check.concurrency));
    within(
        check.interval,
        Duration::from_secs(1),
        Duration::from_secs(7 * 86_400),
    );
    within(
        check.initial_delay,
        Duration::ZERO,
        Duration::from_secs(86_400),
    );
    within(
        check.grace_period,
        Duration::ZERO,
        Duration::from_secs(30 * 86_400),
    );
    within(
        check.blind_after,
        Duration::ZERO,
        Duration::from_secs(30 * 86_400),
    );

    let types = &config.notify.alert_types;
    assert!(*types.start() > 100 && types.start() <= types.end() && *types.end() <= 32_767);
    assert!((1..=1000).contains(&config.notify.alert_cap));

    if let Some(db) = &config.database {
        assert_eq!(
            parse_database_url(&db.url),
            Ok((db.host.clone(), db.port, db.user.clone(), db.name.clone())),
            "database.url"
        );
        assert!(db.tls || db.ca_file.is_none());
    }
    if let Some(am) = &config.alertmanager {
        assert!(!am.urls.is_empty());
        // As the URL parser reads them (it is lenient: `https:/host` is `https://host/`), which
        // is how they are used.
        for u in &am.urls {
            let parsed = url::Url::parse(u).unwrap_or_else(|e| panic!("{u:?}: {e}"));
            assert!(matches!(parsed.scheme(), "http" | "https"), "{u:?}");
            assert!(
                parsed.username().is_empty() && parsed.password().is_none(),
                "{u:?}"
            );
        }
    }
    for (i, rule) in config.ignore.iter().enumerate() {
        assert_eq!(rule.number, i + 1);
        assert!(
            !rule.reason.trim().is_empty(),
            "rule {} has no reason",
            rule.number
        );
        assert!(
            rule.cluster.is_some()
                || rule.kind.is_some()
                || rule.vm.is_some()
                || rule.node.is_some(),
            "rule {} matches everything",
            rule.number
        );
        if rule.cluster.is_none() {
            assert!(
                rule.node.is_none(),
                "rule {} names a node in every cluster",
                rule.number
            );
            assert!(
                rule.vm.as_deref().is_none_or(is_uuid),
                "rule {} names a VM in every cluster",
                rule.number
            );
        }
        if let Some(kind) = &rule.kind {
            assert!(KIND_NAMES.contains(&kind.as_str()), "kind {kind:?}");
        }
    }
}

/// `cloudstack.url` is an http or https URL with a host, no query and no user or password.
fn endpoint_ok(text: &str) -> bool {
    url::Url::parse(text).is_ok_and(|u| {
        matches!(u.scheme(), "http" | "https")
            && u.host().is_some()
            && u.query().is_none()
            && u.username().is_empty()
            && u.password().is_none()
    })
}

fn within(d: Duration, min: Duration, max: Duration) {
    assert!(
        d >= min && d <= max,
        "{d:?} is not within {min:?}..={max:?}"
    );
}
