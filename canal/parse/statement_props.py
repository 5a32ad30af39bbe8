"""The props the converter gives a statement entry's header beyond canal's (:func:`statement_props`): the names' case,
and the session state the server logged with a DDL that its effect depends on -- its time zone, its start's
microseconds, its sql_mode, with the version of the server that wrote the binlog. The mirror reads them
(:mod:`canal.lake.ddl`); the props the schema history adds to an ALTER TABLE entry are
:data:`canal.parse.convert.RETYPED_FROM_PROP` and its neighbours.
"""

from __future__ import annotations

from canal.parse.ddl import DdlResult, QueryKind
from canal.parse.events import QueryEvent
from canal.protocol import EventType

LOWER_CASE_PROP = "lower_case_table_names"
"""Header prop of statement entries from a server with ``lower_case_table_names=1`` (value ``"1"``)."""
TIME_ZONE_PROP = "TIME_ZONE"
"""Header prop of a DDL entry whose statement used its session's time zone (converted DATETIME values to TIMESTAMP,
evaluated a TIMESTAMP default): the zone as the server logged it (``+05:00``, ``Europe/Berlin``, ``SYSTEM``)."""
SYSTEM_TIME_ZONE_PROP = "SYSTEM_TIME_ZONE"
"""Beside :data:`TIME_ZONE_PROP` ``SYSTEM``: the server's ``system_time_zone`` (read at the dump's start), if known."""
SERVER_VERSION_PROP = "SERVER_VERSION"
"""Beside :data:`TIMESTAMP_PROP`: the version of the server that wrote the binlog (its format description's), which
says TIMESTAMP's range (MariaDB 11.5 made it reach 2106: the ``row_end`` of a current row version)."""
SQL_MODE_PROP = "SQL_MODE"
"""Header prop of an ALTER TABLE entry, and of any DDL entry whose text reads otherwise than under the default mode
(:mod:`canal.sql.modes`: ``NO_BACKSLASH_ESCAPES``, ``ANSI_QUOTES``, ...): the statement's ``sql_mode`` as the server
logged it, its bit set in decimal (as ``mysqlbinlog`` prints ``SET @@session.sql_mode``), with
:data:`SERVER_VERSION_PROP` beside it (MariaDB's bits are not MySQL's): how its text reads, and how the statement
converted the values it rewrote (MariaDB rounds fractional seconds it narrows under ``TIME_ROUND_FRACTIONAL``, and
truncates them without it; a 0 made AUTO_INCREMENT stays 0 under ``NO_AUTO_VALUE_ON_ZERO``)."""
TIMESTAMP_PROP = "TIMESTAMP"
"""Header prop of a DDL entry whose statement used its start time to the microsecond (MariaDB logs it then: ``ADD
SYSTEM VERSIONING`` makes it the ``row_start`` of the rows it versions): ``seconds.micros`` since the epoch, as
``mysqlbinlog`` prints ``SET TIMESTAMP``."""


def statement_props(
    event: QueryEvent,
    first: DdlResult | None,
    lower_case: bool,
    system_time_zone: str | None,
    server_version: str | None,
) -> dict[str, str]:
    """The props of a statement entry (``first``: the statement's first classified result, None for one that is
    not classified); under ``lower_case_table_names=1`` (``lower_case``) it says so (prop ``lower_case_table_names``
    = ``"1"``): the names in its SQL text are as typed, the server's are their lower case. A DDL's carries the
    session state the server logged with it that its effect depends on: the time zone (:data:`TIME_ZONE_PROP`; with
    ``SYSTEM``, the server's ``system_time_zone`` beside it) and the start time's microseconds
    (:data:`TIMESTAMP_PROP`); an ALTER TABLE's also its sql_mode (:data:`SQL_MODE_PROP`), as does any DDL's whose
    text reads otherwise under it -- with the version of the server that wrote the binlog (``server_version``)."""
    props: dict[str, str] = {}
    if lower_case:
        props[LOWER_CASE_PROP] = "1"
    if first is not None and first.kind is QueryKind.DDL:
        if event.time_zone is not None:
            props[TIME_ZONE_PROP] = event.time_zone
            if event.time_zone.upper() == "SYSTEM" and system_time_zone is not None:
                props[SYSTEM_TIME_ZONE_PROP] = system_time_zone
        if event.micros is not None:
            props[TIMESTAMP_PROP] = f"{event.timestamp}.{event.micros:06d}"
            if server_version is not None:
                props[SERVER_VERSION_PROP] = server_version
        if event.sql_mode is not None and (first.event_type is EventType.ALTER or not event.mode.reads_as_default):
            props[SQL_MODE_PROP] = str(event.sql_mode)
            if server_version is not None:
                props[SERVER_VERSION_PROP] = server_version
    return props
