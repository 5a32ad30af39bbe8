"""The schema history's persisted form: one JSON document of its snapshots (a whole catalog each) and its records
(a DDL each, with its position and session), written through a :class:`~canal.schema.history_store.HistoryStore` on
every change (:class:`canal.schema.history.SchemaHistory`). Each snapshot and record encodes its JSON once, when it
is made: the document is written again at every DDL, and a snapshot never changes.

Older documents stay readable: what they lack (a statement's sql_mode, a table's foreign keys and other keys,
VIRTUAL columns, views, triggers and routines) reads as what they had then.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from canal.errors import SchemaError
from canal.position import EntryPosition
from canal.schema.catalog import SchemaCatalog, TableDef
from canal.schema.columns import TableColumn
from canal.schema.foreign_keys import ForeignKey
from canal.schema.keys import TableKey
from canal.schema.objects import ObjectCatalog

__all__ = [
    "FORMAT_VERSION",
    "Document",
    "Record",
    "Snapshot",
    "catalog_from_dict",
    "catalog_to_dict",
    "decode",
    "encode",
]

FORMAT_VERSION: Final = 1


@attrs.frozen(slots=True)
class Record:
    position: EntryPosition  # the DDL event's own position
    after: EntryPosition  # where the next event starts: the state after the DDL applies from here
    schema: str  # the session database it ran in
    sql: str
    sql_mode: int | None = None  # the statement's, as logged (canal.sql.modes: how its text reads)
    encoded: str = attrs.field(eq=False, init=False)  # its JSON, made once (the document is written on every DDL)

    def __attrs_post_init__(self) -> None:
        doc = {
            "position": self.position.to_dict(),
            "after": self.after.to_dict(),
            "schema": self.schema,
            "sql": self.sql,
            **({} if self.sql_mode is None else {"sql_mode": self.sql_mode}),
        }
        object.__setattr__(self, "encoded", json.dumps(doc, separators=(",", ":"), ensure_ascii=False))


@attrs.frozen(slots=True)
class Snapshot:
    position: EntryPosition  # the first event position the state applies to
    catalog: SchemaCatalog = attrs.field(eq=False)
    unknown: Mapping[str, str] = attrs.field(eq=False)  # db.table -> why its layout is unknown
    # its JSON, made once: a snapshot never changes, and the document is written on every DDL
    encoded: str = attrs.field(eq=False, init=False)

    def __attrs_post_init__(self) -> None:
        doc = {
            "position": self.position.to_dict(),
            "catalog": catalog_to_dict(self.catalog),
            "unknown": dict(self.unknown),
        }
        object.__setattr__(self, "encoded", json.dumps(doc, separators=(",", ":"), ensure_ascii=False))


@attrs.frozen(slots=True)
class Document:
    """A history as its document holds it."""

    mariadb: bool
    origin: str | None
    snapshots: list[Snapshot]
    records: list[Record]


def encode(mariadb: bool, origin: str | None, snapshots: Sequence[Snapshot], records: Sequence[Record]) -> str:
    """The document of a history (its snapshots and records encoded once each, when made)."""
    head = json.dumps({"version": FORMAT_VERSION, "mariadb": mariadb, "origin": origin}, separators=(",", ":"))
    encoded_records = ",".join(record.encoded for record in records)
    encoded_snapshots = ",".join(snapshot.encoded for snapshot in snapshots)
    return f'{head[:-1]},"snapshots":[{encoded_snapshots}],"records":[{encoded_records}]}}'


def decode(text: str, mariadb: bool, where: str) -> Document:
    """The history the document ``text`` holds (``mariadb``: the spelling of types where it does not say); a
    damaged document (read from ``where``) raises :class:`~canal.errors.SchemaError`."""
    try:
        doc = json.loads(text)
        if doc.get("version") != FORMAT_VERSION:
            raise SchemaError(f"schema history format {doc.get('version')!r} is not {FORMAT_VERSION}")
        mariadb = bool(doc.get("mariadb", mariadb))
        origin = doc.get("origin")
        snapshots = [
            Snapshot(
                EntryPosition.from_dict(s["position"]),
                catalog_from_dict(s["catalog"], mariadb),
                dict(s.get("unknown", {})),
            )
            for s in doc["snapshots"]
        ]
        records = [
            Record(
                EntryPosition.from_dict(r["position"]),
                EntryPosition.from_dict(r["after"]),
                str(r["schema"]),
                str(r["sql"]),
                r.get("sql_mode"),  # none in older documents: the default mode
            )
            for r in doc["records"]
        ]
    except (KeyError, TypeError, ValueError) as exc:
        raise SchemaError(f"the schema history document in {where} is damaged: {exc}") from None
    return Document(mariadb, None if origin is None else str(origin), snapshots, records)


def _column_to_dict(c: TableColumn) -> dict[str, Any]:
    out = attrs.asdict(c, recurse=False) | {"params": list(c.params), "labels": list(c.labels)}
    if c.virtual_of is None:
        del out["virtual_of"]  # documents stay as they were for tables without VIRTUAL columns
    else:
        out["virtual_of"] = list(c.virtual_of)
    return out


def _virtual(column: Mapping[str, Any]) -> dict[str, Any]:
    """A column document's ``virtual_of`` as a tuple (none in older documents)."""
    names = column.get("virtual_of")
    return {} if names is None else {"virtual_of": tuple(names)}


def catalog_to_dict(catalog: SchemaCatalog) -> dict[str, Any]:
    return {
        "charset": catalog.charset,
        "databases": dict(catalog.databases),
        "tables": [
            {
                "db": t.db,
                "name": t.name,
                "charset": t.charset,
                "primary": list(t.primary),
                "columns": [_column_to_dict(c) for c in t.columns],
            }
            | ({"foreign_keys": [k.to_dict() for k in t.foreign_keys]} if t.foreign_keys else {})
            | ({"keys": [k.to_dict() for k in t.keys]} if t.keys else {})
            for t in catalog
        ],
        "objects": catalog.objects.to_dict(),
    }


def catalog_from_dict(doc: Mapping[str, Any], mariadb: bool) -> SchemaCatalog:
    catalog = SchemaCatalog(charset=str(doc["charset"]), mariadb=mariadb)
    catalog.databases = {str(k): v for k, v in doc["databases"].items()}
    for t in doc["tables"]:
        columns = tuple(
            TableColumn(**{**c, "params": tuple(c["params"]), "labels": tuple(c["labels"]), **_virtual(c)})
            for c in t["columns"]
        )
        keys = tuple(ForeignKey.from_dict(k) for k in t.get("foreign_keys", ()))  # none in older documents
        others = tuple(TableKey.from_dict(k) for k in t.get("keys", ()))  # none in older documents
        table = TableDef(str(t["db"]), str(t["name"]), columns, tuple(t["primary"]), str(t["charset"]), keys, others)
        catalog.tables[table.full_name] = table
    catalog.objects = ObjectCatalog.from_dict(doc.get("objects"))  # older documents: none known, and none seen
    return catalog
