"""The Delta mirror's series (:mod:`canal.lake.metrics`), scraped over HTTP on 127.0.0.1: they follow what the batches
handed to the mirror did -- through ``apply`` and ``foreachBatch``'s ``__call__`` alike, and in the embedded
``run_batches`` process, whose mirror takes typed batches -- and a root's credentials never reach a label."""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("deltalake")
pytest.importorskip("prometheus_client")

from prometheus_client.parser import text_string_to_metric_families

from canal.config import InstanceConfig, MasterConfig, StoreConfig
from canal.instance import Instance
from canal.lake.forms.changes import entries_to_batch
from canal.lake.identity.applied import newest_position
from canal.lake.metrics import MirrorCollector, error_classes
from canal.lake.store.storage import redacted
from canal.metrics import start_http_server
from canal.position import EntryPosition
from canal.protocol import ColumnMeta, Entry, EntryType, EventType, Header, RowChange, RowData, TableSchema
from canal.spark import DeltaMirror, MirrorLineageError, run_batches
from canal.testing.fake import FakeMysql

T = TableSchema(
    "shop", "t", (ColumnMeta("id", mysql_type="int(11)", is_key=True), ColumnMeta("v", mysql_type="int(11)"))
)

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _batch(file: str, first_offset: int, rows: dict[int, int], when_ms: int, destination: str = "d") -> Any:
    """Upserts of ``rows`` at increasing offsets of binlog ``file`` from ``first_offset``, executed at ``when_ms``,
    as ``destination``'s changes."""
    entries = []
    for i, (key, value) in enumerate(sorted(rows.items())):
        header = Header(file, first_offset + 100 * i, 1, when_ms, "shop", "t", EventType.INSERT)
        entries.append(
            Entry(
                header,
                EntryType.ROWDATA,
                RowChange(EventType.INSERT, [RowData(T, after=(key, value))]),
                anchor=EntryPosition(file, 4),
            )
        )
    return entries_to_batch(entries, destination, 0)


def scrape(url: str) -> tuple[Samples, str]:
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    return samples, text


def test_the_series_follow_the_batches_each_counted_once(tmp_path: Path) -> None:
    mirror = DeltaMirror(tmp_path / "m", app_id="shop-app", background_folds=False)
    labels = (("app_id", "shop-app"), ("root", str(tmp_path / "m")))
    with start_http_server(0, collectors=[MirrorCollector(mirror)]) as exporter:
        assert exporter.collector is None  # only the mirror's series
        before, _ = scrape(exporter.url)
        now_ms = int(time.time() * 1000)
        mirror.apply(_batch("mysql-bin.000001", 1000, {1: 1, 2: 2}, now_ms - 9000), 0)
        mirror(_batch("mysql-bin.000002", 500, {1: 10}, now_ms - 2000), 1)  # __call__ applies through apply: once
        assert set(mirror.apply(_batch("mysql-bin.000002", 500, {1: 10}, now_ms - 2000), 1).tables.values()) == {
            "skipped"
        }  # a replay counts neither as a batch nor its rows
        with pytest.raises(MirrorLineageError):  # another destination's changes under the app id: refused
            mirror.apply(_batch("mysql-bin.000002", 900, {2: 20}, now_ms, destination="other"), 2)
        after, _ = scrape(exporter.url)
        scraped_by = time.time() + 0.001
    mirror.close()
    assert before[("canal_mirror_batches_total", labels)] == 0
    assert ("canal_mirror_applied_binlog_file_number", labels) not in before  # no position yet
    assert ("canal_mirror_delay_seconds", labels) not in before
    typed = error_classes()
    assert {"MirrorError", "MirrorLineageError", "MirrorFoldError", "MirrorStorageError"} <= set(typed)
    for error in typed:  # every typed stop has its series from the start: an alert on its increase sees the first
        assert before[("canal_mirror_stops_total", tuple(sorted((*labels, ("error", error)))))] == 0
    assert after[("canal_mirror_batches_total", labels)] == 2
    assert after[("canal_mirror_rows_total", labels)] == 3
    assert after[("canal_mirror_applied_binlog_file_number", labels)] == 2
    assert after[("canal_mirror_applied_binlog_offset_bytes", labels)] == 500
    assert 2.0 <= after[("canal_mirror_delay_seconds", labels)] <= scraped_by - (now_ms - 2000) / 1000
    assert after[("canal_mirror_stops_total", tuple(sorted((*labels, ("error", "MirrorLineageError")))))] == 1
    assert sum(v for (name, _), v in after.items() if name == "canal_mirror_stops_total") == 1
    assert after[("canal_mirror_heals_total", labels)] == 0
    assert after[("canal_mirror_fold_failures_total", labels)] == 0
    metrics = mirror.metrics()
    assert (metrics.batches, metrics.rows, metrics.applied_log_file, metrics.applied_log_offset) == (
        2,
        3,
        "mysql-bin.000002",
        500,
    )
    assert metrics.stops == {"MirrorLineageError": 1}


def test_a_roots_credentials_stay_out_of_its_labels(tmp_path: Path) -> None:
    assert redacted("s3://AKIAKEY:s3cr3t@bucket/mirror?sig=t0ken#x") == "s3://bucket/mirror"
    assert redacted("/data/mirror") == "/data/mirror" and redacted("gs://bucket/m") == "gs://bucket/m"
    mirror = DeltaMirror("s3://AKIAKEY:s3cr3t@bucket/mirror", storage_options={"AWS_SECRET_ACCESS_KEY": "s3cr3t"})
    with start_http_server(0, collectors=[MirrorCollector(lambda: [mirror])]) as exporter:
        samples, text = scrape(exporter.url)
    assert "s3cr3t" not in text and "AKIAKEY" not in text
    assert samples[("canal_mirror_batches_total", (("app_id", "pycanal-mirror"), ("root", "s3://bucket/mirror")))] == 0


def _workload(fake: FakeMysql) -> None:
    fake.execute("CREATE DATABASE db")
    fake.execute("CREATE TABLE db.t (id INT NOT NULL PRIMARY KEY, v INT)")
    for n in range(4):
        with fake.transaction() as tx:
            tx.insert_many("db.t", [{"id": n * 10 + i, "v": i} for i in range(10)])
            tx.update("db.t", {"id": n * 10, "v": 0}, {"id": n * 10, "v": 99})
            tx.delete("db.t", {"id": n * 10 + 1, "v": 1})
        fake.rotate()  # the newest change in another file than the first


def _run(fake: FakeMysql, fn: Any) -> None:
    master = MasterConfig(address=fake.address, journal_name="mysql-bin.000001", position=4)
    config = InstanceConfig(destination="d", master=master, filter_regex=r"db\..*", store=StoreConfig(buffer_size=64))
    end = fake.master_status()
    with Instance(config) as inst:
        deadline = time.monotonic() + 60
        run_batches(
            inst,
            None,
            fn,
            batch_size=7,
            timeout=0.2,
            until=lambda stats: stats.reached(end.journal_name, end.position) or time.monotonic() > deadline,
        )


def test_an_embedded_run_counts_its_typed_batches_as_their_change_rows(tmp_path: Path) -> None:
    with FakeMysql(name="mirror_metrics", mariadb=True) as fake:
        _workload(fake)
        rows: list[Any] = []
        with DeltaMirror(tmp_path / "rows") as by_rows:

            def change_rows(table: Any, batch_id: int) -> None:
                rows.append(table)
                by_rows.apply(table, batch_id)

            _run(fake, change_rows)  # not a DeltaMirror: change rows
        with DeltaMirror(tmp_path / "typed") as typed:
            _run(fake, typed)  # the mirror itself: typed batches
    newest = max((p for p in map(newest_position, rows) if p is not None), key=lambda p: (p[0], p[1]))
    expected = by_rows.metrics()
    got = typed.metrics()
    assert newest[0] == "mysql-bin.000004"
    assert (expected.applied_log_file, expected.applied_log_offset) == newest
    assert (got.applied_log_file, got.applied_log_offset) == newest
    assert got.rows == expected.rows == sum(t.num_rows for t in rows) == 2 + 4 * 12  # CREATE DATABASE, TABLE
    assert got.batches == expected.batches == len(rows)
    assert got.delay_ms is not None and got.delay_ms >= 0 and got.stops == {}
