//! Leaves every stage uses: instants and durations (`time`), an error with its causes on one
//! line (`error_chain`), and the bounding and escaping of text a tenant controls (`untrusted`).

pub mod error_chain;
pub mod time;
pub mod untrusted;
