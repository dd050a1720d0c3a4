//! Text evidence for hang diagnosis: stack dumps (py-spy, faulthandler,
//! tracebacks) and exception texts (NCCL and gloo timeouts).
#![no_main]

use commcanary_core::import::stacks::{parse_exception, parse_stacks};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = parse_exception(data);
    let _ = parse_stacks(data);
});
