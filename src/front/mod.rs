//! What people type and read: the command line (`cli`), the report of a check (`report`),
//! `validate-config` (`validate`), `explain`, the
//! `demo`, and the man pages and completions made from the command line (`assets`).

pub mod assets;
pub mod cli;
pub mod demo;
pub mod explain;
pub mod report;
pub mod validate;
