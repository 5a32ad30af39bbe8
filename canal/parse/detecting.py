"""Detecting a dead master (canal's ``detectingEnable``): a thread per destination that probes the active server with
``detecting.sql`` over a connection of its own, and switches the parser to the standby after ``retry_threshold``
failures in a row when ``ha_switch`` is on. Independent of the dump, which a dead connection ends on its own
(:meth:`~canal.parse.parser.EventParser`'s read-timeout watchdog)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from canal.config import InstanceConfig, MasterConfig
from canal.parse.source import BinlogSource


def detect_master(
    config: InstanceConfig,
    source_factory: Callable[[MasterConfig], BinlogSource],
    active_master: Callable[[], MasterConfig],
    stop: threading.Event,
    switch: Callable[[], MasterConfig],
    log: logging.LoggerAdapter[logging.Logger],
) -> None:
    """A destination's detecting thread (its parser's, :class:`~canal.parse.parser.EventParser`, which starts it with
    its own parts): runs ``detecting.sql`` on the active server (``active_master()``) every ``interval_s`` over a
    connection of its own (from ``source_factory``), and after ``retry_threshold`` failures in a row switches to the
    standby (``switch()``, with ``ha_switch``); ends when ``stop`` is set."""
    detecting = config.detecting
    failures = 0
    side: BinlogSource | None = None
    side_for: MasterConfig | None = None
    try:
        while not stop.wait(detecting.interval_s):
            active = active_master()
            try:
                if side is None or side_for is not active:
                    if side is not None:
                        side.close()
                    side, side_for = source_factory(active), active
                    side.open()
                side.query(detecting.sql)
                failures = 0
            except Exception as exc:
                failures += 1
                if side is not None:
                    try:
                        side.close()
                    except Exception as close_exc:  # a failed probe's connection is dropped either way
                        log.debug("closing the detecting connection failed: %s", close_exc)
                side = None
                log.warning(
                    "detecting %r on %s failed (%d/%d): %s",
                    detecting.sql,
                    active.address,
                    failures,
                    detecting.retry_threshold,
                    exc,
                )
                if failures >= detecting.retry_threshold:
                    failures = 0
                    if detecting.ha_switch and config.standby is not None:
                        switch()
    finally:
        if side is not None:
            try:
                side.close()
            except Exception as exc:  # the detector is ending; its connection is dropped either way
                log.debug("closing the detecting connection failed: %s", exc)
