"""MariaDB's compressed columns (``VARCHAR / VARBINARY / TEXT / BLOB ... COMPRESSED``, binlog types 141 and 140) are
inflated to the values ``SELECT`` shows, whatever ``binlog_row_metadata`` says; and a column whose binlog type no
decoder reads stops only a destination that captures its table, with a ``ColumnTypeError`` naming the column.

MariaDB's format, as its ``field_comp.cc`` writes it: an empty value is nothing; else a header byte, then either the
value as it is (header 0: shorter than ``column_compression_threshold``, or no smaller compressed) or, for zlib
(method 8 in the high nibble), the value's length big-endian in the header's low 3 bits' worth of bytes and a raw
deflate stream (bit 3), or a zlib one with ``column_compression_zlib_wrap=ON``. The table map gives a compressed
VARCHAR its maximum bytes plus one (the header) and counts both types in its charset list.
"""

from __future__ import annotations

import os
import shutil
import struct
import time
import zlib
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("deltalake")

from binlog_corpus import split_events
from mirror_forms import FORMS, capture, mirror_all

from canal.config import InstanceConfig, MasterConfig, StoreConfig
from canal.errors import ColumnTypeError, NotRunningError
from canal.instance import Instance
from canal.protocol import EntryType
from canal.spark.testing import master_position
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration

TABLE = """CREATE TABLE {db}.c (
    id INT PRIMARY KEY,
    v VARCHAR(1000) COMPRESSED CHARACTER SET utf8mb4,
    l VARCHAR(300) COMPRESSED CHARACTER SET latin1,
    vb VARBINARY(2000) COMPRESSED,
    t TEXT COMPRESSED CHARACTER SET utf8mb4,
    b BLOB COMPRESSED,
    lt LONGTEXT COMPRESSED
) CHARACTER SET latin1"""


@pytest.fixture
def binlog_row_metadata(mariadb: MariaDBDatabase, request: pytest.FixtureRequest) -> Any:
    before = mariadb.execute("SELECT @@GLOBAL.binlog_row_metadata")[0][0]
    mariadb.execute(f"SET GLOBAL binlog_row_metadata = {request.param}")
    try:
        yield request.param
    finally:
        mariadb.execute(f"SET GLOBAL binlog_row_metadata = {before}")


@pytest.mark.parametrize("binlog_row_metadata", ["FULL", "NO_LOG"], indirect=True)
def test_compressed_columns_are_their_values_in_entries_and_the_mirror(
    mariadb: MariaDBDatabase, binlog_row_metadata: str, tmp_path: Path
) -> None:
    random_bytes = os.urandom(1500).hex()  # incompressible: stored with header 0 once it is no smaller compressed
    phases = [
        [
            "INSERT INTO {db}.c VALUES (1, 'short', 'é', x'00ff', 'x', x'01', 'q')",  # below the threshold
            "INSERT INTO {db}.c VALUES (2, REPEAT('abc€😀', 150), REPEAT('é', 300), REPEAT(x'00ff', 900), "
            "REPEAT('ab€', 5000), REPEAT(x'7f80', 30000), REPEAT('z', 100000))",
            f"INSERT INTO {{db}}.c VALUES (3, '', '', x'{random_bytes}', '', x'{random_bytes}', '')",
            "INSERT INTO {db}.c (id) VALUES (4)",
        ],
        [
            "SET SESSION column_compression_zlib_wrap = ON",  # a zlib stream rather than raw deflate
            "UPDATE {db}.c SET v = REPEAT('wrapped ', 100), t = CONCAT(t, REPEAT('!', 500)) WHERE id IN (1, 2)",
            "UPDATE {db}.c SET id = 5, vb = NULL WHERE id = 3",
            "DELETE FROM {db}.c WHERE id = 4",
        ],
    ]
    captured = capture(mariadb, tmp_path / "meta", [TABLE], phases, ["c"], columnar=binlog_row_metadata != "FULL")
    for phase in captured.phases:
        shown = {r["id"]: r for r in phase.selected["c"]}
        for e in phase.entries:
            if e.row_change is not None and not e.row_change.is_ddl and e.row_change.event_type.name != "DELETE":
                for row in e.row_change.rows:
                    image = row.after_dict()
                    assert image == shown[image["id"]], image["id"]
    types = {c.name: c.mysql_type for c in captured.rows()[0].after_columns}
    assert (types["v"], types["l"], types["vb"], types["b"]) == (
        "varchar(1000)",
        "varchar(300)",
        "varbinary(2000)",
        "blob",
    )
    # every form and mode once; below FULL metadata (a question of decoding: the rows decoded column by column,
    # as run_batches into a mirror decodes them) the typed form
    tried = [("merge_on_read", form) for form in FORMS] + [("copy_on_write", "typed")]
    failures = {
        (mode, form): mirror_all(captured, tmp_path / f"{mode}-{form}", form, mode=mode)
        for mode, form in (tried if binlog_row_metadata == "FULL" else [("merge_on_read", "typed")])
    }
    assert {k: v for k, v in failures.items() if v} == {}


def test_a_column_type_no_decoder_reads_stops_only_a_destination_that_captures_its_table(
    mariadb: MariaDBDatabase, tmp_path: Path
) -> None:
    """A table map whose column has a type code no decoder reads (a real binlog's INT column retyped 200): a
    destination filtering the table out reads on past it; one capturing it stops with ColumnTypeError naming
    ``db.table.column`` and the type -- not a ParseError of a "malformed" event, nor advice about metadata."""
    db = mariadb.database
    conn = mariadb.connect(autocommit=True)
    start = master_position(conn)
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE `{db}`.x (id INT PRIMARY KEY, odd INT)")
        cur.execute(f"CREATE TABLE `{db}`.keep (id INT PRIMARY KEY)")
        cur.execute(f"INSERT INTO `{db}`.x VALUES (1, 2)")
        cur.execute(f"INSERT INTO `{db}`.keep VALUES (7)")
    conn.close()
    files = tmp_path / "binlogs"
    files.mkdir()
    for path in Path(mariadb.server.datadir).glob("mysql-bin.[0-9]*"):
        shutil.copy(path, files)
    _retype_column(files / start[0], db, "x", column=1, code=200)

    def run(filter_regex: str) -> tuple[list[Any], BaseException | None]:
        config = InstanceConfig(
            destination="odd-type",
            master=MasterConfig(address=f"file://{files}", journal_name=start[0], position=start[1]),
            filter_regex=filter_regex,
            store=StoreConfig(batch_mode="ITEMSIZE"),
        )
        rows: list[Any] = []
        with Instance(config) as inst:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and inst.parser.error is None and not rows:
                try:
                    entries = inst.get(100, timeout=0.2).entries
                except NotRunningError:  # stopped on its error meanwhile
                    break
                for e in entries:
                    if e.entry_type is EntryType.ROWDATA and e.row_change is not None and not e.row_change.is_ddl:
                        rows.extend(r.after_dict() for r in e.row_change.rows)
            return rows, inst.parser.error

    rows, error = run(rf"{db}\.keep")
    assert rows == [{"id": 7}] and error is None
    rows, error = run(rf"{db}\..*")
    assert rows == [] and isinstance(error, ColumnTypeError)
    assert error.column == f"{db}.x.odd" and error.column_type == "binlog type 200"
    assert "binlog_row_metadata" not in str(error)


def _retype_column(path: Path, db: str, table: str, *, column: int, code: int) -> None:
    """Set the binlog type of ``column`` (a column without type metadata) in ``db.table``'s table maps of the binlog
    file at ``path`` to ``code``, the events' CRC32 made anew."""
    data = bytearray(path.read_bytes())
    name = f"{db}".encode()
    for offset, event in split_events(bytes(data)):
        if event[4] != 19:  # TABLE_MAP_EVENT
            continue
        body = 19 + 8  # header, table id, flags
        if event[body + 1 : body + 1 + event[body]] != name:
            continue
        at = body + 1 + event[body] + 1
        if event[at + 1 : at + 1 + event[at]] != table.encode():
            continue
        types = at + 1 + event[at] + 1 + 1  # the table name and its NUL, the column count (one byte here)
        data[offset + types + column] = code
        end = offset + len(event)
        struct.pack_into("<I", data, end - 4, zlib.crc32(bytes(data[offset : end - 4])))
    path.write_bytes(bytes(data))
