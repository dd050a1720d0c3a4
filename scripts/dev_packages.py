"""Prints the packages a development environment needs, one per line, from
pyproject.toml alone: the build backend, the core dependencies and the
``test`` extra, plus any extras named on the command line (``torch``,
``fuzz``). The Makefile and scripts/test.sh install from it, so the list
lives in one place.

    python scripts/dev_packages.py [EXTRA...]
"""

from __future__ import annotations

import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    sys.exit("scripts/dev_packages.py needs Python 3.11 or newer (tomllib) to read pyproject.toml")

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def packages(extras: list[str]) -> list[str]:
    doc = tomllib.loads(PYPROJECT.read_text())
    optional = doc["project"]["optional-dependencies"]
    unknown = [e for e in extras if e not in optional]
    if unknown:
        sys.exit(f"pyproject.toml has no extra {', '.join(unknown)} (it has {', '.join(sorted(optional))})")
    out = [*doc["build-system"]["requires"], *doc["project"]["dependencies"], *optional["test"]]
    for extra in extras:
        out += optional[extra]
    return list(dict.fromkeys(out))


if __name__ == "__main__":
    print("\n".join(packages(sys.argv[1:])))
