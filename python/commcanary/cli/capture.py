"""``commcanary capture``: run a program and merge what it recorded."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Annotated, Any

import typer

from commcanary import formats
from commcanary.cli import EXIT_CHILD, check_paths, errors_exit, fail

__all__ = ["FLIGHT_RECORDER_ENTRIES", "LIVE_FLIGHT_RECORDER_ENTRIES", "capture_command"]

#: Entries of the Flight Recorder ring ``capture`` asks torch to keep.
FLIGHT_RECORDER_ENTRIES = 2000
#: ... with ``--shards``, read every second: the last ones are what a hang's
#: evidence needs, and a read costs what the ring holds.
LIVE_FLIGHT_RECORDER_ENTRIES = 256

Output = Annotated[
    Path,
    typer.Option(
        "--output", "-o", metavar="TRACE", help="Where to write the merged commcanary.trace.v1 trace."
    ),
]
WorkloadName = Annotated[str, typer.Option("--workload-name", help="workload.name of the captured trace.")]
AllowEmpty = Annotated[
    bool, typer.Option("--allow-empty", help="Write an empty trace when the program recorded nothing.")
]
Preserve = Annotated[
    Path | None,
    typer.Option(
        "--preserve-on-failure",
        metavar="DIR",
        help="When the program fails, keep what it recorded: DIR (which must not exist) gets its shards and "
        "capture_failure.json.",
    ),
]
EvidenceDir = Annotated[
    Path | None,
    typer.Option(
        "--evidence",
        metavar="DIR",
        help="Leave each process's hang evidence in DIR (new or empty) for `commcanary diagnose hang DIR`: "
        "Flight Recorder dumps while a collective is stuck and after an error (gloo never writes them by "
        "itself), every thread's stack, exception texts.",
    ),
]
HangAfter = Annotated[
    float,
    typer.Option(
        "--hang-after",
        metavar="SECONDS",
        min=1.0,
        help="With --evidence: how long a collective may stay incomplete, with no other progress, "
        "before the stacks and a dump are written (set it below the job's collective timeout).",
    ),
]
ShardsDir = Annotated[
    Path | None,
    typer.Option(
        "--shards",
        metavar="DIR",
        help="Keep the processes' shards in DIR (new or empty) instead of a temporary directory, for "
        "`commcanary agent --watch DIR` while the job runs; each process flushes what it recorded at "
        "least every second, and SIGUSR2 asks it for its stacks and Flight Recorder dump.",
    ),
]
Command = Annotated[
    list[str] | None,
    typer.Argument(metavar="-- CMD...", help="The program to run (argv, no shell) after --."),
]


# Put on the children's path: records torch.distributed calls once the
# program imports torch.distributed; nothing without torch.
_HOOK = """
try:
    from commcanary.capture.torch import install_when_imported
    install_when_imported()
except Exception:  # never break the program being captured
    pass
"""


#: The most bytes of shards a failed capture preserves (a disk guard).
_MAX_PRESERVED_BYTES = 256 << 20


def _preserve(work: Path, target: Path, session: str, workload: str, code: int) -> None:
    """Copies the shards of a failed capture to ``target`` (read-only), with
    a ``capture_failure.json`` describing them; never the command line or
    the environment."""
    import datetime
    import hashlib

    from commcanary import _core
    from commcanary.fidelity import canonical

    shards_dir = target / "shards"
    shards_dir.mkdir(parents=True, mode=0o700)
    kept: list[dict[str, object]] = []
    total = 0
    for shard in sorted(work.glob("*.shard.jsonl")):
        if total + shard.stat().st_size > _MAX_PRESERVED_BYTES or len(shard.name) > 255:
            continue
        data = shard.read_bytes()[: _MAX_PRESERVED_BYTES - total]
        total += len(data)
        copy = shards_dir / shard.name
        copy.write_bytes(data)
        copy.chmod(0o400)
        kept.append({"name": shard.name, "size_bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    report = {
        "format": formats.CAPTURE_FAILURE_FORMAT,
        "created_at": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "workload": {"name": workload},
        "capture_session_id": session,
        "child_returncode": code,
        "partial_shards": kept,
    }
    _core.write_atomic(str(target / "capture_failure.json"), canonical(report))
    (target / "capture_failure.json").chmod(0o400)
    typer.echo(f"preserved failed capture: {target}", err=True)


def _report_evidence(directory: Path) -> None:
    """One line: what the processes left, and how to read it."""
    files = sorted(p for p in directory.rglob("*") if p.is_file() and not p.name.startswith("."))
    if not files:
        typer.echo(
            f"evidence: {directory}: nothing written (no collective stalled, no process failed)", err=True
        )
        return
    typer.echo(
        f"evidence: {directory}: {len(files)} file(s); read it with: commcanary diagnose hang {directory}",
        err=True,
    )


def _run_child(command: list[str], env: dict[str, str]) -> int:
    """Runs the child; Ctrl-C is forwarded to it, and its exit status returned."""
    try:
        child = subprocess.Popen(command, env=env)
    except OSError as exc:
        fail(f"could not run capture command {command[0]!r}: {exc}")
    while True:
        try:
            return child.wait()
        except KeyboardInterrupt:
            child.send_signal(signal.SIGINT)


def _recover_steps(document: dict[str, Any]) -> None:
    """A program that marks no step (no ``torch.profiler`` ``step()``, no
    ``commcanary.capture.step``) gets the steps recovered from its ranks'
    collective sequences, as ``commcanary steps`` recovers them;
    ``workload.capture_steps`` says so (analyses recover them again rather
    than read them as markers)."""
    from commcanary import _core
    from commcanary.fidelity import canonical

    events: list[dict[str, Any]] = document["events"]
    if any("step" in e for e in events):
        return
    try:
        steps = _core.recover_trace_steps(canonical(document))
    except Exception:  # a capture the recovery cannot read (one process): no steps
        return
    if steps is None:
        return
    for event, step in zip(events, steps, strict=True):
        if step >= 0:
            event["step"] = step
    workload: dict[str, Any] = document["workload"]
    workload["capture_steps"] = "recovered"
    workload["capture_steps_recovered"] = len({s for s in steps if s >= 0})


def capture_command(
    ctx: typer.Context,
    output: Output,
    command: Command = None,
    workload_name: WorkloadName = "instrumented-workload",
    allow_empty: AllowEmpty = False,
    preserve_on_failure: Preserve = None,
    evidence: EvidenceDir = None,
    hang_after: HangAfter = 60.0,
    shards_dir: ShardsDir = None,
) -> None:
    """Run a program with capture enabled and merge the collectives it recorded into one trace.

    An unmodified torch.distributed program is recorded as it runs: the collectives and send/recv it
    calls from Python, and, read from each process's Flight Recorder ring (TORCH_FR_BUFFER_SIZE, set to
    2000 unless you set it), the collectives torch issues itself, such as DDP's gradient buckets and
    FSDP's all_gathers; each is recorded once. Steps come from torch.profiler's step().
    """
    with errors_exit(ctx):
        from commcanary import _core
        from commcanary.capture.merge import merge_shards
        from commcanary.fidelity import canonical

        if not command:
            fail("capture requires a command after --")
        if preserve_on_failure is not None and (
            preserve_on_failure.exists() or preserve_on_failure.is_symlink()
        ):
            fail(f"--preserve-on-failure {preserve_on_failure} already exists")
        if evidence is not None and (
            evidence.is_symlink() or evidence.is_file() or (evidence.is_dir() and any(evidence.iterdir()))
        ):
            fail(
                f"--evidence {evidence}: must be a new or empty directory (evidence of two runs is not mixed)"
            )
        if shards_dir is not None and (
            shards_dir.is_symlink()
            or shards_dir.is_file()
            or (shards_dir.is_dir() and any(shards_dir.iterdir()))
        ):
            fail(
                f"--shards {shards_dir}: must be a new or empty directory (shards of two runs are not mixed)"
            )
        check_paths(ctx, inputs={}, outputs={"output": output})
        session = str(uuid.uuid4())
        live_env: dict[str, str] = {}
        if shards_dir is not None:
            shards_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            work = shards_dir.resolve()
            # Watched live: the ring read at least every second (a smaller
            # ring: a read costs what the ring holds), and a process the
            # launcher terminates leaves its evidence.
            live_env.update(COMMCANARY_EVIDENCE_ON_TERM="1", COMMCANARY_FLUSH_S="1")
        else:
            work = Path(tempfile.mkdtemp(prefix="commcanary-capture-"))
        try:
            env = dict(os.environ)
            hook = work / "hook"
            hook.mkdir()
            (hook / "sitecustomize.py").write_text(_HOOK)
            env["PYTHONPATH"] = os.pathsep.join([str(hook), *filter(None, [env.get("PYTHONPATH")])])
            env.update(
                COMMCANARY_TRACE_DIR=str(work),
                COMMCANARY_TRACE_OUT=str(work / "manual.trace.json"),
                COMMCANARY_WORKLOAD_NAME=workload_name,
                COMMCANARY_CAPTURE_SESSION_ID=session,
            )
            # The Flight Recorder ring is what shows the collectives torch
            # issues from C++ (DDP's buckets, FSDP): on unless the caller set it.
            env.setdefault(
                "TORCH_FR_BUFFER_SIZE",
                str(LIVE_FLIGHT_RECORDER_ENTRIES if live_env else FLIGHT_RECORDER_ENTRIES),
            )
            live_env = {k: v for k, v in live_env.items() if k not in os.environ}
            env.update(live_env)
            if evidence is not None:
                from commcanary.capture.evidence import parent_environment

                evidence.mkdir(parents=True, exist_ok=True, mode=0o700)
                env.update(parent_environment(evidence.resolve(), hang_after, env))
            code = _run_child(command, env)
            if evidence is not None:
                _report_evidence(evidence)
            if code != 0:
                if preserve_on_failure is not None:
                    _preserve(work, preserve_on_failure, session, workload_name, code)
                fail(f"workload exited with child code {code}", EXIT_CHILD)
            shards = sorted(work.glob("*.shard.jsonl"))
            merged = merge_shards(shards, session=session, workload_name=workload_name) if shards else None
            if merged is None or not merged.trace["events"]:
                if not allow_empty:
                    fail(
                        "target command did not write a trace; import commcanary.capture.record_collective "
                        "or pass --allow-empty (tried: every torch.distributed collective and send/recv called "
                        "from Python, and each process's Flight Recorder ring, which shows the collectives "
                        "torch issues itself, such as DDP's and FSDP's; none was seen: the program ran no "
                        "collective, is not a Python program that imports torch.distributed, or set "
                        "TORCH_FR_BUFFER_SIZE=0)"
                    )
                document: dict[str, Any] = {
                    "format": formats.TRACE_FORMAT,
                    "workload": {"name": workload_name},
                    "events": [],
                }
            else:
                document = merged.trace
                _recover_steps(document)
            _core.write_atomic(str(output), canonical(document))
            typer.echo(f"captured trace: {output}")
            if merged is not None and merged.partial:
                typer.echo(
                    f"partial: {merged.partial} collective(s) recorded by some member ranks only, "
                    f"not captured; first: {merged.first_partial}"
                )
        finally:
            if shards_dir is None:
                shutil.rmtree(work, ignore_errors=True)
            else:
                shutil.rmtree(work / "hook", ignore_errors=True)
