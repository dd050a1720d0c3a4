//! The canary reader with every check (structure, weights, commitments).
#![no_main]

#[path = "common.rs"]
mod common;

use commcanary_core::canary::read::{read_canary, verify_program_digests};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    common::policy();
    if let Ok(canary) = read_canary(data) {
        let _ = verify_program_digests(&canary);
    }
});
