"""Snapshots that return exactly the rows ``SELECT`` returns, on a real MariaDB, where they used not to:

* every chunk key type in the server's own order, with chunks of one and two rows: ENUM and SET keys (ordered by
  index / bit mask, not by label), BIT, DECIMAL, temporal, BINARY, case-insensitive and PAD SPACE collations, and a
  composite key declared in another order than its columns -- each row exactly once;
* a DDL while the snapshot runs: chunks placed after an ``ADD COLUMN`` carry the new column, and a renamed key column
  restarts the table's reads under its new name (no row skipped);
* FLOAT values equal to the binlog's (one value model), so a keyless table's window matches changed rows;
* a resume after the chunk key changed while the destination was down reads the table again instead of skipping;
* text read whatever charset the destination's connections are configured with (``utf8``, ``latin1``).
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from canal.config import InstanceConfig, SnapshotConfig, StoreConfig
from canal.instance import Instance
from canal.position import SnapshotCursor
from canal.protocol import EMPTY_MESSAGE_ID, Entry, EntryType, EventType
from canal.snapshot import ChunkReader
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration


def _config(db: MariaDBDatabase, meta_dir: Path | None = None, charset: str = "utf8mb4") -> InstanceConfig:
    return InstanceConfig(
        destination="fidelity",
        master=db.master(),
        filter_regex=rf"{db.database}\..*",
        charset=charset,
        store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=4096),
        meta_mode="memory" if meta_dir is None else "file",
        meta_dir=None if meta_dir is None else str(meta_dir),
        snapshot=SnapshotConfig(),
    )


def _drain(inst: Instance, until: Any, limit_s: float = 60.0, react: Any = None) -> list[Entry]:
    """Entries (acked as they come) until ``until(entries)`` holds."""
    entries: list[Entry] = []
    deadline = time.monotonic() + limit_s
    while not until(entries):
        assert time.monotonic() < deadline, "timed out"
        for runner in inst.snapshots:
            assert runner.error is None, runner.error
        msg = inst.get_without_ack(200, timeout=0.2)
        if msg.id != EMPTY_MESSAGE_ID:
            entries.extend(msg.entries)
            inst.ack(msg.id)
            if react is not None:
                react(msg.entries)
    return entries


def _snapshot_rows(entries: list[Entry], table: str) -> list[dict[str, Any]]:
    return [
        row.after_dict()
        for e in entries
        if e.entry_type is EntryType.ROWDATA
        and e.row_change is not None
        and e.row_change.event_type is EventType.SNAPSHOT
        and e.header.table == table
        for row in e.row_change.rows
    ]


def _snapshot_done(inst: Instance) -> Any:
    def done(_entries: list[Entry]) -> bool:
        return bool(inst.snapshots) and inst.snapshots[-1].progress().done

    return done


KEY_TYPES = [
    ("ENUM('m', 'b', 'z', 'a')", ["'z'", "'a'", "'m'", "'b'", "''"]),  # '' is ENUM's error value, index 0
    ("SET('m', 'b', 'z')", ["'z'", "'m,b'", "'b'", "''", "'m,z'", "'m'"]),
    ("BIT(10)", ["b'1'", "b'1111111111'", "b'100'", "0", "b'1000000000'"]),
    ("DECIMAL(20,4)", ["-12345678901234.5678", "0.0001", "-0.0001", "12345678901234.5678", "0", "99.5"]),
    ("DATETIME(3)", ["'2024-01-01 00:00:00.001'", "'1999-12-31 23:59:59.999'", "'2024-01-01 00:00:00'"]),
    ("BINARY(3)", ["X'000102'", "X'FF'", "X'00'", "X'7F8081'", "'abc'"]),
    ("VARCHAR(10) COLLATE utf8mb4_general_ci", ["'b'", "'A'", "'c'", "'ä'", "'Z'", "'a b'"]),
    ("CHAR(5) COLLATE latin1_swedish_ci", ["'x'", "'X y'", "'å'", "'a'", "'Ö'"]),  # PAD SPACE
    ("BIGINT UNSIGNED", ["18446744073709551615", "0", "9223372036854775808", "1"]),
]


@pytest.mark.parametrize("chunk_rows", [1, 2])
@pytest.mark.parametrize(("key_type", "values"), KEY_TYPES, ids=[k for k, _ in KEY_TYPES])
def test_every_key_type_is_chunked_in_the_servers_order(
    mariadb: MariaDBDatabase, key_type: str, values: list[str], chunk_rows: int
) -> None:
    mariadb.execute("SET SESSION sql_mode = ''")
    mariadb.execute(f"CREATE TABLE t (k {key_type} NOT NULL PRIMARY KEY, n INT NOT NULL)")
    for n, value in enumerate(values):
        mariadb.execute(f"INSERT IGNORE INTO t VALUES ({value}, {n})")
    expected = sorted(n for (n,) in mariadb.execute("SELECT n FROM t"))
    with Instance(_config(mariadb)) as inst:
        inst.snapshot([f"{mariadb.database}.t"], chunk_rows=chunk_rows)
        entries = _drain(inst, _snapshot_done(inst))
    got = [row["n"] for row in _snapshot_rows(entries, "t")]
    assert sorted(got) == expected, f"rows {Counter(got)} for {expected}"  # each exactly once


def test_a_composite_key_is_chunked_in_its_index_order(mariadb: MariaDBDatabase) -> None:
    mariadb.execute("CREATE TABLE c (b INT NOT NULL, a VARCHAR(5) NOT NULL, v INT, PRIMARY KEY (a, b))")
    mariadb.execute("INSERT INTO c SELECT MOD(seq, 7), CONCAT('k', MOD(seq, 5)), seq FROM seq_1_to_35")
    with Instance(_config(mariadb)) as inst:
        schema = inst.snapshot([f"{mariadb.database}.c"], chunk_rows=3)
        entries = _drain(inst, _snapshot_done(inst))
        assert schema.error is None
    rows = _snapshot_rows(entries, "c")
    assert sorted(r["v"] for r in rows) == list(range(1, 36))
    order = [(r["a"], r["b"]) for r in rows]
    assert order == sorted(order)  # the index's order (a, b), not the columns' (b, a)
    reader = ChunkReader(lambda: mariadb.connect(conv={}), rows_table(entries))
    try:
        assert reader.chunk_key() == ("a", "b")
    finally:
        reader.close()


def rows_table(entries: list[Entry]) -> Any:
    return next(e.row_change.table for e in entries if e.row_change is not None and e.row_change.table is not None)


def test_chunks_after_an_add_column_carry_the_new_column(mariadb: MariaDBDatabase) -> None:
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    mariadb.execute("INSERT INTO t SELECT seq, seq FROM seq_1_to_200")
    altered: list[bool] = []

    def alter_once(batch: list[Entry]) -> None:
        if not altered and _snapshot_rows(batch, "t"):
            mariadb.execute("ALTER TABLE t ADD COLUMN extra INT NOT NULL DEFAULT 7")
            altered.append(True)

    with Instance(_config(mariadb)) as inst:
        inst.snapshot([f"{mariadb.database}.t"], chunk_rows=10, max_rows_per_s=400)
        entries = _drain(inst, _snapshot_done(inst), react=alter_once)
    ddl_at = next(i for i, e in enumerate(entries) if e.row_change is not None and e.row_change.is_ddl)
    before = [r for e in entries[:ddl_at] for r in _snapshot_rows([e], "t")]
    after = [r for e in entries[ddl_at:] for r in _snapshot_rows([e], "t")]
    assert before and after
    assert all("extra" not in r for r in before)  # the old layout, placed before the DDL
    assert all(r["extra"] == 7 for r in after)  # never the old layout past the DDL
    assert {r["id"] for r in before} | {r["id"] for r in after} == set(range(1, 201))


def test_a_key_column_renamed_mid_snapshot_restarts_the_tables_reads(mariadb: MariaDBDatabase) -> None:
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    mariadb.execute("INSERT INTO t SELECT seq, seq FROM seq_1_to_120")
    renamed: list[bool] = []

    def rename_once(batch: list[Entry]) -> None:
        if not renamed and _snapshot_rows(batch, "t"):
            mariadb.execute("ALTER TABLE t RENAME COLUMN id TO ident")
            renamed.append(True)

    with Instance(_config(mariadb)) as inst:
        inst.snapshot([f"{mariadb.database}.t"], chunk_rows=10, max_rows_per_s=400)
        entries = _drain(inst, _snapshot_done(inst), react=rename_once)
    ddl_at = next(i for i, e in enumerate(entries) if e.row_change is not None and e.row_change.is_ddl)
    after = [r for e in entries[ddl_at:] for r in _snapshot_rows([e], "t")]
    assert {r["ident"] for r in after} == set(range(1, 121))  # all of it again under the new key: none skipped


def test_float_values_are_the_binlogs_so_a_keyless_window_matches(mariadb: MariaDBDatabase) -> None:
    mariadb.execute("CREATE TABLE f (x FLOAT, y DOUBLE)")  # no key: the window compares whole rows
    mariadb.execute("INSERT INTO f VALUES (1.1, 2.2), (3.3, 4.4), (0.1, 0.5)")
    with Instance(_config(mariadb)) as inst:
        inst.snapshot([f"{mariadb.database}.f"])
        mariadb.execute("DELETE FROM f WHERE x > 3")  # after the snapshot's position, or overtaking its read
        entries = _drain(
            inst, lambda es: _snapshot_done(inst)(es) and any(e.header.event_type is EventType.DELETE for e in es)
        )
    deleted = [r.before_dict() for e in entries if e.header.event_type is EventType.DELETE for r in e.iter_rows()]
    snapshot = _snapshot_rows(entries, "f")
    assert deleted == [{"x": 3.3, "y": 4.4}]  # the binlog's FLOAT value...
    assert {r["x"] for r in snapshot} <= {1.1, 3.3, 0.1}  # ...and the snapshot's are one model
    bag = Counter((r["x"], r["y"]) for r in snapshot)
    bag.subtract(Counter((r["x"], r["y"]) for r in deleted if (r["x"], r["y"]) in bag))
    assert +bag == Counter({(1.1, 2.2): 1, (0.1, 0.5): 1})  # the deleted row does not come back


@pytest.mark.parametrize("charset", ["utf8", "latin1"])
def test_snapshot_text_is_each_columns_real_value_whatever_the_connection_charset(
    mariadb: MariaDBDatabase, charset: str
) -> None:
    mariadb.execute(
        "CREATE TABLE s (id INT PRIMARY KEY, u VARCHAR(20) CHARACTER SET utf8mb4, l VARCHAR(5) CHARACTER SET latin1)"
    )
    mariadb.execute("INSERT INTO s VALUES (1, 'ok 😀', 'é'), (2, 'Ωμέγα', 'ß')")
    with Instance(_config(mariadb, charset=charset)) as inst:
        inst.snapshot([f"{mariadb.database}.s"])
        entries = _drain(inst, _snapshot_done(inst))
    rows = sorted(_snapshot_rows(entries, "s"), key=lambda r: r["id"])
    assert rows == [{"id": 1, "u": "ok 😀", "l": "é"}, {"id": 2, "u": "Ωμέγα", "l": "ß"}]


def test_a_resume_after_the_chunk_key_changed_reads_the_table_again(mariadb: MariaDBDatabase, tmp_path: Path) -> None:
    mariadb.execute("CREATE TABLE t (id INT NOT NULL, u INT NOT NULL, PRIMARY KEY (id))")
    mariadb.execute("INSERT INTO t SELECT seq, 1000 - seq FROM seq_1_to_100")  # u runs the other way
    config = _config(mariadb, tmp_path)
    with Instance(config) as inst:
        inst.snapshot([f"{mariadb.database}.t"], chunk_rows=10, max_rows_per_s=200)
        first = _drain(inst, lambda es: len(_snapshot_rows(es, "t")) >= 5)  # inside the first chunk: its key too
        cursor = inst.meta.get_cursor(inst.default_client)
        assert cursor is not None and isinstance(cursor.snapshot, SnapshotCursor)
        assert cursor.snapshot.key == ("id",) and cursor.snapshot.after is not None
    # while the destination is down, the key becomes another column ordered the other way
    mariadb.execute("ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (u)")
    with Instance(config) as inst:
        entries = _drain(inst, _snapshot_done(inst))
    seen = {r["id"] for r in _snapshot_rows(first, "t")} | {r["id"] for r in _snapshot_rows(entries, "t")}
    assert seen == set(range(1, 101))  # no row skipped (continuing by u's values after id's would skip most)
    assert {r["id"] for r in _snapshot_rows(entries, "t")} == set(range(1, 101))  # read again from its first row
