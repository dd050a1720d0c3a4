#!/usr/bin/env bash
# Builds commcanary from a fresh checkout and runs every check: Rust format,
# lints and tests; the Python extension (release build); Python lints, types,
# the extension's stub (stubtest), the test suite (which includes the
# walkthrough conformance transcript) and a short run of every fuzz target.
#
# It works in its own environment, target/test-venv, so a `pip install .` in
# your .venv is left alone. Quiet on success; a failing step prints its log.
set -euo pipefail
cd "$(dirname "$0")/.."

# A headless browser for the HTML report tests (Debian's chromium).
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    SUDO=""
    if [ "$(id -u)" != "0" ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
fi

VENV=target/test-venv
mkdir -p target
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
# shellcheck disable=SC1091
. "$VENV/bin/activate"
LOG=target/test-setup.log
quietly() { "$@" >"$LOG" 2>&1 || { cat "$LOG"; echo "failed: $*"; exit 1; }; }
quietly python -m pip install --upgrade pip
quietly python -m pip install "maturin>=1.9.4,<2" "numpy>=1.26" "typer>=0.12" "orjson>=3.10" \
    "pytest>=8" "hypothesis>=6.100" "jsonschema>=4.20" "ruff>=0.6" "mypy>=1.10" "selenium>=4.20"
# torch (the optional `torch` extra) for the real-process capture tests.
quietly python -m pip install "torch>=2.4"
# atheris (the `fuzz` extra) for the Python fuzz targets.
quietly python -m pip install "atheris>=2.3"

echo "== rust: fmt, clippy, tests"
cargo fmt --all --check
cargo clippy -q --workspace --all-targets --locked -- -D warnings
cargo test -q -p commcanary-core --locked

echo "== build the extension"
quietly maturin develop --release --locked

echo "== python: ruff, mypy"
ruff check python tests benches fuzz
ruff format --check python tests benches fuzz
mypy
python -m mypy.stubtest commcanary._core

echo "== python tests"
HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-ci}" python -m pytest -q

echo "== fuzz: a short fixed-count run of every target (docs/resource-limits.md)"
cargo fmt --manifest-path rust/fuzz/Cargo.toml --check
./scripts/fuzz.sh --runs 20000
./scripts/fuzz.sh --python --runs 2000 capture_shards flight_recorder param_export
./scripts/fuzz.sh --python --runs 300 cli
