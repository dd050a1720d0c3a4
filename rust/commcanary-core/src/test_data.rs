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

/// The per-rank window files of the `hang/gloo_w4_rank_sigkill` fixture
/// (ranks 1 to 3 in three profiling windows, rank 0 in two).
pub(crate) const SIGKILL_WINDOWS: [&str; 11] = [
    "rank0.window1.json",
    "rank0.window2.json",
    "rank1.window1.json",
    "rank1.window2.json",
    "rank1.window3.json",
    "rank2.window1.json",
    "rank2.window2.json",
    "rank2.window3.json",
    "rank3.window1.json",
    "rank3.window2.json",
    "rank3.window3.json",
];
