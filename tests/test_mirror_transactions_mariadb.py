"""The Delta mirror and transactions as the server committed them, on a real MariaDB through ``run_batches``:

* XA: rows logged at ``XA PREPARE`` are held until ``XA COMMIT`` (across batches and restarts), dropped at
  ``XA ROLLBACK``; ``XA COMMIT ... ONE PHASE`` is an ordinary transaction; an ``XA COMMIT`` whose ``XA PREPARE`` lies
  before the start position is mirrored with the PREPARE's rows the parser reads back; an XA transaction on a table
  the destination does not capture reaches the mirror as an empty one, so its ``XA COMMIT`` closes a transaction
  the mirror knows (in the stream, across restarts of the destination and the mirror, and read back);
* DML logged as statements (a session with ``binlog_format`` STATEMENT or MIXED) heals by default (its table is read
  again from there: the mirror equals SELECT), and under ``heal="stop"`` stops the capture with a typed error naming
  the statement and its position, nothing of it written; change rows that hold one anyway stop the mirror's batch.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

pytest.importorskip("deltalake")
import pyarrow as pa
from capture_configs import capture_config

from canal.config import InstanceConfig, MasterConfig, SnapshotConfig, StoreConfig
from canal.errors import NotRunningError, UnmodeledStatementError
from canal.instance import Instance
from canal.lake.apply.stops import MirrorStatementError
from canal.lake.settings import MODES
from canal.protocol import EntryType, EventType
from canal.spark import DeltaMirror, MirrorMode, run_batches
from canal.spark.testing import healed_by, master_position, run_caught_up
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration


@pytest.fixture
def conn(sessions: Callable[[], Any]) -> Any:
    return sessions()


def _config(mariadb: MariaDBDatabase, tmp_path: Path, start: tuple[str, int], heal: str = "snapshot") -> InstanceConfig:
    return capture_config(mariadb, tmp_path / "meta", start, "txn", heal=heal)


def _run(conn: Any, config: InstanceConfig, mirror: DeltaMirror, batch_size: int = 3) -> None:
    run_caught_up(conn, config, None, mirror, batch_size=batch_size)


def _select(mariadb: MariaDBDatabase) -> list[tuple[Any, ...]]:
    # another session: prepared XA rows are not visible to it
    return [tuple(r) for r in mariadb.execute(f"SELECT id, v FROM `{mariadb.database}`.t ORDER BY id")]


def _mirrored(mirror: DeltaMirror, db: str) -> list[tuple[Any, ...]]:
    if not mirror.table_path(db, "t").exists():
        return []
    return sorted((r["id"], r["v"]) for r in mirror.read(db, "t").to_pylist())


def _execute(conn: Any, *statements: str) -> None:
    with conn.cursor() as cur:
        for sql in statements:
            cur.execute(sql)


@pytest.mark.parametrize("mode", MODES)
def test_xa_prepared_rows_wait_for_commit_and_rollback_drops_them(
    mariadb: MariaDBDatabase, conn: Any, sessions: Callable[[], Any], tmp_path: Path, mode: MirrorMode
) -> None:
    db = mariadb.database
    config = _config(mariadb, tmp_path, master_position(conn))
    mirror = DeltaMirror(tmp_path / "mirror", mode=mode)
    _execute(
        conn,
        f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO `{db}`.t VALUES (1, 1), (5, 5)",
        # x1: an INSERT and an UPDATE, prepared, then rolled back
        "XA START 'x1'",
        f"INSERT INTO `{db}`.t VALUES (2, 2)",
        f"UPDATE `{db}`.t SET v = 9 WHERE id = 1",
        "XA END 'x1'",
        "XA PREPARE 'x1'",
        "XA ROLLBACK 'x1'",
    )
    x2 = sessions()  # prepared now, committed after the mirror's restart
    _execute(
        x2,
        "XA START 'x2'",
        f"INSERT INTO `{db}`.t VALUES (3, 3)",
        f"UPDATE `{db}`.t SET v = 50 WHERE id = 5",
        "XA END 'x2'",
        "XA PREPARE 'x2'",
    )
    _execute(
        conn,  # one phase: an ordinary transaction
        "XA START 'x3'",
        f"INSERT INTO `{db}`.t VALUES (4, 4)",
        "XA END 'x3'",
        "XA COMMIT 'x3' ONE PHASE",
    )
    _run(conn, config, mirror)
    assert _select(mariadb) == [(1, 1), (4, 4), (5, 5)]
    assert _mirrored(mirror, db) == _select(mariadb)  # x2's prepared rows are held, x1's dropped
    _execute(x2, "XA COMMIT 'x2'")
    _execute(conn, f"INSERT INTO `{db}`.t VALUES (6, 6)")
    mirror.close()
    mirror = DeltaMirror(tmp_path / "mirror", mode=mode)  # a restarted mirror: the held rows are on disk
    _run(conn, config, mirror)
    assert _select(mariadb) == [(1, 1), (3, 3), (4, 4), (5, 50), (6, 6)]
    assert _mirrored(mirror, db) == _select(mariadb)
    # an xid used again after its commit is a new transaction
    _execute(
        conn,
        "XA START 'x2'",
        f"DELETE FROM `{db}`.t WHERE id = 3",
        "XA END 'x2'",
        "XA PREPARE 'x2'",
        "XA ROLLBACK 'x2'",
    )
    _run(conn, config, mirror, batch_size=1)
    assert _mirrored(mirror, db) == _select(mariadb) == [(1, 1), (3, 3), (4, 4), (5, 50), (6, 6)]


def test_an_instance_marks_the_entries_of_an_xa_transaction(
    mariadb: MariaDBDatabase, conn: Any, tmp_path: Path
) -> None:
    db = mariadb.database
    config = _config(mariadb, tmp_path, master_position(conn))
    _execute(
        conn,
        f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v INT)",
        "XA START 'x1'",
        f"INSERT INTO `{db}`.t VALUES (2, 2)",
        "XA END 'x1'",
        "XA PREPARE 'x1'",
        "XA COMMIT 'x1'",
    )
    seen: list[tuple[EntryType, EventType, dict[str, str]]] = []
    deadline = time.monotonic() + 30
    with Instance(config) as inst:
        while not any(e is EventType.XACOMMIT for _, e, _ in seen):
            assert time.monotonic() < deadline, f"no XACOMMIT entry came; got {seen}"
            for entry in inst.get(100, timeout=0.5).entries:
                seen.append((entry.entry_type, entry.header.event_type, dict(entry.header.props)))
    xid = "X'7831',X'',1"
    marked = [(t, e, p) for t, e, p in seen if p]
    assert marked == [
        (EntryType.TRANSACTIONBEGIN, EventType.QUERY, {"XA_TYPE": "XA_START", "XA_XID": xid}),
        (EntryType.ROWDATA, EventType.INSERT, {"XA_XID": xid}),
        (EntryType.TRANSACTIONEND, EventType.QUERY, {"XA_TYPE": "XA_END", "XA_XID": xid}),
        (EntryType.ROWDATA, EventType.XACOMMIT, {"XA_TYPE": "XA_COMMIT", "XA_XID": xid}),
    ]


def test_an_xa_commit_prepared_before_the_start_is_mirrored_with_the_rows_read_back(
    mariadb: MariaDBDatabase, conn: Any, sessions: Callable[[], Any], tmp_path: Path
) -> None:
    db = mariadb.database
    _execute(conn, f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v INT)")
    early, dropped = sessions(), sessions()
    _execute(
        early,
        "XA START 'early'",
        f"INSERT INTO `{db}`.t VALUES (2, 2), (6, 6)",
        f"DELETE FROM `{db}`.t WHERE id = 6",
        "XA END 'early'",
        "XA PREPARE 'early'",
    )
    _execute(
        dropped, "XA START 'dropped'", f"INSERT INTO `{db}`.t VALUES (7, 7)", "XA END 'dropped'", "XA PREPARE 'dropped'"
    )
    config = _config(mariadb, tmp_path, master_position(conn))  # after both XA PREPAREs
    _execute(conn, f"INSERT INTO `{db}`.t VALUES (1, 1)")
    mirror = DeltaMirror(tmp_path / "mirror")
    _run(conn, config, mirror)
    assert _mirrored(mirror, db) == [(1, 1)]  # the table's earlier rows are not in the stream
    _execute(dropped, "XA ROLLBACK 'dropped'")
    _execute(conn, f"INSERT INTO `{db}`.t VALUES (3, 3)")
    version = mirror.version(db, "t")
    _run(conn, config, mirror)
    assert _mirrored(mirror, db) == [(1, 1), (3, 3)]  # the rollback of a transaction never seen: nothing
    assert mirror.version(db, "t") > version
    _execute(early, "XA COMMIT 'early'")
    _execute(conn, f"INSERT INTO `{db}`.t VALUES (4, 4)")
    _run(conn, config, mirror, batch_size=1)  # the read-back rows and their commit across batches
    assert _mirrored(mirror, db) == _select(mariadb) == [(1, 1), (2, 2), (3, 3), (4, 4)]


def test_a_snapshot_taken_while_an_xa_transaction_is_prepared_mirrors_its_commit(
    mariadb: MariaDBDatabase, conn: Any, sessions: Callable[[], Any], tmp_path: Path
) -> None:
    """The snapshot's SELECT does not see the prepared rows and its binlog position lies after the XA PREPARE: the
    rows come with the XA COMMIT, read back from the binlog."""
    db = mariadb.database
    _execute(conn, f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v INT)", f"INSERT INTO `{db}`.t VALUES (1, 1), (5, 5)")
    prepared = sessions()
    _execute(
        prepared,
        "XA START 'snap'",
        f"INSERT INTO `{db}`.t VALUES (2, 2)",
        f"UPDATE `{db}`.t SET v = 10 WHERE id = 1",
        f"DELETE FROM `{db}`.t WHERE id = 5",
        "XA END 'snap'",
        "XA PREPARE 'snap'",
    )
    master = mariadb.master()
    config = InstanceConfig(
        destination="snap",
        master=MasterConfig(address=master.address, username=master.username, password=master.password),
        filter_regex=rf"{db}\..*",
        store=StoreConfig(batch_mode="ITEMSIZE"),
        meta_mode="file",
        meta_dir=str(tmp_path / "meta"),
        snapshot=SnapshotConfig(mode="initial", tables=[f"{db}.t"]),
    )
    mirror = DeltaMirror(tmp_path / "mirror")
    journal = tmp_path / "journal.json"

    def run(*statements: tuple[Any, str]) -> None:
        with Instance(config) as inst:
            for session, sql in statements:  # written while the instance runs: a binlog position to run up to
                _execute(session, sql)
            end = master_position(conn)
            run_batches(inst, None, mirror, batch_size=2, timeout=0.5, journal=journal, until=lambda s: s.reached(*end))

    run((conn, f"INSERT INTO `{db}`.t VALUES (6, 6)"))
    assert _mirrored(mirror, db) == _select(mariadb) == [(1, 1), (5, 5), (6, 6)]
    run((prepared, "XA COMMIT 'snap'"), (conn, f"INSERT INTO `{db}`.t VALUES (3, 3)"))
    assert _mirrored(mirror, db) == _select(mariadb) == [(1, 10), (2, 2), (3, 3), (6, 6)]


@pytest.mark.parametrize("path", ["rows", "typed"])
def test_an_xa_transaction_on_a_table_not_captured_reaches_the_mirror_empty(
    mariadb: MariaDBDatabase, conn: Any, sessions: Callable[[], Any], tmp_path: Path, path: str
) -> None:
    """Only ``t`` is captured; XA transactions write ``other``. Each one's PREPARE group reaches the consumer empty
    (never dropped as an empty transaction), so the mirror knows the transaction its XA COMMIT / ROLLBACK ends --
    prepared and ended in one run, prepared before a restart of both and committed after it, and prepared before
    the stream's start (read back: nothing captured)."""
    db = mariadb.database
    _execute(
        conn,
        f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v INT)",
        f"CREATE TABLE `{db}`.other (id INT PRIMARY KEY, v INT)",
    )
    early = sessions()
    _execute(
        early, "XA START 'early'", f"INSERT INTO `{db}`.other VALUES (1, 1)", "XA END 'early'", "XA PREPARE 'early'"
    )
    config = attrs.evolve(_config(mariadb, tmp_path, master_position(conn)), filter_regex=rf"{db}\.t")
    batches: list[Any] = []

    def run(mirror: DeltaMirror) -> None:
        def apply(batch: Any, batch_id: int) -> None:
            batches.append(batch)
            mirror.apply(batch, batch_id)  # change rows; a DeltaMirror itself is handed typed batches

        run_caught_up(conn, config, None, apply if path == "rows" else mirror, batch_size=3)

    mirror = DeltaMirror(tmp_path / "mirror")
    _execute(
        conn,
        f"INSERT INTO `{db}`.t VALUES (1, 1)",
        "XA START 'x1'",
        f"INSERT INTO `{db}`.other VALUES (2, 2)",
        "XA END 'x1'",
        "XA PREPARE 'x1'",
        "XA COMMIT 'x1'",
        "XA START 'x2'",
        f"INSERT INTO `{db}`.other VALUES (3, 3)",
        "XA END 'x2'",
        "XA PREPARE 'x2'",
        "XA ROLLBACK 'x2'",
        f"INSERT INTO `{db}`.t VALUES (2, 2)",
    )
    held = sessions()
    _execute(held, "XA START 'x3'", f"INSERT INTO `{db}`.other VALUES (4, 4)", "XA END 'x3'", "XA PREPARE 'x3'")
    run(mirror)
    assert _mirrored(mirror, db) == [(1, 1), (2, 2)]
    mirror.close()
    _execute(held, "XA COMMIT 'x3'")  # prepared before the restart of the destination and the mirror
    _execute(early, "XA COMMIT 'early'")  # prepared before the stream's start: read back, nothing captured
    _execute(conn, f"INSERT INTO `{db}`.t VALUES (3, 3)")
    mirror = DeltaMirror(tmp_path / "mirror")
    run(mirror)
    assert _mirrored(mirror, db) == _select(mariadb) == [(1, 1), (2, 2), (3, 3)]
    if path == "rows":  # the entries say what happened: each XA transaction prepared, then ended
        kinds = [k for batch in batches for k in batch.column("type").to_pylist() if k.startswith("XA")]
        assert kinds == ["XAPREPARE", "XACOMMIT", "XAPREPARE", "XAROLLBACK", "XAPREPARE", "XACOMMIT", "XACOMMIT"]
    mirror.close()


@pytest.mark.parametrize("binlog_format", ["STATEMENT", "MIXED"])
def test_dml_logged_as_a_statement_heals_or_stops_the_capture(
    mariadb: MariaDBDatabase, conn: Any, tmp_path: Path, binlog_format: str
) -> None:
    db = mariadb.database
    start = master_position(conn)
    config = _config(mariadb, tmp_path, start, heal="stop")
    _execute(conn, f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v INT)", f"INSERT INTO `{db}`.t VALUES (1, 1)")
    mirror = DeltaMirror(tmp_path / "mirror")
    _run(conn, config, mirror)
    version = None
    _execute(
        conn,
        f"INSERT INTO `{db}`.t VALUES (2, 2)",  # rows
        f"SET SESSION binlog_format = '{binlog_format}'",
        f"UPDATE `{db}`.t SET v = v + 10 WHERE id = 1",
        "SET SESSION binlog_format = 'ROW'",
    )
    for _ in range(2):
        with pytest.raises(NotRunningError) as caught:
            _run(conn, config, mirror)
        error = caught.value.__cause__
        assert isinstance(error, UnmodeledStatementError), caught.value
        assert error.statement == f"UPDATE `{db}`.t SET v = v + 10 WHERE id = 1" and error.tables == (f"{db}.t",)
        assert re.fullmatch(r"mysql-bin\.\d+:\d+", error.position or "")
        # the transactions before the statement's are mirrored, nothing of it (again after a restart)
        assert _mirrored(mirror, db) == [(1, 1), (2, 2)]
        assert version is None or mirror.version(db, "t") == version
        version = mirror.version(db, "t")
    # change rows that hold such a statement anyway (from another source) stop the mirror's batch too
    rows = pa.table(
        {
            "seq": [1], "schema": [db], "table": ["t"], "type": ["UPDATE"], "is_ddl": [False],
            "sql": [f"UPDATE `{db}`.t SET v = 0"], "keys": [None], "old_keys": [None], "after": [None],
            "columns": [None],
        }
    )  # fmt: skip
    with pytest.raises(MirrorStatementError, match=r"'UPDATE `.*`\.t SET v = 0'"):
        mirror(rows, 10**12)
    assert mirror.version(db, "t") == version
    # healing (the default): t is read again from the statement on, and the mirror equals SELECT
    healing = capture_config(mariadb, tmp_path / "healing", start, "healing")
    healed = DeltaMirror(tmp_path / "healed")
    end = master_position(conn)
    with Instance(healing) as inst:
        run_batches(inst, None, healed, batch_size=3, timeout=0.5, journal=tmp_path / "j", until=healed_by(inst, end))
        assert inst.metrics().heals == 1
    assert _mirrored(healed, db) == _select(mariadb) == [(1, 11), (2, 2)]
