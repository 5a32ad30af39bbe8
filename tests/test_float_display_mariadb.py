"""FLOAT and DOUBLE values are the ones ``SELECT`` shows, on every path: a FLOAT is its float32 printed with 6
significant digits, a ``FLOAT(M,D)`` / ``DOUBLE(M,D)`` its stored value printed with ``D`` decimals (123.4568,
1234.567 and 999.9999 in FLOAT(7,4) / FLOAT(10,3) columns, where 6 digits gave 123.457, 1234.57 and 1000.0), a
DOUBLE its own value; and MariaDB prints a negative zero as 0 (a FLOAT that underflows, ``-1e-50``, is logged as
-0.0). The binlog says only FLOAT / DOUBLE: the decimals come from the schema history, under FULL metadata as under
NO_LOG. Entries, every mirror form, an ``ADD COLUMN ... DEFAULT`` the server fills in, and the snapshot reader all
give the value ``SELECT`` gives (pymysql's ``float`` of the server's text).
"""

from __future__ import annotations

import math
import struct
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("deltalake")

from mirror_forms import FORMS, capture, mirror_all

from canal.config import InstanceConfig, StoreConfig
from canal.instance import Instance
from canal.protocol import EntryType
from canal.spark.testing import master_position
from canal.sql.values import float_display, float_stored
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration

COLUMNS = (
    "a FLOAT, b FLOAT(7,4), c FLOAT(10,3), d FLOAT(20), e FLOAT(30), g DOUBLE(10,2), h DOUBLE, i FLOAT(6,4), "
    "j DOUBLE(20,10), k FLOAT(5,0) UNSIGNED"
)
VALUES = [
    "(1, 123.4568, 123.45678, 1234.567, 123.45678, 123.45678, 1234.567, 0.1, 9.99999, 1.12345678901, 99)",
    "(2, 1234.567, 999.99994, 999999.999, 1.1, 1.1, 99999999.99, 1e300, -0.00005, -0.0000000001, 1.5)",
    "(3, 999.9999, -0.00004, 0.0005, 3.40282e38, 1e-300, -0.005, -1e-300, 1.00005, 123456789.0123456789, 0.5)",
    "(4, -1e-50, -1e-50, -1e-50, -1e-50, -1e-50, -0.001, -1e-320, -0.00001, -1e-320, 2.5)",  # negative zeros
    "(5, 16777217, 0.00005, -999999.999, 1e-40, -0.0, 0.125, 5e-324, -9.99995, 0.1, 99999)",
]


@pytest.fixture
def binlog_row_metadata(mariadb: MariaDBDatabase, request: pytest.FixtureRequest) -> Any:
    before = mariadb.execute("SELECT @@GLOBAL.binlog_row_metadata")[0][0]
    mariadb.execute(f"SET GLOBAL binlog_row_metadata = {request.param}")
    try:
        yield request.param
    finally:
        mariadb.execute(f"SET GLOBAL binlog_row_metadata = {before}")


def _exact(value: Any) -> Any:
    """A float by its repr: 0.0 and -0.0 apart, 123.4568 and 123.45680236816406 apart."""
    return repr(value) if isinstance(value, float) else value


@pytest.mark.parametrize("binlog_row_metadata", ["FULL", "NO_LOG"], indirect=True)
def test_floats_are_what_select_shows_in_entries_and_the_mirror(
    mariadb: MariaDBDatabase, binlog_row_metadata: str, tmp_path: Path
) -> None:
    phases = [
        [f"INSERT INTO {{db}}.f VALUES {', '.join(VALUES)}"],
        [
            "UPDATE {db}.f SET b = 1.23456, a = -a, c = c / 3 WHERE id < 3",
            "ALTER TABLE {db}.f ADD COLUMN m FLOAT(5,2) NOT NULL DEFAULT 3.14159, ADD COLUMN n FLOAT DEFAULT "
            "1.1234567, ADD COLUMN o DOUBLE(6,1) DEFAULT -0.04, ADD COLUMN p FLOAT NOT NULL",
            "INSERT INTO {db}.f (id, p) VALUES (6, 2.5)",
        ],
    ]
    setup = [f"CREATE TABLE {{db}}.f (id INT PRIMARY KEY, {COLUMNS})"]
    captured = capture(mariadb, tmp_path / "meta", setup, phases, ["f"], columnar=binlog_row_metadata != "FULL")
    # every entry's value is SELECT's, exactly: each row's last image in a phase against SELECT after it (no
    # update in the phase after it changes the columns it has)
    for phase in captured.phases:
        shown = {r["id"]: {k: _exact(v) for k, v in r.items()} for r in phase.selected["f"]}
        images = {
            r.after_dict()["id"]: r
            for e in phase.entries
            if e.row_change is not None and not e.row_change.is_ddl
            for r in e.row_change.rows
        }
        for row_id, row in images.items():  # (an image before the ADD COLUMN has its columns alone)
            image = {k: _exact(v) for k, v in row.after_dict().items()}
            assert image == {k: shown[row_id][k] for k in image}, row_id
    last = {r["id"]: {k: _exact(v) for k, v in r.items()} for r in captured.phases[-1].selected["f"]}
    types = {c.name: c.mysql_type for c in captured.rows()[0].after_columns}
    assert (types["b"], types["g"], types["d"], types["e"]) == ("float(7,4)", "double(10,2)", "float", "double")
    first = {r["id"]: {k: _exact(v) for k, v in r.items()} for r in captured.phases[0].selected["f"]}
    # FLOAT(M,D) shows its decimals (6 significant digits gave 123.457, 1000.0, 1234.57); a FLOAT shows 6 digits
    assert (first[1]["b"], first[2]["b"], first[1]["c"], first[2]["a"]) == (
        "123.4568",
        "999.9999",
        "1234.567",
        "1234.57",
    )
    assert first[4]["a"] == first[4]["d"] == "0.0", "SELECT shows the FLOAT -0.0 the binlog holds as 0"
    assert (last[1]["b"], last[1]["c"]) == ("1.2346", "411.522")
    assert (last[6]["m"], last[6]["n"], last[6]["o"]) == ("3.14", "1.12346", "0.0")
    # every form and mode once; below FULL metadata (a question of decoding: the rows decoded column by column,
    # as run_batches into a mirror decodes them) the typed form
    tried = [("merge_on_read", form) for form in FORMS] + [("copy_on_write", "rows"), ("copy_on_write", "typed")]
    failures = {
        (mode, form): mirror_all(captured, tmp_path / f"{mode}-{form}", form, mode=mode)
        for mode, form in (tried if binlog_row_metadata == "FULL" else [("merge_on_read", "typed")])
    }
    assert {k: v for k, v in failures.items() if v} == {}


def test_a_snapshot_reads_the_floats_the_binlog_gives(mariadb: MariaDBDatabase, tmp_path: Path) -> None:
    """The snapshot reader selects a FLOAT as DOUBLE (its float32) and rounds it as the decoder does, decimals
    included: a snapshot row and a binlog row of the same data are equal, and both are SELECT's."""
    db = mariadb.database
    conn = mariadb.connect(autocommit=True)
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE `{db}`.f (id INT PRIMARY KEY, {COLUMNS})")
        start = master_position(conn)
        cur.execute(f"INSERT INTO `{db}`.f VALUES {', '.join(VALUES)}")
        cur.execute(f"SELECT * FROM `{db}`.f")
        selected = sorted(tuple(map(_exact, r)) for r in cur.fetchall())
    conn.close()
    config = InstanceConfig(
        destination="float-snapshot",
        master=mariadb.master(start),
        filter_regex=rf"{db}\.f",
        store=StoreConfig(batch_mode="ITEMSIZE"),
    )
    binlog, snapshot = [], []
    with Instance(config) as inst:
        inst.snapshot([f"{db}.f"], chunk_rows=2)
        deadline = time.monotonic() + 30
        while len(binlog) < len(VALUES) or len(snapshot) < len(VALUES):
            assert time.monotonic() < deadline, (len(binlog), len(snapshot))
            for e in inst.get(100, timeout=0.2).entries:
                if e.entry_type is EntryType.ROWDATA and e.row_change is not None:
                    rows = [tuple(map(_exact, r.after)) for r in e.row_change.rows]
                    (snapshot if e.row_change.event_type.name == "SNAPSHOT" else binlog).extend(rows)
    assert sorted(binlog) == sorted(snapshot) == selected


# -- random values against the server ---------------------------------------------------------------------------------

_SHAPES = {"f74": (7, 4), "f103": (10, 3), "f2010": (20, 10), "f50": (5, 0), "d125": (12, 5), "f": None, "d": None}


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.lists(
        st.floats(min_value=-1e6, max_value=1e6, allow_nan=False) | st.floats(min_value=-1e-3, max_value=1e-3),
        min_size=30,
        max_size=30,
    )
)
def test_random_floats_decode_to_what_select_shows(mariadb: MariaDBDatabase, values: list[float]) -> None:
    """Random numbers into FLOAT(M,D) / DOUBLE(M,D) / FLOAT / DOUBLE columns (INSERT IGNORE: a value beyond
    ``M`` digits is stored clipped, which SELECT shows too): the decoded row is SELECT's, float for float."""
    db = mariadb.database
    conn = mariadb.connect(autocommit=True)
    definitions = ", ".join(
        f"{name} {'DOUBLE' if name.startswith('d') else 'FLOAT'}{'' if shape is None else str(shape).replace(' ', '')}"
        for name, shape in _SHAPES.items()
    )
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = ''")
        cur.execute(f"CREATE OR REPLACE TABLE `{db}`.r (id INT PRIMARY KEY, {definitions})")
        start = master_position(conn)
        rows = [(n, *(values[(n + k) % len(values)] for k in range(len(_SHAPES)))) for n in range(len(values))]
        marks = ", ".join(["%s"] * (len(_SHAPES) + 1))
        cur.executemany(f"INSERT IGNORE INTO `{db}`.r VALUES ({marks})", rows)
        cur.execute(f"SELECT * FROM `{db}`.r")
        selected = {r[0]: tuple(map(_exact, r)) for r in cur.fetchall()}
    conn.close()
    decoded: dict[int, tuple[Any, ...]] = {}
    config = InstanceConfig(destination="random-floats", master=mariadb.master(start), filter_regex=rf"{db}\.r")
    with Instance(config) as inst:
        deadline = time.monotonic() + 30
        while len(decoded) < len(values):
            assert time.monotonic() < deadline
            for e in inst.get(100, timeout=0.2).entries:
                if e.row_change is not None and not e.row_change.is_ddl:
                    decoded.update({r.after[0]: tuple(map(_exact, r.after)) for r in e.row_change.rows})
    assert decoded == selected


@given(
    number=st.floats(allow_nan=False, allow_infinity=False, min_value=-1e30, max_value=1e30), scale=st.integers(0, 8)
)
def test_a_stored_float_with_decimals_shows_at_most_those_decimals(number: float, scale: int) -> None:
    """The model alone: a FLOAT(M,D) stores a float32, and what it shows has at most D decimals, lies within half a
    unit of the D-th decimal of what it stores, and (MariaDB) is never a negative zero."""
    stored = float_stored(number, True, scale)
    assert struct.unpack("<f", struct.pack("<f", stored))[0] == stored
    show = float_display(True, scale, mariadb=True)
    assert show is not None
    shown = show(stored)
    assert round(shown, scale) == shown
    assert abs(shown - stored) <= 0.5 * 10**-scale * (1 + 1e-9) + abs(stored) * 1e-15
    assert not (shown == 0 and math.copysign(1, shown) < 0)
