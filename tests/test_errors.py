"""Every commcanary error pickles by reference and crosses a process pool,
including the ones the Rust extension raises."""

from __future__ import annotations

import pickle
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

import commcanary
from commcanary import errors
from commcanary.errors import (
    BudgetError,
    CommCanaryError,
    InputError,
    InternalError,
    OptionError,
    OutputError,
)

ALL = [
    CommCanaryError("base"),
    InputError("t.json: trace event 3 field 'op' is required"),
    OptionError("timing_sample_limit", "must be at least 2"),
    OutputError("cannot write x: directory y does not exist"),
    BudgetError("timing fidelity max_gap_error_us=1.0 us exceeds budget 0.5 us"),
    InternalError("a worker panicked: boom"),
]


def _same(a: BaseException, b: BaseException) -> bool:
    return type(a) is type(b) and str(a) == str(b) and a.args == b.args


@pytest.mark.parametrize("error", ALL, ids=lambda e: type(e).__name__)
def test_each_error_round_trips_through_pickle(error: CommCanaryError) -> None:
    back = pickle.loads(pickle.dumps(error))
    assert _same(back, error)
    assert type(back).__module__ == "commcanary.errors"
    if isinstance(error, OptionError):
        assert isinstance(back, OptionError)
        assert (back.option, back.rule) == (error.option, error.rule)


def _raise(error: CommCanaryError) -> None:
    raise error


def test_each_error_crosses_a_process_pool() -> None:
    with ProcessPoolExecutor(max_workers=1) as pool:
        for error in ALL:
            with pytest.raises(type(error)) as caught:
                pool.submit(_raise, error).result()
            assert _same(caught.value, error)


def _compile_bad(path: str) -> str:
    commcanary.compile(path)
    return "compiled"


def _compile_with_limit(path: str) -> str:
    commcanary.compile(path, timing_sample_limit=1)
    return "compiled"


def test_errors_raised_in_rust_cross_a_process_pool(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"format":"commcanary.trace.v1","events":[{"bytes":1,"ranks":2}]}')
    with ProcessPoolExecutor(max_workers=1) as pool:
        with pytest.raises(InputError, match="field 'op' is required"):
            pool.submit(_compile_bad, str(bad)).result()
        with pytest.raises(OptionError) as caught:
            pool.submit(_compile_with_limit, str(bad)).result()
    assert caught.value.option == "timing_sample_limit"
    assert caught.value.rule == "must be at least 2"


def test_the_extension_raises_the_python_classes(tmp_path: Path) -> None:
    with pytest.raises(errors.InputError) as caught:
        commcanary.load_trace(tmp_path / "missing.json")
    assert type(caught.value) is errors.InputError
    with pytest.raises(errors.OptionError):
        commcanary.replay(
            commcanary.compile(Path(__file__).parent.parent / "examples/traces/llama70b_tp8_trace.json"),
            iterations=0,
        )
