//! A CloudStack list page or error answer, read as the client reads it: `read_page` (the
//! streaming reader of a plain page, then the general reader of any other answer) for the
//! commands and row types cks-drift lists.
//!
//! Input: byte 0 picks the HTTP status and the command, byte 1 the page size and which rows
//! are kept, the rest is the body.
//!
//! What must hold: a page is read from an HTTP 200 answer only, and only when the body is
//! JSON whose `<command>response` is an object; it is the page the JSON says (its `count`,
//! its rows, none dropped but by the filter), whichever reader took it; every valid page is
//! read (of an answer up to 256 KiB, the most the general reader reads into a tree: a larger
//! one the streaming reader refuses is refused, which inputs this short never reach); HTTP 401
//! is always the credentials error; an error's message is bounded whatever the body's size.
#![no_main]

use cks_drift::cloudstack::error::ApiError;
use cks_drift::cloudstack::model::{Alert, Annotation, KubernetesCluster, Network, VirtualMachine};
use cks_drift::cloudstack::pages::read_page;
use cks_drift::cloudstack::transport::RawResponse;
use libfuzzer_sys::fuzz_target;
use serde::de::DeserializeOwned;
use serde_json::Value;

const STATUSES: [u16; 8] = [200, 200, 200, 200, 401, 431, 530, 502];

/// The longest error message accepted: its fixed words, the command and endpoint, and a
/// bounded excerpt of the answer.
const MESSAGE_MAX: usize = 2_000;

fuzz_target!(|data: &[u8]| {
    let [pick, size, body @ ..] = data else {
        return;
    };
    let raw = RawResponse {
        status: STATUSES[usize::from(pick & 7)],
        body: String::from_utf8_lossy(body).into_owned(),
    };
    let page_size = u32::from(size % 8) + 1;
    // Half the time, every row; else only rows whose debug form has an even length.
    let filter = size & 0x80 != 0;
    match (pick >> 3) % 5 {
        0 => check::<VirtualMachine>(
            "listVirtualMachines",
            "virtualmachine",
            &raw,
            page_size,
            filter,
        ),
        1 => check::<KubernetesCluster>(
            "listKubernetesClusters",
            "kubernetescluster",
            &raw,
            page_size,
            filter,
        ),
        2 => check::<Network>("listNetworks", "network", &raw, page_size, filter),
        3 => check::<Alert>("listAlerts", "alert", &raw, page_size, filter),
        _ => check::<Annotation>("listAnnotations", "annotation", &raw, page_size, filter),
    }
});

fn check<T>(command: &str, item_key: &str, raw: &RawResponse, page_size: u32, filter: bool)
where
    T: DeserializeOwned + PartialEq + std::fmt::Debug,
{
    // A filter of the row alone: the client's are pure functions of the row.
    let kept_row = |row: &T| !filter || format!("{row:?}").len() % 2 == 0;
    let keep = |row: T| kept_row(&row).then_some(row);
    let endpoint = "https://cloud.example.com/client/api";
    let read = read_page::<T, T, _>(command, endpoint, item_key, 3, page_size, raw, &keep);
    let expected = (raw.status == 200)
        .then(|| {
            page_of::<T>(
                &raw.body,
                &format!("{}response", command.to_lowercase()),
                item_key,
            )
        })
        .flatten();
    match (read, expected) {
        (Ok(page), Some((count, rows))) => {
            assert_eq!(page.count, count, "count");
            assert_eq!(page.read, rows.len(), "rows read");
            let kept: Vec<T> = rows.into_iter().filter(kept_row).collect();
            assert_eq!(page.rows, kept, "rows kept");
        }
        (Ok(page), None) => panic!(
            "HTTP {} read as a page of {} rows (count {:?}), but the body is not one",
            raw.status, page.read, page.count
        ),
        (Err(e), Some(_)) => panic!("a valid page was refused: {e}"),
        (Err(e), None) => {
            if raw.status == 401 {
                assert!(matches!(e, ApiError::Unauthorized { .. }), "{e:?}");
            }
            let message = e.to_string();
            assert!(
                message.chars().count() <= MESSAGE_MAX,
                "an error of {} characters: {}…",
                message.chars().count(),
                message.chars().take(300).collect::<String>()
            );
            assert!(!message.is_empty());
        }
    }
}

/// The page the body's JSON tree holds: `{"<response_key>": {"count": N, "<item_key>": [...]}}`
/// with every row of type `T`, `count` a number or a numeric string, the rows a list or
/// `null` (none). `None` for anything else.
fn page_of<T: DeserializeOwned>(
    body: &str,
    response_key: &str,
    item_key: &str,
) -> Option<(Option<u64>, Vec<T>)> {
    let tree: Value = serde_json::from_str(body).ok()?;
    let answer = tree.as_object()?.get(response_key)?.as_object()?;
    let count = match answer.get("count") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => Some(n.as_u64()?),
        Some(Value::String(s)) => Some(s.trim().parse().ok()?),
        Some(_) => return None,
    };
    let rows = match answer.get(item_key) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| serde_json::from_value(item.clone()).ok())
            .collect::<Option<Vec<T>>>()?,
        Some(_) => return None,
    };
    Some((count, rows))
}
