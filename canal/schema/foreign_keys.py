"""Foreign keys as the schema history keeps them, and the edges a parent's row change follows through them.

InnoDB applies a foreign key's ``ON DELETE`` / ``ON UPDATE`` action to the child's rows itself, and the binlog logs
only the parent's row change (:mod:`canal.parse.cascade`). The history keeps each table's foreign keys
(:class:`ForeignKey`), from its bootstrap (``information_schema``) and from DDL, so a consumer can apply the actions
itself: :func:`action_edges` lists the keys a parent's change reaches, children's children included, in the JSON form
of the header prop ``FOREIGN_KEY_ACTIONS`` (:mod:`canal.parse.cascade`), from the catalog's :func:`action_index`
(built once per catalog state: a lookup costs the edges it follows, not a pass over every table).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

import attrs

__all__ = ["CHANGING_ACTIONS", "ActionIndex", "ForeignKey", "action_edges", "action_index", "generated_name"]

CHANGING_ACTIONS: Final = frozenset({"CASCADE", "SET NULL", "SET DEFAULT"})
"""The actions that change the child's rows (RESTRICT and NO ACTION only refuse the parent's change)."""


@attrs.frozen(slots=True)
class ForeignKey:
    """One foreign key of a (child) table: its constraint ``name``, the child's ``columns``, the referenced table
    ``ref_db.ref_table`` and its ``ref_columns`` (in the same order), and the actions upper-cased (RESTRICT when none
    is declared: InnoDB's default)."""

    name: str
    columns: tuple[str, ...]
    ref_db: str
    ref_table: str
    ref_columns: tuple[str, ...]
    on_delete: str = "RESTRICT"
    on_update: str = "RESTRICT"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "columns": list(self.columns),
            "ref_db": self.ref_db,
            "ref_table": self.ref_table,
            "ref_columns": list(self.ref_columns),
            "on_delete": self.on_delete,
            "on_update": self.on_update,
        }

    @classmethod
    def from_dict(cls, doc: Any) -> ForeignKey:
        return cls(
            str(doc["name"]),
            tuple(str(c) for c in doc["columns"]),
            str(doc["ref_db"]),
            str(doc["ref_table"]),
            tuple(str(c) for c in doc["ref_columns"]),
            str(doc.get("on_delete", "RESTRICT")),
            str(doc.get("on_update", "RESTRICT")),
        )


def normal_action(action: str | None) -> str:
    """An action as written (None when not declared) as the server reports it: NO ACTION is RESTRICT in InnoDB."""
    if action is None:
        return "RESTRICT"
    action = " ".join(action.upper().split())
    return "RESTRICT" if action == "NO ACTION" else action


def generated_name(table: str, taken: Iterable[str]) -> str:
    """The name InnoDB gives an unnamed foreign key of ``table``: ``<table>_ibfk_<n>``, ``n`` one more than the
    highest such number taken."""
    prefix = f"{table}_ibfk_".lower()
    numbers = [
        int(n[len(prefix) :]) for n in (t.lower() for t in taken) if n.startswith(prefix) and n[len(prefix) :].isdigit()
    ]
    return f"{table}_ibfk_{max(numbers, default=0) + 1}"


ActionIndex = dict[tuple[str, str], list[tuple[str, str, ForeignKey]]]
"""``(parent db, parent table)`` -> the ``(child db, child table, key)`` of each foreign key whose action changes the
child's rows (:func:`action_index`)."""


def action_index(tables: Iterable[tuple[str, str, tuple[ForeignKey, ...]]]) -> ActionIndex:
    """The foreign keys whose action changes rows, by the table they reference. ``tables`` holds every table's
    ``(db, name, foreign_keys)``: built once for a catalog (a pass over every table), it serves the edges of each
    of its tables (:func:`action_edges`), so the lookup of one table does not cost a pass over all of them."""
    by_parent: ActionIndex = {}
    for child_db, child, keys in tables:
        for key in keys:
            if key.on_delete in CHANGING_ACTIONS or key.on_update in CHANGING_ACTIONS:
                by_parent.setdefault((key.ref_db, key.ref_table), []).append((child_db, child, key))
    return by_parent


def action_edges(index: ActionIndex, db: str, table: str) -> list[dict[str, Any]]:
    """The foreign keys whose action changes rows when a row of ``db.table`` is deleted or has its referenced
    columns changed, followed from child to child (a child's SET NULL / CASCADE changes its own referenced columns
    in turn), each once: dicts of :meth:`ForeignKey.to_dict` with ``db`` and ``table`` naming the child.
    ``index`` is the catalog's :func:`action_index`."""
    edges: list[dict[str, Any]] = []
    seen: set[tuple[str, str, str]] = set()
    todo = [(db, table)]
    while todo:
        parent = todo.pop(0)
        for child_db, child, key in index.get(parent, ()):
            if (child_db, child, key.name) in seen:
                continue
            seen.add((child_db, child, key.name))
            edges.append({"db": child_db, "table": child, **key.to_dict()})
            todo.append((child_db, child))
    return edges
