"""The ``canal`` source's embedded instances, in the process that runs the reader: one :class:`Session` per set of
options (:func:`session_of`) -- the instance, where its stream stands, the micro-batch prepared ahead
(:class:`Prepared`) and the snapshot ranges read ahead -- kept until :func:`close_sessions` (also run at exit).
:class:`~canal.spark.source.CanalStreamReader` pulls the micro-batches through them.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs

from canal.config import InstanceConfig, SnapshotMode
from canal.instance import Instance
from canal.lake.forms.typed_layout import load_conversions
from canal.log import destination_logger
from canal.spark.chunks import ChunkPartition, ChunkPlanner, read_ahead
from canal.spark.offsets import Offset, canonical, cursor_of, has_position
from canal.spark.progress import log_in_runner, serve_metrics, stop_serving
from canal.spark.source_options import config_from_options, executor_snapshot, image_form, options_key

__all__ = ["Prepared", "Session", "close_sessions", "session_of"]


@attrs.frozen
class Prepared:
    """A micro-batch ready for Spark: its change rows (record batches, none empty) and its end offset."""

    batches: list[Any]
    end: Offset


class Session:
    """An instance and where its stream stands, for one set of options in this process. ``typed``: the reader
    builds typed columns of the rows (packed or variant images), so its instance decodes them column by column."""

    def __init__(self, config: InstanceConfig, typed: bool = False) -> None:
        self.config = config
        self.typed = typed
        self.lock = threading.RLock()
        self.instance: Instance | None = None
        self.meta: Any = None
        self.pos: Offset | None = None  # the offset after the last entry handed out by the instance
        self.outstanding: list[int] = []  # instance batch ids handed out whose entries are not all spooled yet
        self.prefetcher: threading.Thread | None = None  # preparing the batch after the last one returned
        self.prefetch_stop = threading.Event()  # set: the prefetcher ends its batch with what it has taken
        self.prefetch_rows = 0  # change rows the running prefetch holds so far
        self.prefetch_progress = threading.Condition()  # notified when prefetch_rows grows
        # the batches prepared ahead, in stream order: (canonical start, the batch prepared for it); two at most
        self.ready: list[tuple[str, Prepared]] = []
        self.carry: list[Any] = []  # entries of an instance batch a read cap cut off: the next batch's first
        self.carry_id: int | None = None  # that instance batch's id
        self.initial: tuple[Offset, dict[str, Any] | None] | None = None  # executor snapshot: where a new query starts
        self.planner: ChunkPlanner | None = None  # executor snapshot: its ranges' planner
        # executor snapshot: the ranges being read ahead (their micro-batch, the thread, what stops it)
        self.ranges_ahead: tuple[int, threading.Thread, threading.Event] | None = None

    def read_ranges_ahead(self, batch: int, partitions: list[ChunkPartition], destination: str) -> None:
        """Read micro-batch ``batch``'s ranges in a thread before their tasks do
        (:func:`~canal.spark.chunks.read_ahead`), instead of another micro-batch's; nothing if they are already."""
        if self.ranges_ahead is not None and self.ranges_ahead[0] == batch:
            return
        self.stop_reading_ahead()
        stop = threading.Event()
        log = destination_logger(__name__, destination)

        def run() -> None:
            try:
                published = read_ahead(partitions, stop)
            except Exception:  # the tasks read these ranges themselves and report what is wrong
                log.warning("reading snapshot ranges ahead failed; their tasks read them", exc_info=True)
                return
            log.debug("read %d of %d snapshot ranges ahead of their tasks", len(published), len(partitions))

        thread = threading.Thread(target=run, name="canal-spark-ranges", daemon=True)
        self.ranges_ahead = batch, thread, stop
        thread.start()

    def stop_reading_ahead(self, wait_s: float = 0.0) -> None:
        """Read no further range ahead: a range being read is given up at its next piece (its temporary file
        removed), waiting up to ``wait_s`` for that."""
        if self.ranges_ahead is not None:
            _batch, thread, stop = self.ranges_ahead
            self.ranges_ahead = None
            stop.set()
            thread.join(wait_s)

    def start_prefetch(
        self,
        start: Offset,
        prepare: Callable[[Offset, threading.Event], Prepared | None],
        *,
        chained: bool,
        log: logging.Logger | logging.LoggerAdapter[Any],
    ) -> None:
        """Run ``prepare(start, stop)`` in a thread -- unless one runs already, or the instance does not stand at
        ``start`` or at the end of the batches ready after it. ``chained``: a batch that ended by itself (full), not
        stopped, is followed by the next, while fewer than :data:`READY_MOST` are ready."""
        with self.lock:
            if self.prefetcher is not None and self.prefetcher.is_alive():
                return  # preparing the batches after those ready
            at = start
            for key, ready in self.ready:
                if key == canonical(at):
                    at = ready.end
            if self.pos is None or canonical(self.pos) != canonical(at):
                return
            stop = threading.Event()
            self.prefetch_rows = 0

        def run() -> None:
            nonlocal at
            while True:
                try:
                    prepared = prepare(at, stop)
                except Exception:  # the next read starts over from its own start and reports what is wrong
                    log.warning("preparing the next batch failed; the next read reopens the instance", exc_info=True)
                    with self.lock:
                        self.pos = None
                    return
                if prepared is None:
                    return
                with self.prefetch_progress, self.lock:
                    self.ready.append((canonical(at), prepared))
                    self.prefetch_rows = 0
                    self.prefetch_progress.notify_all()
                    go_on = (
                        chained
                        and not stop.is_set()
                        and len(self.ready) < READY_MOST
                        and self.pos is not None
                        and canonical(self.pos) == canonical(prepared.end)
                    )
                if not go_on:
                    return
                at = prepared.end

        self.prefetcher = threading.Thread(target=run, name="canal-spark-prefetch", daemon=True)
        self.prefetch_stop = stop
        self.prefetcher.start()

    def let_prefetch_fill(self, start: Offset, quiet_s: float, most_s: float) -> None:
        """Wait while the batch being prepared in the background for ``start`` still grows -- until it is ready
        (it ended by itself: a cap, its bytes), nothing new came for ``quiet_s`` (the reader caught up with the
        server), or ``most_s`` passed."""
        deadline = time.monotonic() + most_s
        key = canonical(start)
        with self.prefetch_progress:
            seen = self.prefetch_rows
            while (thread := self.prefetcher) is not None and thread.is_alive() and time.monotonic() < deadline:
                self.prefetch_progress.wait(quiet_s)
                with self.lock:
                    if any(at == key for at, _ in self.ready):
                        return
                if self.prefetch_rows == seen:
                    return
                seen = self.prefetch_rows

    def finish_prefetch(self) -> None:
        """End the batch being prepared in the background with what it holds, if there is one, and wait for it."""
        thread = self.prefetcher
        self.prefetch_stop.set()
        if thread is not None:
            thread.join()
            self.prefetcher = None

    def take_prefetched(self, start: Offset) -> Prepared | None:
        """The batch prepared ahead for ``start`` (consumed, with any ready before it), None if there is none;
        batches ready for other starts are dropped then (the stream moved: they are in the spool)."""
        key = canonical(start)
        with self.lock:
            for index, (at, prepared) in enumerate(self.ready):
                if at == key:
                    del self.ready[: index + 1]
                    return prepared
            if self.prefetcher is None or not self.prefetcher.is_alive():
                self.ready.clear()
            return None

    def open_at(self, start: Offset) -> Instance:
        """(Re)start the instance so that its next entry is the first one after ``start``."""
        self.close()
        # the saved cursor follows the checkpoint (what Spark has durably passed); a failed write fails the start
        instance = Instance.at(self.config, cursor_of(start)) if has_position(start) else Instance(self.config)
        load_conversions()  # before the parser's thread competes with the import for the interpreter lock
        instance.decode_rows_by_column(self.typed)
        instance.start()
        meta = instance.meta
        self.instance, self.meta, self.pos, self.outstanding = instance, meta, dict(start), []
        self.carry, self.carry_id = [], None
        return instance

    def close(self) -> None:
        if self.prefetcher is not threading.current_thread():
            self.finish_prefetch()
        instance, meta = self.instance, self.meta
        self.instance, self.meta, self.pos, self.outstanding, self.ready = None, None, None, [], []
        self.carry, self.carry_id = [], None
        del meta  # the instance's own meta: instance.stop() stops it
        if instance is not None:
            try:
                instance.stop()
            except Exception as exc:  # closing must go on (a new instance replaces it); say what went wrong
                destination_logger(__name__, instance.destination).warning("stopping the instance failed: %s", exc)


READY_MOST = 2
"""Batches prepared ahead, at most (``images=packed``: each up to ``PACKED_BATCH_BYTES`` of Arrow, compressed)."""
_STOP_READ_AHEAD_S = 10.0  # a stopping source waits this long for a range read ahead to give up (one piece)
_SESSIONS: dict[str, Session] = {}
_SESSIONS_LOCK = threading.Lock()


def session_of(options: Mapping[str, str]) -> Session:
    """The session of ``options`` in this process, made on first use."""
    key = options_key(options)
    with _SESSIONS_LOCK:
        session = _SESSIONS.get(key)
        if session is None:
            config = config_from_options(options)
            if executor_snapshot(options):
                # the source plans the snapshot itself (executor partitions): the instance only streams
                config = attrs.evolve(config, snapshot=attrs.evolve(config.snapshot, mode=SnapshotMode.NEVER))
            # a reader of packed or variant images builds typed columns of its rows: decoded column by column
            session = _SESSIONS[key] = Session(config, typed=image_form(options) != "json")
    log_in_runner(options)  # the option reader.log.level, in Spark's process of the reader (canal.spark.progress)
    serve_metrics(options, _LiveInstances())  # with the option metrics.port
    return session


class _LiveInstances:
    """The instances this process's sessions run, read anew at each iteration (what its exporter serves)."""

    def __iter__(self) -> Iterator[Instance]:
        with _SESSIONS_LOCK:
            sessions = list(_SESSIONS.values())
        return iter([session.instance for session in sessions if session.instance is not None])


def close_sessions() -> None:
    """Stop every instance this process embeds for the source, and its exporter (also run at exit)."""
    stop_serving()
    with _SESSIONS_LOCK:
        sessions = list(_SESSIONS.values())
        _SESSIONS.clear()
    for session in sessions:
        session.stop_reading_ahead(wait_s=_STOP_READ_AHEAD_S)
        session.close()


atexit.register(close_sessions)
