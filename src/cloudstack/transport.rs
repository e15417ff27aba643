//! The seam between the API client and the wire: one request in, one HTTP status and body
//! out. The HTTP transport signs and sends; the simulator answers in memory.

use std::future::Future;
use std::pin::Pin;

/// HTTP method CloudStack expects for a command: `list*`, `query*`, `get*` and `find*` read
/// with GET; everything else changes state and is POSTed (required where
/// `enforce.post.requests.and.timestamps` is on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
}

impl Method {
    pub fn for_command(command: &str) -> Method {
        let reads = ["list", "query", "get", "find"];
        if reads.iter().any(|p| command.starts_with(p)) {
            Method::Get
        } else {
            Method::Post
        }
    }
}

/// One API call before signing: the command and its parameters (without `apikey`,
/// `response`, `signatureversion`, `expires`, `signature`, which the transport adds).
#[derive(Debug, Clone, PartialEq)]
pub struct ApiRequest {
    pub command: String,
    pub params: Vec<(String, String)>,
}

impl ApiRequest {
    pub fn method(&self) -> Method {
        Method::for_command(&self.command)
    }
}

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
