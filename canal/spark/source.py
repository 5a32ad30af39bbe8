"""The ``canal`` PySpark streaming data source.

```python
canal.spark.register(spark)
changes = (spark.readStream.format("canal")
           .option("master.address", "127.0.0.1:3306").option("master.user", "canal")
           .option("master.password", "canal").option("destination", "shop")
           .option("filter.regex", r"shop\\..*").option("spool.dir", checkpoint + ".canal-spool")
           .load())
changes.writeStream.foreachBatch(DeltaMirror(root)).option("checkpointLocation", checkpoint).start()
```

Options (strings, as Spark passes them): ``properties`` (path to an ``instance.properties``) and/or the short keys
``destination``, ``master.address``, ``master.user``, ``master.password``, ``master.journal.name``,
``master.position``, ``master.gtid``, ``filter.regex``, ``filter.black.regex``, ``meta.dir`` (file meta mode);
any ``canal.*`` / ``pycanal.*`` key is passed through as a properties key. Reader settings: ``spool.dir`` (required
unless ``meta.dir`` is set; put it next to the checkpoint), ``batch.size`` (entries per instance get, default 4096),
``max.entries`` (entries per micro-batch, a snapshot entry counting its rows; default 50000), ``read.timeout``
(seconds a read waits when nothing is there yet, default 0.5), ``prefetch`` (default true: prepare the next batch
while Spark runs this one). ``maxRowsPerTrigger`` (change rows) and ``maxBytesPerTrigger`` (binlog bytes) cap a
micro-batch, as for Spark's Kafka source; a micro-batch holds whole binlog events, at least one. The source applies
them itself: PySpark passes read limits only to a ``DataSourceStreamReader``, whose rows would travel to executors
inside the input partitions -- measured 7-13% slower end to end than this reader, whose rows Spark takes on the
driver.

How it runs. Spark calls the reader in a long-lived ``python_streaming_source_runner`` process; the embedded
:class:`~canal.instance.Instance` is created there on the first ``read`` and kept in a module-level dict keyed by the
options. ``read(start)`` pulls entries (``get_without_ack``) up to the caps, writes the batch's rows *and* end
offset to the spool file named by ``start`` (Arrow IPC, written atomically), then returns them. An instance batch a
cap cuts carries its rest into the next micro-batch and is acked with that one. ``commit(end)`` acks the instance
batches up to ``end`` and deletes their spool files. With ``prefetch``, as soon as ``read`` returns, a thread
prepares (and spools) the batch after it from what the instance already holds, so decoding and encoding overlap
Spark's work on the current batch; the next ``read`` finds it ready.

Exactly-once replay. The Spark checkpoint is the authority on positions: whenever ``read(start)`` finds the instance
somewhere other than ``start`` (a new runner process, a restart), it restarts the instance at the cursor ``start``
names (row-exact inside a transaction). A batch Spark planned but did not commit is replayed from the spool --
``readBetweenOffsets(start, end)`` and a repeated ``read(start)`` both return exactly the spooled rows and end offset,
so a replay never depends on how the binlog happens to be cut into batches the second time.

Trigger.AvailableNow: ``prepareForTriggerAvailableNow`` records the master's current binlog position; reads stop at
the first entry past it.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import attrs

from canal.config import SSL_PROPERTY_KEYS, InstanceConfig, parse_bool
from canal.errors import CanalError
from canal.instance import Instance
from canal.log import destination_logger
from canal.position import EntryPosition
from canal.protocol import EMPTY_MESSAGE_ID, EventType
from canal.spark.changes import (
    INITIAL_OFFSET,
    Offset,
    canonical,
    change_rows,
    cursor_of,
    entries_to_batch,
    has_position,
    moved,
    offset_of,
)
from canal.spark.spool import Spool

_SHORT_KEYS = {
    "destination": "canal.instance.destination",
    "master.address": "canal.instance.master.address",
    "master.user": "canal.instance.dbUsername",
    "master.username": "canal.instance.dbUsername",
    "master.password": "canal.instance.dbPassword",
    "master.journal.name": "canal.instance.master.journal.name",
    "master.position": "canal.instance.master.position",
    "master.timestamp": "canal.instance.master.timestamp",
    "master.gtid": "canal.instance.master.gtid",
    "filter.regex": "canal.instance.filter.regex",
    "filter.black.regex": "canal.instance.filter.black.regex",
    "meta.dir": "canal.file.data.dir",
    "slave.id": "canal.instance.mysql.slaveId",
}
# Spark lower-cases option names; canal's camelCase keys are restored from this table
_CAMEL_KEYS = {
    k.lower(): k
    for k in (
        *SSL_PROPERTY_KEYS,
        "canal.instance.connectionCharset",
        "canal.instance.dbPassword",
        "canal.instance.dbUsername",
        "canal.instance.defaultDatabaseName",
        "canal.instance.detecting.heartbeatHaEnable",
        "canal.instance.enableDruid",
        "canal.instance.fallbackIntervalInSeconds",
        "canal.instance.memory.rawEntry",
        "canal.instance.mysql.slaveId",
        "canal.instance.network.soTimeout",
        "canal.instance.pwdPublicKey",
        "canal.serverMode",
        "canal.withoutNetty",
        "canal.zkServers",
    )
}
_SHORT_KEYS.update({"zk.servers": "canal.zkServers", "meta.mode": "pycanal.meta.mode"})
_READER_KEYS = frozenset(
    {
        "properties",
        "spool.dir",
        "batch.size",
        "max.entries",
        "read.timeout",
        "prefetch",
        "path",
        "maxrowspertrigger",
        "maxbytespertrigger",
    }
)

_LOG = logging.getLogger(__name__)


_T = TypeVar("_T")


@attrs.frozen
class ReadCap:
    """The most a micro-batch may hold: change rows (``maxRowsPerTrigger``) and binlog bytes
    (``maxBytesPerTrigger``); None: no cap. A batch holds at least one entry whatever the cap."""

    rows: int | None = None
    bytes: int | None = None

    def exceeded(self, rows: int, nbytes: int) -> bool:
        return (self.rows is not None and rows > self.rows) or (self.bytes is not None and nbytes > self.bytes)


class SparkSourceError(CanalError):
    """The canal Spark source cannot do what Spark asked (bad options, a missing spool file)."""


def config_from_options(options: Mapping[str, str]) -> InstanceConfig:
    """The instance config the source options name."""
    props: dict[str, str] = {}
    for key, value in options.items():
        k = key.lower()
        if k in _READER_KEYS:
            continue
        if k in _SHORT_KEYS:
            props[_SHORT_KEYS[k]] = value
            if k == "meta.dir":
                props.setdefault("pycanal.meta.mode", "file")
        elif k.startswith(("canal.", "pycanal.")):
            props[_CAMEL_KEYS.get(k, key if key.lower() != key else k)] = value
        else:
            raise SparkSourceError(f"unknown canal source option {key!r}")
    text = "\n".join(f"{k}={_escape(v)}" for k, v in props.items())
    path = options.get("properties")
    if path:
        base = Path(path).read_text()
        text = base + "\n" + text
        return InstanceConfig.from_properties(text, destination=props.get("canal.instance.destination"))
    return InstanceConfig.from_properties(text)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n")


def _options_key(options: Mapping[str, str]) -> str:
    return json.dumps(sorted((k.lower(), v) for k, v in options.items()))


# -- the embedded instance, in the process that runs the reader ----------------------------------------------------


class _Session:
    """An instance and where its stream stands, for one set of options in this process."""

    def __init__(self, config: InstanceConfig) -> None:
        self.config = config
        self.lock = threading.RLock()
        self.instance: Instance | None = None
        self.meta: Any = None
        self.pos: Offset | None = None  # the offset after the last entry handed out by the instance
        self.outstanding: list[tuple[int, Offset]] = []  # instance batch ids handed out, with their end offsets
        self.prefetcher: threading.Thread | None = None  # preparing the batch after the last one returned
        self.prefetched: tuple[str, Any, Offset] | None = None  # (canonical start, record batch, end offset)
        self.carry: list[Any] = []  # entries of an instance batch a read cap cut off: the next batch's first
        self.carry_id: int | None = None  # that instance batch's id

    def finish_prefetch(self) -> None:
        """Wait for the batch being prepared in the background, if any."""
        thread = self.prefetcher
        if thread is not None:
            thread.join()
            self.prefetcher = None

    def take_prefetched(self, start: Offset) -> tuple[Any, Offset] | None:
        """The batch prepared in the background for ``start`` (consumed), None if there is none."""
        prefetched, self.prefetched = self.prefetched, None
        if prefetched is None or prefetched[0] != canonical(start):
            return None
        return prefetched[1], prefetched[2]

    def open_at(self, start: Offset) -> Instance:
        """(Re)start the instance so that its next entry is the first one after ``start``."""
        self.close()
        # the saved cursor follows the checkpoint (what Spark has durably passed); a failed write fails the start
        instance = Instance.at(self.config, cursor_of(start)) if has_position(start) else Instance(self.config)
        instance.start()
        meta = instance.meta
        self.instance, self.meta, self.pos, self.outstanding = instance, meta, dict(start), []
        self.carry, self.carry_id = [], None
        return instance

    def close(self) -> None:
        if self.prefetcher is not threading.current_thread():
            self.finish_prefetch()
        instance, meta = self.instance, self.meta
        self.instance, self.meta, self.pos, self.outstanding, self.prefetched = None, None, None, [], None
        self.carry, self.carry_id = [], None
        del meta  # the instance's own meta: instance.stop() stops it
        if instance is not None:
            try:
                instance.stop()
            except Exception as exc:  # closing must go on (a new instance replaces it); say what went wrong
                destination_logger(__name__, instance.destination).warning("stopping the instance failed: %s", exc)


_SESSIONS: dict[str, _Session] = {}
_SESSIONS_LOCK = threading.Lock()


def _session(options: Mapping[str, str]) -> _Session:
    key = _options_key(options)
    with _SESSIONS_LOCK:
        session = _SESSIONS.get(key)
        if session is None:
            session = _SESSIONS[key] = _Session(config_from_options(options))
        return session


def close_sessions() -> None:
    """Stop every instance this process embeds for the source (also run at exit)."""
    with _SESSIONS_LOCK:
        sessions = list(_SESSIONS.values())
        _SESSIONS.clear()
    for session in sessions:
        session.close()


atexit.register(close_sessions)


# -- the reader logic, independent of pyspark ----------------------------------------------------------------------


class CanalStreamReader:
    """The logic of the ``canal`` source's reader; :mod:`canal.spark.datasource` wraps it in pyspark's classes."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = {str(k): str(v) for k, v in options.items()}
        lower = {k.lower(): v for k, v in self.options.items()}
        spool_dir = lower.get("spool.dir")
        if not spool_dir:
            meta_dir = lower.get("meta.dir")
            if not meta_dir:
                raise SparkSourceError("the canal source needs option spool.dir (next to the checkpoint) or meta.dir")
            spool_dir = str(Path(meta_dir) / "spark-spool")
        self.spool = Spool(spool_dir)
        self.batch_size = _reader_option(lower, "batch.size", "4096", int)
        self.max_entries = _reader_option(lower, "max.entries", "50000", int)
        self.read_timeout = _reader_option(lower, "read.timeout", "0.5", float)
        self.prefetch = _reader_option(lower, "prefetch", "true", parse_bool)
        self.limit = ReadCap(
            _cap_option(lower, "maxRowsPerTrigger"),
            _cap_option(lower, "maxBytesPerTrigger"),
        )
        self.destination = config_from_options(self.options).destination  # validates the options early
        self.target: EntryPosition | None = None  # Trigger.AvailableNow

    def initialOffset(self) -> Offset:
        return dict(INITIAL_OFFSET)

    def read(self, start: Offset) -> tuple[Iterator[Any], Offset]:
        """The batch after ``start`` and its end offset: the one spooled for ``start`` if there is one (a replay, or
        prefetched), else a new one within the caps (``maxRowsPerTrigger`` / ``maxBytesPerTrigger``), spooled before
        it is returned."""
        session = _session(self.options)
        session.finish_prefetch()  # a batch being prepared for this start lands in the spool first
        spooled = session.take_prefetched(start) or self.spool.read(start)
        if spooled is not None:
            spooled_batch, spooled_end = spooled
            self._prefetch(session, spooled_end)
            return iter([spooled_batch] if spooled_batch.num_rows else []), spooled_end
        prepared = self._prepare(session, start, wait=True)
        if prepared is None:
            return iter([]), start
        batch, end = prepared
        self._prefetch(session, end)
        return iter([batch] if batch.num_rows else []), end

    def _prepare(self, session: _Session, start: Offset, *, wait: bool) -> tuple[Any, Offset] | None:
        """Pull the entries after ``start``, turn them into a batch and spool it; None when nothing came.

        ``wait``: when nothing is there yet, wait up to ``read.timeout`` for a first instance batch. The caps
        (:class:`ReadCap`) bound the change rows and binlog bytes (always at least one entry); the rest of an
        instance batch they cut is carried into the next micro-batch, and that instance batch is acked with it.
        """
        cap = self.limit
        batch_no = int(start.get("batch", 0)) + 1
        with session.lock:
            if session.instance is None or session.pos is None or canonical(session.pos) != canonical(start):
                session.open_at(start)
            instance = session.instance
            assert instance is not None
            entries: list[Any] = []
            end: Offset | None = None
            waited = not wait
            partial = False
            full = False
            taken = 0  # entries, a SNAPSHOT entry counting its rows (it holds up to 1,000)
            rows = 0  # change rows (what maxRowsPerTrigger counts)
            nbytes = 0  # binlog bytes (what maxBytesPerTrigger counts)
            while taken < self.max_entries and not partial and not full:
                if session.carry:  # the rest of an instance batch the last cap cut: it comes first
                    mid, pending = session.carry_id, session.carry
                    session.carry, session.carry_id = [], None
                else:
                    size = min(self.batch_size, self.max_entries - taken)
                    msg = instance.get_without_ack(size, None)  # what is there now
                    if msg.id == EMPTY_MESSAGE_ID and not entries and not waited:
                        waited = True  # nothing yet: wait up to read.timeout for a batch, then take what came
                        msg = instance.get_without_ack(size, self.read_timeout)
                    if msg.id == EMPTY_MESSAGE_ID:
                        break
                    mid, pending = msg.id, list(msg.entries)
                kept = 0
                for entry in pending:
                    if self.target is not None and _at_or_past(entry.position, self.target):
                        partial = True
                        break
                    rc = entry.row_change
                    entry_rows = change_rows(entry)
                    if entries and cap.exceeded(rows + entry_rows, nbytes + entry.header.event_length):
                        full = True
                        break
                    rows += entry_rows
                    nbytes += entry.header.event_length
                    entries.append(entry)
                    kept += 1
                    taken += len(rc.rows) if rc is not None and rc.event_type is EventType.SNAPSHOT else 1
                    placed = offset_of(entry, batch_no)
                    if placed is not None:
                        end = placed
                if full:
                    # the cap fell inside this instance batch: its rest opens the next micro-batch, and the instance
                    # batch is acked with that one (whose end covers all of it)
                    session.carry, session.carry_id = pending[kept:], mid
                elif not partial:
                    assert mid is not None
                    session.outstanding.append((mid, dict(end) if end is not None else dict(start)))
            if end is None or not moved(start, end):
                end = dict(start)
            # entries past an AvailableNow target were handed out but not returned: reopen on the next read
            session.pos = None if partial else end
        if canonical(end) == canonical(start):
            return None
        batch = entries_to_batch(entries, self.destination, batch_no)
        self.spool.write(start, end, batch)
        return batch, end

    def _prefetch(self, session: _Session, start: Offset) -> None:
        """Prepare the batch after ``start`` in a thread while Spark runs the current one (``prefetch`` option).

        Only from what the instance holds already (no waiting), and only when the instance stands at ``start``. The
        prepared batch is spooled like any other, so whether or not it is asked for, a read of ``start`` -- in this
        process or after a restart -- returns exactly it.
        """
        if not self.prefetch or session.instance is None or session.pos is None:
            return
        if canonical(session.pos) != canonical(start):
            return

        def prepare() -> None:
            try:
                prepared = self._prepare(session, start, wait=False)
            except Exception:  # the next read starts over from its own start and reports what is wrong
                destination_logger(__name__, self.destination).warning(
                    "preparing the next batch failed; the next read reopens the instance", exc_info=True
                )
                with session.lock:
                    session.pos = None
                return
            if prepared is not None:
                session.prefetched = (canonical(start), prepared[0], prepared[1])

        session.prefetcher = threading.Thread(target=prepare, name="canal-spark-prefetch", daemon=True)
        session.prefetcher.start()

    def readBetweenOffsets(self, start: Offset, end: Offset) -> Iterator[Any]:
        batches = []
        current = start
        for _ in range(1_000_000):
            if canonical(current) == canonical(end):
                break
            spooled = self.spool.read(current)
            if spooled is None:
                raise SparkSourceError(
                    f"no spooled batch starts at {canonical(current)} in {self.spool.root}: cannot replay "
                    f"{canonical(start)} .. {canonical(end)} deterministically"
                )
            batch, current = spooled
            if batch.num_rows:
                batches.append(batch)
        return iter(batches)

    def commit(self, end: Offset) -> None:
        """Ack the instance batches up to ``end`` (Spark has written them) and drop their spool files.

        A failed ack fails the commit, and with it the query, with a :class:`SparkSourceError`: the batch is still
        outstanding and the spool keeps it, so nothing is lost. The instance is closed, so the next ``read``
        restarts it at the offset Spark's checkpoint holds (as after a restart of the runner process).
        """
        session = _SESSIONS.get(_options_key(self.options))
        failed: tuple[int, CanalError] | None = None
        if session is not None:
            with session.lock:
                instance = session.instance
                while instance is not None and session.outstanding:
                    batch_id, batch_end = session.outstanding[0]
                    if int(batch_end.get("batch", 0)) > int(end.get("batch", 0)):
                        break  # a later Spark batch's (prepared ahead)
                    try:
                        instance.ack(batch_id)
                    except CanalError as refused:
                        failed = batch_id, refused
                        break
                    session.outstanding.pop(0)
        if session is not None and failed is not None:
            batch_id, exc = failed
            log = destination_logger(__name__, self.destination)
            log.error("ack of batch %d failed; closing the instance: %s", batch_id, exc)
            session.close()  # outside the lock: it waits for a prefetch, which takes the lock
            raise SparkSourceError(
                f"commit of {canonical(end)} failed: the ack of instance batch {batch_id} was refused "
                f"({type(exc).__name__}: {exc}); the rows stay spooled and are read again from the checkpoint"
            ) from exc
        self.spool.discard_through(end)

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = _master_position(config_from_options(self.options))

    def stop(self) -> None:
        close_sessions()


def _cap_option(options: Mapping[str, str], name: str) -> int | None:
    """A micro-batch cap (Spark passes option names lower-cased; errors use the documented name); None if unset."""
    text = options.get(name.lower())
    return None if text is None else _reader_option({name: text}, name, text, int)


def _reader_option(options: Mapping[str, str], key: str, default: str, parse: Callable[[str], _T]) -> _T:
    """A reader option parsed by ``parse``; numbers must be positive. SparkSourceError names the option otherwise."""
    text = options.get(key, default).strip()
    try:
        value = parse(text)
    except ValueError:
        value = None
    if value is None or (not isinstance(value, bool) and isinstance(value, int | float) and not value > 0):
        expected = "true or false" if parse is parse_bool else f"a positive {getattr(parse, '__name__', 'number')}"
        raise SparkSourceError(f"canal source option {key} = {text!r}: expected {expected}")
    return value


def _at_or_past(position: EntryPosition, target: EntryPosition) -> bool:
    return (position.journal_number, position.position or 0) >= (target.journal_number, target.position or 0)


def _master_position(config: InstanceConfig) -> EntryPosition | None:
    """The master's current binlog position (where an AvailableNow run stops)."""
    from canal.parse.sources import source_factory

    source = source_factory(config)(config.master)
    try:
        source.open()
        status: EntryPosition = source.master_status()
        return status
    finally:
        with contextlib.suppress(Exception):  # the status was read (or its error is propagating); closing is cleanup
            source.close()
