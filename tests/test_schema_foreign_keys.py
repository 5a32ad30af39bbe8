"""The schema history's foreign keys: from CREATE TABLE and ALTER TABLE ADD/DROP FOREIGN KEY, followed through column
and table renames, not copied by CREATE TABLE ... LIKE, kept in the persisted history (and a history written before
foreign keys were kept still loads), and the edges a parent's row change follows (:func:`action_edges`)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from canal.position import EntryPosition
from canal.schema import foreign_keys as foreign_keys_module
from canal.schema import history as history_module
from canal.schema.catalog import SchemaCatalog
from canal.schema.foreign_keys import ForeignKey, action_edges, action_index
from canal.schema.history import MemoryHistoryStore, SchemaHistory
from canal.sql import read_statement


def _catalog(*sql: str) -> SchemaCatalog:
    catalog = SchemaCatalog(database="d", mariadb=True)
    for text in sql:
        catalog.apply(read_statement(text))
    return catalog


def _edges(catalog: SchemaCatalog, table: str) -> list[tuple[str, str, str, str]]:
    found = action_edges(action_index((t.db, t.name, t.foreign_keys) for t in catalog), "d", table)
    return [(e["table"], e["name"], e["on_delete"], e["on_update"]) for e in found]


def test_create_alter_rename_and_like() -> None:
    catalog = _catalog(
        "CREATE TABLE p (id INT PRIMARY KEY, u INT UNIQUE)",
        "CREATE TABLE c (id INT PRIMARY KEY, pid INT, pu INT, FOREIGN KEY (pid) REFERENCES p (id) ON DELETE CASCADE,"
        " CONSTRAINT fu FOREIGN KEY (pu) REFERENCES p (u) ON UPDATE CASCADE ON DELETE SET NULL)",
        "CREATE TABLE g (id INT PRIMARY KEY, cid INT, CONSTRAINT fg FOREIGN KEY (cid) REFERENCES c (id)"
        " ON DELETE CASCADE)",
    )
    c = catalog.get("d", "c")
    assert c is not None
    assert c.foreign_keys == (
        ForeignKey("c_ibfk_1", ("pid",), "d", "p", ("id",), "CASCADE", "RESTRICT"),
        ForeignKey("fu", ("pu",), "d", "p", ("u",), "SET NULL", "CASCADE"),
    )
    assert _edges(catalog, "p") == [
        ("c", "c_ibfk_1", "CASCADE", "RESTRICT"),
        ("c", "fu", "SET NULL", "CASCADE"),
        ("g", "fg", "CASCADE", "RESTRICT"),
    ]
    catalog.apply(read_statement("CREATE TABLE c2 LIKE c"))
    assert catalog.get("d", "c2") is not None and catalog.get("d", "c2").foreign_keys == ()  # type: ignore[union-attr]
    catalog.apply(read_statement("ALTER TABLE c DROP FOREIGN KEY c_ibfk_1, RENAME COLUMN pu TO pu2"))
    catalog.apply(read_statement("ALTER TABLE p RENAME COLUMN u TO u2"))
    catalog.apply(read_statement("RENAME TABLE p TO p2"))
    c = catalog.get("d", "c")
    assert c is not None and c.foreign_keys == (ForeignKey("fu", ("pu2",), "d", "p2", ("u2",), "SET NULL", "CASCADE"),)
    catalog.apply(read_statement("ALTER TABLE c ADD FOREIGN KEY (pid) REFERENCES p2 (id) ON DELETE NO ACTION"))
    c = catalog.get("d", "c")
    assert c is not None and c.foreign_keys[-1] == ForeignKey("c_ibfk_1", ("pid",), "d", "p2", ("id",))
    assert _edges(catalog, "p") == []


def test_history_keeps_foreign_keys_and_reads_old_documents() -> None:
    store = MemoryHistoryStore()
    history = SchemaHistory(store)
    at = EntryPosition("mysql-bin.000001", 4, 1000)
    history.bootstrap(at, _catalog("CREATE TABLE p (id INT PRIMARY KEY)"))
    history.apply(
        EntryPosition("mysql-bin.000001", 100, 2000),
        "d",
        "CREATE TABLE c (id INT PRIMARY KEY, pid INT, FOREIGN KEY (pid) REFERENCES p (id) ON DELETE CASCADE)",
    )
    text = history.to_json()
    again = SchemaHistory(MemoryHistoryStore())
    again._load(text)
    c = again.table("d", "c")
    assert c is not None and c.foreign_keys == (ForeignKey("c_ibfk_1", ("pid",), "d", "p", ("id",), "CASCADE"),)
    # a document written before keys were kept: its snapshots have no such member; its records' DDL replays them
    history.apply(EntryPosition("mysql-bin.000001", 200, 3000), "d", "CREATE TABLE x (id INT PRIMARY KEY)")
    history._compact(EntryPosition("mysql-bin.000001", 300, 4000))
    snap = history.to_json()
    old = SchemaHistory(MemoryHistoryStore())
    old._load(snap.replace('"foreign_keys"', '"unread_member"'))
    assert old.table("d", "x") is not None
    c = old.table("d", "c")
    assert c is not None and c.foreign_keys == ()


def test_show_create_and_repair_keep_foreign_keys() -> None:
    catalog = _catalog(
        "CREATE TABLE p (id INT PRIMARY KEY)",
        "CREATE TABLE c (id INT PRIMARY KEY, pid INT, CONSTRAINT f FOREIGN KEY (pid) REFERENCES p (id) "
        "ON DELETE SET NULL ON UPDATE CASCADE)",
    )
    c = catalog.get("d", "c")
    assert c is not None
    again = _catalog("CREATE TABLE p (id INT PRIMARY KEY)", c.show_create(mariadb=True))
    again_table = again.get("d", "c")
    assert again_table is not None and again_table.foreign_keys == c.foreign_keys
    history = SchemaHistory(MemoryHistoryStore())
    history.bootstrap(EntryPosition("mysql-bin.000001", 4, 1000), catalog)
    # the binlog names a column the history did not know: its layout wins, the foreign keys stay
    wider = attrs.evolve(c, columns=(*c.columns, attrs.evolve(c.columns[0], name="extra")), foreign_keys=())
    assert history.repair(EntryPosition("mysql-bin.000001", 100, 2000), wider)
    repaired = history.table("d", "c")
    assert repaired is not None and repaired.foreign_keys == c.foreign_keys
    reloaded = SchemaHistory(MemoryHistoryStore())
    reloaded._load(history.to_json())  # the repair's record replays them
    again_c = reloaded.table("d", "c")
    assert again_c is not None and again_c.foreign_keys == c.foreign_keys


def test_history_indexes_the_foreign_keys_once_per_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each table's first DELETE / UPDATE asks for its edges: the catalog's index of foreign keys is built once per
    state, not once per table (a pass over every table for each one made a stream over 2,000 tables quadratic), and
    a DDL that adds a key is seen by the next lookup."""
    built: list[int] = []
    real = foreign_keys_module.action_index

    def counting(tables: Any) -> Any:
        built.append(1)
        return real(tables)

    monkeypatch.setattr(history_module, "action_index", counting)
    history = SchemaHistory(MemoryHistoryStore())
    tables = [f"CREATE TABLE t{i} (id INT PRIMARY KEY, pid INT)" for i in range(50)]
    history.bootstrap(
        EntryPosition("mysql-bin.000001", 4, 1000), _catalog("CREATE TABLE p (id INT PRIMARY KEY)", *tables)
    )
    for i in range(50):
        assert history.foreign_key_actions("d", f"t{i}") == []
    assert history.foreign_key_actions("d", "p") == []
    assert len(built) == 1
    history.apply(
        EntryPosition("mysql-bin.000001", 100, 2000),
        "d",
        "ALTER TABLE t7 ADD CONSTRAINT f7 FOREIGN KEY (pid) REFERENCES p (id) ON DELETE CASCADE",
    )
    edges = history.foreign_key_actions("d", "p")
    assert [(e["table"], e["name"], e["on_delete"]) for e in edges] == [("t7", "f7", "CASCADE")]
    assert edges[0]["layout"] == [["id", "int(11)", True], ["pid", "int(11)", False]]
    assert all(history.foreign_key_actions("d", f"t{i}") == [] for i in range(50))
    assert len(built) == 2
