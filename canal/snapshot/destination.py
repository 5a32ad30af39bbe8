"""The snapshots of one destination, as its instance plans them: which snapshot a start is due, the checks a new one
passes before anything changes, the tables "the captured tables" names, and the runner that reads one.

:class:`~canal.instance.Instance` keeps the cursors, :class:`~canal.snapshot.running.RunningSnapshots` the running
snapshots; this holds what they ask of the source and the config to start one. Its records go to the instance's
destination logger (passed in).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from canal.config import InstanceConfig, KeylessTables, SnapshotMode
from canal.errors import ConfigError, SchemaError, SnapshotError
from canal.log import DestinationAdapter
from canal.parse.mysql import MysqlBinlogSource
from canal.parse.parser import EventParser
from canal.position import LogPosition, SnapshotCursor
from canal.protocol import TableSchema
from canal.schema.catalog import SchemaCatalog
from canal.snapshot.marks import WatermarkWriter
from canal.snapshot.merge import SnapshotMerge
from canal.snapshot.reader import ChunkReader
from canal.snapshot.runner import SnapshotRunner, split_table_name

_SYSTEM_DBS = frozenset({"mysql", "information_schema", "performance_schema", "sys"})
_FEW_TABLES = 16  # a snapshot of no more tables reads each one's layout alone


class DestinationSnapshots:
    """The snapshot planning of destination ``config.destination``, whose parser is ``parser`` (a group's parsers take
    no snapshots: every method that needs the source raises :class:`~canal.errors.ConfigError` for them)."""

    def __init__(self, config: InstanceConfig, parser: object, log: DestinationAdapter) -> None:
        self.config = config
        self.destination = config.destination
        self._parser = parser
        self._log = log

    def parts(self) -> tuple[SnapshotMerge, MysqlBinlogSource]:
        """The parser's snapshot merge and a source of the active master to read tables with."""
        parser = self._parser
        if not isinstance(parser, EventParser) or parser.merge is None:
            raise ConfigError("snapshots are not available in group mode", key="snapshot")
        merge = parser.merge
        if not isinstance(merge, SnapshotMerge):
            raise ConfigError("this parser takes no snapshot chunks", key="snapshot")
        source = parser.source_factory(parser.active_master)
        if not isinstance(source, MysqlBinlogSource):
            raise ConfigError(
                f"snapshots read tables over SQL: {type(source).__name__} cannot (a MariaDB source can)",
                key="snapshot",
            )
        return merge, source

    @staticmethod
    def catalog(source: MysqlBinlogSource, table: tuple[str, str] | None = None) -> SchemaCatalog:
        """Every table's layout on the server now; with ``table``, that table's alone."""
        source.open()
        try:
            return source.schema_catalog(table)
        finally:
            source.close()

    def runner(
        self,
        plan: SnapshotCursor,
        merge: SnapshotMerge,
        source: MysqlBinlogSource,
        catalog: SchemaCatalog | None,
        chunk_rows: int | None,
        max_rows_per_s: float | None,
        *,
        waiting: Callable[[], None],
        rows_out: Callable[[], int],
        stored: Callable[[], int] | None = None,
    ) -> SnapshotRunner:
        """The runner of ``plan``; ``waiting`` tells the store the runner waits for the consumer, ``rows_out`` is the
        snapshot rows up to the last entry handed out (the runner's read-ahead is counted from there), ``stored``
        the store's put sequence (:attr:`SnapshotRunner.stored_through`)."""
        settings = self.config.snapshot
        known: list[SchemaCatalog] = [] if catalog is None else [catalog]

        def table_schema(db: str, table: str) -> TableSchema | None:
            """The layout ``catalog`` (the one the snapshot was planned with) holds; without one, the server's now --
            every table's in one read for a snapshot of many (a resumed one), the table's alone for a few (a heal's,
            a re-read of rows)."""
            if not known and len(plan.tables) <= _FEW_TABLES:
                return table_schema_now(db, table)
            if not known:
                known.append(self.catalog(source))
            found = known[0].get(db, table)
            return None if found is None else found.table_schema(mariadb=known[0].mariadb)

        def table_schema_now(db: str, table: str) -> TableSchema | None:
            """The table's layout as the server has it now (a table a heal or a re-read of rows added, one whose DDL
            the stream handed off while it was read): that table's alone, not every table's."""
            now = self.catalog(source, (db, table))
            found = now.get(db, table)
            return None if found is None else found.table_schema(mariadb=now.mariadb)

        def estimated_rows(tables: Sequence[TableSchema]) -> int:
            """InnoDB's row estimate of ``tables``, in one query (0 where it has none)."""
            if not tables:
                return 0
            wanted = {(t.schema, t.table) for t in tables}
            databases = sorted({db for db, _ in wanted})
            conn = source.snapshot_connection()
            try:
                with conn.cursor() as cur:
                    cur.execute(
                        "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_ROWS FROM information_schema.TABLES "
                        f"WHERE TABLE_SCHEMA IN ({', '.join(['%s'] * len(databases))})",
                        databases,
                    )
                    found = cur.fetchall()
            finally:
                conn.close()
            return sum(int(rows) for db, name, rows in found if rows is not None and (db, name) in wanted)

        def unread_rows() -> int:
            return runner.rows_emitted - max(rows_out(), plan.rows)

        def in_stream(db: str, table: str) -> bool | None:
            """Whether the stream's schema history holds the table (None: no history, or it lost the layout)."""
            history = self._parser.schema_history if isinstance(self._parser, EventParser) else None
            if history is None:
                return None
            try:
                return history.table(db, table) is not None
            except SchemaError:
                return None

        runner = SnapshotRunner(
            self.destination,
            plan,
            merge,
            source.snapshot_connection,
            table_schema,
            chunk_rows=settings.chunk_rows if chunk_rows is None else chunk_rows,
            chunk_bytes=settings.chunk_bytes,
            keyless=settings.keyless,
            max_rows_per_s=settings.max_rows_per_s if max_rows_per_s is None else max_rows_per_s,
            estimated_rows=estimated_rows,
            unread_rows=unread_rows,
            waiting=waiting,
            watermarks=self.watermark_writer(),
            table_schema_now=table_schema_now,
            stored=stored,
            in_stream=in_stream,
        )
        return runner

    def watermark_writer(self) -> WatermarkWriter | None:
        """The writer of DBLog's watermarks when the config names a watermark table (its own source and
        connection)."""
        table = self.config.snapshot.watermark
        if table is None:
            return None
        merge, source = self.parts()
        return WatermarkWriter(source, table, self.destination, merge.expect_mark)

    def captured_tables(self, catalog: SchemaCatalog) -> list[str]:
        """The tables a snapshot of "the captured tables" reads: those the instance filter includes."""
        filters = self.config.table_filters
        marks = self.config.snapshot.watermark_table
        return sorted(
            name
            for name in catalog.tables
            if filters.includes(*split_table_name(name))
            and split_table_name(name)[0].lower() not in _SYSTEM_DBS
            and name != marks
        )

    def check_tables(self, tables: Sequence[str], source: MysqlBinlogSource, catalog: SchemaCatalog) -> None:
        """A new snapshot of an unknown table fails here, before anything changes (:class:`ConfigError`), and so,
        with ``keyless=refuse``, does one of a table that has no chunk key (no primary key, no unique key over NOT
        NULL columns; :class:`SnapshotError`)."""
        missing = [name for name in tables if name not in catalog.tables]
        if missing:
            raise ConfigError(f"cannot snapshot {', '.join(missing)}: no such table", key="snapshot.tables")
        marks = self.config.snapshot.watermark_table
        if marks is not None and marks in tables:
            raise ConfigError(f"cannot snapshot {marks}: it is the snapshot's watermark table", key="snapshot.tables")
        writer = self.watermark_writer()
        if writer is not None:
            try:
                writer.check()
            finally:
                writer.close()
        if self.config.snapshot.keyless is not KeylessTables.REFUSE:
            return
        refused = []
        for name in tables:
            found = catalog.tables.get(name)
            if found is None or found.primary:
                continue
            reader = ChunkReader(source.snapshot_connection, found.table_schema(mariadb=catalog.mariadb))
            try:
                if reader.chunk_key() is None:
                    refused.append(name)
            finally:
                reader.close()
        if refused:
            raise SnapshotError(
                f"cannot snapshot {', '.join(refused)}: no primary key and no unique key over NOT NULL columns to "
                "chunk by (snapshot keyless=refuse; read_whole reads such a table in one transaction)"
            )

    def cursor_purged(self, cursors: Sequence[LogPosition | None]) -> bool:
        """Whether a cursor names a binlog file the server no longer has (``when_needed``: snapshot again)."""
        _merge, source = self.parts()
        source.open()
        try:
            files = {f.name for f in source.binlog_files()}
        finally:
            source.close()
        for cursor in cursors:
            journal = None if cursor is None else cursor.position.journal_name
            if journal and journal not in files:
                self._log.warning(
                    "the cursor's binlog file %s was purged from the server: snapshotting the captured tables again "
                    "and streaming from the server's position now (snapshot mode when_needed)",
                    journal,
                )
                return True
        return False

    def due(self, cursors: Sequence[LogPosition | None]) -> SnapshotCursor | None:
        """The snapshot this start runs, given the subscribed clients' ``cursors``: the unfinished one of a consumer
        cursor, else the initial snapshot when the config asks for one and this is the destination's first start (no
        cursor, no configured position; for ``initial_only``, no cursor)."""
        for cursor in cursors:
            if cursor is not None and cursor.snapshot is not None:
                return cursor.snapshot
        settings = self.config.snapshot
        if settings.mode is SnapshotMode.NEVER:
            return None
        if settings.mode is SnapshotMode.INITIAL_ONLY:
            # a copy of the tables and no stream: a configured start position has nothing to start
            return SnapshotCursor(settings.tables or ()) if all(c is None for c in cursors) else None
        if any(c is not None for c in cursors):
            if settings.mode is SnapshotMode.WHEN_NEEDED and self.cursor_purged(cursors):
                return SnapshotCursor(settings.tables or ())
            return None
        master = self.config.master
        if master.has_start:
            return None
        return SnapshotCursor(settings.tables or ())
