//! Shared by every target: a resource policy small enough that one input
//! cannot spend the fuzzer's time budget legitimately (a canary may claim up
//! to 10^8 occurrences by default, and expanding them is not a bug).

use std::sync::Once;

use commcanary_core::limits::{self, Limits};

static POLICY: Once = Once::new();

/// Installs the fuzzing policy once per process.
pub fn policy() {
    POLICY.call_once(|| {
        let mut l = Limits::DEFAULT;
        l.max_expanded_occurrences = 1 << 16;
        l.max_trace_events = 1 << 16;
        l.max_json_items = 1 << 20;
        limits::set(l);
    });
}
