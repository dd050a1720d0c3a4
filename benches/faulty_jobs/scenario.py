"""The seeded scenario space: what each faulty job looks like and which fault it carries.

A scenario is a plain JSON-able dict (``scenario.json`` in the run directory), drawn by
:func:`draw_scenarios` from ``random.Random(f"{seed}:{index}")``, so the same seed gives the
same scenarios whatever N is, and scenario i of seed S never depends on scenario i - 1.
Fault kinds are stratified: every block of ``len(FAULT_KINDS)`` scenarios holds each kind once
(in a seeded order), so a small campaign still covers every kind.

This module also holds each shape's *iteration program*: the ordered communication sites a
rank passes through in one iteration (:func:`iteration_program`). The job
(``faulty_jobs.job``) follows it call by call and logs a ``program_mismatch`` event if it ever
departs from it; the scenario draw uses it to place faults only where they are meaningful
(for example, a rank only skips a collective whose next call on that rank is on another
process group: gloo pairs consecutive calls of one group by sequence number, so a skip followed
by a call on the same group would not hang but silently mis-pair or abort).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

SHAPES = ("ddp", "tp_pairs", "pp_dp", "mixed")

HANG_FAULTS = (
    "skipped_collective",
    "skipped_send",
    "skipped_recv",
    "desync_op",
    "desync_size",
    "desync_dtype",
    "desync_root",
    "killed",
    "frozen",
)
STRAGGLER_FAULTS = ("sleep_straggler", "compute_straggler")
FAULT_KINDS = ("none", *STRAGGLER_FAULTS, *HANG_FAULTS)

# What the diagnosis should say for each hang fault.
EXPECTED_CATEGORY = {
    "skipped_collective": "missed_collective",
    "skipped_send": "p2p_unmatched",
    "skipped_recv": "p2p_unmatched",
    "desync_op": "desync",
    "desync_size": "desync",
    "desync_dtype": "desync",
    "desync_root": "desync",
    "killed": "process_died",
    "frozen": "stalled_outside_communication",
}
EXPECTED_DESYNC_KIND = {
    "desync_op": "op",
    "desync_size": "size",
    "desync_dtype": "dtype",
    "desync_root": "root",
}

COLLECTIVE_OPS = ("all_reduce", "all_gather", "broadcast", "reduce_scatter")
P2P_OPS = ("send", "recv")


@dataclass(frozen=True)
class Site:
    """One communication site of an iteration, as one rank sees it.

    ``op`` is the torch.distributed call (``all_reduce``, ``all_gather`` = all_gather_into_tensor,
    ``broadcast``, ``reduce_scatter`` = reduce_scatter_tensor, ``send``, ``recv``) or, for calls a
    library issues (not the program), ``ddp_broadcast_buffers`` / ``ddp_allreduce_buckets``.
    ``numel`` is the element count of the tensor the rank passes (the input for all_gather and
    reduce_scatter). ``peer`` is the global rank of a p2p partner, ``src`` the global root of a
    broadcast. ``is_async`` marks isend/irecv (waited at once).
    """

    name: str
    op: str
    group: str
    numel: int
    dtype: str = "float32"
    explicit: bool = True
    peer: int | None = None
    src: int | None = None
    is_async: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "op": self.op,
            "group": self.group,
            "numel": self.numel,
            "dtype": self.dtype,
            "explicit": self.explicit,
            "peer": self.peer,
            "src": self.src,
            "is_async": self.is_async,
        }


# ---------------------------------------------------------------------------- groups


def group_ranks(scn: dict[str, Any]) -> dict[str, list[int]]:
    """Every process group of the scenario's job: name -> global ranks (``world`` is the default group).

    Every rank creates every group, in this order (``dist.new_group`` is collective over the world).
    """
    world: int = scn["world"]
    shape: str = scn["shape"]
    sp: dict[str, Any] = scn["shape_params"]
    groups: dict[str, list[int]] = {"world": list(range(world))}
    if shape == "ddp":
        groups["metrics"] = list(range(world))
    elif shape == "tp_pairs":
        for i in range(world // 2):
            groups[f"pair{i}"] = [2 * i, 2 * i + 1]
    elif shape == "pp_dp":
        stages, replicas = sp["stages"], sp["replicas"]
        for d in range(replicas):
            groups[f"pp{d}"] = [d * stages + s for s in range(stages)]
        if replicas >= 2:
            for s in range(stages):
                groups[f"dp{s}"] = [d * stages + s for d in range(replicas)]
    elif shape == "mixed":
        groups["low"] = list(range(world - 1))
        groups["high"] = list(range(1, world))
        if world >= 4:
            groups["evens"] = list(range(0, world, 2))
    return groups


def pp_coords(scn: dict[str, Any], rank: int) -> tuple[int, int]:
    """(stage, replica) of a rank in a pp_dp job: rank = replica * stages + stage."""
    stages: int = scn["shape_params"]["stages"]
    return rank % stages, rank // stages


# ---------------------------------------------------------------------------- iteration programs


def iteration_program(scn: dict[str, Any], rank: int, iteration: int) -> list[Site]:
    """The communication sites ``rank`` passes through in ``iteration``, in order (no fault applied)."""
    shape: str = scn["shape"]
    world: int = scn["world"]
    sp: dict[str, Any] = scn["shape_params"]
    sites: list[Site] = []
    if shape == "ddp":
        # issued by DistributedDataParallel itself (sizes depend on the model: numel 0 here)
        sites.append(Site("ddp_forward", "ddp_broadcast_buffers", "world", 0, explicit=False))
        sites.append(Site("ddp_backward", "ddp_allreduce_buckets", "world", 0, explicit=False))
        sites.append(Site("grad_norm", "all_reduce", "metrics", 1))
        sites.append(Site("lr_bcast", "broadcast", "world", 2, src=0))
        if (iteration + 1) % sp["metrics_every"] == 0:
            sites.append(Site("metrics", "all_reduce", "metrics", 4))
    elif shape == "tp_pairs":
        pair = f"pair{rank // 2}"
        b, h = sp["batch"], sp["hidden"]
        sites.append(Site("tokens_bcast", "broadcast", "world", b, dtype="int64", src=0))
        for layer in range(sp["layers"]):
            sites.append(Site(f"l{layer}_gather", "all_gather", pair, b * h // 2))
            sites.append(Site(f"l{layer}_reduce", "all_reduce", pair, b * h))
            if layer == 0:
                sites.append(Site("aux_allreduce", "all_reduce", "world", 8))
        sites.append(Site("loss_allreduce", "all_reduce", "world", 1))
    elif shape == "pp_dp":
        stages = sp["stages"]
        stage, replica = pp_coords(scn, rank)
        pp = f"pp{replica}"
        act = sp["micro_batch"] * sp["hidden"]
        sites.append(Site("pp_bcast", "broadcast", pp, 2, src=replica * stages))
        for j in range(sp["micro_batches"]):
            if stage > 0:
                sites.append(Site(f"fwd_recv{j}", "recv", pp, act, peer=rank - 1))
            if stage < stages - 1:
                sites.append(Site(f"fwd_send{j}", "send", pp, act, peer=rank + 1))
        for j in reversed(range(sp["micro_batches"])):
            if stage < stages - 1:
                sites.append(Site(f"bwd_recv{j}", "recv", pp, act, peer=rank + 1, is_async=True))
            if stage > 0:
                sites.append(Site(f"bwd_send{j}", "send", pp, act, peer=rank - 1, is_async=True))
        sites.append(Site("grad_norm", "all_reduce", "world", 1))
        if sp["replicas"] >= 2:
            numel = 4 * sp["hidden"] ** 2 + 3 * sp["hidden"]  # Linear(h, 2h) + Linear(2h, h)
            if stage == stages - 1:
                numel += sp["hidden"] * 10 + 10  # the head
            sites.append(Site("dp_allreduce", "all_reduce", f"dp{stage}", numel))
    elif shape == "mixed":
        n = sp["numel"]
        sites.append(Site("world_ar", "all_reduce", "world", n))
        if rank <= world - 2:
            sites.append(Site("low_ag", "all_gather", "low", n // 2))
        if rank >= 1:
            sites.append(Site("high_bcast", "broadcast", "high", n // 4, src=1))
        sites.append(Site("world_rs", "reduce_scatter", "world", world * (n // 8)))
        if world >= 4 and rank % 2 == 0:
            sites.append(Site("evens_ar", "all_reduce", "evens", n // 2))
        sites.append(Site("loss_ar", "all_reduce", "world", 1))
    else:
        raise ValueError(f"unknown shape {shape}")
    return sites


def next_site(scn: dict[str, Any], rank: int, iteration: int, name: str) -> Site | None:
    """The site ``rank`` reaches after ``name`` in ``iteration`` (looking into the next iteration)."""
    prog = iteration_program(scn, rank, iteration)
    names = [s.name for s in prog]
    i = names.index(name)
    if i + 1 < len(prog):
        return prog[i + 1]
    if iteration + 1 < scn["iterations"]:
        return iteration_program(scn, rank, iteration + 1)[0]
    return None


ELEMENT_SIZE = {"float16": 2, "int32": 4, "float32": 4, "float64": 8, "int64": 8}


def desync_variants(kind: str, site: Site, rank: int) -> tuple[str, ...]:
    """How ``rank``'s call at ``site`` may differ for a size or dtype desync that gloo notices.

    Size: ``double``, ``plus_one`` or ``half`` the elements; dtype: one of another element size (a
    same-size dtype, int32 for float32, is reduced silently as the wrong type and never fails).
    Which rank's gloo sees a mismatch, and whether it aborts (``Received data size doesn't match
    expected size``) or waits for the timeout, depends on the direction and the algorithm. A
    broadcast receiver only checks that the data fits: a non-root rank must post a *smaller*
    buffer, and a root must send *more*, or the call succeeds silently (the bytes the receiver
    gets are simply wrong), which is no fault to diagnose.
    """
    bcast = site.op == "broadcast"
    if kind == "desync_size":
        if bcast:
            if rank == site.src:
                return ("double", "plus_one")
            return ("half",) if site.numel >= 2 else ()
        return ("double", "plus_one", "half") if site.numel >= 2 else ("double", "plus_one")
    own = ELEMENT_SIZE[site.dtype]
    dtypes = ("float16", "int32", "float32", "float64", "int64")
    if bcast and rank == site.src:
        return tuple(d for d in dtypes if ELEMENT_SIZE[d] > own)
    if bcast:
        return tuple(d for d in dtypes if ELEMENT_SIZE[d] < own)
    return tuple(d for d in dtypes if ELEMENT_SIZE[d] != own)


def fault_sites(scn: dict[str, Any], kind: str, rank: int, iteration: int) -> list[Site]:
    """The sites where ``kind`` can be injected on ``rank`` at ``iteration``."""
    prog = iteration_program(scn, rank, iteration)
    out: list[Site] = []
    for s in prog:
        if not s.explicit:
            continue
        if kind == "skipped_collective":
            nxt = next_site(scn, rank, iteration, s.name)
            if s.op in COLLECTIVE_OPS and nxt is not None and nxt.group != s.group:
                out.append(s)
        elif kind == "skipped_send":
            if s.op == "send":
                out.append(s)
        elif kind == "skipped_recv":
            if s.op == "recv":
                out.append(s)
        elif kind == "desync_op":
            if s.op == "all_reduce" and len(group_ranks(scn)[s.group]) >= 2:
                out.append(s)
        elif kind in ("desync_size", "desync_dtype"):
            if (
                s.op in COLLECTIVE_OPS
                and len(group_ranks(scn)[s.group]) >= 2
                and desync_variants(kind, s, rank)
            ):
                out.append(s)
        elif kind == "desync_root" and s.op == "broadcast" and len(group_ranks(scn)[s.group]) >= 2:
            out.append(s)
    return out


# ---------------------------------------------------------------------------- drawing


def _pp_shapes(world: int) -> list[tuple[int, int]]:
    """(stages, replicas) with stages >= 2 and stages * replicas == world."""
    return [(s, world // s) for s in range(2, world + 1) if world % s == 0]


def _draw_shape(rng: random.Random, kind: str) -> tuple[str, int, dict[str, Any]]:
    shape = "pp_dp" if kind in ("skipped_send", "skipped_recv") else rng.choice(SHAPES)
    if shape == "ddp":
        world = rng.randint(2, 8)
        if rng.random() < 0.5:
            sp: dict[str, Any] = {
                "model": "conv",
                "channels": [rng.choice((8, 12, 16)), rng.choice((16, 24))],
                "image": 16,
                "batch": rng.choice((8, 12, 16)),
            }
        else:
            sp = {
                "model": "mlp",
                "in_dim": rng.choice((64, 96)),
                "hidden": rng.choice((128, 192, 256)),
                "batch": rng.choice((32, 48, 64)),
            }
        sp.update(bucket_cap_mb=rng.choice((0.01, 0.025, 0.1)), metrics_every=rng.choice((3, 4)))
    elif shape == "tp_pairs":
        world = rng.choice((2, 4, 6, 8))
        sp = {"hidden": rng.choice((64, 96, 128)), "batch": rng.choice((8, 16)), "layers": 2}
    elif shape == "pp_dp":
        world = rng.randint(2, 8)
        stages, replicas = rng.choice(_pp_shapes(world))
        hidden = rng.choice((64, 96, 128))
        sp = {
            "stages": stages,
            "replicas": replicas,
            "hidden": hidden,
            "micro_batch": rng.choice((8, 16)),
            "micro_batches": rng.choice((1, 2)),
            # tags of the stage-to-stage transfers: all 0 (as torch.distributed.pipelining does),
            # or one per (iteration, micro-batch, direction)
            "p2p_tags": rng.choice(("zero", "per_iteration")),
        }
    else:
        world = rng.randint(3, 8)
        sp = {"numel": rng.choice((256, 512, 1024))}
    sp["compute_reps"] = rng.randint(2, 5)  # extra matmuls per iteration (the "model" compute)
    return shape, world, sp


def draw_scenario(seed: int, index: int, kind: str, markers: bool | None = None) -> dict[str, Any]:
    """Scenario ``index`` of campaign ``seed``, carrying fault ``kind`` (markers on or off as given,
    else drawn)."""
    rng = random.Random(f"commcanary-faulty-jobs:{seed}:{index}")
    want_markers = markers
    for _attempt in range(200):
        shape, world, sp = _draw_shape(rng, kind)
        iterations = rng.randint(8, 14)
        markers = rng.random() < 0.5 if want_markers is None else want_markers
        if markers:
            profiler: dict[str, Any] = {
                "mode": "schedule",
                "window": rng.randint(2, 4),
                "skip_first": rng.choice((0, 0, 1)),
            }
        else:
            profiler = {"mode": rng.choice(("windows", "windows", "single")), "window": rng.randint(2, 4)}
        timeout_s = rng.choice((4.0, 5.0, 6.0))
        scn: dict[str, Any] = {
            "format": "commcanary-bench.faulty-job-scenario.v1",
            "seed": seed,
            "index": index,
            "shape": shape,
            "world": world,
            "shape_params": sp,
            "iterations": iterations,
            "markers": markers,
            "profiler": profiler,
            "timeout_s": timeout_s,
            "watchdog_s": round(timeout_s / 2, 2),
            "fr_buffer_size": 2000,
            "torch_seed": rng.randint(0, 2**31 - 1),
        }
        fault = _draw_fault(rng, scn, kind)
        if fault is None:
            continue
        scn["fault"] = fault
        scn["name"] = f"s{index:03d}-{shape}-w{world}-{kind}"
        return scn
    raise RuntimeError(f"no feasible scenario for fault {kind} (seed {seed}, index {index})")


def _draw_fault(rng: random.Random, scn: dict[str, Any], kind: str) -> dict[str, Any] | None:
    world: int = scn["world"]
    iters: int = scn["iterations"]
    if kind == "none":
        return {"kind": "none"}
    if kind in STRAGGLER_FAULTS:
        count = rng.randint(1, 3)
        its = sorted(rng.sample(range(1, iters), count))
        return {
            "kind": kind,
            "rank": rng.randrange(world),
            "iterations": its,
            "delay_ms": [rng.choice((20, 40, 60, 90, 120, 180)) for _ in its],
        }
    iteration = rng.randint(2, iters - 3)
    if kind in ("killed", "frozen"):
        f: dict[str, Any] = {"kind": kind, "rank": rng.randrange(world), "iteration": iteration}
        if kind == "frozen":
            f["stop_s"] = round(scn["timeout_s"] + rng.uniform(2.0, 4.0), 2)
        else:
            f["at_fraction"] = round(rng.uniform(0.2, 0.8), 2)
        return f
    candidates = [(r, s) for r in range(world) for s in fault_sites(scn, kind, r, iteration)]
    if not candidates:
        return None
    rank, site = rng.choice(candidates)
    f = {"kind": kind, "rank": rank, "iteration": iteration, "site": site.name, "site_op": site.op}
    if kind == "desync_op":
        f["variant"] = rng.choice(("all_gather", "broadcast"))
    elif kind in ("desync_size", "desync_dtype"):
        f["variant"] = rng.choice(desync_variants(kind, site, rank))
    elif kind == "desync_root":
        members = group_ranks(scn)[site.group]
        f["variant"] = "src"
        f["bad_src"] = rng.choice([m for m in members if m != site.src])
        f["true_src"] = site.src
    return f


def draw_scenarios(seed: int, n: int) -> list[dict[str, Any]]:
    """``n`` scenarios of campaign ``seed``.

    Stratified per block of ``len(FAULT_KINDS)`` scenarios: every fault kind once, in a seeded
    order, and markers on for a seeded half of the block (so a small campaign still covers every
    kind, and both captures).
    """
    out: list[dict[str, Any]] = []
    kinds: list[str] = []
    markers: list[bool] = []
    size = len(FAULT_KINDS)
    for i in range(n):
        if i % size == 0:
            rng = random.Random(f"commcanary-faulty-jobs:{seed}:block:{i // size}")
            kinds = list(FAULT_KINDS)
            rng.shuffle(kinds)
            markers = [j % 2 == 0 for j in range(size)]
            rng.shuffle(markers)
        out.append(draw_scenario(seed, i, kinds[i % size], markers[i % size]))
    return out


def profiler_step_of(scn: dict[str, Any], iteration: int) -> int | None:
    """The ``ProfilerStep#N`` number iteration ``iteration`` runs under, when markers are on.

    The job calls ``prof.step()`` once after every iteration, so iteration k runs as step k; the
    job also logs the profiler's own ``step_num`` at each iteration start, which the ground
    truth uses (this function is only the plan).
    """
    return iteration if scn["markers"] else None
