"""A DDL's time zone: how the server converted values between DATETIME (local time) and TIMESTAMP (UTC).

A TIMESTAMP holds an instant (the mirror keeps it in UTC); a DATETIME holds a local time. A DDL that moves values
between them converts in its session's ``time_zone``, which the server logs with the statement when it used it
(:data:`canal.parse.statement_props.TIME_ZONE_PROP`): ``ALTER ... MODIFY c TIMESTAMP`` of a DATETIME column reads
each value as a local time of that zone, ``MODIFY c DATETIME`` of a TIMESTAMP column writes each instant as the
zone's local time, and ``ADD COLUMN c TIMESTAMP DEFAULT '2024-01-01 00:00:00'`` gives the table's rows the instant
that local time names. A statement logged without a zone converted nothing in one.

The zone is what the server names it: an offset (``+05:00``), a named zone from its time zone tables
(``Europe/Berlin``, read here through Python's :mod:`zoneinfo`, the same tz database the tables are loaded from),
or ``SYSTEM`` -- the server's system zone, known exactly only when its ``system_time_zone`` is ``UTC`` (a name such
as ``CET`` or ``EST`` is an abbreviation, not a zone: it says nothing of the zone's DST rules). A zone the mirror
cannot know exactly is a :class:`MirrorTimeZoneError` naming the statement, the zone and the table.

A local time to an instant, as MariaDB converts it (measured against its ``UNIX_TIMESTAMP`` / ``CONVERT_TZ``): a
time that happens twice (the hour a DST change repeats) is its first occurrence; a time that never happens (the
hour a DST change skips) is the instant the skipped hour ends, its fraction of a second kept; an instant outside
TIMESTAMP's range (1970-01-01 00:00:01 to 2038-01-19 03:14:07.999999 UTC) is the zero TIMESTAMP, which the mirror
holds as its ``zero_dates`` says (a server in strict mode refuses such an ALTER, and logs nothing).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from canal.lake.types import MirrorConversionError, MirrorTypeError, ZeroDates
from canal.parse.statement_props import SYSTEM_TIME_ZONE_PROP, TIME_ZONE_PROP

__all__ = ["MirrorTimeZoneError", "StatementZone", "literal_to_utc", "shift"]

_OFFSET: Final = re.compile(r"^([+-])(\d{1,2}):(\d{2})$")
_UTC_NAMES: Final = frozenset({"UTC", "ETC/UTC", "UNIVERSAL", "ETC/UNIVERSAL", "ZULU", "ETC/ZULU"})
_EPOCH: Final = dt.datetime(1970, 1, 1)
_TIMESTAMP_MAX_S: Final = 2**31 - 1  # 2038-01-19 03:14:07 UTC: TIMESTAMP's last second


class MirrorTimeZoneError(MirrorConversionError):
    """A DDL converted values in a time zone the mirror cannot know exactly (``SYSTEM`` on a server whose system zone
    is not UTC, a name Python's tz database does not hold), or in a way the mirror does not model."""


@attrs.frozen(slots=True)
class StatementZone:
    """The time zone one DDL ran in (``name`` None: the server logged none, the statement converted nothing in one;
    ``system``: the server's system zone, for ``SYSTEM``), for the table ``table``, with the statement for messages."""

    name: str | None
    system: str | None
    table: str
    sql: str

    @classmethod
    def of(cls, props: Mapping[str, str] | None, table: str, sql: str) -> StatementZone:
        """The zone a DDL row's props (:data:`canal.parse.statement_props.TIME_ZONE_PROP`) name."""
        props = props or {}
        return cls(props.get(TIME_ZONE_PROP), props.get(SYSTEM_TIME_ZONE_PROP), table, sql)

    @property
    def identity(self) -> bool:
        """Whether local time is UTC in this zone (no zone logged, ``+00:00``, ``UTC``, ``SYSTEM`` of a UTC server):
        converting changes no value."""
        name = self.name
        if name is None:
            return True
        if name.upper() == "SYSTEM":
            return self.system is not None and self.system.upper() in _UTC_NAMES
        offset = _OFFSET.match(name)
        return (offset is not None and int(offset[2]) == int(offset[3]) == 0) or name.upper() in _UTC_NAMES

    def describe(self) -> str:
        return f"{self.sql[:200]!r} on {self.table} (time zone {self.name!r})"

    def tzinfo(self) -> dt.tzinfo:
        """The zone; :class:`MirrorTimeZoneError` when it cannot be known exactly."""
        name = self.name
        if self.identity:
            return dt.UTC
        assert name is not None
        if name.upper() == "SYSTEM":
            named = (
                "which the capture could not read (a source that is not a server)"
                if self.system is None
                else f"which it names {self.system!r}: a name that does not say the zone's rules (DST) exactly"
            )
            raise MirrorTimeZoneError(
                f"{self.describe()} converted values in the server's system time zone, {named}. Nothing of the step "
                "was written. Run such DDL with an explicit time_zone (a named zone or an offset), or start the "
                "server in UTC, then mirror the table anew from a snapshot.",
                table=self.table,
                statement=self.sql,
            )
        offset = _OFFSET.match(name)
        if offset is not None:
            minutes = int(offset[2]) * 60 + int(offset[3])
            return dt.timezone(dt.timedelta(minutes=-minutes if offset[1] == "-" else minutes))
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            raise MirrorTimeZoneError(
                f"{self.describe()} converted values in a time zone Python's tz database does not hold. Nothing of "
                "the step was written. Install the tzdata the server's time zone tables came from, then apply again.",
                table=self.table,
                statement=self.sql,
            ) from None


def _to_utc_seconds(local: dt.datetime, zone: dt.tzinfo) -> int:
    """The instant (epoch seconds) of a whole-second local time, as MariaDB converts it (see the module)."""
    first = local.replace(tzinfo=zone, fold=0)
    instant = int(first.timestamp())
    if dt.datetime.fromtimestamp(instant, zone).replace(tzinfo=None) == local:
        return instant
    # skipped by a DST change: the instant the skipped hour ends lies between the readings under the offsets before
    # (the later instant) and after the change
    low = int(local.replace(tzinfo=zone, fold=1).timestamp())  # before the change
    high = instant  # after it
    before = dt.datetime.fromtimestamp(low, dt.UTC).astimezone(zone).utcoffset()
    while high - low > 1:
        middle = (low + high) // 2
        if dt.datetime.fromtimestamp(middle, dt.UTC).astimezone(zone).utcoffset() == before:
            low = middle
        else:
            high = middle
    return high


def _converted(column: Any, convert: Callable[[int], int | None]) -> Any:
    """``column`` (timestamp[us]) with each value's epoch microseconds mapped by ``convert`` (None: the zero)."""
    import pyarrow as pa

    micros = column.cast(pa.int64()).to_pylist()
    return pa.array([None if m is None else convert(m) for m in micros], pa.int64()).cast(column.type)


def shift(column: Any, zone: StatementZone, to_utc: bool, zero_dates: ZeroDates, what: str) -> Any:
    """``column`` (the mirror's timestamp[us] values) converted from local time in ``zone`` to UTC (``to_utc``: a
    DATETIME becomes a TIMESTAMP) or back; an instant outside TIMESTAMP's range is the zero TIMESTAMP
    (``zero_dates``: null, or a :class:`MirrorTypeError` naming ``what``) -- its whole seconds, that is: MariaDB
    keeps the fraction, so '2038-01-19 03:14:08.5' UTC becomes 1970-01-01 00:00:00.5 UTC (measured on 10.11)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if len(column) == 0 or column.null_count == len(column):
        return column
    tz = zone.tzinfo()
    if isinstance(tz, dt.timezone):  # a fixed offset: one subtraction, then the range
        offset = pa.scalar(tz.utcoffset(None), pa.duration("us"))
        moved = pc.subtract(column, offset) if to_utc else pc.add(column, offset)
        if not to_utc:
            return moved
        seconds = pc.divide(moved.cast(pa.int64()), 1_000_000)
        outside = pc.fill_null(pc.or_(pc.less(seconds, 1), pc.greater(seconds, _TIMESTAMP_MAX_S)), False)
        if not pc.any(outside).as_py():
            return moved

    def to_instant(micros: int) -> int | None:
        seconds, fraction = divmod(micros, 1_000_000)
        local = _EPOCH + dt.timedelta(seconds=seconds) if -62_000_000_000 < seconds < 253_000_000_000 else None
        instant = None if local is None else _to_utc_seconds(local, tz)
        if instant is None or not 1 <= instant <= _TIMESTAMP_MAX_S:
            if fraction:  # the server makes the seconds 0 and keeps the fraction: 1970-01-01 00:00:00.f UTC
                return fraction
            if zero_dates == "null":
                return None
            shown = (_EPOCH + dt.timedelta(microseconds=micros)).isoformat(" ") if local is not None else str(micros)
            raise MirrorTypeError(
                f"{what}: {shown} read in {zone.describe()} lies outside TIMESTAMP's range: the server made it the "
                "zero TIMESTAMP, which the mirror holds only with zero_dates='null'"
            )
        return instant * 1_000_000 + fraction

    def to_local(micros: int) -> int:
        seconds, fraction = divmod(micros, 1_000_000)
        local = dt.datetime.fromtimestamp(seconds, dt.UTC).astimezone(tz).replace(tzinfo=None)
        return int((local - _EPOCH).total_seconds()) * 1_000_000 + fraction

    if to_utc:
        return _converted(column, to_instant)
    return _converted(column, to_local)


def literal_to_utc(text: str | None, zone: StatementZone, zero_dates: ZeroDates, what: str) -> str | None:
    """A TIMESTAMP column's DEFAULT literal (canal text of a local time in ``zone``) as the UTC instant the server
    stores for it (canal text)."""
    import pyarrow as pa

    from canal.lake.types import typed_array

    if text is None:
        return None
    local = typed_array([text], pa.timestamp("us"), zero_dates)
    if local.null_count:  # the zero TIMESTAMP ('0000-00-00 00:00:00'): no instant, no zone
        return text
    instant = shift(local, zone, True, zero_dates, what)[0].as_py()
    return None if instant is None else instant.isoformat(" ")
