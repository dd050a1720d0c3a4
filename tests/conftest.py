"""Shared test configuration: paths to data, and hypothesis profiles.

Profiles (``HYPOTHESIS_PROFILE``): ``dev`` (default, quick), ``ci`` (more
examples, derandomized so a run is reproducible).
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "traces"
DATA = Path(__file__).resolve().parent / "data"
GOLDEN = Path(__file__).resolve().parent / "golden"
#: Real captured fixtures, gzipped (tests/data/fixtures/README.md).
FIXTURES = DATA / "fixtures"


def fixture_json(path: Path) -> Any:
    """A gzipped JSON file of ``FIXTURES`` (ground truths, op logs, PARAM traces)."""
    return json.loads(gzip.decompress(path.read_bytes()))


settings.register_profile("dev", max_examples=60, deadline=None)
settings.register_profile(
    "ci", max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture(autouse=True, scope="session")
def _private_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> None:
    """CLI imports cache parsed profiles; tests keep theirs out of the home."""
    os.environ["COMMCANARY_CACHE_DIR"] = str(tmp_path_factory.mktemp("commcanary-cache"))


@pytest.fixture
def demo_trace() -> Path:
    return EXAMPLES / "llama70b_tp8_trace.json"


@pytest.fixture
def long_trace() -> Path:
    return EXAMPLES / "llama70b_tp8_trace_long.json"
