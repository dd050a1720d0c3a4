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
STARTED=$SECONDS
stage() { echo "== $1 (at $((SECONDS - STARTED)) s)"; }

# A headless browser for the HTML report tests (Debian's chromium), and
# PostgreSQL for the server's tests (they start their own cluster with
# initdb; no system service is used), iproute2 for the agents' test in
# two network namespaces, and strace for the NCCL plugin's futex count.
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1 \
    || ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || ! command -v ip >/dev/null 2>&1 \
    || ! command -v strace >/dev/null 2>&1; then
    SUDO=""
    if [ "$(id -u)" != "0" ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver postgresql iproute2 strace >/dev/null
fi

VENV=target/test-venv
mkdir -p target
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
# shellcheck disable=SC1091
. "$VENV/bin/activate"
LOG=target/test-setup.log
quietly() { "$@" >"$LOG" 2>&1 || { cat "$LOG"; echo "failed: $*"; exit 1; }; }
stage "install the development packages"
quietly python -m pip install --upgrade pip
# The development packages, from pyproject.toml (scripts/dev_packages.py),
# with the `torch` extra (the real-process tests), the `dask` extra (a real
# scheduler and workers), the `arrow` extra (pyarrow: Arrow and Parquet) and
# the `server` extra (the team server, tested as a process) and the `fuzz`
# extra (atheris, the Python fuzz targets).
mapfile -t PACKAGES < <(python scripts/dev_packages.py torch dask arrow server fuzz)
quietly python -m pip install "${PACKAGES[@]}"
# Every test tier runs here: a missing tool (Chromium, torch) stops pytest
# before any test instead of skipping a tier.
export COMMCANARY_TEST_REQUIRE_TOOLS=1

stage "rust: fmt, clippy, tests"
# Value rules live in the core's checked constructors, never in the binding.
if grep -rnE 'Error::(option|invalid|new)\(' rust/commcanary-py/src; then
    echo "a value rule in rust/commcanary-py/src: move it into the core (docs/ARCHITECTURE.md)"
    exit 1
fi
cargo fmt --all --check
cargo clippy -q --workspace --all-targets --locked -- -D warnings
cargo test -q -p commcanary-core --locked
# The NCCL profiler plugin: its log format, and the C harness that drives
# it as NCCL does (plain, AddressSanitizer and ThreadSanitizer builds).
cargo test -q -p commcanary-nccl-log -p commcanary-nccl-profiler --locked

stage "build the extension"
quietly maturin develop --release --locked

stage "python: ruff, mypy"
ruff check python tests benches fuzz
ruff format --check python tests benches fuzz
mypy
python -m mypy.stubtest commcanary._core

stage "python tests"
HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-ci}" python -m pytest -q

stage "fuzz: a short fixed-count run of every target (docs/resource-limits.md)"
cargo fmt --manifest-path rust/fuzz/Cargo.toml --check
./scripts/fuzz.sh --runs 20000
./scripts/fuzz.sh --python --runs 2000 capture_shards flight_recorder param_export agent
./scripts/fuzz.sh --python --runs 300 cli
stage "done"
