"""What the balance tests and benchmark watch in ZooKeeper: who holds each destination's running node, and the
balance group's assignment, kept current by watches; waits on them are waits on ZooKeeper events."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from kazoo.recipe.watchers import DataWatch

from canal.errors import HAError
from canal.ha.balance import AssignmentDoc
from canal.meta import zkpaths

from .ha_harness import ConsumerLog


class Ownership:
    """The holder (its address) of each destination's running node and the group's assignment document, with
    every change the watches saw and when (``time.monotonic()``)."""

    def __init__(self, client: KazooClient, destinations: Iterable[str], group: str = "default") -> None:
        self.destinations = sorted(destinations)
        self.holders: dict[str, str | None] = dict.fromkeys(self.destinations)
        self.history: list[tuple[float, str, str | None]] = []  # (t, destination, holder or None)
        self.doc: AssignmentDoc | None = None
        self._cond = threading.Condition()
        for dest in self.destinations:
            DataWatch(client, zkpaths.destination_running_path(dest), partial(self._on_running, dest))
        DataWatch(client, zkpaths.balance_assignment_path(group), self._on_doc)

    def _on_running(self, dest: str, data: bytes | None, stat: Any) -> None:
        holder = None if stat is None or not data else str(json.loads(data).get("address"))
        with self._cond:
            self.holders[dest] = holder
            self.history.append((time.monotonic(), dest, holder))
            self._cond.notify_all()

    def _on_doc(self, data: bytes | None, stat: Any) -> None:
        try:
            doc = None if stat is None or not data else AssignmentDoc.from_bytes(data)
        except HAError:
            doc = None  # a test writes an unreadable one, which the group must replace
        with self._cond:
            self.doc = doc
            self._cond.notify_all()

    def wait(self, predicate: Callable[[Ownership], bool], timeout: float, what: str) -> dict[str, str | None]:
        """Until ``predicate(self)`` holds (checked at each change); the holders then. Fails after ``timeout``."""
        with self._cond:
            if not self._cond.wait_for(lambda: predicate(self), timeout):
                raise AssertionError(f"not {what} within {timeout}s: holders {self.holders}, doc {self.doc}")
            return dict(self.holders)

    def counts(self, addresses: Iterable[str]) -> dict[str, int]:
        held = Counter(h for h in self.holders.values() if h is not None)
        return {a: held[a] for a in addresses}

    def settled(self, addresses: Iterable[str]) -> bool:
        """The assignment was computed for exactly these members, each destination is held by its assigned member,
        and the shares are within one."""
        members = set(addresses)
        doc = self.doc
        if doc is None or {a for a, _ in doc.members.values()} != members:
            return False
        for dest in self.destinations:
            owner = doc.owners.get(dest)
            if owner is None or self.holders[dest] != doc.members[owner][0]:
                return False
        counts = self.counts(members).values()
        return max(counts) - min(counts) <= 1

    def unowned_spans(self, until: float | None = None) -> dict[str, list[tuple[float, float]]]:
        """Per destination, the spans its running node was held by nobody, as the watches saw (a span ends at the
        next holder, or at ``until``)."""
        spans: dict[str, list[tuple[float, float]]] = {d: [] for d in self.destinations}
        since: dict[str, float] = {}
        with self._cond:
            history = list(self.history)
        for t, dest, holder in history:
            if holder is None:
                since.setdefault(dest, t)
            elif dest in since:
                spans[dest].append((since.pop(dest), t))
        end = time.monotonic() if until is None else until
        for dest, t in since.items():
            spans[dest].append((t, end))
        return spans

    def changes_after(self, t0: float) -> list[tuple[float, str, str | None]]:
        with self._cond:
            return [h for h in self.history if h[0] >= t0]


def parse_service_log(name: str, path: Path) -> tuple[dict[str, ConsumerLog], dict[str, list[float]]]:
    """A ``tests.procs.balance_consumer`` log: each destination's lines as a :class:`ConsumerLog` of the process
    ``name``, and the times its on_revoked returned (only whole lines: a kill may cut the last one)."""
    logs: dict[str, ConsumerLog] = {}
    revoked: dict[str, list[float]] = {}
    if not path.exists():
        return logs, revoked
    for line in path.read_text().split("\n")[:-1]:
        kind, dest, *rest = line.split()
        log = logs.setdefault(dest, ConsumerLog(name))
        if kind == "S":
            if rest[0] != "None":
                log.serving.append((int(rest[0]), float(rest[1])))
        elif kind == "D":
            token = None if rest[1] == "None" else int(rest[1])
            log.delivered.append((int(rest[0]), token, float(rest[2]), [int(x) for x in rest[3:]]))
        elif kind == "A":
            log.acked.append((int(rest[0]), int(rest[1]), float(rest[2]), float(rest[3])))
        elif kind == "F":
            log.failed.append((int(rest[0]), None if rest[1] == "None" else int(rest[1]), rest[2]))
        elif kind == "R":
            revoked.setdefault(dest, []).append(float(rest[0]))
    return logs, revoked
