"""The agent's view of the NCCL profiler plugin's logs (``--nccl-logs DIR``).

The core follows the directory (``_core.NcclFollower``: whole frames only,
per process and communicator the collectives enqueued, the last sequence
numbers enqueued and completed, the operations in flight, the last
progress). This module turns that into:

* a **stall**: a communicator on which some process has operations in
  flight and no member process progressed (enqueued or completed anything)
  for ``hang_after`` seconds, on the host clock of the logs;
* Prometheus lines (``commcanary_nccl_*``) and a ``/status`` section;
* the logs copied into an alarm's evidence, which ``diagnose hang`` reads.

A communicator whose logs carry no children (masks without ``kernelch`` and
``proxyop``) cannot show completion and is never called stalled.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from commcanary import _core

if TYPE_CHECKING:
    from commcanary._types import NcclLiveProcess

__all__ = ["NcclWatch"]

#: Log bytes an alarm copies, at most.
MAX_COPY_BYTES = 512 << 20


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


class NcclWatch:
    """Follows one log directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.follower = _core.NcclFollower(str(directory))
        self.processes: list[NcclLiveProcess] = []
        self.damaged: list[str] = []

    def poll(self) -> None:
        """Reads what the segments gained."""
        self.processes, self.damaged = self.follower.poll()

    def progressed(self) -> dict[str, float]:
        """Per group: the latest progress of any member (seconds, host clock)."""
        out: dict[str, float] = {}
        for p in self.processes:
            for c in p["comms"]:
                out[c["group"]] = max(out.get(c["group"], 0.0), c["last_progress_ns"] / 1e9)
        return out

    def stalled(self, now: float, hang_after_s: float) -> dict[str, list[str]]:
        """Per stalled group, the ranks with operations in flight on it."""
        latest = self.progressed()
        waiting: dict[str, list[str]] = {}
        for p in self.processes:
            for c in p["comms"]:
                if c["observed"] and c["in_flight"] > 0 and not c["finalized"]:
                    waiting.setdefault(c["group"], []).append(str(p["rank"]))
        return {
            group: sorted(set(ranks), key=lambda r: (len(r), r))
            for group, ranks in waiting.items()
            if now - latest.get(group, now) >= hang_after_s
        }

    def copy_into(self, folder: Path) -> int:
        """Copies the segments (as they are now) into ``folder``; returns how many."""
        folder.mkdir(parents=True, exist_ok=True)
        copied = size = 0
        for path in sorted(self.directory.glob("*.ccnl")):
            n = path.stat().st_size
            if size + n > MAX_COPY_BYTES:
                break
            shutil.copyfile(path, folder / path.name)
            size += n
            copied += 1
        return copied

    def status(self, now: float | None = None) -> dict[str, Any]:
        """The ``/status`` section."""
        now = time.time() if now is None else now
        return {
            "directory": str(self.directory),
            "damaged": list(self.damaged),
            "processes": [
                {
                    "rank": p["rank"],
                    "host": p["host"],
                    "pid": p["pid"],
                    "sealed": p["sealed"],
                    "dropped": p["dropped"],
                    "comms": [
                        {
                            "group": c["group"],
                            "enqueued": c["enqueued"],
                            "last_enqueued": c["last_enqueued"],
                            "last_completed": c["last_completed"],
                            "in_flight": c["in_flight"],
                            "seconds_since_progress": round(max(0.0, now - c["last_progress_ns"] / 1e9), 3)
                            if c["last_progress_ns"]
                            else None,
                        }
                        for c in p["comms"]
                    ],
                }
                for p in self.processes
            ],
        }

    def metrics(self, now: float) -> str:
        """Prometheus lines: per rank and group, the counters and the gap."""
        series = (
            (
                "commcanary_nccl_enqueued_total",
                "counter",
                "Collectives and p2p operations NCCL enqueued.",
                "enqueued",
            ),
            (
                "commcanary_nccl_last_enqueued_seq",
                "gauge",
                "Highest collective sequence number enqueued.",
                "last_enqueued",
            ),
            (
                "commcanary_nccl_last_completed_seq",
                "gauge",
                "Highest collective sequence number completed.",
                "last_completed",
            ),
            ("commcanary_nccl_in_flight", "gauge", "Operations enqueued and not completed.", "in_flight"),
        )
        lines: list[str] = []
        for name, kind, text, key in series:
            lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
            for p in self.processes:
                for c in p["comms"]:
                    value = {
                        "enqueued": c["enqueued"],
                        "last_enqueued": c["last_enqueued"],
                        "last_completed": c["last_completed"],
                        "in_flight": c["in_flight"],
                    }[key]
                    lines.append(f'{name}{{rank="{p["rank"]}",group="{_label(c["group"])}"}} {value}')
        name = "commcanary_nccl_seconds_since_progress"
        lines += [
            f"# HELP {name} Seconds since the rank last enqueued or completed on the group.",
            f"# TYPE {name} gauge",
        ]
        for p in self.processes:
            for c in p["comms"]:
                if c["last_progress_ns"]:
                    gap = max(0.0, now - c["last_progress_ns"] / 1e9)
                    lines.append(f'{name}{{rank="{p["rank"]}",group="{_label(c["group"])}"}} {gap:.3f}')
        name = "commcanary_nccl_dropped_records_total"
        lines += [f"# HELP {name} Records the plugin's full rings refused.", f"# TYPE {name} counter"]
        lines += [f'{name}{{rank="{p["rank"]}"}} {p["dropped"]}' for p in self.processes]
        return "\n".join(lines) + "\n"
