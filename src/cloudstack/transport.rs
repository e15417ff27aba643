//! The seam between the API client and the wire: one request in, one HTTP status and body
//! out, or why none came. The HTTP transport signs and sends; the simulator answers in
//! memory. Building and signing a request belong to `request`, reading the answer to
//! `response`.

use std::future::Future;
use std::pin::Pin;

use super::request::ApiRequest;

/// What came back: the HTTP status and the body as text.
#[derive(Debug, Clone, PartialEq)]
pub struct RawResponse {
    pub status: u16,
    pub body: String,
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
    Pin<Box<dyn Future<Output = Result<RawResponse, TransportError>> + Send + 'a>>;

/// Sends one request. Implementations must apply their own deadline.
pub trait Transport: Send + Sync {
    fn send(&self, request: ApiRequest) -> TransportFuture<'_>;
}
