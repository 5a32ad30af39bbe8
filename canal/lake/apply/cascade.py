"""Foreign keys' actions the binlog does not log, applied by the mirror itself.

For ``ON DELETE CASCADE``, ``ON DELETE SET NULL`` and ``ON UPDATE CASCADE`` / ``SET NULL`` the server logs only the
parent's row change; InnoDB changes the children's rows unlogged. The source names, on each DELETE / UPDATE row of
such a statement, the foreign keys its change follows (header prop ``FOREIGN_KEY_ACTIONS``,
:mod:`canal.parse.cascade`). :func:`expand_cascades` adds to the batch, right after each such parent row, the change
rows InnoDB made: a DELETE of each child row whose foreign key columns held the parent's old referenced values
(``CASCADE`` on delete), or an UPDATE setting them to the parent's new values (``CASCADE`` on update) or to NULL
(``SET NULL``) -- then the same for those rows' own children, as InnoDB goes on. The added rows carry the parent's
``seq`` (ties keep their order), so the mirror applies them in the server's order relative to the children's own
rows of the batch.

The child rows a parent's change reaches are found in the child's mirror as it was before the batch, overlaid with
the batch's earlier rows of that child (inserted, updated, deleted, and changed by earlier cascades). Values compare
as canal text, as the binlog holds them -- but a FLOAT / DOUBLE -0.0, which a key and a foreign key compare as 0.0
(as the server does, :mod:`canal.lake.key_identity`).

Where the mirror cannot follow it stops with :class:`~canal.lake.apply.stops.MirrorCascadeError`, nothing of the
batch written: a child without a primary key, a child whose layout the source did not know, a parent row whose image
lacks a referenced column (``binlog_row_image`` MINIMAL), ``SET DEFAULT``, a child a DDL of the same batch changed
before a cascade reached it, or a cascade through a table the mirror does not mirror (its ``tables`` option) to one it
does. A marked statement without ``FOREIGN_KEY_ACTIONS`` (no schema history) stops as before
(:func:`~canal.lake.apply.stops.check_cascades`).

A batch replayed after a crash must be the batch its journaled steps counted, but the children are then as the
crash left them (the rows a cascade removed are gone, so it would add fewer rows, and a step of only those rows
would be missing). So the expanded batch is kept beside the tables (:class:`ExpandedBatch`) until the next batch,
and a replay applies that one.

Known limit: text comparison is exact, so a string key under a case-insensitive collation matches only rows spelt
alike.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from canal.lake.apply.stops import MirrorCascadeError
from canal.lake.ddl.ddl_text import statement_mode
from canal.lake.forms import json_diffs
from canal.lake.forms.cell_text import encode_value
from canal.lake.key_identity import is_float_type, key_text
from canal.lake.store import fs
from canal.mysql_json import JsonDiffError
from canal.parse.cascade import FOREIGN_KEY_ACTIONS
from canal.schema.history import layout_statement
from canal.sql import (
    DEFAULT_MODE,
    AddKey,
    AlterTable,
    ChangeColumn,
    CreateTable,
    DropColumn,
    DropKey,
    DropTable,
    RenameColumn,
    RenameTo,
    SqlMode,
    TruncateTable,
)

Name = tuple[str, str]
Row = dict[str, str | None]
Key = tuple[str | None, ...]

_MISSING = object()


def _json(text: str | None) -> Row | None:
    return None if text is None else dict(json.loads(text))


class _Children:
    """The child tables' rows as the batch walks on: canal text by column, by primary key."""

    def __init__(
        self,
        current: Callable[[str, str], Iterable[Mapping[str, Any]] | None],
        mirrored: Callable[[str, str], bool],
    ) -> None:
        self._current = current
        self._mirrored = mirrored
        self._images: dict[Name, dict[Key, Row]] = {}
        self._layouts: dict[Name, list[Any]] = {}
        self._stale: dict[Name, str] = {}  # tables whose rows are unknown here, and why
        self._values_stale: dict[Name, str] = {}  # tables whose rows' keys are known, their other values not
        self._fixed: dict[Name, set[str]] = {}  # the foreign key columns of each table, its own and referenced
        self._floats: dict[Name, frozenset[str]] = {}  # float_columns of each table whose layout is known

    def layout(self, name: Name, layout: list[Any] | None) -> None:
        if layout is not None:
            self._layouts.setdefault(name, layout)

    def keys_of(self, name: Name) -> list[str]:
        layout = self._layouts.get(name)
        if layout is None:
            raise MirrorCascadeError(f"the layout of {name[0]}.{name[1]} is not known: its rows cannot be found")
        keys = [str(c[0]) for c in layout if c[2]]
        if not keys:
            raise MirrorCascadeError(
                f"{name[0]}.{name[1]} has no primary key: the mirror cannot address the rows a foreign key's action "
                "changed there"
            )
        return keys

    def key_of(self, name: Name, row: Mapping[str, str | None]) -> Key:
        """The key of ``name``'s row ``row`` (canal text by column) as its identity: a FLOAT / DOUBLE key's -0.0
        as 0.0 (:mod:`canal.lake.key_identity`), as the source spells the change rows' ``keys``."""
        return _identity(self.keys_of(name), self.float_columns(name), row)

    def float_columns(self, name: Name) -> frozenset[str]:
        """The columns of ``name`` of a FLOAT / DOUBLE type, whose -0.0 a key or a foreign key compares as 0.0."""
        found = self._floats.get(name)
        if found is None:
            layout = self._layouts.get(name)
            found = frozenset(str(c[0]) for c in layout or [] if is_float_type(str(c[1])))
            if layout is not None:  # a layout is set once: its float columns with it
                self._floats[name] = found
        return found

    def image(self, name: Name) -> dict[Key, Row]:
        found = self._images.get(name)
        if found is not None:
            return found
        why = self._stale.get(name)
        if why is not None:
            raise MirrorCascadeError(f"a foreign key's action reaches {name[0]}.{name[1]} after {why} in the batch")
        keys, floats = self.keys_of(name), self.float_columns(name)  # (keys_of: a child without a key stops here)
        columns = [str(c[0]) for c in self._layouts[name]]
        rows = self._current(*name) or []
        image: dict[Key, Row] = {}
        for row in rows:
            text = {c: None if row.get(c) is None else encode_value(row[c]) for c in columns}
            image[_identity(keys, floats, text)] = text
        self._images[name] = image
        return image

    def seen(
        self,
        name: Name,
        kind: str,
        keys: Row | None,
        old_keys: Row | None,
        after: Row | None,
        partial: bool = False,
        diffs: str | None = None,
    ) -> None:
        """A row of the batch of a child table: its image follows it. A ``partial`` after image (``binlog_row_image``
        MINIMAL / NOBLOB) updates the columns it carries of the row it changes, and its JSON ``diffs`` (a
        ``json_diffs`` text) the documents it changed; of a row not known here, the table's other values are
        unknown (a cascade that updates rows there stops)."""
        if name not in self._layouts or keys is None or name in self._stale:
            return  # a table no cascade reaches, or one whose rows a cascade reaching it will find unknown
        image = self.image(name)
        was = image.pop(self.key_of(name, old_keys), None) if old_keys is not None else None
        key = self.key_of(name, keys)
        if kind == "DELETE":
            image.pop(key, None)
        elif after is not None and partial:
            prior = was if old_keys is not None else image.get(key)
            if prior is None:
                self._values_stale[name] = "a partial row image of a row not known here"
                prior = {}
            image[key] = {**prior, **after}
            for column, column_diffs in json_diffs.loads(diffs).items():
                try:
                    image[key][column] = json_diffs.apply_text(image[key][column], column_diffs)
                except (KeyError, JsonDiffError):  # a document not known here, or not the server's
                    self._values_stale[name] = f"a partial JSON update of {column} in a row not known here"
                    image[key].pop(column, None)
        elif after is not None:
            image[key] = dict(after)

    def ddl(self, name: Name, sql: str | None, mode: SqlMode = DEFAULT_MODE) -> None:
        """A DDL of the batch on ``name``. Keys added or dropped keep its rows; TRUNCATE, CREATE and DROP empty them; an
        ALTER that
        keeps the key and foreign key columns' names and values (ADD / MODIFY / DROP of other columns) keeps the rows
        a cascading DELETE finds, but their other values are no longer the table's (a cascade that updates rows
        there stops); any other change makes the rows unknown here (the layout they were read under is gone)."""
        if name not in self._images and name not in self._layouts:
            return
        stmt = layout_statement(sql or "", mode)
        if isinstance(stmt, TruncateTable | CreateTable | DropTable):
            # emptied, or made anew (a CREATE ... SELECT's rows follow as the batch's rows): no row of before
            self._images[name] = {}
            self._stale.pop(name, None)
            self._values_stale.pop(name, None)
            return
        if isinstance(stmt, AlterTable):
            if all(isinstance(a, AddKey | DropKey) for a in stmt.actions):
                return
            fixed = {c.lower() for c in self._fixed.get(name, set())}
            layout = self._layouts.get(name) or []
            fixed |= {str(c[0]).lower() for c in layout if c[2]}
            touches = any(
                isinstance(a, RenameTo)
                or (isinstance(a, RenameColumn) and a.old_name.lower() in fixed)
                or (isinstance(a, DropColumn) and a.name.lower() in fixed)
                or (isinstance(a, ChangeColumn) and (a.old_name.lower() in fixed or a.column.name.lower() in fixed))
                for a in stmt.actions
            )
            if not touches:
                self._values_stale[name] = f"the DDL {(sql or '')[:200]!r}"
                return
        self._images.pop(name, None)
        self._stale[name] = f"the DDL {(sql or '')[:200]!r}"

    def fixed(self, name: Name, columns: Iterable[str]) -> None:
        """``columns`` of ``name`` are a foreign key's or referenced by one."""
        self._fixed.setdefault(name, set()).update(columns)

    def updatable(self, name: Name) -> None:
        why = self._values_stale.get(name)
        if why is not None:
            raise MirrorCascadeError(
                f"a foreign key's action updates rows of {name[0]}.{name[1]} after {why} in the batch changed their "
                "other columns: the rows cannot be written whole"
            )

    def mirrored(self, name: Name) -> bool:
        return self._mirrored(*name)


def _cascade(
    children: _Children,
    parent: Name,
    old: Row,
    new: Row | None,
    edges: list[dict[str, Any]],
    make: Callable[[Name, str, Row, Row | None, list[Any]], dict[str, Any]],
    out: list[dict[str, Any]],
    depth: int = 0,
) -> None:
    """The child rows InnoDB changed for ``parent``'s row ``old`` deleted (``new`` None) or updated to ``new``."""
    if depth > 15:  # InnoDB refuses a cascade deeper than 15 (error 193): the statement never ran
        raise MirrorCascadeError(f"a foreign key's cascade from {parent[0]}.{parent[1]} is deeper than 15")
    for edge in edges:
        if (edge["ref_db"], edge["ref_table"]) != parent:
            continue
        was: list[Any] = [old.get(c, _MISSING) for c in edge["ref_columns"]]
        now: list[Any] | None
        if any(v is _MISSING for v in was):
            raise MirrorCascadeError(
                f"the row image of {parent[0]}.{parent[1]} lacks a column foreign key {edge['name']} references "
                "(binlog_row_image MINIMAL?): the rows of its action cannot be found"
            )
        if any(v is None for v in was):
            continue  # NULL references nothing
        if new is None:
            action, now = str(edge["on_delete"]), None
        else:
            # a column a partial after image (binlog_row_image MINIMAL) does not carry was not written: it is as it was
            now = [new.get(c, w) for c, w in zip(edge["ref_columns"], was, strict=True)]
            if now == was:
                continue  # referenced columns kept: nothing to follow
            action = str(edge["on_update"])
        if action not in ("CASCADE", "SET NULL", "SET DEFAULT"):
            continue  # RESTRICT / NO ACTION: the server refused the change if a child row referenced it
        child: Name = (edge["db"], edge["table"])
        children.layout(child, edge.get("layout"))
        if not children.mirrored(child):
            if any((e["ref_db"], e["ref_table"]) == child and children.mirrored((e["db"], e["table"])) for e in edges):
                raise MirrorCascadeError(
                    f"a foreign key's action goes through {child[0]}.{child[1]}, which the mirror does not hold, to "
                    "tables it does: the rows it reaches there cannot be found"
                )
            continue
        if action == "SET DEFAULT":
            raise MirrorCascadeError(
                f"foreign key {edge['name']} of {child[0]}.{child[1]}: SET DEFAULT is not followed"
            )
        image = children.image(child)
        names = children.keys_of(child)
        columns = list(edge["columns"])
        floats = children.float_columns(child)
        referenced = _compared(columns, was, floats)
        hit = sorted(
            (
                key
                for key, row in image.items()
                if _compared(columns, [row.get(c) for c in columns], floats) == referenced
            ),
            key=lambda k: tuple("" if v is None else v for v in k),
        )
        for key in hit:
            row = image[key]
            if new is None and action == "CASCADE":
                del image[key]
                out.append(make(child, "DELETE", row, None, names))
                _cascade(children, child, row, None, edges, make, out, depth + 1)
                continue
            children.updatable(child)
            changed = dict(row)
            for c, v in zip(
                columns, now if action == "CASCADE" and now is not None else [None] * len(columns), strict=True
            ):
                changed[c] = v
            del image[key]
            image[children.key_of(child, changed)] = changed
            out.append(make(child, "UPDATE", row, changed, names))
            _cascade(children, child, row, changed, edges, make, out, depth + 1)


def _identity(keys: list[str], floats: frozenset[str], row: Mapping[str, str | None]) -> Key:
    """The key ``keys`` of ``row`` (canal text by column), its ``floats`` columns' -0.0 as 0.0."""
    return tuple(key_text(row.get(k)) if k in floats else row.get(k) for k in keys)


def _compared(columns: list[str], values: list[Any], floats: frozenset[str]) -> list[Any]:
    """A foreign key's values as it compares them: by value, so a ``floats`` column's -0.0 references 0.0."""
    return [key_text(v) if c in floats else v for c, v in zip(columns, values, strict=True)]


def _key_text(key: Mapping[str, Any], floats: frozenset[str]) -> str:
    """A key's JSON text spelt as the source spells the change rows' ``keys`` (compact, no ASCII escapes, the
    ``floats`` columns' -0.0 as 0.0): the mirror groups a table's changes by this text, so a cascaded DELETE of a row
    inserted earlier in the same batch must name the same key, or both survive as two keys."""
    identity = {k: key_text(v) if k in floats else v for k, v in key.items()}
    return json.dumps(identity, ensure_ascii=False, separators=(",", ":"))


def expand_cascades(
    table: Any,
    current: Callable[[str, str], Iterable[Mapping[str, Any]] | None],
    mirrored: Callable[[str, str], bool],
) -> Any:
    """``table`` (a batch's change rows in ``seq`` order, a pyarrow Table) with the change rows of the foreign keys'
    actions its rows marked with ``FOREIGN_KEY_ACTIONS`` caused, each right after its parent row (module docstring).
    ``current(schema, table)`` is a mirrored table's rows before the batch (None: not held); ``mirrored`` whether the
    mirror keeps a table."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if "props" not in table.column_names:
        return table
    marked = pc.fill_null(pc.match_substring(table.column("props"), FOREIGN_KEY_ACTIONS), False)
    if not pc.any(marked).as_py():
        return table
    rows = table.to_pylist()
    parsed: dict[str, list[dict[str, Any]]] = {}
    children = _Children(current, mirrored)
    for row in rows:  # every child the batch's cascades name: its own rows of the batch are followed from the start
        props = row.get("props")
        if props and FOREIGN_KEY_ACTIONS in props:
            edges = parsed.setdefault(props, json.loads(json.loads(props).get(FOREIGN_KEY_ACTIONS, "[]")))
            for edge in edges:
                children.layout((edge["db"], edge["table"]), edge.get("layout"))
                children.fixed((edge["db"], edge["table"]), edge["columns"])
                children.fixed((edge["ref_db"], edge["ref_table"]), edge["ref_columns"])
    out: list[dict[str, Any]] = []
    for row in rows:
        out.append(row)
        name: Name = (row["schema"], row["table"])
        if row.get("is_ddl"):
            props = row.get("props")
            children.ddl(name, row.get("sql"), statement_mode(json.loads(props) if props else None))
            continue
        kind = row["type"]
        if kind not in ("INSERT", "UPDATE", "DELETE"):
            continue
        after = _json(row.get("after"))
        if name in children._layouts and children.mirrored(name):
            partial = row.get("after_absent") is not None
            keys, old_keys = _json(row.get("keys")), _json(row.get("old_keys"))
            children.seen(name, kind, keys, old_keys, after, partial, row.get(json_diffs.JSON_DIFFS))
        props = row.get("props")
        if kind == "INSERT" or not props or FOREIGN_KEY_ACTIONS not in props:
            continue
        old = _json(row.get("before")) if "before" in row else None
        if old is None:
            raise MirrorCascadeError(
                f"the {kind} of {name[0]}.{name[1]} (seq {row['seq']}) has no before image: the rows its foreign "
                "keys' actions changed cannot be found"
            )

        def make(
            child: Name, change: str, was: Row, now: Row | None, keys: list[str], parent: dict[str, Any] = row
        ) -> dict[str, Any]:
            made: dict[str, Any] = dict.fromkeys(parent)
            made.update(
                seq=parent["seq"],
                schema=child[0],
                table=child[1],
                type=change,
                is_ddl=False,
                keys=_key_text({k: (now or was).get(k) for k in keys}, children.float_columns(child)),
                before=json.dumps(was, ensure_ascii=False),
                after=None if now is None else json.dumps(now, ensure_ascii=False),
                columns=json.dumps(children._layouts[child], ensure_ascii=False),
            )
            if now is not None and children.key_of(child, now) != children.key_of(child, was):
                made["old_keys"] = _key_text({k: was.get(k) for k in keys}, children.float_columns(child))
            for position in ("log_file", "log_offset"):
                if position in parent:
                    made[position] = parent[position]
            return made

        _cascade(children, name, old, None if kind == "DELETE" else after, parsed[props], make, out)
    if len(out) == len(rows):
        return table
    return pa.Table.from_pylist(out, schema=table.schema)


class ExpandedBatch:
    """The expanded batch of the batch being applied, kept until a later batch (module docstring): a file
    ``_pycanal_cascade.{app id}.{batch id}.arrow`` in the mirror's root (a local path or an object-store URI,
    :mod:`canal.lake.store.fs`)."""

    def __init__(self, root: str | os.PathLike[str], app_id: str) -> None:
        self.root = os.fspath(root)
        self.prefix = f"_pycanal_cascade.{app_id}."

    def _path(self, batch_id: int) -> str:
        return fs.join(self.root, f"{self.prefix}{batch_id}.arrow")

    def load(self, batch_id: int) -> Any:
        """The expanded rows kept for ``batch_id``, or None."""
        import pyarrow as pa

        try:
            data = fs.read_bytes(self._path(batch_id))
        except FileNotFoundError:
            return None
        return pa.ipc.open_file(pa.py_buffer(data)).read_all()

    def save(self, batch_id: int, table: Any) -> None:
        import pyarrow as pa

        sink = pa.BufferOutputStream()
        with pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        fs.makedirs(self.root)
        fs.write_bytes(self._path(batch_id), sink.getvalue().to_pybytes())

    def drop_before(self, batch_id: int) -> None:
        """Drop what was kept for earlier batches (they are done: a replay is of the newest only)."""
        for name in fs.listdir(self.root):  # none when there is no root
            if not (name.startswith(self.prefix) and name.endswith(".arrow")):
                continue
            number = name.removeprefix(self.prefix).removesuffix(".arrow")
            if number.isdigit() and int(number) < batch_id:
                fs.unlink(fs.join(self.root, name))
