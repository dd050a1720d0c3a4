//! The real job fixtures the tests read, in the repository under
//! `tests/data/fixtures/` (each file gzipped, its provenance beside it), so
//! a fresh clone runs every test. A missing fixture fails the test.

use std::path::{Path, PathBuf};

/// The fixture at `rel` (as the original job wrote it: `kineto/x/rank0.json`
/// names `rank0.json.gz` in the repository).
pub(crate) fn fixture(rel: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/fixtures");
    let plain = root.join(rel);
    if plain.exists() {
        return plain;
    }
    let gz = root.join(format!("{rel}.gz"));
    assert!(gz.exists(), "test fixture missing: {}", gz.display());
    gz
}

/// The fixture's bytes, decompressed.
pub(crate) fn fixture_bytes(rel: &str) -> Vec<u8> {
    let path = fixture(rel);
    crate::input::read_input(&path, crate::input::MAX_INPUT_BYTES)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .to_vec()
}
