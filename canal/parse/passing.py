"""Transactions a shared reader left out of a destination's stream (:class:`~canal.parse.events.PassedEvent`: none of
their tables is captured there), taken by the destination's converter (:func:`take_passed`): the entries converting
their GTID, BEGIN and end events makes, or -- for those the sink drops anyway -- only the state they move
(:meth:`EntryConverter.pass_over <canal.parse.convert.EntryConverter.pass_over>`, their GTIDs into the GTID state a
run at a time: :func:`passed_gtids`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from canal.gtid import GtidSet
from canal.parse.events import BinlogEvent, GtidEvent, PassedEvent, PassedTransaction
from canal.position import EntryPosition
from canal.protocol import Entry


class PassingConverter(Protocol):
    """What :func:`take_passed` needs of the converter (:class:`~canal.parse.convert.EntryConverter`)."""

    @property
    def can_pass_over(self) -> bool: ...

    @property
    def in_transaction(self) -> bool: ...

    @property
    def anchor(self) -> EntryPosition: ...

    def convert(self, event: BinlogEvent) -> Entry | None: ...

    def pass_over(self, transactions: Sequence[PassedTransaction]) -> None: ...

    def resting_at(self, start: EntryPosition, execute_time: int | None = None) -> Entry: ...


def take_passed(
    converter: PassingConverter,
    event: PassedEvent,
    add: Callable[[Entry], None],
    drops: Callable[[Sequence[int], int], int] | None,
    merging: bool,
) -> None:
    """Transactions a shared reader left out of ``converter``'s stream (none of their tables is captured there):
    ``add`` gets the entries converting their GTID, BEGIN and end events makes -- an empty transaction the sink
    keeps, now and then -- with the state moving as it would. While nothing is left to skip and no snapshot merges
    into the stream (``merging``), those the sink ``drops`` anyway only move the state (``converter.pass_over``): no
    entry is made."""
    transactions = event.transactions
    begins = event.begins_ms
    count = len(transactions)
    i = 0
    while i < count:
        if drops is not None and not merging and converter.can_pass_over:
            dropped = drops(begins, i)
            if dropped:
                converter.pass_over(transactions[i : i + dropped])
                i += dropped
                continue
        for passed in transactions[i].events:
            entry = converter.convert(passed)
            if entry is not None:
                add(entry)
        i += 1
    if event.rests and not converter.in_transaction:
        # the stream rests after them: the restart point and a caught-up cursor move there
        add(converter.resting_at(converter.anchor, event.timestamp * 1000))


def passed_gtids(executed: GtidSet | None, transactions: Sequence[PassedTransaction]) -> GtidSet | None:
    """The GTID state ``executed`` with the GTIDs of passed transactions added (a new set where it was None and they
    carry one), a run of one source's consecutive GTIDs at once
    (:attr:`PassedTransaction.run_offset <canal.parse.events.PassedTransaction.run_offset>`): a step per run, not
    per transaction, in their order."""
    runs: list[tuple[int, int]] = []  # [start, end) of each run, last first
    end = len(transactions)
    while end:
        last = transactions[end - 1]
        start = max(0, end - 1 - last.run_offset) if last.gtid is not None else end - 1
        runs.append((start, end))
        end = start
    for start, end in reversed(runs):
        step = transactions[end - 1].gtid
        first = transactions[start].gtid
        if step is not None and first is not None:
            if executed is None:
                executed = GtidSet(mariadb=step.mariadb)
            if executed.add_span(first.number, step):
                continue
        for transaction in transactions[start:end]:  # one at a time: GtidSet.add reads (or refuses) each
            for event in transaction.events:
                if isinstance(event, GtidEvent):
                    if executed is None:
                        executed = GtidSet(mariadb=event.mariadb)
                    executed.add(event.gtid)
    return executed
