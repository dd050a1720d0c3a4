"""The exception hierarchy of commcanary.

Every error the package raises on purpose derives from :class:`CommCanaryError`.
The classes are defined here, in plain Python, and the Rust extension raises
these very classes, so every error pickles by reference and crosses a process
pool (``concurrent.futures.ProcessPoolExecutor``, ``multiprocessing``).

* :class:`InputError` — an input is missing, unreadable, not JSON, over a
  resource limit, of the wrong kind, or invalid (the message names the file
  and the field);
* :class:`OptionError` — an argument value is out of range; it names the
  argument as the Python API spells it (``timing_sample_limit``) and the
  command line renames it to the flag as typed (``--timing-sample-limit``);
* :class:`BudgetError` — compilation cannot meet a requested fidelity bound;
* :class:`OutputError` — an artifact could not be written;
* :class:`InternalError` — a bug (for example a worker thread panicked); the
  command line exits with status 70 and asks for a report.

The command line maps input, budget and output errors to exit status 3,
option errors to 2 (a usage error), and prints ``commcanary: <message>``.
"""

from __future__ import annotations

__all__ = [
    "BudgetError",
    "ClusterError",
    "CommCanaryError",
    "InputError",
    "InternalError",
    "OptionError",
    "OutputError",
]


class CommCanaryError(Exception):
    """Base class of every commcanary error."""


class InputError(CommCanaryError):
    """An input is missing, unreadable, not JSON, over a resource limit, or invalid."""


class OptionError(InputError):
    """An argument value is out of range.

    ``option`` is the argument's name in the Python API (``timing_sample_limit``)
    and ``rule`` what it must satisfy (``must be at least 2``); ``str(error)`` is
    ``"{option} {rule}"``.
    """

    def __init__(self, option: str, rule: str) -> None:
        super().__init__(f"{option} {rule}")
        self.option = option
        self.rule = rule

    def __reduce__(self) -> tuple[type[OptionError], tuple[str, str]]:
        return (type(self), (self.option, self.rule))


class OutputError(CommCanaryError):
    """An artifact could not be written (missing directory, symlink, I/O failure)."""


class BudgetError(CommCanaryError):
    """Compilation cannot meet a requested fidelity guarantee (error budget, lossless timing)."""


class ClusterError(CommCanaryError):
    """A Dask cluster could not do the work: an unreachable scheduler, no
    worker, a worker without this ``commcanary``, a cluster lost mid-run."""


class InternalError(CommCanaryError):
    """A bug in commcanary (a worker panicked); the message says where. Please report it."""
