"""A DOUBLE in a primary key moved between 0.0 and -0.0 mirrors as MariaDB holds it, on a real MariaDB.

MariaDB compares keys by value, so 0.0 and -0.0 are one key (an UPDATE from one to the other changes the row in
place, and a table cannot hold both); the mirror must group a table's changes by that same identity (else a MERGE
matches one target row with two source rows, or an UPDATE "moves" a key onto itself). The value the mirror keeps is
what ``SELECT`` shows. Tables ``(k DOUBLE PRIMARY KEY, v INT)`` and ``(a INT, k DOUBLE, v INT, PRIMARY KEY (a, k))``
go through inserts, key updates 0.0 -> -0.0 and back, a value update after, deletes; the entries are captured once
per phase and fed to a mirror in each mode, as change rows and as typed batches, one entry a batch and all of a
phase in one; after each phase, and after a fold, each mirrored table equals ``SELECT *``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

pytest.importorskip("deltalake")

from capture_configs import capture_config

from canal.instance import Instance
from canal.lake.mirror import DeltaMirror
from canal.lake.settings import MODES
from canal.lake.typed_batch import entries_to_typed
from canal.protocol import Entry, EntryType
from canal.spark.changes import entries_to_batch
from canal.spark.testing import master_position
from canal.testing.plugin import MariaDBDatabase
from canal.testing.services.mariadb import MariaDBServer

pytestmark = pytest.mark.integration

TABLES = ("s", "c")

PHASES: list[list[str]] = [
    ["INSERT INTO {db}.s VALUES (0.0, 1), (1.5, 2)", "INSERT INTO {db}.c VALUES (1, 0.0, 1), (2, -0.0, 2)"],
    ["UPDATE {db}.s SET k = -0.0 WHERE k = 0", "UPDATE {db}.c SET k = -k WHERE a = 1"],
    ["UPDATE {db}.s SET v = 10 WHERE k = 0", "UPDATE {db}.c SET v = 10 WHERE k = 0"],
    # both spellings in one transaction: back to 0.0, then -0.0 again, a value update after
    [
        "BEGIN",
        "UPDATE {db}.s SET k = 0.0 WHERE k = 0",
        "UPDATE {db}.c SET k = 0.0 WHERE a = 2",
        "UPDATE {db}.s SET k = -0.0 WHERE k = 0",
        "UPDATE {db}.s SET v = 11 WHERE k = 0",
        "UPDATE {db}.c SET k = -0.0, v = 12 WHERE a = 1",
        "COMMIT",
    ],
    ["UPDATE {db}.s SET k = 2.5 WHERE k = 0", "UPDATE {db}.s SET k = -0.0 WHERE k = 2.5"],
    ["DELETE FROM {db}.s WHERE k = 0", "DELETE FROM {db}.c WHERE a = 2", "INSERT INTO {db}.s VALUES (-0.0, 3)"],
    ["DELETE FROM {db}.s WHERE k = 0", "DELETE FROM {db}.c"],
]


def _select(conn: Any, db: str) -> dict[str, list[tuple[Any, ...]]]:
    out = {}
    with conn.cursor() as cur:
        for table in TABLES:
            cur.execute(f"SELECT * FROM `{db}`.`{table}`")
            out[table] = sorted(_exact(tuple(r)) for r in cur.fetchall())
    return out


def _exact(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A row with each float as its repr: -0.0 apart from 0.0."""
    return tuple(repr(v) if isinstance(v, float) else v for v in row)


def _mirrored(mirror: DeltaMirror, db: str) -> dict[str, list[tuple[Any, ...]]]:
    out = {}
    mirror.flush_staged()
    for table in TABLES:
        rows = mirror.read(db, table)
        names = ["k", "v"] if table == "s" else ["a", "k", "v"]
        out[table] = sorted(_exact(tuple(r[n] for n in names)) for r in rows.to_pylist())
    return out


def _phase_entries(inst: Instance) -> list[Entry]:
    """The entries up to the phase's mark row (a row of table ``mark``), without the mark's transaction."""
    entries: list[Entry] = []
    deadline = time.monotonic() + 30
    while not any(e.header.table == "mark" and e.entry_type is EntryType.ROWDATA for e in entries):
        assert time.monotonic() < deadline, f"the phase's entries did not come: {len(entries)}"
        if inst.parser.error is not None:
            raise inst.parser.error
        entries.extend(inst.get(1000, timeout=0.2).entries)
    return [e for e in entries if e.header.table != "mark"]


@pytest.fixture(scope="module")
def captured(mariadb_server: MariaDBServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The entries of each phase and ``SELECT`` after it (captured once for the module's tests)."""
    mariadb = MariaDBDatabase(server=mariadb_server, database="float_keys")
    mariadb_server.execute("DROP DATABASE IF EXISTS float_keys")
    mariadb_server.execute("CREATE DATABASE float_keys")
    try:
        yield _capture(mariadb, tmp_path_factory)
    finally:
        mariadb_server.execute("DROP DATABASE IF EXISTS float_keys")


def _capture(mariadb: MariaDBDatabase, tmp_path_factory: pytest.TempPathFactory) -> Any:
    db = mariadb.database
    conn = mariadb.connect(autocommit=True)
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE `{db}`.s (k DOUBLE PRIMARY KEY, v INT)")
        cur.execute(f"CREATE TABLE `{db}`.c (a INT, k DOUBLE, v INT, PRIMARY KEY (a, k))")
        cur.execute(f"CREATE TABLE `{db}`.mark (n INT AUTO_INCREMENT PRIMARY KEY)")
    config = capture_config(mariadb, tmp_path_factory.mktemp("meta"), master_position(conn), "fk")
    config = attrs.evolve(config, flush_period_s=0)
    phases: list[tuple[list[Entry], dict[str, list[tuple[Any, ...]]]]] = []
    with Instance(config) as inst:
        for statements in [[]] + PHASES:
            with conn.cursor() as cur:
                for sql in statements:
                    cur.execute(sql.format(db=f"`{db}`"))
                cur.execute(f"INSERT INTO `{db}`.mark VALUES ()")
            phases.append((_phase_entries(inst), _select(conn, db)))
    conn.close()
    return db, phases


def test_mariadb_keeps_one_key_for_both_zeros(captured: Any) -> None:
    """What the mirror must show: the evidence of what SELECT returns for a key written as -0.0."""
    _, phases = captured
    first = phases[1][1]
    print("SELECT after the first phase:", first)
    print("SELECT after the key moves:", phases[2][1])
    assert len(first["s"]) == 2 and len(first["c"]) == 2


@pytest.mark.parametrize("per_entry", [True, False], ids=["one-entry-batches", "one-batch"])
@pytest.mark.parametrize("typed", [False, True], ids=["rows", "typed"])
@pytest.mark.parametrize("mode", MODES)
def test_zero_and_negative_zero_keys_mirror_as_select(
    captured: Any, tmp_path: Path, mode: Any, typed: bool, per_entry: bool
) -> None:
    db, phases = captured
    mirror = DeltaMirror(tmp_path / "m", mode=mode, background_folds=False)
    batch_id = 0
    for n, (entries, expected) in enumerate(phases):
        chunks: Sequence[Sequence[Entry]] = [[e] for e in entries] if per_entry else [entries]
        for chunk in chunks:
            if not any(e.entry_type is EntryType.ROWDATA for e in chunk):
                continue
            batch_id += 1
            batch = (
                entries_to_typed(chunk, "fk", 0, before_keys_only=True) if typed else entries_to_batch(chunk, "fk", 0)
            )
            mirror.apply(batch, batch_id)
        if n == 0:
            continue
        assert _mirrored(mirror, db) == expected, f"after phase {n}: {PHASES[n - 1]}"
        for table in TABLES:
            mirror.fold(db, table)
        assert _mirrored(mirror, db) == expected, f"after phase {n} and a fold"
    mirror.close()
