"""The mirror's foreign-key actions (:mod:`canal.lake.apply.cascade`) on hand-made change rows, without a server:
where it cannot follow an action it stops with :class:`MirrorCascadeError` and writes nothing of the batch (a child
without a primary key, SET DEFAULT, a parent DELETE without its before image, a child whose foreign key column a DDL
of the same batch renamed); where it can, a cascade reaches the grandchildren through rows the batch itself made."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

pytest.importorskip("deltalake")

from canal.lake.apply.stops import MirrorCascadeError
from canal.lake.forms.changes import arrow_schema
from canal.parse.cascade import CASCADE_TABLES, FOREIGN_KEY_ACTIONS
from canal.spark import DeltaMirror

P_LAYOUT = [["id", "int(11)", True]]
C_LAYOUT = [["id", "int(11)", True], ["pid", "int(11)", False]]


def _edge(table: str, ref: str, layout: Any, on_delete: str = "CASCADE") -> dict[str, Any]:
    return {
        "db": "s",
        "table": table,
        "layout": layout,
        "name": f"fk_{table}",
        "columns": ["pid"],
        "ref_db": "s",
        "ref_table": ref,
        "ref_columns": ["id"],
        "on_delete": on_delete,
        "on_update": "RESTRICT",
    }


def _dml(
    kind: str, table: str, values: dict[str, int], props: dict[str, str] | None = None, layout: Any = None
) -> dict[str, Any]:
    layout = layout or (P_LAYOUT if table in ("p", "x") else C_LAYOUT)
    text = json.dumps({k: str(v) for k, v in values.items()})
    return {
        "destination": "d",
        "schema": "s",
        "table": table,
        "type": kind,
        "is_ddl": False,
        "keys": json.dumps({"id": str(values["id"])}),
        "after": text if kind != "DELETE" else None,
        "before": text if kind == "DELETE" else None,
        "columns": json.dumps(layout),
        "props": None if props is None else json.dumps(props),
    }


class Crash(Exception):
    pass


def _ddl(sql: str, table: str) -> dict[str, Any]:
    return {"destination": "d", "schema": "s", "table": table, "type": "ALTER", "is_ddl": True, "sql": sql}


_BATCHES = itertools.count(1)


def _batch(*rows: dict[str, Any]) -> Any:
    """The rows as a batch, at binlog positions after every batch made before (as a stream's batches are)."""
    schema = arrow_schema()
    first = next(_BATCHES) * 1000
    filled = [
        {**{f.name: None for f in schema}, **row, "seq": i, "log_file": "mysql-bin.000001", "log_offset": first + i}
        for i, row in enumerate(rows)
    ]
    return pa.Table.from_pylist(filled, schema=schema)


def _marked(edges: list[dict[str, Any]]) -> dict[str, str]:
    children = sorted({(e["db"], e["table"]) for e in edges})
    return {CASCADE_TABLES: json.dumps([list(c) for c in children]), FOREIGN_KEY_ACTIONS: json.dumps(edges)}


def _ids(mirror: DeltaMirror, table: str) -> list[int]:
    return sorted(r["id"] for r in mirror.read("s", table).to_pylist())


@pytest.fixture
def mirror(tmp_path: Path) -> Any:
    mirror = DeltaMirror(tmp_path / "m")
    mirror.apply(
        _batch(
            _dml("INSERT", "p", {"id": 1}),
            _dml("INSERT", "c", {"id": 10, "pid": 1}),
            _dml("INSERT", "g", {"id": 100, "pid": 10}),
            _dml("INSERT", "x", {"id": 1}),
        ),
        1,
    )
    yield mirror
    mirror.close()


def test_a_cascade_reaches_grandchildren_the_batch_made(mirror: DeltaMirror) -> None:
    edges = [_edge("c", "p", C_LAYOUT), _edge("g", "c", C_LAYOUT)]
    mirror.apply(
        _batch(
            _dml("INSERT", "c", {"id": 11, "pid": 1}),
            _dml("INSERT", "g", {"id": 110, "pid": 11}),
            _dml("DELETE", "p", {"id": 1}, _marked(edges)),
            _dml("INSERT", "g", {"id": 111, "pid": 10}),  # after the cascade: a row of its own (no key checks)
        ),
        2,
    )
    assert (_ids(mirror, "p"), _ids(mirror, "c"), _ids(mirror, "g")) == ([], [], [111])


@pytest.mark.parametrize(
    ("edges", "extra", "message"),
    [
        ([_edge("c", "p", [["id", "int(11)", False], ["pid", "int(11)", False]])], [], "has no primary key"),
        ([_edge("c", "p", C_LAYOUT, on_delete="SET DEFAULT")], [], "SET DEFAULT is not followed"),
        ([_edge("c", "p", None)], [], "layout of s.c is not known"),
        ([_edge("c", "p", C_LAYOUT)], [_ddl("ALTER TABLE s.c RENAME COLUMN pid TO parent", "c")], "after the DDL"),
    ],
)
def test_a_cascade_the_mirror_cannot_follow_stops_with_nothing_written(
    mirror: DeltaMirror, edges: list[dict[str, Any]], extra: list[dict[str, Any]], message: str
) -> None:
    batch = _batch(*extra, _dml("INSERT", "p", {"id": 2}), _dml("DELETE", "p", {"id": 1}, _marked(edges)))
    for _ in range(2):  # a stop, not a skip
        with pytest.raises(MirrorCascadeError, match=message):
            mirror.apply(batch, 2)
        assert (_ids(mirror, "p"), _ids(mirror, "c"), _ids(mirror, "g")) == ([1], [10], [100])


def test_a_parent_delete_without_its_before_image_stops(mirror: DeltaMirror) -> None:
    row = {**_dml("DELETE", "p", {"id": 1}, _marked([_edge("c", "p", C_LAYOUT)])), "before": None}
    with pytest.raises(MirrorCascadeError, match="has no before image"):
        mirror.apply(_batch(row), 2)
    assert (_ids(mirror, "p"), _ids(mirror, "c")) == ([1], [10])


def test_a_batch_replayed_after_a_crash_applies_the_cascade_it_counted(mirror: DeltaMirror) -> None:
    """Steps: the ALTER of x, p's DELETE, c's and g's cascaded DELETEs, x's INSERT. A crash after c's step: the
    replay finds c10 gone, yet applies g's and x's steps (the expanded batch was kept)."""
    edges = [_edge("c", "p", C_LAYOUT), _edge("g", "c", C_LAYOUT)]
    batch = _batch(
        _dml("DELETE", "p", {"id": 1}, _marked(edges)),
        _ddl("ALTER TABLE s.x ADD COLUMN y INT", "x"),
        _dml("INSERT", "x", {"id": 2, "y": 5}, layout=[["id", "int(11)", True], ["y", "int(11)", False]]),
    )
    write = mirror._write_journal

    def crash_at(batch_id: int, done: int) -> None:
        write(batch_id, done)
        if done >= 3:
            raise Crash

    mirror._write_journal = crash_at  # type: ignore[method-assign]
    try:
        with pytest.raises(Crash):
            mirror.apply(batch, 2)
    finally:
        mirror._write_journal = write  # type: ignore[method-assign]
    assert (_ids(mirror, "p"), _ids(mirror, "c"), _ids(mirror, "g")) == ([], [], [100])  # g's step not yet
    mirror.apply(batch, 2)
    assert (_ids(mirror, "p"), _ids(mirror, "c"), _ids(mirror, "g"), _ids(mirror, "x")) == ([], [], [], [1, 2])
    mirror.apply(_batch(_dml("INSERT", "p", {"id": 3})), 3)
    assert not list(Path(mirror.root).glob("_pycanal_cascade.*"))  # kept until the next batch


@pytest.mark.parametrize("mode", ["merge_on_read", "copy_on_write"])
def test_a_cascade_names_a_float_key_as_the_source_does(tmp_path: Path, mode: Any) -> None:
    """A child keyed by a DOUBLE, inserted as -0.0 in the batch that cascades it away: the cascade's DELETE spells its
    key as the source's ``keys`` does (-0.0 as 0.0, one key), so the row goes; a row the mirror held as -0.0 too."""
    layout = [["id", "double", True], ["pid", "int(11)", False]]

    def child(kind: str, key: str, pid: int, props: dict[str, str] | None = None) -> dict[str, Any]:
        image = json.dumps({"id": key, "pid": str(pid)})
        return {
            **_dml(kind, "d", {"id": 0}, props, layout),
            "keys": json.dumps({"id": key.removeprefix("-")}, separators=(",", ":")),
            "after": image if kind != "DELETE" else None,
            "before": image if kind == "DELETE" else None,
        }

    edges = [_edge("d", "p", layout)]
    mirror = DeltaMirror(tmp_path / "m", mode=mode)
    try:
        mirror.apply(
            _batch(_dml("INSERT", "p", {"id": 1}), _dml("INSERT", "p", {"id": 2}), child("INSERT", "-0.0", 2)), 1
        )
        mirror.apply(_batch(_dml("DELETE", "p", {"id": 2}, _marked(edges))), 2)
        assert mirror.read("s", "d").num_rows == 0, "the row the mirror held as -0.0 cascaded away"
        mirror.apply(_batch(child("INSERT", "-0.0", 1), _dml("DELETE", "p", {"id": 1}, _marked(edges))), 3)
        assert mirror.read("s", "d").num_rows == 0, "the row the batch inserted as -0.0 cascaded away"
    finally:
        mirror.close()


def test_a_foreign_key_on_a_double_references_by_value(mirror: DeltaMirror) -> None:
    """A child whose DOUBLE foreign key holds 0.0 references a parent whose key image spells -0.0 (the server
    compares by value): the parent's DELETE cascades to it; a child referencing 1.5 stays."""
    parent_layout = [["id", "double", True]]
    child_layout = [["id", "int(11)", True], ["pid", "double", False]]

    def row(kind: str, table: str, image: dict[str, str], layout: Any, props: dict[str, str] | None = None) -> Any:
        text = json.dumps(image)
        key = image["id"].removeprefix("-") if image["id"] == "-0.0" else image["id"]
        return {
            **_dml(kind, table, {"id": 0}, props, layout),
            "keys": json.dumps({"id": key}, separators=(",", ":")),
            "after": text if kind != "DELETE" else None,
            "before": text if kind == "DELETE" else None,
        }

    edge = {**_edge("fc", "fp", child_layout), "ref_columns": ["id"]}
    mirror.apply(
        _batch(
            row("INSERT", "fp", {"id": "-0.0"}, parent_layout),
            row("INSERT", "fp", {"id": "1.5"}, parent_layout),
            row("INSERT", "fc", {"id": "1", "pid": "0.0"}, child_layout),
            row("INSERT", "fc", {"id": "2", "pid": "1.5"}, child_layout),
        ),
        2,
    )
    mirror.apply(_batch(row("DELETE", "fp", {"id": "-0.0"}, parent_layout, _marked([edge]))), 3)
    assert _ids(mirror, "fc") == [2]
