#!/usr/bin/env bash
# Runs the fuzz targets over their corpora: the Rust libFuzzer targets of
# rust/fuzz, or with --python the atheris targets of fuzz/.
#
#   scripts/fuzz.sh [--python] [--asan] [--runs N | --seconds S] [--seed S] [TARGET...]
#
# Without targets, every target of the chosen kind runs in turn. The Rust
# build uses the stable toolchain with the coverage instrumentation cargo-fuzz
# passes (cargo-fuzz is not needed; `cargo +nightly fuzz run TARGET` from
# rust/fuzz works as well); --asan adds AddressSanitizer and leak detection
# (RUSTC_BOOTSTRAP=1 unlocks the sanitizer flag on stable). Python targets
# need atheris (pip install atheris) and the installed package.
#
# New inputs are kept in target/fuzz/corpus/TARGET (py-TARGET for Python;
# the committed seeds in rust/fuzz/corpus/TARGET or fuzz/corpus/TARGET are
# only read); a crash is written to target/fuzz/artifacts/TARGET/ and the
# script exits non-zero. Each target's log is target/fuzz/TARGET.log.
#
# Defaults: --runs 20000 per target (seconds each: what CI runs) and --seed 1,
# so a CI run mutates the same way every time; --seed 0 draws a seed. The
# long runs recorded in docs/resource-limits.md: --asan --runs 1000000
# --seed 0.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=20000
seed=1
seconds=""
asan=0
python=0
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
        --asan) asan=1 ;;
        --python) python=1 ;;
        --runs) runs="${2:?--runs needs a count}"; shift ;;
        --seconds) seconds="${2:?--seconds needs a count}"; shift ;;
        --seed) seed="${2:?--seed needs a number}"; shift ;;
        -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
        -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
        *) targets+=("$1") ;;
    esac
    shift
done
if [ "$python" = 1 ] && [ "$asan" = 1 ]; then
    echo "fuzz.sh: --asan applies to the Rust targets only" >&2
    exit 2
fi
if [ ${#targets[@]} -eq 0 ]; then
    if [ "$python" = 1 ]; then
        for f in fuzz/fuzz_*.py; do targets+=("$(basename "$f" .py | sed 's/^fuzz_//')"); done
    else
        for f in rust/fuzz/fuzz_targets/*.rs; do
            name=$(basename "$f" .rs)
            [ "$name" = common ] || targets+=("$name")
        done
    fi
fi

if [ "$python" = 0 ]; then
    host=$(rustc -vV | sed -n 's/^host: //p')
    flags="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4"
    flags+=" -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table"
    flags+=" -Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing"
    out=target/fuzz
    if [ "$asan" = 1 ]; then
        export RUSTC_BOOTSTRAP=1
        flags+=" -Zsanitizer=address -Cunsafe-allow-abi-mismatch=sanitizer"
        out=target/fuzz-asan
    fi
    # --target keeps the flags off build scripts; the fuzz crate's own lock
    # file and target directory keep the project's workspace untouched.
    # shellcheck disable=SC2046
    RUSTFLAGS="$flags" CARGO_TARGET_DIR="$out" \
        cargo build -q --release --manifest-path rust/fuzz/Cargo.toml --target "$host" \
        $(printf -- '--bin %s ' "${targets[@]}")
fi

mkdir -p target/fuzz
status=0
for t in "${targets[@]}"; do
    # Python targets' folders and logs are py-TARGET (flight_recorder is both).
    name=$t
    [ "$python" = 1 ] && name="py-$t"
    work="target/fuzz/corpus/$name"
    artifacts="target/fuzz/artifacts/$name/"
    mkdir -p "$work" "$artifacts"
    limit=(-runs="$runs")
    [ -n "$seconds" ] && limit=(-max_total_time="$seconds")
    log="target/fuzz/$name.log"
    if [ "$python" = 1 ]; then
        command=(python "fuzz/fuzz_$t.py")
        seeds="fuzz/corpus/$t"
    else
        command=("$out/$host/release/$t")
        seeds="rust/fuzz/corpus/$t"
    fi
    start=$(date +%s)
    if "${command[@]}" "${limit[@]}" -seed="$seed" -timeout=20 -rss_limit_mb=2048 -malloc_limit_mb=2048 -max_len=65536 \
        -print_final_stats=1 -artifact_prefix="$artifacts" "$work" "$seeds" >"$log" 2>&1; then
        execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
        [ -n "$execs" ] || execs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -n 1)
        echo "$name: ${execs:-?} executions in $(( $(date +%s) - start )) s, no crash"
    else
        status=1
        echo "$name: FAILED (log: $log)"
        tail -n 30 "$log"
    fi
done
exit $status
