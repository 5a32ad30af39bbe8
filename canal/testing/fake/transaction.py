"""A transaction being built on the fake server: row changes checked against the tables, written on commit."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from canal.parse.events import BinlogEvent
from canal.protocol import EventType, RowData
from canal.testing.fake.binlog import RowsStatement
from canal.testing.fake.catalog import Table, hashable
from canal.testing.fake.columns import coerce
from canal.testing.fake.errors import FakeMysqlError
from canal.testing.fake.row_image import RowImage, carried, cut

if TYPE_CHECKING:
    from canal.testing.fake.server import FakeMysql

__all__ = ["FakeTransaction"]


class FakeTransaction:
    """One binlog transaction being built; written when the ``with fake.transaction()`` block ends normally.

    Each call is one statement: a table map plus one rows event (split like a server splits large statements, at
    ``max_rows_event_size`` bytes). Partial images are completed from the table's current contents: ``update``
    needs the key columns in ``before`` and only the changed columns in ``after``; ``delete`` needs the key.
    After the commit, ``events`` holds the events written (empty when the transaction changed nothing).

    ``row_image``: the session's ``binlog_row_image`` (FULL, MINIMAL, NOBLOB): which columns the rows events'
    images carry (:mod:`canal.testing.fake.row_image`); the columns a statement wrote are the ones it names (an
    insert's row, an update's ``after``).
    """

    def __init__(self, fake: FakeMysql, row_image: RowImage = "FULL") -> None:
        self._fake = fake
        self.row_image: RowImage = row_image
        self._stmts: list[RowsStatement] = []
        self._overlay: dict[str, dict[tuple[Any, ...], tuple[Any, ...] | None]] = {}
        self.events: list[BinlogEvent] = []
        self.open = True

    # -- statements ---------------------------------------------------------------------------------------------

    def insert(self, table: str, row: Mapping[str, Any]) -> None:
        self.insert_many(table, [row])

    def insert_many(self, table: str, rows: Iterable[Mapping[str, Any]]) -> None:
        """One INSERT statement of several rows: one table map and one rows event."""
        self._statement(table, EventType.INSERT, [(None, r) for r in rows])

    def update(self, table: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> None:
        self.update_many(table, [(before, after)])

    def update_many(self, table: str, changes: Iterable[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> None:
        self._statement(table, EventType.UPDATE, list(changes))

    def delete(self, table: str, row: Mapping[str, Any]) -> None:
        self.delete_many(table, [row])

    def delete_many(self, table: str, rows: Iterable[Mapping[str, Any]]) -> None:
        self._statement(table, EventType.DELETE, [(r, None) for r in rows])

    # -- internals ----------------------------------------------------------------------------------------------

    def _statement(
        self,
        name: str,
        kind: EventType,
        pairs: Sequence[tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]],
    ) -> None:
        if not self.open:
            raise FakeMysqlError("this transaction is already committed or rolled back")
        fake = self._fake
        with fake._lock:
            t = fake._catalog.table(name)
            overlay = self._overlay.setdefault(t.full_name, {})
            staged = dict(overlay)
            out: list[RowData] = []
            written = {name for _before, after in pairs for name in after or ()}  # one statement writes these
            keep_before, keep_after = carried(self.row_image, t, kind, written)
            for before_vals, after_vals in pairs:
                if kind is EventType.INSERT:
                    assert after_vals is not None
                    image = self._image(t, after_vals, None)
                    key = t.key_of(image)
                    if self._current(t, staged, key) is not None:
                        raise FakeMysqlError(f"Duplicate entry {key!r} for key 'PRIMARY' in {t.full_name}")
                    staged[key] = image
                    out.append(RowData(t.schema, None, cut(image, keep_after)))
                    continue
                assert before_vals is not None
                key, current = self._find(t, staged, before_vals)
                if kind is EventType.DELETE:
                    staged[key] = None
                    out.append(RowData(t.schema, cut(current, keep_before), None))
                    continue
                assert after_vals is not None
                image = self._image(t, after_vals, current)
                new_key = t.key_of(image)
                if new_key != key and self._current(t, staged, new_key) is not None:
                    raise FakeMysqlError(f"Duplicate entry {new_key!r} for key 'PRIMARY' in {t.full_name}")
                staged[key] = None
                staged[new_key] = image
                if keep_after is not None and not keep_after:
                    continue  # wrote no column: the server logs no row (nor does MINIMAL carry an empty image)
                out.append(RowData(t.schema, cut(current, keep_before), cut(image, keep_after)))
            if not out:
                return
            overlay.clear()
            overlay.update(staged)
            self._stmts.append(RowsStatement(t, t.schema, t.table_id, kind, tuple(out), fake.now))

    @staticmethod
    def _current(
        t: Table, staged: Mapping[tuple[Any, ...], tuple[Any, ...] | None], key: tuple[Any, ...]
    ) -> tuple[Any, ...] | None:
        if key in staged:
            return staged[key]
        return t.data.get(key)

    def _image(self, t: Table, values: Mapping[str, Any], base: tuple[Any, ...] | None) -> tuple[Any, ...]:
        fake = self._fake
        for name in values:
            if name not in t.schema.names:
                raise FakeMysqlError(f"{t.full_name} has no column {name!r} (columns: {', '.join(t.schema.names)})")
        out = []
        for i, col in enumerate(t.columns):
            if col.name in values:
                out.append(coerce(col, values[col.name], t.full_name, t.charset, fake.is_mariadb))
            elif base is not None:
                out.append(base[i])
            else:
                out.append(coerce(col, None, t.full_name, t.charset, fake.is_mariadb))
        return tuple(out)

    def _find(
        self, t: Table, staged: Mapping[tuple[Any, ...], tuple[Any, ...] | None], values: Mapping[str, Any]
    ) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        fake = self._fake
        for name in values:
            if name not in t.schema.names:
                raise FakeMysqlError(f"{t.full_name} has no column {name!r} (columns: {', '.join(t.schema.names)})")
        if t.schema.key_indexes:
            missing = [t.columns[i].name for i in t.schema.key_indexes if t.columns[i].name not in values]
            if missing:
                raise FakeMysqlError(f"the row of {t.full_name} must name its primary key (missing {missing})")
            key = hashable(
                tuple(
                    coerce(t.columns[i], values[t.columns[i].name], t.full_name, t.charset, fake.is_mariadb)
                    for i in t.schema.key_indexes
                )
            )
        else:
            key = t.key_of(self._image(t, values, None))
        current = self._current(t, staged, key)
        if current is None:
            raise FakeMysqlError(f"{t.full_name} has no row with key {key!r}")
        for i, col in enumerate(t.columns):
            if col.name in values:
                given = coerce(col, values[col.name], t.full_name, t.charset, fake.is_mariadb)
                if given != current[i]:
                    raise FakeMysqlError(
                        f"the before image of {t.full_name} {key!r} says {col.name}={given!r}, "
                        f"but the row holds {current[i]!r}"
                    )
        return key, current
