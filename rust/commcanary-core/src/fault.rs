//! Test-only fault hooks: makes a named worker panic on demand, so tests can
//! prove a panicking worker is reported as a bug (exit 70), never as bad
//! input; fails writes on demand; and turns digest checks off in fuzz builds
//! ([`CHECK_DIGESTS`]).
//!
//! Set `COMMCANARY_INJECT_PANIC` to a site name (`compile-digest`, the
//! source-commitment task that runs on a rayon worker beside every
//! compilation) and that site panics. Unset, [`check`] costs one environment
//! lookup per call site visit; sites are visited once per command, never per
//! event.

/// Whether readers check content digests and declared sizes: always, except
/// in the fuzz targets' builds (`--cfg fuzzing`). There a mutated canary or
/// report could never match its SHA-256, so every input would stop at the
/// first digest; skipping the digests lets the fuzzer reach the checks and
/// the expansion behind them.
pub const CHECK_DIGESTS: bool = !cfg!(fuzzing);

/// The environment variable naming the site to fail.
pub const INJECT_PANIC_VAR: &str = "COMMCANARY_INJECT_PANIC";

/// The environment variable that makes artifact writes fail as a full disk
/// (`ENOSPC`: after half the bytes are written) or a read-only directory
/// (`EACCES`, `EROFS`: when the temporary file is created) would, so tests
/// prove a failed write is exit 3 with the previous file intact, even where
/// they run as root or cannot mount a tiny file system.
pub const INJECT_WRITE_ERROR_VAR: &str = "COMMCANARY_INJECT_WRITE_ERROR";

/// The injected write failure, if [`INJECT_WRITE_ERROR_VAR`] names one:
/// `(fails when the file is created, the error)`.
#[must_use]
pub fn write_error() -> Option<(bool, std::io::Error)> {
    let value = std::env::var_os(INJECT_WRITE_ERROR_VAR)?;
    let (at_create, errno) = match value.to_str()? {
        "ENOSPC" => (false, 28),
        "EACCES" => (true, 13),
        "EROFS" => (true, 30),
        _ => return None,
    };
    Some((at_create, std::io::Error::from_raw_os_error(errno)))
}

/// Panics when [`INJECT_PANIC_VAR`] names `site`.
///
/// # Panics
/// Exactly then, on purpose.
pub fn check(site: &str) {
    if std::env::var_os(INJECT_PANIC_VAR).is_some_and(|v| v == site) {
        panic!("injected fault at {site} ({INJECT_PANIC_VAR})");
    }
}
