"""The mirror's own column names never meet the source's: a table with columns named ``_canal_op``, ``_canal_batch``,
``_canal_seq`` (the change log's own columns until now: every batch of it failed with a duplicate field, and an empty
table was left) or like the mirror's temporary columns (``__pycanal_key_0``: a float key's identity, which the
mirror then dropped as its own) mirrors like any other, read back with the source's names by every reader. The
mirror's names are longer than any MySQL column name (``canal.lake.own_names``). A mirror an older pycanal wrote,
its change log and staged parts under the old names, reads as it did, and its log takes the new names at its next
append.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

pytest.importorskip("deltalake")

from mirror_forms import FORMS, Captured, capture, mirror_all
from mirror_rows import CREATE, batch, ddl, delete, upsert, values

from canal.lake.mirror import DeltaMirror
from canal.lake.own_names import LEGACY_LOG_COLUMNS, LOG_COLUMNS, MYSQL_NAME_CHARACTERS
from canal.lake.store import changelog, fs, staged
from canal.spark.current import current_dataframe, current_duckdb, current_polars
from canal.testing.plugin import MariaDBDatabase
from canal.testing.services.mariadb import MariaDBServer

pytestmark = pytest.mark.integration

NAMED = "`_canal_op` CHAR(1), `_canal_batch` INT, `_canal_seq` INT, `__pycanal_key_0` INT, `__pycanal_rank` INT"
SETUP = [
    f"CREATE TABLE {{db}}.n (id INT PRIMARY KEY, {NAMED}, `__pycanal_row` VARCHAR(5))",
    # a float key: the mirror adds its identity columns beside a source column named like them
    "CREATE TABLE {db}.f (k DOUBLE, `__pycanal_key_0` INT, `_canal_op` CHAR(1), PRIMARY KEY (k, `__pycanal_key_0`))",
]
PHASES = [
    [
        "INSERT INTO {db}.n VALUES (1, 'd', 1, 2, 3, 4, 'u'), (2, 'u', 9, 9, 9, 9, 'd'), (3, NULL, 0, 0, 0, 0, '')",
        "INSERT INTO {db}.f VALUES (1.5, 1, 'd'), (0, 2, 'u'), (2.5, 2, 'd')",
    ],
    [
        "UPDATE {db}.n SET `_canal_op` = 'x', id = 4 WHERE id = 1",  # a key moved
        "DELETE FROM {db}.n WHERE `_canal_op` = 'u'",
        "UPDATE {db}.f SET `_canal_op` = 'z', `__pycanal_key_0` = 7 WHERE k = 1.5",
        "DELETE FROM {db}.f WHERE k = 2.5",
    ],
    ["ALTER TABLE {db}.n ADD COLUMN `_canal_x` INT DEFAULT 5", "INSERT INTO {db}.n (id) VALUES (9)"],
]


def test_the_mirrors_names_are_longer_than_a_mysql_column_name() -> None:
    assert all(len(name) > MYSQL_NAME_CHARACTERS for name in LOG_COLUMNS)
    assert not set(LOG_COLUMNS) & set(LEGACY_LOG_COLUMNS)


@pytest.fixture(scope="module")
def captured(mariadb_server: MariaDBServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Captured]:
    mariadb_server.execute("DROP DATABASE IF EXISTS own_names")
    mariadb_server.execute("CREATE DATABASE own_names")
    try:
        db = MariaDBDatabase(server=mariadb_server, database="own_names")
        yield capture(db, tmp_path_factory.mktemp("meta"), SETUP, PHASES, ["n", "f"])
    finally:
        mariadb_server.execute("DROP DATABASE IF EXISTS own_names")


@pytest.mark.parametrize("fold", [True, False], ids=["folded", "log"])
def test_source_columns_named_like_the_mirrors_mirror_as_any_other(
    captured: Captured, tmp_path: Path, fold: bool
) -> None:
    """Every form and mode, each table folded after each phase or read from its base and change log (staged parts
    too), equals SELECT."""
    tried = [("merge_on_read", form) for form in FORMS] + ([("copy_on_write", "rows")] if fold else [])
    failures = {
        (mode, form): mirror_all(captured, tmp_path / f"{mode}-{form}", form, fold=fold, mode=mode)
        for mode, form in tried
    }
    assert {k: v for k, v in failures.items() if v} == {}


def test_every_reader_gives_the_sources_names(captured: Captured, tmp_path: Path, spark: Any) -> None:
    """A merge-on-read table read from its base, its log and its staged parts by pyarrow, DuckDB, Polars and Spark:
    the source's columns, named as the source names them, and the source's rows."""
    root = tmp_path / "m"
    assert mirror_all(captured, root, "typed", fold=False) is None
    mirror = DeltaMirror(root, background_folds=False)
    path = mirror.table_path(captured.db, "n")
    assert changelog.read_keys(changelog.log_path(path)) is not None, "the table has a change log"
    expected = sorted(_row(r) for r in captured.phases[-1].selected["n"])
    names = ["id", "_canal_op", "_canal_batch", "_canal_seq", "__pycanal_key_0", "__pycanal_rank", "__pycanal_row"]
    names.append("_canal_x")
    arrow = mirror.read(captured.db, "n")
    assert arrow.column_names == names
    assert sorted(_row(r) for r in arrow.to_pylist()) == expected
    duck = current_duckdb(path)
    assert duck.columns == names and sorted(_row(dict(zip(names, r, strict=True))) for r in duck.fetchall()) == expected
    frame = current_polars(path)
    assert frame.columns == names and sorted(_row(r) for r in frame.to_dicts()) == expected
    df = current_dataframe(spark, path)
    assert df.columns == names and sorted(_row(r.asDict()) for r in df.collect()) == expected
    mirror.close()


def _row(row: dict[str, Any]) -> str:
    """A row as comparable text (NULLs among the values)."""
    return repr(sorted(row.items(), key=lambda item: item[0]))


# -- a mirror an older pycanal wrote ---------------------------------------------------------------------------------


def _as_legacy(rows: Any) -> Any:
    renamed = dict(zip(LOG_COLUMNS, LEGACY_LOG_COLUMNS, strict=True))
    return rows.rename_columns([renamed.get(n, n) for n in rows.column_names])


def test_a_log_written_under_the_old_names_reads_as_it_did_and_takes_the_new_names(tmp_path: Path, spark: Any) -> None:
    """A mirror whose change log and staged part hold ``_canal_batch``, ``_canal_seq`` and ``_canal_op`` (what an
    older pycanal wrote): every reader takes them as the mirror's own columns, and the next append folds the log and
    starts it anew under the new names, with the rows it held."""
    import deltalake

    table = "s.t"
    root = tmp_path / "m"
    mirror = DeltaMirror(root, background_folds=False, stage_rows=0, fold_ratio=1e9, fold_files=10**9)
    mirror.apply(batch(ddl("t", "CREATE", CREATE.format(table=table)), upsert("t", 1, "a"), upsert("t", 2, "b")), 1)
    mirror.apply(batch(upsert("t", 1, "a2", kind="UPDATE"), delete("t", 2), upsert("t", 3, "c")), 2)
    path = mirror.table_path("s", "t")
    app_id = mirror.app_id
    mirror.close()
    log = changelog.log_path(path)
    # the log under the old names, as an older pycanal left it (its history, and the batch ids it recorded, kept)
    rows = deltalake.DeltaTable(log).to_pyarrow_table()
    assert rows.num_rows and set(LOG_COLUMNS) <= set(rows.column_names)
    fs.write_delta(log, _as_legacy(rows), mode="overwrite", schema_mode="overwrite")
    # and a staged part of batch 3 under the old names
    part = pa.table(
        {
            "id": pa.array([4], pa.int64()),
            "v": ["d"],
            LEGACY_LOG_COLUMNS[0]: pa.array([3], pa.int64()),
            LEGACY_LOG_COLUMNS[1]: pa.array([1], pa.int64()),
            LEGACY_LOG_COLUMNS[2]: ["u"],
        }
    )
    staged.write(root, app_id, 3, {fs.split(path)[1]: part})
    expected = {1: "a2", 3: "c", 4: "d"}

    reopened = DeltaMirror(root, background_folds=False)
    assert values(reopened.read("s", "t")) == expected
    assert reopened.read("s", "t").column_names == ["id", "v"]
    assert dict(current_duckdb(path).fetchall()) == expected
    assert dict(current_polars(path).rows()) == expected
    assert {r["id"]: r["v"] for r in current_dataframe(spark, path).collect()} == expected
    reopened.apply(batch(upsert("t", 5, "e"), delete("t", 1)), 4)  # the staged part, then this: the log renamed
    expected = {3: "c", 4: "d", 5: "e"}
    assert values(reopened.read("s", "t")) == expected
    reopened.flush_staged()
    held = deltalake.DeltaTable(log).schema().to_arrow()
    assert set(LOG_COLUMNS) <= set(pa.schema(held).names) and not set(LEGACY_LOG_COLUMNS) & set(pa.schema(held).names)
    reopened.fold("s", "t")
    assert values(reopened.read("s", "t")) == expected
    reopened.close()
