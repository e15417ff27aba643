//! The CloudStack API: the client (commands, paging, retries, async jobs) and its parts,
//! request building and signing, the transport, reading answers and pages, the retry policy,
//! plus the errors, parameter limits and response types cks-drift reads. What a cluster's
//! answers mean belongs to the callers.

pub mod client;
pub mod error;
pub mod http;
pub mod limits;
pub mod model;
pub mod pages;
pub mod release;
pub mod request;
pub mod response;
pub mod retry;
pub mod server_check;
pub mod sign;
mod streamed;
pub mod transport;
