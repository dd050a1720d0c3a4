"""Replaying canaries and reading replay reports.

``replay(canary, backend=Backend(...))`` runs the deterministic scheduler
model (``deterministic-scheduler-v4``) in Rust and returns a :class:`Report`:
metrics, per-phase and per-operation breakdowns, optional calibration, and,
with ``include_samples=True``, one sample per replayed occurrence as numpy
arrays. ``Report.from_file`` reads a report back (structurally validated; the
first inconsistency raises :class:`commcanary.errors.InputError` naming the
section, row and field).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from commcanary import _core

if TYPE_CHECKING:
    import numpy.typing as npt

    from commcanary.compiler import Canary

__all__ = ["ABLATIONS", "BACKEND_SETTINGS", "DEFAULT_SETTINGS", "Backend", "Report", "replay"]

#: The replay model's ablation names, sorted (from the core).
ABLATIONS: tuple[str, ...] = tuple(_core.ABLATIONS)


#: Every replay setting at its default, as the core gives them: the
#: backend's and the run's (``iterations``, ``seed``, ``max_replay_events``,
#: ``ablations``).
DEFAULT_SETTINGS: dict[str, Any] = orjson.loads(_core.DEFAULT_SETTINGS_JSON)

#: The backend settings, sorted, as the core declares them: ``required``
#: (every backend file has them), ``calibrated`` (fitted by ``calibrate``)
#: or ``run`` (a what-if of one replay, never in a backend file).
BACKEND_SETTINGS: dict[str, str] = dict(_core.BACKEND_SETTINGS)


def _frozen(value: Any) -> Any:
    """Lists as tuples, all the way down, so a backend hashes."""
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    return value


def _replace(self: Any, **changes: Any) -> Any:
    """A copy with ``changes`` applied."""
    return dataclasses.replace(self, **changes)


def _as_dict(self: Any) -> dict[str, Any]:
    """Every setting, by name."""
    return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def _settings(self: Any, **run: Any) -> _core.ReplaySettings:
    """The core's checked settings of this backend and a run's
    ``iterations``, ``seed``, ``max_replay_events`` and ``ablations``."""
    request = {**_as_dict(self), **run}
    return _core.ReplaySettings(orjson.dumps(request, option=orjson.OPT_SERIALIZE_NUMPY))


def _of(cls: Any, settings: _core.ReplaySettings) -> Any:
    """The backend of settings the core checked (a backend file's)."""
    values = orjson.loads(settings.request_json())
    return cls(**{k: v for k, v in values.items() if k in BACKEND_SETTINGS})


def _post_init(self: Any) -> None:
    for f in dataclasses.fields(self):
        object.__setattr__(self, f.name, _frozen(getattr(self, f.name)))


_BACKEND_DOC = """The simulated backend: the knobs an A/B comparison varies.

A frozen dataclass whose fields are the core's backend settings
(``BACKEND_SETTINGS``; their meaning and ranges: ``docs/formats/report.md``),
each defaulting to the core's default (a replay under the default label,
``simulated-nccl``, names the job's backend instead when the canary records
one other than NCCL): ``Backend()`` is the default backend,
``Backend(latency_floor_us=12)`` changes one knob, ``backend.replace(...)``
(or :func:`dataclasses.replace`) another. ``op_overrides`` holds
``(op, latency_floor_us, bandwidth_gbps)`` triples and ``pipelined_ops`` op
names. Values are checked by the core when the backend is replayed
(:class:`commcanary.OptionError` naming the setting).
"""

if TYPE_CHECKING:

    class Backend:
        """The simulated backend (a dataclass of the core's settings)."""

        def __init__(self, **settings: Any) -> None: ...
        def __getattr__(self, name: str) -> Any: ...
        def replace(self, **changes: Any) -> Backend: ...
        def as_dict(self) -> dict[str, Any]: ...
        def settings(self, **run: Any) -> _core.ReplaySettings: ...
        @classmethod
        def of(cls, settings: _core.ReplaySettings) -> Backend: ...

else:
    Backend = dataclasses.make_dataclass(
        "Backend",
        [
            (name, Any, dataclasses.field(default=_frozen(DEFAULT_SETTINGS[name])))
            for name in BACKEND_SETTINGS
        ],
        frozen=True,
        namespace={
            "__doc__": _BACKEND_DOC,
            "__module__": __name__,
            "__post_init__": _post_init,
            "replace": _replace,
            "as_dict": _as_dict,
            "settings": _settings,
            "of": classmethod(_of),
        },
    )


class Report:
    """A replay report: sections as parsed JSON, samples as numpy arrays."""

    def __init__(
        self,
        sections: dict[str, bytes],
        samples: dict[str, npt.NDArray[Any]] | Callable[[], dict[str, npt.NDArray[Any]] | None] | None,
        signatures: list[bytes],
        *,
        has_samples: bool,
        raw: _core.ReplayReport | None = None,
        source: str | None = None,
        recomputed_exposed_us: npt.NDArray[Any] | None = None,
    ) -> None:
        self._sections = {name: orjson.loads(data) for name, data in sections.items()}
        self._samples_source = samples
        self._signatures = [orjson.loads(s) for s in signatures]
        self._raw = raw
        self._recomputed = recomputed_exposed_us
        self.has_samples = has_samples
        self.source = source

    @classmethod
    def of_run(cls, raw: _core.ReplayReport, source: str, *, has_samples: bool) -> Report:
        """The report of a run the core just made (a replay, or a measured run)."""
        return cls(
            raw.sections(),
            raw.samples,
            raw.sample_signatures(),
            has_samples=has_samples,
            raw=raw,
            source=source,
        )

    @classmethod
    def from_file(
        cls,
        path: str | os.PathLike[str],
        *,
        samples: bool = True,
        canary: str | os.PathLike[str] | None = None,
    ) -> Report:
        """Read and structurally validate a report file.

        ``samples=False`` checks the embedded samples' syntax without
        materialising them (enough for comparisons, much faster). ``canary``,
        the canary a model report was replayed from: for a report written
        without samples, its exposed latencies are recomputed by re-running
        the report's declared model (deterministic), so
        :meth:`exposed_us` and the pages can draw its distribution. Raises
        :class:`commcanary.errors.InputError` when the canary is not the
        report's, or the report is a measurement (it cannot be re-run).
        """
        doc = _core.read_report_file(os.fspath(path), samples=samples)
        recomputed = None
        if canary is not None and not doc.has_samples:
            recomputed = _core.recomputed_exposed_us(os.fspath(path), os.fspath(canary))
        return cls(
            doc.sections(),
            doc.samples(),
            doc.sample_signatures(),
            has_samples=doc.has_samples,
            source=os.fspath(path),
            recomputed_exposed_us=recomputed,
        )

    @property
    def exposed_recomputed(self) -> bool:
        """Whether :meth:`exposed_us` was recomputed from the report's canary."""
        return self._recomputed is not None

    @property
    def signatures(self) -> list[dict[str, Any]]:
        """The signatures the samples refer to (``samples["signature"]`` indexes them)."""
        return self._signatures

    def section(self, name: str) -> Any:
        """A section as parsed JSON (``None`` when absent)."""
        return self._sections.get(name)

    @property
    def metrics(self) -> dict[str, Any]:
        """Report-level metrics."""
        metrics: dict[str, Any] = self._sections["metrics"]
        return metrics

    @property
    def by_phase(self) -> list[dict[str, Any]]:
        """Per-phase latency rows, sorted by name."""
        rows: list[dict[str, Any]] = self._sections["by_phase"]
        return rows

    @property
    def by_op(self) -> list[dict[str, Any]]:
        """Per-operation latency rows, sorted by name."""
        rows: list[dict[str, Any]] = self._sections["by_op"]
        return rows

    @property
    def calibration(self) -> dict[str, Any] | None:
        """Modelled versus observed exposed latency, when observations exist."""
        return self._sections.get("calibration")

    @property
    def backend(self) -> dict[str, Any]:
        """The backend the report was produced under."""
        backend: dict[str, Any] = self._sections["backend"]
        return backend

    @property
    def workload(self) -> dict[str, Any]:
        """The canary's workload description."""
        workload: dict[str, Any] = self._sections["workload"]
        return workload

    @cached_property
    def samples(self) -> dict[str, npt.NDArray[Any]] | None:
        """One entry per replayed occurrence: numpy arrays by column (as
        stored, rounded), plus ``last_arrival_us`` and ``completion_us``
        (derived by the core) and ``phase``, ``op``, ``group`` (object arrays)."""
        source = self._samples_source
        columns = source() if callable(source) else source
        if columns is None:
            return None
        import numpy as np

        out = dict(columns)
        signature = out["signature"]
        for key in ("phase", "op", "group"):
            table = np.array([s[key] for s in self._signatures], dtype=object)
            out[key] = table[signature] if len(table) else np.array([], dtype=object)
        return out

    def exposed_us(self) -> npt.NDArray[Any] | None:
        """The exposed latency of every occurrence: from the samples; for a
        report a replay just made, kept by the core even when the report
        carries no samples; for a file written without samples and read with
        its canary, recomputed from it; else ``None``."""
        samples = self.samples
        if samples is not None:
            exposed: npt.NDArray[Any] = samples["exposed_us"]
            return exposed
        if self._recomputed is not None:
            return self._recomputed
        return None if self._raw is None else self._raw.exposed_us()

    def summary_line(self) -> str:
        """The one-line summary the CLI prints."""
        m = self.metrics
        return (
            f"replayed {m['count']} events: median={m['median_us']!r} us p95={m['p95_us']!r} us "
            f"p99={m['p99_us']!r} us hidden={m['communication_hidden_pct']!r}%"
        )

    def to_bytes(self) -> bytes:
        """The report's canonical JSON (only for reports produced by :func:`replay`)."""
        if self._raw is None:
            raise ValueError("this report was read from a file; its bytes are the file's")
        return bytes(self._raw.to_bytes())

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write the report atomically (only for reports produced by :func:`replay`)."""
        if self._raw is None:
            raise ValueError("this report was read from a file; copy the file instead")
        self._raw.write(os.fspath(path))
        return Path(path)


def replay(
    canary: Canary | str | os.PathLike[str] | bytes,
    *,
    backend: Backend | None = None,
    iterations: int = DEFAULT_SETTINGS["iterations"],
    seed: int = DEFAULT_SETTINGS["seed"],
    ablations: tuple[str, ...] | list[str] = (),
    include_samples: bool = False,
    max_replay_events: int = DEFAULT_SETTINGS["max_replay_events"],
) -> Report:
    """Replay a canary (a compiled :class:`~commcanary.Canary`, a path or bytes)."""
    from commcanary.compiler import Canary as CanaryType

    settings = (backend or Backend()).settings(
        iterations=iterations, seed=seed, ablations=list(ablations), max_replay_events=max_replay_events
    )
    if isinstance(canary, CanaryType):
        name, data = "<canary>", canary.to_bytes()
    elif isinstance(canary, bytes | bytearray | memoryview):
        name, data = "<bytes>", bytes(canary)
    else:
        name, data = os.fspath(canary), None
    raw = _core.replay_canary(name, settings, data=data, include_samples=include_samples)
    return Report.of_run(raw, name, has_samples=include_samples)
