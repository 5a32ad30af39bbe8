"""The binlog source protocol: what the parser asks of a server (real, file-based or fake).

Everything above this line -- conversion, transaction buffering, start-position finding, retries -- is written once
against :class:`BinlogSource`. A source reports failures with :class:`~canal.errors.SourceError` (``errno`` set to the
server's error number where there is one) and a purged position with :class:`~canal.errors.BinlogPurgedError`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol, runtime_checkable

import attrs

from canal.parse.events import BinlogEvent
from canal.position import EntryPosition
from canal.schema import SchemaCatalog
from canal.schema.history import ColumnSource


@attrs.define(slots=True)
class RowsForm:
    """How a dump decodes row images, read at each rows event so a consumer may change it while the dump runs:
    ``columnar`` -- column by column (:class:`~canal.parse.mysql.decoder.ColumnarGen`), for a consumer that builds
    typed columns; else tuples of values. Either form is the same :class:`~canal.protocol.Rows` to its readers.
    Sources that do not decode binlog bytes (the fake binlog) ignore it."""

    columnar: bool = False


@attrs.frozen(slots=True)
class BinlogFile:
    """One file of ``SHOW BINARY LOGS``."""

    name: str
    size: int


@attrs.frozen(slots=True)
class DumpRequest:
    """Where a dump starts and how it behaves.

    Either ``journal_name`` + ``position`` (file and offset of an event start, 4 for the start of a file) or
    ``gtid_set`` (dump everything not in the set). ``blocking=False`` ends the dump cleanly at the current end of the
    binlog; a blocking dump waits for new events and yields a :class:`~canal.parse.events.HeartbeatEvent` every
    ``heartbeat_period_s`` while idle.

    ``schema`` is where table maps without column names (``binlog_row_metadata`` below FULL) take them: the
    destination's schema history (strict), or None for the source's own fallback (a server's information_schema,
    read now).

    ``decode_rows=False`` is for readers that only need a binlog's structure (transaction boundaries, statements,
    GTIDs, offsets, times), such as the start-position search: decoding row images is most of the cost of reading a
    binlog, and they never look at them. A source that honours it yields every
    :class:`~canal.parse.events.RowsEvent` and :class:`~canal.parse.events.TableMapEvent` as an
    :class:`~canal.parse.events.IgnoredEvent` (the binlog type code, offsets, timestamp and server id unchanged), so
    the stream keeps one event per binlog event and contiguous offsets; every other event is exactly as with
    ``decode_rows=True``. A source may ignore the flag and decode anyway, so such a reader must skip row events and
    table maps whichever form they take. ``rows_form``: how row images are decoded (:class:`RowsForm`).

    ``decode_table(schema, table)`` (None: every table) says whether the rows of a table are decoded: a rows event of
    a table it refuses comes with :data:`~canal.parse.events.UNDECODED` rows, its other fields as ever (a shared
    reader decodes only the tables some destination captures). A source may ignore it and decode anyway.
    """

    journal_name: str | None = None
    position: int = 4
    gtid_set: str | None = None
    blocking: bool = True
    heartbeat_period_s: float = 1.0
    decode_rows: bool = True
    schema: ColumnSource | None = attrs.field(default=None, eq=False, repr=False)
    rows_form: RowsForm = attrs.field(factory=RowsForm, eq=False, repr=False)
    decode_table: Callable[[str, str], bool] | None = attrs.field(default=None, eq=False, repr=False)


@runtime_checkable
class BinlogSource(Protocol):
    """A server the parser can read a binlog from."""

    @property
    def address(self) -> str:
        """The server's identity for positions: ``host:port``, ``fake://NAME`` or ``file://DIR``."""
        ...

    @property
    def is_mariadb(self) -> bool: ...

    def open(self) -> None:
        """Connect (idempotent). Raises SourceUnreachableError when the server cannot be reached."""
        ...

    def close(self) -> None:
        """Disconnect; an iterator returned by :meth:`dump` in another thread stops with SourceError soon after."""
        ...

    def server_id(self) -> int: ...

    def master_status(self) -> EntryPosition:
        """The current end of the binlog: file, offset, and the executed GTID set (``gtid``) if any."""
        ...

    def binlog_files(self) -> list[BinlogFile]:
        """``SHOW BINARY LOGS``: the files still on the server, oldest first."""
        ...

    def dump(self, request: DumpRequest) -> Iterator[BinlogEvent]:
        """Stream events from the requested start. Close the iterator (or the source) to stop a blocking dump."""
        ...

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        """Run a statement on a side connection (detecting/heartbeat SQL, status queries)."""
        ...


@runtime_checkable
class SchemaReader(Protocol):
    """A source that can tell its tables' layouts now (a server; not a directory of binlog files): what the schema
    history bootstraps from."""

    @property
    def logs_column_names(self) -> bool:
        """Whether its table maps carry column names (``binlog_row_metadata=FULL``)."""
        ...

    def schema_catalog(self, *, objects: bool = False) -> SchemaCatalog:
        """Every table's layout now (the server's own schemas aside); with ``objects``, the views, triggers and
        routines too (:attr:`SchemaCatalog.objects <canal.schema.SchemaCatalog.objects>`: what the schema history
        bootstraps from)."""
        ...

    @property
    def lower_case_names(self) -> bool:
        """Whether the server stores database and table names in lower case (``lower_case_table_names=1``):
        its row events name tables so, whatever case a DDL typed them in."""
        ...

    @property
    def system_time_zone(self) -> str | None:
        """The server's ``system_time_zone`` (the name its operating system gives the zone it started in, such as
        ``UTC`` or ``CET``): what a session whose ``time_zone`` is ``SYSTEM`` converts in. None: not known."""
        ...
