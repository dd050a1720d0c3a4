"""What the commands print and write: shared by every command module."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer


def fmt(x: float) -> str:
    """A number as Python's ``repr`` of the float: unrounded, shortest round trip."""
    return repr(float(x))


def write_json(path: Path, document: object) -> None:
    """Write ``document`` as compact, key-sorted ASCII JSON, atomically."""
    import json

    from commcanary.io import write_bytes_atomic

    data = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    write_bytes_atomic(path, data.encode())


def write_text(path: Path, text: str) -> None:
    """Write ``text`` as UTF-8, atomically."""
    from commcanary.io import write_bytes_atomic

    write_bytes_atomic(path, text.encode("utf-8"))


def echo_checks(title: str, result: Mapping[str, Any]) -> None:
    """``{title}: {status}`` then one ``- {check}: {status}`` line per check."""
    typer.echo(f"{title}: {result['status']}")
    for check in result["checks"]:
        typer.echo(f"- {check['name']}: {check['status']}")


def behavior_lines(result: Mapping[str, Any]) -> list[str]:
    """The lines summarising a behaviour verification document."""
    lines = [
        f"behavior verification: {result['status']}",
        f"- representation fidelity: {result['representation_fidelity_status']}",
        f"- source verified: {result['source_verified_status']}",
        f"- behavioral fidelity: {result['behavioral_fidelity_status']}",
        f"- configuration ranking: {result['configuration_ranking_status']}",
    ]
    lines += [f"- {row['name']}: {row['status']}" for row in result["configurations"]]
    lines.append(f"- ranking: {result['ranking']['status']}")
    return lines


@contextmanager
def progress(message: str) -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar with ``message`` on stderr while the block runs, only when
    stderr is a terminal; stdout is never touched.

    Yields ``update(done, total)`` for the work to call (``None`` off a
    terminal); until it is first called the bar shows activity without a total.
    """
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(file=sys.stderr), transient=True) as bar:
        task = bar.add_task(message, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update
