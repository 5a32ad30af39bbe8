"""XA transactions in the mirror: prepared rows are held until their XA COMMIT, dropped at their XA ROLLBACK.

The server logs an XA transaction's rows at ``XA PREPARE``; they become visible only at ``XA COMMIT`` (a separate
event, maybe much later, maybe after a restart) and never after ``XA ROLLBACK``. Each of its change rows carries the
xid (``props`` ``XA_XID``, :mod:`canal.parse.xa`); its ``XA END`` is an ``XAPREPARE`` row; the second phase is an
``XACOMMIT`` / ``XAROLLBACK`` row. :class:`HeldTransactions` takes the prepared rows out of a batch and keeps them
under the mirror root (``_pycanal_xa.<app id>/``, Arrow IPC files written whole, :mod:`canal.lake.store.fs`), and puts
them back into the batch that holds their ``XACOMMIT``, at its place -- so the mirror applies them as the server made
them visible.

Replays: a file is named by the batch that wrote it, and a batch reads only files of earlier batches, so a batch
replayed after a crash sees what it saw the first time. A ``done`` file of batch d closes the xid's files of earlier
batches; they are removed once a later batch than d is applied (batch d can no longer be replayed).

An ``XACOMMIT`` whose ``XAPREPARE`` lies before the stream's start position comes with the PREPARE's rows read back
by the parser (:mod:`canal.parse.xa_lookback`: rows and commit carry ``XA_RECOVERED``); they are held the same way
(``recovered`` files) and applied at the commit -- unless the mirror holds the rows of that PREPARE itself (it saw the
group before the parser restarted), which then win. An ``XACOMMIT`` without ``XA_RECOVERED`` whose ``XAPREPARE``
the mirror never saw (a stream from a parser that does not read back) stops the batch with :class:`MirrorXAError`,
nothing written. An ``XAROLLBACK`` of such a transaction needs nothing: its rows never reached the mirror. An XA
transaction none of whose rows the destination captures reaches the mirror as an empty PREPARE group (the entry sink
never drops one as empty), so its commit is one of a transaction the mirror knows.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import attrs

from canal.lake.forms.ranges import marked as carries_marks
from canal.lake.store import fs
from canal.lake.types import MirrorError
from canal.parse.xa import XA_PREPARE_TYPE, XA_XID, xid_key
from canal.parse.xa_lookback import XA_RECOVERED

PROPS = "props"
_OUTCOMES = ("XACOMMIT", "XAROLLBACK")


class MirrorXAError(MirrorError):
    """An XA COMMIT whose prepared rows the mirror never saw (its XA PREPARE lies before the stream's start) and
    that does not come with them read back (``XA_RECOVERED``)."""


@attrs.define
class _Xid:
    """One xid's state while a batch is walked: its held rows (tables from files, then this batch's row numbers)."""

    files: list[Any] = attrs.field(factory=list)  # Arrow tables held by earlier batches, in batch order
    rows: list[int] = attrs.field(factory=list)  # this batch's rows held (positions in the batch)
    recovered_files: list[Any] = attrs.field(factory=list)  # rows read back from a PREPARE before the start
    recovered: list[int] = attrs.field(factory=list)  # this batch's rows read back (positions in the batch)
    ended: bool = False  # its XAPREPARE was seen (an earlier batch or this one)
    done: bool = False  # its outcome came in this batch (files of earlier batches are closed)
    ended_here: bool = False


def _key_name(key: str) -> str:
    return key.encode().hex()


class HeldTransactions:
    """The prepared rows of XA transactions not yet committed or rolled back, kept in ``directory`` (a local path or
    an object-store URI, :mod:`canal.lake.store.fs`)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = os.fspath(directory)

    # -- files: <key hex>.<kind>.<batch id>[.arrow] ------------------------------------------------------------

    def _files(self) -> list[tuple[str, str, int, str]]:
        found = []
        for name in fs.listdir(self.directory):  # none when there is no directory
            parts = name.split(".")
            if len(parts) >= 3 and parts[1] in ("rows", "recovered", "ended", "done") and parts[2].isdigit():
                found.append((parts[0], parts[1], int(parts[2]), fs.join(self.directory, name)))
        return sorted(found, key=lambda f: (f[0], f[2], f[1]))

    def collect(self, batch_id: int) -> None:
        """Remove the files an outcome closed in a batch before ``batch_id`` (that batch is applied for good)."""
        files = self._files()
        closing: dict[str, int] = {}
        for name, kind, batch, _path in files:
            if kind == "done" and batch < batch_id:
                closing[name] = max(closing.get(name, -1), batch)
        for name, kind, batch, path in files:
            if name in closing and (batch < closing[name] or (kind == "done" and batch == closing[name])):
                fs.unlink(path)

    def _state(self, batch_id: int) -> dict[str, _Xid]:
        """Each open xid as the files of batches before ``batch_id`` leave it."""
        import pyarrow as pa

        by_name: dict[str, list[tuple[str, int, str]]] = {}
        for name, kind, batch, path in self._files():
            if batch < batch_id:
                by_name.setdefault(name, []).append((kind, batch, path))
        state: dict[str, _Xid] = {}
        for name, files in by_name.items():
            closed = max((batch for kind, batch, _ in files if kind == "done"), default=None)
            live = [(kind, batch, path) for kind, batch, path in files if closed is None or batch >= closed]
            if not any(kind != "done" for kind, _, _ in live):
                continue
            xid = state[name] = _Xid()
            for kind, _batch, path in live:
                if kind in ("rows", "recovered"):
                    try:
                        rows = pa.ipc.open_file(pa.py_buffer(fs.read_bytes(path))).read_all()
                    except (OSError, pa.ArrowInvalid) as exc:
                        raise MirrorError(f"the held XA rows {path} cannot be read: {exc}") from exc
                    (xid.files if kind == "rows" else xid.recovered_files).append(rows)
                elif kind == "ended":
                    xid.ended = True
        return state

    def _write(self, name: str, kind: str, batch_id: int, rows: Any = None) -> None:
        import pyarrow as pa

        fs.makedirs(self.directory)
        if rows is None:
            fs.write_bytes(fs.join(self.directory, f"{name}.{kind}.{batch_id}"), b"")
            return
        sink = pa.BufferOutputStream()
        with pa.ipc.new_file(sink, rows.schema) as writer:
            writer.write_table(rows)
        fs.write_bytes(fs.join(self.directory, f"{name}.{kind}.{batch_id}.arrow"), sink.getvalue().to_pybytes())

    # -- a batch --------------------------------------------------------------------------------------------------

    def follow(self, table: Any, batch_id: int) -> tuple[Any, Callable[[], None]]:
        """``table`` (change rows in ``seq`` order) with its prepared rows taken out and the rows of each XA
        transaction committed in it put in at its XACOMMIT; and the function that records what the batch holds
        back (call it before the batch's first write). A :class:`MirrorXAError` before anything is written when
        an XACOMMIT's rows are unknown."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if PROPS not in table.column_names:
            return table, _nothing
        props = table.column(PROPS)
        types = table.column("type")
        marked = pc.or_(carries_marks(props), pc.fill_null(pc.is_in(types, pa.array(_OUTCOMES)), False))
        if not pc.any(marked).as_py():
            return table, _nothing
        state = self._state(batch_id)
        xids: dict[str, _Xid] = {}
        held: set[int] = set()
        spliced: dict[int, list[Any]] = {}  # batch row of an XACOMMIT -> the tables put in there
        rows_at = pc.indices_nonzero(marked).to_pylist()
        for row, kind, text, sql in zip(
            rows_at,
            types.take(rows_at).to_pylist(),
            props.take(rows_at).to_pylist(),
            table.column("sql").take(rows_at).to_pylist(),
            strict=True,
        ):
            xid_text, recovered = _xid_of(text, sql)
            if xid_text is None:
                continue
            name = _key_name(xid_key(xid_text))
            xid = xids.get(name)
            if xid is None:
                xid = xids[name] = state.pop(name, _Xid())
            if kind in _OUTCOMES:
                if kind == "XACOMMIT":
                    if xid.ended:  # the rows of the PREPARE the mirror saw (any read back are the same rows)
                        files, rows = xid.files, xid.rows
                    elif recovered:  # the PREPARE lies before the start: the rows the parser read back
                        files, rows = xid.recovered_files, xid.recovered
                    else:
                        raise MirrorXAError(_unknown_commit(table, row, xid_text))
                    spliced[row] = [*files, table.take(rows)] if rows else list(files)
                else:
                    held.update(xid.rows)  # rolled back: never applied
                held.update(xid.recovered)
                held.add(row)
                xids[name] = _Xid(done=True)
            elif kind == XA_PREPARE_TYPE:
                xid.ended = xid.ended_here = True
                held.add(row)
            elif recovered:
                xid.recovered.append(row)
                held.add(row)
            else:
                xid.rows.append(row)
                held.add(row)
        out = _rebuilt(table, held, spliced)

        def record() -> None:
            self.collect(batch_id)
            for name, xid in xids.items():
                if xid.done:
                    self._write(name, "done", batch_id)
                if xid.rows:
                    self._write(name, "rows", batch_id, table.take(xid.rows))
                if xid.recovered:
                    self._write(name, "recovered", batch_id, table.take(xid.recovered))
                if xid.ended_here:
                    self._write(name, "ended", batch_id)

        return out, record


def _nothing() -> None:
    return None


def _xid_of(props_text: str | None, sql: str | None) -> tuple[str | None, bool]:
    """The xid a change row belongs to, and whether it was read back from a PREPARE before the start."""
    if props_text:
        try:
            props = json.loads(props_text)
        except ValueError as exc:
            raise MirrorError(f"a change row's props are not JSON ({exc}): {props_text[:80]!r}") from None
        if isinstance(props, dict) and isinstance(props.get(XA_XID), str):
            return str(props[XA_XID]), XA_RECOVERED in props
    if sql:  # an XA COMMIT / ROLLBACK row written without props: the xid is in its statement
        from canal.parse.ddl import xa_xid

        return xa_xid(sql), False
    return None, False


def _unknown_commit(table: Any, row: int, xid: str) -> str:
    where = ""
    if "log_file" in table.column_names and "log_offset" in table.column_names:
        where = f" at {table.column('log_file')[row].as_py()}:{table.column('log_offset')[row].as_py()}"
    sql = table.column("sql")[row].as_py()
    return (
        f"{sql!r}{where} commits XA transaction {xid}, whose XA PREPARE (and rows) lie before the position this "
        "mirror's stream started from: the mirror cannot know which rows it committed. Nothing of the batch was "
        "written. Start the destination from a position before that XA PREPARE, or mirror into a new root from a "
        "snapshot taken after the XA COMMIT."
    )


def _rebuilt(table: Any, held: set[int], spliced: dict[int, list[Any]]) -> Any:
    """The batch without the ``held`` rows, the ``spliced`` tables at their rows, ``seq`` numbered anew in order."""
    import numpy as np
    import pyarrow as pa

    if not held:
        return table
    pieces: list[Any] = []
    start = 0
    for row in sorted(held):
        if row > start:
            pieces.append(table.slice(start, row - start))
        for part in spliced.get(row, ()):
            pieces.append(_conformed(part, table.schema))
        start = row + 1
    if start < table.num_rows:
        pieces.append(table.slice(start))
    out = pa.concat_tables(pieces) if pieces else table.slice(0, 0)
    first = table.column("seq")[0].as_py() if table.num_rows else 0
    seq = pa.array(np.arange(first, first + out.num_rows, dtype=np.int64))
    return out.set_column(out.column_names.index("seq"), "seq", seq)


def _conformed(part: Any, schema: Any) -> Any:
    """Rows held by an earlier batch in the columns of this one (a column it lacks reads null)."""
    import pyarrow as pa

    columns = [
        part.column(f.name).cast(f.type) if f.name in part.column_names else pa.nulls(part.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def held_directory(root: str | os.PathLike[str], app_id: str) -> str:
    """Where a mirror with ``app_id`` keeps the rows of XA transactions prepared and not yet committed (a location
    under ``root``, :mod:`canal.lake.store.fs`)."""
    return fs.join(os.fspath(root), f"_pycanal_xa.{app_id}")
