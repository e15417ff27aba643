//! The CloudStack API: request signing, the HTTP client (paging, retries, async jobs) and the
//! response types cks-drift reads.

pub mod client;
pub mod error;
pub mod http;
pub mod limits;
pub mod model;
pub mod pages;
pub mod request;
pub mod response;
pub mod retry;
pub mod sign;
pub mod transport;
