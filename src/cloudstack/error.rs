//! Errors of the CloudStack API layer: what went wrong with one command, and whether trying
//! again could help. Turning an HTTP answer into one of these lives in `response`; errors of
//! the layers above (a cluster check, the daemon) do not belong here.

use std::time::Duration;

use super::transport::TransportError;

/// Why a CloudStack command did not give a usable answer.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// No HTTP answer at all (connection refused, deadline passed, TLS failure, ...).
    #[error("cloudstack command {command} got no answer")]
    Transport {
        command: String,
        #[source]
        source: TransportError,
    },

    /// HTTP 401. CloudStack gives the same bare answer for every authentication failure.
    #[error(
        "cloudstack at {url} refused {command} with HTTP 401 (unable to verify user credentials \
         and/or request signature); this means a wrong API key or secret key, an expired \
         request (clock skew between this host and the management server), a disabled account \
         or user, or a command the key's role may not call"
    )]
    Unauthorized { url: String, command: String },

    /// The management server rejected the page size (error 431): `cloudstack.page_size` is
    /// above the server's `default.page.size`, which is also the largest page it serves.
    #[error(
        "cloudstack rejected {command} with page size {page_size}: the management server's \
         default.page.size is lower than cloudstack.page_size; lower cloudstack.page_size, or \
         raise the global setting default.page.size and restart the management server"
    )]
    PageSizeTooLarge { command: String, page_size: u32 },

    /// CloudStack's own JSON error answer (`errorcode`, `cserrorcode`, `errortext`).
    #[error("cloudstack rejected {command} with error {code}{}: {text}", cs_suffix(*.cserrorcode))]
    CloudStack {
        command: String,
        code: u16,
        cserrorcode: Option<u32>,
        text: String,
    },

    /// An HTTP answer that is not CloudStack's (a proxy's error page, an unexpected status).
    #[error("cloudstack command {command} got an unexpected HTTP {status} answer: {snippet}")]
    Http {
        command: String,
        status: u16,
        snippet: String,
    },

    /// Not sent: this instance no longer holds the lock that lets it change anything.
    #[error("cloudstack command {command} not sent: this instance no longer holds the lock")]
    Fenced { command: String },

    /// HTTP 200 whose body is not the expected JSON.
    #[error("cannot read the answer to cloudstack command {command}: {detail}")]
    Decode { command: String, detail: String },

    /// An asynchronous job ended with `jobstatus` 2.
    #[error("cloudstack job {job_id} of {command} failed{}: {text}", code_suffix(*.code))]
    AsyncJobFailed {
        command: String,
        job_id: String,
        code: Option<u16>,
        text: String,
    },

    /// An asynchronous job was still pending when the client stopped waiting.
    #[error("cloudstack job {job_id} of {command} still pending after {waited:?}")]
    AsyncJobTimeout {
        command: String,
        job_id: String,
        waited: Duration,
    },

    /// The client could not be built from its settings.
    #[error("{key}: {problem}")]
    Config { key: &'static str, problem: String },
}

fn cs_suffix(cserrorcode: Option<u32>) -> String {
    cserrorcode
        .map(|c| format!(" (cserrorcode {c})"))
        .unwrap_or_default()
}

fn code_suffix(code: Option<u16>) -> String {
    code.map(|c| format!(" with error {c}")).unwrap_or_default()
}

/// HTTP statuses that mean "not now" rather than "no": rate limiting and gateway trouble.
const TRANSIENT_STATUSES: [u16; 4] = [429, 502, 503, 504];

impl ApiError {
    /// True only when trying again later could succeed: a refused connection, a deadline,
    /// or HTTP 429, 502, 503 or 504. CloudStack's own errors (431, 401, 530-537, ...) are
    /// answers, not outages, and are never retried.
    pub fn is_transient(&self) -> bool {
        match self {
            ApiError::Transport { source, .. } => matches!(
                source,
                TransportError::Connect { .. } | TransportError::Timeout { .. }
            ),
            ApiError::Http { status, .. } => TRANSIENT_STATUSES.contains(status),
            ApiError::CloudStack { code, .. } => TRANSIENT_STATUSES.contains(code),
            _ => false,
        }
    }

    /// True when CloudStack refused the request itself for good: error 431 (a parameter it
    /// does not accept, or an entity that does not exist), from the command or from its
    /// asynchronous job. The same request would be refused again, so it is not retried
    /// later either. A page size refusal is a setting to fix, not such a refusal.
    pub fn is_refusal(&self) -> bool {
        match self {
            ApiError::CloudStack { code, .. } => *code == 431,
            ApiError::AsyncJobFailed { code, .. } => *code == Some(431),
            _ => false,
        }
    }

    /// CloudStack's `errorcode` (equal to the HTTP status), or the HTTP status of an answer
    /// that is not CloudStack's; `None` when there was no answer.
    pub fn code(&self) -> Option<u16> {
        match self {
            ApiError::Unauthorized { .. } => Some(401),
            ApiError::PageSizeTooLarge { .. } => Some(431),
            ApiError::CloudStack { code, .. } => Some(*code),
            ApiError::Http { status, .. } => Some(*status),
            ApiError::AsyncJobFailed { code, .. } => *code,
            ApiError::Transport { .. }
            | ApiError::Fenced { .. }
            | ApiError::Decode { .. }
            | ApiError::AsyncJobTimeout { .. }
            | ApiError::Config { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transport(source: TransportError) -> ApiError {
        ApiError::Transport {
            command: "listZones".into(),
            source,
        }
    }

    fn http(status: u16) -> ApiError {
        ApiError::Http {
            command: "listZones".into(),
            status,
            snippet: "<html>".into(),
        }
    }

    fn cloudstack(code: u16) -> ApiError {
        ApiError::CloudStack {
            command: "listZones".into(),
            code,
            cserrorcode: None,
            text: "x".into(),
        }
    }

    #[test]
    fn only_outages_are_transient() {
        let io = || Box::new(std::io::Error::other("boom"));
        assert!(
            transport(TransportError::Connect {
                url: "u".into(),
                source: io()
            })
            .is_transient()
        );
        assert!(
            transport(TransportError::Timeout {
                url: "u".into(),
                seconds: 1
            })
            .is_transient()
        );
        assert!(
            !transport(TransportError::Other {
                url: "u".into(),
                source: io()
            })
            .is_transient()
        );
        for status in [429, 502, 503, 504] {
            assert!(http(status).is_transient(), "{status}");
        }
        for status in [400, 401, 404, 500, 530] {
            assert!(!http(status).is_transient(), "{status}");
        }
        // CloudStack's own API_LIMIT_EXCEED and SERVICE_UNAVAILABLE mean "not now".
        assert!(cloudstack(429).is_transient());
        assert!(cloudstack(503).is_transient());
        for code in [400, 401, 431, 432, 530, 531, 532, 533, 534, 535, 536, 537] {
            assert!(!cloudstack(code).is_transient(), "{code}");
        }
        let unauthorized = ApiError::Unauthorized {
            url: "u".into(),
            command: "c".into(),
        };
        assert!(!unauthorized.is_transient());
        let page = ApiError::PageSizeTooLarge {
            command: "c".into(),
            page_size: 1000,
        };
        assert!(!page.is_transient());
    }

    #[test]
    fn only_431_is_a_refusal_for_good() {
        assert!(cloudstack(431).is_refusal());
        for code in [401, 429, 432, 503, 530, 531, 537] {
            assert!(!cloudstack(code).is_refusal(), "{code}");
        }
        let job = |code| ApiError::AsyncJobFailed {
            command: "generateAlert".into(),
            job_id: "j".into(),
            code,
            text: "x".into(),
        };
        assert!(job(Some(431)).is_refusal());
        assert!(!job(Some(530)).is_refusal());
        assert!(!job(None).is_refusal());
        let page = ApiError::PageSizeTooLarge {
            command: "c".into(),
            page_size: 1000,
        };
        assert!(!page.is_refusal());
        assert!(!http(431).is_refusal());
    }

    #[test]
    fn codes_are_the_errorcode_or_status() {
        assert_eq!(cloudstack(431).code(), Some(431));
        assert_eq!(http(502).code(), Some(502));
        let page = ApiError::PageSizeTooLarge {
            command: "c".into(),
            page_size: 1000,
        };
        assert_eq!(page.code(), Some(431));
        let timeout = transport(TransportError::Timeout {
            url: "u".into(),
            seconds: 1,
        });
        assert_eq!(timeout.code(), None);
    }

    #[test]
    fn messages_name_the_command_and_codes() {
        let e = ApiError::CloudStack {
            command: "listVirtualMachines".into(),
            code: 431,
            cserrorcode: Some(4350),
            text: "Unable to execute API command due to invalid value".into(),
        };
        assert_eq!(
            e.to_string(),
            "cloudstack rejected listVirtualMachines with error 431 (cserrorcode 4350): \
             Unable to execute API command due to invalid value"
        );
        let e = ApiError::AsyncJobFailed {
            command: "generateAlert".into(),
            job_id: "j1".into(),
            code: Some(530),
            text: "boom".into(),
        };
        assert_eq!(
            e.to_string(),
            "cloudstack job j1 of generateAlert failed with error 530: boom"
        );
    }
}
