//! Flight Recorder dumps: the restricted unpickler (never imports or calls
//! anything) and the JSON form.
#![no_main]

#[path = "common.rs"]
mod common;

use commcanary_core::import::flight_recorder::read_dump;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    common::policy();
    let _ = read_dump(data);
});
