//! A single-rank PyTorch profiler (Kineto) import: the streaming scanner
//! that picks the events, then the importer over them.
#![no_main]

#[path = "common.rs"]
mod common;

use commcanary_core::import::kineto::{KinetoOptions, import_kineto};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    common::policy();
    let _ = import_kineto(data, &KinetoOptions::default());
});
