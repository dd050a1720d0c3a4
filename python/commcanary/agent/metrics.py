"""The agent's Prometheus exposition (text format 0.0.4) and JSON status.

Names follow Prometheus' conventions: a ``commcanary_`` prefix, base units
(seconds, bytes), ``_total`` on counters. Labels are bounded by the job's
shape (group, op, size bucket, rank), never by calls: nothing is labelled
per instance or per step.

===========================================================  =========  ==========================
metric                                                       type       labels
===========================================================  =========  ==========================
``commcanary_collectives_total``                             counter    group, op
``commcanary_collective_bytes_total``                        counter    group, op
``commcanary_collective_bus_bytes_total``                    counter    group, op
``commcanary_collective_busy_seconds_total``                 counter    group, op
``commcanary_collective_duration_seconds``                   histogram  group, op
``commcanary_collective_bus_bandwidth_bytes_per_second``     gauge      group, op, size_bucket
``commcanary_rank_lag_collectives``                          gauge      group, rank
``commcanary_rank_arrival_lag_seconds``                      gauge      group, rank
``commcanary_group_seconds_since_progress``                  gauge      group
``commcanary_group_waiting_ranks``                           gauge      group
``commcanary_step``                                          gauge
``commcanary_step_last_rank`` / ``_lateness_seconds``        gauge
``commcanary_rank_late_steps_total``                         counter    rank
``commcanary_rank_repeated_straggler``                       gauge      rank
``commcanary_processes``                                     gauge      state
``commcanary_hang_alarms_total`` / ``commcanary_stalls_total``  counter
``commcanary_agent_lines_total``                             counter
``commcanary_agent_lines_skipped_total``                     counter    reason
``commcanary_agent_instances_dropped_total``                 counter
===========================================================  =========  ==========================

The bus bandwidth is nccl-tests' (bytes times the op's factor over n ranks,
divided by the instance's time from its last arrival to its last end);
``rate(bus_bytes_total) / rate(busy_seconds_total)`` gives it over any
window, the gauge is the median of the last instances of a size bucket.
"""

from __future__ import annotations

import statistics
from typing import Any

from commcanary.agent.state import DURATION_BUCKETS_S, LiveJob

__all__ = ["render_metrics", "status"]


def _label(value: Any) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(**labels: Any) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_label(v)}"' for k, v in labels.items()) + "}"


def _number(value: float) -> str:
    if value != value:  # NaN
        return "NaN"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


class _Out:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str) -> None:
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} {kind}")

    def sample(self, name: str, value: float, **labels: Any) -> None:
        self.lines.append(f"{name}{_labels(**labels)} {_number(value)}")


def render_metrics(job: LiveJob, now: float, agent: dict[str, Any]) -> str:
    """The exposition, from the live view and the agent's own counts."""
    out = _Out()
    per_op: tuple[tuple[str, str, dict[tuple[str, str], Any]], ...] = (
        ("commcanary_collectives_total", "Collective instances every member completed.", job.collectives),
        ("commcanary_collective_bytes_total", "Message bytes of the completed instances.", job.bytes_total),
        (
            "commcanary_collective_bus_bytes_total",
            "Bytes times nccl-tests' bus factor, for bus bandwidth.",
            job.bus_bytes,
        ),
        ("commcanary_collective_busy_seconds_total", "Instance time, last arrival to last end.", job.busy_s),
    )
    for name, help_text, values in per_op:
        out.family(name, "counter", help_text)
        for (group, op), value in sorted(values.items()):
            out.sample(name, value, group=group, op=op)
    name = "commcanary_collective_duration_seconds"
    out.family(name, "histogram", "Instance time from the last member's arrival to the last member's end.")
    for (group, op), counts in sorted(job.histogram.items()):
        running = 0
        for bound, count in zip(DURATION_BUCKETS_S, counts, strict=False):
            running += count
            out.sample(f"{name}_bucket", running, group=group, op=op, le=repr(bound))
        running += counts[-1]
        out.sample(f"{name}_bucket", running, group=group, op=op, le="+Inf")
        out.sample(f"{name}_sum", job.duration_sum.get((group, op), 0.0), group=group, op=op)
        out.sample(f"{name}_count", running, group=group, op=op)
    name = "commcanary_collective_bus_bandwidth_bytes_per_second"
    out.family(name, "gauge", "Median bus bandwidth (nccl-tests) of the last instances of a size bucket.")
    for (group, op, bucket), samples in sorted(job.bandwidth.items()):
        if samples:
            out.sample(name, statistics.median(samples), group=group, op=op, size_bucket=bucket)
    lags = lag_collectives(job)
    out.family(
        "commcanary_rank_lag_collectives",
        "gauge",
        "Calls of the group a rank completed fewer than its most advanced member.",
    )
    for (group, rank), lag in sorted(lags.items()):
        out.sample("commcanary_rank_lag_collectives", lag, group=group, rank=rank)
    out.family(
        "commcanary_rank_arrival_lag_seconds",
        "gauge",
        "How long after the group's first member a rank arrived at its last instance.",
    )
    for (group, rank), seconds in sorted(job.arrival_lag.items()):
        out.sample("commcanary_rank_arrival_lag_seconds", seconds, group=group, rank=rank)
    out.family(
        "commcanary_group_seconds_since_progress",
        "gauge",
        "Seconds since a member of the group last completed a call of it.",
    )
    for group, seen in sorted(job.progressed.items()):
        out.sample("commcanary_group_seconds_since_progress", max(now - seen, 0.0), group=group)
    waiting = waiting_ranks(job)
    out.family("commcanary_group_waiting_ranks", "gauge", "Live members waiting inside a call of the group.")
    for group in sorted(job.progressed):
        out.sample("commcanary_group_waiting_ranks", len(waiting.get(group, ())), group=group)
    last = job.finished_steps[-1] if job.finished_steps else None
    out.family("commcanary_step", "gauge", "The newest step every live process has finished.")
    out.family("commcanary_step_last_rank", "gauge", "The rank that arrived last in that step.")
    out.family(
        "commcanary_step_lateness_seconds", "gauge", "How much later than the latest other member it arrived."
    )
    if last is not None:
        out.sample("commcanary_step", last["step"])
        out.sample("commcanary_step_last_rank", _rank_number(last["last_rank"]))
        out.sample("commcanary_step_lateness_seconds", last["lateness_s"])
    out.family(
        "commcanary_rank_late_steps_total", "counter", "Steps in which the rank was a material straggler."
    )
    for rank, n in sorted(job.late_total.items()):
        out.sample("commcanary_rank_late_steps_total", n, rank=rank)
    repeated = set(job.repeated())
    out.family(
        "commcanary_rank_repeated_straggler", "gauge", "1 when the rank was late in several recent steps."
    )
    for rank in sorted(job.late_total):
        out.sample("commcanary_rank_repeated_straggler", 1 if rank in repeated else 0, rank=rank)
    states = process_states(job)
    out.family("commcanary_processes", "gauge", "Recording processes by state.")
    for state in ("running", "waiting", "stopped", "ended", "dead"):
        out.sample("commcanary_processes", states.get(state, 0), state=state)
    out.family("commcanary_hang_alarms_total", "counter", "Hang alarms raised.")
    out.sample("commcanary_hang_alarms_total", agent.get("alarms", 0))
    out.family(
        "commcanary_stalls_total", "counter", "Alarms after which the job went on (stalls, not hangs)."
    )
    out.sample("commcanary_stalls_total", agent.get("stalls", 0))
    out.family("commcanary_agent_lines_total", "counter", "Shard lines read.")
    out.sample("commcanary_agent_lines_total", job.lines)
    out.family("commcanary_agent_lines_skipped_total", "counter", "Shard lines skipped, by reason.")
    for reason in ("corrupt", "torn", "other_session"):
        out.sample("commcanary_agent_lines_skipped_total", job.skipped.get(reason, 0), reason=reason)
    out.family(
        "commcanary_agent_instances_dropped_total", "counter", "Instances dropped waiting for members."
    )
    out.sample("commcanary_agent_instances_dropped_total", job.dropped)
    return "\n".join(out.lines) + "\n"


def _rank_number(rank: str) -> float:
    try:
        return float(int(rank))
    except ValueError:
        return float("nan")


def lag_collectives(job: LiveJob) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for group, members in job.members.items():
        counts = {r: job.completed.get((group, r), 0) for r in members}
        top = max(counts.values(), default=0)
        for rank, n in counts.items():
            out[(group, rank)] = top - n
    return out


def waiting_ranks(job: LiveJob) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for proc in job.processes.values():
        if proc.ended or proc.dead:
            continue
        for group in proc.waiting_since:
            out.setdefault(group, []).append(proc.rank)
    return {g: sorted(r) for g, r in out.items()}


def process_states(job: LiveJob) -> dict[str, int]:
    counts: dict[str, int] = {}
    for proc in job.processes.values():
        state = (
            "dead"
            if proc.dead and not proc.ended
            else "ended"
            if proc.ended
            else "stopped"
            if proc.stopped
            else "waiting"
            if proc.waiting_since
            else "running"
        )
        counts[state] = counts.get(state, 0) + 1
    return counts


def status(job: LiveJob, now: float, agent: dict[str, Any]) -> dict[str, Any]:
    """The JSON status: the job, per process, per group, stragglers, alarms."""
    lags = lag_collectives(job)
    waiting = waiting_ranks(job)
    return {
        "format": "commcanary.agent-status.v1",
        "session": job.session,
        "processes": [
            {
                "rank": p.rank,
                "pid": p.pid,
                "host": p.host,
                "state": "dead"
                if p.dead and not p.ended
                else "ended"
                if p.ended
                else "stopped"
                if p.stopped
                else "running",
                "calls": p.calls,
                "last_call": p.last_call,
                "waiting_in": sorted(p.waiting_since),
                "counters": p.counters,
            }
            for p in sorted(job.processes.values(), key=lambda p: (p.rank, p.pid))
        ],
        "groups": [
            {
                "group": group,
                "members": sorted(members, key=lambda r: (len(r), r)),
                "seconds_since_progress": max(now - job.progressed.get(group, now), 0.0),
                "waiting_ranks": waiting.get(group, []),
                "lag_collectives": {r: lags.get((group, r), 0) for r in sorted(members)},
            }
            for group, members in sorted(job.members.items())
        ],
        "collectives": [
            {"group": g, "op": o, "count": n, "bytes": job.bytes_total.get((g, o), 0)}
            for (g, o), n in sorted(job.collectives.items())
        ],
        "stragglers": {
            "steps": list(job.finished_steps)[-16:],
            "late_steps_by_rank": dict(sorted(job.late_total.items())),
            "repeated": job.repeated(),
        },
        "skipped_lines": dict(sorted(job.skipped.items())),
        "alarms": agent.get("events", []),
    }
