"""Canonical JSON, float repr and round: Rust against CPython itself."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from commcanary import _core

# Every code point, lone surrogates included (Python keeps them in str).
any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=12)
floats = st.floats(allow_nan=False, allow_infinity=False)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | floats | any_text,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(any_text, children, max_size=5),
    max_leaves=25,
)


def py_canonical(value: Any) -> bytes:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    ).encode()


@given(json_values, st.sampled_from([None, 0, 2]))
def test_canonical_json_matches_cpython(value: Any, indent: int | None) -> None:
    # Any spelling of the document (pretty, unsorted, non-ASCII) canonicalizes identically.
    text = json.dumps(value, indent=indent, ensure_ascii=indent is None)
    try:
        spelled = text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates only exist escaped in UTF-8 JSON
        spelled = json.dumps(value, indent=indent).encode()
    assert _core.canonical_json(spelled) == py_canonical(value)


@given(floats)
def test_float_repr_matches_cpython(x: float) -> None:
    assert _core.float_repr(x) == repr(x)


@given(st.floats(min_value=5e-324, max_value=1e300, allow_subnormal=True))
def test_float_repr_subnormal_and_huge(x: float) -> None:
    assert _core.float_repr(x) == repr(x)
    assert _core.float_repr(-x) == repr(-x)


@given(
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e15, max_value=1e15),
    st.sampled_from([0, 1, 2, 3, 6, 9, 12]),
)
def test_round_matches_cpython(x: float, n: int) -> None:
    got = _core.py_round(x, n)
    want = round(x, n)
    assert got == want and math.copysign(1, got) == math.copysign(1, want)


@given(st.integers(min_value=0, max_value=10**12), st.sampled_from([3, 6, 9]))
def test_round_on_exact_ties(k: int, n: int) -> None:
    # k + 0.5 units of the last kept digit: exact binary ties only when representable.
    x = (k + 0.5) / 10**n
    assert _core.py_round(x, n) == round(x, n)


def test_awkward_values() -> None:
    values = [
        0.0,
        -0.0,
        5e-324,
        1e16,
        1e-5,
        1e-4,
        0.1 + 0.2,
        1.7976931348623157e308,
        2.0**53 + 1,
        123456789.125,
    ]
    assert _core.canonical_json(json.dumps(values).encode()) == py_canonical(values)
    text = '{"z": -0.0, "a": [true, null, 1.25], "\\u00e9": "\\u2603", "d": "\\ud800\\u007f\\u0000"}'
    assert _core.canonical_json(text.encode()) == py_canonical(json.loads(text))
