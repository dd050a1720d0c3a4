"""Shared test configuration: paths to data, hypothesis profiles and test tiers.

Profiles (``HYPOTHESIS_PROFILE``): ``dev`` (default, quick), ``ci`` (more
examples, derandomized so a run is reproducible).

Tiers (pytest markers, given here, not by each test): ``browser`` (a test
that uses a ``browser`` fixture: headless Chromium), ``torch`` (the
``*_torch.py`` files: real ``torch.distributed`` processes), ``dask`` (the
``*_dask.py`` files: a real Dask scheduler and workers), ``server`` (the
``test_serve_*.py`` files: the team server as a process, on SQLite and on a
real PostgreSQL), ``slow`` (those,
and the tests listed in ``SLOW``), ``conformance`` (the walkthrough
transcript). A tier whose tool is missing (Chromium and chromedriver, torch, distributed)
is skipped with the reason; with ``COMMCANARY_TEST_REQUIRE_TOOLS=1`` (what
``scripts/test.sh``, and so CI, sets) a missing tool stops the run before any
test, so no tier is skipped silently. ``make test-quick`` deselects
``browser``, ``torch`` and ``slow``.
"""

from __future__ import annotations

import glob
import gzip
import importlib.util
import json
import os
import shutil
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


#: Tiers: marker → what it needs.
TIERS = {
    "browser": "headless Chromium and chromedriver (the HTML pages in a real browser)",
    "torch": "torch (real torch.distributed processes; the `torch` extra)",
    "dask": "a real Dask scheduler and workers (the `dask` extra)",
    "server": "the team server as a process, on SQLite and a real PostgreSQL (the `server` extra, Debian's postgresql)",
    "slow": "runs for tens of seconds (real processes, real jobs)",
    "conformance": "the walkthrough transcript against the installed command line",
}
#: Tests slow enough to leave out of the quick loop, besides the torch files.
SLOW = (
    "test_calibration_recovers",
    "test_diagnosis_suite_slice",
    "test_a_live_hang_is_raised_from_the_plugins_logs",
)


def _missing_tools() -> dict[str, str]:
    """Tier → why it cannot run here."""
    missing = {}
    if not (shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")):
        missing["browser"] = "Chromium is not installed (Debian: apt-get install chromium chromium-driver)"
    elif not shutil.which("chromedriver"):
        missing["browser"] = "chromedriver is not installed (Debian: apt-get install chromium-driver)"
    if importlib.util.find_spec("distributed") is None:
        missing["dask"] = "distributed is not installed (pip install 'commcanary[dask]')"
    if importlib.util.find_spec("fastapi") is None or importlib.util.find_spec("sqlalchemy") is None:
        missing["server"] = "the server extra is not installed (pip install 'commcanary[server]')"
    elif not glob.glob("/usr/lib/postgresql/*/bin/initdb") and not shutil.which("initdb"):
        missing["server"] = "PostgreSQL is not installed (Debian: apt-get install postgresql)"
    if importlib.util.find_spec("torch") is None:
        missing["torch"] = "torch is not installed (pip install 'commcanary[torch]')"
    return missing


def pytest_configure(config: pytest.Config) -> None:
    for name, what in TIERS.items():
        config.addinivalue_line("markers", f"{name}: {what}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        name = item.path.name
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)
        if name.endswith("_dask.py"):
            item.add_marker(pytest.mark.dask)
            item.add_marker(pytest.mark.slow)
        if name.startswith("test_serve_"):
            item.add_marker(pytest.mark.server)
            item.add_marker(pytest.mark.slow)
        if name.endswith("_torch.py"):
            item.add_marker(pytest.mark.torch)
            item.add_marker(pytest.mark.slow)
        if any(name.startswith(s) or item.name.startswith(s) for s in SLOW):
            item.add_marker(pytest.mark.slow)
        if name == "test_conformance.py":
            item.add_marker(pytest.mark.conformance)
    missing = _missing_tools()
    if missing and os.environ.get("COMMCANARY_TEST_REQUIRE_TOOLS") == "1":
        reasons = "; ".join(f"{tier}: {missing[tier]}" for tier in sorted(missing))
        pytest.exit(f"COMMCANARY_TEST_REQUIRE_TOOLS=1 and a test tier cannot run: {reasons}", returncode=3)
    for item in items:
        for tier, reason in missing.items():
            if item.get_closest_marker(tier) is not None:
                item.add_marker(pytest.mark.skip(reason=f"{tier} tier: {reason}"))


# --- the team server (tests/test_serve_*.py; tests/server_harness.py) ----------------------------


@pytest.fixture(scope="session")
def postgres() -> Any:
    """A PostgreSQL cluster for the session (``server_harness.Postgres``),
    ``None`` where PostgreSQL is not installed."""
    import tempfile

    from server_harness import Postgres, postgres_bin

    if postgres_bin() is None:
        yield None
        return
    # Its own directory under /tmp: pytest's are private to this user, and
    # PostgreSQL runs as the postgres user when the tests run as root.
    pg = Postgres(Path(tempfile.mkdtemp(prefix="commcanary-pg-")))
    os.chmod(pg.directory, 0o755)
    try:
        pg.start()
        yield pg
    finally:
        pg.stop()
        shutil.rmtree(pg.directory, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, postgres: Any) -> str | None:
    """The server's database: SQLite in its data directory, or a fresh
    database on the session's PostgreSQL (the same tests run on both)."""
    if request.param == "sqlite":
        return None
    if postgres is None:
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql)")
    url: str = postgres.new_database()
    return url


@pytest.fixture
def server(tmp_path: Path, database: str | None) -> Any:
    """``commcanary serve`` running as a process on ``database``."""
    from server_harness import Server

    s = Server(tmp_path / "data", database).start()
    yield s
    s.stop()
