"""The ``messages`` option's micro-batches: planned on the reader, made into messages by the tasks.

The reader's one thread bounds a streaming query (it reads the server, decodes and spools every change; Spark's
tasks and JVM run beside it on the other cores). Making canal's FlatMessage or Debezium's JSON text is as much work
a change as decoding it, so the reader does not: it spools each chunk of entries as :class:`~canal.lake.forms.
flat_messages.MessagePlan` rows (:func:`plan_rows`: what needs the stream -- the refusals, the routing over topics
and partitions, the ordinals, the clock), pickled with their rows kept as decoded columns (:mod:`canal.lake.forms.
entry_wire`), and the micro-batch's task renders them (:func:`rendered`) into the rows of ``topic, partition, key,
value`` Spark's Kafka sink writes. A replayed micro-batch renders the same plans again: the same bytes, its clock
included, to the same topics and partitions, whatever options a restarted query was given (a plan holds its form and
routing). A spool file an older pycanal wrote holds the messages themselves, which pass as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final

from canal.lake.forms import entry_wire
from canal.lake.forms.flat_messages import MessageMaker, MessagePlan
from canal.protocol import Entry, EventType, Rows

PLAN_COLUMN: Final = "message_plan"
"""The one column of a spooled micro-batch of the ``messages`` option: a pickled plan a row."""

PLAN_BYTES: Final = 8 << 20
"""The most binlog bytes (the entries' event lengths) one plan takes: a plan is one task's input and one pickle, and
an instance batch of large rows would otherwise make one of hundreds of MB (Spark refuses a task over
``spark.rpc.message.maxSize``, 128 MB). A plan holds whole entries: one larger entry is a plan of its own. A
snapshot's entries have no binlog event (their length is 64 bytes a row, what a MEMSIZE store counts): they weigh
what their values hold (:func:`_weight`). Events compressed by the server (MariaDB's ``log_bin_compress``, its
``COMPRESSED`` columns) hold more than their length says: a plan whose bytes pass :data:`PLAN_INFLATION` times this is
planned again in halves."""

PLAN_INFLATION: Final = 4
"""How many times :data:`PLAN_BYTES` a plan's pickle may hold before it is cut: a plan's values take about their
binlog bytes, a compressed event's many times them (300 rows of 220 KB text under ``log_bin_compress``: 121 KB of
binlog, a plan of 64 MB)."""


def plan_schema() -> Any:
    import pyarrow as pa

    return pa.schema([pa.field(PLAN_COLUMN, pa.binary(), nullable=False)])


def plan_rows(maker: MessageMaker, entries: Sequence[Entry], batch_no: int, first: int) -> tuple[Any, int]:
    """The plan rows of ``entries`` (a RecordBatch in :func:`plan_schema`: one a group of up to :data:`PLAN_BYTES`)
    and the ordinal after their messages. Raises what :meth:`MessageMaker.plan` refuses, nothing planned."""
    import pyarrow as pa

    blobs: list[bytes] = []
    for group in _groups(entries):
        first = _planned(maker, group, batch_no, first, blobs)
    return pa.RecordBatch.from_arrays([pa.array(blobs, pa.binary())], schema=plan_schema()), first


def _planned(maker: MessageMaker, group: Sequence[Entry], batch_no: int, first: int, blobs: list[bytes]) -> int:
    """Add the pickled plan of ``group`` to ``blobs`` -- the plans of its halves where its bytes pass the bound
    (:data:`PLAN_INFLATION`) -- and return the ordinal after its messages."""
    plan = maker.plan(group, batch_no, first)
    if not plan.entries:
        return first
    blob = entry_wire.dumps(plan)
    if len(blob) > PLAN_INFLATION * PLAN_BYTES and len(group) > 1:
        half = len(group) // 2
        after = _planned(maker, group[:half], batch_no, first, blobs)
        return _planned(maker, group[half:], batch_no, after, blobs)
    blobs.append(blob)
    return first + plan.count


def _groups(entries: Sequence[Entry]) -> Iterator[Sequence[Entry]]:
    start, size = 0, 0
    for i, entry in enumerate(entries):
        length = _weight(entry)
        if i > start and size + length > PLAN_BYTES:
            yield entries[start:i]
            start, size = i, 0
        size += length
    if start < len(entries):
        yield entries[start:]


def _weight(entry: Entry) -> int:
    """The bytes ``entry`` counts for in a plan: its binlog event's; a snapshot entry's, those of its values (text
    and binary ones' lengths, 8 a cell of the others), sampled as the snapshot's reader sizes its chunks -- a
    micro-batch of 50,000 snapshot rows of 20 KB was one plan of 1 GB, their lengths saying 3 MB."""
    rc = entry.row_change
    if rc is None or rc.event_type is not EventType.SNAPSHOT or not rc.rows:
        return entry.header.event_length
    images = [image for image in Rows.of(rc.rows).after or () if image is not None]
    if not images:
        return entry.header.event_length
    sample = images[:: max(1, len(images) // _SAMPLE_ROWS)]
    size = sum(len(v) if isinstance(v, str | bytes) else 8 for image in sample for v in image)
    return max(entry.header.event_length, size * len(images) // len(sample))


_SAMPLE_ROWS: Final = 64
"""The rows of a snapshot entry :func:`_weight` reads the values of."""


def rendered(batches: Iterable[Any], maker: MessageMaker) -> Iterator[Any]:
    """The message rows of spooled ``batches``: each plan row rendered; rows of messages (an older spool) as they
    are."""
    for batch in batches:
        if batch.schema.names != [PLAN_COLUMN]:
            yield batch
            continue
        for blob in batch.column(0).to_pylist():
            plan = entry_wire.loads(blob)
            if not isinstance(plan, MessagePlan):  # a pickle of plain values names no global: loads takes it
                raise entry_wire.EntryWireError(f"not a message plan: a {type(plan).__name__}")
            made = maker.render(plan)
            if made.num_rows:
                yield made


def is_plans(schema: Any) -> bool:
    """Whether rows of ``schema`` are plan rows."""
    return list(schema.names) == [PLAN_COLUMN]


__all__ = ["PLAN_BYTES", "PLAN_COLUMN", "PLAN_INFLATION", "is_plans", "plan_rows", "plan_schema", "rendered"]
