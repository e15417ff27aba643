//! Leaves every stage uses: instants (`time`) and durations as people write them
//! (`duration`), an error with its causes on one line (`error_chain`), the bounding and
//! escaping of text a tenant controls (`untrusted`), the shape of CloudStack's ids (`id`),
//! and hosts and URLs in checks and messages (`net`).

pub mod duration;
pub mod error_chain;
pub mod id;
pub mod net;
pub mod time;
pub mod untrusted;
