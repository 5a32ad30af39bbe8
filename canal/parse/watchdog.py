"""One thread for the read-timeout checks of every parser of the process.

A parser closes a dump that has received nothing, not even a heartbeat, for its read timeout: a dead connection the
socket would not notice (:meth:`EventParser._watch_once <canal.parse.parser.EventParser>`). It looks every quarter of
that timeout, at most every second. A thread of its own per parser woke 100 times a second for 100 destinations and
held a stack each; :data:`WATCHDOG` runs every parser's check at its own tick on one thread, which starts with the
first check and ends when the last is withdrawn. A check only decides; what it does about a stalled dump (closing a
connection, which may wait on the network) runs on a thread of its own, so one server does not hold up the checks of
the others.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable

import attrs

log = logging.getLogger(__name__)


@attrs.define(eq=False)
class _Check:
    tick: float
    check: Callable[[], None]
    due: float


class Watchdog:
    """Checks run at their own tick on one thread (:meth:`watch`, :meth:`unwatch`)."""

    def __init__(self, name: str = "canal-watchdog") -> None:
        self._name = name
        self._cond = threading.Condition()
        self._checks: dict[int, _Check] = {}
        self._keys = itertools.count(1)
        self._thread: threading.Thread | None = None

    @property
    def thread(self) -> threading.Thread | None:
        """The thread running the checks (None: no check is registered)."""
        return self._thread

    @property
    def watching(self) -> int:
        """How many checks are registered."""
        return len(self._checks)

    def watch(self, tick: float, check: Callable[[], None]) -> int:
        """Run ``check`` every ``tick`` seconds until :meth:`unwatch` of the key returned."""
        if not tick > 0:
            raise ValueError(f"a watchdog tick must be > 0 s, got {tick}")
        with self._cond:
            key = next(self._keys)
            self._checks[key] = _Check(tick, check, time.monotonic() + tick)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._cond.notify()
        return key

    def unwatch(self, key: int) -> None:
        """The check of ``key`` runs no more (one running now ends as it is)."""
        with self._cond:
            self._checks.pop(key, None)
            self._cond.notify()

    def _run(self) -> None:
        try:
            self._loop()
        finally:
            with self._cond:
                if self._thread is threading.current_thread():  # ended by what a check raised beyond Exception
                    self._thread = None  # the next watch starts another

    def _loop(self) -> None:
        cond = self._cond
        while True:
            with cond:
                checks = self._checks
                if not checks:
                    self._thread = None  # the next watch starts another
                    return
                now = time.monotonic()
                first = min(c.due for c in checks.values())
                if first > now:
                    cond.wait(first - now)
                    continue
                # once one is due, what falls due within a quarter of its tick runs with it: the checks of parsers
                # started at different moments fall into step, a wake or so a tick for all of them rather than one each
                due = [c for c in checks.values() if c.due - c.tick / 4 <= now]
                for c in due:
                    c.due = now + c.tick
            for c in due:
                try:
                    c.check()
                except Exception:  # one parser's failing check must not end the others': said, and it runs again
                    log.exception("a watchdog check failed")


WATCHDOG = Watchdog()
"""The process's watchdog of parsers' dumps."""
