"""Where the mirror needs change rows of typed images -- an XA transaction in a ``images=variant`` batch, a foreign
key's action reading a child table's rows -- it renders their cells as canal text through Arrow, never through
Python's dates: a year-0 DATE or DATETIME (``'0000-01-01'``, which MySQL stores and ``datetime`` cannot hold) in any
table of such a batch failed it with a bare OverflowError. Each form of the batch ends equal to ``SELECT``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("deltalake")

from mirror_forms import FORMS, capture, mirror_all

from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration

SETUP = [
    "CREATE TABLE {db}.a (id INT PRIMARY KEY, d DATE, t DATETIME(3))",
    "CREATE TABLE {db}.b (id INT PRIMARY KEY, v INT)",
    "CREATE TABLE {db}.p (id INT PRIMARY KEY)",
    "CREATE TABLE {db}.c (id INT PRIMARY KEY, pid INT, d DATE, t DATETIME, "
    "FOREIGN KEY (pid) REFERENCES {db}.p (id) ON DELETE CASCADE) ENGINE=InnoDB",
]
PHASES = [
    [
        "INSERT INTO {db}.a VALUES (1, '0000-01-01', '0000-02-03 04:05:06.5'), (2, '2020-01-01', '2020-01-01')",
        "XA START 'x1'",
        "INSERT INTO {db}.b VALUES (1, 1)",
        "XA END 'x1'",
        "XA PREPARE 'x1'",
        "XA COMMIT 'x1'",
        "INSERT INTO {db}.p VALUES (1), (2)",
        "INSERT INTO {db}.c VALUES (1, 1, '0000-01-01', '0000-12-31 23:59:59'), (2, 2, '2000-01-01', NULL)",
    ],
    [
        "UPDATE {db}.a SET id = 3, t = '0000-01-01 00:00:00' WHERE id = 1",
        "XA START 'x2'",
        "UPDATE {db}.b SET v = 2",
        "XA END 'x2'",
        "XA PREPARE 'x2'",
        "XA COMMIT 'x2'",
        "DELETE FROM {db}.p WHERE id = 2",  # the child's row goes by the cascade, which the binlog does not log
    ],
]


def test_year_zero_beside_xa_and_cascades_mirrors_in_every_form(mariadb: MariaDBDatabase, tmp_path: Path) -> None:
    captured = capture(mariadb, tmp_path / "meta", SETUP, PHASES, ["a", "b", "p", "c"])
    failures = {form: mirror_all(captured, tmp_path / form, form) for form in FORMS}
    assert {k: v for k, v in failures.items() if v} == {}
