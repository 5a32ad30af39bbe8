"""A DOUBLE / FLOAT primary key written as -0.0 on a real MariaDB: what the server holds, and the mirror equal to it.

MariaDB 10.11 compares keys by value (0.0 and -0.0 are one key) and stores a FLOAT / DOUBLE -0.0 as 0.0: ``-0e0``
is a negative zero in an expression (``ATAN2(-0e0, -1)`` is -pi), yet the row it writes reads back as 0.0 (``ATAN2(k,
-1)`` is pi), the binlog's row image holds 0.0, an UPDATE ``SET k = -k`` of the row changes nothing, and an INSERT of
0.0 after it is a duplicate key. (``-0.0`` is a DECIMAL literal, zero with no sign at all.) One way in remains: a
FLOAT that underflows (``-1e-50``) is stored, and logged, as -0.0 -- and ``SELECT`` prints it as 0 (MariaDB prints
no negative zero), so the decoder gives 0.0 (``canal.sql.values``) and the mirror holds what ``SELECT`` shows. Tables
``s (k DOUBLE PRIMARY KEY, v INT)``, ``c (a INT, k DOUBLE, v INT, PRIMARY KEY (a, k))``, ``f (k FLOAT PRIMARY KEY, v
INT)`` and ``u (k FLOAT PRIMARY KEY, x FLOAT, d DOUBLE)`` go through inserts, key updates to -0.0 (and to an
underflowing FLOAT) and back, a value update after, deletes; the entries are captured once per phase and fed to a
mirror in each mode, as change rows and as typed batches, one entry a batch and all of a phase in one; after each
phase, and after a fold, each table equals ``SELECT *`` (floats compared by their repr: 0.0 is not -0.0). The
binlog of a source that keeps -0.0 (MySQL) is tests/test_mirror_float_keys.py.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import pymysql
import pytest

pytest.importorskip("deltalake")

from capture_configs import capture_config

from canal.instance import Instance
from canal.lake.forms.changes import entries_to_batch
from canal.lake.forms.typed_batch import entries_to_typed
from canal.lake.mirror import DeltaMirror
from canal.lake.settings import MODES
from canal.protocol import Entry, EntryType
from canal.spark.testing import master_position
from canal.testing.plugin import MariaDBDatabase
from canal.testing.services.mariadb import MariaDBServer

pytestmark = pytest.mark.integration

TABLES = {"s": ["k", "v"], "c": ["a", "k", "v"], "f": ["k", "v"], "u": ["k", "x", "d"]}

PHASES: list[list[str]] = [
    [
        "INSERT INTO {db}.s VALUES (-0e0, 1), (1.5, 2)",
        "INSERT INTO {db}.c VALUES (1, 0e0, 1), (2, -0e0, 2)",
        "INSERT INTO {db}.f VALUES (-0e0, 1)",
    ],
    ["UPDATE {db}.s SET k = -k WHERE k = 0", "UPDATE {db}.c SET k = -0e0 WHERE a = 1", "UPDATE {db}.f SET k = -k"],
    ["UPDATE {db}.s SET v = 10 WHERE k = -0e0", "UPDATE {db}.c SET v = 10 WHERE k = 0", "UPDATE {db}.f SET v = 10"],
    # both spellings in one transaction, a key moved away and back, a value update after
    [
        "BEGIN",
        "UPDATE {db}.s SET k = 0e0 WHERE k = 0",
        "UPDATE {db}.s SET k = 2.5 WHERE k = 0",
        "UPDATE {db}.s SET k = -0e0 WHERE k = 2.5",
        "UPDATE {db}.s SET v = 11 WHERE k = 0",
        "UPDATE {db}.c SET k = -0e0, v = 12 WHERE a = 1",
        "UPDATE {db}.f SET k = 3.5 WHERE k = 0",
        "UPDATE {db}.f SET k = -0e0, v = 11 WHERE k = 3.5",
        "COMMIT",
    ],
    ["DELETE FROM {db}.s WHERE k = 0", "DELETE FROM {db}.c WHERE a = 2", "INSERT INTO {db}.s VALUES (-0e0, 3)"],
    ["DELETE FROM {db}.s WHERE k = 0", "DELETE FROM {db}.c", "DELETE FROM {db}.f"],
    # a FLOAT that underflows is stored and logged as -0.0, a key or not; SELECT shows 0
    ["INSERT INTO {db}.u VALUES (-1e-50, -1e-50, -1e-320 * 1e-10), (1.5, 0, 0)", "UPDATE {db}.u SET x = -1e-50"],
    ["UPDATE {db}.u SET k = 0, x = 0 WHERE k = 0", "DELETE FROM {db}.u WHERE k = 0"],
    ["UPDATE {db}.u SET k = -1e-40 * 1e-10 WHERE k = 1.5", "UPDATE {db}.u SET d = 2 WHERE k = 0"],
]


def _select(conn: Any, db: str) -> dict[str, list[tuple[Any, ...]]]:
    out = {}
    with conn.cursor() as cur:
        for table, columns in TABLES.items():
            cur.execute(f"SELECT {', '.join(columns)} FROM `{db}`.`{table}`")
            out[table] = sorted(_exact(tuple(r)) for r in cur.fetchall())
    return out


def _exact(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A row with each float as its repr: -0.0 apart from 0.0."""
    return tuple(repr(v) if isinstance(v, float) else v for v in row)


def _mirrored(mirror: DeltaMirror, db: str) -> dict[str, list[tuple[Any, ...]]]:
    out = {}
    mirror.flush_staged()
    for table, names in TABLES.items():
        if not mirror.table_path(db, table).exists():  # no row of it yet
            out[table] = []
            continue
        rows = mirror.read(db, table)
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
        cur.execute(f"CREATE TABLE `{db}`.f (k FLOAT PRIMARY KEY, v INT)")
        cur.execute(f"CREATE TABLE `{db}`.u (k FLOAT PRIMARY KEY, x FLOAT, d DOUBLE)")
        cur.execute(f"CREATE TABLE `{db}`.mark (n INT AUTO_INCREMENT PRIMARY KEY)")
    config = capture_config(mariadb, tmp_path_factory.mktemp("meta"), master_position(conn), "fk")
    config = attrs.evolve(config, flush_period_s=0)
    phases: list[tuple[list[Entry], dict[str, list[tuple[Any, ...]]]]] = []
    with Instance(config) as inst:
        for statements in [[], *PHASES]:
            with conn.cursor() as cur:
                for sql in statements:
                    cur.execute(sql.format(db=f"`{db}`"))
                cur.execute(f"INSERT INTO `{db}`.mark VALUES ()")
            phases.append((_phase_entries(inst), _select(conn, db)))
    conn.close()
    return db, phases


def test_mariadb_stores_negative_zero_as_zero(mariadb: MariaDBDatabase, captured: Any) -> None:
    """The evidence of what the mirror must show: MariaDB writes -0e0 as 0.0, and its binlog says so."""
    db = mariadb.database
    conn = mariadb.connect(autocommit=True)
    with conn.cursor() as cur:
        cur.execute("SELECT ATAN2(-0e0, -1) < 0, ATAN2(0e0, -1) > 0")
        assert cur.fetchone() == (1, 1), "-0e0 is a negative zero in an expression"
        for column in ("DOUBLE", "FLOAT"):
            cur.execute(f"CREATE TABLE `{db}`.z{column} (k {column} PRIMARY KEY, v {column})")
            cur.execute(f"INSERT INTO `{db}`.z{column} VALUES (-0e0, -0e0)")
            cur.execute(f"SELECT k, v, ATAN2(k, -1) > 0, ATAN2(v, -1) > 0 FROM `{db}`.z{column}")
            k, v, k_positive, v_positive = cur.fetchone()
            assert (math.copysign(1, k), math.copysign(1, v), k_positive, v_positive) == (1, 1, 1, 1), column
            assert cur.execute(f"UPDATE `{db}`.z{column} SET k = -k, v = -v") == 0, "nothing changed"
            with pytest.raises(pymysql.err.IntegrityError, match="Duplicate entry"):
                cur.execute(f"INSERT INTO `{db}`.z{column} VALUES (0e0, 1)")
        # but a FLOAT that underflows is stored as -0.0, which SELECT prints as 0
        cur.execute(f"CREATE TABLE `{db}`.under (k FLOAT PRIMARY KEY)")
        cur.execute(f"INSERT INTO `{db}`.under VALUES (-1e-50)")
        cur.execute(f"SELECT k, CONCAT(k), ATAN2(k, -1) < 0 FROM `{db}`.under")
        k, text, negative = cur.fetchone()
        assert (math.copysign(1, k), text, negative) == (1, "0", 1)
    conn.close()
    _, phases = captured
    zeros = [
        v
        for entries, _ in phases
        for entry in entries
        for row in (entry.row_change.rows if entry.row_change is not None else [])
        for image in (row.before, row.after)
        if image is not None
        for v in image
        if isinstance(v, float) and v == 0
    ]
    assert zeros and all(math.copysign(1, v) == 1 for v in zeros), "the entries hold 0.0 where -0e0 was written"
    assert phases[1][1] == {
        "s": [("0.0", 1), ("1.5", 2)],
        "c": [(1, "0.0", 1), (2, "0.0", 2)],
        "f": [("0.0", 1)],
        "u": [],
    }


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
            if typed:
                mirror.apply(entries_to_typed(chunk, "fk", batch_id, before_keys_only=True), batch_id)
            else:
                mirror.apply(entries_to_batch(chunk, "fk", batch_id), batch_id)
        if n == 0:
            continue
        assert _mirrored(mirror, db) == expected, f"after phase {n}: {PHASES[n - 1]}"
        for table in TABLES:
            mirror.fold(db, table)
        assert _mirrored(mirror, db) == expected, f"after phase {n} and a fold"
    mirror.close()
