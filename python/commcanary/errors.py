"""The exception hierarchy of commcanary.

Every error the package raises on purpose derives from :class:`CommCanaryError`;
the classes are defined by the Rust extension so core errors arrive typed.
The command line maps all of them to exit status 3 and prints
``commcanary: <message>`` on stderr.

* :class:`InputError` — an input is missing, unreadable, not JSON, over a
  resource limit, or invalid (the message names the file and the field);
* :class:`BudgetError` — compilation cannot meet a requested fidelity bound;
* :class:`OutputError` — an artifact could not be written.
"""

from __future__ import annotations

from commcanary._core import BudgetError, CommCanaryError, InputError, OutputError

__all__ = ["BudgetError", "CommCanaryError", "InputError", "OutputError"]
