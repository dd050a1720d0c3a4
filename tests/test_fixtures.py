"""The real fixtures copied into tests/data/fixtures: each indexed directory
has its README.md and PROVENANCE.md, every other file is a gzip stream with
the ``.gz`` suffix (licences aside), and the whole stays small."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

from conftest import FIXTURES

#: Files kept uncompressed, by name.
PLAIN = {"README.md", "PROVENANCE.md", "LICENSE.HolisticTraceAnalysis"}


def indexed() -> list[Path]:
    rows = re.findall(r"^\| `([^`]+)/` \|", (FIXTURES / "README.md").read_text(), flags=re.M)
    return [FIXTURES / row for row in rows]


def test_every_fixture_directory_is_indexed_and_has_its_provenance() -> None:
    dirs = indexed()
    assert len(dirs) == 9
    on_disk = {p.parent for p in FIXTURES.rglob("PROVENANCE.md")}
    assert on_disk == set(dirs)
    for d in dirs:
        source = f"`fixtures/{d.relative_to(FIXTURES).as_posix()}/`"
        assert (d / "README.md").is_file(), d
        assert source in (d / "PROVENANCE.md").read_text(), d


def test_every_evidence_file_is_gzipped_and_decompresses() -> None:
    files = [p for p in FIXTURES.rglob("*") if p.is_file() and p.parent != FIXTURES]
    assert len(files) > 200
    for p in files:
        if p.name in PLAIN:
            continue
        assert p.name.endswith(".gz"), p
        data = p.read_bytes()
        assert data[:2] == b"\x1f\x8b", p
        assert gzip.decompress(data), p


def test_the_fixtures_stay_under_20_mb() -> None:
    total = sum(p.stat().st_size for p in FIXTURES.rglob("*") if p.is_file())
    assert total < 20 * 1024 * 1024
