"""What the exporter says about a destination's state, and what a scrape must not do.

A scrape reads the destinations that run; it starts none (``server.metrics()`` called ``instance()``, which started
a lazy destination never used and one stopped with ``stop_destination``, as ``canal position set`` asks). The state
series -- ``connected``, ``last_error_info``, ``ack_lag_seconds``, ``delay_put_seconds`` -- follow the parser.
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable

import pytest
from prometheus_client.parser import text_string_to_metric_families

from canal.config import InstanceConfig, MasterConfig, RetryConfig
from canal.metrics import start_http_server
from canal.server import EmbeddedServer
from canal.testing.fake import FakeMysql


def _samples(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _wait(what: str, check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


def _config(fake: FakeMysql, destination: str, **kwargs: object) -> InstanceConfig:
    master = MasterConfig(address=fake.address, journal_name="mysql-bin.000001", position=4)
    return InstanceConfig(destination=destination, master=master, **kwargs)  # type: ignore[arg-type]


def test_a_scrape_starts_no_destination(fake_mysql: FakeMysql) -> None:
    with EmbeddedServer() as server:
        server.add_destination(_config(fake_mysql, "lazy"), lazy=True)  # never used
        server.start_destination(_config(fake_mysql, "stopped"))
        server.start_destination(_config(fake_mysql, "running"))
        server.stop_destination("stopped")  # as `canal position set` asks, before it moves the cursor
        with start_http_server(0, server=server) as exporter:
            samples = _samples(exporter.url)
            metrics = server.metrics()
        assert not server.is_started("lazy") and not server.is_started("stopped")
        assert server.is_started("running")
    assert set(metrics) == {"running"}
    running = {labels for name, labels in samples if name == "canal_instance_running"}
    assert running == {(("destination", "running"),)}


def test_the_state_series_follow_the_parser(fake_mysql: FakeMysql) -> None:
    fake_mysql.execute("CREATE TABLE shop.t (id INT PRIMARY KEY)")
    fake_mysql.down()
    retry = RetryConfig(initial_backoff_s=0.01, max_backoff_s=0.05, heartbeat_period_s=0.05)
    with EmbeddedServer() as server:
        server.start_destination(_config(fake_mysql, "d", retry=retry))
        instance = server.instance("d")
        with start_http_server(0, server=server) as exporter:
            _wait("retried failures", lambda: instance.parser.reconnects >= 2)
            down = _samples(exporter.url)
            fake_mysql.up()
            _wait("a heartbeat", lambda: instance.metrics().connected and instance.metrics().ack_lag_ms is not None)
            fake_mysql.insert("shop.t", {"id": 1})
            _wait("the change in the store", lambda: instance.metrics().delay_put_ms is not None)
            up = _samples(exporter.url)
    d = (("destination", "d"),)
    assert down[("canal_instance_connected", d)] == 0.0 and down[("canal_instance_running", d)] == 1.0
    assert down[("canal_instance_last_error_info", (("destination", "d"), ("error", "SourceUnreachableError")))] == 1
    assert ("canal_instance_ack_lag_seconds", d) not in down  # nothing read yet: no lag to tell
    assert up[("canal_instance_connected", d)] == 1.0
    assert up[("canal_instance_ack_lag_seconds", d)] >= 0 and ("canal_instance_delay_put_seconds", d) in up
    assert not any(name.startswith("canal_server_") for name, _ in up)  # no ZooKeeper: no session series


@pytest.mark.integration
def test_the_zookeeper_session_series(fake_mysql: FakeMysql, zookeeper: object) -> None:
    hosts = zookeeper.hosts  # type: ignore[attr-defined]
    with EmbeddedServer(zk_hosts=hosts, ha_delay_s=0.2) as server:
        server.start_destination(_config(fake_mysql, "d"))
        assert server.wait_serving("d", 20)
        with start_http_server(0, server=server) as exporter:
            samples = _samples(exporter.url)
    assert samples[("canal_server_zookeeper_connected", ())] == 1.0
    assert samples[("canal_instance_running", (("destination", "d"),))] == 1.0
