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


def test_settings_and_configurations_are_the_cores() -> None:
    import dataclasses

    import orjson

    from commcanary.behavior import DEFAULT_CONFIGURATIONS
    from commcanary.replay import BACKEND_SETTINGS, DEFAULT_SETTINGS, Backend

    assert orjson.loads(_core.DEFAULT_SETTINGS_JSON) == DEFAULT_SETTINGS
    assert dict(_core.BACKEND_SETTINGS) == BACKEND_SETTINGS
    # The Python backend is a view of the core's table: its fields, in the core's order, with its defaults.
    fields = dataclasses.fields(Backend)
    assert [f.name for f in fields] == [name for name, _ in _core.BACKEND_SETTINGS]
    for f in fields:
        core = DEFAULT_SETTINGS[f.name]
        assert f.default == (tuple(core) if isinstance(core, list) else core)
    # What the core reads back from a default backend is the default backend.
    assert orjson.loads(Backend().settings().request_json()) == DEFAULT_SETTINGS
    assert list(DEFAULT_CONFIGURATIONS) == orjson.loads(_core.DEFAULT_CONFIGURATIONS_JSON)


def test_configuration_and_clock_offset_rules_are_the_cores() -> None:
    import pytest

    from commcanary.behavior import resolve_configurations
    from commcanary.errors import InputError, OptionError
    from commcanary.importers.kineto import offsets as _offsets
    from commcanary.validate import check_configurations

    with pytest.raises(InputError, match=r"configurations\[1\] field 'bandwidth_gbps' must be positive"):
        resolve_configurations([{"name": "a"}, {"name": "b", "bandwidth_gbps": 0}])
    with pytest.raises(InputError, match=r"field 'compute_fill' must be 'sleep' or 'spin'"):
        check_configurations([{"name": "a"}, {"name": "b", "compute_fill": "x"}])
    with pytest.raises(OptionError) as bad:
        _offsets({"one": 1.0})  # type: ignore[dict-item]
    assert bad.value.rule == _core.CLOCK_OFFSETS_RULE


def test_the_report_schema_lists_the_cores_backend_settings() -> None:
    """The report schema's simulated backend is the one the core's settings table
    generates (scripts/schemas.py writes it): every setting a report writes, and the
    settings every backend file requires as required."""
    import json
    from importlib.resources import files

    schema = json.loads((files("commcanary") / "schemas" / "report.schema.json").read_text())
    backend = schema["$defs"]["simulated_backend"]
    assert backend == json.loads(_core.SIMULATED_BACKEND_SCHEMA_JSON)
    names = {name for name, _ in _core.BACKEND_SETTINGS}
    assert set(backend["properties"]) == names | {"bandwidth_unit", "mode"}
    required = {name for name, role in _core.BACKEND_SETTINGS if role == "required"}
    assert set(backend["required"]) == required | {"bandwidth_unit", "mode"}
