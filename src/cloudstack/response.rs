//! Reading one CloudStack answer: an HTTP status and body become the object under
//! `<command>response`, or the [`ApiError`] that explains why there is none; an asynchronous
//! job's status becomes its result or its failure. Pure functions of the answer: sending,
//! retrying and waiting belong to the client, and the rows of list pages to `pages`.

use serde_json::Value;

use super::error::ApiError;
use super::transport::RawResponse;

/// Longest part of an unexpected answer kept in an error.
const SNIPPET_CHARS: usize = 200;

/// Longest text of the answer kept in an error: CloudStack's error texts are a sentence or
/// two, and a value it sent that is not what it should be is quoted; a longer one (a stack
/// trace, a whole page) is cut, as an answer may be megabytes.
pub(super) const TEXT_CHARS: usize = 1_000;

/// Largest answer read whole into a JSON tree: an answer that is not a list page (an error,
/// a job's status, a page that does not read as one, to say what is wrong with it). A tree
/// takes up to 16 times its text (`[0,0,…]`: 2 bytes a value of 32), so an answer of the
/// 64 MiB the transport allows would take a gigabyte. CloudStack's own such answers are a
/// few KiB; a larger one is explained from its start, or, for a page, from where its
/// streamed reading stopped (see `pages`).
pub(super) const TREE_BYTES: usize = 256 * 1024;

/// Reads one HTTP answer to `command`: the object under `<command lowercased>response` on
/// HTTP 200, otherwise the matching [`ApiError`]. `page_size` is the one the request asked
/// for, to explain a rejected page size.
pub fn read_response(
    command: &str,
    endpoint: &str,
    page_size: u32,
    raw: &RawResponse,
) -> Result<Value, ApiError> {
    read_answer(command, endpoint, page_size, &Held::whole(raw))
}

/// What is kept of an answer to explain it: its HTTP status, its text, whole when it is at
/// most [`TREE_BYTES`] long, otherwise its first [`TREE_BYTES`] bytes, and its length.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Held<'a> {
    pub(super) status: u16,
    pub(super) text: std::borrow::Cow<'a, str>,
    pub(super) total: usize,
}

impl<'a> Held<'a> {
    pub(super) fn whole(raw: &'a RawResponse) -> Held<'a> {
        Held {
            status: raw.status,
            text: std::borrow::Cow::Borrowed(&raw.body),
            total: raw.body.len(),
        }
    }
}

/// [`read_response`] of what is held of an answer: only an answer held whole is read into a
/// tree; of a longer one, its start is quoted.
pub(super) fn read_answer(
    command: &str,
    endpoint: &str,
    page_size: u32,
    held: &Held<'_>,
) -> Result<Value, ApiError> {
    let key = response_key(command);
    let text: &str = &held.text;
    let parsed = if held.total <= TREE_BYTES {
        serde_json::from_str::<Value>(text).map_err(|e| format!("not JSON ({e})"))
    } else {
        Err(format!(
            "an answer of {} bytes, more than the {TREE_BYTES} bytes read whole",
            held.total
        ))
    };
    if held.status == 200 {
        let mut body = parsed.map_err(|e| ApiError::Decode {
            command: command.to_string(),
            detail: format!("{e}: {}", snippet(text)),
        })?;
        return match body.get_mut(&key).map(Value::take) {
            Some(object) => Ok(object),
            None => Err(ApiError::Decode {
                command: command.to_string(),
                detail: format!("no `{key}` in {}", snippet(text)),
            }),
        };
    }
    if held.status == 401 {
        return Err(ApiError::Unauthorized {
            url: endpoint.to_string(),
            command: command.to_string(),
        });
    }
    let error = parsed.ok().and_then(|body| {
        [key.as_str(), "errorresponse"]
            .into_iter()
            .filter_map(|k| body.get(k))
            .find(|object| object.get("errorcode").is_some() || object.get("errortext").is_some())
            .cloned()
    });
    let Some(error) = error else {
        return Err(ApiError::Http {
            command: command.to_string(),
            status: held.status,
            snippet: snippet(text),
        });
    };
    let code = error
        .get("errorcode")
        .and_then(as_u16)
        .unwrap_or(held.status);
    let text = error.get("errortext").and_then(Value::as_str).unwrap_or("");
    if code == 401 {
        return Err(ApiError::Unauthorized {
            url: endpoint.to_string(),
            command: command.to_string(),
        });
    }
    let lower = text.to_lowercase();
    if code == 431 && lower.contains("page size") && lower.contains("exceed") {
        return Err(ApiError::PageSizeTooLarge {
            command: command.to_string(),
            page_size,
        });
    }
    Err(ApiError::CloudStack {
        command: command.to_string(),
        code,
        cserrorcode: error
            .get("cserrorcode")
            .and_then(as_u64)
            .and_then(|c| u32::try_from(c).ok()),
        text: cut(text),
    })
}

/// The key CloudStack puts its answer to `command` under.
pub(super) fn response_key(command: &str) -> String {
    format!("{}response", command.to_lowercase())
}

/// The job an asynchronous `command` started, from its answer.
pub(super) fn job_id<'a>(command: &str, answer: &'a Value) -> Result<&'a str, ApiError> {
    answer
        .get("jobid")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::Decode {
            command: command.to_string(),
            detail: "no `jobid` in the answer to an asynchronous command".to_string(),
        })
}

/// Reads the `queryAsyncJobResult` answer `status` about job `job_id` of `command`: `None`
/// while the job is pending, its `jobresult` once it succeeded, or why it failed.
pub(super) fn read_job(
    command: &str,
    job_id: &str,
    mut status: Value,
) -> Result<Option<Value>, ApiError> {
    match status.get("jobstatus").and_then(Value::as_u64) {
        Some(0) => Ok(None),
        Some(1) => Ok(Some(
            status
                .get_mut("jobresult")
                .map(Value::take)
                .unwrap_or_default(),
        )),
        Some(2) => {
            let result = status.get("jobresult").cloned().unwrap_or_default();
            Err(ApiError::AsyncJobFailed {
                command: command.to_string(),
                job_id: job_id.to_string(),
                code: result.get("errorcode").and_then(as_u16),
                text: cut(result
                    .get("errortext")
                    .and_then(Value::as_str)
                    .unwrap_or("(no error text)")),
            })
        }
        other => Err(ApiError::Decode {
            command: "queryAsyncJobResult".to_string(),
            detail: format!("job {job_id} has no known jobstatus ({other:?})"),
        }),
    }
}

/// A number CloudStack wrote as a number or, as it sometimes does, as a numeric string.
pub(super) fn as_u64(value: &Value) -> Option<u64> {
    match value {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn as_u16(value: &Value) -> Option<u16> {
    as_u64(value).and_then(|n| u16::try_from(n).ok())
}

/// `text`, cut to [`TEXT_CHARS`] characters and `…` when longer.
pub(super) fn cut(text: &str) -> String {
    match text.char_indices().nth(TEXT_CHARS) {
        None => text.to_string(),
        Some((end, _)) => format!("{}…", &text[..end]),
    }
}

/// The start of a body, whitespace folded, at most [`SNIPPET_CHARS`] characters. Only that
/// start is read: a body may be 64 MiB.
fn snippet(body: &str) -> String {
    let mut folded: String = body
        .split_whitespace()
        .flat_map(|word| std::iter::once(' ').chain(word.chars()))
        .skip(1)
        .take(SNIPPET_CHARS + 1)
        .collect();
    if folded.is_empty() {
        return "(empty body)".to_string();
    }
    if let Some((end, _)) = folded.char_indices().nth(SNIPPET_CHARS) {
        folded.truncate(end);
        folded.push('…');
    }
    folded
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn read(command: &str, status: u16, body: &str) -> ApiError {
        read_response(
            command,
            "https://cs.example/client/api",
            500,
            &RawResponse {
                status,
                body: body.to_string(),
            },
        )
        .unwrap_err()
    }

    #[test]
    fn a_431_is_a_cloudstack_error() {
        let err = read(
            "listVirtualMachines",
            431,
            r#"{"listvirtualmachinesresponse":{"uuidList":[],"errorcode":431,"cserrorcode":4350,"errortext":"Invalid parameter id value=x due to incorrect long value format, or entity does not exist"}}"#,
        );
        match &err {
            ApiError::CloudStack {
                command,
                code,
                cserrorcode,
                text,
            } => {
                assert_eq!(command, "listVirtualMachines");
                assert_eq!(*code, 431);
                assert_eq!(*cserrorcode, Some(4350));
                assert_eq!(
                    text,
                    "Invalid parameter id value=x due to incorrect long value format, or entity does not exist"
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(err.code(), Some(431));
        assert!(!err.is_transient());
    }

    #[test]
    fn the_errorresponse_key_is_read() {
        let err = read(
            "frobnicate",
            432,
            r#"{"errorresponse":{"uuidList":[],"errorcode":432,"cserrorcode":9999,"errortext":"The given command does not exist or it is not available for the user"}}"#,
        );
        assert!(
            matches!(&err, ApiError::CloudStack { code: 432, cserrorcode: Some(9999), text, .. } if text.starts_with("The given command does not exist")),
            "{err:?}"
        );
    }

    #[test]
    fn a_401_explains_its_causes() {
        let err = read(
            "listKubernetesClusters",
            401,
            r#"{"listkubernetesclustersresponse":{"uuidList":[],"errorcode":401,"errortext":"unable to verify user credentials and/or request signature"}}"#,
        );
        assert!(matches!(&err, ApiError::Unauthorized { .. }), "{err:?}");
        let text = err.to_string();
        for needle in [
            "https://cs.example/client/api",
            "listKubernetesClusters",
            "secret key",
            "clock",
            "disabled account",
            "role",
        ] {
            assert!(text.contains(needle), "{needle}: {text}");
        }
        assert_eq!(err.code(), Some(401));
    }

    #[test]
    fn a_page_size_rejection_names_both_settings() {
        let err = read(
            "listVirtualMachines",
            431,
            r#"{"listvirtualmachinesresponse":{"uuidList":[],"errorcode":431,"cserrorcode":4350,"errortext":"Page size can't exceed max allowed page size value: 500"}}"#,
        );
        assert!(
            matches!(&err, ApiError::PageSizeTooLarge { command, page_size: 500 } if command == "listVirtualMachines"),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(text.contains("default.page.size"), "{text}");
        assert!(text.contains("cloudstack.page_size"), "{text}");
        assert!(text.contains("restart the management server"), "{text}");
        assert_eq!(err.code(), Some(431));
    }

    #[test]
    fn a_proxy_error_page_is_http_and_transient() {
        let page = format!(
            "<html>\n<head><title>502 Bad Gateway</title></head>\n<body>{}</body></html>",
            "x".repeat(500)
        );
        let err = read("listZones", 502, &page);
        match &err {
            ApiError::Http {
                command,
                status,
                snippet,
            } => {
                assert_eq!(command, "listZones");
                assert_eq!(*status, 502);
                assert!(
                    snippet.starts_with("<html> <head><title>502 Bad Gateway</title></head>"),
                    "{snippet}"
                );
                assert_eq!(snippet.chars().count(), SNIPPET_CHARS + 1);
            }
            other => panic!("{other:?}"),
        }
        assert!(err.is_transient());
    }

    #[test]
    fn a_200_that_is_not_json_is_a_decode_error() {
        let err = read("listZones", 200, "<html>login</html>");
        assert!(
            matches!(&err, ApiError::Decode { command, detail } if command == "listZones" && detail.ends_with(": <html>login</html>")),
            "{err:?}"
        );
        let err = read("listZones", 200, r#"{"otherresponse":{}}"#);
        assert!(
            matches!(&err, ApiError::Decode { detail, .. } if detail.starts_with("no `listzonesresponse` in")),
            "{err:?}"
        );
    }

    /// An error answer larger than a tree is read for is no CloudStack error: its start is
    /// quoted, and none of it is read into a tree (one of 60 MiB of `0,` took 1 GiB).
    #[test]
    fn an_oversized_error_answer_is_quoted_from_its_start() {
        let body = format!(
            r#"{{"listzonesresponse":{{"errorcode":530,"errortext":"down","rows":[{}0]}}}}"#,
            "0,".repeat(TREE_BYTES)
        );
        let start: String = body.chars().take(SNIPPET_CHARS).collect();
        assert!(matches!(
            read("listZones", 530, &body),
            ApiError::Http { status: 530, snippet, .. } if snippet == format!("{start}…")
        ));
        // Below the bound, the same answer is CloudStack's error.
        let small = r#"{"listzonesresponse":{"errorcode":530,"errortext":"down","rows":[0,0]}}"#;
        assert!(matches!(
            read("listZones", 530, small),
            ApiError::CloudStack { code: 530, text, .. } if text == "down"
        ));
    }

    #[test]
    fn a_snippet_folds_whitespace_and_stops_at_its_bound() {
        let words = format!("a\n\t b  {}", "c ".repeat(10_000_000));
        let folded = snippet(&words);
        assert_eq!(folded, format!("a b {}…", "c ".repeat(98)));
        assert_eq!(folded.chars().count(), SNIPPET_CHARS + 1);
        assert_eq!(snippet(" \n "), "(empty body)");
        assert_eq!(snippet(" x  y "), "x y");
    }

    #[test]
    fn an_empty_body_is_named_as_such() {
        assert_eq!(
            read("listZones", 404, "").to_string(),
            "cloudstack command listZones got an unexpected HTTP 404 answer: (empty body)"
        );
    }

    /// Found by the `cloudstack_page` fuzz target: an error text was carried whole, so an
    /// answer of megabytes made an error message (and a log line) of megabytes.
    #[test]
    fn a_long_error_text_is_cut() {
        let long = "é".repeat(5_000);
        let cut = format!("{}…", "é".repeat(TEXT_CHARS));
        let body = format!(r#"{{"listzonesresponse":{{"errorcode":431,"errortext":"{long}"}}}}"#);
        assert!(
            matches!(read("listZones", 431, &body), ApiError::CloudStack { text, .. } if text == cut)
        );
        let failed = json!({"jobstatus": 2, "jobresult": {"errorcode": 530, "errortext": long}});
        assert!(matches!(
            read_job("generateAlert", "job-1", failed).unwrap_err(),
            ApiError::AsyncJobFailed { text, .. } if text == cut
        ));
        // A short one is whole.
        let err = read(
            "listZones",
            530,
            r#"{"listzonesresponse":{"errorcode":530,"errortext":"down"}}"#,
        );
        assert!(matches!(err, ApiError::CloudStack { text, .. } if text == "down"));
    }

    #[test]
    fn an_unknown_job_status_is_a_decode_error() {
        for status in [json!({"jobstatus": 3}), json!({"jobid": "job-1"})] {
            let err = read_job("generateAlert", "job-1", status).unwrap_err();
            assert!(
                matches!(&err, ApiError::Decode { command, detail } if command == "queryAsyncJobResult" && detail.starts_with("job job-1 has no known jobstatus")),
                "{err:?}"
            );
        }
    }
}
