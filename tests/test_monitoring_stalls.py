"""The shipped alert rules fire on the stalls that matter, evaluated by ``promtool test rules`` on the series the
exporter served during each stall (scraped over HTTP, labelled as Prometheus labels a scrape).

Each stall is made real -- a master that cannot be reached, a consumer that stopped acking while the source writes,
a mirror that applies nothing while its capture reads on, ZooKeeper down (the destinations' series vanish while the
process answers) -- and scraped once. A stall changes nothing but time, so the scrape's values stand for the
minutes that follow, the "now minus ..." gauges growing a minute a minute; promtool then says which alerts fire.
A caught-up destination of an idle source is the control: nothing fires. Before, the rules stayed silent for every
stall here (``CanalDestinationNotRunning`` needs running=0; ``CanalCaptureDelayHigh`` needed rows to flow).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

pytest.importorskip("prometheus_client")
pytest.importorskip("deltalake")

from prometheus_client.parser import text_string_to_metric_families

from canal.config import InstanceConfig, MasterConfig, RetryConfig, SnapshotConfig, StoreConfig
from canal.instance import Instance
from canal.lake import DeltaMirror
from canal.lake.metrics import MirrorCollector
from canal.metrics import start_http_server
from canal.server import EmbeddedServer
from canal.spark import run_batches
from canal.testing.fake import FakeMysql
from canal.testing.plugin import MariaDBDatabase, ZooKeeperChroot
from canal.testing.services import ZooKeeperServer

RULES = Path(__file__).resolve().parent.parent / "monitoring" / "pycanal-alerts.yml"
GROWING = frozenset(
    {
        "canal_instance_ack_lag_seconds",
        "canal_instance_delay_get_seconds",
        "canal_instance_delay_ack_seconds",
        "canal_instance_delay_put_seconds",
        "canal_mirror_delay_seconds",
    }
)
"""Gauges of "now minus" a time that a stall holds still: they grow by 60 each minute."""
RATES = frozenset({"canal_instance_rows_per_second"})
"""Rates over the last minute: a stall holds them at 0."""
ACK_LAG = "canal_instance_ack_lag_seconds"
MINUTES = 20
EVAL_AT = "12m"


@attrs.frozen
class Sample:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float


def scrape(url: str, instance: str) -> list[Sample]:
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    out = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.endswith("_created"):  # prometheus-client's creation times: no rule reads them
                continue
            labels = {**s.labels, "job": "pycanal", "instance": instance}  # what Prometheus adds to a scrape
            out.append(Sample(s.name, tuple(sorted(labels.items())), s.value))
    return out


def _series(sample: Sample, *, holds_lag: bool) -> dict[str, str]:
    labels = ",".join(f'{k}="{v}"' for k, v in sample.labels)
    value = f"{sample.value:g}"
    if sample.name in GROWING and (sample.name != ACK_LAG or not holds_lag):
        values = f"{value}+60x{MINUTES}"
    elif sample.name in RATES:
        values = f"{value} 0x{MINUTES - 1}"  # nothing handed out from the next minute on
    else:
        values = f"{value}x{MINUTES}"
    return {"series": f"{sample.name}{{{labels}}}", "values": values}


def promtool_case(samples: list[Sample], firing: set[tuple[str, str]], *, holds_lag: bool = False) -> dict[str, Any]:
    """A promtool test: the scrape held for ``MINUTES`` minutes, and at ``EVAL_AT`` exactly the alerts ``firing``
    (alert name, destination) fire. ``holds_lag``: the acked lag is refreshed (the master's heartbeats reach a
    caught-up destination), so it stands still."""
    expected = [
        {"labels": f'{{alertname="{name}"' + (f',destination="{dest}"}}' if dest else "}"), "value": 1}
        for name, dest in sorted(firing)
    ]
    return {
        "interval": "1m",
        "input_series": [_series(s, holds_lag=holds_lag) for s in samples],
        "promql_expr_test": [
            {
                "expr": 'count by (alertname, destination) (ALERTS{alertstate="firing"})',
                "eval_time": EVAL_AT,
                "exp_samples": expected,
            }
        ],
    }


def run_promtool(tmp_path: Path, cases: dict[str, dict[str, Any]]) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is missing: bash scripts/setup.sh installs Debian's prometheus package")
    for name, case in cases.items():
        path = tmp_path / f"{name}.test.yml"
        # YAML is a superset of JSON
        path.write_text(json.dumps({"rule_files": [str(RULES)], "evaluation_interval": "1m", "tests": [case]}))
        done = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{name}:\n{done.stdout}{done.stderr}"


def _wait(what: str, check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


def _drain(instance: Instance) -> None:
    """Get and ack until the store is empty and the parser idles at the end of the binlog."""
    while instance.get(1000, timeout=0.2, linger=0.02).id != -1:
        pass


@pytest.fixture
def fake(fake_mysql: FakeMysql) -> Iterator[FakeMysql]:
    fake_mysql.execute("CREATE TABLE shop.t (id INT PRIMARY KEY, v INT)")
    fake_mysql.insert("shop.t", {"id": 0, "v": 0})
    yield fake_mysql


def _config(fake: FakeMysql, destination: str) -> InstanceConfig:
    master = MasterConfig(address=fake.address, journal_name="mysql-bin.000001", position=4)
    # heartbeats every 0.05 s; failures retried at once
    retry = RetryConfig(heartbeat_period_s=0.05, initial_backoff_s=0.01, max_backoff_s=0.05)
    return InstanceConfig(destination=destination, master=master, retry=retry, store=StoreConfig(batch_mode="ITEMSIZE"))


def test_the_rules_fire_on_the_stalls_that_matter(fake: FakeMysql, tmp_path: Path) -> None:
    cases: dict[str, dict[str, Any]] = {}
    fake.set_clock(time.time())
    with Instance(_config(fake, "shop")) as instance, start_http_server(0, instances=instance) as exporter:
        # control: caught up with an idle source, the master's heartbeats keep the acked lag small
        _drain(instance)
        _wait("a heartbeat", lambda: (instance.metrics().ack_lag_ms or 10**9) < 1000)
        cases["idle"] = promtool_case(scrape(exporter.url, "p:1"), set(), holds_lag=True)
        # the consumer stops acking while the source writes
        fake.set_clock(time.time())
        fake.insert("shop.t", {"id": 1, "v": 1})
        _wait(
            "the change in the store", lambda: instance.store.stats().put_sequence > instance.store.stats().ack_sequence
        )
        cases["not acking"] = promtool_case(scrape(exporter.url, "p:1"), {("CanalCaptureLagHigh", "shop")})
        _drain(instance)
        # the master cannot be reached: the destination runs and retries
        fake.down()
        _wait("retried failures", lambda: instance.metrics().state == "connecting" and instance.parser.reconnects >= 2)
        samples = scrape(exporter.url, "p:1")
        cases["master unreachable"] = promtool_case(
            samples, {("CanalMasterUnreachable", "shop"), ("CanalCaptureLagHigh", "shop")}
        )
        fake.up()
    assert any(s.name == "canal_instance_last_error_info" and ("error", "SourceUnreachableError") in s.labels
               for s in samples)  # fmt: skip
    run_promtool(tmp_path, cases)


def test_the_rule_on_a_mirror_that_applies_nothing(fake: FakeMysql, tmp_path: Path) -> None:
    fake.set_clock(time.time() - 1200)  # the mirror's newest change: executed 20 minutes ago
    fake.insert("shop.t", {"id": 1, "v": 1})
    end = fake.master_status()
    with (
        Instance(_config(fake, "shop")) as instance,
        DeltaMirror(tmp_path / "mirror", app_id="shop") as mirror,
        start_http_server(0, instances=instance, collectors=[MirrorCollector(mirror)]) as exporter,
    ):
        run_batches(instance, None, mirror, until=lambda s: s.reached(end.journal_name, end.position))
        # the capture reads on, the mirror applies nothing more
        fake.set_clock(time.time())
        fake.insert("shop.t", {"id": 2, "v": 2})
        _wait("the change in the store", lambda: (instance.metrics().delay_put_ms or 10**9) < 60_000)
        samples = scrape(exporter.url, "p:1")
    assert any(s.name == "canal_mirror_info" and ("destination", "shop") in s.labels for s in samples)
    cases = {"mirror": promtool_case(samples, {("CanalMirrorBehindCapture", "shop"), ("CanalCaptureLagHigh", "shop")})}
    run_promtool(tmp_path, cases)


@pytest.mark.integration
def test_the_rules_on_zookeeper_down(fake: FakeMysql, tmp_path: Path) -> None:
    with (
        ZooKeeperServer() as zk,
        EmbeddedServer(zk_hosts=zk.hosts, zk_timeout_s=4.0, ha_delay_s=0.2, stop_timeout_s=1.0) as server,
    ):
        server.start_destination(_config(fake, "shop"))
        assert server.wait_serving("shop", 20)
        with start_http_server(0, server=server) as exporter:
            serving = scrape(exporter.url, "p:1")
            zk.kill()
            _wait("the session to be suspended", lambda: server.zookeeper_connected is False)
            down = scrape(exporter.url, "p:1")
    assert any(s.name == "canal_instance_running" for s in serving)
    assert not any(s.name.startswith("canal_instance_") for s in down)  # the destination's series vanished
    assert [s.value for s in down if s.name == "canal_server_zookeeper_connected"] == [0.0]
    # (neither alert has a destination: a process's, and absent()'s)
    firing = {("CanalZooKeeperUnreachable", ""), ("CanalNothingCaptured", "")}
    run_promtool(tmp_path, {"zookeeper": promtool_case(down, firing)})


@pytest.mark.integration
def test_the_rule_on_a_destination_held_and_never_served(
    fake: FakeMysql, mariadb: MariaDBDatabase, zookeeper: ZooKeeperChroot, tmp_path: Path
) -> None:
    # a takeover whose instance cannot start -- here its master hangs (SIGSTOPped: a network black hole) while the
    # initial snapshot reads the catalog: the process holds the running node through each attempt, so the
    # destination is "owned", and it has no instance series for the other rules to read. Before, every rule stayed
    # silent (CanalDestinationWithoutOwner read canal_ha_owned, 1 here)
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    hung = attrs.evolve(
        _config(fake, "hung"),
        master=attrs.evolve(mariadb.master(), journal_name=None, position=None),  # no start: the snapshot is due
        filter_regex=rf"{mariadb.database}\.t",
        snapshot=SnapshotConfig(mode="initial"),
        retry=RetryConfig(connect_timeout_s=30.0),
    )
    fake.set_clock(time.time())
    with EmbeddedServer(zk_hosts=zookeeper.hosts, address="p:1", ha_delay_s=0.2) as server:
        server.start_destination(_config(fake, "shop"))  # the control: a healthy one beside it, caught up
        assert server.wait_serving("shop", 20)
        shop = server.instance("shop")
        _drain(shop)
        _wait("a heartbeat", lambda: (shop.metrics().ack_lag_ms or 10**9) < 1000)
        mariadb.server.pause()
        try:
            server.start_destination(hung)
            _wait("the takeover to hang", lambda: server.balance_state().owned.get("hung") is True)
            with start_http_server(0, server=server) as exporter:
                samples = scrape(exporter.url, "p:1")
            assert "hung" not in server.balance_state().serving
        finally:
            mariadb.server.resume()
    values = {(s.name, dict(s.labels).get("destination")): s.value for s in samples}
    assert (values[("canal_ha_owned", "hung")], values[("canal_ha_serving", "hung")]) == (1.0, 0.0)
    assert ("canal_instance_running", "hung") not in values
    assert values[("canal_ha_serving", "shop")] == 1.0
    firing = {("CanalDestinationWithoutOwner", "hung")}
    run_promtool(tmp_path, {"held": promtool_case(samples, firing, holds_lag=True)})
