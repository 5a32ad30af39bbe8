"""The mirror's XA holding (:mod:`canal.lake.apply.xa`) on hand-made change rows, without a server: prepared rows
wait for their XA COMMIT in a later batch, a batch replayed after a crash (before or after its steps) applies them
once, a rollback drops them, and xids written differently name one transaction."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

pytest.importorskip("deltalake")

from canal.lake.apply.xa import MirrorXAError
from canal.lake.forms.changes import arrow_schema
from canal.parse.xa import xid_key
from canal.spark import DeltaMirror

COLUMNS = json.dumps([["id", "int(11)", True], ["v", "int(11)", False]])


def _row(
    kind: str, n: int = 0, xid: str | None = None, sql: str | None = None, table: str = "t", recovered: str = ""
) -> dict[str, Any]:
    """``recovered``: the XA PREPARE (file:offset) the parser read the row back from (prop XA_RECOVERED)."""
    props = None
    if xid is not None:
        marks = {"XA_XID": xid} if kind in ("INSERT", "DELETE") else {"XA_TYPE": kind, "XA_XID": xid}
        props = json.dumps({**marks, "XA_RECOVERED": recovered} if recovered else marks)
    dml = kind in ("INSERT", "DELETE")
    return {
        "destination": "d",
        "schema": "s",
        "table": table if dml else "",
        "type": kind,
        "is_ddl": kind in ("XACOMMIT", "XAROLLBACK"),
        "sql": sql,
        "keys": json.dumps({"id": str(n)}) if dml else None,
        "after": json.dumps({"id": str(n), "v": str(n * 10)}) if kind == "INSERT" else None,
        "before": json.dumps({"id": str(n), "v": str(n * 10)}) if kind == "DELETE" else None,
        "columns": COLUMNS if dml else None,
        "props": props,
        "log_file": "mysql-bin.000001",
    }


_BATCHES = itertools.count(1)


def _batch(*rows: dict[str, Any]) -> Any:
    """The rows as a batch, at binlog positions after every batch made before (as a stream's batches are)."""
    schema = arrow_schema()
    first = next(_BATCHES) * 1000
    filled = [
        {**{f.name: None for f in schema}, **row, "seq": i, "log_offset": first + i} for i, row in enumerate(rows)
    ]
    return pa.Table.from_pylist(filled, schema=schema)


def _ids(mirror: DeltaMirror) -> list[int]:
    if not mirror.table_path("s", "t").exists():
        return []
    return sorted(r["id"] for r in mirror.read("s", "t").to_pylist())


def test_prepared_rows_wait_for_their_commit_and_replays_apply_them_once(tmp_path: Path) -> None:
    mirror = DeltaMirror(tmp_path / "m")
    mirror.apply(_batch(_row("INSERT", 1), _row("INSERT", 2, xid="X'7831',X'',1")), 1)
    assert _ids(mirror) == [1]
    mirror.apply(_batch(_row("INSERT", 3, xid="X'7831',X'',1"), _row("XAPREPARE", xid="X'7831',X'',1")), 2)
    assert _ids(mirror) == [1]
    mirror.close()  # a restarted mirror takes the root over (one writer a root and app id)
    commit = _batch(_row("INSERT", 4), _row("XACOMMIT", xid="X'7831',X'',1", sql="XA COMMIT X'7831',X'',1"))
    for _ in range(3):  # the batch and two replays (the same id): the rows once
        with DeltaMirror(tmp_path / "m") as restarted:
            restarted.apply(commit, 3)
        assert _ids(DeltaMirror(tmp_path / "m")) == [1, 2, 3, 4]
    # a later batch forgets the committed transaction's rows; the xid can be used again
    mirror = DeltaMirror(tmp_path / "m")
    mirror.apply(
        _batch(
            _row("DELETE", 1, xid="'x1'"),
            _row("XAPREPARE", xid="'x1'"),
            _row("XAROLLBACK", xid="'x1'", sql="XA ROLLBACK 'x1'"),
        ),
        4,
    )
    assert _ids(mirror) == [1, 2, 3, 4]
    held = sorted(p.name for p in (tmp_path / "m" / "_pycanal_xa.pycanal-mirror").iterdir())
    assert held == [b"7831::1".hex() + ".done.4"]  # what batch 3 held is gone; batch 4 may still be replayed


def test_a_commit_of_unknown_rows_stops_with_nothing_written(tmp_path: Path) -> None:
    mirror = DeltaMirror(tmp_path / "m")
    mirror.apply(_batch(_row("INSERT", 1)), 1)
    batch = _batch(_row("INSERT", 2), _row("XACOMMIT", xid="'early'", sql="XA COMMIT 'early'"))
    with pytest.raises(MirrorXAError, match=r"XA COMMIT 'early'.* at mysql-bin\.000001:\d+ commits XA transaction"):
        mirror.apply(batch, 2)
    assert _ids(mirror) == [1]
    # a rollback of unknown rows needs nothing
    mirror.apply(_batch(_row("INSERT", 2), _row("XAROLLBACK", xid="'early'", sql="XA ROLLBACK 'early'")), 3)
    assert _ids(mirror) == [1, 2]


def test_rows_read_back_for_a_commit_are_applied_at_it_once(tmp_path: Path) -> None:
    """The parser read the rows of an XA PREPARE before the stream's start back; they may span batches."""
    xid, at = "X'6561726c79',X'',1", "mysql-bin.000001:4"
    mirror = DeltaMirror(tmp_path / "m")
    mirror.apply(_batch(_row("INSERT", 1), _row("INSERT", 2, xid=xid, recovered=at)), 1)
    assert _ids(mirror) == [1]  # held until the commit
    mirror.close()
    commit = _batch(
        _row("DELETE", 1, xid=xid, recovered=at),
        _row("XACOMMIT", xid=xid, sql=f"XA COMMIT {xid}", recovered=at),
        _row("INSERT", 5),
    )
    for _ in range(3):  # the batch and two replays (the same id): the rows once
        with DeltaMirror(tmp_path / "m") as restarted:
            restarted.apply(commit, 2)
        assert _ids(DeltaMirror(tmp_path / "m")) == [2, 5]


def test_rows_read_back_yield_to_the_rows_the_mirror_holds(tmp_path: Path) -> None:
    """The mirror saw the XA PREPARE, then the parser restarted past it and read the rows back at the commit: the
    held rows are applied, those read back (the same rows) are not applied again."""
    xid, at = "'x1'", "mysql-bin.000001:4"
    mirror = DeltaMirror(tmp_path / "m")
    mirror.apply(_batch(_row("INSERT", 2, xid=xid), _row("XAPREPARE", xid=xid)), 1)
    assert _ids(mirror) == []
    read_back = _row("INSERT", 7, xid=xid, recovered=at)  # differs only to show which rows are applied
    mirror.apply(_batch(read_back, _row("XACOMMIT", xid=xid, sql="XA COMMIT 'x1'", recovered=at)), 2)
    assert _ids(mirror) == [2]


def test_xid_spellings() -> None:
    assert xid_key("X'7831',X'',1") == xid_key("'x1'") == xid_key("'x1' ONE PHASE") == xid_key("x'7831'")
    assert xid_key("'x1','b',2") == "7831:62:2"
    assert xid_key("'x1'") != xid_key("'x2'")


def test_spark_tasks_leave_marked_rows_and_statements_to_the_driver() -> None:
    """A one-partition micro-batch is written by its task unless it needs the driver's apply: DDL, statements, rows
    marked in props (XA, cascades)."""
    from canal.spark.mirror_tasks import _for_the_driver

    assert not _for_the_driver(_batch(_row("INSERT", 1), _row("DELETE", 2)))
    assert _for_the_driver(_batch(_row("INSERT", 1), _row("INSERT", 2, xid="'x1'")))
    statement = {**_row("INSERT", 3), "sql": "INSERT INTO t VALUES (3, 30)", "columns": None, "keys": None}
    assert _for_the_driver(_batch(_row("INSERT", 1), statement))
