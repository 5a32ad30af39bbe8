"""The changes of each micro-batch of the ``canal`` source (:mod:`canal.spark.progress`), without Spark: the reader
runs here in-process against a FakeMysql, as Spark's runner process calls it. Each end offset carries its micro-batch's
change rows by type -- equal to the rows' own ``type`` column in the JSON form, and to the changes in the packed
form -- and a replay from the spool carries the same; a line is logged per micro-batch; ``metrics.port`` serves the
counts with the instance's series; :func:`~canal.spark.micro_batch_changes` reads them from a progress."""

from __future__ import annotations

import json
import logging
import socket
import sys
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("prometheus_client")

from prometheus_client.parser import text_string_to_metric_families

from canal.spark import micro_batch_changes, progress
from canal.spark.offsets import INITIAL_OFFSET, Offset, canonical
from canal.spark.progress import log_in_runner
from canal.spark.runner_gc import RUNNER_MODULE
from canal.spark.source import CanalStreamReader, SparkSourceError, close_sessions
from canal.testing.fake import FakeMysql
from canal.testing.services import free_port

WRITTEN = {"INSERT": 30, "UPDATE": 10, "DELETE": 5, "ALTER": 1}


@pytest.fixture
def fake(fake_mysql: FakeMysql) -> Iterator[FakeMysql]:
    fake_mysql.execute("CREATE TABLE shop.t (id INT PRIMARY KEY, v INT)")
    for first in range(0, 30, 3):
        with fake_mysql.transaction() as tx:
            tx.insert_many("shop.t", [{"id": i, "v": i} for i in range(first, first + 3)])
    for i in range(10):
        fake_mysql.update("shop.t", {"id": i, "v": i}, {"id": i, "v": -i})
    for i in range(20, 25):
        fake_mysql.delete("shop.t", {"id": i, "v": i})
    fake_mysql.execute("ALTER TABLE shop.t ADD COLUMN w INT", schema="shop")
    yield fake_mysql
    close_sessions()


def options(fake: FakeMysql, spool: Path, **extra: str) -> dict[str, str]:
    return {
        "destination": "pg",
        "master.address": fake.address,
        "master.journal.name": "mysql-bin.000001",
        "master.position": "4",
        "spool.dir": str(spool),
        "batch.size": "4",
        "max.entries": "9",
        "read.timeout": "0.5",
        "prefetch": "false",
        **extra,
    }


def read_all(reader: CanalStreamReader) -> list[tuple[Offset, list[Any], Offset]]:
    """Every micro-batch the reader has: (start, record batches, end)."""
    out = []
    start: Offset = dict(INITIAL_OFFSET)
    for _ in range(100):
        batches, end = reader.read(start)
        if canonical(end) == canonical(start):
            return out
        out.append((start, list(batches), end))
        start = end
    raise AssertionError("the reader never ran dry")


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_each_end_offset_carries_its_rows_by_type_and_the_reader_serves_them(
    fake: FakeMysql, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    reader = CanalStreamReader(options(fake, tmp_path / "spool", **{"metrics.port": str(port)}))
    with caplog.at_level(logging.INFO, logger="canal.spark.progress"):
        got = read_all(reader)
        samples = scrape(f"http://127.0.0.1:{port}/metrics")
    assert len(got) >= 5
    total: Counter[str] = Counter()
    for _start, batches, end in got:
        rows = Counter(row["type"] for batch in batches for row in batch.to_pylist())
        assert end["changes"] == dict(rows)  # what the user reads in the rows themselves
        total += rows
    assert total == Counter({**WRITTEN, "CREATE": 1})
    # a line per micro-batch, in the destination's logger
    lines = [r.getMessage() for r in caplog.records if "micro-batch" in r.getMessage()]
    assert len(lines) == len(got)
    first_start, _batches, first_end = got[1]
    n = sum(first_end["changes"].values())
    assert lines[1].startswith(f"[pg] micro-batch {first_end['batch']}: {n} changes (")
    assert (
        f"binlog {first_start['file']}:{first_start['offset']} .. {first_end['file']}:{first_end['offset']}"
        in (lines[1])
    )
    assert all(getattr(r, "destination", None) == "pg" for r in caplog.records if "micro-batch" in r.getMessage())
    # the reader's process serves the same counts, beside its instance's series
    for kind, rows_of in total.items():
        assert samples[("canal_source_changes_total", (("destination", "pg"), ("type", kind)))] == rows_of
    assert samples[("canal_source_micro_batches_total", (("destination", "pg"),))] == len(got)
    assert samples[("canal_instance_running", (("destination", "pg"),))] == 1.0
    assert samples[("canal_instance_cursor_binlog_file_number", (("destination", "pg"),))] == 1
    close_sessions()  # its exporter stops with the sessions
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)


def test_packed_micro_batches_count_their_changes_not_their_rows(fake: FakeMysql, tmp_path: Path) -> None:
    reader = CanalStreamReader(options(fake, tmp_path / "spool", images="packed", **{"max.entries": "1000"}))
    got = read_all(reader)
    packed_rows = sum(batch.num_rows for _s, batches, _e in got for batch in batches)
    counted = Counter[str]()
    for _start, _batches, end in got:
        counted.update(end["changes"])
    assert counted == Counter({**WRITTEN, "CREATE": 1})
    assert packed_rows < sum(counted.values()) / 5  # what Spark's numInputRows counts
    # a replay from the spool ends with the same offset, counts included
    again = CanalStreamReader(options(fake, tmp_path / "spool", images="packed", **{"max.entries": "1000"}))
    close_sessions()
    _batches, end = again.read(got[0][0])
    assert end == got[0][2]


def test_micro_batch_changes_reads_a_progress_and_skips_one_without_new_data() -> None:
    start = {"batch": 3, "file": "mysql-bin.000002", "offset": 400, "changes": {"INSERT": 9}}
    end = {"batch": 4, "file": "mysql-bin.000002", "offset": 900, "timestamp": 1_700_000_000_000, "changes": {}}
    end["changes"] = {"INSERT": 2, "DELETE": 1}
    progress = {
        "id": "q",
        "runId": "r",
        "batchId": 3,
        "timestamp": "2023-11-14T22:13:22.000Z",  # 2 s after the end's execute time
        "sources": [
            {"description": "kafka", "startOffset": "{}", "endOffset": '{"t": {"0": 5}}'},
            {"description": "canal", "startOffset": json.dumps(start), "endOffset": json.dumps(end)},
        ],
    }
    (read,) = micro_batch_changes(json.dumps(progress))
    assert (read.batch_id, read.changes, read.rows) == (3, {"INSERT": 2, "DELETE": 1}, 3)
    assert (read.start, read.end, read.lag_s) == ("mysql-bin.000002:400", "mysql-bin.000002:900", 2.0)
    idle = {**progress, "sources": [{"description": "canal", "startOffset": end, "endOffset": end}]}
    assert micro_batch_changes(idle) == []  # Spark's progress of a trigger without new data


def test_the_runners_log_handler_and_a_bad_level_or_taken_port(
    fake: FakeMysql, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress, "_LOG_HANDLER", None)  # as in a new runner process
    with pytest.raises(SparkSourceError, match=r"reader\.log\.level"):
        log_in_runner({"reader.log.level": "LOUD"})
    assert log_in_runner({"reader.log.level": "INFO"}) is None  # not Spark's runner process: left alone
    handler = log_in_runner({"reader.log.level": "INFO"}, running=RUNNER_MODULE)
    canal_logger = logging.getLogger("canal")
    try:
        assert isinstance(handler, logging.StreamHandler) and handler.stream is sys.stderr
        assert handler in canal_logger.handlers and canal_logger.level == logging.INFO
        assert log_in_runner({"reader.log.level": "INFO"}, running=RUNNER_MODULE) is None  # once
    finally:
        if handler is not None:
            canal_logger.removeHandler(handler)
        canal_logger.setLevel(logging.NOTSET)
        canal_logger.propagate = True
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        reader = CanalStreamReader(options(fake, tmp_path / "spool", **{"metrics.port": str(port)}))
        with pytest.raises(SparkSourceError, match=rf"metrics\.port = {port}"):
            reader.read(dict(INITIAL_OFFSET))
