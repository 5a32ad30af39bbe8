"""``canal serve CONF_DIR`` as a real process on a real MariaDB: it serves a canal conf directory with its exporter,
prints the changes as JSON lines, and SIGTERM stops it cleanly -- exit status 0, its cursor flushed, so the next run
goes on after what it printed."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path
from typing import IO

import pytest

from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration

CANAL = Path(sys.executable).parent / "canal"


class Served:
    """A running ``canal serve``: its stdout and stderr lines, read on threads."""

    def __init__(
        self, conf: Path, env: dict[str, str], argv: list[str] | None = None, out: queue.Queue[str] | None = None
    ) -> None:
        self.proc = subprocess.Popen(
            [str(CANAL), "serve", str(conf), "--metrics-port", "0", *(argv or [])],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.out: queue.Queue[str] = queue.Queue() if out is None else out  # (shared by several, given one)
        self.err: queue.Queue[str] = queue.Queue()
        self.err_lines: list[str] = []
        self.readers = [
            threading.Thread(target=self._read, args=(stream, lines), daemon=True)
            for stream, lines in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))
        ]
        for reader in self.readers:
            reader.start()

    @staticmethod
    def _read(stream: IO[str] | None, lines: queue.Queue[str]) -> None:
        assert stream is not None
        for line in stream:
            lines.put(line.rstrip("\n"))

    def err_line(self, starts: str, timeout: float = 30.0) -> str:
        while True:
            line = self.err.get(timeout=timeout)
            self.err_lines.append(line)
            if line.startswith(starts):
                return line

    def rows(self, n: int, timeout: float = 30.0) -> list[dict[str, object]]:
        return [json.loads(self.out.get(timeout=timeout)) for _ in range(n)]

    def terminate(self, sig: signal.Signals = signal.SIGTERM, timeout: float = 20.0) -> int:
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout)
        for reader in self.readers:  # every line it wrote is read once its pipes close
            reader.join(5)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def test_serve_runs_a_conf_directory_until_sigterm(mariadb: MariaDBDatabase, tmp_path: Path) -> None:
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
    master = mariadb.master()
    conf = tmp_path / "conf"
    (conf / "shop").mkdir(parents=True)
    (conf / "canal.properties").write_text(
        "canal.destinations = shop\n"
        "canal.auto.scan = false\n"
        "canal.instance.global.spring.xml = classpath:spring/file-instance.xml\n"
        f"canal.file.data.dir = {tmp_path / 'meta'}\n"
    )
    (conf / "shop" / "instance.properties").write_text(
        f"canal.instance.master.address = {master.address}\n"
        f"canal.instance.master.journal.name = {master.journal_name}\n"
        f"canal.instance.master.position = {master.position}\n"
        f"canal.instance.dbUsername = {master.username}\n"
        "canal.instance.dbPassword = ${CANAL_PASSWORD}\n"
        f"canal.instance.filter.regex = {mariadb.database}\\\\..*\n"
    )
    env = {**os.environ, "CANAL_PASSWORD": master.password}
    served = Served(conf, env)
    try:
        url = served.err_line("canal serve: metrics at ").rsplit(" ", 1)[1]
        served.err_line("canal serve: 1 destinations (shop)")
        mariadb.execute("INSERT INTO t VALUES (1, 'a')")
        [row] = served.rows(1)
        assert (row["destination"], row["table"], row["type"], row["after"]) == (
            "shop",
            "t",
            "INSERT",
            {"id": 1, "v": "a"},
        )
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
        assert 'canal_instance_running{destination="shop"} 1.0' in text
        assert 'canal_instance_connected{destination="shop"} 1.0' in text
        assert served.terminate() == 0
        served.err_line("canal serve: stopped")
        assert master.password not in "\n".join(served.err_lines)
    finally:
        served.kill()
    # the cursor was flushed when it stopped: the next run prints what came after, nothing twice
    mariadb.execute("INSERT INTO t VALUES (2, 'b')")
    again = Served(conf, env)
    try:
        again.err_line("canal serve: 1 destinations")
        [row] = again.rows(1)
        assert row["after"] == {"id": 2, "v": "b"}
        assert again.terminate() == 0
        assert again.out.empty()  # nothing more: row 1 was not printed again
    finally:
        again.kill()
