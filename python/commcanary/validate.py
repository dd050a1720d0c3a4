"""Does the model rank configurations as real collectives do?
(``commcanary validate-model``)

Each configuration is one a physical run can realise: every message
``bytes_scale`` times its size, every gap ``compute_fill_scale`` times its
length, the gap filled by sleeping or spinning (``compute_fill``), and
``concurrent_groups`` ``on`` (as recorded) or ``off`` (no two
communicators' collectives overlap: a barrier at every change of group
physically, one queue and no contention between groups in the model). Each runs
in the model (the backend given, with the same scales) and ``runs`` times on
real process groups. For each ranking metric (``median_us``, ``p95_us``,
``p99_us``, ``mean_us``) and each pair of configurations (names in
alphabetical order), the relation (``left_better``, ``right_better``, or a
tie within the tolerance) of the model is compared with that of the
measurements (the median over runs): the share that agree is the ranking
agreement. Kendall's tau per metric compares the two orders whole. The
same agreement between every two physical runs is the run-to-run noise:
no model can agree with the measurements more reliably than they agree
with themselves. The physical runs go round by round, each configuration
once per round, so a host that drifts over the campaign (other load,
throttling) shifts every configuration alike instead of reordering them.
"""

from __future__ import annotations

import itertools
import os
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from commcanary import _core, formats
from commcanary.errors import InputError
from commcanary.replay import BACKEND_SETTINGS, Backend, replay

__all__ = ["VALIDATION_FORMAT", "ModelValidation", "load_physical_configurations", "validate_model"]

VALIDATION_FORMAT = formats.MODEL_VALIDATION_FORMAT
METRICS = ("median_us", "p95_us", "p99_us", "mean_us")


@dataclass
class ModelValidation:
    """Model against measurement, configuration by configuration."""

    document: dict[str, Any]

    @property
    def agreement(self) -> float:
        return float(self.document["ranking_agreement"])

    def lines(self) -> list[str]:
        d = self.document
        taus = ", ".join(f"{m} {d['kendall_tau'][m]:.2f}" for m in METRICS)
        return [
            f"model validation: ranking agreement {d['ranking_agreement'] * 100:.1f}% "
            f"({d['agreeing_decisions']} of {d['decisions']} decisions) over {len(d['configurations'])} configurations",
            f"- Kendall tau: {taus}",
            f"- run-to-run agreement of the physical runs: {d['run_to_run_agreement'] * 100:.1f}% "
            f"({d['runs']} runs each)",
        ]

    def write(self, path: str | os.PathLike[str]) -> None:
        _core.write_atomic(os.fspath(path), _core.canonical_json(orjson.dumps(self.document)))


def load_physical_configurations(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """A configuration file: a JSON list of ``{name, bytes_scale,
    compute_fill_scale, compute_fill, concurrent_groups}`` (scales default 1,
    fill ``sleep``, groups ``on``), checked by the core."""
    where = os.fspath(path)
    return check_configurations(_core.read_input_file(where), where)


def check_configurations(
    items: Sequence[Mapping[str, Any]] | bytes, where: str = "configurations"
) -> list[dict[str, Any]]:
    """The physical configurations with their defaults filled in; the core
    checks the list (:class:`InputError` naming the entry and field)."""
    data = items if isinstance(items, bytes) else _json(items, where)
    resolved: list[dict[str, Any]] = orjson.loads(_core.physical_configurations(data, where))
    return resolved


def _json(items: object, where: str) -> bytes:
    try:
        return orjson.dumps(items)
    except TypeError as exc:
        raise InputError(f"{where} must be JSON data: {exc}") from None


def _relations(values: Mapping[str, Mapping[str, float]], names: list[str], tie: float) -> list[str]:
    out = []
    for m in METRICS:
        for a, b in itertools.combinations(names, 2):
            va, vb = values[a][m], values[b][m]
            out.append("tie" if abs(va - vb) <= tie else "left_better" if va < vb else "right_better")
    return out


def _kendall(x: list[float], y: list[float]) -> float:
    pairs = list(itertools.combinations(range(len(x)), 2))
    score = sum(((x[i] > x[j]) - (x[i] < x[j])) * ((y[i] > y[j]) - (y[i] < y[j])) for i, j in pairs)
    return score / len(pairs) if pairs else 1.0


def _scaled(base: Backend, config: Mapping[str, Any]) -> Backend:
    """``base`` at ``config``'s message and gap scales and group setting."""
    off = config["concurrent_groups"] == "off"
    return base.replace(
        bytes_scale=config["bytes_scale"], gap_scale=config["compute_fill_scale"], serialize_groups=off
    )


def validate_model(
    canary: str | os.PathLike[str],
    configurations: Sequence[Mapping[str, Any]],
    *,
    engine: str = "gloo",
    backend: Backend | None = None,
    runs: int = 3,
    iterations: int = 1,
    warmup: int = 1,
    tie_us: float = 0.001,
    nproc: int | None = None,
    timeout_s: float = 600.0,
    progress: Callable[[int, int], None] | None = None,
) -> ModelValidation:
    """Rank ``configurations`` in the model and on ``engine``; see the module.

    ``progress(done, total)`` is called after each physical run."""
    from commcanary.physical import replay_physical

    configs = check_configurations(configurations)
    if runs < 2:
        raise InputError("validate-model needs at least 2 physical runs per configuration (for its noise)")
    base = backend or Backend()
    model: dict[str, dict[str, float]] = {}
    label = base.label
    for c in configs:
        report = replay(canary, backend=_scaled(base, c), iterations=iterations)
        model[c["name"]] = {m: report.metrics[m] for m in METRICS}
        label = report.backend["label"]  # a default label is named after the canary's job
    # Round by round, every configuration once per round: the host's drift
    # over the campaign falls on every configuration alike, not on whichever
    # was measured last.
    measured: dict[str, list[dict[str, float]]] = {c["name"]: [] for c in configs}
    for _ in range(runs):
        for c in configs:
            run = replay_physical(
                canary,
                engine=engine,
                nproc=nproc,
                iterations=iterations,
                warmup=warmup,
                compute_fill=c["compute_fill"],
                compute_fill_scale=c["compute_fill_scale"],
                bytes_scale=c["bytes_scale"],
                serialize_groups=c["concurrent_groups"] == "off",
                timeout_s=timeout_s,
                include_samples=False,
            )
            measured[c["name"]].append({m: run.report.metrics[m] for m in METRICS})
            if progress is not None:
                progress(sum(map(len, measured.values())), runs * len(configs))
    names = sorted(model)
    centre = {n: {m: statistics.median(r[m] for r in measured[n]) for m in METRICS} for n in names}
    mine, theirs = _relations(model, names, tie_us), _relations(centre, names, tie_us)
    agree = sum(a == b for a, b in zip(mine, theirs, strict=True))
    between = []
    for r1, r2 in itertools.combinations(range(runs), 2):
        one = _relations({n: measured[n][r1] for n in names}, names, tie_us)
        two = _relations({n: measured[n][r2] for n in names}, names, tie_us)
        between.append(sum(a == b for a, b in zip(one, two, strict=True)) / len(one))
    doc = {
        "format": VALIDATION_FORMAT,
        "engine": engine,
        # The backend's settings a backend file carries (not the run's what-ifs).
        "backend": {
            k: v for k, v in base.replace(label=label).as_dict().items() if BACKEND_SETTINGS[k] != "run"
        },
        "configurations": configs,
        "runs": runs,
        "ranking_metrics": list(METRICS),
        "ranking_tie_tolerance_us": tie_us,
        "model": model,
        "measured": measured,
        "decisions": len(mine),
        "agreeing_decisions": agree,
        "ranking_agreement": round(agree / len(mine), 4),
        "kendall_tau": {
            m: round(_kendall([model[n][m] for n in names], [centre[n][m] for n in names]), 4)
            for m in METRICS
        },
        "run_to_run_agreement": round(statistics.mean(between), 4),
    }
    return ModelValidation(doc)
