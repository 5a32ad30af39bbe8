"""pycanal beside the Java systems it replaces: canal's embedded server and Debezium's engine, one MariaDB, one run.

Builds ``bench_decode``'s reference workload (200,000 row changes on a 10-column mixed-type table) in a private
MariaDB, then reads it from the same position (after its CREATE TABLE) three ways, each round in this order, every
reader once a round, each JVM new:

* canal 1.1.7's ``CanalServerWithEmbedded`` (``peers/``: ``getWithoutAck`` of 1,000 then ``ack``, each entry parsed
  and every column's value read, as a consumer of canal's entries does; canal configured as its deployer's defaults:
  TSDB, parallel parsing, raw entries, MEMSIZE batches);
* Debezium 3.5.0's embedded engine with its MariaDB connector (records handed, as Connect's SourceRecords, to a
  consumer that only counts them; the engine starts at the position from a seeded offset);
* pycanal's ``Instance`` (``get_without_ack`` of 1,000 then ``ack``, every value of every row image touched).

A reader's rate is its rows over the time from the command that starts it to its last row -- the whole run, start
included, the first batch included --; the JVM's own start (to its harness's first line) is left out and reported
beside it (``*_jvm_start_s``). Each reader's process CPU per row is measured over the same span (``*_cpu_us_per_row``:
``/proc/PID/stat`` of the JVM; this process's for pycanal). ``canal_ratio`` is pycanal's rate over canal's,
``debezium_ratio`` over Debezium's: at 1 or more pycanal is at least as fast.

    .venv/bin/python benchmarks/bench_peers.py [--rounds 3] [--profile]

Writes ``benchmarks/results/bench_peers.json``; the last line is ``RESULT canal_ratio=... debezium_ratio=...
canal_rows_per_s=... debezium_rows_per_s=... pycanal_rows_per_s=...``. Needs the peers' harness
(``scripts/setup.sh`` builds it when Maven is installed).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench_decode import DELETES, INSERTS, UPDATES, build_workload
from result_file import write_result

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from peer_harness import CanalPeer, DebeziumPeer, mariadb_properties, skip_reason  # noqa: E402

from canal.config import InstanceConfig, MasterConfig, StoreConfig  # noqa: E402
from canal.instance import Instance  # noqa: E402
from canal.protocol import EMPTY_MESSAGE_ID  # noqa: E402
from canal.testing.services import MariaDBServer  # noqa: E402

ROWS = INSERTS + UPDATES + DELETES
BATCH = 1000
JVM: tuple[str, ...] = ()  # the JVM's defaults (the tests' harness runs with a light JIT: not here)


def start_position(server: MariaDBServer, first: str) -> tuple[str, int]:
    """Where the workload's rows begin: just after its CREATE TABLE."""
    for event in server.execute(f"SHOW BINLOG EVENTS IN '{first}'"):
        if event[2] == "Query" and "CREATE TABLE" in str(event[5]):
            return first, int(event[4])
    raise AssertionError(f"no CREATE TABLE in {first}")


def gtid_position(server: MariaDBServer, start: tuple[str, int]) -> str:
    """MariaDB's GTID position at a binlog position (``BINLOG_GTID_POS``)."""
    return str(server.execute("SELECT BINLOG_GTID_POS(%s, %s)", (start[0], start[1]))[0][0])


def run_canal(server: MariaDBServer, start: tuple[str, int], run: int) -> dict[str, Any]:
    peer = CanalPeer(jvm_args=JVM, name=f"canal{run}")
    try:
        cpu0 = peer.cpu_seconds()
        peer.start_destination(
            f"bench{run}",
            address=server.address,
            username=server.user,
            password=server.password,
            position={"journalName": start[0], "position": start[1], "timestamp": int(time.time() * 1000)},
            filter=r"bench\.t",
            batch_size=BATCH,
            print=False,
            until_rows=ROWS,
            timeout_ms=1000,
        )
        count = peer.wait_for(lambda line: line["kind"] == "count", 900, "canal's last row")
        cpu = peer.cpu_seconds() - cpu0
        return _peer_figures(count["rows"], count["last_row_ms"], count["first_row_ms"], cpu, peer.ready_s)
    finally:
        peer.close()


def _figures(rows: int, seconds: float, cpu: float, first_s: float | None) -> dict[str, Any]:
    """A reader's run: ``rows`` in ``seconds`` (the whole run, its first rows' wait included), ``cpu`` seconds of
    its process, its first row ``first_s`` after it began."""
    return {
        "rows": rows,
        "seconds": seconds,
        "rows_per_s": rows / seconds,
        "cpu_s": cpu,
        "cpu_us_per_row": cpu / rows * 1e6,
        "first_row_s": first_s,
    }


def _peer_figures(rows: int, last_ms: float, first_ms: float, cpu: float, ready_s: float) -> dict[str, Any]:
    """A peer's run: ``rows`` by its last one ``last_ms`` after the engine began, and the JVM's start apart."""
    return {**_figures(rows, last_ms / 1000, cpu, first_ms / 1000), "jvm_start_s": ready_s}


def run_debezium(server: MariaDBServer, start: tuple[str, int], run: int) -> dict[str, Any]:
    peer = DebeziumPeer(jvm_args=JVM, name=f"debezium{run}")
    try:
        cpu0 = peer.cpu_seconds()
        props = mariadb_properties(server.host, server.port, "root", "", 6100 + run)
        props.update(
            {"database.include.list": "bench", "table.include.list": r"bench\.t", "include.schema.changes": "false"}
        )
        peer.start_engine(
            f"bench{run}",
            props,
            format="connect",
            until_records=ROWS,
            # the MariaDB connector streams by GTID: the set executed up to the start position goes with it
            offset={"file": start[0], "pos": start[1], "gtids": gtid_position(server, start)},
        )
        count = peer.wait_for(lambda line: line["kind"] in ("count", "completed"), 900, "Debezium's last record")
        if count["kind"] == "completed":
            raise RuntimeError(f"Debezium's engine stopped: {count.get('error')}\n{count.get('trace', '')[:2000]}")
        cpu = peer.cpu_seconds() - cpu0
        return _peer_figures(count["records"], count["last_record_ms"], count["first_record_ms"], cpu, peer.ready_s)
    finally:
        peer.close()


def run_pycanal(server: MariaDBServer, start: tuple[str, int], run: int) -> dict[str, Any]:
    config = InstanceConfig(
        destination=f"bench{run}",
        master=MasterConfig(
            address=server.address,
            username=server.user,
            password=server.password,
            journal_name=start[0],
            position=start[1],
        ),
        filter_regex=r"bench\.t",
        store=StoreConfig(batch_mode="ITEMSIZE"),
    )
    rows = 0
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    first: float | None = None
    inst = Instance(config)
    inst.start()
    try:
        while rows < ROWS:
            msg = inst.get_without_ack(BATCH, timeout=1.0)
            if msg.id == EMPTY_MESSAGE_ID:
                if inst.parser.error is not None:
                    raise inst.parser.error
                continue
            for entry in msg.entries:
                for row in entry.iter_rows():
                    rows += 1
                    if row.before is not None:
                        for _v in row.before:
                            pass
                    if row.after is not None:
                        for _v in row.after:
                            pass
            if first is None and rows:
                first = time.perf_counter() - t0
            inst.ack(msg.id)
        seconds = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
    finally:
        inst.stop()
    return _figures(rows, seconds, cpu, first)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="profile pycanal's reading (one more run) and print it")
    args = parser.parse_args()
    reason = skip_reason()
    if reason is not None:
        raise SystemExit(f"bench_peers: {reason}")
    runs: dict[str, list[dict[str, Any]]] = {"canal": [], "debezium": [], "pycanal": []}
    with MariaDBServer() as server:
        first = build_workload(server)
        start = start_position(server, first)
        print(f"workload: {ROWS} row changes from {start[0]}:{start[1]}", flush=True)
        for run in range(args.rounds):
            for name, reader in (("canal", run_canal), ("debezium", run_debezium), ("pycanal", run_pycanal)):
                result = reader(server, start, run)
                assert result["rows"] == ROWS, (name, result)
                runs[name].append(result)
                print(
                    f"round {run + 1}: {name:8} {result['rows_per_s']:>10,.0f} rows/s "
                    f"{result['cpu_us_per_row']:6.2f} us CPU/row"
                    + (f"  (JVM start {result['jvm_start_s']:.2f} s, not counted)" if "jvm_start_s" in result else ""),
                    flush=True,
                )
        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
            run_pycanal(server, start, args.rounds)
            profile.disable()
            pstats.Stats(profile).sort_stats("cumulative").print_stats(30)

    def median(name: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[name])

    figures: dict[str, Any] = {
        "canal_rows_per_s": round(median("canal", "rows_per_s")),
        "debezium_rows_per_s": round(median("debezium", "rows_per_s")),
        "pycanal_rows_per_s": round(median("pycanal", "rows_per_s")),
    }
    figures["canal_ratio"] = round(figures["pycanal_rows_per_s"] / figures["canal_rows_per_s"], 3)
    figures["debezium_ratio"] = round(figures["pycanal_rows_per_s"] / figures["debezium_rows_per_s"], 3)
    for name in runs:
        figures[f"{name}_cpu_us_per_row"] = round(median(name, "cpu_us_per_row"), 2)
    for name in ("canal", "debezium"):
        figures[f"{name}_jvm_start_s"] = round(median(name, "jvm_start_s"), 2)
    document = {
        **figures,
        "rounds": args.rounds,
        "workload": {"inserts": INSERTS, "updates": UPDATES, "deletes": DELETES, "columns": 10},
        "versions": {"canal": "1.1.7", "debezium": "3.5.0.Final"},
        "runs": runs,
    }
    path = write_result("bench_peers", document)
    print(f"wrote {path}")
    print("RESULT " + " ".join(f"{k}={v}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
