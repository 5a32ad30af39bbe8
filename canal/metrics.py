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

Other collectors join the same endpoint: ``start_http_server(9108, server=server, collectors=[MirrorCollector(m)])``
serves a Delta mirror's series too (:mod:`canal.lake.metrics`); the ``canal`` Spark source serves its own and its
instance's (:mod:`canal.spark.progress`).

Series, each labelled ``destination``:

===================================================  =======  =======================================================
``canal_instance_running``                           gauge    1 while the destination runs here without a fatal error
``canal_instance_connected``                         gauge    1 while a dump reads from the master (0: retrying)
``canal_instance_last_error_info``                   gauge    1, labelled ``error``: the class of the last error
``canal_instance_ack_lag_seconds``                   gauge    now minus the master's time everything acked reaches
``canal_instance_delay_put_seconds``                 gauge    now minus the execute time of the newest entry put
``canal_instance_put_sequence``                      gauge    entries the parser put into the store (store sequence)
``canal_instance_get_sequence``                      gauge    entries handed out (rewinds on rollback)
``canal_instance_ack_sequence``                      gauge    entries acked
``canal_instance_store_entries``                     gauge    entries held by the store (put, not yet acked)
``canal_instance_store_bytes``                       gauge    bytes held by the store
``canal_instance_rows_per_second``                   gauge    rows handed out per second over the last minute
``canal_instance_delay_get_seconds``                 gauge    now minus the execute time of the last entry handed out
``canal_instance_delay_ack_seconds``                 gauge    now minus the execute time of the last entry acked
``canal_instance_reconnects_total``                  counter  reconnects of the binlog source
``canal_instance_errors_total``                      counter  fatal parser errors
``canal_instance_heals_total``                       counter  tables read again in the stream (unlogged changes healed)
``canal_instance_rows_reread_total``                 counter  rows read again (a partial UPDATE a copy cannot complete)
``canal_instance_snapshot_rows``                     gauge    rows of the last snapshot in the stream
``canal_instance_snapshot_tables_done``              gauge    its tables done
``canal_instance_snapshot_tables``                   gauge    its tables (0 until it listed the captured ones)
``canal_instance_snapshot_eta_seconds``              gauge    its ETA from InnoDB's row estimate
``canal_instance_stream_ended``                      gauge    1 once an ``initial_only`` copy is complete
``canal_instance_cursor_binlog_file_number``         gauge    the number of the binlog file the saved cursor is in
``canal_instance_master_oldest_binlog_file_number``  gauge    the number of the oldest binlog file the master has
``canal_instance_master_newest_binlog_file_number``  gauge    the number of the binlog file the master writes
===================================================  =======  =======================================================

A server with ZooKeeper also serves ``canal_server_zookeeper_connected`` (no label), there while it serves no
destination: a suspended session stops every destination here, and their series go.

``canal_instance_ack_lag_seconds`` is the one delay an idle source leaves small: with entries waiting it is now minus
the execute time of the first one not acked, and with everything acked now minus the time up to which the parser read
the binlog, which the master's heartbeats move on while nothing is written (absent until the parser read an event).
It grows while the consumer does not ack what waits, and while the master cannot be read. The delay series are
absent until something was handed out / acked / put; the snapshot series until a snapshot started
in this process (its ETA while it runs and the estimate allows one). A destination that is not running in this
process (an HA standby) has no series. ``prometheus-client`` is imported only when the exporter is used.

The binlog horizon. A cursor in a binlog file the master no longer has cannot be resumed (canal's errno 1236): the
``binlog_file_number`` series say how close that is (``mysql-bin.000042``: 42; a purge removes the files before the
newest, so a cursor in the oldest of several is next). The cursor's is read from the
destination's meta at each scrape; the master's files from ``SHOW BINARY LOGS`` on a connection of its own, at
most every ``binlogs_every_s`` seconds, in a background thread: a scrape never waits for the server, and the series
is absent until the first answer and after a failed one (logged). They compare within one server's numbering (after
a failover to a server numbering its files otherwise, only the new cursor's means something). A source given as a
function of metrics has neither.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, cast

import attrs

from canal.config import InstanceConfig
from canal.errors import CanalError, MissingExtraError, require_extra
from canal.instance import Instance
from canal.instance_metrics import InstanceMetrics
from canal.log import destination_logger
from canal.position import journal_number
from canal.server import EmbeddedServer

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric
    from prometheus_client.registry import CollectorRegistry

__all__ = [
    "BINLOGS_EVERY_S",
    "SERVER_SERIES",
    "BinlogHorizon",
    "CanalCollector",
    "MetricsExporter",
    "MetricsSource",
    "MissingExtraError",
    "start_http_server",
]

SERVER_SERIES = {
    "zookeeper_connected": "1 while the server's ZooKeeper session is connected (0: it serves no destination meanwhile)"
}
"""The series of a server (``canal_server_*``, no labels: the scrape's ``instance`` names the process), by name."""

BINLOGS_EVERY_S = 60.0
"""How often a collector asks a master for its oldest binlog file, at most (``SHOW BINARY LOGS``)."""

MetricsSource = EmbeddedServer | Instance | Iterable[Instance] | Callable[[], Mapping[str, InstanceMetrics]]
"""What a collector reads: a server, an instance, several instances, or a function returning metrics by destination."""

_LABELS = ["destination"]


def require_prometheus() -> None:
    """:class:`~canal.errors.MissingExtraError` unless prometheus-client is installed (the ``prometheus`` extra)."""
    require_extra("prometheus_client", "prometheus", "the Prometheus exporter")


def _instances(source: MetricsSource) -> dict[str, Instance]:
    """The instances running in this process that ``source`` names (none for a function of metrics)."""
    if isinstance(source, EmbeddedServer):
        return source.running_instances()  # starts nothing: a scrape never starts a destination
    if isinstance(source, Instance):
        return {source.destination: source}
    if callable(source):
        return {}
    return {instance.destination: instance for instance in source}


def file_number(name: str | None) -> int | None:
    """The number of a binlog file (``mysql-bin.000042``: 42), None without one."""
    if not name:
        return None
    number = journal_number(name)
    return number if number >= 0 else None


class BinlogHorizon:
    """The oldest and newest binlog files a master has, read at most every ``every_s`` seconds in a background
    thread (:meth:`files` never waits for the server)."""

    def __init__(self, config: InstanceConfig, every_s: float = BINLOGS_EVERY_S) -> None:
        self.config = config
        self.every_s = every_s
        self._lock = threading.Lock()
        self._files: tuple[str, str] | None = None  # (oldest, newest)
        self._read_at: float | None = None  # monotonic time of the last read started
        self._reading: threading.Thread | None = None

    def files(self) -> tuple[str, str] | None:
        """The oldest and newest files of the last answer (None: none yet, or the last read failed); a read starts
        in the background when the last began ``every_s`` ago or more."""
        with self._lock:
            due = self._read_at is None or time.monotonic() - self._read_at >= self.every_s
            if due and (self._reading is None or not self._reading.is_alive()):
                self._read_at = time.monotonic()  # and again when the read begins
                self._reading = threading.Thread(target=self.read, name="canal-binlog-horizon", daemon=True)
                self._reading.start()
            return self._files

    def read(self) -> tuple[str, str] | None:
        """Ask the master now (``SHOW BINARY LOGS``): its oldest and newest files; None when it cannot be asked
        (logged)."""
        from canal.parse.sources import source_factory

        with self._lock:
            self._read_at = time.monotonic()
        found = None
        try:
            source = source_factory(self.config)(self.config.master)
            try:
                source.open()
                files = source.binlog_files()
            finally:
                source.close()
            found = (files[0].name, files[-1].name) if files else None
        except Exception as exc:  # an unreachable master: the series is absent until it answers again
            destination_logger(__name__, self.config.destination).warning(
                "cannot read the master's binlog files for the exporter: %s: %s", type(exc).__name__, exc
            )
        with self._lock:
            self._files = found
        return found


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

    def __init__(
        self, source: MetricsSource, *, namespace: str = "canal", binlogs_every_s: float = BINLOGS_EVERY_S
    ) -> None:
        require_prometheus()
        if isinstance(source, Iterator):
            source = list(source)  # an iterator would be exhausted by the first scrape
        self._source = source
        self._prefix = f"{namespace}_instance" if namespace else "instance"
        self._server_prefix = f"{namespace}_server" if namespace else "server"
        self._binlogs_every_s = binlogs_every_s
        self._horizons: dict[str, BinlogHorizon] = {}  # by destination

    def horizon(self, instance: Instance) -> BinlogHorizon:
        """The binlog horizon of ``instance``'s master (made on first use, anew for a new config)."""
        horizon = self._horizons.get(instance.destination)
        if horizon is None or horizon.config is not instance.config:
            horizon = self._horizons[instance.destination] = BinlogHorizon(instance.config, self._binlogs_every_s)
        return horizon

    def _binlog_files(self) -> dict[str, tuple[int | None, int | None, int | None]]:
        """Destination -> the numbers of its cursor's binlog file, its master's oldest and newest."""
        out = {}
        for dest, instance in _instances(self._source).items():
            try:
                cursor = instance.get_cursor()
            except CanalError as exc:  # a meta that cannot be read now: no cursor series this scrape
                destination_logger(__name__, dest).warning("cannot read the cursor for the exporter: %s", exc)
                cursor = None
            at = None if cursor is None else file_number(cursor.position.journal_name)
            files = self.horizon(instance).files()
            out[dest] = (at, *((None, None) if files is None else (file_number(files[0]), file_number(files[1]))))
        return out

    def describe(self) -> list[Metric]:
        return []  # unchecked collector: series come and go with destinations

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        snapshots = sorted(_snapshots(self._source).items())
        files = self._binlog_files()
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
        yield gauge(
            "connected",
            "1 while a dump reads from the master; 0 while it connects, backs off after a failure, or stopped",
            lambda m: 1.0 if m.connected else 0.0,
        )
        errors = GaugeMetricFamily(
            f"{p}_last_error_info",
            "1 for the class of the destination's last error (retried or fatal)",
            labels=[*_LABELS, "error"],
        )
        for dest, m in snapshots:
            if m.last_error_type is not None:
                errors.add_metric([dest, m.last_error_type], 1.0)
        yield errors
        yield gauge(
            "ack_lag_seconds",
            "Now minus the master's time up to which everything was acked (refreshed by the master's heartbeats)",
            lambda m: None if m.ack_lag_ms is None else m.ack_lag_ms / 1000,
        )
        yield gauge(
            "delay_put_seconds",
            "Now minus the execute time of the newest entry the parser put into the store",
            lambda m: None if m.delay_put_ms is None else m.delay_put_ms / 1000,
        )
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
        yield counter(
            "heals", "Tables read again in the stream where the server changed rows unlogged", lambda m: m.heals
        )
        yield counter(
            "rows_reread",
            "Rows read again in the stream where a partial UPDATE left a copy unable to make them exact",
            lambda m: m.rows_reread,
        )
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
        yield gauge(
            "cursor_binlog_file_number",
            "The number of the binlog file the saved cursor is in",
            lambda m: files.get(m.destination, (None, None, None))[0],
        )
        yield gauge(
            "master_oldest_binlog_file_number",
            "The number of the oldest binlog file the master has (SHOW BINARY LOGS)",
            lambda m: files.get(m.destination, (None, None, None))[1],
        )
        yield gauge(
            "master_newest_binlog_file_number",
            "The number of the binlog file the master writes (SHOW BINARY LOGS)",
            lambda m: files.get(m.destination, (None, None, None))[2],
        )
        zookeeper = self._source.zookeeper_connected if isinstance(self._source, EmbeddedServer) else None
        if zookeeper is not None:  # a process's series: there even while it serves no destination
            family = GaugeMetricFamily(
                f"{self._server_prefix}_zookeeper_connected", SERVER_SERIES["zookeeper_connected"]
            )
            family.add_metric([], 1.0 if zookeeper else 0.0)
            yield family
        yield from self._ha()

    def _ha(self) -> Iterator[Metric]:
        """The ``canal_ha_*`` series of a server under ZooKeeper HA (:meth:`EmbeddedServer.balance_state`): what
        it serves and is assigned, its share, its moves, and which destinations some process holds."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        p = self._prefix.removesuffix("instance") + "ha"
        ha = self._source.balance_state() if isinstance(self._source, EmbeddedServer) else None
        serving = GaugeMetricFamily(f"{p}_serving", "1 while this process serves the destination", labels=_LABELS)
        owned = GaugeMetricFamily(
            f"{p}_owned", "1 while some process holds the destination's running node, as this one saw", labels=_LABELS
        )
        count = GaugeMetricFamily(f"{p}_serving_destinations", "Destinations this process serves")
        assigned = GaugeMetricFamily(f"{p}_assigned_destinations", "Destinations the balance group assigns here")
        share = GaugeMetricFamily(f"{p}_share", "This process's share of the balance group's destinations")
        members = GaugeMetricFamily(f"{p}_members", "Live processes in the balance group")
        moves = CounterMetricFamily(
            f"{p}_moves",
            "Destinations this process began serving (in), handed over (out) or stopped serving otherwise (lost)",
            labels=["direction"],
        )
        if ha is not None:
            for dest, held in ha.owned.items():
                serving.add_metric([dest], 1.0 if dest in ha.serving else 0.0)
                owned.add_metric([dest], 1.0 if held else 0.0)
            count.add_metric([], len(ha.serving))
            if ha.group is not None:
                assigned.add_metric([], len(ha.assigned))
                members.add_metric([], ha.members)
                if ha.share is not None:
                    share.add_metric([], ha.share)
            moves.add_metric(["in"], ha.moves_in)
            moves.add_metric(["out"], ha.moves_out)
            moves.add_metric(["lost"], ha.losses)
        yield from (serving, owned, count, assigned, share, members, moves)


@attrs.define
class MetricsExporter:
    """A running HTTP exporter: ``url`` to scrape, ``stop()`` to shut it down."""

    registry: CollectorRegistry
    collector: CanalCollector | None  # None: only other collectors were given
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
    collectors: Iterable[object] = (),
    registry: CollectorRegistry | None = None,
    namespace: str = "canal",
) -> MetricsExporter:
    """Serve ``/metrics`` for ``server`` (or ``instances``, or any ``source``) and ``collectors`` (any
    prometheus-client collectors: a Delta mirror's, :class:`canal.lake.metrics.MirrorCollector`) on ``addr:port``
    (port 0: a free one).

    The collectors go into ``registry`` (default: a new one holding only these series); the server runs on a daemon
    thread until :meth:`MetricsExporter.stop`. Binds to loopback unless ``addr`` says otherwise.
    """
    given = [s for s in (server, instances, source) if s is not None]
    others = list(collectors)
    if len(given) > 1 or not (given or others):
        raise TypeError("start_http_server needs exactly one of server=, instances= or source=, or collectors=")
    require_prometheus()
    import prometheus_client
    from prometheus_client.registry import Collector, CollectorRegistry

    target = registry if registry is not None else CollectorRegistry(auto_describe=False)
    collector = CanalCollector(given[0], namespace=namespace) if given else None
    for each in [*([collector] if collector is not None else []), *others]:
        target.register(cast(Collector, each))
    httpd, thread = prometheus_client.start_http_server(port, addr=addr, registry=target)
    return MetricsExporter(target, collector, addr, int(httpd.server_port), httpd, thread)
