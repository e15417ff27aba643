//! The seam between the API client and the wire: one request in, one HTTP status and body
//! out, or why none came. The HTTP transport signs and sends, and hands the body on as it
//! arrives; the simulator answers in memory, whole. Building and signing a request belong to
//! `request`, reading the answer to `response`, `pages` and `streamed`.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use futures::Stream;

use super::request::ApiRequest;

/// What came back whole: the HTTP status and the body as text.
#[derive(Debug, Clone, PartialEq)]
pub struct RawResponse {
    pub status: u16,
    pub body: String,
}

/// The body of an answer as it arrives, in the pieces the wire gave, or why it stopped. The
/// transport ends it with [`TransportError::TooLarge`] past its bound.
pub type Chunks = Pin<Box<dyn Stream<Item = Result<Vec<u8>, TransportError>> + Send>>;

/// What came back with its body still arriving: a list page is read into rows from it, so
/// that the whole page is never held (see `streamed`).
pub struct StreamedResponse {
    pub status: u16,
    pub chunks: Chunks,
}

impl fmt::Debug for StreamedResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamedResponse")
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

/// An answer, whole (in memory) or streamed (over HTTP).
#[derive(Debug)]
pub enum Answer {
    Whole(RawResponse),
    Streamed(StreamedResponse),
}

impl From<RawResponse> for Answer {
    fn from(raw: RawResponse) -> Answer {
        Answer::Whole(raw)
    }
}

/// Why no response came back at all.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("cannot connect to {url}")]
    Connect {
        url: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("no answer from {url} within {seconds} s")]
    Timeout { url: String, seconds: u64 },
    /// The answer went on past the bound every answer is read to: not CloudStack's (its
    /// largest pages are a few MB), and not to be held in memory.
    #[error("the answer from {url} is larger than {limit} bytes; it was not read further")]
    TooLarge { url: String, limit: usize },
    #[error("request to {url} failed")]
    Other {
        url: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

pub type TransportFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Answer, TransportError>> + Send + 'a>>;

/// Sends one request. Implementations must apply their own deadline.
pub trait Transport: Send + Sync {
    fn send(&self, request: ApiRequest) -> TransportFuture<'_>;
}
