"""``lower_case_table_names=1``: the server keeps schema and table names in lower case, whatever case a statement
types them in; the Instance hands out DDL entries and keeps its schema history under the names the server uses, so a
consumer (the mirror included) sees one table, not ``Orders`` from the DDL and ``orders`` from the rows.

The private MariaDB needs its own datadir initialised with the setting (``install_args``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from canal.config import InstanceConfig, MasterConfig, StoreConfig
from canal.instance import Instance
from canal.protocol import Entry, EntryType
from canal.testing.plugin import MariaDBFactory

pytestmark = pytest.mark.integration

_LOWER = "--lower-case-table-names=1"


def _config(server: Any, meta_dir: Path, filter_regex: str, start: tuple[str, int]) -> InstanceConfig:
    return InstanceConfig(
        destination="lower",
        master=MasterConfig(
            address=server.address,
            username=server.user,
            password=server.password,
            journal_name=start[0],
            position=start[1],
        ),
        filter_regex=filter_regex,
        meta_mode="file",
        meta_dir=str(meta_dir),
        flush_period_s=0,
        store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=1024),
    )


def _entries(inst: Instance, until_table: str) -> list[Entry]:
    entries: list[Entry] = []
    deadline = time.monotonic() + 30
    while not any(e.header.table == until_table and e.entry_type is EntryType.ROWDATA for e in entries):
        assert time.monotonic() < deadline, f"no row of {until_table} came: {[_name(e) for e in entries]}"
        error = inst.parser.error
        if error is not None:
            raise error
        entries.extend(inst.get(100, timeout=0.2).entries)
    return entries


def _name(entry: Entry) -> tuple[str, str, str]:
    return (entry.header.event_type.name, entry.header.schema, entry.header.table)


@pytest.mark.parametrize("metadata", ["NO_LOG", "FULL"])
def test_ddl_and_rows_name_one_table_as_the_server_does(
    mariadb_factory: MariaDBFactory, tmp_path: Path, metadata: str
) -> None:
    server = mariadb_factory(install_args=[_LOWER], extra_args=[_LOWER, f"--binlog-row-metadata={metadata}"])
    assert server.execute("SELECT @@lower_case_table_names")[0][0] == 1
    server.execute("CREATE DATABASE Shop")
    server.execute("CREATE TABLE Shop.Orders (Id INT PRIMARY KEY, Amount INT)")
    start = tuple(server.execute("SHOW MASTER STATUS")[0][:2])
    inst = Instance(_config(server, tmp_path, r"Shop\.Orders(_Old)?,shop\.Done", (str(start[0]), int(start[1]))))
    inst.start()
    try:
        server.execute("INSERT INTO Shop.ORDERS VALUES (1, 10)")
        entries = _entries(inst, "orders")  # the history is bootstrapped before the DDL
        server.execute("ALTER TABLE Shop.Orders ADD COLUMN Note VARCHAR(10) AFTER Id")
        server.execute("INSERT INTO shop.Orders VALUES (2, 'two', 20)")
        server.execute("RENAME TABLE Shop.Orders TO Shop.Orders_Old")
        server.execute("CREATE TABLE SHOP.Orders (Id INT PRIMARY KEY)")
        server.execute("INSERT INTO Shop.Orders VALUES (3)")
        server.execute("CREATE TABLE Shop.Done (Id INT PRIMARY KEY)")
        server.execute("INSERT INTO Shop.Done VALUES (1)")
        entries += _entries(inst, "done")
    finally:
        inst.stop()
    names = [_name(e) for e in entries if e.entry_type is EntryType.ROWDATA]
    assert names == [
        ("INSERT", "shop", "orders"),
        ("ALTER", "shop", "orders"),
        ("INSERT", "shop", "orders"),
        ("RENAME", "shop", "orders_old"),
        ("CREATE", "shop", "orders"),
        ("INSERT", "shop", "orders"),
        ("CREATE", "shop", "done"),
        ("INSERT", "shop", "done"),
    ]
    ddl = [e for e in entries if e.row_change is not None and e.row_change.is_ddl]
    assert all(e.header.props.get("lower_case_table_names") == "1" for e in ddl)  # its SQL names tables as typed
    assert all(e.row_change is not None and e.row_change.ddl_schema in ("", "shop") for e in ddl)
    rows = [
        r.after_dict()
        for e in entries
        if e.entry_type is EntryType.ROWDATA and e.row_change is not None and not e.row_change.is_ddl
        for r in e.iter_rows()
    ]
    assert rows == [
        {"Id": 1, "Amount": 10},
        {"Id": 2, "Note": "two", "Amount": 20},
        {"Id": 3},
        {"Id": 1},
    ]


def test_a_start_before_a_create_typed_in_another_case(mariadb_factory: MariaDBFactory, tmp_path: Path) -> None:
    """The history bootstraps after the CREATE (NO_LOG): the table read now is the one the CREATE made."""
    server = mariadb_factory(install_args=[_LOWER], extra_args=[_LOWER, "--binlog-row-metadata=NO_LOG"])
    server.execute("CREATE DATABASE Shop")
    start = tuple(server.execute("SHOW MASTER STATUS")[0][:2])
    server.execute("CREATE TABLE Shop.Late (Id INT PRIMARY KEY, Amount INT UNSIGNED)")
    server.execute("INSERT INTO Shop.Late VALUES (1, 4000000000)")
    inst = Instance(_config(server, tmp_path, r"shop\..*", (str(start[0]), int(start[1]))))
    inst.start()
    try:
        entries = _entries(inst, "late")
    finally:
        inst.stop()
    assert [_name(e) for e in entries if e.entry_type is EntryType.ROWDATA] == [
        ("CREATE", "shop", "late"),
        ("INSERT", "shop", "late"),
    ]
    assert [r.after_dict() for e in entries for r in e.iter_rows()] == [{"Id": 1, "Amount": 4000000000}]
