//! The `commcanary.trace.v1` loader, from bytes into columns.
#![no_main]

#[path = "common.rs"]
mod common;

use commcanary_core::trace::{LoadOptions, load_bytes};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    common::policy();
    let _ = load_bytes(data, &LoadOptions::default());
});
