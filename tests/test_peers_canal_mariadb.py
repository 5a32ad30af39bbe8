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
raw entries. CI runs a few random examples (``PYCANAL_FUZZ_EXAMPLES``, default 20, a fifth of them here).
"""

from __future__ import annotations

import datetime as dt
import itertools
import sys
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

from canal.testing.plugin import MariaDBDatabase
from tests.test_schema_history_mariadb import _rows

pytestmark = [pytest.mark.integration, pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))]

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = max(3, FUZZ_EXAMPLES // 5)
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
    ("u", "UUID"), ("i6", "INET6"), ("i4", "INET4"),
]  # fmt: skip
VALUES = [
    "'2024-01-02 03:04:05', '2024-01-02 03:04:05.120', '2024-01-02 03:04:05', '2024-01-02 03:04:05', "
    "'2024-01-02 03:04:05.1000', '-01:02:03', '12:00:00.5', '2024-02-29', 2024, b'1', b'101010101010', -128, 255, "
    "65535, 16777215, 4294967295, 18446744073709551615, '{\"a\": [1, 2.5, \"x\"], \"é\": null}', "
    "ST_GeomFromText('POINT(1 2)'), 1.5, 0.1, 12345, '-12345678901234567890.0123456789', 'ab', 'ab', '\\0\\1', 'é', "
    "'text', x'00ff', true, 'a', 'x,z', '123e4567-e89b-12d3-a456-426655440000', '::', '255.255.255.255'",
    "'0000-00-00 00:00:00', '1000-01-01 00:00:00.000', '9999-12-31 23:59:59.999999', NULL, "
    "'1970-01-01 00:00:01.0001', '838:59:59', '-838:59:59.00', '0000-00-00', 0, b'0', b'0', 127, 0, 1, 0, 7, 1, "
    "'[]', NULL, -1e-50, 1e300, 0, '0.0000000001', '', '', '', '', NULL, '', false, 'c', '', "
    "'00000000-0000-0000-0000-000000000001', '2001:db8::1', '0.0.0.0'",
    ", ".join(["NULL"] * 35),
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
            "negative-zero", "geometry-srid", "json-as-blob",
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


def test_every_difference_is_in_the_guide() -> None:
    text = GUIDE.read_text()
    missing = [name for name in DIFFERENCES if f"`{name}`" not in text]
    assert not missing, f"{GUIDE.name} does not describe {missing}"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q", "-p", "no:xdist", "-s"]))
