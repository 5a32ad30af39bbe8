"""Helpers for Spark tests, the demo and the benchmark: a local SparkSession, source snapshots, mirror checks."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from canal.config import InstanceConfig
from canal.instance import Instance
from canal.lake import Comparison, DeltaMirror, compare
from canal.lake.store import fs
from canal.spark.batches import RunStats, run_batches
from canal.sql import quote_name
from canal.testing.services.spark_archive import driver_java_options


def local_spark(
    app_name: str = "pycanal",
    *,
    cores: int = 2,
    extra: dict[str, str] | None = None,
    connectors: bool | None = None,
) -> Any:
    """A local SparkSession set up for pycanal's tests: this interpreter for Python workers, loopback only, no UI, a
    JVM tuned for small short jobs that maps the setup's class archive when there is one
    (:func:`~canal.testing.services.spark_archive.driver_java_options`; ``extra`` can override it). With
    ``connectors``, the jars of Delta Lake's, Kafka's and S3A's connectors that ``scripts/setup.sh`` fetched, and
    Delta's SQL (:func:`canal.testing.jars.spark_conf`; a :class:`~canal.errors.ServiceError` says why when they are
    not there); by default, when they are there (a process has one SparkContext: the first session's jars are every
    later one's).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app_name)
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .config("spark.driver.extraJavaOptions", driver_java_options())
    )
    from canal.testing import jars

    if connectors is None:
        connectors = jars.skip_reason() is None
    if connectors:
        for key, value in jars.spark_conf().items():
            builder = builder.config(key, value)
    for key, value in (extra or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def stop_spark(spark: Any, timeout_s: float = 30.0) -> None:
    """Stop a SparkSession made by :func:`local_spark` *and* its JVM, waiting until the JVM process is gone.

    ``spark.stop()`` leaves the JVM running until this Python process exits; the JVM ends when its stdin closes
    (PySpark's gateway reads it to notice a dead driver), so closing it ends the JVM now. Killed after ``timeout_s``.
    A later :func:`local_spark` starts a new JVM.
    """
    import subprocess

    from pyspark import SparkContext

    spark.stop()
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if gateway is not None:
        with contextlib.suppress(Exception):
            gateway.shutdown()
        SparkContext._gateway = None
        SparkContext._jvm = None
    if proc is None:
        return
    with contextlib.suppress(OSError):
        if proc.stdin is not None:
            proc.stdin.close()
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def select_all(conn: Any, schema: str, table: str) -> list[dict[str, Any]]:
    """``SELECT *`` of a table as dicts (a pymysql connection)."""
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM {quote_name(schema)}.{quote_name(table)}")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def primary_key(conn: Any, schema: str, table: str) -> list[str]:
    """The columns a table's rows are identified by: its primary key, else the UNIQUE NOT NULL key the server
    promotes to one (``COLUMN_KEY`` ``PRI``, :mod:`canal.schema.keys`); [] for a table with neither."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s "
            "AND CONSTRAINT_NAME='PRIMARY' ORDER BY ORDINAL_POSITION",
            (schema, table),
        )
        found = [str(r[0]) for r in cur.fetchall()]
        if found:
            return found
        cur.execute(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s "
            "AND COLUMN_KEY='PRI' ORDER BY ORDINAL_POSITION",
            (schema, table),
        )
        return [str(r[0]) for r in cur.fetchall()]


def compare_tables(conn: Any, mirror: DeltaMirror, schema: str, tables: Iterable[str]) -> list[Comparison]:
    """Compare each table's mirror with ``SELECT *`` of its source (an empty source against a missing mirror is
    equal)."""
    import pyarrow as pa

    out = []
    for table in tables:
        rows = select_all(conn, schema, table)
        key = primary_key(conn, schema, table)
        if fs.exists(mirror.table_location(schema, table)):
            mirrored: Any = mirror.read(schema, table)
        else:
            mirrored = pa.table({k: pa.array([], type=pa.string()) for k in (rows[0] if rows else key)})
        out.append(compare(mirrored, rows, key, name=f"{schema}.{table}"))
    return out


def no_batch_twice(mirror: DeltaMirror, schema: str, tables: Sequence[str]) -> dict[str, list[int]]:
    """Every table's committed batch ids; raises AssertionError if one was committed twice or out of order."""
    out = {}
    for table in tables:
        ids = mirror.committed_batch_ids(schema, table)
        if ids != sorted(set(ids)):
            raise AssertionError(f"{schema}.{table}: batch ids committed twice or out of order: {ids}")
        out[table] = ids
    return out


SHOP_TABLES = ("customers", "orders", "order_items")
SHOP_DDL = (
    "CREATE TABLE {db}.customers (id INT PRIMARY KEY, name VARCHAR(40) NOT NULL, email VARCHAR(80), "
    "city VARCHAR(30), created DATETIME(6) NOT NULL)",
    "CREATE TABLE {db}.orders (id INT PRIMARY KEY, customer_id INT NOT NULL, status VARCHAR(12) NOT NULL, "
    "total DECIMAL(12,2) NOT NULL, placed DATETIME NOT NULL, note TEXT)",
    "CREATE TABLE {db}.order_items (order_id INT NOT NULL, line INT NOT NULL, sku VARCHAR(16) NOT NULL, "
    "qty INT NOT NULL, price DECIMAL(10,2) NOT NULL, PRIMARY KEY (order_id, line))",
)


class ShopWorkload:
    """A deterministic shop workload: transactions of inserts, updates and deletes, and one ADD COLUMN."""

    def __init__(self, conn: Any, db: str, seed: int = 7) -> None:
        import random

        self.conn = conn
        self.db = db
        self.rng = random.Random(seed)
        self.customers: list[int] = []
        self.orders: dict[int, int] = {}  # order id -> lines
        self.next_customer = 1
        self.next_order = 1
        self.changes = 0  # row changes written
        self.altered = False

    def create(self) -> None:
        with self.conn.cursor() as cur:
            for ddl in SHOP_DDL:
                cur.execute(ddl.format(db=f"`{self.db}`"))

    def preload(self, rows: int) -> int:
        """Fill the (empty) tables with about ``rows`` rows in bulk -- a fifth customers, two fifths orders with one
        line each -- as a database that held data before any capture started; the rows written."""
        customers, orders = max(1, rows // 5), max(1, rows * 2 // 5)
        db = f"`{self.db}`"
        with self.conn.cursor() as cur:
            cur.execute(
                f"INSERT INTO {db}.customers (id, name, email, city, created) SELECT seq, CONCAT('customer ', seq), "
                f"CONCAT('c', seq, '@example.com'), ELT(1 + seq % 3, 'Paris', 'Lyon', 'Oslo'), NOW(6) "
                f"FROM seq_1_to_{customers}"
            )
            cur.execute(
                f"INSERT INTO {db}.orders SELECT seq, 1 + seq % {customers}, 'new', 1 + (seq % 9000) / 100, NOW(), "
                f"NULL FROM seq_1_to_{orders}"
            )
            cur.execute(
                f"INSERT INTO {db}.order_items SELECT seq, 1, CONCAT('SKU-', 1 + seq % 500), 1 + seq % 9, "
                f"(100 + seq % 9900) / 100 FROM seq_1_to_{orders}"
            )
        self.customers.extend(range(self.next_customer, self.next_customer + customers))
        self.next_customer += customers
        self.orders.update((oid, 1) for oid in range(self.next_order, self.next_order + orders))
        self.next_order += orders
        return customers + 2 * orders

    def run(self, transactions: int, *, alter_at: int | None = None) -> None:
        """Create the tables, then ``transactions`` transactions, the ADD COLUMN after the ``alter_at``-th."""
        self.create()
        for i in range(transactions):
            self.transaction()
            if i == alter_at:
                self.alter()

    def alter(self) -> None:
        with self.conn.cursor() as cur:
            cur.execute(f"ALTER TABLE `{self.db}`.customers ADD COLUMN tier VARCHAR(10) NULL")
        self.altered = True

    def transaction(self) -> int:
        """One transaction; the number of row changes it made."""
        rng, db = self.rng, f"`{self.db}`"
        made = 0
        with self.conn.cursor() as cur:
            cur.execute("BEGIN")
            roll = rng.random()
            if roll < 0.25 or len(self.customers) < 5:
                rows = []
                for _ in range(rng.randint(1, 5)):
                    cid = self.next_customer
                    self.next_customer += 1
                    self.customers.append(cid)
                    rows.append((cid, f"customer {cid}", f"c{cid}@example.com", rng.choice(["Paris", "Lyon", "Oslo"])))
                cur.executemany(
                    f"INSERT INTO {db}.customers (id, name, email, city, created) VALUES (%s,%s,%s,%s,NOW(6))", rows
                )
                made += len(rows)
            elif roll < 0.65:
                oid = self.next_order
                self.next_order += 1
                lines = rng.randint(1, 4)
                items = [
                    (oid, n, f"SKU-{rng.randint(1, 500)}", rng.randint(1, 9), rng.randint(100, 9999) / 100)
                    for n in range(1, lines + 1)
                ]
                total = sum(q * p for _o, _n, _s, q, p in items)
                cur.execute(
                    f"INSERT INTO {db}.orders VALUES (%s,%s,'new',%s,NOW(),NULL)",
                    (oid, rng.choice(self.customers), round(total, 2)),
                )
                cur.executemany(f"INSERT INTO {db}.order_items VALUES (%s,%s,%s,%s,%s)", items)
                self.orders[oid] = lines
                made += 1 + lines
            elif roll < 0.85 and self.orders:
                oid = rng.choice(list(self.orders))
                made += cur.execute(
                    f"UPDATE {db}.orders SET status=%s, note=%s WHERE id=%s",
                    (rng.choice(["paid", "shipped", "done"]), f"note {rng.randint(1, 99)}", oid),
                )
                made += cur.execute(f"UPDATE {db}.order_items SET qty=qty+1 WHERE order_id=%s AND line=1", (oid,))
            elif roll < 0.93 and self.orders:
                oid = rng.choice(list(self.orders))
                made += cur.execute(f"DELETE FROM {db}.order_items WHERE order_id=%s", (oid,))
                made += cur.execute(f"DELETE FROM {db}.orders WHERE id=%s", (oid,))
                del self.orders[oid]
            else:
                cid = rng.choice(self.customers)
                if self.altered:
                    made += cur.execute(
                        f"UPDATE {db}.customers SET city=%s, tier=%s WHERE id=%s",
                        (rng.choice(["Rome", "Kyiv", "Porto"]), rng.choice(["gold", "basic"]), cid),
                    )
                else:
                    made += cur.execute(
                        f"UPDATE {db}.customers SET city=%s WHERE id=%s", (rng.choice(["Rome", "Kyiv", "Porto"]), cid)
                    )
            cur.execute("COMMIT")
        self.changes += made
        return made


def master_position(conn: Any) -> tuple[str, int]:
    with conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        row = cur.fetchone()
        return str(row[0]), int(row[1])


def healed_by(instance: Instance, end: tuple[str, int], within_s: float = 180.0) -> Callable[[RunStats], bool]:
    """An ``until`` for :func:`~canal.spark.run_batches`: true once everything before ``end`` (a master position) was
    handled and no snapshot is left -- a heal's (:mod:`canal.snapshot.heal`) included: none reading, none unfinished
    in the cursor. Not so ``within_s`` seconds after the first call: a TimeoutError that says what was still waited
    for (a run that would otherwise wait for ever)."""
    deadline: float | None = None

    def done(stats: RunStats) -> bool:
        nonlocal deadline
        now = time.monotonic()
        deadline = now + within_s if deadline is None else deadline
        reached, reading = stats.reached(*end), instance.snapshot_running
        cursor = instance.get_cursor() if reached and not reading else None
        merge = getattr(instance.parser, "merge", None)
        if reached and not reading:
            if cursor is None or cursor.snapshot is None:
                return True
            # a read whose last table was dropped before it came to it ends with no entry of its own (the runner
            # skips the table): the acked cursor keeps its progress until the stream's next entry. Over all the same
            # once the merge holds no progress and every entry handed out was acked
            if merge is not None and merge.progress is None and instance.store.size == 0:
                return True
        if now > deadline:
            raise TimeoutError(
                f"destination {instance.destination}: not caught up with {end[0]}:{end[1]} and its heals within "
                f"{within_s:g} s: handled through {stats.last_file}:{stats.last_next_offset}, drained at "
                f"{stats.drained_file}:{stats.drained_offset}, snapshots {stats.snapshots_handled}/{stats.snapshots} "
                f"handled, one reading: {reading}, cursor {instance.get_cursor()}, merge progress "
                f"{None if merge is None else merge.progress}, store holding {instance.store.size}, parser error "
                f"{instance.parser.error!r}"
            )
        return False

    return done


def run_caught_up(
    conn: Any, config: InstanceConfig, spark: Any, fn: Any, batch_size: int = 500, journal: Any = None
) -> RunStats:
    """Run an instance of ``config`` through :func:`~canal.spark.run_batches` into ``fn`` until it has handled
    everything the master (``conn``) had written when called, and its heals are over (:func:`healed_by`; a heal's
    rows need ``journal``)."""
    end = master_position(conn)
    with Instance(config) as inst:
        until = healed_by(inst, end)
        return run_batches(inst, spark, fn, batch_size=batch_size, timeout=0.5, until=until, journal=journal)


RUNNER_MODULE = "pyspark.sql.streaming.python_streaming_source_runner"


def source_runner_pids() -> list[int]:
    """Pids of live ``python_streaming_source_runner`` processes (the processes that run our reader) started by
    this process's Spark: descendants of this process, not those of another application on the machine."""
    from canal.testing.services import process_state

    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        pid = int(entry)
        if RUNNER_MODULE in cmdline and process_state(pid) not in (None, "Z") and _descends_from_us(pid):
            out.append(pid)
    return sorted(out)


def _descends_from_us(pid: int) -> bool:
    """Whether ``pid`` is a descendant of this process (its parents read from ``/proc``)."""
    me = os.getpid()
    for _ in range(64):  # deeper than any process tree here
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                # the fields after the command name (in parentheses, which may hold spaces): state, ppid, ...
                pid = int(fh.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return False
        if pid == me:
            return True
        if pid <= 1:
            return False
    return False
