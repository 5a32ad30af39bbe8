"""The Prometheus exporter: scraped over HTTP on 127.0.0.1, values match ``Instance.metrics()``."""

from __future__ import annotations

import itertools
import sys
import time
import urllib.request
from collections.abc import Iterator
from decimal import Decimal

import pytest
from prometheus_client.parser import text_string_to_metric_families

from canal.config import InstanceConfig, MasterConfig, StoreConfig
from canal.instance import Instance
from canal.metrics import BinlogHorizon, CanalCollector, MissingExtraError, start_http_server
from canal.server import EmbeddedServer
from canal.testing.fake import FakeMysql

_names = itertools.count()


@pytest.fixture
def fake() -> Iterator[FakeMysql]:
    fake = FakeMysql(name=f"metrics{next(_names)}", server_id=1)
    fake.execute("CREATE TABLE shop.orders (id INT PRIMARY KEY, amount DECIMAL(10,2))")
    for i in range(10):
        fake.insert("shop.orders", {"id": i, "amount": Decimal(i)})
    yield fake
    fake.unregister()


def config(fake: FakeMysql, destination: str = "example") -> InstanceConfig:
    return InstanceConfig(
        destination=destination,
        master=MasterConfig(address=fake.address, journal_name="mysql-bin.000001", position=4),
        store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=1024),
    )


def consume(inst: Instance, entries: int) -> int:
    """Get and ack until at least ``entries`` entries were handed out (a short get timeout bounds each wait); how
    many were (one more when a BEGIN takes the entry after it along)."""
    got = 0
    deadline = time.monotonic() + 20
    while got < entries:
        assert time.monotonic() < deadline
        msg = inst.get_without_ack(entries - got, timeout=0.05)
        if msg.id != -1:
            got += len(msg.entries)
            inst.ack(msg.id)
    return got


def scrape(url: str) -> dict[tuple[str, str], float]:
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    out: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, sample.labels.get("destination", ""))] = sample.value
    return out


def test_exporter_values_match_instance_metrics(fake: FakeMysql) -> None:
    with Instance(config(fake)) as inst:
        consume(inst, 12)
        held = inst.get_without_ack(3, timeout=1.0)  # outstanding: get sequence ahead of ack sequence
        assert len(held.entries) == 3
        with start_http_server(0, instances=inst) as exporter:
            assert exporter.host == "127.0.0.1"
            assert exporter.url == f"http://127.0.0.1:{exporter.port}/metrics"
            before = inst.metrics()
            samples = scrape(exporter.url)
            after = inst.metrics()
    assert before.get_sequence - before.ack_sequence == 3
    d = "example"
    exact = {
        "canal_instance_running": 1.0,
        "canal_instance_put_sequence": before.put_sequence,
        "canal_instance_get_sequence": before.get_sequence,
        "canal_instance_ack_sequence": before.ack_sequence,
        "canal_instance_store_entries": before.store_entries,
        "canal_instance_store_bytes": before.store_bytes,
        "canal_instance_reconnects_total": before.reconnects,
        "canal_instance_errors_total": before.errors,
        "canal_instance_stream_ended": 0.0,
    }
    for name, value in exact.items():
        assert samples[(name, d)] == value, name
    assert before.put_sequence == after.put_sequence  # nothing new arrived while scraping
    assert before.delay_get_ms is not None and before.delay_ack_ms is not None
    assert after.delay_get_ms is not None and after.delay_ack_ms is not None
    assert before.delay_get_ms / 1000 <= samples[("canal_instance_delay_get_seconds", d)] <= after.delay_get_ms / 1000
    assert before.delay_ack_ms / 1000 <= samples[("canal_instance_delay_ack_seconds", d)] <= after.delay_ack_ms / 1000
    rate = samples[("canal_instance_rows_per_second", d)]
    assert min(before.rows_per_s, after.rows_per_s) <= rate <= max(before.rows_per_s, after.rows_per_s)
    assert rate > 0


def test_exporter_over_an_embedded_server(fake: FakeMysql) -> None:
    with EmbeddedServer() as server:
        server.start_destination(config(fake, "one"))
        server.start_destination(config(fake, "two"))
        consumed = consume(server.instance("one"), 5)
        with start_http_server(0, server=server) as exporter:
            samples = scrape(exporter.url)
        metrics = server.metrics()
    assert samples[("canal_instance_ack_sequence", "one")] == metrics["one"].ack_sequence
    assert samples[("canal_instance_ack_sequence", "two")] == metrics["two"].ack_sequence
    assert metrics["one"].ack_sequence - metrics["two"].ack_sequence == consumed
    assert ("canal_instance_delay_ack_seconds", "two") not in samples  # nothing acked yet: no series
    assert samples[("canal_instance_running", "two")] == 1.0


def test_collector_without_prometheus_client_names_the_extra(fake: FakeMysql, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    with pytest.raises(MissingExtraError, match=r"pycanal\[prometheus\]"):
        CanalCollector(Instance(config(fake)))


def test_start_http_server_needs_one_source(fake: FakeMysql) -> None:
    with pytest.raises(TypeError, match="exactly one"):
        start_http_server(0)
    with pytest.raises(TypeError, match="exactly one"):
        start_http_server(0, instances=[], source=dict)


def test_the_binlog_horizon_compares_the_cursor_with_the_masters_oldest_file(fake: FakeMysql) -> None:
    with Instance(config(fake)) as inst:
        consume(inst, 12)
        with start_http_server(0, instances=inst) as exporter:
            assert exporter.collector is not None
            horizon = exporter.collector.horizon(inst)
            assert horizon.read() == ("mysql-bin.000001", "mysql-bin.000001")  # a scrape's background read, at once
            samples = scrape(exporter.url)
            assert samples[("canal_instance_cursor_binlog_file_number", "example")] == 1
            assert samples[("canal_instance_master_oldest_binlog_file_number", "example")] == 1
            fake.rotate()
            fake.rotate()
            fake.purge_to("mysql-bin.000003")  # the file the cursor is in is gone: a restart could not resume
            assert horizon.read() == ("mysql-bin.000003", "mysql-bin.000003")
            samples = scrape(exporter.url)
    assert samples[("canal_instance_cursor_binlog_file_number", "example")] == 1
    assert samples[("canal_instance_master_oldest_binlog_file_number", "example")] == 3
    assert samples[("canal_instance_master_newest_binlog_file_number", "example")] == 3


def test_a_master_that_cannot_be_asked_has_no_horizon_series(fake: FakeMysql, caplog: pytest.LogCaptureFixture) -> None:
    gone = InstanceConfig(
        destination="gone", master=MasterConfig(address="127.0.0.1:1", username="u", password="pa55word")
    )
    horizon = BinlogHorizon(gone, every_s=3600)
    with caplog.at_level("WARNING", logger="canal.metrics"):
        assert horizon.read() is None
    assert "cannot read the master's binlog files" in caplog.text and "pa55word" not in caplog.text
    assert horizon.files() is None  # and no second read started within every_s


def test_the_rows_rate_is_read_while_gets_add_to_it() -> None:
    # a scrape reads Instance.metrics() under no lock of the instance while its consumer's gets add rows: a get that
    # opened a second's bucket meanwhile failed the scrape (RuntimeError: OrderedDict mutated during iteration, an
    # HTTP 500: every series of the process missing from that scrape). Here a get adds right inside the read
    import threading
    from collections import OrderedDict
    from collections.abc import ItemsView

    from canal.instance_metrics import RateWindow

    window = RateWindow()
    window.add(5, 1e9)
    window.add(5, 1e9 + 1)
    adder = threading.Thread(target=window.add, args=(1, 1e9 + 2), daemon=True)

    class AddsWhileRead(OrderedDict[int, int]):
        def items(self) -> ItemsView[int, int]:
            def read() -> Iterator[tuple[int, int]]:
                them = iter(super(AddsWhileRead, self).items())
                yield next(them)
                if adder.ident is None:  # the first read only
                    adder.start()
                    adder.join(0.2)  # a get in another thread adds now (with the lock: it waits for the read)
                yield from them

            return read()  # type: ignore[return-value]

    window._buckets = AddsWhileRead(window._buckets)
    assert window.rate(1e9 + 1) == 5.0  # 10 rows over 2 seconds; the get's row came after the read
    adder.join(5)
    assert window.rate(1e9 + 2) == 11 / 3
