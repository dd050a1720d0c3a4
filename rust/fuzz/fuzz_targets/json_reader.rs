//! The strict JSON reader, and the canonical writer over what it accepts:
//! canonical output reads back to the same canonical bytes.
#![no_main]

use commcanary_core::json::{JsonLimits, canon, parse};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(doc) = parse(data, JsonLimits::default()) else {
        return;
    };
    let Some(root) = doc.root() else {
        return;
    };
    let once = canon::to_vec(root);
    let again = parse(&once, JsonLimits::default()).expect("canonical JSON reads back");
    assert_eq!(canon::to_vec(again.root().expect("a root")), once);
});
