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

import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from commcanary import _core

if TYPE_CHECKING:
    import numpy.typing as npt

    from commcanary.compiler import Canary

__all__ = ["ABLATIONS", "Backend", "Report", "replay"]

#: The replay model's ablation names, sorted (from the core).
ABLATIONS: tuple[str, ...] = tuple(_core.ABLATIONS)


@dataclass(frozen=True)
class Backend:
    """The simulated backend: the knobs an A/B comparison varies."""

    label: str = _core.DEFAULT_SETTINGS["label"]
    bandwidth_gbps: float = _core.DEFAULT_SETTINGS["bandwidth_gbps"]
    latency_floor_us: float = _core.DEFAULT_SETTINGS["latency_floor_us"]
    compute_pressure: float = _core.DEFAULT_SETTINGS["compute_pressure"]
    overlap_efficiency: float = _core.DEFAULT_SETTINGS["overlap_efficiency"]
    #: Operations with their own ``(op, latency_floor_us, bandwidth_gbps)``
    #: (a calibrated backend's); every other op uses the two above.
    op_overrides: tuple[tuple[str, float, float], ...] = ()
    #: What-ifs of the workload the physical replay can realise too: every
    #: message's bytes, and every gap (the compute between collectives),
    #: multiplied by these.
    bytes_scale: float = 1.0
    gap_scale: float = 1.0
    #: Collectives of different communicators never overlap (one queue for
    #: all, no contention between groups).
    serialize_groups: bool = False
    #: Concurrent communicators do not slow each other's transfers (a
    #: calibrated backend's): on one host shared by every rank they contend
    #: for its cores, which ``host_cpus`` prices, not for a link.
    independent_groups: bool = False
    #: A rank takes part in one operation at a time (blocking calls, as the
    #: physical replay makes them): an occurrence starts only once every
    #: member is done with its previous one, on any communicator.
    serialize_ranks: bool = False
    #: Host stalls (a calibrated backend's; 0: none): with this probability
    #: (at most 0.5) a collective's latency gains an exponential delay of
    #: mean ``stall_mean_us``, as a process descheduled on an oversubscribed
    #: host; under ``floor_per_step`` each step of its algorithm stalls with
    #: it and the delays add up. Medians stay; means, tails and queues grow.
    stall_probability: float = 0.0
    stall_mean_us: float = 0.0
    #: The spread of the host's transfer rate (a calibrated backend's; 0:
    #: none, at most 2): each occurrence's bandwidth term is multiplied by
    #: ``exp(rate_spread * z)``, ``z`` standard normal. Medians stay; large
    #: messages spread as copies on a shared host do.
    rate_spread: float = 0.0
    #: The cores of the one host every rank runs on (a calibrated CPU
    #: backend's; 0: not modelled). With more ranks than cores, each rank
    #: gets ``host_cpus / ranks`` of a core, so every latency and stall
    #: stretches by ``max(1, ranks / host_cpus)`` (processor sharing).
    host_cpus: float = 0.0
    #: The share of a core one rank keeps busy inside a collective (a
    #: measured gloo run's; 1: a whole core). Sharing counts demand: the
    #: stretch is ``max(1, rank_cpu_share * running / host_cpus)``.
    rank_cpu_share: float = 1.0
    #: The latency floor is paid once per step of the op's algorithm (a
    #: ring all_reduce over ``n`` ranks ``2(n-1)`` steps, an all_gather
    #: ``n-1``, a tree broadcast ``ceil(log2 n)``, a transfer one), the
    #: latency term of the alpha-beta cost (a calibrated backend's; False:
    #: once per occurrence, the spec's model).
    floor_per_step: bool = False
    #: Operations whose steps are pipelined (a calibrated backend's; empty:
    #: the spec's start-up plus transfer): each step takes the longer of its
    #: hand-off and its chunk's transfer, so the op costs
    #: ``max(floors, transfer)`` plus the per-rank term. ``send`` and
    #: ``recv`` follow ``point_to_point``.
    pipelined_ops: tuple[str, ...] = ()


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
    ) -> None:
        self._sections = {name: orjson.loads(data) for name, data in sections.items()}
        self._samples_source = samples
        self._signatures = [orjson.loads(s) for s in signatures]
        self._raw = raw
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
    def from_file(cls, path: str | os.PathLike[str], *, samples: bool = True) -> Report:
        """Read and structurally validate a report file.

        ``samples=False`` checks the embedded samples' syntax without
        materialising them (enough for comparisons, much faster).
        """
        doc = _core.read_report_file(os.fspath(path), samples=samples)
        return cls(
            doc.sections(),
            doc.samples(),
            doc.sample_signatures(),
            has_samples=doc.has_samples,
            source=os.fspath(path),
        )

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
        (derived) and ``phase``, ``op``, ``group`` (object arrays)."""
        source = self._samples_source
        columns = source() if callable(source) else source
        if columns is None:
            return None
        import numpy as np

        out = dict(columns)
        out["last_arrival_us"] = out["first_arrival_us"] + out["arrival_skew_us"]
        out["completion_us"] = out["collective_start_us"] + out["collective_us"]
        signature = out["signature"]
        for key in ("phase", "op", "group"):
            table = np.array([s[key] for s in self._signatures], dtype=object)
            out[key] = table[signature] if len(table) else np.array([], dtype=object)
        return out

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
    iterations: int = _core.DEFAULT_SETTINGS["iterations"],
    seed: int = _core.DEFAULT_SETTINGS["seed"],
    ablations: tuple[str, ...] | list[str] = (),
    include_samples: bool = False,
    max_replay_events: int = _core.DEFAULT_SETTINGS["max_replay_events"],
) -> Report:
    """Replay a canary (a compiled :class:`~commcanary.Canary`, a path or bytes)."""
    from commcanary.compiler import Canary as CanaryType

    settings = asdict(backend or Backend())
    settings["op_overrides"] = [tuple(o) for o in settings["op_overrides"]]
    settings["pipelined_ops"] = list(settings["pipelined_ops"])
    if isinstance(canary, CanaryType):
        name, data = "<canary>", canary.to_bytes()
    elif isinstance(canary, bytes | bytearray | memoryview):
        name, data = "<bytes>", bytes(canary)
    else:
        name, data = os.fspath(canary), None
    raw = _core.replay_canary(
        name,
        data=data,
        iterations=iterations,
        seed=seed,
        ablations=list(ablations),
        include_samples=include_samples,
        max_replay_events=max_replay_events,
        **settings,
    )
    return Report.of_run(raw, name, has_samples=include_samples)
