"""The changes the parser judges on their entries for a heal, beside the statements the converter judges.

Under ``heal="snapshot"`` the parser hands these to the destination's heal policy (a
:class:`~canal.parse.unmodeled.StatementPolicy`, :class:`canal.snapshot.heal.Healer`), as the converter hands it the
statements the contract stops (:mod:`canal.parse.unmodeled`):

* :func:`conversion` -- an ALTER TABLE of a captured table whose conversion of the rows it holds the mirror would not
  repeat exactly (:func:`canal.schema.conversions.unrepeatable`: the model :mod:`canal.lake.ddl.conversions` converts
  by), asked with the layout and the types before the statement -- those the mirror is given -- so before the
  schema history follows it;
* :func:`partial` -- a rows entry whose partial images a copy cannot apply
  (:func:`canal.parse.heal_marks.partial_image`);
* :func:`reread_rows` -- a partial UPDATE that leaves some rows a copy cannot make exact (:mod:`canal.parse.rereads`):
  not the table, those rows are read again -- under ``heal="stop"`` too, where it is the typed stop instead.

Each gives the change as an :class:`~canal.parse.unmodeled.UnmodeledStatement` of shape
:data:`~canal.parse.heal_marks.CONVERSION` or :data:`~canal.parse.heal_marks.PARTIAL_IMAGE`, healable, naming its one
table; :func:`marked` puts the policy's props on the entry. Under ``heal="stop"`` none of this runs: such changes
reach a mirror as they are, and it stops typed there.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING

import attrs

from canal.errors import CanalError, SchemaError
from canal.names import qualified
from canal.parse.events import BinlogEvent, QueryEvent
from canal.parse.heal_marks import CONVERSION, HEAL, PARTIAL_IMAGE, partial_image, with_layouts
from canal.parse.rereads import RowRereads, rereads
from canal.parse.statement_props import SERVER_VERSION_PROP, SQL_MODE_PROP, SYSTEM_TIME_ZONE_PROP, TIME_ZONE_PROP
from canal.parse.unmodeled import StatementPolicy, UnmodeledStatement
from canal.position import EntryPosition
from canal.protocol import ColumnarRows, Entry, EntryType, EventType, Rows
from canal.schema.conversions import fractions_rule, unrepeatable
from canal.schema.history import SchemaHistory, layout_statement
from canal.sql import AlterTable

if TYPE_CHECKING:
    from canal.parse.schema_tracking import SchemaTracker

__all__ = ["conversion", "marked", "partial", "reread_rows"]

Captured = Callable[[str, str], bool]


def conversion(
    entry: Entry, event: QueryEvent, history: SchemaHistory, captured: Captured
) -> UnmodeledStatement | None:
    """The ALTER TABLE of ``entry`` (a DDL entry of ``event``) as a change to heal, when a copy of its captured table
    may not repeat its conversions (asked with the schema history's layout before it; a history that holds later
    DDL already -- a bootstrap taken after the event -- cannot say, and None is the answer); else None."""
    rc = entry.row_change
    if rc is None or not rc.is_ddl or not history.holds_nothing_after(_position(entry)):
        return None
    stmt = layout_statement(event.sql, event.mode)
    if not isinstance(stmt, AlterTable):
        return None
    header = entry.header
    db = stmt.table.schema if stmt.table.schema is not None else header.schema
    name = stmt.table.name
    if header.props.get("lower_case_table_names") == "1":
        db, name = db.lower(), name.lower()
    if not captured(db, name):
        return None
    try:
        before = history.table(db, name)
    except SchemaError:
        return None  # a layout the history lost: a copy does what it can
    props = header.props
    why = unrepeatable(
        stmt,
        before,
        history.retyped(event.schema, event.sql, _position(entry), event.mode),  # the types the mirror is given
        zone=props.get(TIME_ZONE_PROP),
        system_zone=props.get(SYSTEM_TIME_ZONE_PROP),
        fractions=fractions_rule(props.get(SQL_MODE_PROP), props.get(SERVER_VERSION_PROP, "")),
        mariadb=history.mariadb,
        mode=event.mode,
    )
    if why is None:
        return None
    table = qualified(db, name)
    return UnmodeledStatement(
        event.sql,
        header.schema,
        attrs.evolve(CONVERSION, description=why),
        (table,),
        (table,),
        _position(entry),
        False,
        True,
        (table,),
    )


def partial(entry: Entry) -> UnmodeledStatement | None:
    """A rows entry whose partial images a copy cannot apply, as a change to heal (its table); else None."""
    if entry.entry_type is not EntryType.ROWDATA:
        return None
    why = partial_image(entry)
    if why is None:
        return None
    header = entry.header
    table = qualified(header.schema, header.table)
    rc = entry.row_change
    assert rc is not None
    return UnmodeledStatement(
        f"{rc.event_type.name} of {table}: {why}",
        header.schema,
        attrs.evolve(PARTIAL_IMAGE, description=why),
        (table,),
        (table,),
        _position(entry),
        True,
        True,
        (table,),
    )


def reread_rows(
    entry: Entry,
    history: SchemaHistory | None,
    reading: Callable[[], Collection[str]] | None,
    reread: RowRereads | None,
) -> None:
    """Have the rows of a partial UPDATE read again where a copy cannot make them exact from it
    (:func:`canal.parse.rereads.rereads`; ``reading()``: the tables a snapshot in the stream still reads) through
    ``reread`` -- before the entry is handed off, so it carries the snapshot's progress with their pass. Without
    ``reread`` (``heal="stop"``), or when it cannot take a snapshot, the typed stop
    (:class:`~canal.errors.UnmodeledStatementError` of :data:`~canal.parse.heal_marks.PARTIAL_IMAGE`). An entry whose
    table heals from it (``HEAL``) needs nothing more."""
    rc = entry.row_change
    if rc is None or rc.event_type is not EventType.UPDATE or HEAL in entry.header.props:
        return
    rows = rc.rows
    if not isinstance(rows, Rows | ColumnarRows) or not rows.table.key_indexes or not rows.absent("after"):
        return  # whole images (the common case): nothing to look up
    header = entry.header
    layout = None
    if history is not None:
        try:
            layout = history.table(header.schema, header.table)
        except SchemaError:
            layout = None  # its layout unknown since a DDL: no VIRTUAL column known
    found = rereads(entry, layout, () if reading is None else reading())
    if found is None:
        return
    changed = UnmodeledStatement(
        f"UPDATE of {found.table}: {found.why}",
        header.schema,
        attrs.evolve(PARTIAL_IMAGE, description=found.why),
        (found.table,),
        (found.table,),
        _position(entry),
        True,
        True,
        (found.table,),
    )
    if reread is None:
        raise changed.error()
    try:
        reread(found.table, found.keys)
    except CanalError as exc:
        raise changed.error(str(exc)) from exc


def with_history_layouts(entry: Entry, event: BinlogEvent, history: SchemaHistory | None) -> Entry:
    """A :data:`~canal.parse.heal_marks.HEAL`-marked entry of ``event`` with its tables' layouts after it, from the
    schema history (:func:`~canal.parse.heal_marks.with_layouts`) -- unknown without one, or when the history holds
    DDL from after the event (a bootstrap taken later: its layouts are not the ones there)."""
    after = EntryPosition(event.log_file, event.next_offset) if event.next_offset > event.offset else None
    if history is None or after is None or not history.holds_nothing_after(after):
        return with_layouts(entry, None, mariadb=False)
    return with_layouts(entry, history.table, mariadb=history.mariadb)


def marked(entry: Entry, props: Mapping[str, str]) -> Entry:
    """``entry`` with ``props`` added to its header's."""
    if not props:
        return entry
    return attrs.evolve(entry, header=attrs.evolve(entry.header, props={**entry.header.props, **props}))


def _position(entry: Entry) -> EntryPosition:
    h = entry.header
    return EntryPosition(h.log_file, h.log_offset, h.execute_time, h.server_id)


def followed(
    entry: Entry | None,
    event: BinlogEvent,
    schemas: SchemaTracker | None,
    heal: StatementPolicy | None,
    captured: Captured,
) -> Entry | None:
    """The entry of ``event`` once the schema history followed the event (a DDL is recorded before its entry, and
    everything after it, is handed off; what the history knew before it goes with its entry, e.g. the types it
    retyped: :data:`~canal.parse.convert.RETYPED_FROM_PROP`) and, under a heal policy (None: heal="stop"), marked
    where a copy cannot follow its change -- an ALTER's conversions, judged before the history follows it, or partial
    images -- with the layouts the healed tables have from there."""
    converting = None
    if schemas is not None and isinstance(event, QueryEvent):
        schemas.settle(event)  # a first start's layouts, checked as the dump reads: decided before they answer
        if heal is not None and entry is not None:
            converting = conversion(entry, event, schemas.history, captured)
        known = schemas.observe(event)
        if known and entry is not None and entry.row_change is not None and entry.row_change.is_ddl:
            header = entry.header
            entry = attrs.evolve(entry, header=attrs.evolve(header, props={**header.props, **known}))
    if heal is None or entry is None:
        return entry
    changed = converting if converting is not None else partial(entry)
    if changed is not None:
        entry = marked(entry, heal(changed))
    if HEAL in entry.header.props:
        if schemas is not None:
            schemas.settle(event, layouts=True)
        entry = with_history_layouts(entry, event, None if schemas is None else schemas.history)
    return entry
