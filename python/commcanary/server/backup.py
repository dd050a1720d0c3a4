"""Backups of a server, and restoring one into a fresh server: the same
files for SQLite and PostgreSQL, so a backup also moves a server from one
to the other.

A backup is a directory:
* ``manifest.json``: its format, the schema's revision, each table's row
  count;
* ``tables/NAME.jsonl``: each table's rows, one JSON object a line, read in
  one transaction (a consistent snapshot of a running server);
* ``objects/AB/DIGEST``: every artifact, checked against its BLAKE3 digest
  as it is copied;
* ``trusted-keys.pem`` when the server has one;
* ``pages/``: the pages of diagnoses the server ran that hold what their
  documents do not (a straggler diagnosis' per-rank timeline).

Sessions and failed logins are not kept (a restored server starts with
none); the cookie key is not kept (sessions could not survive it anyway).
Restoring checks every object's digest and the row counts before it writes
anything, and refuses a database that already has accounts.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import blake3
import orjson
from sqlalchemy import Table, func, insert, select, text

from commcanary.errors import InputError, OutputError
from commcanary.server.config import ServerConfig
from commcanary.server.database import Database
from commcanary.server.schema import Base, User

__all__ = ["BACKUP_FORMAT", "backup", "restore"]

BACKUP_FORMAT = "commcanary.server-backup.v1"
#: Tables kept, in an order that inserts parents before children.
TABLES = ("users", "api_tokens", "workloads", "shares", "artifacts", "pushes", "analyses", "settings")
_BLOCK = 1 << 20


def _table(name: str) -> Table:
    return Base.metadata.tables[name]


def _revision(db: Database) -> str:
    with db.engine.connect() as conn:
        return str(conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one())


def _copy_checked(source: Path, target: Path, digest: str) -> None:
    """Copies ``source`` to ``target`` (through a temporary name), refusing
    bytes whose BLAKE3 is not ``digest``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    hasher = blake3.blake3()
    with open(source, "rb") as src, open(partial, "wb") as out:
        while block := src.read(_BLOCK):
            hasher.update(block)
            out.write(block)
        out.flush()
        os.fsync(out.fileno())
    if hasher.hexdigest() != digest:
        partial.unlink()
        raise InputError(f"{source}: its bytes do not have the digest {digest} (damaged)")
    os.replace(partial, target)


def backup(config: ServerConfig, out: Path) -> dict[str, Any]:
    """Writes a backup of the server ``config`` names into ``out`` (a new
    or empty directory); its manifest."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise OutputError(f"{out}: the backup goes into a new or empty directory")
    db = Database(config.database)
    try:
        db.migrate()
        (out / "tables").mkdir(parents=True, exist_ok=True)
        counts: dict[str, int] = {}
        digests: list[str] = []
        with db.engine.connect() as conn, conn.begin():
            if db.engine.dialect.name == "postgresql":
                conn.execute(text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"))
            for name in TABLES:
                table = _table(name)
                rows = conn.execute(select(table).order_by(*table.primary_key.columns)).mappings().all()
                with open(out / "tables" / f"{name}.jsonl", "wb") as f:
                    for row in rows:
                        f.write(orjson.dumps(dict(row), option=orjson.OPT_SORT_KEYS) + b"\n")
                counts[name] = len(rows)
                if name == "artifacts":
                    digests = [row["digest"] for row in rows]
        for digest in digests:
            _copy_checked(
                config.objects_dir / digest[:2] / digest, out / "objects" / digest[:2] / digest, digest
            )
        if config.trusted_keys_path.exists():
            shutil.copyfile(config.trusted_keys_path, out / "trusted-keys.pem")
        if (config.data_dir / "pages").is_dir():
            shutil.copytree(config.data_dir / "pages", out / "pages")
        manifest = {
            "format": BACKUP_FORMAT,
            "revision": _revision(db),
            "tables": counts,
            "created_at": round(time.time(), 3),
        }
        (out / "manifest.json").write_bytes(
            orjson.dumps(manifest, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2)
        )
        return manifest
    finally:
        db.dispose()


def _read_manifest(source: Path) -> dict[str, Any]:
    try:
        manifest = orjson.loads((source / "manifest.json").read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise InputError(f"{source / 'manifest.json'}: not a backup's manifest ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != BACKUP_FORMAT:
        raise InputError(f"{source / 'manifest.json'}: format: expected {BACKUP_FORMAT}")
    tables = manifest.get("tables")
    if not isinstance(tables, dict) or set(tables) != set(TABLES):
        raise InputError(f"{source / 'manifest.json'}: tables: expected {', '.join(TABLES)}")
    return manifest


def _rows(source: Path, name: str, expected: int) -> list[dict[str, Any]]:
    path = source / "tables" / f"{name}.jsonl"
    columns = set(_table(name).columns.keys())
    rows: list[dict[str, Any]] = []
    try:
        with open(path, "rb") as f:
            for number, line in enumerate(f, 1):
                row = orjson.loads(line)
                if not isinstance(row, dict) or set(row) != columns:
                    raise InputError(
                        f"{path}: line {number}: expected the columns {', '.join(sorted(columns))}"
                    )
                rows.append(row)
    except (OSError, orjson.JSONDecodeError) as exc:
        raise InputError(f"{path}: {exc}") from None
    if len(rows) != expected:
        raise InputError(f"{path}: {len(rows)} rows, the manifest says {expected}")
    return rows


def restore(config: ServerConfig, source: Path) -> dict[str, Any]:
    """Restores the backup in ``source`` into the server ``config`` names,
    whose database must have no account yet; its manifest."""
    manifest = _read_manifest(source)
    tables = {name: _rows(source, name, int(manifest["tables"][name])) for name in TABLES}
    for row in tables["artifacts"]:
        digest = str(row["digest"])
        path = source / "objects" / digest[:2] / digest
        hasher = blake3.blake3()
        try:
            with open(path, "rb") as f:
                while block := f.read(_BLOCK):
                    hasher.update(block)
        except OSError as exc:
            raise InputError(f"{path}: {exc.strerror or exc}") from None
        if hasher.hexdigest() != digest:
            raise InputError(f"{path}: its bytes do not have the digest {digest} (damaged)")
    config.prepare()
    db = Database(config.database)
    try:
        db.migrate()
        if _revision(db) != manifest.get("revision"):
            raise InputError(
                f"{source / 'manifest.json'}: revision: the backup is of schema {manifest.get('revision')}, "
                f"this server's is {_revision(db)}"
            )
        with db.session() as s:
            if (s.scalar(select(func.count()).select_from(User)) or 0) > 0:
                raise InputError("the server to restore into already has accounts (restore into a new one)")
        for row in tables["artifacts"]:
            digest = str(row["digest"])
            target = config.objects_dir / digest[:2] / digest
            if not target.exists():
                _copy_checked(source / "objects" / digest[:2] / digest, target, digest)
        with db.engine.begin() as conn:
            for name in TABLES:
                if tables[name]:
                    conn.execute(insert(_table(name)), tables[name])
            if db.engine.dialect.name == "postgresql":
                for name in TABLES:
                    if "id" in _table(name).columns:
                        conn.execute(
                            text(
                                f"SELECT setval(pg_get_serial_sequence('{name}', 'id'), "
                                f"COALESCE((SELECT MAX(id) FROM {name}), 0) + 1, false)"
                            )
                        )
        keys = source / "trusted-keys.pem"
        if keys.exists():
            shutil.copyfile(keys, config.trusted_keys_path)
        if (source / "pages").is_dir():
            shutil.copytree(source / "pages", config.data_dir / "pages", dirs_exist_ok=True)
        config.bootstrap_token_path.unlink(missing_ok=True)
        return manifest
    finally:
        db.dispose()
