"""What a Spark user sees of the changes each micro-batch of the ``canal`` source holds, in every images form.

PySpark 4.2's Python data source API has no custom metrics (a Scala source reports them through
``ReportsSourceMetrics``, shown as its ``metrics`` in the query's progress): a query's ``numInputRows`` counts the
rows the source returned -- with ``images=packed``, a few packed rows per micro-batch (74 for 200,003 changes). What a
Python source does write is its offsets, and Spark shows each micro-batch's start and end offsets in the query's
progress as the source wrote them (``query.lastProgress["sources"][i]["endOffset"]``, a ``StreamingQueryListener``'s
``onQueryProgress``, the progress Spark logs). The reader counts the change rows it cuts into each micro-batch, by
the value of their ``type`` column, as it takes them, and:

* writes the counts into the micro-batch's end offset, field ``changes`` (``{"INSERT": 120, "UPDATE": 40}``; none:
  ``{}``). A replayed micro-batch is read back from the spool with its end offset, so the counts are as
  deterministic as the rows. On the driver (or a Spark Connect client), :func:`micro_batch_changes` reads them from
  a progress, and :class:`~canal.spark.listener.ChangeCountListener` collects them;
* logs a line per micro-batch, INFO on the destination's logger (:func:`handed`): its changes, its binlog range and
  its lag, in the process that runs the reader. Spark forwards that process's stderr to the driver's (the Connect
  server's) log, where Python prints only warnings and worse unless told: the source's option ``reader.log.level``
  (``INFO`` for these lines) gives the process's ``canal`` logger a handler on stderr at that level
  (:func:`log_in_runner`);
* counts them for the exporter (:class:`SourceCollector`), which that process serves, with its instance's
  ``canal_instance_*`` series, when the source has the option ``metrics.port`` (:func:`serve_metrics`).

The reader runs in Spark's ``python_streaming_source_runner`` process of the query, a child of the driver's JVM (of
the Connect server's, over Spark Connect); a restarted query gets a new one, whose counters start at 0 (Prometheus
reads that as a counter reset). The counts are those of the rows the reader cuts into micro-batches: the binlog's,
and the snapshot's when the reader reads it. With ``snapshot.partitions``, the snapshot ranges that executors read
are not counted (their rows are unknown when the micro-batch is planned: the ranges are in the offset's
``planned``).
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from canal.log import destination_logger
from canal.spark.offsets import Offset, has_position
from canal.spark.runner_gc import RUNNER_MODULE, main_module
from canal.spark.source_options import SparkSourceError, reader_option

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from canal.instance import Instance
    from canal.metrics import MetricsExporter

__all__ = [
    "MicroBatchChanges",
    "SourceCollector",
    "SourceCounters",
    "counters",
    "handed",
    "log_in_runner",
    "micro_batch_changes",
    "position_text",
    "serve_metrics",
]

_P = TypeVar("_P")


@attrs.define(slots=True)
class SourceCounters:
    """What one destination's reader handed to Spark in this process."""

    micro_batches: int = 0
    changes: dict[str, int] = attrs.field(factory=dict)  # change rows by type
    newest_time_ms: int | None = None  # the execute time at the end of the last micro-batch (its offset's timestamp)


DML_TYPES = ("INSERT", "UPDATE", "DELETE")
"""The types whose series start at 0 (an alert or a rate on them sees the first change); others appear when seen."""
_COUNTERS: dict[str, SourceCounters] = {}
_LOCK = threading.Lock()


def counters() -> dict[str, SourceCounters]:
    """A copy of the counters of every destination whose reader runs in this process."""
    with _LOCK:
        return {dest: attrs.evolve(c, changes=dict(c.changes)) for dest, c in _COUNTERS.items()}


def position_text(offset: Mapping[str, Any]) -> str:
    """``file:offset`` of an offset (``the start`` without a position)."""
    return f"{offset['file']}:{offset['offset']}" if has_position(offset) else "the start"


def handed(destination: str, start: Offset, prepared: _P) -> _P:
    """``prepared`` (a :class:`~canal.spark.sessions.Prepared` micro-batch after ``start``, or None) is handed to
    Spark: logged and counted."""
    end: Offset | None = getattr(prepared, "end", None)
    if end is None:
        with _LOCK:  # the reader runs: its series start at 0, so that a rate sees the first micro-batch
            _COUNTERS.setdefault(destination, SourceCounters(changes=dict.fromkeys(DML_TYPES, 0)))
        return prepared
    changes: dict[str, int] = dict(end.get("changes") or {})
    stamp = end.get("timestamp")
    now_ms = int(time.time() * 1000)
    with _LOCK:
        counted = _COUNTERS.setdefault(destination, SourceCounters(changes=dict.fromkeys(DML_TYPES, 0)))
        counted.micro_batches += 1
        for kind, rows in changes.items():
            counted.changes[kind] = counted.changes.get(kind, 0) + rows
        if isinstance(stamp, int) and stamp > 0:
            counted.newest_time_ms = stamp
    detail = ", ".join(f"{kind} {rows}" for kind, rows in changes.items()) or "none"
    lag = f"{(now_ms - stamp) / 1000:.1f} s" if isinstance(stamp, int) and stamp > 0 else "unknown"
    destination_logger(__name__, destination).info(
        "micro-batch %s: %d changes (%s), binlog %s .. %s, lag %s",
        end.get("batch"),
        sum(changes.values()),
        detail,
        position_text(start),
        position_text(end),
        lag,
    )
    return prepared


class SourceCollector:
    """A prometheus-client collector of the ``canal`` source's counters in this process (:func:`counters`)."""

    def __init__(self, *, namespace: str = "canal") -> None:
        from canal.metrics import require_prometheus

        require_prometheus()
        self._prefix = f"{namespace}_source" if namespace else "source"

    def describe(self) -> list[Metric]:
        return []  # unchecked collector: series come and go with destinations

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        read = sorted(counters().items())
        p = self._prefix
        batches = CounterMetricFamily(
            f"{p}_micro_batches", "Micro-batches the reader handed to Spark", labels=["destination"]
        )
        changes = CounterMetricFamily(
            f"{p}_changes", "Change rows of those micro-batches, by type", labels=["destination", "type"]
        )
        delay = GaugeMetricFamily(
            f"{p}_delay_seconds",
            "Now minus the execute time at the end of the last micro-batch handed to Spark",
            labels=["destination"],
        )
        now_ms = int(time.time() * 1000)
        for dest, counted in read:
            batches.add_metric([dest], counted.micro_batches)
            for kind, rows in sorted(counted.changes.items()):
                changes.add_metric([dest, kind], rows)
            if counted.newest_time_ms is not None:
                delay.add_metric([dest], max(0, now_ms - counted.newest_time_ms) / 1000)
        yield batches
        yield changes
        yield delay


_LOG_HANDLER: logging.Handler | None = None
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def log_in_runner(options: Mapping[str, str], running: str | None = None) -> logging.Handler | None:
    """In the reader's process (``running``: the ``__main__`` module's name; None: this process's), once: the
    ``canal`` logger's records at the option ``reader.log.level`` (default ``WARNING``) and above go to the
    process's stderr, which Spark forwards to the driver's log. The handler added, None when none was (another
    process, whose logging is the application's; or added already)."""
    global _LOG_HANDLER
    lower = {k.lower(): v for k, v in options.items()}
    text = lower.get("reader.log.level", "WARNING").strip().upper()
    level = logging.getLevelName(text)
    if not isinstance(level, int):
        raise SparkSourceError(f"canal source option reader.log.level = {text!r}: expected DEBUG, INFO, WARNING, ...")
    if (running if running is not None else main_module()) != RUNNER_MODULE:
        return None
    with _EXPORTER_LOCK:
        if _LOG_HANDLER is not None:
            return None
        handler = _LOG_HANDLER = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    logger = logging.getLogger("canal")
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False  # once here: not again by a handler Spark or a library gives the root logger
    return handler


_EXPORTER: MetricsExporter | None = None
_EXPORTER_LOCK = threading.Lock()


def serve_metrics(options: Mapping[str, str], instances: Iterable[Instance]) -> MetricsExporter | None:
    """With the option ``metrics.port``, serve this process's source counters and ``instances`` (the reader's, made
    anew at each scrape) on ``metrics.address`` (default 127.0.0.1) -- once per process: a second query's reader in
    the same process is served by the first's exporter. None without the option."""
    global _EXPORTER
    lower = {k.lower(): v for k, v in options.items()}
    if not lower.get("metrics.port", "").strip():
        return None
    port = reader_option(lower, "metrics.port", "", int, zero=True)
    address = lower.get("metrics.address", "127.0.0.1").strip() or "127.0.0.1"
    with _EXPORTER_LOCK:
        if _EXPORTER is not None:
            return _EXPORTER
        from canal.metrics import start_http_server

        log = destination_logger(__name__, lower.get("destination", ""))
        try:
            _EXPORTER = start_http_server(port, address, instances=instances, collectors=[SourceCollector()])
        except OSError as exc:
            raise SparkSourceError(
                f"canal source option metrics.port = {port}: cannot serve metrics on {address}:{port}: {exc}"
            ) from exc
        log.info("serving the source's metrics at %s", _EXPORTER.url)
        return _EXPORTER


def stop_serving() -> None:
    """Stop this process's exporter, if it runs (tests; a process that ends stops it anyway)."""
    global _EXPORTER
    with _EXPORTER_LOCK:
        exporter, _EXPORTER = _EXPORTER, None
    if exporter is not None:
        exporter.stop()


# -- on the driver: the counts read from the query's progress ---------------------------------------------------


@attrs.frozen
class MicroBatchChanges:
    """The changes of one ``canal`` source in one micro-batch."""

    query_id: str
    run_id: str
    batch_id: int  # Spark's
    source: str  # the source's description in the progress
    changes: dict[str, int]  # change rows by type (the rows' ``type`` column: INSERT, UPDATE, DELETE, SNAPSHOT, ...)
    start: str  # binlog position, ``file:offset`` (``the start`` for a query's first)
    end: str
    lag_s: float | None  # the progress's time minus the execute time at the micro-batch's end

    @property
    def rows(self) -> int:
        """Change rows in all."""
        return sum(self.changes.values())


def _as_dict(progress: Any) -> dict[str, Any]:
    """A progress as a dict: ``query.lastProgress`` / a listener event's ``progress`` (their ``json``), a dict, or
    its JSON text."""
    if isinstance(progress, str):
        loaded: dict[str, Any] = json.loads(progress)
        return loaded
    if isinstance(progress, Mapping):
        return dict(progress)
    text = getattr(progress, "json", None)
    if isinstance(text, str):
        return _as_dict(text)
    raise TypeError(f"not a streaming query progress: {type(progress).__name__}")


def _offset(value: Any) -> dict[str, Any] | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def _epoch_ms(timestamp: Any) -> int | None:
    if not isinstance(timestamp, str):
        return None
    try:
        return int(datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def micro_batch_changes(progress: Any) -> list[MicroBatchChanges]:
    """The changes of each ``canal`` source in the micro-batch ``progress`` reports (none for a progress without new
    data, or of a query without a ``canal`` source)."""
    data = _as_dict(progress)
    now_ms = _epoch_ms(data.get("timestamp"))
    out = []
    for source in data.get("sources") or ():
        start, end = _offset(source.get("startOffset")), _offset(source.get("endOffset"))
        if end is None or "changes" not in end or (start is not None and start == end):
            continue
        stamp = end.get("timestamp")
        lag_s = (now_ms - stamp) / 1000 if now_ms is not None and isinstance(stamp, int) and stamp > 0 else None
        out.append(
            MicroBatchChanges(
                query_id=str(data.get("id")),
                run_id=str(data.get("runId")),
                batch_id=int(data.get("batchId", -1)),
                source=str(source.get("description", "")),
                changes={str(k): int(v) for k, v in dict(end["changes"]).items()},
                start=position_text(start or {}),
                end=position_text(end),
                lag_s=lag_s,
            )
        )
    return out
