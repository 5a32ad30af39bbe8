"""A snapshot of some tables while the destination streams: its own thread and connections, one chunk at a time.

For each table, chunk by chunk: open the table's window in the parser's :class:`~canal.snapshot.merge.SnapshotMerge`,
read the chunk (:class:`~canal.snapshot.reader.ChunkReader`, exact at a binlog position), submit it, and wait until
the parser has put it into the stream. Memory holds one chunk. A chunk the parser drops (a switch to another server)
is read again.

A running snapshot takes more tables (:meth:`SnapshotRunner.extend`: a heal, :mod:`canal.snapshot.heal`): a table
not read yet is read after the point it was asked at anyway; one being read or done is read again, in a pass of its
own at the end of the list (rows read before that point may be out of date). A runner that has ended takes none.

It also takes rows (:meth:`SnapshotRunner.reread`: rows a partial row image left a copy unable to make exact,
:mod:`canal.parse.rereads`): a pass of the table that reads only those keys -- one query, or a few of at most
``chunk_rows`` keys, each exact at its position and joining the stream through its window like any chunk, the last
with ``snapshot.table_done``. In the cursor such a pass is the table's name like any other, with no key to go on
after: a restart reads the whole table in it (the keys live in memory only), which leaves a copy exact too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs
import pymysql  # type: ignore[import-untyped]

from canal.config.settings import KeylessTables
from canal.errors import CanalError, ConfigError, HealError, SnapshotError
from canal.log import destination_logger
from canal.names import split_qualified
from canal.parse.mysql.source import binlog_status
from canal.position import SnapshotCursor
from canal.protocol import TableSchema
from canal.snapshot.marks import WatermarkWriter
from canal.snapshot.merge import LayoutChanged, PendingChunk, SnapshotAborted, SnapshotMerge
from canal.snapshot.reader import Chunk, ChunkReader, begin_consistent_read, equal_arguments
from canal.snapshot.window import ChunkWindow, position_key

__all__ = ["AHEAD_CHUNKS", "SnapshotProgress", "SnapshotRunner", "split_table_name"]

AHEAD_CHUNKS = 4  # chunks of rows a snapshot may keep in the store that the consumer has not taken yet


def split_table_name(name: str) -> tuple[str, str]:
    """``(db, table)`` of a snapshot's table name (:func:`canal.names.qualified`: ```shop.eu`.orders`` for a name
    that holds a dot); ConfigError for one that is not such a name."""
    try:
        db, table = split_qualified(name)
    except ValueError as exc:
        raise ConfigError(f"snapshot tables are named db.table: {exc}", key="snapshot.tables") from None
    if not db or not table:
        raise ConfigError(f"snapshot tables are named db.table, got {name!r}", key="snapshot.tables")
    return db, table


@attrs.frozen
class SnapshotProgress:
    """Where a snapshot stands: tables done of all, rows read by this run, rows in the stream (a resumed snapshot
    counts those of earlier runs), rows read per second since this run started, rows expected (InnoDB's estimate,
    0 when unknown) and an ETA in seconds (None when unknown)."""

    tables: tuple[str, ...]
    tables_done: int
    rows_read: int
    rows_emitted: int
    rows_per_s: float
    done: bool
    error: str | None = None
    eta_s: float | None = None
    rows_expected: int = 0


class SnapshotRunner:
    """Runs the snapshot ``plan`` names into the stream through ``merge``: from its table ``plan.table``, after key
    ``plan.after`` (a resumed snapshot), or every table from the start.

    ``connect()`` opens a connection that returns the server's text (pymysql ``conv={}``); ``table_schema(db,
    table)`` gives the layout rows are decoded under (None: no such table). ``chunk_rows`` / ``chunk_bytes`` bound
    a chunk (:class:`~canal.snapshot.reader.ChunkReader`); ``keyless`` says what to do with a table without a
    chunk key. ``watermarks`` places each read between two watermark writes (:mod:`canal.snapshot.marks`; the
    runner closes it when it ends); without it, reads are placed at MariaDB's consistent snapshot position.
    ``stored()`` gives the stream's store's put sequence: taken when the runner ends done
    (:attr:`stored_through`), it says where the snapshot's entries end in the store. ``in_stream(db, table)`` says
    whether the stream's schema history holds a table (None: it cannot say): a table the server does not have
    though the stream, past where the server was, still does is not read under that name -- a
    :class:`~canal.errors.SnapshotError`, never a table skipped in silence.

    A runner that reads a heal's pass (:attr:`heals`: one started or extended by a heal, :mod:`canal.snapshot.heal`)
    and fails stops the destination: the merge raises a :class:`~canal.errors.HealError` at the stream's next
    hand-off (:meth:`~canal.snapshot.merge.SnapshotMerge.fail`), for a copy of the healed tables would stay void or
    stale for good. Other snapshots that fail leave the destination streaming, their progress kept in the cursor.
    """

    def __init__(
        self,
        destination: str,
        plan: SnapshotCursor,
        merge: SnapshotMerge,
        connect: Callable[[], Any],
        table_schema: Callable[[str, str], TableSchema | None],
        *,
        chunk_rows: int = 10_000,
        chunk_bytes: int | None = None,
        keyless: KeylessTables = KeylessTables.READ_WHOLE,
        max_rows_per_s: float | None = None,
        estimated_rows: Callable[[Sequence[TableSchema]], int] | None = None,
        unread_rows: Callable[[], int] | None = None,
        waiting: Callable[[], None] | None = None,
        watermarks: WatermarkWriter | None = None,
        table_schema_now: Callable[[str, str], TableSchema | None] | None = None,
        stored: Callable[[], int] | None = None,
        in_stream: Callable[[str, str], bool | None] | None = None,
    ) -> None:
        if chunk_rows < 1:
            raise ConfigError(f"chunk_rows must be >= 1, got {chunk_rows}", key="snapshot.chunk_rows")
        if max_rows_per_s is not None and max_rows_per_s <= 0:
            raise ConfigError(f"max_rows_per_s must be > 0, got {max_rows_per_s}", key="snapshot.max_rows_per_s")
        for name in plan.tables:
            split_table_name(name)
        self.plan = plan
        self.destination = destination
        self._merge = merge
        self._connect = connect
        self._table_schema = table_schema
        # the layout as the server has it now (read again after a DDL of a table being read); default: table_schema
        self._table_schema_now = table_schema_now or table_schema
        self._estimated_rows = estimated_rows
        self._unread_rows = unread_rows
        self._watermarks = watermarks
        self._waiting = waiting  # tells the store the reader waits for the consumer (its read-ahead limit)
        self.chunk_rows = chunk_rows
        self.chunk_bytes = chunk_bytes
        self.keyless = keyless
        self.max_rows_per_s = max_rows_per_s
        self._log = destination_logger(__name__, destination)
        self._stop = threading.Event()
        self._taken = threading.Event()  # the consumer took entries since the reader last looked
        self._thread: threading.Thread | None = None
        self._started_at = 0.0
        self._finished_at: float | None = None
        self._tables_done = plan.table
        self._rows_read = 0
        self._rows_emitted = plan.rows
        self._rows_expected = 0
        self.error: BaseException | None = None
        self._stored = stored
        self._in_stream = in_stream
        self.heals = False  # the plan holds a heal's pass (extend, or a runner started for one)
        # once the snapshot ended done: the store's put sequence then, at or after its last entry (a chunk joins the
        # stream only once its entries are in the store), so a consumer that acked that far has every row of it
        self.stored_through: int | None = None
        self._done = threading.Event()
        # the plan's tables grow (extend) while the thread reads them: the index of the table being read, and
        # whether the thread has taken its last table (then the runner takes no more), under one lock
        self._plan_lock = threading.Lock()
        self._index = plan.table
        self._closed = False
        # passes that read some rows only (reread): pass index -> their keys, ``((column, value), ...)`` in the table's
        # column order, values as the binlog decoder gives them; taken when the pass starts
        self._keys: dict[int, dict[tuple[tuple[str, Any], ...], None]] = {}

    @property
    def tables(self) -> tuple[str, ...]:
        """The tables of the snapshot."""
        return self.plan.tables

    @property
    def rows_emitted(self) -> int:
        """Snapshot rows in the stream (those of earlier runs of a resumed snapshot included)."""
        return self._rows_emitted

    @property
    def running(self) -> bool:
        return self._thread is not None and not self._done.is_set()

    def extend(self, tables: Sequence[str]) -> dict[str, int] | None:
        """Read ``tables`` (``db.table``) too, each from its first row, in a read that begins after this call: the
        index in :attr:`plan` ``.tables`` of each one's read (a table listed and not started yet is read there;
        one being read or done is appended again). None when the runner has ended (it took its last table, stopped
        or failed): start another. The merge's progress takes the longer list at once (the entries handed off next
        carry it)."""
        for name in tables:
            split_table_name(name)
        with self._plan_lock:
            if self._closed or self._done.is_set():
                return None
            listed = list(self.plan.tables)
            passes: dict[str, int] = {}
            for name in tables:
                later = [i for i, listed_name in enumerate(listed) if listed_name == name and i > self._index]
                if later:
                    passes[name] = later[0]
                    self._keys.pop(later[0], None)  # a pass of some rows only reads all of them now
                else:
                    passes[name] = len(listed)
                    listed.append(name)
            first_new = len(self.plan.tables)
            self.heals = True
            if len(listed) != first_new:
                self.plan = attrs.evolve(self.plan, tables=tuple(listed))
                self._merge.extend(self.plan.tables, first_new)
            return passes

    def reread(self, table: str, keys: Iterable[tuple[tuple[str, Any], ...]]) -> int | None:
        """Read the rows of ``table`` (``db.table``) whose keys are ``keys`` again, in a read that begins after this
        call: a later pass of the table not started yet takes them (a whole one reads them anyway), else a pass of
        those rows is appended (module docstring). Each key is ``((column, value), ...)``, the values as the binlog
        decoder gives them. The pass's index in :attr:`plan` ``.tables``; None when the runner has ended (it took
        its last table, stopped or failed): start another (:meth:`read_only`)."""
        split_table_name(table)
        with self._plan_lock:
            if self._closed or self._done.is_set():
                return None
            self.heals = True
            listed = self.plan.tables
            later = [i for i, name in enumerate(listed) if name == table and i > self._index]
            if later:
                pending = self._keys.get(later[0])
                if pending is not None:
                    pending.update(dict.fromkeys(keys))
                return later[0]
            index = len(listed)
            self._keys[index] = dict.fromkeys(keys)
            self.plan = attrs.evolve(self.plan, tables=(*listed, table))
            self._merge.extend(self.plan.tables, index)
            return index

    def read_only(self, index: int, keys: Iterable[tuple[tuple[str, Any], ...]]) -> None:
        """Before :meth:`start`: the pass at ``index`` reads the rows with ``keys`` only (:meth:`reread`'s form)."""
        assert self._thread is None, "a pass's keys are given before the runner starts"
        self.heals = True
        self._keys.setdefault(index, {}).update(dict.fromkeys(keys))

    def start(self) -> SnapshotRunner:
        self._started_at = time.monotonic()
        self._thread = threading.Thread(target=self._run, name=f"canal-snapshot-{self.destination}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float | None = 10.0) -> None:
        self._stop.set()
        self._taken.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def wait(self, timeout: float | None = None) -> SnapshotProgress:
        """Until every table is in the stream (or the snapshot failed: its error is raised)."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"the snapshot of {', '.join(self.tables)} is still running")
        if self.error is not None:
            raise self.error
        return self.progress()

    def progress(self) -> SnapshotProgress:
        end = self._finished_at if self._finished_at is not None else time.monotonic()
        elapsed = max(end - self._started_at, 1e-9)
        rate = self._rows_read / elapsed
        eta = None
        if self._rows_expected and rate > 0 and not self._done.is_set():
            eta = max(self._rows_expected - self._rows_emitted, 0) / rate
        return SnapshotProgress(
            tables=self.tables,
            tables_done=self._tables_done,
            rows_read=self._rows_read,
            rows_emitted=self._rows_emitted,
            rows_per_s=rate,
            done=self._done.is_set() and self.error is None,
            error=None if self.error is None else str(self.error),
            eta_s=eta,
            rows_expected=self._rows_expected,
        )

    # -- the snapshot thread ------------------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            if self._watermarks is not None:
                self._watermarks.check()
            plan = self.plan
            # each table's layout, and the count of its DDL the stream had handed off before it was read: a DDL handed
            # off by the time the table's turn comes makes that layout stale (canal.snapshot.merge.layout_generation)
            schemas: dict[int, tuple[int, TableSchema | None]] = {}
            for index, name in enumerate(plan.tables[plan.table :], plan.table):
                db, table = split_table_name(name)
                schemas[index] = (self._merge.layout_generation(db, table), self._table_schema(db, table))
            if self._estimated_rows is not None:
                self._rows_expected = self._estimated_rows([s for _, s in schemas.values() if s is not None])
            index = plan.table
            while True:
                with self._plan_lock:
                    tables = self.plan.tables
                    if index >= len(tables):
                        self._closed = True  # extend() now refuses: a later table needs another runner
                        break
                    self._index = index
                    keys = self._keys.pop(index, None)  # a pass of some rows only: reread() adds none now
                db, table = split_table_name(tables[index])
                generation, schema = schemas.pop(index, (-1, None))
                if generation != self._merge.layout_generation(db, table):
                    # a table added while the snapshot ran (a heal), or one whose DDL the stream handed off since its
                    # layout was read: its layout as the server has it now
                    generation = self._merge.layout_generation(db, table)
                    schema = self._table_schema_now(db, table)
                if schema is None:  # dropped or renamed since: its DROP or RENAME is in the stream, or will be
                    self._log.warning("%s.%s no longer exists: the snapshot skips it", db, table)
                    self._skip_table(index)
                elif keys is not None:
                    self._rows(schema, index, list(keys), generation)
                else:
                    self._table(schema, index, plan.after if index == plan.table else None, generation)
                self._tables_done += 1
                index += 1
            self._log.info("snapshot of %s done: %d rows", ", ".join(self.plan.tables), self._rows_emitted)
        except _Stopped:
            self.error = CanalError("the snapshot was stopped before it finished: the next start resumes it")
        except BaseException as exc:
            self.error = exc
            self._log.error(
                "snapshot of %s failed (the cursor keeps it unfinished: the next start resumes it): %s",
                ", ".join(self.tables),
                exc,
            )
            if self.heals:
                failed = HealError(
                    f"the heal reading {', '.join(self.tables[self._index :])} again failed: {exc}; the destination "
                    "stops, its cursor keeping the heal unfinished (a start reads the tables again)"
                )
                failed.__cause__ = exc
                self._merge.fail(failed)
        finally:
            with self._plan_lock:
                self._closed = True
            if self._watermarks is not None:
                self._watermarks.close()
                self._merge.forget_marks()
            self._finished_at = time.monotonic()
            if self.error is None and self._stored is not None:
                self.stored_through = self._stored()
            self._done.set()

    def _table(self, schema: TableSchema, index: int, after: tuple[Any, ...] | None, generation: int) -> None:
        """One table's chunks into the stream. Its layout is read again whenever a DDL of the table reaches the
        stream before a chunk read under the old one (:class:`~canal.snapshot.merge.LayoutChanged`), or a read
        fails on a column or table the server no longer has: the chunk is read again under the new layout, after
        the same key while the chunk key is the same columns, else from the table's first row (a changed key
        cannot continue after values of another; rows read again are upserts, none is skipped). ``generation``:
        the table's DDL count in the stream before ``schema`` was read."""
        db, name = schema.schema, schema.table
        key_names = self.plan.key if index == self.plan.table else None
        current: TableSchema | None = schema if index > self.plan.table or after is None else None
        if current is None:
            generation = self._merge.layout_generation(db, name)
            current = self._table_schema_now(db, name)  # a resume: the layout now, not the one of the plan
        while current is not None:
            reader = self._reader(current)
            try:
                key = reader.chunk_key()
                if key is None:
                    self._keyless(current)
                    after = None  # no key to resume after
                elif after is not None and key_names is not None and tuple(key_names) != key:
                    self._log.warning(
                        "the chunk key of %s is now (%s), not (%s): its snapshot reads it again from its first row",
                        current.full_name,
                        ", ".join(key),
                        ", ".join(key_names),
                    )
                    after = None
                elif not current.key_indexes:
                    self._log.info(
                        "%s has no primary key: its chunks follow the unique key (%s)", current.full_name, key
                    )
                after = self._chunks(reader, current, index, after, key, generation)
                if after is _DONE:
                    return
            finally:
                reader.close()
            # the layout changed under the read: take it again, once the stream has handed off the DDL
            key_names = key
            generation = self._merge.layout_generation(db, name)
            current = self._table_schema_now(db, name)
        self._log.warning(
            "%s.%s no longer exists: the snapshot leaves it (its DROP or RENAME is in the stream)", db, name
        )
        self._skip_table(index)

    def _rows(self, schema: TableSchema, index: int, keys: list[tuple[tuple[str, Any], ...]], generation: int) -> None:
        """A pass that reads the rows with ``keys`` only, in reads of at most ``chunk_rows`` keys, each with its window;
        the last one says the table is done. Its progress names no key to go on after: a restart reads the table
        whole. A key of a type rows cannot be found by (:func:`~canal.snapshot.reader.equal_arguments`), or a chunk
        key that is not the keys' columns, reads the whole table instead. A DDL of the table while it reads, or the
        stream dropping a read, reads the rows again under the layout the server has then."""
        db, name = schema.schema, schema.table
        current: TableSchema | None = schema
        while current is not None:
            reader = self._reader(current)
            try:
                key = reader.chunk_key()
                found = None if key is None else _key_arguments(current, key, keys)
                if found is None:
                    self._log.info("%s: its rows are read again whole (not by their keys)", current.full_name)
                    after = self._chunks(reader, current, index, None, key, generation)
                else:
                    assert key is not None
                    after = self._key_reads(reader, current, index, key, found, generation)
                if after is _DONE:
                    return
            finally:
                reader.close()
            generation = self._merge.layout_generation(db, name)
            current = self._table_schema_now(db, name)
        self._skip_table(index)

    def _key_reads(
        self,
        reader: ChunkReader,
        schema: TableSchema,
        index: int,
        key: tuple[str, ...],
        keys: list[list[tuple[str, Any]]],
        generation: int,
    ) -> Any:
        """The rows with ``keys`` into the stream (:meth:`_rows`): ``_DONE``, or ``_LAYOUT`` once the table's layout
        changed under a read."""
        step = max(1, reader.chunk_rows)
        groups = [keys[i : i + step] for i in range(0, len(keys), step)] or [[]]
        window_key = tuple(schema.index_of(k) for k in key)
        number = 0
        while number < len(groups):
            self._wait_for_consumer(AHEAD_CHUNKS * reader.rows_per_chunk)
            progress = SnapshotCursor(self.plan.tables, index, None, self._rows_emitted, key)
            started = time.monotonic()
            window = self._merge.open_window(schema.schema, schema.table, window_key)
            try:
                try:
                    chunk = reader.read_keys(groups[number])
                except pymysql.err.MySQLError as exc:
                    if not _layout_gone(exc):
                        raise
                    self._await_ddl(schema, generation, exc)
                    return _LAYOUT
                self._rows_read += len(chunk.rows)
                last = number == len(groups) - 1
                pending = self._merge.submit(
                    window, chunk, number, last=last, progress=progress, layout_generation=generation
                )
                joined = self._joined(pending, schema)
            finally:
                self._merge.close_window(window)
            if joined is _LAYOUT:
                return _LAYOUT
            if joined:
                self._throttle(len(chunk.rows), started)
                number += 1
        return _DONE

    def _skip_table(self, index: int) -> None:
        """The table at ``index`` is gone: the snapshot's progress moves to the next one (or ends) -- once the stream
        has handed off what the server had logged when the read found it gone. Whether a DROP or a RENAME took it the
        read cannot tell; the stream can, while the table is still the one being read: a RENAME of it then heals
        under its new name (:data:`~canal.parse.heal_marks.RENAMED_WHILE_READ`), where one converted after the
        progress left it would pass as a plain rename, the new name short of the rows not read."""
        self._await_stream(self._server_position())
        db, name = split_table_name(self.plan.tables[index])
        if self._in_stream is not None and self._in_stream(db, name):
            raise SnapshotError(
                f"{self.plan.tables[index]} is not on the server, but the stream, past where the server was when the "
                "read found it missing, still has it (no DROP or RENAME of it reached the stream): the snapshot "
                "cannot read it under that name"
            )
        with self._plan_lock:  # (the list may grow meanwhile: the merge then takes the longer one)
            tables = self.plan.tables
            following = index + 1
            self._merge.begin(
                SnapshotCursor(tables, following, None, self._rows_emitted) if following < len(tables) else None
            )

    def _reader(self, schema: TableSchema) -> ChunkReader:
        marks = self._watermarks
        return ChunkReader(
            self._connect,
            schema,
            chunk_rows=self.chunk_rows,
            chunk_bytes=self.chunk_bytes,
            begin_read=begin_consistent_read if marks is None else marks.begin_read,
        )

    def _keyless(self, schema: TableSchema) -> None:
        if self.keyless is KeylessTables.REFUSE:
            raise SnapshotError(
                f"{schema.full_name} has no primary key and no unique key over NOT NULL columns: the snapshot "
                "refuses it (snapshot keyless=refuse)"
            )
        self._log.warning(
            "%s has no primary key and no unique key over NOT NULL columns: it is read in one transaction, "
            "streamed in pieces; a restart reads it again from its first row",
            schema.full_name,
        )

    def _chunks(
        self,
        reader: ChunkReader,
        schema: TableSchema,
        index: int,
        after: tuple[Any, ...] | None,
        key: tuple[str, ...] | None,
        generation: int,
    ) -> Any:
        """The table's chunks into the stream, one at a time: ``_DONE``, or the key to go on after (None: from the
        start) once the table's layout changed under a read. Each read gets a window opened before it; the pieces
        of a table read without a key share the window of their one read."""
        number = 0
        window: ChunkWindow | None = None
        chunk: Chunk | None = None
        # the window finds the stream's changes of a chunk's rows by the key the chunk follows (a table without a
        # primary key: its unique NOT NULL key, which a MINIMAL image's before image carries); no key: whole rows
        window_key = schema.key_indexes if key is None else tuple(schema.index_of(k) for k in key)
        try:
            while True:
                self._wait_for_consumer(AHEAD_CHUNKS * reader.rows_per_chunk)
                progress = SnapshotCursor(self.plan.tables, index, after, self._rows_emitted, key)
                started = time.monotonic()
                try:
                    if chunk is not None and chunk.more:
                        chunk = reader.read_more()
                    else:
                        if window is not None:
                            self._merge.close_window(window)
                        window = self._merge.open_window(schema.schema, schema.table, window_key)
                        chunk = reader.read(after)
                except pymysql.err.MySQLError as exc:
                    if not _layout_gone(exc):
                        raise
                    self._await_ddl(schema, generation, exc)
                    return after if key is not None else None
                assert window is not None  # opened with the read the chunk belongs to
                self._rows_read += len(chunk.rows)
                last = chunk.next_key is None and not chunk.more
                pending = self._merge.submit(
                    window, chunk, number, last=last, progress=progress, layout_generation=generation
                )
                joined = self._joined(pending, schema)
                if joined is _LAYOUT:
                    return after if key is not None else None
                if not joined:
                    # the stream dropped the chunk: read it again (a table without a key: all of it, from the start)
                    chunk = None
                    continue
                self._throttle(len(chunk.rows), started)
                if last:
                    return _DONE
                if chunk.next_key is not None:
                    after = chunk.next_key
                number += 1
        finally:
            if window is not None:
                self._merge.close_window(window)

    def _server_position(self) -> tuple[int, int]:
        """The server's binlog end now, as a :func:`~canal.snapshot.window.position_key`."""
        conn = self._connect()
        try:
            with conn.cursor() as cur:
                status = binlog_status(cur)
        finally:
            conn.close()
        if status is None:
            raise SnapshotError("SHOW MASTER STATUS is empty (binary logging off?): a table the snapshot found gone "
                                "cannot be told dropped from renamed")  # fmt: skip
        return position_key(str(status[0]), int(status[1]))

    def _await_stream(self, position: tuple[int, int]) -> None:
        """Wait until the stream has handed off everything before ``position`` (an idle one gets there at its next
        heartbeat); a stream that does not within :data:`_DDL_WAIT_S` is a SnapshotError."""
        self._await_merge(
            lambda: self._merge.handed_past(position),
            lambda: SnapshotError(
                f"the stream did not reach offset {position[1]} of binlog file number {position[0]} within "
                f"{_DDL_WAIT_S:.0f} s, where the server was when the snapshot found a table gone: whether it "
                "was dropped or renamed is not known"
            ),
        )

    def _await_ddl(self, schema: TableSchema, generation: int, exc: BaseException) -> None:
        """A read failed on a column or table the server no longer has: a DDL ran that the stream has not handed off
        yet. Wait until it has (the new layout is then the one to read under); a DDL that never reaches this
        destination's stream (a filtered table) is a SnapshotError."""
        self._await_merge(
            lambda: self._merge.layout_generation(schema.schema, schema.table) != generation,
            lambda: SnapshotError(
                f"reading {schema.full_name} failed ({exc}) and no DDL of it reached the stream within "
                f"{_DDL_WAIT_S:.0f} s: its layout changed in a way this destination does not see"
            ),
            cause=exc,
        )

    def _await_merge(
        self, done: Callable[[], bool], late: Callable[[], SnapshotError], cause: BaseException | None = None
    ) -> None:
        """Wait until ``done()`` (the stream's merge got somewhere: the parser thread moves it, looked at every
        50 ms); a stop raises _Stopped, and past :data:`_DDL_WAIT_S` the error ``late()`` makes (from ``cause``)."""
        deadline = time.monotonic() + _DDL_WAIT_S
        while not done():
            if self._stop.is_set():
                raise _Stopped
            if time.monotonic() > deadline:
                error = late()
                if cause is not None:
                    raise error from cause
                raise error
            self._stop.wait(0.05)

    def _joined(self, pending: PendingChunk, schema: TableSchema) -> Any:
        """Wait until the chunk is in the stream (True), the stream dropped it (False), or it came after a DDL of
        its table (``_LAYOUT``: read it again under the new layout)."""
        while True:
            try:
                self._rows_emitted += pending.wait(0.2)
                return True
            except TimeoutError:
                if self._stop.is_set():
                    raise _Stopped from None
            except LayoutChanged as exc:
                self._log.info(
                    "chunk %d of %s is read again under its new layout: %s", pending.number, schema.full_name, exc
                )
                return _LAYOUT
            except SnapshotAborted as exc:
                self._log.info("chunk %d of %s is read again: %s", pending.number, schema.full_name, exc)
                return False

    def consumer_took(self) -> None:
        """The consumer took entries (a get): a reader waiting for it to catch up goes on at once."""
        self._taken.set()

    def _wait_for_consumer(self, limit: int) -> None:
        """Read ahead of the consumer by at most ``limit`` rows it has not taken (``AHEAD_CHUNKS`` chunks): the store
        counts entries, and a SNAPSHOT entry holds many rows, so this is what bounds the rows a snapshot keeps in the
        store by chunks, not tables. (Not by acks: a Spark source acks a micro-batch only when it plans the next
        one.) Woken by :meth:`consumer_took`; the timeout only bounds how late a stop is noticed."""
        while True:
            if self._stop.is_set():
                raise _Stopped
            self._taken.clear()  # before the check: a get after it sets the event again
            if self._unread_rows is None or self._unread_rows() <= limit:
                return
            if self._waiting is not None:
                self._waiting()  # a get waiting for a full batch must not wait for chunks that wait for it
            self._taken.wait(0.5)

    def _throttle(self, rows: int, started: float) -> None:
        if self.max_rows_per_s is None or rows == 0:
            return
        due = started + rows / self.max_rows_per_s
        self._stop.wait(max(0.0, due - time.monotonic()))


class _Stopped(Exception):
    pass


_DONE: Any = object()  # a table's last chunk is in the stream
_LAYOUT: Any = object()  # a chunk came after a DDL of its table: read again under the new layout
_DDL_WAIT_S = 60.0
# the server's errors for a column or table a DDL removed or renamed since the layout was read
_LAYOUT_ERRORS = frozenset({1054, 1146})


def _layout_gone(exc: BaseException) -> bool:
    return bool(exc.args) and exc.args[0] in _LAYOUT_ERRORS


def _key_arguments(
    schema: TableSchema, key: tuple[str, ...], keys: list[tuple[tuple[str, Any], ...]]
) -> list[list[tuple[str, Any]]] | None:
    """Each of ``keys`` as the arguments that find its row by the chunk key ``key`` (in the key's order); None when a
    key does not name the chunk key's columns, or holds a value rows cannot be found by."""
    out = []
    for named in keys:
        values = dict(named)
        if set(values) != set(key):
            return None
        found = equal_arguments(schema, key, [values[k] for k in key])
        if found is None:
            return None
        out.append(found)
    return out
