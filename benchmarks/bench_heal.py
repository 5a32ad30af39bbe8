"""What a heal costs: a 1,000,000-row table read again in the stream while writes go on, against a plain snapshot of
the same table, and how the other tables' changes flow meanwhile.

A private MariaDB holds ``shop.t`` (id INT primary key, an INT, a VARCHAR(40), a DECIMAL(10,2), a DATETIME: the
mix of ``bench_snapshot.py``) with ``--rows`` rows, and ``shop.o``, a small table the writers insert into. Per round:

* baseline: an ``Instance`` streaming an idle binlog runs ``snapshot(["shop.t"])`` -- the initial snapshot's
  machinery, on demand -- and a consumer takes every entry (``get_without_ack`` + ``ack``, every value read) until
  the snapshot is finished in the cursor: seconds from the call to that ack;
* heal: an ``Instance`` (``heal="snapshot"``, the default) streams while paced writers change ``shop.t`` (updates,
  inserts, deletes) and insert into ``shop.o``, ``--write-rate`` writes a second each; a session with
  ``binlog_format=STATEMENT`` deletes ten rows of ``shop.t`` -- rows the binlog does not hold, so the capture heals
  the table -- and the same consumer takes every entry until the heal is finished in the cursor: seconds from the
  statement to that ack. Meanwhile it counts the ``shop.o`` rows it is handed (binlog changes, not snapshot rows).

``heal_snapshot_ratio`` = the heal's seconds / the baseline's, medians over ``--rounds`` (goal <= 1.5);
``other_rows_per_s`` = ``shop.o`` rows handed out per second during the heal, beside ``other_written_per_s``, the rate
the writers inserted them at; ``other_flow_ratio`` = the two's ratio (1.0: the other tables' changes flow as written,
not held behind the heal). The figures are the whole run, first chunk included.

    .venv/bin/python benchmarks/bench_heal.py [--rows 1000000] [--rounds 1] [--chunk-rows 10000] [--write-rate 200]

Writes ``benchmarks/results/bench_heal.json``; the last line is ``RESULT heal_snapshot_ratio=... other_rows_per_s=...
other_written_per_s=... other_flow_ratio=... heal_rows_per_s=... snapshot_rows_per_s=...``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import threading
import time
from typing import Any

from result_file import write_result

from canal.config import InstanceConfig, MasterConfig, SnapshotConfig, StoreConfig
from canal.instance import Instance
from canal.protocol import EMPTY_MESSAGE_ID, EventType
from canal.testing.services import MariaDBServer

TABLE = "shop.t"
OTHER = "shop.o"


def load(server: MariaDBServer, rows: int) -> None:
    server.execute("CREATE DATABASE shop")
    server.execute(
        "CREATE TABLE shop.t (id INT PRIMARY KEY, qty INT NOT NULL, name VARCHAR(40) NOT NULL, "
        "price DECIMAL(10,2) NOT NULL, placed DATETIME NOT NULL)"
    )
    server.execute("CREATE TABLE shop.o (id INT AUTO_INCREMENT PRIMARY KEY, w INT NOT NULL)")
    step = 200_000
    for start in range(0, rows, step):
        end = min(rows, start + step)
        server.execute(
            f"INSERT INTO shop.t SELECT seq, seq % 97, CONCAT('name ', seq), (seq % 100000) / 100, "
            f"'2026-01-01' + INTERVAL (seq % 100000) SECOND FROM seq_{start + 1}_to_{end}",
            database="shop",
        )


def config(server: MariaDBServer, name: str, slave_id: int, chunk_rows: int) -> InstanceConfig:
    journal, position = server.execute("SHOW MASTER STATUS")[0][:2]
    return InstanceConfig(
        destination=name,
        master=MasterConfig(
            address=server.address,
            username=server.user,
            password=server.password,
            journal_name=journal,
            position=position,
        ),
        slave_id=slave_id,
        filter_regex=r"shop\..*",
        store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=1024),
        snapshot=SnapshotConfig(chunk_rows=chunk_rows),
    )


class Writers:
    """Paced writers: ``rate`` writes a second to ``shop.t`` (updates, inserts, deletes) and as many inserts into
    ``shop.o``, until stopped; ``other`` counts those inserts, ``other_at`` when each was made."""

    def __init__(self, server: MariaDBServer, rows: int, rate: float) -> None:
        self.server, self.rows, self.rate = server, rows, rate
        self.stop = threading.Event()
        self.other_at: list[float] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        rng = random.Random(65)
        conn = self.server.connect(autocommit=True)
        try:
            with conn.cursor() as cur:
                due = time.perf_counter()
                while not self.stop.is_set():
                    key = rng.randint(1, self.rows + 1000)
                    op = rng.random()
                    if op < 0.6:
                        cur.execute("UPDATE shop.t SET qty = qty + 1 WHERE id = %s", (key,))
                    elif op < 0.8:
                        cur.execute("INSERT IGNORE INTO shop.t VALUES (%s, 1, 'new', 1.5, '2026-02-02')", (key,))
                    else:
                        cur.execute("DELETE FROM shop.t WHERE id = %s", (key,))
                    cur.execute("INSERT INTO shop.o (w) VALUES (%s)", (key,))
                    self.other_at.append(time.perf_counter())
                    due += 1 / self.rate
                    self.stop.wait(max(0.0, due - time.perf_counter()))
        finally:
            conn.close()

    def __enter__(self) -> Writers:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(30)


def consume(inst: Instance, finished: Any) -> tuple[int, list[float]]:
    """Take and ack every entry, reading every value, until ``finished()``: the snapshot rows taken and the times the
    ``shop.o`` binlog rows were handed out."""
    rows = 0
    other: list[float] = []
    while not finished():
        msg = inst.get_without_ack(64, timeout=0.5)
        if msg.id == EMPTY_MESSAGE_ID:
            continue
        now = time.perf_counter()
        for entry in msg.entries:
            rc = entry.row_change
            if rc is None or rc.is_ddl:
                continue
            snapshot = rc.event_type is EventType.SNAPSHOT
            for row in entry.iter_rows():
                image = row.after if row.after is not None else row.before
                if image is not None:
                    for value in image:
                        _ = value
                if snapshot:
                    rows += 1
                elif entry.header.table == "o":
                    other.append(now)
        inst.ack(msg.id)
    return rows, other


def done(inst: Instance) -> bool:
    cursor = inst.get_cursor()
    return not inst.snapshot_running and cursor is not None and cursor.snapshot is None


def plain_snapshot(server: MariaDBServer, round_no: int, chunk_rows: int) -> tuple[int, float]:
    with Instance(config(server, f"plain{round_no}", 9100 + round_no, chunk_rows)) as inst:
        began = time.perf_counter()
        runner = inst.snapshot([TABLE])
        rows, _other = consume(inst, lambda: runner.progress().done and done(inst))
        return rows, time.perf_counter() - began


def heal(server: MariaDBServer, round_no: int, chunk_rows: int, rows: int, rate: float) -> dict[str, float]:
    with Instance(config(server, f"heal{round_no}", 9200 + round_no, chunk_rows)) as inst:
        with Writers(server, rows, rate) as writers:
            time.sleep(1.0)  # the writers are going before the heal starts
            consume(inst, lambda: inst.store.stats().entries_held == 0)
            session = server.connect(autocommit=True)
            try:
                with session.cursor() as cur:
                    cur.execute("SET SESSION binlog_format = 'STATEMENT'")
                    began = time.perf_counter()
                    cur.execute(f"DELETE FROM shop.t WHERE id BETWEEN {round_no * 10 + 1} AND {round_no * 10 + 10}")
            finally:
                session.close()
            read, other = consume(inst, lambda: inst.metrics().heals > 0 and done(inst))
            seconds = time.perf_counter() - began
            written = [t for t in writers.other_at if began <= t <= began + seconds]
        assert inst.metrics().heals == 1, inst.metrics()
    handed = [t for t in other if began <= t]
    return {
        "seconds": seconds,
        "rows": read,
        "other_rows_per_s": len(handed) / seconds,
        "other_written_per_s": len(written) / seconds,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--chunk-rows", type=int, default=10_000)
    ap.add_argument("--write-rate", type=float, default=200.0, help="writes a second to each table during a heal")
    args = ap.parse_args(argv)

    server = MariaDBServer(server_id=1, extra_args=["--innodb-buffer-pool-size=512M"])
    server.start()
    document: dict[str, Any] = {
        "benchmark": "bench_heal",
        "rows": args.rows,
        "chunk_rows": args.chunk_rows,
        "write_rate": args.write_rate,
    }
    plain: list[float] = []
    heals: list[dict[str, float]] = []
    try:
        load(server, args.rows)
        for round_no in range(args.rounds):
            n, seconds = plain_snapshot(server, round_no, args.chunk_rows)
            assert n >= args.rows * 0.99, n
            plain.append(seconds)
            heals.append(heal(server, round_no, args.chunk_rows, args.rows, args.write_rate))
            print(
                f"round {round_no}: snapshot {n:,} rows in {seconds:.1f} s; heal {heals[-1]['rows']:,.0f} rows in "
                f"{heals[-1]['seconds']:.1f} s under {args.write_rate:.0f} writes/s, the other table's rows "
                f"{heals[-1]['other_rows_per_s']:.0f}/s handed out of {heals[-1]['other_written_per_s']:.0f}/s written",
                flush=True,
            )
    finally:
        server.stop()
    plain_s = statistics.median(plain)
    heal_s = statistics.median(h["seconds"] for h in heals)
    other = statistics.median(h["other_rows_per_s"] for h in heals)
    written = statistics.median(h["other_written_per_s"] for h in heals)
    ratio = heal_s / plain_s
    flow = other / written if written else 0.0
    document.update(
        {
            "snapshot_seconds": round(plain_s, 3),
            "heal_seconds": round(heal_s, 3),
            "heal_snapshot_ratio": round(ratio, 3),
            "snapshot_rows_per_s": round(args.rows / plain_s),
            "heal_rows_per_s": round(args.rows / heal_s),
            "other_rows_per_s": round(other, 1),
            "other_written_per_s": round(written, 1),
            "other_flow_ratio": round(flow, 3),
            "rounds": {"snapshot_seconds": plain, "heals": heals},
        }
    )
    write_result("bench_heal", document)
    print(
        f"RESULT heal_snapshot_ratio={ratio:.3f} other_rows_per_s={other:.1f} other_written_per_s={written:.1f} "
        f"other_flow_ratio={flow:.3f} heal_rows_per_s={args.rows / heal_s:.0f} "
        f"snapshot_rows_per_s={args.rows / plain_s:.0f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
