//! The report reader, samples parsed and reconciled.
#![no_main]

#[path = "common.rs"]
mod common;

use commcanary_core::report::read::{SampleMode, read_report};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    common::policy();
    let _ = read_report(data, SampleMode::Parse);
});
