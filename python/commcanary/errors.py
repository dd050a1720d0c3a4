"""The exception hierarchy of commcanary.

Every error the package raises on purpose derives from :class:`CommCanaryError`.
The command line maps all of them to exit status 3 and prints
``commcanary: <message>`` on stderr.
"""

from __future__ import annotations

from commcanary._core import BudgetError, CommCanaryError, InputError

__all__ = ["BudgetError", "CommCanaryError", "InputError", "OutputError"]


class OutputError(CommCanaryError):
    """An artifact could not be written (missing directory, symlink, permissions)."""
