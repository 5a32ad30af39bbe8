"""The statement contract on a real MariaDB (docs/concepts/fail-closed.md): what the capture follows equals ``SELECT``
in the mirror; what it cannot follow heals under the default ``heal="snapshot"`` -- the tables are read again in the
stream from the statement on, and the mirror equals ``SELECT`` with no stop -- and under ``heal="stop"`` stops typed,
naming the statement, its tables and its position, with the cursor before the statement and nothing of it in the
mirror.

* ``SET STATEMENT sql_mode='' FOR ALTER ...`` narrowings are mirrored as the server converted the values (they read
  as a SET before: the mirror kept 1000 where ``SELECT`` shows 127), a label dropped from an ENUM and a character a
  new charset lacks too ('' and '?'); a conversion the mirror cannot repeat exactly heals by default (the capture
  asks the mirror's model: only that one is read again) and stops with ``MirrorConversionError`` under
  ``heal="stop"`` (every pair: tests/test_mirror_conversions_mariadb.py);
* partition maintenance: what keeps the rows is followed; TRUNCATE / DROP / EXCHANGE / CONVERT PARTITION,
  CONVERT TABLE ... TO PARTITION, a REORGANIZE of LIST partitions (MariaDB deletes the rows whose values the new
  lists lack, without an error) and REPAIR TABLE stop, each naming both tables where there are two -- one
  destination per statement, capturing only its tables, so the others (on tables it leaves out) must not stop it;
* a captured table renamed to a name the filter leaves out leaves the mirror;
* online schema changes: pt-online-schema-change run for real while the test writes rows, and gh-ost's cut-over
  replayed as its documentation describes it, are followed exactly when their tables are captured, and stop at the
  cut-over when only the migrated table is;
* what the parser refuses -- here statement-format LOAD DATA into a captured table (one into a table the destination
  leaves out goes by) -- stops the destination: not running, counted, typed, what came before it handed out.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

pytest.importorskip("deltalake")

from canal.config import InstanceConfig, StoreConfig
from canal.errors import NotRunningError, ParseError, UnmodeledStatementError
from canal.instance import Instance
from canal.lake.types import MirrorConversionError
from canal.protocol import EventType
from canal.spark import DeltaMirror, run_batches
from canal.spark.testing import healed_by, master_position
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration


def _config(
    db: MariaDBDatabase, tmp: Path, start: tuple[str, int], name: str, tables: str, heal: str = "stop"
) -> InstanceConfig:
    return InstanceConfig(
        destination=name,
        master=db.master(start),
        filter_regex=",".join(rf"{db.database}\.{t}" for t in tables.split(",")),
        store=StoreConfig(batch_mode="ITEMSIZE"),
        meta_mode="file",
        meta_dir=str(tmp / name / "meta"),
        heal=heal,
    )


def _healed(conn: Any, config: InstanceConfig, mirror: Any, journal: Path) -> int:
    """Run a destination that heals (``heal="snapshot"``, the default) into ``mirror`` until it handled what the
    server has written and its heals are over; the tables it healed."""
    end = master_position(conn)
    with Instance(attrs.evolve(config, heal="snapshot")) as inst:
        run_batches(inst, None, mirror, batch_size=50, timeout=0.5, journal=journal, until=healed_by(inst, end))
        metrics = inst.metrics()
    assert metrics.running and metrics.errors == 0, metrics.last_error
    return metrics.heals


def _run(conn: Any, config: InstanceConfig, mirror: Any) -> Instance:
    """Run a destination into ``mirror`` until it handled what the server has written; the instance (stopped)."""
    end = master_position(conn)
    inst = Instance(config)
    with inst:
        run_batches(inst, None, mirror, batch_size=50, timeout=0.5, until=lambda stats: stats.reached(*end))
    return inst


def _stopped(conn: Any, config: InstanceConfig, mirror: Any) -> tuple[UnmodeledStatementError, Any]:
    """Run a destination that must stop on a statement: its typed error and its cursor's position."""
    end = master_position(conn)
    with Instance(config) as inst:
        with pytest.raises(NotRunningError) as caught:
            run_batches(inst, None, mirror, batch_size=50, timeout=0.5, until=lambda stats: stats.reached(*end))
        metrics = inst.metrics()
        assert not metrics.running and metrics.errors == 1 and "UnmodeledStatementError" in (metrics.last_error or "")
        cursor = inst.get_cursor()
    error = caught.value.__cause__
    assert isinstance(error, UnmodeledStatementError), caught.value
    return error, cursor


def _execute(conn: Any, *statements: str) -> None:
    with conn.cursor() as cur:
        for sql in statements:
            cur.execute(sql)


def _rows(db: MariaDBDatabase, table: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in db.execute(f"SELECT * FROM `{db.database}`.`{table}` ORDER BY 1")]


def _mirrored(mirror: DeltaMirror, db: str, table: str) -> list[tuple[Any, ...]] | None:
    if not mirror.table_path(db, table).exists():
        return None
    rows = mirror.read(db, table).to_pylist()
    return sorted(tuple(r.values()) for r in rows)


def _offset_of(conn: Any, text: str, kind: str = "Query") -> tuple[str, int]:
    """The binlog position of the event of type ``kind`` whose description holds ``text``."""
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        files = [row[0] for row in cur.fetchall()]
        for name in reversed(files):
            cur.execute(f"SHOW BINLOG EVENTS IN '{name}'")
            for row in cur.fetchall():
                if row[2] == kind and text in row[5]:
                    return name, int(row[1])
    raise AssertionError(f"no {kind} event holds {text!r}")


@pytest.fixture
def conn(mariadb: MariaDBDatabase) -> Iterator[Any]:
    connection = mariadb.connect(autocommit=True)
    yield connection
    connection.close()


def test_set_statement_narrowings_are_mirrored_or_stop_typed(
    mariadb: MariaDBDatabase, conn: Any, tmp_path: Path
) -> None:
    db = mariadb.database
    start = master_position(conn)
    config = _config(mariadb, tmp_path, start, "narrow", "nm")
    mirror = DeltaMirror(tmp_path / "mirror")
    _execute(
        conn,
        f"CREATE TABLE `{db}`.nm (id INT PRIMARY KEY, n INT, u INT, s VARCHAR(10), z INT, w INT, e ENUM('a', 'b'))",
        f"INSERT INTO `{db}`.nm VALUES (1, 1000, -5, 'abcdefgh', NULL, 1000, 'a'), (2, -3, 7, 'xy', 4, 1, 'b')",
    )
    # a destination that heals runs from before the ALTERs, as it would in production: its schema history holds the
    # layouts they convert from
    healed, healing = DeltaMirror(tmp_path / "healed"), _config(mariadb, tmp_path, start, "healing", "nm,cc")
    _execute(conn, f"CREATE TABLE `{db}`.cc (id INT PRIMARY KEY, s VARCHAR(10)) DEFAULT CHARSET=utf8mb4")
    assert _healed(conn, healing, healed, tmp_path / "journal") == 0
    with pytest.raises(Exception, match="Out of range"):  # the session's strict mode refuses it: nothing is logged
        _execute(conn, f"ALTER TABLE `{db}`.nm MODIFY w TINYINT")
    _execute(
        conn,
        f"SET STATEMENT sql_mode='' FOR ALTER TABLE `{db}`.nm MODIFY n TINYINT",
        f"SET STATEMENT sql_mode='', max_statement_time=60 FOR ALTER TABLE `{db}`.nm MODIFY u INT UNSIGNED",
        f"SET STATEMENT sql_mode='' FOR ALTER TABLE `{db}`.nm MODIFY s VARCHAR(3)",
        f"SET STATEMENT sql_mode='' FOR ALTER TABLE `{db}`.nm MODIFY z INT NOT NULL",
        f"INSERT INTO `{db}`.nm VALUES (3, 5, 6, 'new', 7, 8, 'a')",
    )
    assert _rows(mariadb, "nm")[0] == (1, 127, 0, "abc", 0, 1000, "a")  # what the server did
    _run(conn, config, mirror)
    assert _mirrored(mirror, db, "nm") == _rows(mariadb, "nm")
    # a label the values still use goes: the server stores '' (lax), and so does the mirror
    _execute(conn, f"SET STATEMENT sql_mode='' FOR ALTER TABLE `{db}`.nm MODIFY e ENUM('a')")
    _run(conn, config, mirror)
    assert _rows(mariadb, "nm")[1][-1] == "" and _mirrored(mirror, db, "nm") == _rows(mariadb, "nm")
    # so does a character set that cannot hold a value: the server made it '?'
    converting = _config(mariadb, tmp_path, start, "convert", "cc")
    cc = DeltaMirror(tmp_path / "cc")
    with mariadb.connect(autocommit=True, charset="utf8mb4") as session:
        _execute(session, f"INSERT INTO `{db}`.cc VALUES (1, 'é€😀'), (2, 'plain')")
        _run(conn, converting, cc)
        _execute(session, f"SET STATEMENT sql_mode='' FOR ALTER TABLE `{db}`.cc CONVERT TO CHARACTER SET latin1")
    assert _rows(mariadb, "cc")[0] == (1, "é€?")
    _run(conn, converting, cc)
    assert _mirrored(cc, db, "cc") == _rows(mariadb, "cc")
    # a conversion the mirror does not model stops typed, nothing written: FLOAT to DOUBLE shows the float32 exactly
    _execute(conn, f"ALTER TABLE `{db}`.nm ADD COLUMN f FLOAT", f"UPDATE `{db}`.nm SET f = 1.1")
    _run(conn, config, mirror)
    before = _mirrored(mirror, db, "nm")
    version = mirror.version(db, "nm")
    _execute(conn, f"ALTER TABLE `{db}`.nm MODIFY f DOUBLE")
    with pytest.raises(MirrorConversionError, match=r"column 'f' from float to double") as stopped:
        _run(conn, config, mirror)
    assert stopped.value.table == f"{db}.nm" and stopped.value.column == "f"
    assert mirror.version(db, "nm") == version and _mirrored(mirror, db, "nm") == before
    # healing (the default), the capture reads nm again from the one statement the mirror would not repeat (FLOAT to
    # DOUBLE) and follows the conversions it models as plain DDL: equal, one heal
    _execute(conn, f"INSERT INTO `{db}`.nm VALUES (4, 1, 2, 'x', 3, 4, 'a', 2.5)", f"UPDATE `{db}`.cc SET s = 'z'")
    assert _healed(conn, healing, healed, tmp_path / "journal") == 1 and healed.metrics().heals == 1
    for table in ("nm", "cc"):
        assert _mirrored(healed, db, table) == _rows(mariadb, table), table


# the statements that stop: (destination, the tables it captures, setup, the statement, the tables it names, the
# captured table to look at)
_RANGE = (
    "PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (10), PARTITION p1 VALUES LESS THAN (20), "
    "PARTITION p2 VALUES LESS THAN MAXVALUE)"
)
_STOPS = [
    ("trunc", "tr", ["CREATE TABLE tr (id INT PRIMARY KEY, v INT) " + _RANGE], "ALTER TABLE tr TRUNCATE PARTITION p0",
     ("tr",), "tr"),
    ("dropp", "dp", ["CREATE TABLE dp (id INT PRIMARY KEY, v INT) " + _RANGE], "ALTER TABLE dp DROP PARTITION p1",
     ("dp",), "dp"),
    # only the plain table is captured: the exchange swaps its rows all the same
    ("exch", "ex_q", ["CREATE TABLE ex (id INT PRIMARY KEY, v INT) " + _RANGE,
                      "CREATE TABLE ex_q (id INT PRIMARY KEY, v INT)"],
     "ALTER TABLE ex EXCHANGE PARTITION p0 WITH TABLE ex_q", ("ex", "ex_q"), "ex_q"),
    ("conv", "cv", ["CREATE TABLE cv (id INT PRIMARY KEY, v INT) " + _RANGE],
     "ALTER TABLE cv CONVERT PARTITION p2 TO TABLE cv_out", ("cv", "cv_out"), "cv"),
    ("convt", "ct_in", ["CREATE TABLE ct (id INT PRIMARY KEY, v INT) PARTITION BY RANGE (id) "
                        "(PARTITION p0 VALUES LESS THAN (20))", "CREATE TABLE ct_in (id INT PRIMARY KEY, v INT)"],
     "ALTER TABLE ct CONVERT TABLE ct_in TO PARTITION p1 VALUES LESS THAN MAXVALUE", ("ct", "ct_in"), "ct_in"),
    # LIST partitions reorganized without a value some rows hold: MariaDB deletes those rows, with no error
    ("reorg", "lr", ["CREATE TABLE lr (id INT PRIMARY KEY, v INT) PARTITION BY LIST (id) "
                     "(PARTITION a VALUES IN (1, 11), PARTITION b VALUES IN (21))"],
     "ALTER TABLE lr REORGANIZE PARTITION a, b INTO (PARTITION c VALUES IN (1, 11))", ("lr",), "lr"),
    ("repair", "rp", ["CREATE TABLE rp (id INT PRIMARY KEY, v INT)"], "REPAIR TABLE rp", ("rp",), "rp"),
]  # fmt: skip


def _rows_if_any(db: MariaDBDatabase, table: str) -> list[tuple[Any, ...]] | None:
    if not db.execute(f"SHOW TABLES FROM `{db.database}` LIKE '{table}'"):
        return None
    return _rows(db, table)


def test_partition_maintenance_is_followed_where_rows_stay_and_stops_where_they_change(
    mariadb: MariaDBDatabase, conn: Any, tmp_path: Path
) -> None:
    db = mariadb.database
    start = master_position(conn)
    _execute(conn, f"USE `{db}`")
    for stop in _STOPS:
        _execute(conn, *stop[2])
    for table in ("tr", "dp", "ex", "cv", "lr"):
        _execute(conn, f"INSERT INTO {table} VALUES (1, 1), (11, 11), (21, 21)")
    _execute(
        conn, "INSERT INTO ex_q VALUES (5, 50)", "INSERT INTO ct VALUES (1, 1)", "INSERT INTO ct_in VALUES (30, 3)"
    )
    _execute(conn, "INSERT INTO rp VALUES (1, 1)")
    # what keeps the rows, on tables a "keep" destination captures (and two captured tables renamed out of it)
    _execute(
        conn,
        "CREATE TABLE keep (id INT PRIMARY KEY, v INT) " + _RANGE,
        "CREATE TABLE hsh (id INT PRIMARY KEY, v INT) PARTITION BY HASH (id) PARTITIONS 2",
        "CREATE TABLE gone (id INT PRIMARY KEY)",
        "CREATE TABLE gone2 (id INT PRIMARY KEY)",
        "INSERT INTO keep VALUES (1, 1), (11, 11), (21, 21), (31, 31)",
        "INSERT INTO hsh VALUES (1, 1), (2, 2), (3, 3)",
        "INSERT INTO gone VALUES (1)",
        "INSERT INTO gone2 VALUES (1)",
    )
    before = {stop[5]: _rows(mariadb, stop[5]) for stop in _STOPS}
    # a destination that heals, capturing every table a statement below changes unlogged, runs from before them
    captured = ",".join(stop[1] for stop in _STOPS)
    healed, healing = DeltaMirror(tmp_path / "healed"), _config(mariadb, tmp_path, start, "healing", captured)
    assert _healed(conn, healing, healed, tmp_path / "journal") == 0
    _execute(conn, *(stop[3] for stop in _STOPS))
    _execute(
        conn,
        "OPTIMIZE TABLE keep",
        "ANALYZE TABLE keep PERSISTENT FOR ALL",
        "ALTER TABLE keep REBUILD PARTITION p0, p1",
        "ALTER TABLE keep REORGANIZE PARTITION p2 INTO (PARTITION p2a VALUES LESS THAN (30), "
        "PARTITION p2b VALUES LESS THAN MAXVALUE)",
        "ALTER TABLE keep REMOVE PARTITIONING",
        "ALTER TABLE keep PARTITION BY HASH (id) PARTITIONS 3",
        "ALTER TABLE hsh ADD PARTITION PARTITIONS 2",
        "ALTER TABLE hsh COALESCE PARTITION 3",
        "ALTER TABLE keep ENGINE=InnoDB, ALGORITHM=COPY",
        "INSERT INTO keep VALUES (41, 41)",
        "RENAME TABLE gone TO gone_archive",
        "ALTER TABLE gone2 RENAME TO gone2_old",
    )
    keep = DeltaMirror(tmp_path / "keep")
    _run(conn, _config(mariadb, tmp_path, start, "keep", "keep,hsh,gone,gone2"), keep)
    assert _mirrored(keep, db, "keep") == _rows(mariadb, "keep") and _mirrored(keep, db, "hsh") == _rows(mariadb, "hsh")
    # the renamed tables left the capture: the mirror holds neither their old nor their new names
    assert {t for _db, t in keep.tables()} == {"keep", "hsh"}
    for name, tables, _setup, statement, named, table in _STOPS:
        mirror = DeltaMirror(tmp_path / name / "mirror")
        error, cursor = _stopped(conn, _config(mariadb, tmp_path, start, name, tables), mirror)
        where = _offset_of(conn, statement)
        assert error.position == f"{where[0]}:{where[1]}" and error.statement == statement, error
        assert error.tables == tuple(f"{db}.{t}" for t in named) and statement in str(error), error
        # the cursor is before the statement; the mirror holds the rows as they were before it
        assert cursor is not None and (cursor.position.journal_name, cursor.position.position) < where
        assert _mirrored(mirror, db, table) == before[table]
        if name != "repair":  # (REPAIR does nothing to an InnoDB table: it stops all the same)
            assert _rows_if_any(mariadb, table) != before[table]
    # healing (the default): each table is read again from its statement on, and every mirrored table equals
    # SELECT -- ct_in, taken into a partition, is gone
    _execute(conn, "INSERT INTO tr VALUES (2, 2)", "UPDATE dp SET v = 0", "DELETE FROM cv WHERE id = 1")
    assert _healed(conn, healing, healed, tmp_path / "journal") == len(_STOPS)
    for stop in _STOPS:
        assert _mirrored(healed, db, stop[1]) == _rows_if_any(mariadb, stop[1]), stop[1]
    assert {t for _db, t in healed.tables()} == {stop[1] for stop in _STOPS} - {"ct_in"}


def test_pt_online_schema_change_is_followed_with_its_tables_and_stops_at_its_cut_over_without(
    mariadb: MariaDBDatabase, conn: Any, tmp_path: Path
) -> None:
    tool = shutil.which("pt-online-schema-change")
    assert tool is not None, "pt-online-schema-change is missing: scripts/setup.sh installs Debian's percona-toolkit"
    db = mariadb.database
    start = master_position(conn)
    _execute(conn, f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY AUTO_INCREMENT, v INT, note VARCHAR(20))")
    _execute(conn, f"INSERT INTO `{db}`.t (v, note) VALUES " + ", ".join(f"({i}, 'row {i}')" for i in range(300)))
    # the destinations run before the migration, as they would in production: their schema histories follow the
    # tool's tables from their creation on (they know _t_new has no foreign key: a row its delete trigger did not
    # find is no cascade)
    everything, only = DeltaMirror(tmp_path / "all"), DeltaMirror(tmp_path / "only")
    healed = DeltaMirror(tmp_path / "healed")
    _run(conn, _config(mariadb, tmp_path, start, "all", ".*"), everything)
    _run(conn, _config(mariadb, tmp_path, start, "only", "t"), only)
    _healed(conn, _config(mariadb, tmp_path, start, "healing", "t"), healed, tmp_path / "journal")
    done = threading.Event()
    written: list[int] = []

    def write() -> None:  # the application goes on writing while the tool copies and swaps
        session = mariadb.connect(autocommit=True)
        try:
            i = 0
            while not done.is_set():
                with session.cursor() as cur:
                    cur.execute(f"INSERT INTO `{db}`.t (v, note) VALUES (%s, 'new')", (1000 + i,))
                    cur.execute(f"UPDATE `{db}`.t SET v = v + 1 WHERE id = %s", (i % 300 + 1,))
                    cur.execute(f"DELETE FROM `{db}`.t WHERE id = %s", (300 - i % 150,))
                written.append(i)
                i += 1
        finally:
            session.close()

    writer = threading.Thread(target=write)
    writer.start()
    try:
        result = subprocess.run(
            [tool, "--no-version-check", "--recursion-method=none", "--chunk-size=20", "--execute",
             "--alter", "ADD COLUMN extra INT NOT NULL DEFAULT 7, MODIFY note VARCHAR(40)",
             f"h={mariadb.host},P={mariadb.port},u=root,D={db},t=t"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    finally:
        done.set()
        writer.join()
    assert result.returncode == 0, result.stdout + result.stderr
    assert written, "the application wrote during the migration"
    # its tables captured: the migration is followed, the mirror equals SELECT (and holds no tool's table)
    _run(conn, _config(mariadb, tmp_path, start, "all", ".*"), everything)
    assert _mirrored(everything, db, "t") == _rows(mariadb, "t")
    assert {t for _db, t in everything.tables()} == {"t"}
    # only t captured: the cut-over moves the tool's copy under t's name -- a stop naming t
    error, cursor = _stopped(conn, _config(mariadb, tmp_path, start, "only", "t"), only)
    where = _offset_of(conn, "_t_new` TO ")
    assert error.shape == "RENAME TABLE onto a captured name" and error.position == f"{where[0]}:{where[1]}"
    assert (
        f"{db}.t" in error.tables
        and cursor is not None
        and (cursor.position.journal_name, cursor.position.position) < where
    )
    assert {t for _db, t in only.tables()} == {"t"}
    # healing (the default): t is read again from the cut-over on, in its new layout -- equal, no tool's table
    assert _healed(conn, _config(mariadb, tmp_path, start, "healing", "t"), healed, tmp_path / "journal") == 1
    assert _mirrored(healed, db, "t") == _rows(mariadb, "t") and {t for _db, t in healed.tables()} == {"t"}


def test_gh_ost_cut_over_is_followed_with_its_tables_and_stops_without(
    mariadb: MariaDBDatabase, conn: Any, tmp_path: Path
) -> None:
    db = mariadb.database
    start = master_position(conn)
    q = f"`{db}`."
    # gh-ost's statements (doc/cut-over.md, go/logic/applier.go): its changelog and ghost tables, the row copy, the
    # changes it applies from the binlog, then the atomic cut-over
    _execute(
        conn,
        f"CREATE TABLE {q}t (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO {q}t VALUES " + ", ".join(f"({i}, {i})" for i in range(1, 41)),
        f"create /* gh-ost */ table {q}_t_ghc (id bigint auto_increment, last_update timestamp not null DEFAULT "
        "CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, hint varchar(64) charset ascii not null, value "
        "varchar(4096) charset ascii not null, primary key(id), unique key hint_uidx(hint)) auto_increment=256",
        f"create /* gh-ost */ table {q}_t_gho like {q}t",
        f"alter /* gh-ost */ table {q}_t_gho add column w int not null default 3",
        f"insert /* gh-ost */ into {q}_t_ghc (id, hint, value) values (NULLIF(2, 0), 'state', 'migrating') "
        "on duplicate key update last_update=NOW(), value=VALUES(value)",
        f"insert /* gh-ost */ ignore into {q}_t_gho (id, v) (select id, v from {q}t force index (PRIMARY) "
        "where id <= 20 lock in share mode)",
        f"UPDATE {q}t SET v = v * 10 WHERE id IN (3, 30)",  # the application
        f"replace /* gh-ost */ into {q}_t_gho (id, v) values (3, 30)",  # applied from the binlog
        f"insert /* gh-ost */ ignore into {q}_t_gho (id, v) (select id, v from {q}t force index (PRIMARY) "
        "where id > 20 lock in share mode)",
        f"DELETE FROM {q}t WHERE id = 7",
        f"delete /* gh-ost */ from {q}_t_gho where id = 7",
        f"create /* gh-ost */ table {q}_t_del (id int auto_increment primary key) engine=InnoDB "
        "comment='ghost-cut-over-sentry'",
        f"lock /* gh-ost */ tables {q}t write, {q}_t_del write",
    )
    renamer = mariadb.connect(autocommit=True)
    rename = threading.Thread(
        target=_execute, args=(renamer, f"rename /* gh-ost */ table {q}t to {q}_t_del, {q}_t_gho to {q}t")
    )
    rename.start()
    try:
        with conn.cursor() as cur:  # gh-ost waits until its RENAME waits on the lock before it drops the sentry
            while True:
                cur.execute(
                    "SELECT COUNT(*) FROM information_schema.processlist WHERE info LIKE 'rename /* gh-ost */%%' "
                    "AND state LIKE '%%metadata lock%%'"
                )
                if cur.fetchone()[0]:
                    break
        _execute(conn, f"drop /* gh-ost */ table if exists {q}_t_del", "unlock tables")
    finally:
        rename.join()
        renamer.close()
    _execute(conn, f"drop /* gh-ost */ table if exists {q}_t_ghc", f"INSERT INTO {q}t VALUES (100, 100, 1)")
    everything = DeltaMirror(tmp_path / "all")
    _run(conn, _config(mariadb, tmp_path, start, "all", ".*"), everything)
    for table in ("t", "_t_del"):
        assert _mirrored(everything, db, table) == _rows(mariadb, table)
    assert {t for _db, t in everything.tables()} == {"t", "_t_del"}
    only = DeltaMirror(tmp_path / "only")
    error, _cursor = _stopped(conn, _config(mariadb, tmp_path, start, "only", "t"), only)
    assert error.shape == "RENAME TABLE onto a captured name" and error.tables == (f"{db}.t", f"{db}._t_del",
                                                                                   f"{db}._t_gho")  # fmt: skip
    assert _mirrored(only, db, "t") == [(i, i * 10 if i in (3, 30) else i) for i in range(1, 41) if i != 7]
    healed = DeltaMirror(tmp_path / "healed")
    assert _healed(conn, _config(mariadb, tmp_path, start, "healing", "t"), healed, tmp_path / "journal") == 1
    assert _mirrored(healed, db, "t") == _rows(mariadb, "t") and {t for _db, t in healed.tables()} == {"t"}


def test_a_statement_format_load_data_stops_the_destination(
    mariadb: MariaDBDatabase, conn: Any, tmp_path: Path
) -> None:
    pytest.importorskip("prometheus_client")
    from canal.metrics import CanalCollector

    db = mariadb.database
    start = master_position(conn)
    data = tmp_path / "rows.csv"
    data.write_text("1,a\n2,b\n")
    loader = mariadb.connect(autocommit=True, local_infile=True)
    try:
        _execute(
            loader,
            f"CREATE TABLE `{db}`.ld (id INT PRIMARY KEY, s VARCHAR(3))",
            f"CREATE TABLE `{db}`.other (id INT PRIMARY KEY, s VARCHAR(3))",
            "SET SESSION binlog_format = 'STATEMENT'",
            # a table the destination does not capture: no stop (its statement names it)
            f"LOAD DATA LOCAL INFILE '{data}' INTO TABLE `{db}`.other FIELDS TERMINATED BY ','",
            f"LOAD DATA LOCAL INFILE '{data}' INTO TABLE `{db}`.ld FIELDS TERMINATED BY ','",
        )
    finally:
        loader.close()
    with Instance(_config(mariadb, tmp_path, start, "load", "ld")) as inst:
        assert inst.parser.join(30), "the parser stops on the event, it does not reconnect"
        metrics = inst.metrics()
        assert (metrics.running, metrics.errors, metrics.reconnects) == (False, 1, 0)
        assert metrics.last_error is not None and "UnmodeledStatementError: INSERT / REPLACE" in metrics.last_error
        assert f"on {db}.ld at" in metrics.last_error and "INFILE '***'" in metrics.last_error  # the file unshown
        # what the parser handed off before the event goes out (the CREATE TABLE), then the typed error
        handed = []
        with pytest.raises(NotRunningError) as caught:
            while True:
                handed.extend(inst.get(10, timeout=0.1).entries)
        assert isinstance(caught.value.__cause__, ParseError)
        assert [e.header.event_type for e in handed if e.row_change is not None] == [EventType.CREATE]  # ld's
        with pytest.raises(NotRunningError):
            inst.get_without_ack(10)
        samples = {s.name: s.value for m in CanalCollector(inst).collect() for s in m.samples}
        assert samples["canal_instance_errors_total"] == 1 and samples["canal_instance_running"] == 0
        cursor = inst.get_cursor()
        load = _offset_of(conn, "INTO TABLE `ld`", "Execute_load_query")
        assert cursor is not None and (cursor.position.journal_name, cursor.position.position) < load
    # healing (the default): ld is read again from the LOAD DATA on, counted in the metrics and the exporter
    _execute(conn, f"INSERT INTO `{db}`.ld VALUES (3, 'c')")
    healed = DeltaMirror(tmp_path / "healed")
    config = attrs.evolve(_config(mariadb, tmp_path, start, "healing", "ld"), heal="snapshot")
    end = master_position(conn)
    with Instance(config) as inst:
        run_batches(inst, None, healed, batch_size=50, timeout=0.5, journal=tmp_path / "j", until=healed_by(inst, end))
        samples = {s.name: s.value for m in CanalCollector(inst).collect() for s in m.samples}
        assert inst.metrics().heals == 1 and samples["canal_instance_heals_total"] == 1
        assert samples["canal_instance_errors_total"] == 0
    assert _mirrored(healed, db, "ld") == _rows(mariadb, "ld") == [(1, "a"), (2, "b"), (3, "c")]
    assert {t for _db, t in healed.tables()} == {"ld"}
