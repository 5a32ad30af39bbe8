"""One canal conf directory started by canal and by pycanal: both deliver the same entries.

A ``canal.properties`` and a ``shop/instance.properties`` with the keys a deployment sets: the master, a filter and a
black filter, a field filter, a start position (file, offset and time), the TSDB, memory store settings, placeholders
(``${...}``), and keys pycanal reports as unread. canal 1.1.7 starts it from the directory (``ConfDir`` in
``peers/canal``: canal reads a conf directory through spring XMLs that only its release tarball ships -- Maven Central
serves them for no canal version, nor the 1.1.7 deployer --, so the harness maps canal's documented keys onto the
CanalParameter and parser settings those files set, and canal's classes read the values); pycanal starts it with
``EmbeddedServer.from_conf_dir``. The entries are compared as in ``tests/test_peers_canal_mariadb.py``
(:mod:`canal_differences`).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest
from canal_differences import compare
from canal_form import from_canal, from_pycanal
from canal_side_by_side import MARKS, canal_key, our_key, through_second_mark
from peer_harness import CanalPeer, skip_reason

from canal.client import ClientIdentity
from canal.protocol import EMPTY_MESSAGE_ID, Entry
from canal.server import EmbeddedServer
from canal.testing.plugin import MariaDBDatabase

pytestmark = [pytest.mark.integration, pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))]

DEST = "shop"


def write_conf(root: Path, mariadb: MariaDBDatabase, start: tuple[str, int]) -> Path:
    conf = root / "conf"
    (conf / DEST).mkdir(parents=True)
    db = mariadb.database
    (conf / "canal.properties").write_text(
        "canal.destinations = shop\n"
        f"canal.conf.dir = {conf}\n"
        "canal.auto.scan = false\n"
        "canal.instance.global.spring.xml = classpath:spring/file-instance.xml\n"
        "canal.instance.memory.buffer.size = 4096\n"
        "canal.instance.memory.batch.mode = MEMSIZE\n"
        "canal.instance.memory.rawEntry = true\n"
        "canal.instance.transaction.size = 1024\n"
        "canal.instance.parser.parallel = true\n"
        "canal.instance.tsdb.enable = true\n"
        "canal.mq.topic = shop_topic\n"
    )
    (conf / DEST / "instance.properties").write_text(
        f"canal.instance.master.address = {mariadb.address}\n"
        f"canal.instance.dbUsername = {mariadb.user}\n"
        f"canal.instance.dbPassword = ${{SHOP_PASSWORD:{mariadb.password}}}\n"
        f"canal.instance.master.journal.name = {start[0]}\n"
        f"canal.instance.master.position = {start[1]}\n"
        f"canal.instance.master.timestamp = {int(time.time() * 1000)}\n"
        "canal.instance.mysql.slaveId = 4321\n"
        # captured: the tables whose name starts with keep, and the markers; left out: one of them
        f"canal.instance.filter.regex = {db}\\\\.keep.*,{MARKS}\\\\.m_conf\n"
        f"canal.instance.filter.black.regex = {db}\\\\.keep_out\n"
        f"canal.instance.filter.field = {db}.keep1:id/v\n"
        # read by canal, reported as unread by pycanal (its debug log): nothing an entry holds depends on them
        "canal.instance.parser.parallelThreadSize = 2\n"
        "canal.instance.connectionCharset = UTF-8\n"
    )
    return conf


def test_one_conf_directory_started_by_canal_and_by_pycanal(
    mariadb: MariaDBDatabase, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = mariadb.database
    mariadb.execute(f"CREATE DATABASE IF NOT EXISTS {MARKS}")
    mariadb.execute(f"CREATE TABLE IF NOT EXISTS {MARKS}.m_conf (id INT PRIMARY KEY)")
    for table in ("keep1", "keep2", "keep_out", "other"):
        mariadb.execute(f"CREATE TABLE `{db}`.{table} (id INT PRIMARY KEY, v VARCHAR(20), d DECIMAL(10,2))")
    journal, position = mariadb.execute("SHOW MASTER STATUS")[0][:2]
    conf = write_conf(tmp_path, mariadb, (str(journal), int(position)))
    mark = int(time.time() * 1000) % 1_000_000_000

    with CanalPeer(log_dir=tmp_path) as canal:
        canal.command({"cmd": "start_conf", "conf_dir": str(conf), "destination": DEST, "timeout_ms": 100})
        mariadb.execute(f"INSERT INTO {MARKS}.m_conf VALUES ({mark})")
        canal.wait_for(lambda line: line["kind"] == "entry" and line["header"]["tableName"] == "m_conf", 60, "mark")
        for table in ("keep1", "keep2", "keep_out", "other"):
            mariadb.execute(f"INSERT INTO `{db}`.{table} VALUES (1, 'é{table}', 1.50), (2, NULL, -0.25)")
            mariadb.execute(f"UPDATE `{db}`.{table} SET v = 'x' WHERE id = 2")
        mariadb.execute(f"ALTER TABLE `{db}`.keep2 ADD COLUMN n INT FIRST")
        mariadb.execute(f"INSERT INTO `{db}`.keep2 VALUES (7, 3, 'y', 0.00)")
        mariadb.execute(f"DELETE FROM `{db}`.keep1 WHERE id = 1")
        mariadb.execute(f"INSERT INTO {MARKS}.m_conf VALUES ({mark + 1})")

        def marks(lines: list[dict[str, Any]]) -> int:
            return sum(1 for e in lines if (e["header"]["tableName"], e["header"]["eventType"]) == ("m_conf", "INSERT"))

        canal.wait_for(
            lambda line: line["kind"] == "ack" and marks(canal.select("entry")) >= 2, 60, "canal's second mark"
        )
        canal_entries = canal.select("entry")

    caplog.set_level(logging.DEBUG, logger="canal.config")
    server = EmbeddedServer.from_conf_dir(conf)
    server.start()
    ours: list[Entry] = []
    try:
        client = ClientIdentity(DEST, 1001)
        server.subscribe(client)
        deadline = time.monotonic() + 60
        while sum(1 for e in ours if e.header.table == "m_conf" and list(e.iter_rows())) < 2:
            assert time.monotonic() < deadline, "pycanal: no second mark"
            msg = server.get_without_ack(client, 100, timeout=0.2)
            if msg.id != EMPTY_MESSAGE_ID:
                ours.extend(msg.entries)
                server.ack(client, msg.id)
        topic = server.instance(DEST).config.mq.topic
    finally:
        server.stop()

    canal_forms = [from_canal(line) for line in through_second_mark(canal_key, canal_entries, "m_conf")]
    our_forms = [from_pycanal(e) for e in through_second_mark(our_key, ours, "m_conf")]
    result = compare(canal_forms, our_forms)
    assert not result.unexplained, result.report()
    # the same tables, the filter's and the black filter's, from the same start
    tables = {f["tableName"] for f in canal_forms if f["entryType"] == "ROWDATA" and f.get("rows")}
    assert tables == {f["tableName"] for f in our_forms if f.get("rows")} == {"keep1", "keep2", "m_conf"}
    keep1 = [f for f in our_forms if f["tableName"] == "keep1" and f.get("rows")]
    assert all([c["name"] for c in r["after"] or r["before"]] == ["id", "v"] for f in keep1 for r in f["rows"])
    assert min((f["logfileName"], f["logfileOffset"]) for f in our_forms) >= (str(journal), int(position))
    unread = caplog.text
    for key in (
        "canal.instance.parser.parallelThreadSize",
        "canal.instance.parser.parallel",
        "canal.instance.memory.rawEntry",
    ):
        assert f"key {key} is not used by pycanal" in unread, key
    # pycanal reads canal's MQ keys (its MQ mode, MqConfig): the topic is not reported as unread
    assert "key canal.mq.topic is not used" not in unread
    assert topic == "shop_topic"
