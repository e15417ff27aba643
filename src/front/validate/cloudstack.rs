//! The connection test's CloudStack steps: a client that tries once, which release answers,
//! and who holds the API key; a failure worded as `check` words it.

use std::sync::Arc;

use super::{Finding, Severity};
use crate::base::untrusted::shown;
use crate::cloudstack::client::{Client, ClientOptions};
use crate::cloudstack::http::HttpTransport;
use crate::cloudstack::release::Release;
use crate::cloudstack::retry::RetryPolicy;
use crate::config::Config;
use crate::engine::diagnose;

pub(super) fn api_failure(e: &crate::cloudstack::error::ApiError, url: &str) -> Finding {
    let d = diagnose::api(e, url);
    Finding::error(&format!("cloudstack API ({})", d.step), d.line)
}

/// Which CloudStack answers, and what cks-drift does differently on it; an error for a
/// release older than 4.16 or an answer that names none.
pub(super) async fn server_release(
    api: &Client,
    url: &str,
) -> Result<(Finding, Option<Release>), Finding> {
    let version = api.version().await.map_err(|e| api_failure(&e, url))?;
    let Some(version) = version else {
        return Ok((
            Finding::warning(
                "cloudstack release",
                "listCapabilities does not show cloudstackversion \
                 (expose.cloudstack.version.api.list.capabilities is false): the release is \
                 unknown, so cks-drift reads the networks in every scope, which is right on every \
                 release but costs more calls; set it to true to let cks-drift tell",
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
                "listCapabilities answered cloudstackversion \"{version}\", which names no \
                 release; cks-drift supports CloudStack {} and later",
                Release::OLDEST
            ),
        ));
    };
    if !release.supported() {
        return Err(Finding::error(
            "cloudstack release",
            format!(
                "CloudStack {version} is older than {}, the oldest release cks-drift supports: \
                 its Kubernetes Service keeps the VM map differently; upgrade CloudStack first",
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
pub(super) async fn key_holder(api: &Client, api_key: &str) -> Result<Finding, Finding> {
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
                "cannot tell the type of the key's role ({}); it must be Admin, or cks-drift's \
                 own annotations are not read back and other domains' clusters are not checked: \
                 allow getUser to the role, or check its type by hand",
                crate::base::error_chain::error_chain(&e)
            ),
        )),
    }
}

/// A client of the configured API that sends each request once.
pub(super) fn single_attempt_client(
    config: &Config,
) -> Result<Client, crate::cloudstack::error::ApiError> {
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

/// Whether the management server runs its own VM map check, and what cks-drift does about it.
pub(super) async fn server_check(
    api: &Client,
    config: &Config,
    url: &str,
) -> Result<Finding, Finding> {
    use crate::cloudstack::server_check::ServerCheck;
    let check = api.server_check().await.map_err(|e| api_failure(&e, url))?;
    let defer = config.notify.defer_to_server_check;
    Ok(match check {
        ServerCheck::Absent => Finding::new(
            Severity::Ok,
            "cloudstack VM map check",
            "CloudStack has no VM map check of its own: cks-drift alerts every mismatch",
        ),
        ServerCheck::Off => Finding::new(
            Severity::Ok,
            "cloudstack VM map check",
            "CloudStack has a VM map check of its own, switched off \
             (cloud.kubernetes.cluster.vm.map.check.enabled = false): cks-drift alerts every \
             mismatch; it reads the setting every cycle",
        ),
        ServerCheck::On if defer => Finding::new(
            Severity::Ok,
            "cloudstack VM map check",
            "CloudStack runs its own VM map check: the mismatches it alerts itself (by names) get \
             no CloudStack alert or annotation from cks-drift; findings by identity, blind \
             clusters and map_count are still alerted, and every finding still goes to the event \
             log, the metrics, Alertmanager and the report",
        ),
        ServerCheck::On => Finding::warning(
            "cloudstack VM map check",
            "CloudStack runs its own VM map check and notify.defer_to_server_check is false: each \
             mismatch it finds is alerted twice; set notify.defer_to_server_check = true (the \
             default), or switch one of the two off",
        ),
    })
}

/// The highest number of a default alert type on releases that cannot list them
/// (`listAlertTypes` came in 4.19.1): 32 on 4.16 to 4.19.0 (`AlertService.AlertType`).
const HIGHEST_DEFAULT_BEFORE_LIST: i32 = 32;
/// The highest on any release read (34: 4.20.3, 4.22.1, 4.23), for a release not known.
const HIGHEST_DEFAULT_KNOWN: i32 = 34;

/// Whether `notify.alert_types` stays clear of the default alert types of the release that
/// answers: `generateAlert` refuses a default type's number under another name (431 inside
/// the job, "There is a default alert having type N and name ALERT.X"). Read with
/// `listAlertTypes` where it exists (4.19.1 on), else from what the older releases define.
pub(super) async fn alert_types(
    api: &Client,
    release: Option<Release>,
    range: &std::ops::RangeInclusive<u32>,
) -> Result<Finding, Finding> {
    let listed = match release {
        Some(r) if r < Release::LISTS_ALERT_TYPES => None,
        _ => api.alert_types().await.ok(),
    };
    let (lo, hi) = (i64::from(*range.start()), i64::from(*range.end()));
    let what = format!("notify.alert_types {lo}-{hi}");
    let Some(types) = listed else {
        let (highest, on) = match release {
            Some(r) if r < Release::LISTS_ALERT_TYPES => {
                (HIGHEST_DEFAULT_BEFORE_LIST, "on this release")
            }
            _ => (HIGHEST_DEFAULT_KNOWN, "on any release up to 4.23"),
        };
        return Ok(Finding::new(
            Severity::Ok,
            "cloudstack alert types",
            format!("{what} is clear of CloudStack's own alert types (0 to {highest} {on})"),
        ));
    };
    let clash = clashes(&types, range);
    if !clash.is_empty() {
        return Err(Finding::error(
            "cloudstack alert types",
            format!(
                "{what} holds CloudStack's own alert types {}: CloudStack refuses an alert of \
                 such a type under any other name; choose numbers above them",
                clash.join(", ")
            ),
        ));
    }
    let highest = types.iter().map(|t| t.id).max().unwrap_or(0);
    Ok(Finding::new(
        Severity::Ok,
        "cloudstack alert types",
        format!(
            "{what} is clear of CloudStack's {} own alert types (0 to {highest}, as listAlertTypes \
             lists them)",
            types.len()
        ),
    ))
}

/// The default alert types of `types` inside `range`, as `<number> (<name>)`.
fn clashes(
    types: &[crate::cloudstack::model::AlertType],
    range: &std::ops::RangeInclusive<u32>,
) -> Vec<String> {
    let (lo, hi) = (i64::from(*range.start()), i64::from(*range.end()));
    types
        .iter()
        .filter(|t| (lo..=hi).contains(&i64::from(t.id)))
        .map(|t| format!("{} ({})", t.id, shown(&t.name, 80)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloudstack::model::AlertType;

    #[test]
    fn a_range_holding_a_default_alert_type_is_named_with_each_type_it_holds() {
        let types: Vec<AlertType> = [(8, "ALERT.USERVM"), (34, "ALERT.VR.PRIVATE.IFACE.MTU")]
            .iter()
            .map(|(id, name)| AlertType {
                id: *id,
                name: name.to_string(),
            })
            .collect();
        assert_eq!(clashes(&types, &(3000..=3999)), Vec::<String>::new());
        assert_eq!(
            clashes(&types, &(30..=40)),
            vec!["34 (ALERT.VR.PRIVATE.IFACE.MTU)".to_string()]
        );
        assert_eq!(clashes(&types, &(0..=8)).len(), 1);
    }
}
