//! A test-only fault hook: makes a named worker panic on demand, so tests can
//! prove a panicking worker is reported as a bug (exit 70), never as bad
//! input.
//!
//! Set `COMMCANARY_INJECT_PANIC` to a site name (`compile-digest`, the
//! source-commitment task that runs on a rayon worker beside every
//! compilation) and that site panics. Unset, [`check`] costs one environment
//! lookup per call site visit; sites are visited once per command, never per
//! event.

/// The environment variable naming the site to fail.
pub const INJECT_PANIC_VAR: &str = "COMMCANARY_INJECT_PANIC";

/// Panics when [`INJECT_PANIC_VAR`] names `site`.
///
/// # Panics
/// Exactly then, on purpose.
pub fn check(site: &str) {
    if std::env::var_os(INJECT_PANIC_VAR).is_some_and(|v| v == site) {
        panic!("injected fault at {site} ({INJECT_PANIC_VAR})");
    }
}
