"""The Delta mirror's series for the Prometheus exporter (:mod:`canal.metrics`; ``pip install pycanal[prometheus]``).

:class:`MirrorCollector` reads :meth:`DeltaMirror.metrics() <canal.lake.mirror.DeltaMirror.metrics>` of each mirror
at scrape time, in the process that hands the mirror its batches -- the embedded
:func:`~canal.spark.run_batches` process, or the Spark driver under ``foreachBatch``, where the batches that Spark
tasks write (``on_executors``) are counted from their answers; a task's own mirror object is not served::

    from canal.lake.metrics import MirrorCollector
    from canal.metrics import start_http_server
    exporter = start_http_server(9108, server=server, collectors=[MirrorCollector(mirror)])

Series, each labelled ``root`` (the mirror's root, without what could hold a credential: a URI's user information
and query) and ``app_id``:

==============================================  =======  =========================================================
``canal_mirror_batches_total``                  counter  batches that applied something
``canal_mirror_rows_total``                     counter  change rows of those batches
``canal_mirror_applied_binlog_file_number``     gauge    the binlog file of the newest change applied (``.000042``: 42)
``canal_mirror_applied_binlog_offset_bytes``    gauge    its offset in that file
``canal_mirror_delay_seconds``                  gauge    now minus the execute time of the newest change applied
``canal_mirror_folds_total``                    counter  folds of change logs into their tables done here
``canal_mirror_fold_failures_total``            counter  folds and log compactions that failed
``canal_mirror_failing_fold_tables``            gauge    tables whose last folds failed (``max_fold_failures`` stops)
``canal_mirror_staged_rows``                    gauge    changes staged in memory, not yet in their change logs
``canal_mirror_staged_bytes``                   gauge    their bytes
``canal_mirror_stops_total``                    counter  batches that failed, by ``error`` (its class)
``canal_mirror_heals_total``                    counter  tables read again in the stream (unlogged changes healed)
``canal_mirror_info``                           gauge    1, labelled ``destination`` too: the destination it mirrors
==============================================  =======  =========================================================

``canal_mirror_info`` joins a mirror's series with its capture's, which are labelled ``destination``:
``canal_mirror_delay_seconds * on (job, instance, root, app_id) group_left (destination) canal_mirror_info``. It is
absent until a batch applied here named its destination. The position and delay series are absent until a batch
carried a position (change rows without ``log_file``, a
``canal`` source without one, carry none). The delay grows while no change comes, as the capture's does: read it with
the capture's (``canal_instance_delay_ack_seconds``). ``canal_mirror_stops_total`` has a series at 0 for every
:class:`~canal.lake.types.MirrorError` class, so that an alert on its increase sees the first stop; a stop usually ends
the process that applies (its ``foreachBatch`` fails the query), and is then seen only by a scrape before that.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from canal.lake.store.storage import redacted
from canal.lake.types import MirrorError
from canal.lake.upkeep.health import MirrorMetrics
from canal.metrics import file_number, require_prometheus

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from canal.lake.mirror import DeltaMirror

__all__ = ["MirrorCollector"]

_LABELS = ["root", "app_id"]


def error_classes() -> list[str]:
    """The names of :class:`~canal.lake.types.MirrorError` and every subclass of it imported so far."""
    found: list[type[BaseException]] = [MirrorError]
    for cls in found:
        found.extend(sub for sub in cls.__subclasses__() if sub not in found)
    return sorted({cls.__name__ for cls in found})


class MirrorCollector:
    """A prometheus-client custom collector over Delta mirrors (register it in any registry, or hand it to
    :func:`canal.metrics.start_http_server` as one of its ``collectors``)."""

    def __init__(
        self,
        mirrors: DeltaMirror | Iterable[DeltaMirror] | Callable[[], Iterable[DeltaMirror]],
        *,
        namespace: str = "canal",
    ) -> None:
        """``mirrors``: a mirror, several, or a function returning the mirrors to serve at each scrape."""
        require_prometheus()
        if isinstance(mirrors, Iterator):
            mirrors = list(mirrors)  # an iterator would be exhausted by the first scrape
        self._mirrors: Any = mirrors
        self._prefix = f"{namespace}_mirror" if namespace else "mirror"

    def _read(self) -> list[tuple[list[str], MirrorMetrics]]:
        mirrors = self._mirrors
        if callable(mirrors) and not hasattr(mirrors, "metrics"):
            mirrors = mirrors()  # a function (a mirror is callable too: foreachBatch's entry point)
        if hasattr(mirrors, "metrics"):
            mirrors = [mirrors]
        return sorted(([redacted(str(m.root)), str(m.app_id)], m.metrics()) for m in mirrors)

    def describe(self) -> list[Metric]:
        return []  # unchecked collector: series come and go with mirrors

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        read = self._read()
        p = self._prefix

        def gauge(name: str, doc: str, value: Callable[[MirrorMetrics], float | None]) -> Metric:
            family = GaugeMetricFamily(f"{p}_{name}", doc, labels=_LABELS)
            for labels, m in read:
                v = value(m)
                if v is not None:
                    family.add_metric(labels, v)
            return family

        def counter(name: str, doc: str, value: Callable[[MirrorMetrics], float]) -> Metric:
            family = CounterMetricFamily(f"{p}_{name}", doc, labels=_LABELS)
            for labels, m in read:
                family.add_metric(labels, value(m))
            return family

        yield counter("batches", "Batches that applied something", lambda m: m.batches)
        yield counter("rows", "Change rows of the batches that applied something", lambda m: m.rows)
        yield gauge(
            "applied_binlog_file_number",
            "The number of the binlog file of the newest change applied",
            lambda m: file_number(m.applied_log_file),
        )
        yield gauge(
            "applied_binlog_offset_bytes", "The offset of the newest change applied", lambda m: m.applied_log_offset
        )
        yield gauge(
            "delay_seconds",
            "Now minus the execute time of the newest change applied",
            lambda m: None if m.delay_ms is None else m.delay_ms / 1000,
        )
        yield counter("folds", "Folds of change logs into their tables done here", lambda m: m.folds)
        yield counter("fold_failures", "Folds and log compactions that failed", lambda m: m.fold_failures)
        yield gauge("failing_fold_tables", "Tables whose last folds failed", lambda m: len(m.failing_folds))
        yield gauge("staged_rows", "Changes staged in memory, not yet in their change logs", lambda m: m.staged_rows)
        yield gauge("staged_bytes", "Bytes of the changes staged in memory", lambda m: m.staged_bytes)
        stops = CounterMetricFamily(
            f"{p}_stops", "Batches that failed, by the class of their error", labels=[*_LABELS, "error"]
        )
        typed = error_classes()
        for labels, m in read:
            for error in sorted({*typed, *m.stops}):
                stops.add_metric([*labels, error], m.stops.get(error, 0))
        yield stops
        yield counter(
            "heals", "Tables read again in the stream where the server changed rows unlogged", lambda m: m.heals
        )
        info = GaugeMetricFamily(
            f"{p}_info", "1; its destination label names the destination it mirrors", labels=[*_LABELS, "destination"]
        )
        for labels, m in read:
            if m.destination is not None:
                info.add_metric([*labels, m.destination], 1.0)
        yield info
