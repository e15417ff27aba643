//! The state file loader (`state::file::parse`), both schemas: version 2 as this release
//! writes it, version 1 as the first release did (converted on load). The file may be cut
//! off by a crash or edited by hand.
//!
//! Input: the file's bytes.
//!
//! What must hold: a file that loads is in the current schema and, written back as
//! `StateFile::save` writes it, loads again equal; one that does not load says why, in a
//! message of a size bounded by the file's.
#![no_main]

use cks_drift::state::VERSION;
use cks_drift::state::file::parse;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match parse(data) {
        Ok(state) => {
            assert_eq!(state.version, VERSION);
            let written = serde_json::to_vec(&state).expect("a loaded state serializes");
            let again = parse(&written).unwrap_or_else(|why| {
                panic!(
                    "a loaded state, written back, does not load: {why}\n{}",
                    String::from_utf8_lossy(&written)
                )
            });
            assert_eq!(again, state, "written back and loaded, the state changed");
        }
        Err(why) => {
            let why = why.to_string();
            assert!(!why.trim().is_empty());
            assert!(why.len() <= 8 * data.len() + 500, "{why}");
        }
    }
});
