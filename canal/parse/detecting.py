"""Detecting a dead master (canal's ``detectingEnable``): a thread per destination that probes the active server with
``detecting.sql`` over a connection of its own, and switches the parser to the standby after ``retry_threshold``
failures in a row when ``ha_switch`` is on. Independent of the dump, which a dead connection ends on its own
(:meth:`~canal.parse.parser.EventParser`'s read-timeout watchdog)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from canal.config import MasterConfig
from canal.parse.source import BinlogSource

if TYPE_CHECKING:
    from canal.parse.parser import EventParser


def detect_master(parser: EventParser) -> None:
    """The detecting thread of ``parser``: runs ``detecting.sql`` on the active server every ``interval_s`` over a
    connection of its own, and after ``retry_threshold`` failures in a row switches to the standby (``ha_switch``)."""
    detecting = parser.config.detecting
    failures = 0
    side: BinlogSource | None = None
    side_for: MasterConfig | None = None
    try:
        while not parser._stop.wait(detecting.interval_s):
            active = parser._active
            try:
                if side is None or side_for is not active:
                    if side is not None:
                        side.close()
                    side, side_for = parser.source_factory(active), active
                    side.open()
                side.query(detecting.sql)
                failures = 0
            except Exception as exc:
                failures += 1
                if side is not None:
                    try:
                        side.close()
                    except Exception as close_exc:  # a failed probe's connection is dropped either way
                        parser._log.debug("closing the detecting connection failed: %s", close_exc)
                side = None
                parser._log.warning(
                    "detecting %r on %s failed (%d/%d): %s",
                    detecting.sql,
                    active.address,
                    failures,
                    detecting.retry_threshold,
                    exc,
                )
                if failures >= detecting.retry_threshold:
                    failures = 0
                    if detecting.ha_switch and parser.config.standby is not None:
                        parser.switch()
    finally:
        if side is not None:
            try:
                side.close()
            except Exception as exc:  # the detector is ending; its connection is dropped either way
                parser._log.debug("closing the detecting connection failed: %s", exc)
