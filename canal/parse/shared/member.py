"""What a shared reader knows of one destination (:class:`SharedMember`), what the destination's own dump would be,
and the check a destination makes of the layouts the reader decoded with (:func:`layout_seen`).

A reader serves a destination only while what it sends is what the destination's own dump would send:

* **the same groups**: a dump from a file position sends every group after it; a dump from a GTID set leaves out the
  groups the set holds (:attr:`SharedMember.gtid_start`). The reader compares each group's GTID with the sets of the
  destinations that read from another start than its own, and a destination whose own dump would skip a group
  leaves before it (:mod:`canal.parse.shared.reader`);
* **the same decode**: a reader that decodes with a schema history decodes with its own copy of the history of the
  destination that made it, which follows the DDL it reads (:meth:`SchemaTracker.fork
  <canal.parse.schema_tracking.SchemaTracker.fork>`), and stamps each table map with what that copy held of its table
  (:class:`~canal.parse.events.LayoutSeen`). A destination's parser compares that, before it takes the map of a
  table it captures, with what its own history holds there -- the history stands exactly at that event, having
  followed every DDL before it -- and reads alone from its last handed-off position when they differ
  (:meth:`Subscription.events <canal.parse.shared.queue.Subscription.events>`). A history that names a table
  otherwise never gets the reader's naming.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from canal.errors import CanalError, ParseError, SchemaError
from canal.filter import TableFilters
from canal.gtid import GtidSet, GtidStep
from canal.parse.events import BinlogEvent, LayoutSeen
from canal.parse.schema_tracking import SchemaTracker
from canal.parse.source import RowsForm
from canal.schema.history import SchemaHistory

__all__ = ["SharedMember", "SharedReaderLeft", "layout_seen"]


class SharedReaderLeft(CanalError):
    """This destination's subscription to a shared reader ended without an error of the source (it was slow, the
    reader cannot name a table it captures the way its own history does, its own dump would skip a group the reader
    sends, or it could not join where it stands): the parser dumps again from its last handed-off position, alone,
    as after a reconnect."""


@attrs.define(eq=False)
class SharedMember:
    """What a reader knows of one destination: its name, which tables it captures, how it decodes rows, and what its
    own dump would be (set by its parser at each dump)."""

    destination: str
    tables: TableFilters | None  # None: every table
    watermark: tuple[str, str] | None = None  # its snapshot watermark table (canal.snapshot.marks)
    rows_form: RowsForm = attrs.field(factory=RowsForm)
    rejoin_at: float = 0.0  # monotonic: it left (slow, or its history differs), and reads alone until then
    # how often its own dump asks the server for a heartbeat when idle (0: never): it counts a dump that sends nothing
    # for its read timeout dead, and a reader it shares must hear from the server as often
    heartbeat_s: float = 0.0
    # its schema history's tracker (None: it decodes without one); a reader it makes decodes with a fork of it
    schemas: SchemaTracker | None = None
    # the GTID set its dump starts from (None: a file position), as the request's text and as a set
    gtid_text: str | None = None
    gtid_start: GtidSet | None = None
    # its parser's step for one event, and whether a step may run on the reader's thread now and there is room for
    # what that many entries and bytes make (0, 0: the room is known) -- set while its parser reads through a reader
    step: Callable[[BinlogEvent], None] | None = None
    ready: Callable[[int, int], bool] | None = None

    def wants(self, schema: str, table: str) -> bool:
        tables = self.tables
        return tables is None or tables.matches(schema, table) or (schema, table) == self.watermark

    def literal_names(self) -> frozenset[str] | None:
        """The tables it captures as lower-case ``schema.table`` names, when its filter is plain names
        (:attr:`TableFilters.literal_names <canal.filter.TableFilters.literal_names>`) and it has no watermark
        table; else None (it is asked, :meth:`wants`)."""
        tables = self.tables
        return None if tables is None or self.watermark is not None else tables.literal_names

    def starts_from(self, gtid_set: str | None) -> None:
        """Its next dump starts from ``gtid_set`` (None: from a file position)."""
        self.gtid_text = gtid_set
        self.gtid_start = None if gtid_set is None else GtidSet(gtid_set)

    def skips(self, gtid: str, step: GtidStep | None = None) -> bool:
        """Whether its own dump leaves out the group of ``gtid`` (read already as ``step``, when it could be): one
        from a GTID set leaves out the groups the set holds (MySQL: any of them, wherever it lies; MariaDB: those of
        a domain up to the set's position in it, which in a binlog whose domains' sequence numbers increase are the
        ones at or below it)."""
        start = self.gtid_start
        if not start:
            return False
        try:
            return start.contains(gtid) if step is None else start.holds(step)
        except ParseError:  # a GTID of the other flavour than the set's: which it skips is unknown, so say it does
            return True


def layout_seen(history: SchemaHistory, schema: str, table: str) -> LayoutSeen:
    """What ``history`` holds of ``schema.table`` now, as a row decoder would be given it."""
    try:
        return LayoutSeen(history.columns(schema, table))
    except SchemaError:
        return LayoutSeen(None, unknown=True)
