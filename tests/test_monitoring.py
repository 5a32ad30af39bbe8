"""The Grafana dashboard and the Prometheus alert rules in ``monitoring/`` name only series the exporter serves, and
the rules pass ``promtool check rules`` and their unit tests (``promtool test rules``: Debian's ``prometheus``
package, which scripts/setup.sh installs).

The served names are scraped over HTTP from one exporter holding all three kinds of series, each with data: a real
instance on a FakeMysql (something handed out and acked, its master's binlog files read), a Delta mirror that applied
a batch, and the Spark source's counters of a micro-batch handed over. The metric names of a PromQL expression are
read by a small lexer: identifiers that are not functions, aggregations, keywords or label lists.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("prometheus_client")
pytest.importorskip("deltalake")
pytest.importorskip("yaml")

import yaml
from prometheus_client.parser import text_string_to_metric_families

from canal.config import InstanceConfig, MasterConfig, RetryConfig, StoreConfig
from canal.lake.metrics import MirrorCollector
from canal.metrics import start_http_server
from canal.server import EmbeddedServer
from canal.spark import DeltaMirror
from canal.spark.offsets import INITIAL_OFFSET
from canal.spark.progress import SourceCollector, handed
from canal.spark.sessions import Prepared
from canal.testing.fake import FakeMysql
from canal.testing.plugin import ZooKeeperChroot

MONITORING = Path(__file__).resolve().parent.parent / "monitoring"
DASHBOARD = MONITORING / "pycanal-dashboard.json"
RULES = MONITORING / "pycanal-alerts.yml"
RULE_TESTS = MONITORING / "pycanal-alerts.test.yml"

_TOKEN = re.compile(
    r"\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'|`[^`]*`"  # strings
    r"|\{[^}]*\}|\[[^\]]*\]"  # label matchers, ranges (with Grafana's $variables inside)
    r"|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?[a-zA-Z]*"  # numbers, durations
    r"|[A-Za-z_:][A-Za-z0-9_:]*"  # identifiers
    r"|\S"
)
_LABEL_LISTS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
_AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk"}
_KEYWORDS = _LABEL_LISTS | _AGGREGATIONS | {"quantile", "and", "or", "unless", "bool", "offset", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects."""
    tokens = _TOKEN.findall(expr)
    names: set[str] = set()
    skip_list = False
    for i, token in enumerate(tokens):
        following = tokens[i + 1] if i + 1 < len(tokens) else ""
        if skip_list:
            skip_list = token != ")"
            continue
        if token in _LABEL_LISTS:
            skip_list = following == "("
            continue
        if not re.fullmatch(r"[A-Za-z_:][A-Za-z0-9_:]*", token) or token in _KEYWORDS or following == "(":
            continue
        names.add(token)
    return names


def test_the_lexer_reads_metric_names_only() -> None:
    assert metric_names(
        'sum by (destination, type) (rate(canal_source_changes_total{destination=~"$destination"}[$__rate_interval]))'
    ) == {"canal_source_changes_total"}
    assert metric_names(
        "canal_a <= on (destination) canal_b and on (destination) canal_a < on(destination) group_left (x) canal_c"
    ) == {"canal_a", "canal_b", "canal_c"}
    assert metric_names('increase(x_total[10m]) > 1e3 or y offset 5m unless z{a="b c"} > bool 0') == {
        "x_total",
        "y",
        "z",
    }


def dashboard_exprs() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] if p["type"] != "row" for t in p["targets"]]
    for variable in dashboard["templating"]["list"]:
        query = variable.get("query")
        text = query.get("query") if isinstance(query, dict) else query
        found = re.fullmatch(r"label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*,\s*\w+\s*\)", text or "")
        if variable["type"] == "query":
            assert found, text
            exprs.append(found.group(1))
    return exprs


def rule_exprs() -> list[str]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule["expr"] for group in groups for rule in group["rules"]]


def served_names(tmp_path: Path, zookeeper: ZooKeeperChroot) -> set[str]:
    """The names of the samples one exporter serves with each kind of series holding data: a server under
    ZooKeeper whose destination failed a connection once and then handed out and acked changes, a mirror that
    applied a batch, the Spark source's counters."""
    with FakeMysql(name="monitoring") as fake:
        fake.execute("CREATE TABLE shop.t (id INT PRIMARY KEY)")
        for i in range(5):
            fake.insert("shop.t", {"id": i})
        fake.refuse(errno=2003)  # a failure retried: its class is the last error's
        master = MasterConfig(address=fake.address, journal_name="mysql-bin.000001", position=4)
        config = InstanceConfig(
            destination="mon",
            master=master,
            store=StoreConfig(batch_mode="ITEMSIZE"),
            retry=RetryConfig(initial_backoff_s=0.01, heartbeat_period_s=0.05),
        )
        server = EmbeddedServer(zk_hosts=zookeeper.hosts, ha_delay_s=0.2)
        with server, DeltaMirror(tmp_path / "mirror") as mirror:
            server.start_destination(config)
            assert server.wait_serving("mon", 20)
            inst = server.instance("mon")
            msg = inst.get_without_ack(100, timeout=2.0, linger=0.05)  # what came, once the stream went quiet
            inst.ack(msg.id)
            rows = [
                {"seq": 1, "schema": "s", "table": "t", "type": "INSERT", "is_ddl": False, "sql": None,
                 "keys": '{"id": "1"}', "old_keys": None, "after": '{"id": "1"}',
                 "columns": '[["id", "int(11)", true]]', "log_file": "mysql-bin.000001", "log_offset": 400,
                 "execute_time": datetime.now(UTC), "destination": "mon"}
            ]  # fmt: skip
            import pyarrow as pa

            mirror.apply(pa.Table.from_pylist(rows), 1)
            end = {**INITIAL_OFFSET, "batch": 1, "file": "mysql-bin.000001", "offset": 4, "timestamp": 1,
                   "changes": {"INSERT": 5}}  # fmt: skip
            handed("mon", dict(INITIAL_OFFSET), Prepared([], end))
            collectors = [MirrorCollector(mirror), SourceCollector()]
            with start_http_server(0, server=server, collectors=collectors) as exporter:
                assert exporter.collector is not None
                exporter.collector.horizon(inst).read()
                with urllib.request.urlopen(exporter.url, timeout=10) as response:
                    text = response.read().decode()
    return {sample.name for family in text_string_to_metric_families(text) for sample in family.samples}


PROMETHEUS_SERIES = {"up"}
"""Series Prometheus makes itself for every scrape target."""


@pytest.mark.integration
def test_every_series_the_dashboard_and_the_rules_name_is_served(tmp_path: Path, zookeeper: ZooKeeperChroot) -> None:
    served = served_names(tmp_path, zookeeper) | PROMETHEUS_SERIES
    named = {name for expr in dashboard_exprs() + rule_exprs() for name in metric_names(expr)}
    assert len(named) >= 20  # the lexer found them
    assert named <= served, sorted(named - served)
    # what the issue asks them to cover
    rules = {expr: metric_names(expr) for expr in rule_exprs()}
    for wanted in (
        "canal_instance_running",
        "canal_instance_connected",
        "canal_instance_ack_lag_seconds",
        "canal_instance_delay_put_seconds",
        "canal_server_zookeeper_connected",
        "canal_mirror_info",
        "up",
        "canal_instance_errors_total",
        "canal_instance_master_oldest_binlog_file_number",
        "canal_mirror_delay_seconds",
        "canal_mirror_stops_total",
        "canal_mirror_fold_failures_total",
        "canal_ha_serving",
    ):
        assert any(wanted in names for names in rules.values()), wanted


def test_the_dashboard_imports_into_grafana_as_a_dashboard() -> None:
    dashboard: dict[str, Any] = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"] and dashboard["schemaVersion"] >= 36
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
    assert len({p["title"] for p in panels}) == len(panels)
    for panel in panels:
        assert panel["datasource"]["uid"] == "${datasource}" and panel["targets"]
        assert all(t["datasource"]["uid"] == "${datasource}" for t in panel["targets"])
        assert panel["gridPos"]["x"] >= 0 and panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is missing: bash scripts/setup.sh installs Debian's prometheus package")
    return subprocess.run([promtool, *args], capture_output=True, text=True, timeout=120, cwd=MONITORING)


def test_promtool_checks_the_rules_and_runs_their_unit_tests() -> None:
    checked = _promtool("check", "rules", RULES.name)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 14 rules found" in checked.stdout
    tested = _promtool("test", "rules", RULE_TESTS.name)
    assert tested.returncode == 0, tested.stdout + tested.stderr
