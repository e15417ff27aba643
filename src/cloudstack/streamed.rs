//! Reading an answer as its body arrives over HTTP: a list page straight into rows, parsed on
//! a blocking thread while the rows are kept or dropped on the caller's task, and any other
//! answer to what explains it (its start and its length). Neither is ever held whole: a page
//! of rows only as the rows kept, an answer only up to [`TREE_BYTES`]. What a page or an
//! answer says belongs to `pages` and `response`; sending, and the bound on what is read, to
//! `http`.

use std::borrow::Cow;
use std::io::{self, Read};

use futures::StreamExt;
use serde::de::DeserializeOwned;
use tokio::runtime::Handle;
use tokio::sync::mpsc;

use super::error::ApiError;
use super::pages::{ListPage, PageOf, explain_page, parse_page_from};
use super::response::{Held, TREE_BYTES, response_key};
use super::transport::{Chunks, StreamedResponse, TransportError};

/// Rows read but not yet kept or dropped: the parser waits for the caller beyond that.
const ROWS_IN_FLIGHT: usize = 64;

/// An answer that is not a list page (or a page answered with an error status), read to its
/// end: the start kept, the rest only counted. A failure of the transport, or the answer
/// going past its bound, is what it comes to, as when answers were read whole.
pub(super) async fn hold(answer: StreamedResponse) -> Result<Held<'static>, TransportError> {
    let StreamedResponse { status, mut chunks } = answer;
    let mut start = Start::default();
    while let Some(chunk) = chunks.next().await {
        start.take(&chunk?);
    }
    Ok(start.held(status))
}

/// Reads the page `at` as it arrives, each row turned by `keep` into what is kept of it;
/// otherwise the [`ApiError`] the answer is, the same as `pages::read_page` finds for the same
/// answer whole.
pub(super) async fn read_page<T, U, K>(
    at: PageOf<'_>,
    answer: StreamedResponse,
    keep: &K,
) -> Result<ListPage<U>, ApiError>
where
    T: DeserializeOwned + Send + 'static,
    K: Fn(T) -> Option<U>,
{
    let transport = |source| ApiError::Transport {
        command: at.command.to_string(),
        source,
    };
    if answer.status != 200 {
        let held = hold(answer).await.map_err(transport)?;
        return explain_page(&at, &held, None, keep);
    }
    let (rows_tx, mut rows_rx) = mpsc::channel::<T>(ROWS_IN_FLIGHT);
    let reading = tokio::task::spawn_blocking({
        let handle = Handle::current();
        let response_key = response_key(at.command);
        let item_key = at.item_key.to_string();
        move || parse_rows(handle, answer.chunks, &response_key, &item_key, rows_tx)
    });
    // `keep` stays on this task: it need not be `Send`, and may borrow what the caller holds.
    let mut rows = Vec::new();
    while let Some(row) = rows_rx.recv().await {
        rows.extend(keep(row));
    }
    let parsed = match reading.await {
        Ok(parsed) => parsed,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => {
            return Err(transport(TransportError::Other {
                url: at.endpoint.to_string(),
                source: "the runtime stopped while the answer was read".into(),
            }));
        }
    };
    let held = parsed.held.map_err(transport)?;
    match parsed.page {
        Ok(Some(page)) => Ok(ListPage {
            count: page.count,
            read: page.read,
            rows,
        }),
        Ok(None) => explain_page(&at, &held, None, keep),
        Err(e) => explain_page(&at, &held, Some(where_stopped(&e)), keep),
    }
}

/// What serde_json says of where the reading of a page stopped, in the words it uses for the
/// same answer read from a string (`pages::read_page`), so that an answer is explained alike
/// whether it came whole or streamed. Reading from a stream, serde_json has already taken the
/// character after a number, or the bracket of a list or an object it refuses, when it names
/// the column of a value of the wrong type; from a string, it names the column before it.
/// Not put back: an error a row's type raises in the middle of an object (a field given twice),
/// named one column further when streamed, as serde_json has then taken the next character.
fn where_stopped(e: &serde_json::Error) -> String {
    /// The messages of a value refused after that character was taken.
    const PEEKED: [&str; 6] = [
        "invalid type: integer",
        "invalid type: floating point",
        "invalid value: integer",
        "invalid value: floating point",
        "invalid type: sequence",
        "invalid type: map",
    ];
    let text = e.to_string();
    // Column 0 is the start of a line taken after a number: the column before it is at the end
    // of the previous line, which is not known here. CloudStack writes its answers on one line.
    if e.classify() != serde_json::error::Category::Data || e.column() < 2 {
        return text;
    }
    let at = format!(" at line {} column {}", e.line(), e.column());
    match text.strip_suffix(&at) {
        Some(message) if PEEKED.iter().any(|p| message.starts_with(p)) => {
            format!("{message} at line {} column {}", e.line(), e.column() - 1)
        }
        _ => text,
    }
}

/// What the blocking reading of a page came to: the page (its rows went to the caller), and
/// what is held of the answer, or the transport failure that cut it short.
struct Parsed {
    page: Result<Option<ListPage<()>>, serde_json::Error>,
    held: Result<Held<'static>, TransportError>,
}

/// Parses the page from `chunks`, sending each row to `rows`. Runs on a blocking thread.
fn parse_rows<T: DeserializeOwned + Send + 'static>(
    handle: Handle,
    chunks: Chunks,
    response_key: &str,
    item_key: &str,
    rows: mpsc::Sender<T>,
) -> Parsed {
    let watched = rows.clone();
    let mut reader = BlockingReader {
        handle,
        chunks: Some(chunks),
        chunk: Vec::new(),
        at: 0,
        start: Start::default(),
        failure: None,
        abandoned: Box::new(move || watched.is_closed()),
    };
    // A send fails only when the caller is gone; the reader then stops at its next chunk.
    let send = |row: T| {
        let _ = rows.blocking_send(row);
        None::<()>
    };
    let page = parse_page_from(
        serde_json::Deserializer::from_reader(&mut reader),
        response_key,
        item_key,
        &send,
    );
    if page.is_err() {
        // The rest is read but not held: the answer's length explains a page that is none,
        // and a failure of the transport past where the parser stopped is what it came to.
        let _ = io::copy(&mut reader, &mut io::sink());
    }
    let held = match reader.failure.take() {
        Some(failure) => Err(failure),
        None => Ok(reader.start.held(200)),
    };
    Parsed { page, held }
}

/// The start of an answer, at most [`TREE_BYTES`] (so the whole of one no longer), and its
/// length.
#[derive(Default)]
struct Start {
    bytes: Vec<u8>,
    total: usize,
}

impl Start {
    fn take(&mut self, chunk: &[u8]) {
        let room = TREE_BYTES.saturating_sub(self.bytes.len()).min(chunk.len());
        self.bytes.extend_from_slice(&chunk[..room]);
        self.total += chunk.len();
    }

    fn held(self, status: u16) -> Held<'static> {
        // Every answer CloudStack sends is UTF-8; a start cut inside a character ends in U+FFFD.
        let text = String::from_utf8(self.bytes)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        Held {
            status,
            text: Cow::Owned(text),
            total: self.total,
        }
    }
}

/// The body as a [`Read`] for the parser on a blocking thread: waits for each chunk on the
/// runtime, keeps the answer's [`Start`], and ends at the first transport failure (kept, to be
/// returned as the answer's error) or once the caller no longer waits for the rows.
struct BlockingReader {
    handle: Handle,
    /// `None` once ended: the stream is not polled past its end.
    chunks: Option<Chunks>,
    chunk: Vec<u8>,
    at: usize,
    start: Start,
    failure: Option<TransportError>,
    abandoned: Box<dyn Fn() -> bool + Send>,
}

impl Read for BlockingReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.chunk.len() {
            if self.failure.is_some() || (self.abandoned)() {
                return Err(io::Error::other("the answer was not read further"));
            }
            let Some(chunks) = self.chunks.as_mut() else {
                return Ok(0);
            };
            match self.handle.block_on(chunks.next()) {
                None => self.chunks = None,
                Some(Ok(chunk)) => {
                    self.start.take(&chunk);
                    self.chunk = chunk;
                    self.at = 0;
                }
                Some(Err(failure)) => self.failure = Some(failure),
            }
        }
        let n = buf.len().min(self.chunk.len() - self.at);
        buf[..n].copy_from_slice(&self.chunk[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;
    use crate::cloudstack::pages;
    use crate::cloudstack::transport::RawResponse;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Row {
        id: String,
    }

    /// `body` as it would arrive, in pieces of `size` bytes.
    fn streamed(status: u16, body: &str, size: usize) -> StreamedResponse {
        let pieces: Vec<_> = body
            .as_bytes()
            .chunks(size)
            .map(|c| Ok(c.to_vec()))
            .collect();
        StreamedResponse {
            status,
            chunks: Box::pin(futures::stream::iter(pieces)),
        }
    }

    const AT: PageOf<'static> = PageOf {
        command: "listZones",
        endpoint: "e",
        item_key: "zone",
        page: 1,
        page_size: 500,
    };

    async fn both(status: u16, body: &str) -> (String, String) {
        let raw = RawResponse {
            status,
            body: body.to_string(),
        };
        let whole = pages::read_page::<Row, Row, _>("listZones", "e", "zone", 1, 500, &raw, &Some);
        let streamed = read_page::<Row, Row, _>(AT, streamed(status, body, 4096), &Some).await;
        (format!("{whole:?}"), format!("{streamed:?}"))
    }

    /// The same answer reads to the same page or the same error, word for word, whole or as
    /// it arrives; past the bound of a tree, serde_json's words of where the reading stopped
    /// are all there is, and its reader of a stream names other columns than its reader of a
    /// string.
    #[tokio::test]
    async fn an_answer_read_as_it_arrives_reads_as_the_same_answer_whole() {
        let head = r#"{"listzonesresponse":{"count":1,"zone":["#;
        let mut bodies: Vec<String> = [
            "0,0]}}",
            "-7]}}",
            "1.5]}}",
            r#"{"id":1}]}}"#,
            r#"{"id":[1]}]}}"#,
            r#"{"id":{"a":1}}]}}"#,
            r#"{"id":"a"},"x"]}}"#,
            r#"{"id":"a"}]}} x"#,
            r#"{"id":"a"}]}"#,
            r#"{"id":"a",}]}}"#,
            "null,5]}}",
            "tru]}}",
            "[1]]}}",
            "\n{\"idd\":\"a\"}]}}",
            r#"{"id":"a"},{"id":"b"}]}}"#,
        ]
        .iter()
        .map(|tail| format!("{head}{tail}"))
        .collect();
        bodies.extend(
            [
                r#"{"listzonesresponse":{"count":"x"}}"#,
                r#"{"listzonesresponse":{"count":-1,"zone":[]}}"#,
                r#"{"listzonesresponse":{"count":2.5,"zone":[]}}"#,
                r#"{"listzonesresponse":{"count":true,"zone":[]}}"#,
                r#"{"listzonesresponse":{"count":[1],"zone":[]}}"#,
                r#"{"listzonesresponse":{"count":{},"zone":[]}}"#,
                r#"{"listzonesresponse":{"count":"x","zone":[]}}"#,
                r#"{"listzonesresponse":{"count":" 3 ","zone":[]}}"#,
                r#"{"listzonesresponse":{"zone":5}}"#,
                r#"{"listzonesresponse":{"zone":{"id":"a"}}}"#,
                r#"{"listzonesresponse":[]}"#,
                r#"{"other":1}"#,
                "0,0",
                "<html>",
                "",
            ]
            .map(String::from),
        );
        for body in &bodies {
            // As it is, and past the bound of a tree (spaces after the answer change no value).
            for body in [body.clone(), format!("{body}{}", " ".repeat(TREE_BYTES))] {
                for status in [200, 431, 503] {
                    let (whole, streamed) = both(status, &body).await;
                    assert_eq!(whole, streamed, "{status} {}", &body[..body.len().min(80)]);
                }
            }
        }
    }

    #[tokio::test]
    async fn a_failure_while_a_page_arrives_is_the_transport_s() {
        let body = r#"{"listzonesresponse":{"count":2,"zone":[{"id":"a"},"#;
        for failure in [
            TransportError::Timeout {
                url: "e".into(),
                seconds: 30,
            },
            TransportError::TooLarge {
                url: "e".into(),
                limit: 64,
            },
        ] {
            let expected = failure.to_string();
            let pieces = vec![Ok(body.as_bytes().to_vec()), Err(failure)];
            let answer = StreamedResponse {
                status: 200,
                chunks: Box::pin(futures::stream::iter(pieces)),
            };
            let err = read_page::<Row, Row, _>(AT, answer, &Some)
                .await
                .unwrap_err();
            assert!(
                matches!(&err, ApiError::Transport { command, source } if command == "listZones" && source.to_string() == expected),
                "{err:?}"
            );
        }
    }

    /// An answer that is no page is held only as far as a tree is read; the rest is counted.
    #[tokio::test]
    async fn of_an_answer_only_its_start_is_held() {
        let body = "x".repeat(3 * TREE_BYTES + 5);
        let held = hold(streamed(200, &body, 1000)).await.unwrap();
        assert_eq!(
            (held.status, held.text.len(), held.total),
            (200, TREE_BYTES, 3 * TREE_BYTES + 5)
        );
        let held = hold(streamed(530, "{}", 1)).await.unwrap();
        assert_eq!((held.status, &*held.text, held.total), (530, "{}", 2));
    }
}
