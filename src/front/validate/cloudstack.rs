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
