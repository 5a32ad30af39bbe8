"""Differential tests against canal itself: canal 1.1.7's embedded server (``peers/``, run by
:class:`peer_harness.CanalPeer`, one JVM for the module) and a pycanal ``Instance`` read the same workloads from the
same binlog position of a real MariaDB, and their entries are compared field by field in canal's text form
(:mod:`canal_form`): headers, entry types, DDL, each column's name, ``isKey``, ``updated``, ``isNull``, value text,
``sqlType`` and ``mysqlType``.

Every difference is either a rule of :mod:`canal_differences` -- canal's behaviour, measured here, written down in
``docs/guides/from-canal.md`` with pycanal's side checked against ``SELECT`` -- or a failure. The workloads: a table of
every type family (values at their limits), the randomized DDL and DML of :mod:`random_schema_workload` under
``binlog_row_metadata`` MINIMAL and FULL, the transaction shapes of ``test_differential_transactions_mariadb``, names
from ``test_differential_names_mariadb``'s pool, and the reference workload of ``benchmarks/bench_decode.py``.

canal runs as its deployer runs it by default: the table-meta TSDB on (over H2), parallel parsing, memory store with
raw entries. CI runs a few random examples (``PYCANAL_FUZZ_EXAMPLES``, default 20, a seventh of them here).
"""

from __future__ import annotations

import datetime as dt
import itertools
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest
from canal_differences import DIFFERENCES, compare
from canal_side_by_side import Run, rows_of, side_by_side
from hypothesis import given, note
from hypothesis import strategies as st
from peer_harness import CanalPeer, skip_reason
from random_operations import OUTSIDE
from random_schema_workload import CAPTURE_KINDS, FUZZ_EXAMPLES, Workload, fuzz_settings
from test_differential_names_mariadb import POOL as NAME_POOL
from test_differential_names_mariadb import ident, odd_name_statements
from test_differential_transactions_mariadb import _play, _statements, _Tables, _workload

from canal.config import InstanceConfig, StoreConfig
from canal.instance import Instance
from canal.protocol import EMPTY_MESSAGE_ID
from canal.testing.plugin import MariaDBDatabase
from tests.test_schema_history_mariadb import _rows

pytestmark = [pytest.mark.integration, pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))]

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = max(3, FUZZ_EXAMPLES // 7)  # 3 in CI; a failure prints the blob that reproduces it
_RUNS = itertools.count()
GUIDE = ROOT / "docs" / "guides" / "from-canal.md"
SEEN: Counter[str] = Counter()  # the rules the module's comparisons matched (printed with -s)


@pytest.fixture(scope="module")
def canal_peer() -> Iterator[CanalPeer]:
    with CanalPeer() as peer:
        yield peer
    print(f"\ndifferences measured against canal in this module: {dict(sorted(SEEN.items()))}")


@pytest.fixture(params=["MINIMAL", "FULL"])
def metadata(request: pytest.FixtureRequest, mariadb: MariaDBDatabase) -> Iterator[str]:
    before = mariadb.execute("SELECT @@GLOBAL.binlog_row_metadata")[0][0]
    mariadb.execute(f"SET GLOBAL binlog_row_metadata = {request.param}")
    try:
        yield str(request.param)
    finally:
        mariadb.execute(f"SET GLOBAL binlog_row_metadata = {before}")


@pytest.fixture
def minimal(mariadb: MariaDBDatabase) -> Iterator[None]:
    """MariaDB's own default is NO_LOG / MINIMAL; canal stops at the first table map of some tables under FULL
    (:func:`test_canal_stops_at_a_year_column_under_full_metadata`)."""
    before = mariadb.execute("SELECT @@GLOBAL.binlog_row_metadata")[0][0]
    mariadb.execute("SET GLOBAL binlog_row_metadata = MINIMAL")
    try:
        yield
    finally:
        mariadb.execute(f"SET GLOBAL binlog_row_metadata = {before}")


def _assert_same(run: Run, what: str, *, expect: set[str] = frozenset()) -> Counter[str]:  # type: ignore[assignment]
    if run.ours_error is not None:
        raise run.ours_error
    result = compare(run.canal, run.ours, canal_stopped=bool(run.alarms))
    SEEN.update(result.fired)
    assert not result.unexplained, (
        f"{what}: differences no rule explains:\n{result.report()}\nrules matched: {dict(result.fired)}; "
        f"canal's alarms: {run.alarms[:1]}"
    )
    assert expect <= result.fired.keys(), f"{what}: expected {expect - result.fired.keys()} to be measured"
    return result.fired


# --- every type family, values at their limits ---------------------------------------------------------------------

TYPES = [
    ("dt0", "DATETIME"), ("dt3", "DATETIME(3)"), ("dt6", "DATETIME(6)"), ("ts0", "TIMESTAMP NULL"),
    ("ts4", "TIMESTAMP(4) NULL"), ("t0", "TIME"), ("t2", "TIME(2)"), ("d", "DATE"), ("y", "YEAR"), ("b1", "BIT(1)"),
    ("b12", "BIT(12)"), ("ti", "TINYINT"), ("tiu", "TINYINT UNSIGNED"), ("siu", "SMALLINT UNSIGNED"),
    ("mi", "MEDIUMINT UNSIGNED"), ("iu", "INT UNSIGNED"), ("bu", "BIGINT UNSIGNED"), ("j", "JSON"),
    ("g", "GEOMETRY"), ("f", "FLOAT"), ("dbl", "DOUBLE"), ("dec0", "DECIMAL(5,0)"), ("dc", "DECIMAL(30,10)"),
    ("ch", "CHAR(5)"), ("bin", "BINARY(4)"), ("vb", "VARBINARY(10)"), ("l1", "VARCHAR(10) CHARACTER SET latin1"),
    ("tt", "TINYTEXT"), ("lb", "LONGBLOB"), ("bo", "BOOLEAN"), ("e", "ENUM('b','a','c')"), ("s", "SET('x','y','z')"),
    ("u", "UUID"), ("i6", "INET6"), ("i4", "INET4"), ("dm", "DECIMAL(12,2)"),
]  # fmt: skip
VALUES = [
    "'2024-01-02 03:04:05', '2024-01-02 03:04:05.120', '2024-01-02 03:04:05', '2024-01-02 03:04:05', "
    "'2024-01-02 03:04:05.1000', '-01:02:03', '12:00:00.5', '2024-02-29', 2024, b'1', b'101010101010', -128, 255, "
    '65535, 16777215, 4294967295, 18446744073709551615, \'{"a": [1, 2.5, "x"], "é": null}\', '
    "ST_GeomFromText('POINT(1 2)'), 1.5, 0.1, 12345, '-12345678901234567890.0123456789', 'ab', 'ab', '\\0\\1', 'é', "
    "'text', x'00ff', true, 'a', 'x,z', '123e4567-e89b-12d3-a456-426655440000', '::', '255.255.255.255', 1.00",
    "'0000-00-00 00:00:00', '1000-01-01 00:00:00.000', '9999-12-31 23:59:59.999999', NULL, "
    "'1970-01-01 00:00:01.0001', '838:59:59', '-838:59:59.00', '0000-00-00', 0, b'0', b'0', 127, 0, 1, 0, 7, 1, "
    "'[]', NULL, -1e-50, 1e300, 0, '0.0000000001', '', '', '', '', NULL, '', false, 'c', '', "
    "'00000000-0000-0000-0000-000000000001', '2001:db8::1', '0.0.0.0', -12.5",
    ", ".join(["NULL"] * 36),
]


def test_every_type_family_side_by_side(mariadb: MariaDBDatabase, canal_peer: CanalPeer, minimal: None) -> None:
    db = mariadb.database
    columns = ", ".join(f"{n} {t}" for n, t in TYPES)
    names = ", ".join(n for n, _t in TYPES)

    def play() -> None:
        conn = mariadb.connect()
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = '', time_zone = '+00:00'")
            cur.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY AUTO_INCREMENT, {columns})")
            for values in VALUES:
                cur.execute(f"INSERT INTO `{db}`.t ({names}) VALUES ({values})")
            cur.execute(f"UPDATE `{db}`.t SET e = 'b', s = 'y', iu = 2147483648, dt3 = '2024-05-06 07:08:09.5'")
            cur.execute(f"DELETE FROM `{db}`.t WHERE id = 1")
        conn.close()

    run = side_by_side(mariadb, canal_peer, f"types{next(_RUNS)}", play, filter_regex=rf"{db}\..*")
    fired = _assert_same(
        run,
        "every type",
        expect={
            "statement-text", "no-begin-on-mariadb", "boundary-event-type", "gtid-header", "mysql-type-text",
            "sql-type-per-value", "enum-set-numbers", "mariadb-types", "binary-trailing-zeros", "column-charset",
            "negative-zero", "geometry-srid", "json-as-blob", "decimal-scale",
        },
    )  # fmt: skip
    assert not run.alarms and fired
    # pycanal's side of each difference is what SELECT returns
    conn = mariadb.connect()
    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute("SET SESSION time_zone = '+00:00'")
        cur.execute(f"SELECT * FROM `{db}`.t ORDER BY id")
        selected = cur.fetchall()
    conn.close()
    updates = [image for event, image in rows_of(run.entries, "t") if event == "UPDATE"]
    assert len(updates) == len(selected) + 1  # the row deleted after
    for image, row in zip(updates[1:], selected, strict=True):
        for name, value in row.items():
            if name == "g" and value is not None:
                value = value[4:]  # SELECT's internal form: the SRID, then the WKB pycanal hands out
            if name in ("b1", "b12") and isinstance(value, bytes):
                value = int.from_bytes(value, "big")  # BIT: pycanal's int
            assert _plain(image[name]) == _plain(value), (name, image[name], value)


def _plain(value: Any) -> Any:
    """pycanal's typed value and pymysql's in one form (a SET's labels, a TIMESTAMP's UTC time, GEOMETRY's WKB)."""
    if isinstance(value, set | frozenset):
        return ",".join(sorted(value))
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


# --- random DDL and DML ---------------------------------------------------------------------------------------------


def test_random_workloads_side_by_side(mariadb: MariaDBDatabase, canal_peer: CanalPeer, metadata: str) -> None:
    @fuzz_settings(EXAMPLES)
    @given(
        ops=st.lists(st.tuples(st.sampled_from(CAPTURE_KINDS), *[st.integers(0, 99)] * 3), max_size=25),
        seed=st.integers(0, 2**32 - 1),
    )
    def check(ops: list[tuple[str, int, int, int]], seed: int) -> None:
        name = f"fz{next(_RUNS)}"
        mariadb.execute(f"CREATE DATABASE `{name}`")
        workload: list[Workload] = []

        def play() -> None:
            conn = mariadb.connect()
            try:
                w = Workload(conn, name, seed, layer="capture", heal="stop")
                workload.append(w)
                w.play(ops)
            finally:
                conn.close()

        try:
            run = side_by_side(
                mariadb,
                canal_peer,
                name,
                play,
                filter_regex=rf"{name}\..*",
                black_regex=rf"{name}\.{OUTSIDE}",
                pycanal_settings={"heal": "stop"},
            )
            note(f"metadata={metadata} seed={seed}\nSQL:\n" + ";\n".join(workload[0].sql))
            if workload[0].stop is not None:
                # pycanal stops, typed, where the contract says (docs/concepts/fail-closed.md); canal goes on: only
                # the entries before the stop are compared
                assert run.ours_error is not None
                run = _until(run, run.ours[-1] if run.ours else None)
            _assert_same(run, f"workload {name}")
            # pycanal's rows are SELECT's (canal's may be named after another layout: canal_differences.tsdb-layout)
            expected = [(t, e, _plain_row(v)) for t, e, v in workload[0].rows]
            got = [(t, e, _plain_row(v)) for t, e, v in _rows(run.entries) if t != f"m_{name}"]
            assert got == expected
        finally:
            mariadb.execute(f"DROP DATABASE IF EXISTS `{name}`")

    check()


def _plain_row(values: dict[str, Any]) -> dict[str, Any]:
    return {k: _plain(v) for k, v in values.items()}


def _until(run: Run, last: dict[str, Any] | None) -> Run:
    end = ("", 0) if last is None else (last["logfileName"], last["logfileOffset"])
    run.canal = [f for f in run.canal if (f["logfileName"], f["logfileOffset"]) <= end]
    run.ours_error = None
    return run


# --- transaction shapes, odd names, the benchmarks' reference workload ------------------------------------------------


def test_transaction_shapes_side_by_side(mariadb: MariaDBDatabase, canal_peer: CanalPeer, minimal: None) -> None:
    """Commits, rollbacks, savepoints mixing InnoDB and MyISAM, XA (committed, rolled back, one phase; on a table the
    filter leaves out too), CREATE TABLE ... SELECT and rotations (``test_differential_transactions_mariadb``'s)."""

    @fuzz_settings(EXAMPLES)
    @given(workload=_workload)
    def check(workload: list[tuple[str, list[tuple[Any, ...]]]]) -> None:
        run_id = next(_RUNS)
        tables = _Tables(mariadb.database, run_id)
        conn, side = mariadb.connect(), mariadb.connect()
        conn.select_db(mariadb.database)
        log: list[str] = []
        _play(
            conn,
            [
                f"CREATE TABLE {tables.inno} (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
                f"CREATE TABLE {tables.myi} (id INT PRIMARY KEY, v INT) ENGINE=MyISAM",
                f"CREATE TABLE {tables.xalog} (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
                f"CREATE TABLE {tables.outside} (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
            ],
            [],
        )

        def play() -> None:
            for n, (kind, ops) in enumerate(workload):
                _play(conn, _statements(tables, kind, list(ops), n), log, side)

        try:
            run = side_by_side(
                mariadb,
                canal_peer,
                f"tx{run_id}",
                play,
                filter_regex=rf"{mariadb.database}\..*",
                black_regex=rf"{mariadb.database}\.{tables.outside}",
            )
        finally:
            conn.close()
            side.close()
        note("\n".join(log))
        _assert_same(run, f"transactions {run_id}")

    check()


def test_odd_names_side_by_side(mariadb: MariaDBDatabase, canal_peer: CanalPeer, minimal: None) -> None:
    """Databases, tables and columns named from ``test_differential_names_mariadb``'s pool (dots, slashes, quotes,
    backticks, spaces, ``%``, ``#``, non-ASCII letters, case), created, filled, renamed and dropped."""

    @fuzz_settings(EXAMPLES)
    @given(
        picks=st.lists(st.tuples(st.sampled_from(NAME_POOL), st.sampled_from(NAME_POOL)), min_size=1, max_size=4),
        seed=st.integers(0, 2**16),
    )
    def check(picks: list[tuple[str, str]], seed: int) -> None:
        db = f"n{next(_RUNS)} é#`%"
        statements = odd_name_statements(db, picks, seed)
        mariadb.execute(f"CREATE DATABASE {ident(db)}")

        def play() -> None:
            for sql in statements:
                mariadb.execute(sql)

        try:
            run = side_by_side(mariadb, canal_peer, f"names{next(_RUNS)}", play, filter_regex=_regex(db) + r"\..*")
            note("\n".join(statements))
            _assert_same(run, f"names in {db!r}")
        finally:
            mariadb.execute(f"DROP DATABASE IF EXISTS {ident(db)}")

    check()


def _regex(name: str) -> str:
    """A name as a literal of canal's filter regex (a comma separates the filter's patterns: escaped too)."""
    return "".join("\\" + c if not c.isalnum() and c != "_" else c for c in name)


def test_reference_workload_side_by_side(mariadb: MariaDBDatabase, canal_peer: CanalPeer, minimal: None) -> None:
    """``benchmarks/bench_decode.py``'s workload (a 10-column table of mixed types: multi-row INSERTs, UPDATEs and
    DELETEs of 1,000 rows a statement), scaled down to 3,000 row changes."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_decode import build_workload

    table = f"{mariadb.database}.bench"
    run = side_by_side(
        mariadb,
        canal_peer,
        f"ref{next(_RUNS)}",
        lambda: build_workload(mariadb, table, inserts=1000, updates=1000, deletes=1000),
        filter_regex=rf"{mariadb.database}\..*",
        timeout=120,
    )
    fired = _assert_same(run, "the reference workload")
    rows = sum(len(f["rows"]) for f in run.ours if f["tableName"] == "bench")
    assert rows == 3000 and fired["mysql-type-text"] > 0


# --- each of canal's behaviours pycanal does better, pinned ---------------------------------------------------------


def test_ddl_and_xa_canal_reads_otherwise(mariadb: MariaDBDatabase, canal_peer: CanalPeer, minimal: None) -> None:
    """The random workloads' statements canal hands out otherwise, played once each: a database the filter takes
    nothing of (``database-ddl``), partition maintenance its parser reads as a QUERY of no table (``ddl-kind``) or not
    at all (``ddl-dropped``), an XA transaction's end (``xa-outcome``). pycanal's entries name the table each DDL
    changed, and its rows are SELECT's."""
    db = mariadb.database
    h = f"`{db}`.h"
    statements = [
        f"CREATE DATABASE `{db}_other`",
        f"DROP DATABASE `{db}_other`",
        f"CREATE TABLE {h} (id INT PRIMARY KEY) PARTITION BY HASH (id) PARTITIONS 2",
        f"ALTER TABLE {h} REORGANIZE PARTITION",
        f"ALTER TABLE {h} REMOVE PARTITIONING",
        "XA START 'pin'",
        f"INSERT INTO {h} VALUES (1)",
        "XA END 'pin'",
        "XA PREPARE 'pin'",
        "XA COMMIT 'pin'",
        f"INSERT INTO {h} VALUES (2)",
    ]

    def play() -> None:
        conn = mariadb.connect()
        with conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql)
        conn.close()

    run = side_by_side(mariadb, canal_peer, f"ddl{next(_RUNS)}", play, filter_regex=rf"{db}\..*")
    _assert_same(run, "DDL and XA", expect={"database-ddl", "ddl-kind", "ddl-dropped", "xa-outcome"})
    ddl = [(f["tableName"], f["sql"]) for f in run.ours if f.get("isDdl") and "PARTITION" in f.get("sql", "")]
    assert ddl == [("h", statements[2]), ("h", statements[3]), ("h", statements[4])]
    assert [image["id"] for _e, image in rows_of(run.entries, "h")] == [1, 2]
    assert [row[0] for row in mariadb.execute(f"SELECT id FROM {h} ORDER BY id")] == [1, 2]


@pytest.mark.parametrize(
    ("case", "ddl"),
    [
        ("SET STATEMENT ... FOR", "SET STATEMENT sql_mode='' FOR ALTER TABLE {t} ADD COLUMN z INT FIRST"),
        ("system versioning", "ALTER TABLE {t} ADD SYSTEM VERSIONING"),
    ],
)
def test_canal_stops_at_rows_after_mariadb_ddl_it_cannot_follow(
    mariadb: MariaDBDatabase, canal_peer: CanalPeer, minimal: None, case: str, ddl: str
) -> None:
    """canal's TSDB leaves MariaDB's ``SET STATEMENT ... FOR`` DDL and system versioning's hidden columns out: the
    next row of the table stops canal ("column size is not match", retried forever); pycanal names it as SELECT."""
    t = f"`{mariadb.database}`.t"

    def play() -> None:
        mariadb.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, a INT)")
        mariadb.execute(ddl.format(t=t))
        mariadb.execute(f"INSERT INTO {t} (id, a) VALUES (1, 2)")

    run = side_by_side(mariadb, canal_peer, f"stop{next(_RUNS)}", play, filter_regex=rf"{mariadb.database}\..*")
    assert any("column size is not match" in alarm for alarm in run.alarms), run.alarms
    assert not [f for f in run.canal if f["tableName"] == "t" and f["eventType"] == "INSERT"]
    (row,) = [image for event, image in rows_of(run.entries, "t") if event == "INSERT"]
    selected = mariadb.execute(f"SELECT id, a FROM {t}")[0]
    assert (row["id"], row["a"]) == tuple(selected) == (1, 2)
    assert compare(run.canal, run.ours, canal_stopped=True).fired["canal-stops"] >= 1


def test_canal_stops_at_a_year_column_under_full_metadata(mariadb: MariaDBDatabase, canal_peer: CanalPeer) -> None:
    """MariaDB's FULL table maps count YEAR in the signedness bits (MySQL's do not): canal reads the next integer
    column's sign from the wrong bit, finds its TSDB disagreeing and stops ("unmatch column metadata")."""
    before = mariadb.execute("SELECT @@GLOBAL.binlog_row_metadata")[0][0]
    mariadb.execute("SET GLOBAL binlog_row_metadata = FULL")
    t = f"`{mariadb.database}`.y"
    try:

        def play() -> None:
            mariadb.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, y YEAR, small TINYINT)")
            mariadb.execute(f"INSERT INTO {t} VALUES (1, 2024, -5)")

        run = side_by_side(mariadb, canal_peer, f"year{next(_RUNS)}", play, filter_regex=rf"{mariadb.database}\..*")
    finally:
        mariadb.execute(f"SET GLOBAL binlog_row_metadata = {before}")
    assert any("unmatch column metadata" in alarm for alarm in run.alarms), run.alarms
    assert [image for _e, image in rows_of(run.entries, "y")] == [{"id": 1, "y": 2024, "small": -5}]


def test_statement_text_carries_what_a_field_filter_leaves_out(
    mariadb: MariaDBDatabase, canal_peer: CanalPeer, minimal: None
) -> None:
    """canal hands out each row event's statement (MariaDB's Annotate_rows) as a QUERY entry unless
    ``filter.query.dml``: with every literal of it, the ones a field filter removes from the rows too. pycanal hands
    out the rows only."""
    db = mariadb.database
    run = side_by_side(
        mariadb,
        canal_peer,
        f"field{next(_RUNS)}",
        lambda: (
            mariadb.execute(f"CREATE TABLE `{db}`.acct (id INT PRIMARY KEY, secret VARCHAR(20))"),
            mariadb.execute(f"INSERT INTO `{db}`.acct VALUES (1, 's3cr3t')"),
        ),
        filter_regex=rf"{db}\..*",
        canal_settings={"field_filter": f"{db}.acct:id"},
        pycanal_settings={"field_filter": f"{db}.acct:id"},
    )
    (statement,) = [f for f in run.canal if f["eventType"] == "QUERY" and "acct" in f["sql"]]
    assert "s3cr3t" in statement["sql"] and not statement["isDdl"]
    (canal_row,) = [f for f in run.canal if f["tableName"] == "acct" and f["eventType"] == "INSERT"]
    assert [c["name"] for c in canal_row["rows"][0]["after"]] == ["id"]
    assert "s3cr3t" not in repr(run.ours) and rows_of(run.entries, "acct") == [("INSERT", {"id": 1})]


def test_canal_names_the_file_before_a_rotation(mariadb: MariaDBDatabase, canal_peer: CanalPeer, minimal: None) -> None:
    """After ``FLUSH BINARY LOGS`` canal's entries of the new file's first transactions now and then (a race: after 2
    to 9 rotations of 10 measured, parallel parsing or not) carry the old file's name with the new file's offsets: a
    position no server has, which a cursor acked there resumes from. pycanal's positions are the server's
    (``SHOW BINLOG EVENTS``). 30 rotations: canal misnames none of them once in a thousand runs."""
    t = f"`{mariadb.database}`.r"
    files: list[str] = []

    def play() -> None:
        conn = mariadb.connect()
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY)")
            for i in range(30):
                cur.execute(f"INSERT INTO {t} VALUES ({2 * i})")
                cur.execute("FLUSH BINARY LOGS")
                cur.execute("SHOW MASTER STATUS")
                files.append(str(cur.fetchone()[0]))
                cur.execute(f"INSERT INTO {t} VALUES ({2 * i + 1})")
        conn.close()

    run = side_by_side(mariadb, canal_peer, f"rot{next(_RUNS)}", play, filter_regex=rf"{mariadb.database}\..*")

    def placed(forms: list[dict[str, Any]]) -> dict[int, tuple[str, int]]:
        return {
            int(f["rows"][0]["after"][0]["value"]): (f["logfileName"], f["logfileOffset"])
            for f in forms
            if f["tableName"] == "r" and f["eventType"] == "INSERT"
        }

    ours, theirs = placed(run.ours), placed(run.canal)
    for i, file in enumerate(files):  # row 2i+1 is the first of file i
        assert ours[2 * i + 1][0] == file
        events = mariadb.execute(f"SHOW BINLOG EVENTS IN '{file}'")
        assert any(int(e[1]) == ours[2 * i + 1][1] and e[2] == "Write_rows_v1" for e in events)
    misnamed = {row for row in ours if theirs[row] != ours[row]}
    assert misnamed and all(theirs[row][0] < ours[row][0] for row in misnamed), misnamed
    assert compare(run.canal, run.ours).fired["rotate-file-name"] >= len(misnamed)


def test_a_restart_inside_a_transaction_redelivers_in_canal_not_in_pycanal(
    mariadb: MariaDBDatabase, canal_peer: CanalPeer, minimal: None, tmp_path: Path
) -> None:
    """alibaba/canal #3470: canal's cursor names a row inside a transaction, but a restart dumps from the
    transaction's start, and the rows acked before the restart come again. pycanal's cursor counts the rows of the
    transaction acked (``rowsDone``): a restart hands out the next one."""
    db = mariadb.database
    mariadb.execute(f"CREATE TABLE `{db}`.big (id INT PRIMARY KEY)")
    journal, position = mariadb.execute("SHOW MASTER STATUS")[0][:2]
    conn = mariadb.connect()
    with conn.cursor() as cur:
        cur.execute("BEGIN")
        for i in range(1, 7):
            cur.execute(f"INSERT INTO `{db}`.big VALUES ({i})")
        cur.execute("COMMIT")
    conn.close()
    name = f"resume{next(_RUNS)}"
    settings = {
        "address": mariadb.address,
        "username": mariadb.user,
        "password": mariadb.password,
        "position": {"journalName": str(journal), "position": int(position), "timestamp": 1},
        "filter": rf"{db}\.big",
        "meta": "local_file",
        "data_dir": str(tmp_path / "canal"),
        "consume": "none",
        "batch_mode": "ITEMSIZE",
    }

    def canal_rows(batch_size: int, *, ack: bool) -> list[int]:
        mark = len(canal_peer.lines)
        canal_peer.command({"cmd": "get", "destination": name, "batch_size": batch_size, "ack": ack})
        return [
            int(line["rowChange"]["rowDatas"][0]["afterColumns"][0]["value"])
            for line in canal_peer.lines[mark:]
            if line["kind"] == "entry" and line["header"]["eventType"] == "INSERT"
        ]

    canal_peer.start_destination(name, **settings)
    first: list[int] = []
    deadline = time.monotonic() + 30
    while len(first) < 3 and time.monotonic() < deadline:
        first += canal_rows(2, ack=True)  # statement text, row: one row a batch
    assert first == [1, 2, 3]
    canal_peer.command({"cmd": "stop", "destination": name})
    canal_peer.start_destination(name, **settings)
    again: list[int] = []
    while len(again) < 6 and time.monotonic() < deadline + 30:
        again += canal_rows(100, ack=True)
    canal_peer.command({"cmd": "stop", "destination": name})
    assert again[:3] == [1, 2, 3] and again[3:] == [4, 5, 6]  # the acked rows, delivered again

    config = InstanceConfig(
        destination=name,
        master=mariadb.master((journal, position)),
        filter_regex=rf"{db}\.big",
        meta_mode="file",
        meta_dir=str(tmp_path / "pycanal"),
        flush_period_s=0,
        store=StoreConfig(batch_mode="ITEMSIZE"),
    )
    ours = Instance(config)
    ours.start()
    try:
        got = _instance_rows(ours, 3, per_batch=2)
    finally:
        ours.stop()
    assert got == [1, 2, 3]
    ours = Instance(config)
    ours.start()
    try:
        assert _instance_rows(ours, 3, per_batch=100) == [4, 5, 6]
    finally:
        ours.stop()


def _instance_rows(inst: Instance, want: int, *, per_batch: int) -> list[int]:
    rows: list[int] = []
    deadline = time.monotonic() + 30
    while len(rows) < want:
        assert time.monotonic() < deadline, rows
        msg = inst.get_without_ack(per_batch, timeout=0.5)
        if msg.id == EMPTY_MESSAGE_ID:
            continue
        for entry in msg.entries:
            rows += [r.after[0] for r in entry.iter_rows() if r.after is not None]
        inst.ack(msg.id)
    return rows


def test_every_difference_is_in_the_guide() -> None:
    text = GUIDE.read_text()
    missing = [name for name in DIFFERENCES if f"`{name}`" not in text]
    assert not missing, f"{GUIDE.name} does not describe {missing}"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q", "-p", "no:xdist", "-s"]))
