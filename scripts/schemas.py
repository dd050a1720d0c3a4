"""Writes the parts of the package's JSON Schemas that the core generates.

Today that is ``report.schema.json``'s ``$defs.simulated_backend``: one
property per replay setting, from the core's settings table. Run it after
adding or changing a setting (``make schemas``); ``--check`` exits 1 when
the file on disk is out of date, which a test asserts too.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from commcanary import _core

REPORT_SCHEMA = (
    Path(__file__).resolve().parent.parent / "python" / "commcanary" / "schemas" / "report.schema.json"
)


def generated() -> str:
    """The report schema with its simulated backend as the core writes it."""
    schema = json.loads(REPORT_SCHEMA.read_text(encoding="utf-8"))
    schema["$defs"]["simulated_backend"] = json.loads(_core.SIMULATED_BACKEND_SCHEMA_JSON)
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    text = generated()
    if "--check" in argv:
        if REPORT_SCHEMA.read_text(encoding="utf-8") != text:
            print(f"{REPORT_SCHEMA} is out of date: run `make schemas`", file=sys.stderr)
            return 1
        return 0
    REPORT_SCHEMA.write_text(text, encoding="utf-8")
    print(f"wrote {REPORT_SCHEMA}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
