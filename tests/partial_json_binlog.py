"""MySQL 8 binlog files with partial JSON updates (``PARTIAL_UPDATE_ROWS_EVENT``), built byte by byte from MySQL's
documented layout (:mod:`mysql8_events`), for the decoder's and the mirror's tests.

The table is the one of ``json.binlog.000001`` in rust_mysql_common's test data (test-data/binlogs), whose
``CREATE TABLE`` that file logs::

    CREATE TABLE t(id INT PRIMARY KEY AUTO_INCREMENT, json_col JSON,
                   name VARCHAR(100) AS (json_col->>'$.name'), age INT AS (json_col->'$.age'))

A partial update's after image starts with the value options (a length-encoded integer, bit 0 PARTIAL_JSON) and a
bitmap of the table's JSON columns, a bit set where the column holds a diff (MySQL's ``Json_diff_vector``: a 4-byte
length, then per diff the operation, the path and, but for REMOVE, the value in binary JSON) instead of the
document.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import attrs
import mysql8_events as M

from canal.parse.mysql import packets as P

T_LONG, T_VARCHAR, T_JSON = 3, 15, 245
TABLE_ID = 0x77
COLUMNS = [
    ("id", T_LONG, b"", False),
    ("json_col", T_JSON, b"\x04", True),
    ("name", T_VARCHAR, struct.pack("<H", 400), True),  # VARCHAR(100) in utf8mb4: lengths in 2 bytes
    ("age", T_LONG, b"", True),
]
Diff = tuple[int, str, Any]


def table_map(schema: str = "mysql", table: str = "t") -> bytes:
    return M.table_map(TABLE_ID, schema, table, COLUMNS, collation=255)


def _id(value: int) -> bytes:
    return b"\x00" + struct.pack("<i", value)  # the before image of a MINIMAL update: the key alone, never NULL


def _json_cell(value: Any) -> bytes:
    return M.blob(M.json_doc(value))


def _name_age(name: str, age: int) -> bytes:
    data = name.encode()
    return struct.pack("<H", len(data)) + data + struct.pack("<i", age)


def whole(id_: int, doc: Any, name: str, age: int) -> bytes:
    """An image of every column (an INSERT's, a FULL update's before image)."""
    return b"\x00" + struct.pack("<i", id_) + _json_cell(doc) + _name_age(name, age)


def insert(rows: Sequence[tuple[int, Any, str, int]]) -> bytes:
    return M.rows_v2(TABLE_ID, 4, b"".join(whole(*row) for row in rows))


@attrs.frozen
class Whole:
    """A JSON column a partial update's row logs whole (its partial bit clear)."""

    doc: Any


def minimal_update(rows: Sequence[tuple[int, Sequence[Diff] | Whole, str, int]]) -> bytes:
    """A PARTIAL_UPDATE_ROWS_EVENT body under ``binlog_row_image=MINIMAL``: the before image holds ``id``, the after
    image ``json_col`` (diffs, or the whole document), ``name`` and ``age`` -- the layout ``json.binlog.000001``
    logs (MySQL writes the generated columns a diff changed)."""
    images = b""
    for id_, json_col, name, age in rows:
        diffed = not isinstance(json_col, Whole)
        images += _id(id_)
        images += M.lenenc(1) + bytes([1 if diffed else 0])  # PARTIAL_JSON, then the JSON column's partial bit
        images += b"\x00"  # no NULL among the three columns
        images += _json_cell(json_col.doc) if isinstance(json_col, Whole) else M.json_diff(*json_col)
        images += _name_age(name, age)
    return M.rows_v2(TABLE_ID, 4, images, update=True, present=[0], present_after=[1, 2, 3])


def full_update(rows: Sequence[tuple[tuple[int, Any, str, int], Sequence[Diff], str, int]]) -> bytes:
    """A PARTIAL_UPDATE_ROWS_EVENT body under ``binlog_row_image=FULL``: the whole before image, then the after image
    with ``json_col`` as diffs of it."""
    images = b""
    for before, diffs, name, age in rows:
        images += whole(*before)
        images += M.lenenc(1) + b"\x01" + b"\x00" + struct.pack("<i", before[0])
        images += M.json_diff(*diffs) + _name_age(name, age)
    return M.rows_v2(TABLE_ID, 4, images, update=True)


def delete(rows: Sequence[int]) -> bytes:
    return M.rows_v2(TABLE_ID, 4, b"".join(_id(i) for i in rows), present=[0])


def binlog_file(transactions: Sequence[Sequence[tuple[int, bytes]]], *, schema: str = "mysql") -> bytes:
    """A binlog file: the MySQL 8 format description, then each transaction's rows events (type, body) between a
    BEGIN and an XID, each after its table map."""
    out = bytearray(P.BINLOG_MAGIC) + M.fde()

    def add(type_code: int, body: bytes) -> None:
        end = len(out) + 19 + len(body) + 4
        out.extend(M.event(type_code, body, end))

    for n, events in enumerate(transactions, start=1):
        add(P.QUERY_EVENT, M.query("BEGIN", schema))
        for type_code, body in events:
            add(P.TABLE_MAP_EVENT, table_map(schema))
            add(type_code, body)
        add(P.XID_EVENT, M.xid(n))
    return bytes(out)


# the rows json.binlog.000001 logs in its PARTIAL_UPDATE_ROWS_EVENT (at 3750): per id, age + 1 by JSON_SET
PEER_ROWS = [
    (1, [(M.REPLACE, "$.age", 26)], "Joe", 26),
    (2, [(M.REPLACE, "$.age", 34)], "Sue", 34),
    (3, [(M.REPLACE, "$.age", 42)], "Pete", 42),
    (4, [(M.REPLACE, "$.age", 26)], "Joe", 26),
    (5, [(M.REPLACE, "$.age", 34)], "Sue", 34),
    (6, [(M.REPLACE, "$.age", 42)], "Pete", 42),
]
PEER_OFFSET = 3750
