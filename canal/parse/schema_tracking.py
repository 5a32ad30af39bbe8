"""The parser's side of the schema history: bootstrap it on a first start, rewind it to each dump's start, feed it
every DDL the dump reads before the entries after the DDL are handed off, and give the decoder its layouts.

Bootstrap. The layouts are read now (:meth:`~canal.parse.source.SchemaReader.schema_catalog`), but a dump may start
earlier (a configured position, a cursor from before the history existed). They are valid from the start position
only if no DDL lies between it and the moment they were read, so the binlog in between is scanned (structure only,
no row decoding) for statements that change a layout:

* master status is taken before and after reading the layouts; a DDL between the two makes the read ambiguous and it
  is retried;
* no DDL between the start and the read: the layouts hold from the start;
* a DDL there: rows before it would be named by a later schema. If the server logs column names
  (``binlog_row_metadata=FULL``) the binlog names those rows and the history starts at the read; otherwise the start
  is refused with :class:`~canal.errors.SchemaError` naming the DDL and the recovery, never silently misnamed.

A source that cannot tell its layouts (a directory of binlog files) starts an empty history: tables created in the
files read are known, others only if the files log column names (else their rows fail with SchemaError).
"""

from __future__ import annotations

import logging
from typing import Final

import attrs

from canal.errors import SchemaError
from canal.parse.events import QueryEvent
from canal.parse.source import BinlogSource, DumpRequest, SchemaReader
from canal.parse.start_position import StartPosition
from canal.position import EntryPosition
from canal.schema import SchemaCatalog
from canal.schema.history import RECOVERY, SchemaHistory, layout_statement

__all__ = ["SchemaTracker", "first_layout_ddl", "read_layouts"]

_READ_ATTEMPTS: Final = 5


def _key(position: EntryPosition) -> tuple[int, int]:
    return (position.journal_number, -1 if position.position is None else position.position)


class SchemaTracker:
    """Keeps one destination's :class:`~canal.schema.history.SchemaHistory` in step with the parser's dumps."""

    def __init__(self, history: SchemaHistory, log: logging.LoggerAdapter[logging.Logger]) -> None:
        self.history = history
        self._log = log
        self._rewind_at_first_event = False

    def prepare(self, source: BinlogSource, start: StartPosition, request: DumpRequest) -> DumpRequest:
        """Before a dump from ``start``: bootstrap (first start) or rewind the history; the request with the
        history as the decoder's layouts."""
        history = self.history
        if history.is_empty:
            self._bootstrap(source, start)
        elif start.position.journal_name and not start.gtid_set:
            history.rewind(start.position)
        else:
            self._rewind_at_first_event = True  # a GTID start: the first event tells where the dump is
        return attrs.evolve(request, schema=history)

    def observe(self, event: QueryEvent) -> None:
        """A query event the dump read: a DDL is recorded (and persisted) before anything after it is handed off."""
        position = EntryPosition(event.log_file, event.offset, event.timestamp * 1000, event.server_id)
        if self._rewind_at_first_event:
            self._rewind_at_first_event = False
            self.history.rewind(position)
        self.history.apply(position, event.schema, event.sql, next_offset=event.next_offset)

    # -- bootstrap ----------------------------------------------------------------------------------------------------

    def _bootstrap(self, source: BinlogSource, start: StartPosition) -> None:
        history = self.history
        if not isinstance(source, SchemaReader):
            at = start.position if start.position.journal_name else source.master_status()
            history.bootstrap(at, SchemaCatalog(mariadb=source.is_mariadb))
            self._log.warning(
                "%s cannot tell its tables' layouts: the schema history starts empty at %s and knows the tables the "
                "binlog creates from here on (others need binlog_row_metadata=FULL)",
                source.address,
                at,
            )
            return
        catalog, read_at = read_layouts(source, self._log)
        if not start.position.journal_name or start.gtid_set:
            history.bootstrap(read_at, catalog)
            return
        ddl = first_layout_ddl(source, start.position, read_at)
        if ddl is None:
            history.bootstrap(start.position, catalog)
            return
        if not source.logs_column_names:
            raise SchemaError(
                f"the schema history cannot start at {start.position}: {ddl} lies between it and now, and "
                f"{source.address} does not log column names (binlog_row_metadata is not FULL), so the rows before "
                f"it cannot be named; {RECOVERY}",
                position=str(start.position),
            )
        self._log.info(
            "schema history starts at %s (%s lies between the start %s and now; the binlog names the rows before)",
            read_at,
            ddl,
            start.position,
        )
        history.bootstrap(read_at, catalog)


def read_layouts(
    source: BinlogSource, log: logging.LoggerAdapter[logging.Logger] | None = None
) -> tuple[SchemaCatalog, EntryPosition]:
    """The source's table layouts now and a position they hold at: no DDL ran between the master status taken before
    and after reading them (else they are read again, up to a few times; then SchemaError)."""
    if not isinstance(source, SchemaReader):
        raise SchemaError(f"{source.address} cannot tell its tables' layouts (a directory of binlog files)")
    for _attempt in range(_READ_ATTEMPTS):
        before = source.master_status()
        catalog = source.schema_catalog()
        after = source.master_status()
        ddl = first_layout_ddl(source, before, after)
        if ddl is None:
            return catalog, EntryPosition(before.journal_name, before.position, before.timestamp, before.server_id)
        if log is not None:
            log.info("%s ran while the table layouts were read; reading them again", ddl)
    raise SchemaError(
        f"DDL kept running on {source.address} while the schema history read the table layouts "
        f"({_READ_ATTEMPTS} attempts); start again when no DDL runs"
    )


def first_layout_ddl(source: BinlogSource, start: EntryPosition, end: EntryPosition) -> str | None:
    """The first statement in [start, end) of the source's binlog that changes a table layout, described, or None.
    Reads the binlog's structure only (no row decoding)."""
    if not start.journal_name or not (_key(start) < _key(end)):
        return None
    request = DumpRequest(start.journal_name, start.position or 4, blocking=False, decode_rows=False)
    events = source.dump(request)
    try:
        for event in events:
            if event.offset == 0:
                continue  # an artificial event (a dump's first rotate)
            at = (EntryPosition(event.log_file, event.offset).journal_number, event.offset)
            if not at < _key(end):
                return None
            if start.included and at == _key(start):
                continue  # consumed already
            if isinstance(event, QueryEvent) and layout_statement(event.sql) is not None:
                return f"the DDL {event.sql[:200]!r} at {event.log_file}:{event.offset}"
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()
    return None
