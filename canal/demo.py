"""End-to-end demo (``python -m canal.demo``, run by ``scripts/demo.sh``).

For now it starts a private MariaDB and ZooKeeper, shows that both answer (server version, binlog status, a row
written to the binlog, a ZooKeeper node written and read back), prints a summary and stops them, leaving no process
behind. Exit status 0 on success, 1 if a service could not be started or did not behave.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Sequence

from canal.errors import ServiceError
from canal.testing.services import MariaDBServer, ZooKeeperServer, process_state

_LOG = logging.getLogger(__name__)


def _say(message: str) -> None:
    print(message, flush=True)


def run() -> dict[str, object]:
    """Start both services, exercise them, stop them; the figures shown in the summary."""
    from kazoo.client import KazooClient

    summary: dict[str, object] = {}
    began = time.monotonic()
    with MariaDBServer(server_id=1) as mariadb:
        summary["mariadb_ready_s"] = round(mariadb.ready_seconds or 0.0, 2)
        version = mariadb.execute("SELECT VERSION()")[0][0]
        _say(f"MariaDB {version} on {mariadb.address} (pid {mariadb.pid}), ready in {summary['mariadb_ready_s']} s")
        for name in ("binlog_format", "binlog_row_image", "binlog_row_metadata"):
            _say(f"  {name} = {mariadb.variable(name)}")
        mariadb.execute("CREATE DATABASE demo")
        mariadb.execute("CREATE TABLE demo.orders (id INT PRIMARY KEY, amount DECIMAL(10,2), note VARCHAR(20))")
        mariadb.execute("INSERT INTO demo.orders VALUES (1, 9.99, 'hello binlog')")
        conn = mariadb.connect(root=False)  # the capture user, as canal would log in
        try:
            with conn.cursor() as cur:
                cur.execute("SHOW MASTER STATUS")
                log_file, log_pos = cur.fetchone()[:2]
                cur.execute(f"SHOW BINLOG EVENTS IN '{log_file}'")
                events = [row[2] for row in cur.fetchall()]
        finally:
            conn.close()
        rows_events = sum(1 for e in events if e.startswith("Write_rows"))
        _say(f"  binlog {log_file}:{log_pos}: {len(events)} events, {rows_events} row event (read as {mariadb.user!r})")
        summary.update(mariadb_version=version, binlog=f"{log_file}:{log_pos}", row_events=rows_events)

        with ZooKeeperServer() as zookeeper:
            summary["zookeeper_ready_s"] = round(zookeeper.ready_seconds or 0.0, 2)
            _say(f"ZooKeeper on {zookeeper.hosts} (pid {zookeeper.pid}), ready in {summary['zookeeper_ready_s']} s")
            client = KazooClient(hosts=zookeeper.hosts, timeout=2.0)
            client.start(timeout=10)
            try:
                path = "/otter/canal/destinations/example/running"
                client.create(path, b'{"active":true,"address":"127.0.0.1:11111","cid":1}', makepath=True)
                data, stat = client.get(path)
                _say(f"  created and read back {path}: {data.decode()} (version {stat.version})")
                summary["zookeeper_node"] = data.decode()
            finally:
                client.stop()
                client.close()
            pids = [mariadb.pid, zookeeper.pid]
    left = [pid for pid in pids if pid is not None and process_state(pid) not in (None, "Z")]
    if left:
        raise ServiceError(f"demo servers still running after stop: pids {left}")
    if rows_events != 1:
        raise ServiceError(f"expected 1 row event in the binlog, found {rows_events}: {events}")
    summary["total_s"] = round(time.monotonic() - began, 2)
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo; 0 on success."""
    del argv  # no options yet
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        summary = run()
    except ServiceError as exc:
        _say(f"demo failed: {exc}")
        return 1
    _say(
        "summary: "
        f"MariaDB ready in {summary['mariadb_ready_s']} s, ZooKeeper ready in {summary['zookeeper_ready_s']} s, "
        f"binlog {summary['binlog']} with {summary['row_events']} row event, "
        f"demo took {summary['total_s']} s; both servers stopped."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
