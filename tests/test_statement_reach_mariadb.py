"""What a statement reaches, on a real MariaDB (docs/concepts/fail-closed.md): under STATEMENT and MIXED logging (MIXED
is MariaDB's default; each set per session), DML through views -- a view over a view too --, INSERTs whose triggers
write other tables, stored functions called in a statement (INSERT ... VALUES (f()), SELECT f(), DO f()), a procedure
(logged as its statements), and a parent's DELETE / UPDATE whose foreign keys' ON DELETE / ON UPDATE actions change
its children; under ROW logging the children's cascade with the parent left out of the capture; and a session's
temporary tables shadowing captured names (TRUNCATE, ALTER, RENAME, DROP, INSERT in that session), also where the
capture started after the CREATE TEMPORARY TABLE.

Each case is played under STATEMENT and then under MIXED, and captured with every table of its database (``.*``) and
with a narrower filter (only the tables the statements reach without naming them): a copy kept from the entries
(tests/entry_copies.py), and the Delta mirror of the narrower capture, must equal ``SELECT`` after the heals; under
``heal="stop"`` the destination stops typed at the first such statement, naming it. Each failed before the capture
followed what a statement reaches: the heal targeted the view (which a snapshot skips), nothing at all for a
trigger's, a function's or a cascade's table, and a temporary table's TRUNCATE emptied the mirror's table of that
name.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pymysql
import pytest
from entry_copies import EntryCopy, copy_until_healed

pytest.importorskip("deltalake")

from canal.config import InstanceConfig, SnapshotConfig, StoreConfig
from canal.errors import NotRunningError, UnmodeledStatementError
from canal.instance import Instance
from canal.position import EntryPosition
from canal.protocol import EntryType
from canal.spark import DeltaMirror, run_batches
from canal.spark.testing import compare_tables, healed_by, master_position, run_caught_up
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration

MARKS = "marks"  # a row here ends each run

# the schema every case plays on ({d}: the database)
SCHEMA = [
    f"CREATE TABLE {{d}}.{MARKS} (id INT PRIMARY KEY)",
    "CREATE TABLE {d}.b (id INT PRIMARY KEY, v INT)",
    "INSERT INTO {d}.b VALUES (1, 1), (2, 2), (3, 3), (4, 4)",
    "CREATE VIEW {d}.vb AS SELECT id, v FROM {d}.b WHERE v >= 0",
    "CREATE VIEW {d}.vvb AS SELECT id, v FROM {d}.vb",
    "CREATE TABLE {d}.t (id INT PRIMARY KEY, v INT)",
    "CREATE TABLE {d}.log (id INT PRIMARY KEY, what VARCHAR(10))",
    "CREATE TRIGGER {d}.t_ai AFTER INSERT ON {d}.t FOR EACH ROW INSERT INTO {d}.log VALUES (NEW.id, 'ins')",
    "CREATE TRIGGER {d}.t_bu BEFORE UPDATE ON {d}.t FOR EACH ROW SET NEW.v = NEW.v * 2",
    "CREATE TRIGGER {d}.t_ad AFTER DELETE ON {d}.t FOR EACH ROW DELETE FROM {d}.log WHERE id = OLD.id",
    "CREATE TABLE {d}.t2 (id INT PRIMARY KEY, v INT)",
    "CREATE TABLE {d}.log2 (id INT PRIMARY KEY, what VARCHAR(10))",
    "CREATE FUNCTION {d}.f(a INT) RETURNS INT DETERMINISTIC MODIFIES SQL DATA "
    "BEGIN INSERT INTO {d}.log2 VALUES (a, 'f'); RETURN a; END",
    "CREATE PROCEDURE {d}.p(a INT) BEGIN UPDATE {d}.vb SET v = a WHERE id = 4; INSERT INTO {d}.t VALUES (a, 0); END",
    "CREATE TABLE {d}.par (id INT PRIMARY KEY, u INT UNIQUE)",
    "CREATE TABLE {d}.ch (id INT PRIMARY KEY, pid INT, "
    "FOREIGN KEY (pid) REFERENCES {d}.par (id) ON DELETE CASCADE ON UPDATE CASCADE)",
    "CREATE TABLE {d}.ch2 (id INT PRIMARY KEY, pu INT, "
    "FOREIGN KEY (pu) REFERENCES {d}.par (u) ON DELETE SET NULL ON UPDATE SET NULL)",
    "CREATE TABLE {d}.gch (id INT PRIMARY KEY, cid INT, FOREIGN KEY (cid) REFERENCES {d}.ch (id) ON DELETE CASCADE)",
    "INSERT INTO {d}.par VALUES " + ", ".join(f"({i}, {i * 10})" for i in range(1, 9)),
    "INSERT INTO {d}.ch VALUES " + ", ".join(f"({i * 10}, {i})" for i in range(1, 9)),
    "INSERT INTO {d}.ch2 VALUES " + ", ".join(f"({i * 10}, {i * 10})" for i in range(1, 9)),
    "INSERT INTO {d}.gch VALUES " + ", ".join(f"({i * 100}, {i * 10})" for i in range(1, 9)),
]
TABLES = ("b", "t", "log", "t2", "log2", "par", "ch", "ch2", "gch")


@attrs.frozen
class Case:
    """Statements (``{d}`` the database, ``{a}`` a row that exists, ``{n}`` a new id) played once per format, and the
    tables a narrower capture takes (what they reach without naming it)."""

    statements: tuple[str, ...]
    narrow: tuple[str, ...]
    formats: tuple[str, ...] = ("STATEMENT", "MIXED")
    stops_at: str | None = None  # how the statement a stop names begins, where it is not one of ``statements``


CASES = {
    "view": Case(
        (
            "UPDATE {d}.vb SET v = v + 10 WHERE id = {a}",
            "INSERT INTO {d}.vb VALUES ({n}, 5)",
            "UPDATE {d}.vvb SET v = 0 WHERE id = {n}",
            "DELETE FROM {d}.vvb WHERE id = {a} + 1",
        ),
        ("b",),
    ),
    "trigger": Case(
        (
            "INSERT INTO {d}.t VALUES ({n}, 1), ({n} + 1, 1)",
            "UPDATE {d}.t SET v = 3 WHERE id = {n}",
            "DELETE FROM {d}.t WHERE id = {n} + 1",
        ),
        ("log",),
    ),
    "function": Case(
        ("INSERT INTO {d}.t2 VALUES ({d}.f({n}), 1)", "SELECT {d}.f({n} + 1)", "DO {d}.f({n} + 2)"),
        ("log2",),
    ),
    # the server logs a procedure's statements, not the CALL
    "procedure": Case(("CALL {d}.p({n})",), ("b", "log"), stops_at="UPDATE {d}.vb SET v = NAME_CONST("),
    "cascade": Case(
        (
            "DELETE FROM {d}.par WHERE id = {a}",
            "UPDATE {d}.par SET id = id + 100 WHERE id = {a} + 1",
            "UPDATE {d}.par SET u = u + 100 WHERE id = {a} + 4",
        ),
        ("ch", "ch2", "gch"),
    ),
    "row cascade, the parent left out": Case(
        (
            "DELETE FROM {d}.par WHERE id = {a}",
            "UPDATE {d}.par SET id = id + 100 WHERE id = {a} + 1",
            "UPDATE {d}.par SET u = u + 100 WHERE id = {a} + 4",
        ),
        ("ch", "ch2", "gch"),
        ("ROW",),
        stops_at="DELETE rows of {d2}.par: the ON DELETE actions of its foreign keys change {d2}.ch",  # described
    ),
    "temporary tables": Case(
        (
            "CREATE TEMPORARY TABLE {d}.b (id INT PRIMARY KEY, v INT)",
            "INSERT INTO {d}.b VALUES ({n}, 1000), ({a}, 7)",
            "UPDATE {d}.b SET v = 7",
            "INSERT INTO {d}.t2 SELECT id + {n}, v FROM {d}.b",
            "TRUNCATE TABLE {d}.b",
            "ALTER TABLE {d}.b ADD COLUMN w INT",
            "ALTER TABLE {d}.b RENAME TO {d}.b_tmp",
            "INSERT INTO {d}.b_tmp VALUES (5, 5, 5)",
            "RENAME TABLE {d}.b_tmp TO {d}.b",
            "DELETE FROM {d}.b",
            "DROP TABLE {d}.b",
        ),
        ("b", "t2"),
    ),
}
# where each format plays a case: a row that exists ({a}), new ids ({n})
PLACES = {"STATEMENT": (1, 1000), "MIXED": (3, 2000), "ROW": (5, 3000)}


def _run_sql(conn: Any, db: str, statements: list[str] | tuple[str, ...], **values: Any) -> None:
    with conn.cursor() as cur:
        for sql in statements:
            cur.execute(sql.format(d=f"`{db}`", **values))
            if cur.description:
                cur.fetchall()


def _config(
    db: MariaDBDatabase, tmp: Path, name: str, start: tuple[str, int], tables: str, heal: str
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


def _select(conn: Any, db: str, table: str) -> list[dict[str, Any]]:
    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute(f"SELECT * FROM `{db}`.`{table}`")
        return sorted((dict(r) for r in cur.fetchall()), key=lambda r: tuple(str(v) for v in r.values()))


def _copy(db: MariaDBDatabase, conn: Any, config: InstanceConfig, marker: int) -> EntryCopy:
    _run_sql(conn, db.database, [f"INSERT INTO {{d}}.{MARKS} VALUES ({marker})"])
    copy = EntryCopy()
    with Instance(config) as inst:
        copy_until_healed(inst, copy, (db.database, MARKS), marker)
        metrics = inst.metrics()
    assert metrics.running and metrics.errors == 0, metrics.last_error
    return copy


@attrs.frozen
class Played:
    conn: Any  # a root connection
    case: Case
    before: tuple[str, int]  # the position before the schema was made (the capture replays its DDL)
    start: tuple[str, int]  # ... and before the statements (the capture's bootstrap reads the schema's objects)


@pytest.fixture
def played(mariadb: MariaDBDatabase, request: pytest.FixtureRequest) -> Iterator[Played]:
    """The case's database (its schema), its statements played under each of its formats (a session per format: its
    temporary tables end with it), and where they start."""
    case = CASES[request.param]
    root = mariadb.connect(autocommit=True)
    before = master_position(root)
    _run_sql(root, mariadb.database, SCHEMA)
    start = master_position(root)
    for fmt in case.formats:
        session = mariadb.connect(autocommit=True)
        try:
            _run_sql(session, mariadb.database, [f"SET SESSION binlog_format = '{fmt}'"])
            a, n = PLACES[fmt]
            _run_sql(session, mariadb.database, case.statements, a=a, n=n)
        finally:
            session.close()
    try:
        yield Played(root, case, before, start)
    finally:
        root.close()


@pytest.mark.parametrize("played", list(CASES), indirect=True)
def test_what_a_statement_reaches_heals_and_equals_select(
    mariadb: MariaDBDatabase, played: Played, tmp_path: Path
) -> None:
    conn, start, case = played.conn, played.before, played.case
    db = mariadb.database
    everything = _copy(mariadb, conn, _config(mariadb, tmp_path, "all", start, ".*", "snapshot"), 1)
    narrowly = ",".join([*case.narrow, MARKS])
    narrow = _copy(mariadb, conn, _config(mariadb, tmp_path, "narrow", start, narrowly, "snapshot"), 2)
    for table in TABLES:
        assert everything.rows(db, table) == _select(conn, db, table), f"{table}, capturing {db}.*"
    for table in case.narrow:
        assert narrow.rows(db, table) == _select(conn, db, table), f"{table}, capturing {', '.join(case.narrow)}"
    assert not any(name[1] in ("vb", "vvb") for name in everything.tables), "a view is no table"
    # the mirror of the narrower capture (tests/test_differential_reach_mariadb.py mirrors every table)
    mirror = DeltaMirror(tmp_path / "mirror")
    try:
        _run_sql(conn, db, [f"INSERT INTO {{d}}.{MARKS} VALUES (3)"])
        config = _config(mariadb, tmp_path, "mirror", start, narrowly, "snapshot")
        run_caught_up(conn, config, None, mirror, journal=tmp_path / "journal.json")
        for comparison in compare_tables(conn, mirror, db, case.narrow):
            assert comparison.equal, str(comparison)
        assert {t for _db, t in mirror.tables()} <= {*case.narrow, MARKS}
    finally:
        mirror.close()


@pytest.mark.parametrize("played", list(CASES), indirect=True)
def test_heal_stop_stops_typed_at_the_statement(mariadb: MariaDBDatabase, played: Played, tmp_path: Path) -> None:
    """From after the schema was made: the capture's bootstrap reads its views, triggers, routines and foreign keys
    from information_schema."""
    conn, case = played.conn, played.case
    config = _config(mariadb, tmp_path, "stop", played.start, ",".join(case.narrow), "stop")
    with Instance(config) as inst:
        with pytest.raises(NotRunningError) as caught:
            for _ in range(200):
                inst.get(500, timeout=0.2)
        cursor = inst.get_cursor()
    error = caught.value.__cause__
    assert isinstance(error, UnmodeledStatementError), error
    a, n = PLACES[case.formats[0]]
    d = f"`{mariadb.database}`"
    if case.stops_at is None:
        assert error.statement in [sql.format(d=d, a=a, n=n) for sql in case.statements], error
    else:
        assert error.statement.startswith(case.stops_at.format(d=d, d2=mariadb.database)), error
    assert any(f"{mariadb.database}.{t}" in str(error) for t in case.narrow), error
    assert cursor is None or cursor.position <= EntryPosition(*master_position(conn))


def test_a_capture_user_that_cannot_see_triggers_or_view_definitions_heals_every_captured_table(
    mariadb: MariaDBDatabase, tmp_path: Path
) -> None:
    """Without TRIGGER (information_schema lists no trigger) and SHOW VIEW (no view's definition), what a statement
    logged as a statement reaches cannot be told: it heals every captured table, and the copy equals SELECT."""
    db = mariadb.database
    user, password = f"blind_{db[-8:]}", "blind-pw"
    admin = mariadb.connect(autocommit=True)
    with admin.cursor() as cur:  # not in the binlog
        cur.execute("SET SESSION sql_log_bin = 0")
        cur.execute("CREATE USER %s@'%%' IDENTIFIED BY %s", (user, password))
        cur.execute("GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT, BINLOG MONITOR ON *.* TO %s@'%%'", (user,))
    try:
        conn = mariadb.connect(autocommit=True)
        try:
            _run_sql(conn, db, SCHEMA)
            start = master_position(conn)
            _run_sql(conn, db, ["SET SESSION binlog_format = 'STATEMENT'", *CASES["view"].statements[:2]], a=1, n=1000)
            _run_sql(conn, db, ["INSERT INTO {d}.t VALUES (7, 7)"])
            config = _config(mariadb, tmp_path, "blind", start, ".*", "snapshot")
            config = attrs.evolve(config, master=attrs.evolve(config.master, username=user, password=password))
            copy = _copy(mariadb, conn, attrs.evolve(config, snapshot=SnapshotConfig(mode="initial")), 1)
            for table in TABLES:
                assert copy.rows(db, table) == _select(conn, db, table), table
            # every captured table was read again at each statement (the view's two, the INSERT of t, the marker's)
            every = {f"{db}.{table}" for table in (*TABLES, MARKS)}
            assert len(copy.healed) == 4 and all(set(tables) == every for tables in copy.healed), copy.healed
        finally:
            conn.close()
    finally:
        with admin.cursor() as cur:
            cur.execute("DROP USER %s@'%%'", (user,))
        admin.close()


def test_a_session_whose_temporary_table_predates_the_capture(mariadb: MariaDBDatabase, tmp_path: Path) -> None:
    """The capture starts after a session created a temporary table shadowing a captured one: its flagged TRUNCATE
    may be of either, so the table is read again (equal to SELECT); its flagged ALTER stops typed, whatever heal
    says -- whether the captured table's layout changed cannot be told."""
    db = mariadb.database
    conn = mariadb.connect(autocommit=True)
    session = mariadb.connect(autocommit=True)
    try:
        _run_sql(conn, db, SCHEMA)
        _run_sql(session, db, ["SET SESSION binlog_format = 'MIXED'", "CREATE TEMPORARY TABLE {d}.b (id INT)"])
        start = master_position(conn)
        _run_sql(session, db, ["INSERT INTO {d}.b VALUES (1)", "TRUNCATE TABLE {d}.b"])
        config = _config(mariadb, tmp_path, "late", start, "b,marks", "snapshot")
        copy = _copy(mariadb, conn, attrs.evolve(config, snapshot=SnapshotConfig(mode="initial")), 1)
        assert copy.rows(db, "b") == _select(conn, db, "b") and len(_select(conn, db, "b")) == 4
        assert copy.heals == ["INSERT / REPLACE / UPDATE / DELETE / LOAD DATA",
                              "TRUNCATE of a name a session may hold as temporary"]  # fmt: skip
        _run_sql(session, db, ["ALTER TABLE {d}.b ADD COLUMN w INT"])
        stopping = _config(mariadb, tmp_path, "late2", start, "b,marks", "snapshot")
        with Instance(stopping) as inst, pytest.raises(NotRunningError) as caught:
            for _ in range(200):
                inst.get(500, timeout=0.2)
        error = caught.value.__cause__
        assert isinstance(error, UnmodeledStatementError)
        assert error.shape == "a layout change of a name a session may hold as temporary"
        assert error.statement == f"ALTER TABLE `{db}`.b ADD COLUMN w INT" and error.tables == (f"{db}.b",)
    finally:
        session.close()
        conn.close()


def _played_alone(
    mariadb: MariaDBDatabase, tmp_path: Path, schema: list[str], statements: list[str], narrow: str, fmt: str
) -> tuple[Any, EntryCopy]:
    """``schema`` made, ``statements`` played in a session logging ``fmt``, and a copy of the tables ``narrow``
    (with the marks) kept from the entries from before the schema."""
    conn = mariadb.connect(autocommit=True)
    before = master_position(conn)
    _run_sql(conn, mariadb.database, [f"CREATE TABLE {{d}}.{MARKS} (id INT PRIMARY KEY)", *schema])
    session = mariadb.connect(autocommit=True)
    try:
        _run_sql(session, mariadb.database, [f"SET SESSION binlog_format = '{fmt}'", *statements])
    finally:
        session.close()
    config = _config(mariadb, tmp_path, "alone", before, f"{narrow},{MARKS}", "snapshot")
    return conn, _copy(mariadb, conn, config, 1)


@pytest.mark.parametrize("fmt", ["STATEMENT", "MIXED"])
def test_a_view_read_runs_the_functions_its_query_calls(mariadb: MariaDBDatabase, tmp_path: Path, fmt: str) -> None:
    """Reading a view whose query calls a stored function runs the function: an INSERT ... SELECT from it (and a
    DELETE whose subquery reads a view over it) writes what the function writes. The statements name neither the
    function nor its table: the copy of that table kept its rows as before (none) where SELECT shows them."""
    db = mariadb.database
    schema = [
        "CREATE TABLE {d}.t (id INT PRIMARY KEY)",
        "INSERT INTO {d}.t VALUES (1), (2)",
        "CREATE TABLE {d}.audit (id INT PRIMARY KEY, n INT)",
        "CREATE TABLE {d}.other (x INT)",
        "CREATE FUNCTION {d}.f(a INT) RETURNS INT DETERMINISTIC MODIFIES SQL DATA "
        "BEGIN INSERT INTO {d}.audit VALUES (a, 1) ON DUPLICATE KEY UPDATE n = n + 1; RETURN a; END",
        "CREATE VIEW {d}.v AS SELECT {d}.f(id) AS x FROM {d}.t",
        "CREATE VIEW {d}.vv AS SELECT x FROM {d}.v",
    ]
    statements = [
        "INSERT INTO {d}.other SELECT x FROM {d}.v",
        "DELETE FROM {d}.other WHERE x IN (SELECT x FROM {d}.vv)",
    ]
    conn, copy = _played_alone(mariadb, tmp_path, schema, statements, "audit", fmt)
    assert [r["id"] for r in _select(conn, db, "audit")] == [1, 2]
    assert copy.rows(db, "audit") == _select(conn, db, "audit")


@pytest.mark.parametrize("restart", [False, True], ids=["running", "restarted between"])
def test_a_statement_inside_a_prepared_xa_transaction_heals_after_its_xa_commit(
    mariadb: MariaDBDatabase, tmp_path: Path, restart: bool
) -> None:
    """MariaDB logs an XA transaction at its XA PREPARE and makes it visible at its XA COMMIT: the heal of a statement
    logged inside it, read while it was prepared, saw none of its changes, and the mirror, which applies the
    prepared entries at the XA COMMIT, voided the table there -- it ended with no rows where SELECT shows three. The
    capture reads the table again after the XA COMMIT; an XA ROLLBACK's heal needs nothing more. A destination
    restarted between the two reads the prepared group back at the XA COMMIT, and heals there: it stopped, for good,
    saying it kept no schema history (the read-back judged the statement without it)."""
    db = mariadb.database
    conn = mariadb.connect(autocommit=True)
    start = master_position(conn)
    _run_sql(conn, db, [f"CREATE TABLE {{d}}.{MARKS} (id INT PRIMARY KEY)", *SCHEMA[1:4]])
    sessions = [mariadb.connect(autocommit=True), mariadb.connect(autocommit=True)]  # an XA transaction each
    mirror = DeltaMirror(tmp_path / "mirror")
    try:
        xa = [("x1", "UPDATE {d}.vb SET v = 100 WHERE id = 1", "DELETE FROM {d}.vb WHERE id = 2"),
              ("x2", "DELETE FROM {d}.vb WHERE id = 3",)]  # fmt: skip
        for session, (xid, *statements) in zip(sessions, xa, strict=True):
            _run_sql(session, db, ["SET SESSION binlog_format = 'STATEMENT'", f"XA START '{xid}'", *statements,
                                   f"XA END '{xid}'", f"XA PREPARE '{xid}'"])  # fmt: skip
        config = _config(mariadb, tmp_path, "xa", start, f"b,{MARKS}", "snapshot")
        journal = tmp_path / "journal.json"
        heals = 0
        inst = Instance(config)
        try:
            inst.start()
            run_batches(inst, None, mirror, timeout=0.5, until=healed_by(inst, master_position(conn)), journal=journal)
            if restart:
                heals += inst.metrics().heals
                inst.stop()
                inst = Instance(config)
                inst.start()
            _run_sql(sessions[0], db, ["XA COMMIT 'x1'"])
            _run_sql(sessions[1], db, ["XA ROLLBACK 'x2'"])
            _run_sql(conn, db, [f"INSERT INTO {{d}}.{MARKS} VALUES (1)"])
            run_batches(inst, None, mirror, timeout=0.5, until=healed_by(inst, master_position(conn)), journal=journal)
            heals += inst.metrics().heals
        finally:
            inst.stop()
        assert [r["v"] for r in _select(conn, db, "b")] == [100, 3, 4]
        for comparison in compare_tables(conn, mirror, db, ["b"]):
            assert comparison.equal, str(comparison)
        assert heals == 4  # b at each statement, and again at x1's XA COMMIT
    finally:
        mirror.close()
        for session in sessions:
            session.close()


def test_a_drop_flags_its_statement_whatever_the_session_holds(mariadb: MariaDBDatabase, tmp_path: Path) -> None:
    """MariaDB sets the thread-specific flag on every statement that drops a table of the schema, a CREATE OR REPLACE
    TABLE of an existing table included, whatever the session holds: such a ``CREATE OR REPLACE TABLE c0 LIKE a`` is
    followed (c0's rows have a's layout from there). Of a new name the flag says the source was a temporary table
    (here one made before the capture's start): that still stops typed."""
    db = mariadb.database
    conn = mariadb.connect(autocommit=True)
    session = mariadb.connect(autocommit=True)
    schema = [SCHEMA[0], "CREATE TABLE {d}.a (id INT PRIMARY KEY, x INT)", "CREATE TABLE {d}.c0 (id INT)"]
    rows: list[dict[str, Any]] = []

    def take(inst: Instance) -> None:
        entries = inst.get(500, timeout=0.2).entries
        rows.extend(r.after_dict() for e in entries if e.entry_type is EntryType.ROWDATA for r in e.iter_rows())

    try:
        _run_sql(conn, db, schema)
        _run_sql(session, db, ["SET SESSION binlog_format = 'STATEMENT'", "CREATE TEMPORARY TABLE {d}.tmp (t INT)"])
        config = _config(mariadb, tmp_path, "drops", master_position(conn), f"{MARKS},a,c0,c1", "snapshot")
        with Instance(config) as inst, pytest.raises(NotRunningError) as caught:
            _run_sql(conn, db, [f"INSERT INTO {{d}}.{MARKS} VALUES (1)"])
            for _ in range(200):  # the capture runs, its schema history from the start on
                if rows:
                    break
                take(inst)
            assert rows == [{"id": 1}]
            _run_sql(session, db, ["CREATE OR REPLACE TABLE {d}.c0 LIKE {d}.a"])
            _run_sql(conn, db, ["INSERT INTO {d}.c0 VALUES (1, 10)"])  # a row event: its table map has a's columns
            _run_sql(session, db, ["CREATE OR REPLACE TABLE {d}.c1 LIKE {d}.tmp"])
            for _ in range(200):
                take(inst)
        assert rows == [{"id": 1}, {"id": 1, "x": 10}]
        error = caught.value.__cause__
        assert isinstance(error, UnmodeledStatementError)
        assert error.shape == "a layout change of a name a session may hold as temporary"
        assert error.statement == f"CREATE OR REPLACE TABLE `{db}`.c1 LIKE `{db}`.tmp"
    finally:
        session.close()
        conn.close()


# a statement logged as a statement that reached a table through a trigger or a view, then that trigger dropped or
# that view replaced: the tables it reached then (narrow), which the objects the bootstrap reads no longer tell
OBJECTS_CHANGED = {
    "trigger dropped": (("INSERT INTO {d}.t VALUES (50, 5)", "DROP TRIGGER {d}.t_ai"), ("log",)),
    "view replaced": (
        ("UPDATE {d}.vb SET v = 50 WHERE id = 2", "CREATE OR REPLACE VIEW {d}.vb AS SELECT id, v FROM {d}.t2"),
        ("b",),
    ),
}


@pytest.mark.parametrize("change", list(OBJECTS_CHANGED))
def test_a_first_start_before_an_object_changed_heals_what_its_statements_reached(
    mariadb: MariaDBDatabase, tmp_path: Path, change: str
) -> None:
    """A first start at a position before a statement that reached a table through a trigger (a view), and the
    trigger dropped (the view replaced) before the bootstrap reads the objects: the server logs column names, so the
    parser's own dump checks the range as it reads it (parse.schema_tracking), and the object's definition at the
    statement is not known -- the statement heals every captured table, and the copy equals SELECT. Before, the
    history answered with the objects read after the change: the statement reached nothing captured, and the copy
    missed its change."""
    db = mariadb.database
    statements, narrow = OBJECTS_CHANGED[change]
    conn = mariadb.connect(autocommit=True)
    try:
        _run_sql(conn, db, SCHEMA)
        start = master_position(conn)
        _run_sql(conn, db, ["SET SESSION binlog_format = 'STATEMENT'", *statements])
        config = _config(mariadb, tmp_path, "objects", start, ",".join([*narrow, MARKS]), "snapshot")
        copy = _copy(mariadb, conn, config, 1)
        for table in narrow:
            assert copy.rows(db, table) == _select(conn, db, table), table
        assert copy.healed and all(f"{db}.{narrow[0]}" in tables for tables in copy.healed[:1]), copy.healed
    finally:
        conn.close()
