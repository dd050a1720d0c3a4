//! Canary expansion: a canary the reader accepts expands to exactly the
//! occurrence count its compact form claims (the preflight's count).
#![no_main]

#[path = "common.rs"]
mod common;

use commcanary_core::canary::expand::{expanded_counts, for_each_occurrence, occurrence_columns};
use commcanary_core::canary::read::read_canary_deferred;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    common::policy();
    let Ok(canary) = read_canary_deferred(data) else {
        return;
    };
    let (_, claimed) = expanded_counts(&canary.program);
    let mut seen = 0u64;
    for_each_occurrence(&canary.program, |_, _| seen += 1);
    assert_eq!(seen, claimed);
    assert_eq!(
        occurrence_columns(&canary.program).signature.len() as u64,
        claimed
    );
});
