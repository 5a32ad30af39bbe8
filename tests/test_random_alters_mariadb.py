"""Random workloads of the ALTER forms the conversion model follows or heals, and of DDL under sql_modes that change
how a statement reads, on a real MariaDB (a family for tests/random_schema_workload.py to fold in): a table of a few
columns -- a generated one among them --, rows written under NO_AUTO_VALUE_ON_ZERO (a key of 0), then random
operations with DML between them:

* DDL under ``NO_BACKSLASH_ESCAPES`` or ``ANSI_QUOTES``: columns added with defaults that hold backslashes and quotes,
  a column dropped after them;
* AUTO_INCREMENT made on the key, under NO_AUTO_VALUE_ON_ZERO or not;
* a generated column's expression set anew, its base column narrowed;
* ``BINARY(n)`` columns added (padded with zero bytes), hexadecimal and bit literals as defaults.

Under the defaults (``heal="snapshot"``) the mirror equals ``SELECT`` after the workload; under ``heal="stop"`` it
equals ``SELECT`` or stops typed (``MirrorConversionError``) at a statement the model does not follow, holding the
rows as ``SELECT`` showed them before it. ``PYCANAL_RANDOM_ALTERS_EXAMPLES`` random workloads (default 2) besides two
that hold a statement of each kind; a failure prints the SQL and the seed.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import attrs
import pymysql
import pytest
from hypothesis import example, given, note
from hypothesis import strategies as st
from random_schema_workload import fuzz_settings

pytest.importorskip("deltalake")

from canal.config import InstanceConfig, StoreConfig
from canal.instance import Instance
from canal.lake.types import MirrorConversionError
from canal.spark import DeltaMirror, compare, run_batches
from canal.spark.testing import healed_by, master_position
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration

EXAMPLES = int(os.environ.get("PYCANAL_RANDOM_ALTERS_EXAMPLES", "2"))
KINDS = ("modes", "auto_increment", "zero_kept", "generated", "binary", "hex", "dml")
_PIECES = ["a", "\\", "''", "é", " ", "\\n", "%", ","]


@attrs.define
class Workload:
    """The operations played on one table, the SQL they ran (for the report) and ``SELECT`` before each DDL."""

    conn: Any
    table: str
    rng: random.Random
    sql: list[str] = attrs.field(factory=list)
    before: dict[str, list[dict[str, Any]]] = attrs.field(factory=dict)  # DDL text -> the rows before it
    columns: int = 0
    ai: bool = False

    def run(self, *statements: str, mode: str | None = None) -> bool:
        """Run ``statements`` in one session (under ``mode``); False when the server refused one (left out)."""
        with self.conn.cursor() as cur:
            try:
                cur.execute(f"SET SESSION sql_mode = {'DEFAULT' if mode is None else repr(mode)}")
                for sql in statements:
                    if sql.startswith(("ALTER", "SET STATEMENT")):
                        self.before[sql] = self.rows()
                    cur.execute(sql)
                    self.sql.append(f"[{mode or 'default'}] {sql}")
            except pymysql.MySQLError as exc:
                self.sql.append(f"[{mode or 'default'}] refused: {exc}")
                return False
            finally:
                cur.execute("SET SESSION sql_mode = DEFAULT")
        return True

    def rows(self) -> list[dict[str, Any]]:
        with self.conn.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute(f"SELECT * FROM {self.table}")
            return list(cur.fetchall())

    def operation(self, kind: str) -> None:
        rng, t = self.rng, self.table
        self.columns += 1
        c = f"c{self.columns}"
        if kind == "modes":
            text = "".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 4)))
            if rng.random() < 0.5:  # a backslash is a character, the quote ends the string
                self.run(f"ALTER TABLE {t} ADD COLUMN {c} VARCHAR(20) DEFAULT '{text}\\', ADD COLUMN {c}x INT",
                         mode="NO_BACKSLASH_ESCAPES")  # fmt: skip
            else:  # "..." is a name
                self.run(f'ALTER TABLE "{t}" ADD COLUMN "{c}\\" VARCHAR(20) DEFAULT \'{text}\'', mode="ANSI_QUOTES")
        elif kind in ("auto_increment", "zero_kept") and not self.ai:  # the key of 0 renumbered, or kept
            mode = "NO_AUTO_VALUE_ON_ZERO" if kind == "zero_kept" else None
            self.ai = self.run(f"ALTER TABLE {t} MODIFY id INT NOT NULL AUTO_INCREMENT", mode=mode)
        elif kind == "generated":
            if rng.random() < 0.5:
                kept = rng.choice(["VIRTUAL", "PERSISTENT"])
                self.run(f"ALTER TABLE {t} MODIFY g INT AS (v * {rng.randint(2, 9)}) {kept}")
            else:
                narrower = rng.choice(["TINYINT", "BIGINT"])
                self.run(f"SET STATEMENT sql_mode = '' FOR ALTER TABLE {t} MODIFY v {narrower}")
        elif kind == "binary":
            default = rng.choice(["DEFAULT 'ab'", "NOT NULL", "DEFAULT 'a '", "DEFAULT NULL"])
            self.run(f"ALTER TABLE {t} ADD COLUMN {c} BINARY({rng.randint(2, 5)}) {default}")
        elif kind == "hex":
            literal = rng.choice(["x'4142'", "0x4142", "b'01000001'", "x''", "0x41"])
            target = rng.choice(["VARCHAR(10)", "VARBINARY(10)", "INT", "CHAR(4)", "TEXT"])
            self.run(f"ALTER TABLE {t} ADD COLUMN {c} {target} DEFAULT {literal}")
        else:
            key = rng.randint(1, 60)
            self.run(
                f"INSERT INTO {t} (id, v) VALUES ({key}, {rng.randint(-200, 200)}) "
                f"ON DUPLICATE KEY UPDATE v = VALUES(v)",
                f"UPDATE {t} SET v = v + 1 WHERE id % {rng.randint(2, 5)} = 0",
            )


def _config(db: MariaDBDatabase, tmp: Path, start: tuple[str, int], name: str, table: str, heal: str) -> InstanceConfig:
    return InstanceConfig(
        destination=name,
        master=db.master(start),
        filter_regex=rf"{db.database}\.{table}",
        store=StoreConfig(batch_mode="ITEMSIZE"),
        meta_mode="file",
        meta_dir=str(tmp / name / "meta"),
        heal=heal,
    )


def _run(conn: Any, config: InstanceConfig, mirror: DeltaMirror) -> None:
    end = master_position(conn)
    with Instance(config) as inst:
        run_batches(inst, None, mirror, batch_size=50, timeout=0.3, until=healed_by(inst, end))


def _equal(mirror: DeltaMirror, db: str, table: str, rows: list[dict[str, Any]]) -> None:
    if not rows and not mirror.table_path(db, table).exists():
        return
    result = compare(mirror.read(db, table), rows, ["id"], name=table)
    assert result.equal, str(result)


def test_random_alters_and_sql_modes_are_mirrored_healed_or_stop_typed(
    mariadb: MariaDBDatabase, tmp_path_factory: pytest.TempPathFactory
) -> None:
    db = mariadb.database
    runs = iter(range(1_000_000))
    conn = mariadb.connect(autocommit=True, charset="utf8mb4")
    with conn.cursor() as cur:
        cur.execute(f"USE `{db}`")

    @fuzz_settings(EXAMPLES)
    @given(seed=st.integers(0, 2**32 - 1), kinds=st.lists(st.sampled_from(KINDS), min_size=2, max_size=6))
    @example(seed=1, kinds=["modes", "dml", "modes", "auto_increment", "binary"])
    @example(seed=2, kinds=["zero_kept", "hex", "generated", "dml", "generated"])
    def play(seed: int, kinds: list[str]) -> None:
        n = next(runs)
        table, tmp = f"r{n}", tmp_path_factory.mktemp(f"alters{n}")
        note(f"seed {seed}")
        start = master_position(conn)
        work = Workload(conn, table, random.Random(seed))
        work.run(
            f"CREATE TABLE {table} (id INT NOT NULL, v INT, g INT AS (v * 2) VIRTUAL, s VARCHAR(9), "
            "PRIMARY KEY (id)) DEFAULT CHARSET=utf8mb4",
            f"INSERT INTO {table} (id, v, s) VALUES (0, 1000, 'zero'), (1, 10, 'a'), (2, NULL, 'b'), (3, -7, NULL)",
            mode="NO_AUTO_VALUE_ON_ZERO",
        )
        healing, stopping = DeltaMirror(tmp / "healed"), DeltaMirror(tmp / "stopped")
        heal_config = _config(mariadb, tmp, start, f"h{n}", table, "snapshot")
        stop_config = _config(mariadb, tmp, start, f"s{n}", table, "stop")
        _run(conn, heal_config, healing)
        _run(conn, stop_config, stopping)
        for kind in kinds:
            work.operation(kind)
        note("\n".join(work.sql))
        rows = work.rows()
        _run(conn, heal_config, healing)  # the defaults: equal, whatever healed
        _equal(healing, db, table, rows)
        try:
            _run(conn, stop_config, stopping)
        except MirrorConversionError as stop:  # typed, at a statement of the workload, nothing of it written
            assert stop.statement in work.before, stop
            assert stop.table == f"{db}.{table}"
            _equal(stopping, db, table, work.before[stop.statement])
            return
        _equal(stopping, db, table, rows)

    try:
        play()
    finally:
        conn.close()
