"""A zero date in a primary key stops the batch, whatever ``zero_dates`` says: stored as NULL (``zero_dates="null"``)
the keys ``('0000-00-00', 1)``, ``('2020-00-00', 1)`` and ``('2020-01-00', 1)`` became one, and the mirror held 2
rows where ``SELECT`` shows 4. No date type holds them, so the mirror cannot keep such keys apart: a typed stop
naming the column, nothing of the batch written. Zero dates outside the key still follow the choice (NULL).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("deltalake")

from mirror_forms import Captured, batch_of, capture

from canal.lake.mirror import DeltaMirror
from canal.lake.types import MirrorTypeError
from canal.testing.plugin import MariaDBDatabase
from canal.testing.services.mariadb import MariaDBServer

pytestmark = pytest.mark.integration

SETUP = [
    "CREATE TABLE {db}.z (d DATE, n INT, v INT, PRIMARY KEY (d, n))",
    "CREATE TABLE {db}.t (d DATETIME PRIMARY KEY, v INT)",
    "CREATE TABLE {db}.o (id INT PRIMARY KEY, d DATE, t DATETIME(3))",  # zero dates outside a key
]
PHASES = [
    ["INSERT INTO {db}.o VALUES (1, '0000-00-00', '2020-01-00 10:00:00.5'), (2, '2024-02-29', NULL)"],
    [
        "INSERT INTO {db}.z VALUES ('0000-00-00', 1, 1), ('2020-00-00', 1, 2), ('2020-01-00', 1, 3), "
        "('2020-01-01', 1, 4)",
        "INSERT INTO {db}.t VALUES ('0000-00-00 00:00:00', 1), ('2021-01-01 00:00:00', 2)",
        "UPDATE {db}.o SET d = '2020-00-00' WHERE id = 2",
    ],
    ["DELETE FROM {db}.z WHERE d = '2020-01-00'"],  # a delete keyed by a zero date stops too
]


@pytest.fixture(scope="module")
def captured(mariadb_server: MariaDBServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Captured]:
    """The phases' entries and SELECTs, captured once for the module's tests."""
    mariadb_server.execute("DROP DATABASE IF EXISTS zero_keys")
    mariadb_server.execute("CREATE DATABASE zero_keys")
    try:
        db = MariaDBDatabase(server=mariadb_server, database="zero_keys")
        meta = tmp_path_factory.mktemp("meta")
        yield capture(db, meta, SETUP, PHASES, ["z", "t", "o"], session=["SET SESSION sql_mode = ''"])
    finally:
        mariadb_server.execute("DROP DATABASE IF EXISTS zero_keys")


@pytest.mark.parametrize("form", ["rows", "typed", "packed"])
def test_a_zero_date_in_a_key_stops_the_batch_whatever_zero_dates_says(
    captured: Captured, tmp_path: Path, form: str
) -> None:
    assert len(captured.phases[1].selected["z"]) == 4, "the source keeps the four keys apart"
    for zero_dates in ("null", "error"):
        mirror = DeltaMirror(tmp_path / f"{form}-{zero_dates}", background_folds=False, zero_dates=zero_dates)
        if zero_dates == "null":  # outside a key, the choice holds: NULL
            mirror.apply(batch_of(captured.phases[0].entries, form, 1, "null"), 1)
            read = mirror.read(captured.db, "o").sort_by("id").to_pylist()
            assert [(r["d"], r["t"]) for r in read] == [(None, None), (dt.date(2024, 2, 29), None)]
        for phase in (1, 2):
            with pytest.raises(MirrorTypeError, match=r"column 'd'.*zero date .* in a primary-key column"):
                mirror.apply(batch_of(captured.phases[phase].entries, form, phase + 1, zero_dates), phase + 1)
            # nothing of the batch written: z and t are not there, o is as it was
            assert not mirror.table_path(captured.db, "z").exists() and not mirror.table_path(captured.db, "t").exists()
            if zero_dates == "null":
                assert mirror.read(captured.db, "o").num_rows == 2
        mirror.close()
