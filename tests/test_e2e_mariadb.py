"""End to end against real MariaDB: binlog -> parser -> sink -> store -> get / ack / rollback.

A workload's changes arrive complete and in order with batches outstanding, acked, rolled back (one batch and all);
a writer thread commits while the consumer acks (nothing lost, nothing repeated, per-key order kept); two
destinations share one EmbeddedServer; a group instance merges two servers in time order, transactions whole.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from canal.client import ClientIdentity
from canal.config import DetectingConfig, InstanceConfig, MasterConfig, RetryConfig, StoreConfig
from canal.instance import Instance
from canal.protocol import EMPTY_MESSAGE_ID, Entry, EntryType, EventType, Message
from canal.server import EmbeddedServer
from canal.testing.plugin import MariaDBDatabase, MariaDBFactory
from canal.testing.services import MariaDBServer

pytestmark = pytest.mark.integration

Row = tuple[str, EventType, Any, Any]  # (table, type, id, v)


def master_at(server: MariaDBServer | MariaDBDatabase) -> MasterConfig:
    """The server's current binlog end as an explicit start (what is written afterwards is the workload)."""
    journal, position = server.execute("SHOW MASTER STATUS")[0][:2]
    return MasterConfig(
        address=server.address,
        username=server.user,
        password=server.password,
        journal_name=str(journal),
        position=int(position),
    )


def config(master: MasterConfig, filter_regex: str, **kw: Any) -> InstanceConfig:
    kw.setdefault("store", StoreConfig(batch_mode="ITEMSIZE", buffer_size=8192))
    return InstanceConfig(
        destination=kw.pop("destination", "e2e"),
        master=master,
        filter_regex=filter_regex,
        detecting=DetectingConfig(interval_s=0.2),
        retry=RetryConfig(initial_backoff_s=0.01, max_backoff_s=0.2, read_timeout_s=10, heartbeat_period_s=0.2),
        **kw,
    )


def rows_of(entries: Sequence[Entry]) -> list[Row]:
    out: list[Row] = []
    for e in entries:
        rc = e.row_change
        if e.entry_type is not EntryType.ROWDATA or rc is None or rc.is_ddl:
            continue
        for r in e.iter_rows():
            image = r.after_dict() or r.before_dict()
            out.append((e.header.table, e.header.event_type, image["id"], image.get("v")))
    return out


def consume(
    get: Callable[[], Message], done: Callable[[list[Entry]], bool], limit_s: float = 30.0
) -> Iterator[Message]:
    """Non-empty messages from ``get`` until ``done(all entries so far)``."""
    seen: list[Entry] = []
    deadline = time.monotonic() + limit_s
    while not done(seen):
        assert time.monotonic() < deadline, f"timed out; {len(rows_of(seen))} rows so far"
        msg = get()
        if msg.id != EMPTY_MESSAGE_ID:
            seen.extend(msg.entries)
            yield msg


def has_rows(n: int) -> Callable[[list[Entry]], bool]:
    return lambda entries: len(rows_of(entries)) >= n


def write_workload(db: MariaDBDatabase, big: int = 1500) -> tuple[list[Row], int]:
    """Inserts, updates, deletes, DDL, multi-row statements and one large transaction; the rows expected, in order,
    and the number of transactions with rows."""
    exp: list[Row] = []
    I, U, D = EventType.INSERT, EventType.UPDATE, EventType.DELETE  # noqa: E741
    with db.connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(40), n INT)")
        for i in range(5):  # single-row autocommit inserts
            cur.execute("INSERT INTO t VALUES (%s, %s, %s)", (i, f"a{i}", i))
            exp.append(("t", I, i, f"a{i}"))
        cur.execute("INSERT INTO t VALUES " + ",".join(f"({i}, 'm{i}', {i})" for i in range(5, 105)))  # multi-row
        exp += [("t", I, i, f"m{i}") for i in range(5, 105)]
        cur.execute("UPDATE t SET v = CONCAT('u', id) WHERE id < 50")  # multi-row update
        exp += [("t", U, i, f"u{i}") for i in range(50)]
        cur.execute("DELETE FROM t WHERE id >= 90")  # multi-row delete
        exp += [("t", D, i, f"m{i}") for i in range(90, 105)]
        cur.execute("ALTER TABLE t ADD COLUMN extra VARCHAR(10) DEFAULT 'x'")
        cur.execute("INSERT INTO t (id, v, n, extra) VALUES (200, 'after-ddl', 1, 'y')")
        exp.append(("t", I, 200, "after-ddl"))
        cur.execute("BEGIN")  # a large transaction of many statements (split by transaction_size)
        for i in range(1000, 1000 + big):
            cur.execute("INSERT INTO t (id, v, n) VALUES (%s, %s, %s)", (i, f"b{i}", i))
        cur.execute("UPDATE t SET n = -1 WHERE id = 200")
        cur.execute("COMMIT")
        exp += [("t", I, i, f"b{i}") for i in range(1000, 1000 + big)]
        exp.append(("t", U, 200, "after-ddl"))
        cur.execute("DELETE FROM t WHERE id = 1")
        exp.append(("t", D, 1, "u1"))
    return exp, 5 + 1 + 1 + 1 + 1 + 1 + 1


def check_transactions(entries: Sequence[Entry]) -> list[list[Entry]]:
    """Every BEGIN is closed by an END before the next BEGIN, with one server's entries in between; the
    transactions (BEGIN..END lists)."""
    txns: list[list[Entry]] = []
    current: list[Entry] | None = None
    for e in entries:
        if e.entry_type is EntryType.TRANSACTIONBEGIN:
            assert current is None, f"BEGIN at {e.header.log_file}:{e.header.log_offset} inside a transaction"
            current = [e]
        elif e.entry_type is EntryType.TRANSACTIONEND:
            assert current is not None, "END without BEGIN"
            current.append(e)
            servers = {x.header.server_id for x in current}
            assert len(servers) == 1, f"a transaction mixes servers {servers}"
            txns.append(current)
            current = None
        elif current is not None:
            current.append(e)
    assert current is None, "the last transaction did not end"
    return txns


def test_workload_arrives_complete_and_in_order_with_batches_outstanding(mariadb: MariaDBDatabase) -> None:
    start = master_at(mariadb)
    expected, _ = write_workload(mariadb)
    with Instance(config(start, rf"{mariadb.database}\..*", transaction_size=100)) as inst:
        msgs = list(consume(lambda: inst.get_without_ack(300, timeout=0.2), has_rows(len(expected))))
        assert len(msgs) > 5  # several batches outstanding at once
        ids = [m.id for m in msgs]
        assert inst.list_batch_ids() == ids == sorted(ids)
        entries = [e for m in msgs for e in m.entries]
        assert rows_of(entries) == expected
        ddl = [e for e in entries if e.row_change is not None and e.row_change.is_ddl]
        assert [e.header.event_type for e in ddl] == [EventType.CREATE, EventType.ALTER]
        txns = check_transactions(entries)
        big = [t for t in txns if len(t) > 1000]
        assert len(big) == 1 and len(rows_of(big[0])) == 1501
        # the new column shows up from the DDL on, not before
        after = [e for e in entries if e.header.event_type is EventType.INSERT and e.row_change is not None]
        first_after = next(r for e in after for r in e.iter_rows() if r.after_dict()["id"] == 200)
        assert first_after.after_dict()["extra"] == "y"
        assert "extra" not in next(r for r in after[0].iter_rows()).after_dict()
        for m in msgs:
            inst.ack(m.id)
        assert inst.list_batch_ids() == []
        assert inst.metrics().store_entries == 0
        assert inst.get_without_ack(100, timeout=None).id == EMPTY_MESSAGE_ID


def test_rollback_of_one_batch_and_of_all_redelivers_exactly(mariadb: MariaDBDatabase) -> None:
    start = master_at(mariadb)
    expected, _ = write_workload(mariadb, big=300)
    with Instance(config(start, rf"{mariadb.database}\..*")) as inst:
        # wait until everything is in the store, so batch cuts are deterministic
        deadline = time.monotonic() + 20
        while inst.store.put_sequence < 0 or rows_of(inst.store.get(10**6).entries) != expected:
            inst.store.rollback()
            assert time.monotonic() < deadline
        inst.store.rollback()
        b1, b2, b3 = (inst.get_without_ack(40) for _ in range(3))
        assert -1 not in (b1.id, b2.id, b3.id)
        inst.rollback(b2.id)  # b2 and b3 go back; b1 stays outstanding
        assert inst.list_batch_ids() == [b1.id]
        again2, again3 = inst.get_without_ack(40), inst.get_without_ack(40)
        assert list(again2.entries) == list(b2.entries) and list(again3.entries) == list(b3.entries)
        assert again2.id not in (b1.id, b2.id, b3.id)
        inst.rollback()  # everything outstanding goes back
        assert inst.list_batch_ids() == []
        first = inst.get_without_ack(40)
        assert list(first.entries) == list(b1.entries)
        inst.ack(first.id)
        acked = list(first.entries)
        rest = len(expected) - len(rows_of(acked))
        for msg in consume(lambda: inst.get(97, timeout=0.1), has_rows(rest)):
            acked.extend(msg.entries)
        assert rows_of(acked) == expected  # nothing lost, nothing twice
        check_transactions(acked)


def test_concurrent_writer_while_the_consumer_acks(mariadb: MariaDBDatabase) -> None:
    mariadb.execute("CREATE TABLE k (id INT PRIMARY KEY, v INT)")
    start = master_at(mariadb)
    history: dict[int, list[tuple[EventType, int]]] = defaultdict(list)
    total = 0

    def writer() -> None:
        nonlocal total
        with mariadb.connect() as conn, conn.cursor() as cur:
            for step in range(600):
                key = step % 40
                ops = history[key]
                if not ops or ops[-1][0] is EventType.DELETE:
                    cur.execute("INSERT INTO k VALUES (%s, %s)", (key, step))
                    ops.append((EventType.INSERT, step))
                elif step % 7 == 0:
                    cur.execute("DELETE FROM k WHERE id = %s", (key,))
                    ops.append((EventType.DELETE, ops[-1][1]))
                else:
                    if step % 5 == 0:  # a transaction of several changes
                        cur.execute("BEGIN")
                        cur.execute("UPDATE k SET v = %s WHERE id = %s", (step, key))
                        cur.execute("INSERT INTO k VALUES (%s, %s)", (1000 + step, step))
                        cur.execute("DELETE FROM k WHERE id = %s", (1000 + step,))
                        cur.execute("COMMIT")
                        history[1000 + step] += [(EventType.INSERT, step), (EventType.DELETE, step)]
                        total += 2
                    else:
                        cur.execute("UPDATE k SET v = %s WHERE id = %s", (step, key))
                    ops.append((EventType.UPDATE, step))
                total += 1

    thread = threading.Thread(target=writer)
    got: dict[int, list[tuple[EventType, int]]] = defaultdict(list)
    with Instance(config(start, rf"{mariadb.database}\.k")) as inst:
        thread.start()
        n = 0
        deadline = time.monotonic() + 40
        while thread.is_alive() or n < total:
            assert time.monotonic() < deadline, f"{n} of {total} rows"
            msg = inst.get_without_ack(64, timeout=0.02)
            if msg.id == EMPTY_MESSAGE_ID:
                continue
            if msg.id % 5 == 0:  # now and then the consumer fails and the batch comes again
                inst.rollback(msg.id)
                continue
            for _table, kind, key, v in rows_of(msg.entries):
                got[key].append((kind, v))
                n += 1
            inst.ack(msg.id)
        thread.join()
        assert n == total
        assert dict(got) == dict(history)


def test_two_destinations_in_one_embedded_server(mariadb: MariaDBDatabase) -> None:
    other = f"{mariadb.database}_b"
    mariadb.execute(f"CREATE DATABASE `{other}`")
    try:
        start = master_at(mariadb)
        db = mariadb.database
        with mariadb.connect() as conn, conn.cursor() as cur:
            for schema in (db, other):
                cur.execute(f"CREATE TABLE `{schema}`.a (id INT PRIMARY KEY, v VARCHAR(10))")
                cur.execute(f"CREATE TABLE `{schema}`.b (id INT PRIMARY KEY, v VARCHAR(10))")
            for i in range(30):
                cur.execute("BEGIN")
                for schema in (db, other):
                    for table in ("a", "b"):
                        cur.execute(f"INSERT INTO `{schema}`.{table} VALUES (%s, %s)", (i, f"{table}{i}"))
                cur.execute("COMMIT")
        one = config(start, rf"{db}\.a", destination="one", slave_id=7101)
        two = config(start, rf"{other}\..*", destination="two", slave_id=7102)
        with EmbeddedServer() as server:
            server.start_destination(one)
            server.start_destination(two)
            c1, c2 = ClientIdentity("one", 1001), ClientIdentity("two", 1001)
            server.subscribe(c2, filter=rf"{other}\.b")  # narrows "two" to table b
            got1 = [e for m in consume(lambda: server.get(c1, 50, 0.1), has_rows(30)) for e in m.entries]
            got2 = [e for m in consume(lambda: server.get(c2, 50, 0.1), has_rows(30)) for e in m.entries]
            assert rows_of(got1) == [("a", EventType.INSERT, i, f"a{i}") for i in range(30)]
            assert rows_of(got2) == [("b", EventType.INSERT, i, f"b{i}") for i in range(30)]
            assert {e.header.schema for e in got1 if e.entry_type is EntryType.ROWDATA} == {db}
            assert {e.header.schema for e in got2 if e.entry_type is EntryType.ROWDATA} == {other}
            # what follows the 30th row is its transaction's end at most (a get may return it later): no more rows
            assert rows_of(server.get(c1, 50, 0.5).entries) == []
            assert set(server.metrics()) == {"one", "two"}
    finally:
        mariadb.execute(f"DROP DATABASE IF EXISTS `{other}`")


def test_group_instance_merges_two_servers_in_time_order_transactions_whole(mariadb_factory: MariaDBFactory) -> None:
    servers = [mariadb_factory(), mariadb_factory()]
    for s in servers:
        s.execute("CREATE DATABASE shop")
        s.execute("CREATE TABLE shop.orders (id INT PRIMARY KEY, v VARCHAR(20))")
    members = [master_at(s) for s in servers]
    per_server = 120
    big = 400

    def write(index: int, server: MariaDBServer) -> None:
        base = index * 100_000
        with server.connect() as conn, conn.cursor() as cur:
            for i in range(per_server):
                cur.execute("BEGIN")
                for j in range(3):
                    key = base + i * 3 + j
                    cur.execute("INSERT INTO shop.orders VALUES (%s, %s)", (key, f"s{index}"))
                cur.execute("COMMIT")
                if index == 0 and i == per_server // 2:
                    cur.execute("BEGIN")  # a large transaction, handed off in parts
                    for j in range(big):
                        cur.execute("INSERT INTO shop.orders VALUES (%s, 'big')", (base + 50_000 + j,))
                    cur.execute("COMMIT")
                time.sleep(0.02)  # pacing: spread the writes over a few seconds of binlog time

    cfg = config(members[0], r"shop\.orders", destination="grouped", transaction_size=64, slave_id=7200)
    want = 2 * per_server * 3 + big
    with Instance.group(cfg, members) as inst:
        writers = [threading.Thread(target=write, args=(i, s)) for i, s in enumerate(servers)]
        for t in writers:
            t.start()
        entries: list[Entry] = []
        for msg in consume(lambda: inst.get_without_ack(200, timeout=0.1), has_rows(want), limit_s=40):
            entries.extend(msg.entries)
            inst.ack(msg.id)
        for t in writers:
            t.join()
        assert inst.get_without_ack(200, timeout=0.5).id == EMPTY_MESSAGE_ID
    rows = rows_of(entries)
    assert len(rows) == want and len({r[2] for r in rows}) == want  # all, once
    for index in range(len(servers)):  # each server's own order is kept
        mine = [r[2] for r in rows if r[2] // 100_000 == index]
        assert [k for k in mine if k % 100_000 < 50_000] == sorted(k for k in mine if k % 100_000 < 50_000)
    txns = check_transactions(entries)
    assert len(txns) == 2 * per_server + 1
    big_txn = [t for t in txns if len(t) > big]
    assert len(big_txn) == 1 and len(rows_of(big_txn[0])) == big
    assert {e.header.server_id for e in entries} == {s.server_id for s in servers}
    # merged in time order: transaction times never go back by a second or more (binlog times are whole seconds)
    times = [t[0].header.execute_time for t in txns]
    assert all(b >= a - 999 for a, b in itertools.pairwise(times)), times
    backwards = sum(1 for a, b in itertools.pairwise(times) if b < a)
    assert backwards <= 2, f"{backwards} backward steps in {times}"
    # and interleaved: both servers appear before the other one's last transaction
    servers_seq = [t[0].header.server_id for t in txns]
    switches = sum(1 for a, b in itertools.pairwise(servers_seq) if a != b)
    assert switches >= 2


def test_database_ddl_passes_the_filter_only_for_a_database_it_may_select(mariadb: MariaDBDatabase) -> None:
    """``CREATE/ALTER/DROP DATABASE`` of a schema no table of which the filter can select makes no entry (canal
    passes them all: a pipeline filtered to one schema saw every other schema's); of one it may select, it does."""
    db = mariadb.database
    others = [f"{db}_other", f"{db}_kept"]
    start = master_at(mariadb)
    try:
        with mariadb.connect() as conn, conn.cursor() as cur:
            for name in others:
                cur.execute(f"CREATE DATABASE `{name}`")
                cur.execute(f"ALTER DATABASE `{name}` CHARACTER SET utf8mb4")
                cur.execute(f"DROP DATABASE `{name}`")
            cur.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v VARCHAR(10))")
            cur.execute(f"INSERT INTO `{db}`.t VALUES (1, 'end')")
        with Instance(config(start, rf"{db}\..*,{db}_kept\.orders")) as inst:
            got = [e for m in consume(lambda: inst.get(50, 0.1), has_rows(1)) for e in m.entries]
        ddl = [e.row_change.sql for e in got if e.row_change is not None and e.row_change.is_ddl]
        kept = others[1]
        assert ddl == [
            f"CREATE DATABASE `{kept}`",
            f"ALTER DATABASE `{kept}` CHARACTER SET utf8mb4",
            f"DROP DATABASE `{kept}`",
            f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v VARCHAR(10))",
        ]
    finally:
        for name in others:
            mariadb.execute(f"DROP DATABASE IF EXISTS `{name}`")
