"""An optional Prometheus exporter for pycanal (``pip install pycanal[prometheus]``).

A custom collector reads :meth:`Instance.metrics() <canal.instance.Instance.metrics>` of every destination at scrape
time, so nothing is counted twice and nothing runs between scrapes::

    from canal.metrics import CanalCollector, start_http_server
    exporter = start_http_server(9108, server=server)        # an EmbeddedServer, one Instance, or several
    ...
    exporter.stop()

    # or into your own registry / the default one
    from prometheus_client import REGISTRY
    REGISTRY.register(CanalCollector(server))

Series, each labelled ``destination``:

============================================  =======  =======================================================
``canal_instance_running``                    gauge    1 while the destination runs here without a fatal error
``canal_instance_put_sequence``               gauge    entries the parser put into the store (store sequence)
``canal_instance_get_sequence``               gauge    entries handed out (rewinds on rollback)
``canal_instance_ack_sequence``               gauge    entries acked
``canal_instance_store_entries``              gauge    entries held by the store (put, not yet acked)
``canal_instance_store_bytes``                gauge    bytes held by the store
``canal_instance_rows_per_second``            gauge    rows handed out per second over the last minute
``canal_instance_delay_get_seconds``          gauge    now minus the execute time of the last entry handed out
``canal_instance_delay_ack_seconds``          gauge    now minus the execute time of the last entry acked
``canal_instance_reconnects_total``           counter  reconnects of the binlog source
``canal_instance_errors_total``               counter  fatal parser errors
``canal_instance_snapshot_rows``              gauge    rows of the last snapshot in the stream
``canal_instance_snapshot_tables_done``       gauge    its tables done
``canal_instance_snapshot_tables``            gauge    its tables (0 until it listed the captured ones)
``canal_instance_snapshot_eta_seconds``       gauge    its ETA from InnoDB's row estimate
``canal_instance_stream_ended``               gauge    1 once an ``initial_only`` copy is complete (no more entries)
============================================  =======================================================

The delay series are absent until something was handed out / acked; the snapshot series until a snapshot started
in this process (its ETA while it runs and the estimate allows one). A destination that is not running in this
process (an HA standby) has no series. ``prometheus-client`` is imported only when the exporter is used.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, cast

import attrs

from canal.errors import CanalError
from canal.instance import Instance, InstanceMetrics
from canal.server import EmbeddedServer

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric
    from prometheus_client.registry import CollectorRegistry

__all__ = ["CanalCollector", "MetricsExporter", "MetricsSource", "start_http_server"]

MetricsSource = EmbeddedServer | Instance | Iterable[Instance] | Callable[[], Mapping[str, InstanceMetrics]]
"""What a collector reads: a server, an instance, several instances, or a function returning metrics by destination."""

_LABELS = ["destination"]


class MissingExtraError(CanalError, ImportError):
    """prometheus-client is not installed."""


def _require_prometheus() -> None:
    try:
        importlib.import_module("prometheus_client")
    except ImportError:
        raise MissingExtraError(
            "the Prometheus exporter needs prometheus-client: pip install 'pycanal[prometheus]'"
        ) from None


def _snapshots(source: MetricsSource) -> dict[str, InstanceMetrics]:
    if isinstance(source, EmbeddedServer):
        return source.metrics()
    if isinstance(source, Instance):
        return {source.destination: source.metrics()}
    if callable(source):
        return dict(source())
    out: dict[str, InstanceMetrics] = {}
    for instance in source:
        out[instance.destination] = instance.metrics()
    return out


class CanalCollector:
    """A prometheus-client custom collector over pycanal destinations (register it in any registry)."""

    def __init__(self, source: MetricsSource, *, namespace: str = "canal") -> None:
        _require_prometheus()
        if isinstance(source, Iterator):
            source = list(source)  # an iterator would be exhausted by the first scrape
        self._source = source
        self._prefix = f"{namespace}_instance" if namespace else "instance"

    def describe(self) -> list[Metric]:
        return []  # unchecked collector: series come and go with destinations

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        snapshots = sorted(_snapshots(self._source).items())
        p = self._prefix

        def gauge(name: str, doc: str, value: Callable[[InstanceMetrics], float | None]) -> Metric:
            family = GaugeMetricFamily(f"{p}_{name}", doc, labels=_LABELS)
            for dest, m in snapshots:
                v = value(m)
                if v is not None:
                    family.add_metric([dest], v)
            return family

        def counter(name: str, doc: str, value: Callable[[InstanceMetrics], float]) -> Metric:
            family = CounterMetricFamily(f"{p}_{name}", doc, labels=_LABELS)
            for dest, m in snapshots:
                family.add_metric([dest], value(m))
            return family

        yield gauge("running", "1 while the destination runs in this process", lambda m: 1.0 if m.running else 0.0)
        yield gauge("put_sequence", "Entries put into the store by the parser", lambda m: m.put_sequence)
        yield gauge("get_sequence", "Entries handed out to consumers", lambda m: m.get_sequence)
        yield gauge("ack_sequence", "Entries acked by consumers", lambda m: m.ack_sequence)
        yield gauge("store_entries", "Entries held by the store", lambda m: m.store_entries)
        yield gauge("store_bytes", "Bytes held by the store", lambda m: m.store_bytes)
        yield gauge("rows_per_second", "Rows handed out per second over the last minute", lambda m: m.rows_per_s)
        yield gauge(
            "delay_get_seconds",
            "Now minus the execute time of the last entry handed out",
            lambda m: None if m.delay_get_ms is None else m.delay_get_ms / 1000,
        )
        yield gauge(
            "delay_ack_seconds",
            "Now minus the execute time of the last entry acked",
            lambda m: None if m.delay_ack_ms is None else m.delay_ack_ms / 1000,
        )
        yield counter("reconnects", "Reconnects of the binlog source", lambda m: m.reconnects)
        yield counter("errors", "Fatal parser errors", lambda m: m.errors)
        yield gauge(
            "stream_ended", "1 once an initial_only copy is complete: no more entries", lambda m: int(m.stream_ended)
        )
        yield gauge(
            "snapshot_rows",
            "Rows of the last snapshot in the stream",
            lambda m: None if m.snapshot is None else m.snapshot.rows_emitted,
        )
        yield gauge(
            "snapshot_tables_done",
            "Tables of the last snapshot done",
            lambda m: None if m.snapshot is None else m.snapshot.tables_done,
        )
        yield gauge(
            "snapshot_tables",
            "Tables of the last snapshot",
            lambda m: None if m.snapshot is None else len(m.snapshot.tables),
        )
        yield gauge(
            "snapshot_eta_seconds",
            "ETA of the last snapshot from InnoDB's row estimate",
            lambda m: None if m.snapshot is None else m.snapshot.eta_s,
        )


@attrs.define
class MetricsExporter:
    """A running HTTP exporter: ``url`` to scrape, ``stop()`` to shut it down."""

    registry: CollectorRegistry
    collector: CanalCollector
    host: str
    port: int
    _server: Any = attrs.field(repr=False)
    _thread: Any = attrs.field(repr=False)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> MetricsExporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_http_server(
    port: int,
    addr: str = "127.0.0.1",
    *,
    server: EmbeddedServer | None = None,
    instances: Iterable[Instance] | Instance | None = None,
    source: MetricsSource | None = None,
    registry: CollectorRegistry | None = None,
    namespace: str = "canal",
) -> MetricsExporter:
    """Serve ``/metrics`` for ``server`` (or ``instances``, or any ``source``) on ``addr:port`` (port 0: a free one).

    The collector goes into ``registry`` (default: a new one holding only pycanal's series); the server runs on a
    daemon thread until :meth:`MetricsExporter.stop`. Binds to loopback unless ``addr`` says otherwise.
    """
    given = [s for s in (server, instances, source) if s is not None]
    if len(given) != 1:
        raise TypeError("start_http_server needs exactly one of server=, instances= or source=")
    what: MetricsSource = given[0]
    _require_prometheus()
    import prometheus_client
    from prometheus_client.registry import Collector, CollectorRegistry

    target = registry if registry is not None else CollectorRegistry(auto_describe=False)
    collector = CanalCollector(what, namespace=namespace)
    target.register(cast(Collector, collector))
    httpd, thread = prometheus_client.start_http_server(port, addr=addr, registry=target)
    return MetricsExporter(target, collector, addr, int(httpd.server_port), httpd, thread)
