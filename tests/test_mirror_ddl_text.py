"""How the mirror reads a DDL row's statement (:mod:`canal.lake.ddl.ddl_text`): names folded only for rows whose props
say ``lower_case_table_names=1``, columns and literals as typed; props that are not JSON are a typed error."""

from __future__ import annotations

import pyarrow as pa
import pytest

from canal.lake.ddl.ddl_text import ddl_statement, fold_flags
from canal.lake.ddl.evolution import plan_evolution, renamed_tables
from canal.lake.types import MirrorError
from canal.sql import AlterTable, CreateTable, TableName


def test_fold_flags_follow_each_rows_props() -> None:
    props = [None, '{"XA_XID":"x"}', '{"lower_case_table_names":"1"}', '{"lower_case_table_names":"0"}']
    assert fold_flags(pa.table({"props": pa.array(props, pa.string())})) == [False, False, True, False]
    assert fold_flags(pa.table({"sql": ["CREATE TABLE A (x INT)"]})) == [False]  # a batch without props
    with pytest.raises(MirrorError, match="not JSON"):
        fold_flags(pa.table({"props": ["lower_case_table_names=1"]}))


def test_folded_statement_keeps_columns_and_literals() -> None:
    sql = "ALTER TABLE Shop.Orders ADD COLUMN Tag VARCHAR(5) DEFAULT 'AbC'"
    folded = ddl_statement(sql, True)
    assert isinstance(folded, AlterTable) and folded.table == TableName("shop", "orders")
    kept = ddl_statement(sql, False)
    assert isinstance(kept, AlterTable) and kept.table == TableName("Shop", "Orders")
    assert folded.actions == kept.actions  # the column's name and DEFAULT as typed
    create = ddl_statement("CREATE TABLE B LIKE `A`", True)
    assert isinstance(create, CreateTable) and create.table.name == "b" and create.like == TableName(None, "a")
    assert renamed_tables("RENAME TABLE Orders TO Old, X.Y TO Z", "shop", True) == [("shop", "orders"), ("x", "y")]
    assert renamed_tables("ALTER TABLE Orders RENAME TO Old", "shop", False) == [("shop", "Orders")]


def test_evolution_of_a_folded_alter_changes_the_lower_case_table() -> None:
    ddl = [(0, "ALTER TABLE Orders ADD COLUMN Note INT DEFAULT 7")]
    assert plan_evolution("shop", "orders", ["Id"], ddl).columns == (("Id", "Id", None),)  # another table
    evolution = plan_evolution("shop", "orders", ["Id"], ddl, fold_names=True)
    assert [name for name, _source, _kind in evolution.columns] == ["Id", "Note"]
    assert dict(evolution.fills)["Note"] == "7"
