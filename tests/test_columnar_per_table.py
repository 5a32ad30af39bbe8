"""A table decodes one way when the consumer asks for columns, whatever the rows each of its events holds: by columns
when a full rows event holds ``binlog.COLUMNAR_MIN_ROWS`` row images or more, else as tuples.

A typed batch keeps a layout's columns only while every rows event of it comes as columns; the first tuples of it
turn every column decoded before them back into tuples (``ColumnarRows._tuples``) and type the batch row by row. When
the choice was made per event, an ordinary table's UPDATE events (before and after images: a few rows in 8 KB) and
the short last event of each statement came as tuples, and the embedded mirror paid that on every batch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyarrow")

from canal.config import InstanceConfig, StoreConfig
from canal.instance import Instance
from canal.lake.forms.typed_batch import entries_to_typed
from canal.position import journal_number
from canal.protocol import ColumnarRows, Entry, EntryType
from canal.spark.testing import master_position

pytestmark = pytest.mark.integration

# the Spark benchmark's table: a row image takes about 750 bytes (a full event holds 10 of them)
NARROW = (
    "CREATE TABLE narrow (id BIGINT PRIMARY KEY, qty INT NOT NULL, name VARCHAR(64), doc JSON, blob_ BLOB, "
    "at DATETIME(6), amount DECIMAL(12,2), state ENUM('new','paid'), ratio DOUBLE, note TEXT)"
)
WIDE_COLUMNS = 300  # INT, DOUBLE and VARCHAR(8) in turn: about 2 KB an image, 4 images a full event


def _wide_ddl() -> str:
    types = ("INT", "DOUBLE", "VARCHAR(8)")
    return (
        "CREATE TABLE wide (id INT PRIMARY KEY, "
        + ", ".join(f"c{i} {types[i % 3]}" for i in range(1, WIDE_COLUMNS))
        + ")"
    )


def _write(mariadb: Any) -> None:
    conn = mariadb.connect()
    with conn.cursor() as cur:
        narrow = [
            (
                i,
                i,
                f"customer-{i}",
                json.dumps({"id": i, "tags": ["a", "b"], "city": f"c{i}"}),
                bytes(200),
                f"2024-05-06 07:08:{i % 60:02d}.{i:06d}",
                f"{i}.25",
                "new",
                i / 7,
                f"a note about order {i}, " * 3,
            )
            for i in range(45)
        ]
        cur.executemany("INSERT INTO narrow VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)", narrow)  # events of ~10, last 5
        cur.execute("UPDATE narrow SET qty = qty + 1, state = 'paid'")  # events of ~5 rows, before and after images
        cur.execute("DELETE FROM narrow WHERE id >= 30")
        values = ", ".join(("1", "1.5", "'v'")[i % 3] for i in range(1, WIDE_COLUMNS))
        cur.execute("INSERT INTO wide VALUES " + ", ".join(f"({k}, {values})" for k in range(12)))
        cur.execute("UPDATE wide SET c1 = c1 + 1")
    conn.close()


def _entries(mariadb: Any, start: tuple[str, int], end: tuple[str, int], columnar: bool, meta: Path) -> list[Entry]:
    config = InstanceConfig(
        destination=f"per-table{int(columnar)}",
        master=mariadb.master(start),
        filter_regex=rf"{mariadb.database}\..*",
        store=StoreConfig(batch_mode="ITEMSIZE"),
        meta_mode="file",
        meta_dir=str(meta / str(columnar)),
    )
    stop = (journal_number(end[0]), end[1])
    out: list[Entry] = []
    inst = Instance(config)
    inst.decode_rows_by_column(columnar)
    with inst:
        while not out or (journal_number(out[-1].header.log_file), out[-1].header.next_offset) < stop:
            out.extend(inst.get(1000, timeout=0.1).entries)
    return [e for e in out if e.entry_type is EntryType.ROWDATA and e.row_change and not e.row_change.is_ddl]


def test_each_table_decodes_one_way_and_types_without_tuples(
    mariadb: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mariadb.execute(NARROW)
    mariadb.execute(_wide_ddl())
    start = master_position(mariadb.connect())
    _write(mariadb)
    end = master_position(mariadb.connect())
    by_columns = _entries(mariadb, start, end, True, tmp_path)
    forms = {
        (e.header.table, e.row_change.event_type.name, isinstance(e.row_change.rows, ColumnarRows))
        for e in by_columns
        if e.row_change is not None
    }
    narrow = [e for e in by_columns if e.header.table == "narrow"]
    assert len({len(e.row_change.rows) for e in narrow if e.row_change is not None}) > 1  # events of several sizes
    assert forms == {
        ("narrow", "INSERT", True),
        ("narrow", "UPDATE", True),
        ("narrow", "DELETE", True),
        ("wide", "INSERT", False),
        ("wide", "UPDATE", False),
    }

    made: list[int] = []
    tuples = ColumnarRows._tuples

    def counted(self: ColumnarRows, image: Any) -> Any:
        made.append(len(self))
        return tuples(self, image)

    monkeypatch.setattr(ColumnarRows, "_tuples", counted)
    typed = entries_to_typed(by_columns, "d", 1)
    assert made == []  # no column turned back into objects
    monkeypatch.undo()
    # the same typed batch as from rows decoded as tuples
    assert typed == entries_to_typed(_entries(mariadb, start, end, False, tmp_path), "d", 1)
