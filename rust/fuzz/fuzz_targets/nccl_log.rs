//! The NCCL profiler plugin's log segments: the frame reader, then what the
//! import and the hang evidence make of whatever a segment holds.
#![no_main]

#[path = "common.rs"]
mod common;

use commcanary_core::import::nccl_profiler::{evidence, job, logs, ops};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    common::policy();
    if let Ok(seg) = commcanary_nccl_log::read_segment(data) {
        let found = logs::from_segments(vec![("fuzz.ccnl".into(), seg, data.len() as u64)]);
        for log in &found {
            let _ = ops::join(log);
        }
        let _ = job::profiles(&found);
        let _ = evidence::as_dumps(&found);
    }
});
