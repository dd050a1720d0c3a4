"""Python's format ids and engine constants are the core's objects, not copies."""

from __future__ import annotations

from commcanary import _core, compiler, formats


def test_format_ids_are_the_cores() -> None:
    assert formats.FORMATS == _core.FORMATS
    for role, value in formats.FORMATS.items():
        assert value is _core.FORMATS[role], role
    assert formats.CANARY_FORMAT is _core.FORMATS["canary"]
    assert formats.CANARY_FORMAT == _core.CANARY_FORMAT
    assert formats.CANARY_LOOP_FORMAT == _core.CANARY_LOOP_FORMAT
    assert formats.TRACE_FORMAT == _core.TRACE_FORMAT
    assert formats.REPORT_FORMAT == _core.REPORT_FORMAT
    assert formats.CANONICAL_JSON is _core.CANONICAL_JSON
    assert formats.REPLAY_MODEL is _core.REPLAY_MODEL
    assert formats.MEASURED_MODE is _core.MEASURED_MODE


def test_engine_constants_are_the_cores() -> None:
    assert compiler.BOUND_FIELDS is _core.FIDELITY_FIELDS
    assert len(set(formats.FORMATS.values())) == len(formats.FORMATS)


def test_tolerance_defaults_and_rules_are_the_cores() -> None:
    import pytest

    from commcanary.behavior import Tolerances
    from commcanary.errors import OptionError

    assert {k: getattr(Tolerances(), k) for k in _core.DEFAULT_TOLERANCES} == _core.DEFAULT_TOLERANCES
    Tolerances().validate()
    with pytest.raises(OptionError) as bad:
        Tolerances(tail_recall_threshold=1.5).validate()
    assert (bad.value.option, bad.value.rule) == ("tail_recall_threshold", "must be between 0 and 1")
    with pytest.raises(OptionError) as bad:
        Tolerances(absolute_tolerance_us=float("nan")).validate()
    assert bad.value.option == "absolute_tolerance_us"
