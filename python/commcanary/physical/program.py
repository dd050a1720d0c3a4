"""A canary as the programs its ranks execute.

The canary is expanded exactly as the model replays it (one row per
occurrence, in execution order: the Rust core's expansion, which
``export-param --per-rank-dir`` walks too). Each occurrence keeps its
signature (op, bytes, ranks, group, dtype, root, sender, receiver), its
readiness gap and every member's arrival offset. Groups are the distinct
(group name, ranks) pairs of the collectives, in order of first use (every
process creates them in that order, as ``torch.distributed.new_group``
requires); a collective on every rank of the world uses the default group;
transfers use global ranks.

The program crosses to the worker processes as one ``.npz`` of columns and
a JSON list of the signatures.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from commcanary import _core
from commcanary.errors import InputError

__all__ = ["COLLECTIVES", "Program", "load_program", "read_program", "write_program"]

#: Ops a worker runs, by the canary's op name.
COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "broadcast",
    "reduce",
    "gather",
    "scatter",
    "point_to_point",
    "send",
    "recv",
)
_ELEMENT = {
    "float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4,
    "int16": 2, "int8": 1, "uint8": 1, "bool": 1,
}  # fmt: skip


@dataclass
class Program:
    """Every occurrence of a canary, ready to execute."""

    #: Parsed signatures.
    signatures: list[dict[str, Any]]
    #: Signature of each occurrence.
    signature: npt.NDArray[np.uint32]
    #: Gap before each occurrence, µs.
    gap_us: npt.NDArray[np.float64]
    #: Start of each occurrence's offsets in ``offsets_us``.
    offsets_at: npt.NDArray[np.int64]
    #: Per-rank arrival offsets, signature rank order, µs.
    offsets_us: npt.NDArray[np.float64]
    #: The groups collectives run on: (name, ranks), first use first.
    groups: list[tuple[str, list[int]]]
    #: Group index of each signature (-1: the default group or a transfer).
    group_of: list[int]
    #: Ranks the canary uses (max rank + 1).
    world: int

    @property
    def occurrences(self) -> int:
        return len(self.signature)


def _ranks(sig: dict[str, Any]) -> list[int]:
    ranks = sig["ranks"]
    return list(range(ranks)) if isinstance(ranks, int) else [int(r) for r in ranks]


def load_program(canary: str | os.PathLike[str], data: bytes | None = None) -> Program:
    """Expand the canary at ``canary`` (or ``data``) into its program.

    Raises :class:`InputError` for an op no process group can run.
    """
    cols = _core.canary_occurrences(os.fspath(canary), data=data)
    signatures = [json.loads(s) for s in cols["signatures"]]
    for i, sig in enumerate(signatures):
        if sig["op"] not in COLLECTIVES:
            raise InputError(
                f"{os.fspath(canary)}: signatures[{i}] is the custom op '{sig['op']}', "
                "which torch.distributed cannot run"
            )
        sig["ranks"] = _ranks(sig)
    world = max((max(s["ranks"]) for s in signatures), default=-1) + 1
    counts = np.array([len(signatures[s]["ranks"]) for s in cols["signature"]], dtype=np.int64)
    offsets_at = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64) if len(counts) else counts
    groups: list[tuple[str, list[int]]] = []
    group_of: list[int] = []
    for sig in signatures:
        p2p = sig["op"] in ("point_to_point", "send", "recv")
        if p2p or sig["ranks"] == list(range(world)):
            group_of.append(-1)
            continue
        key = (sig.get("group", "default"), sorted(sig["ranks"]))
        if key not in groups:
            groups.append(key)
        group_of.append(groups.index(key))
    return Program(
        signatures=signatures,
        signature=cols["signature"],
        gap_us=cols["gap_us"],
        offsets_at=offsets_at,
        offsets_us=cols["arrival_offsets_us"],
        groups=groups,
        group_of=group_of,
        world=world,
    )


def elements(sig: dict[str, Any], bytes_scale: float = 1.0) -> tuple[str, int]:
    """The dtype name and element count of a signature's message (its bytes
    times ``bytes_scale``)."""
    given = sig.get("dtype")
    dtype = given if isinstance(given, str) and given in _ELEMENT else "float32"
    size = max(1, round(int(sig["bytes"]) * bytes_scale))
    return dtype, max(1, -(-size // _ELEMENT[dtype]))


def write_program(program: Program, directory: Path) -> None:
    """Write the program for the worker processes."""
    np.savez(
        directory / "program.npz",
        signature=program.signature,
        gap_us=program.gap_us,
        offsets_at=program.offsets_at,
        offsets_us=program.offsets_us,
    )
    meta = {
        "signatures": program.signatures,
        "groups": program.groups,
        "group_of": program.group_of,
        "world": program.world,
    }
    (directory / "program.json").write_text(json.dumps(meta))


def read_program(directory: Path) -> Program:
    """Read a program :func:`write_program` wrote."""
    meta = json.loads((directory / "program.json").read_text())
    with np.load(directory / "program.npz") as z:
        return Program(
            signatures=meta["signatures"],
            signature=z["signature"],
            gap_us=z["gap_us"],
            offsets_at=z["offsets_at"],
            offsets_us=z["offsets_us"],
            groups=[(name, ranks) for name, ranks in meta["groups"]],
            group_of=meta["group_of"],
            world=meta["world"],
        )
