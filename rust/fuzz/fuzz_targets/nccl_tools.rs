//! NCCL Inspector records and nccl-tests runs: the two readers, and the
//! table and comparison over what they accept.
#![no_main]

#[path = "common.rs"]
mod common;

use commcanary_core::analysis::comm_perf::analyse;
use commcanary_core::import::nccl_tools::{inspector, nccl_tests};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    common::policy();
    let runs: Vec<_> = nccl_tests::read_bytes(data).into_iter().collect();
    if let Some(run) = runs.first() {
        let _ = run.at(4096.0);
    }
    if let Ok(records) = inspector::read_bytes(data) {
        let _ = analyse(&records, runs);
    }
});
