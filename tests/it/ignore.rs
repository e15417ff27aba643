//! `[[ignore]]` rules end to end: a matched finding is reported as ignored and not alerted; a
//! rule that expires brings the alert; `validate-config` names what is wrong with a rule.

use std::time::Duration;

use crate::support::cloud::{binary, mismatches, one_cluster};

fn rule(worker: &str, extra: &str) -> String {
    format!("[[ignore]]\nvm = \"{worker}\"\nreason = \"kept for forensics\"\n{extra}")
}

#[tokio::test]
async fn a_matched_finding_is_reported_as_ignored_and_not_alerted() {
    let (mut cloud, id) = one_cluster().await;
    let worker = cloud.unmap_last_worker(&id);
    cloud.extra = rule(&worker, "by = \"jdoe\"\n");
    // Without notifying (and without a state), the rule marks the finding all the same.
    let (_, report) = cloud.check_json(&["--no-notify"]).await;
    assert_eq!(
        report["mismatches"][0]["ignored"],
        "rule 1: kept for forensics"
    );
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(
        mismatches(&report),
        [(
            "unmapped_vm".to_string(),
            format!("unmapped_vm:{worker}"),
            Some(true)
        )],
        "{}",
        run.stderr
    );
    assert_eq!(
        report["mismatches"][0]["ignored"],
        "rule 1: kept for forensics"
    );
    assert_eq!(cloud.active_alerts().len(), 0);
    assert_eq!(cloud.sim().call_count("addAnnotation"), 0);
    let events = cloud.event_lines();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["level"], "INFO");
    assert!(
        events[0]["description"]
            .as_str()
            .unwrap()
            .ends_with("; ignored by [[ignore]] rule 1: kept for forensics"),
        "{}",
        events[0]
    );
    // The text report says so too.
    let run = cloud.check(&[]).await;
    assert!(
        run.stdout
            .contains("    ignored by [[ignore]] rule 1: kept for forensics\n"),
        "{}",
        run.stdout
    );
}

#[tokio::test]
async fn an_expired_rule_brings_the_alert_with_a_warning() {
    let (mut cloud, id) = one_cluster().await;
    let worker = cloud.unmap_last_worker(&id);
    let soon = cks_drift::base::time::Timestamp::now().plus(Duration::from_secs(2));
    cloud.extra = rule(&worker, &format!("expires = \"{soon}\"\n"));
    let (run, _) = cloud.check_json(&[]).await;
    assert_eq!(cloud.active_alerts().len(), 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("ignore[1].expires is ")
            && run
                .stderr
                .contains(", within a day: then the findings it matches are alerted"),
        "{}",
        run.stderr
    );
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let (run, report) = cloud.check_json(&[]).await;
    assert!(
        run.stderr.contains(&format!(
            "[[ignore]] rule 1 expired at {soon}; the finding is alerted now"
        )),
        "{}",
        run.stderr
    );
    assert_eq!(report["mismatches"][0]["ignored"], serde_json::Value::Null);
    let alerts = cloud.active_alerts();
    assert_eq!(alerts.len(), 1);
    assert!(alerts[0].description.contains(&worker));
}

/// What `validate-config --connect` prints with the cloud's config.
async fn validate_connect(cloud: &crate::support::cloud::TestCloud) -> String {
    let config = cloud.write_config();
    let out = tokio::process::Command::new(binary())
        .args(["validate-config", "--connect", "-c"])
        .arg(&config)
        .env_remove("RUST_LOG")
        .output()
        .await
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn validate_config_names_what_is_wrong_with_a_rule() {
    let (mut cloud, id) = one_cluster().await;
    let worker = cloud.unmap_last_worker(&id);
    // A check first, so that the state file holds the last cycle's findings.
    cloud.check_json(&[]).await;
    cloud.extra = format!(
        "{}\n[[ignore]]\ncluster = \"{id}\"\nnode = \"no-such-node\"\nreason = \"typo\"\n\n[[ignore]]\ncluster = \"web\"\nreason = \"old\"\nexpires = 2020-01-01\n\n[[ignore]]\ncluster = \"wbe\"\nreason = \"typo\"\n",
        rule(&worker, "")
    );
    let stdout = validate_connect(&cloud).await;
    assert!(
        stdout.contains(
            "warning: ignore[3].expires: is 2020-01-01T00:00:00Z, in the past: the rule matches nothing and its findings are alerted; remove the rule or move the date\n"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "warning: ignore[2]: matches none of the findings open after the last cycle ({}); check its cluster, kind, vm and node\n",
            cloud.state_path().display()
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "warning: ignore[4].cluster: is \"wbe\", which is neither the id nor the name of any of the 1 clusters listed: the rule matches nothing\n"
        ),
        "{stdout}"
    );
    assert!(!stdout.contains("ignore[1]"), "{stdout}");
}

#[tokio::test]
async fn a_cluster_name_two_tenants_share_is_not_a_rule_s_cluster() {
    let (mut cloud, id) = one_cluster().await;
    let other = cloud.sim().with_world(|w| {
        let domain = w.add_domain("tenants");
        let tenant = w.add_account("tenant", &domain);
        w.add_cluster("web", tenant, 1, 1, 0)
    });
    cloud.extra = "[[ignore]]\ncluster = \"web\"\nkind = \"blind\"\nreason = \"lab\"\n\n[[ignore]]\nnode = \"web-node-1\"\nreason = \"built by hand\"\n".to_string();
    let stdout = validate_connect(&cloud).await;
    // A node name alone would match it in every tenant's cluster: an error, and --connect is
    // not tried.
    assert!(
        stdout.contains(
            "error: ignore[2].cluster: is missing: a rule with a node names its cluster (by id, or by name), or it matches that node name in every tenant's cluster\n"
        ),
        "{stdout}"
    );
    cloud.extra = "[[ignore]]\ncluster = \"web\"\nkind = \"blind\"\nreason = \"lab\"\n".to_string();
    let stdout = validate_connect(&cloud).await;
    let line = stdout
        .lines()
        .find(|l| l.starts_with("warning: ignore[1].cluster: "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        line.starts_with("warning: ignore[1].cluster: is \"web\", the name of 2 clusters (")
            && line.contains(&id)
            && line.contains(&other)
            && line.ends_with(
                "): a name is each tenant's to choose, so the rule matches them all; give the id of the one meant"
            ),
        "{stdout}"
    );
}
