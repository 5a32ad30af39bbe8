"""What an operator met with the command line, against a real MariaDB and ZooKeeper address:

* ``canal position set --file`` accepted a file the server does not have (and an offset past a file's end), and the
  start that followed called it "purged" or "the configured start";
* ``canal snapshot --tables db.a`` printed rows of other tables changed during the copy;
* every command printed the PREFERRED-TLS warning;
* the output masked every occurrence of the default password "canal" (``user '***'``);
* ``canal position show --zk`` waited 10.6 s to fail, with no way to say less.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from canal.cli import main
from canal.parse.mysql import connect
from canal.testing.plugin import MariaDBDatabase
from canal.testing.services.process import free_port

pytestmark = pytest.mark.integration


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def _source(mariadb: MariaDBDatabase) -> tuple[str, ...]:
    return ("--address", mariadb.address, "--user", mariadb.user, "--password", mariadb.password)


def test_position_set_refuses_a_position_the_server_does_not_have(
    mariadb: MariaDBDatabase, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    meta = str(tmp_path / "meta")
    file, size = mariadb.server.execute("SHOW MASTER STATUS")[0][:2]
    newer = f"mysql-bin.{int(file.rsplit('.', 1)[1]) + 5:06d}"
    for where, says in (
        (("--file", newer), f"{newer} is newer than its newest binlog file, {file}"),
        (("--file", file, "--offset", str(size + 1000)), f"offset {size + 1000} is past the end of {file}"),
        (("--file", "other-bin.000001"), "it has no other-bin.000001"),
        (("--json", json.dumps({"postion": {"journalName": newer, "position": 4}})), f"{newer} is newer"),
    ):
        code, out, err = run(capsys, "position", "set", "--meta-dir", meta, *where, *_source(mariadb))
        assert code == 2 and out == [] and says in err, err
        assert run(capsys, "position", "show", "--meta-dir", meta)[0] == 1  # nothing was written
    # without a source it cannot tell: it says so, and writes the position
    code, out, err = run(capsys, "position", "set", "--meta-dir", meta, "--file", newer)
    assert code == 0 and "not checked against the server" in err
    # the start that follows says what is wrong with it: never on the server, not purged
    code, out, err = run(capsys, "tail", "--meta-dir", meta, *_source(mariadb), "--timeout", "10")
    assert code == 2 and f"binlog position {newer}:4 was never on {mariadb.address}" in err, err
    assert "newer than its newest binlog file" in err and "is no longer on" not in err
    # an offset past the end, configured: the error names it (it said "the configured start" only)
    code, out, err = run(capsys, "tail", *_source(mariadb), "--from", f"{file}:{size + 1000}", "--timeout", "10")
    assert code == 2, err
    assert f"binlog position {file}:{size + 1000} (the configured start) was never on" in err
    assert f"offset {size + 1000} is past the end of {file} ({size} bytes)" in err


def test_snapshot_of_some_tables_prints_the_changes_of_those_tables_only(
    mariadb: MariaDBDatabase, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = mariadb.database
    mariadb.execute("CREATE TABLE a (id INT PRIMARY KEY, v INT)")
    mariadb.execute("CREATE TABLE b (id INT PRIMARY KEY, v INT)")
    mariadb.execute("INSERT INTO a SELECT seq, 0 FROM seq_1_to_60")
    done = threading.Event()

    def write() -> None:  # changes to both tables all through the copy
        n = 0
        with mariadb.connect() as conn, conn.cursor() as cur:
            while not done.is_set():
                n += 1
                cur.execute("INSERT INTO b VALUES (%s, %s)", (n, n))
                cur.execute("UPDATE a SET v = %s WHERE id = 1", (n,))
                time.sleep(0.01)  # a workload's pace, not a synchronisation

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        code, out, err = run(
            capsys, "snapshot", *_source(mariadb), "--tables", f"{db}.a", "--json", "--chunk-rows", "10",
            "--max-rows-per-s", "60",
        )  # fmt: skip
    finally:
        done.set()
        writer.join(10)
    assert code == 0, err
    rows = [json.loads(line) for line in out]
    assert {r["table"] for r in rows} == {"a"}, {r["table"] for r in rows}
    # every row of a, copied or -- a row changed in its chunk's window -- by its change (DBLog's watermarks)
    assert {r["after"]["id"] for r in rows} == set(range(1, 61))
    assert any(r["type"] == "UPDATE" for r in rows)  # a's own changes during the copy are there
    # a table the destination's filter does not capture is refused, before anything runs
    props = tmp_path / "instance.properties"
    props.write_text(
        f"canal.instance.master.address = {mariadb.address}\ncanal.instance.dbUsername = {mariadb.user}\n"
        f"canal.instance.filter.regex = {db}\\.b\n"
    )
    code, out, err = run(capsys, "snapshot", "--properties", str(props), "--password", mariadb.password,
                         "--tables", f"{db}.a")  # fmt: skip
    assert code == 2 and out == [] and f"--tables {db}.a: the destination's filter does not capture it" in err, err


def test_no_tls_warning_on_a_short_command_and_no_text_masking(
    mariadb: MariaDBDatabase, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    outputs = []
    for argv in (("check", *_source(mariadb)), ("tail", *_source(mariadb), "--timeout", "0.5")):
        monkeypatch.setattr(connect, "_plain_noted", set())  # (noted once per server and process)
        code, out, err = run(capsys, *argv)
        assert code == 0 and "offers no TLS" not in err, err
        outputs.append(out)
    assert any(line.startswith("OK   tls: not encrypted") for line in outputs[0])  # check's own line says it
    monkeypatch.setattr(connect, "_plain_noted", set())
    code, out, err = run(capsys, "-v", "tail", *_source(mariadb), "--timeout", "0.5")
    assert code == 0 and err.count("offers no TLS") == 1  # with -v: once
    # canal's default password is "canal": the user's name, and the word, stay as they are
    port = free_port()
    code, out, err = run(capsys, "tail", "--address", f"127.0.0.1:{port}", "--user", "canal", "--password", "canal")
    assert code == 2 and f"MySQL server 127.0.0.1:{port} could not be reached as user 'canal'" in err, err
    assert err.startswith("canal tail: error:") and "***" not in err


def test_position_show_in_zookeeper_fails_within_its_timeout(capsys: pytest.CaptureFixture[str]) -> None:
    hosts = f"127.0.0.1:{free_port()}"  # nothing listens there
    began = time.monotonic()
    code, _out, err = run(capsys, "position", "show", "--zk", hosts, "--zk-timeout", "1")
    assert code == 2 and hosts in err, err
    assert time.monotonic() - began < 4.0
