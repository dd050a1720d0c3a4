"""Importers: other tools' traces as commcanary traces.

Parsing happens in Rust, from the file's bytes into columns; the result is
the same :class:`commcanary.Trace` that :func:`commcanary.load_trace` returns,
ready to compile, inspect as numpy arrays, or write.

* :func:`import_kineto` — one rank's PyTorch profiler (Kineto) trace.
"""

from __future__ import annotations

from commcanary.importers.kineto import KinetoImport, import_kineto

__all__ = ["KinetoImport", "import_kineto"]
