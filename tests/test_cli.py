"""The ``canal`` command line on FakeMysql, in process: tail (text, JSON, --limit, --from, --filter, --meta-dir),
position show/set on a file meta dir, help for every command, errors (exit 2, one line, no credentials)."""

from __future__ import annotations

import datetime as dt
import itertools
import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import canal.cli.tail as tail_mod
from canal.cli import main
from canal.cli.check import Check, ServerFacts, run_checks
from canal.cli.common import parse_start
from canal.errors import PositionError
from canal.testing.fake import FakeMysql

SECRET = "hunter2-do-not-print"
T0 = "2023-11-14 22:13:20"  # FakeMysql's clock starts at 2023-11-14 22:13:20 UTC
_names = itertools.count()
ORDERS_DDL = "CREATE TABLE shop.orders (id INT PRIMARY KEY, amount DECIMAL(10,2), note VARCHAR(20))"


@pytest.fixture
def fake() -> Iterator[FakeMysql]:
    fake = FakeMysql(name=f"cli{next(_names)}", server_id=1)
    fake.execute(ORDERS_DDL)
    fake.execute("CREATE TABLE shop.items (id INT PRIMARY KEY, sku VARCHAR(10))")
    yield fake
    fake.unregister()


@pytest.fixture
def props(fake: FakeMysql, tmp_path: Path) -> str:
    path = tmp_path / "conf" / "example" / "instance.properties"
    path.parent.mkdir(parents=True)
    path.write_text(
        f"canal.instance.master.address={fake.address}\n"
        "canal.instance.dbUsername=canal\n"
        f"canal.instance.dbPassword={SECRET}\n"
    )
    return str(path)


def orders(fake: FakeMysql, ids: range) -> None:
    for i in ids:
        fake.insert("shop.orders", {"id": i, "amount": Decimal(i) + Decimal("0.5"), "note": f"n{i}"})


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def tail(capsys: pytest.CaptureFixture[str], props: str, *extra: str) -> tuple[int, list[str], str]:
    return run(capsys, "tail", "--properties", props, "--utc", "--timeout", "1", *extra)


# -- help ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ([], ["tail", "snapshot", "position", "check", "ha"]),
        (["snapshot"], ["--tables", "--json", "--chunk-rows", "--max-rows-per-s", "--meta-dir", "--progress"]),
        (["tail"], ["--from", "--json", "--limit", "--timeout", "--filter", "--meta-dir", "--properties", "--address"]),
        (["position"], ["show", "set"]),
        (["position", "show"], ["--meta-dir", "--zk", "--destination", "--client-id"]),
        (["position", "set"], ["--file", "--offset", "--timestamp", "--json", "--force"]),
        (["check"], ["--address", "--user", "--password", "binlog_format"]),
        (["ha"], ["status"]),
        (["ha", "status"], ["--zk", "--destination", "--json"]),
    ],
)
def test_help_for_every_command(capsys: pytest.CaptureFixture[str], command: list[str], expected: list[str]) -> None:
    code, out, _err = run(capsys, *command, "--help")
    text = "\n".join(out)
    assert code == 0
    assert text.startswith("usage: canal" + "".join(f" {c}" for c in command))
    for word in expected:
        assert word in text


def test_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run(capsys, "tail", "--limit", "zero")
    assert code == 2
    assert "--limit" in err



@pytest.mark.parametrize("action", [["status"], ["move", "d", "--to", "a:1"]])
def test_ha_waits_for_zookeeper_as_long_as_position_does(capsys: pytest.CaptureFixture[str], action: list[str]) -> None:
    # a command fails fast rather than hangs: `canal ha` waited 10 s for ZooKeeper (and 10 s for each balance-group
    # read, whatever --timeout said), `canal position` 5 s
    from canal.cli import build_parser
    from canal.cli.common import ZK_TIMEOUT_S

    parse = build_parser().parse_args
    assert parse(["ha", *action, "--zk", "z:1"]).timeout == ZK_TIMEOUT_S == 5.0
    assert parse(["ha", *action, "--zk", "z:1", "--zk-timeout", "0.5"]).timeout == 0.5  # position's name for it
    code, _out, err = run(capsys, "ha", *action, "--zk", "z:1", "--timeout", "0")
    assert code == 2 and "--timeout" in err


# -- tail ------------------------------------------------------------------------------------------------------------


def test_tail_text_lines(fake: FakeMysql, props: str, capsys: pytest.CaptureFixture[str]) -> None:
    with fake.transaction() as tx:
        tx.insert("shop.orders", {"id": 1, "amount": Decimal("9.99"), "note": "a"})
        tx.insert("shop.orders", {"id": 2, "amount": Decimal("1.50"), "note": None})
    fake.update("shop.orders", {"id": 1}, {"amount": Decimal("5"), "note": "it's"})
    fake.delete("shop.orders", {"id": 2})
    fake.execute("ALTER TABLE shop.orders ADD COLUMN extra INT")
    code, out, _err = tail(capsys, props, "--from", "mysql-bin.000001:4", "--limit", "7")
    assert code == 0
    assert out == [
        f"{T0} CREATE shop.orders {ORDERS_DDL}",
        f"{T0} CREATE shop.items CREATE TABLE shop.items (id INT PRIMARY KEY, sku VARCHAR(10))",
        f"{T0} INSERT shop.orders id=1 amount=9.99 note='a'",
        f"{T0} INSERT shop.orders id=2 amount=1.50 note=NULL",
        f"{T0} UPDATE shop.orders id=1 amount: 9.99 -> 5.00 note: 'a' -> 'it\\'s'",
        f"{T0} DELETE shop.orders id=2 amount=1.50 note=NULL",
        f"{T0} ALTER shop.orders ALTER TABLE shop.orders ADD COLUMN extra INT",
    ]


def test_tail_json_lines(fake: FakeMysql, props: str, capsys: pytest.CaptureFixture[str]) -> None:
    fake.insert("shop.orders", {"id": 1, "amount": Decimal("9.99"), "note": "a"})
    fake.update("shop.orders", {"id": 1}, {"amount": Decimal("5"), "note": "b"})
    fake.delete("shop.orders", {"id": 1})
    code, out, _err = tail(capsys, props, "--from", "mysql-bin.000001:4", "--json", "--filter", r"shop\.orders")
    assert code == 0
    docs = [json.loads(line) for line in out]
    keys = {"destination", "schema", "table", "type", "ts", "file", "offset", "before", "after", "sql"}
    assert all(set(d) == keys for d in docs)
    assert [d["type"] for d in docs] == ["CREATE", "INSERT", "UPDATE", "DELETE"]
    create, insert, update, delete = docs
    assert create["sql"].startswith("CREATE TABLE shop.orders") and create["before"] is None
    assert insert == {
        "destination": "example",
        "schema": "shop",
        "table": "orders",
        "type": "INSERT",
        "ts": 1_700_000_000_000,
        "file": "mysql-bin.000001",
        "offset": insert["offset"],
        "before": None,
        "after": {"id": 1, "amount": "9.99", "note": "a"},
        "sql": None,
    }
    assert update["before"] == {"id": 1, "amount": "9.99", "note": "a"}
    assert update["after"] == {"id": 1, "amount": "5.00", "note": "b"}
    assert delete["before"] == {"id": 1, "amount": "5.00", "note": "b"} and delete["after"] is None
    assert insert["offset"] < update["offset"] < delete["offset"]


def test_tail_limit_stops_after_n_rows(fake: FakeMysql, props: str, capsys: pytest.CaptureFixture[str]) -> None:
    orders(fake, range(1, 6))
    code, out, _err = tail(capsys, props, "--from", "mysql-bin.000001:4", "--filter", r"shop\.orders", "--limit", "3")
    assert code == 0
    assert len(out) == 3
    assert out[0].endswith(ORDERS_DDL)
    assert [line.split()[4] for line in out[1:]] == ["id=1", "id=2"]


def _offset_of(capsys: pytest.CaptureFixture[str], props: str, order_id: int) -> int:
    code, out, _ = tail(capsys, props, "--from", "mysql-bin.000001:4", "--json")
    assert code == 0
    for line in out:
        doc = json.loads(line)
        if doc["type"] == "INSERT" and doc["after"]["id"] == order_id:
            return int(doc["offset"])
    raise AssertionError(f"order {order_id} not found")


def test_tail_from_position(fake: FakeMysql, props: str, capsys: pytest.CaptureFixture[str]) -> None:
    orders(fake, range(1, 6))
    offset = _offset_of(capsys, props, 3)  # a rows event: tail moves back to its transaction's start
    code, out, _ = tail(capsys, props, "--from", f"mysql-bin.000001:{offset}", "--show-position")
    assert code == 0
    assert [line.split()[4] for line in out] == ["id=3", "id=4", "id=5"]
    assert out[0].endswith(f"@mysql-bin.000001:{offset}")


def test_tail_from_timestamp(fake: FakeMysql, props: str, capsys: pytest.CaptureFixture[str]) -> None:
    orders(fake, range(1, 3))
    fake.advance_clock(3600)
    orders(fake, range(3, 5))
    later = dt.datetime(2023, 11, 14, 22, 43, 20, tzinfo=dt.UTC).isoformat()  # between the two groups
    code, out, _ = tail(capsys, props, "--from", later)
    assert code == 0
    assert [line.split()[4] for line in out] == ["id=3", "id=4"]
    assert out[0].startswith("2023-11-14 23:13:20 INSERT")


def test_tail_from_now_sees_only_new_rows(fake: FakeMysql, props: str, capsys: pytest.CaptureFixture[str]) -> None:
    orders(fake, range(1, 3))
    code, out, _ = run(capsys, "tail", "--properties", props, "--from", "now", "--timeout", "0.3")
    assert code == 0
    assert out == []


def test_tail_filter(fake: FakeMysql, props: str, capsys: pytest.CaptureFixture[str]) -> None:
    orders(fake, range(1, 3))
    fake.insert("shop.items", {"id": 7, "sku": "x"})
    code, out, _ = tail(capsys, props, "--from", "mysql-bin.000001:4", "--filter", r"shop\.items")
    assert code == 0
    assert out == [
        f"{T0} CREATE shop.items CREATE TABLE shop.items (id INT PRIMARY KEY, sku VARCHAR(10))",
        f"{T0} INSERT shop.items id=7 sku='x'",
    ]


def test_tail_meta_dir_persists_cursor(
    fake: FakeMysql, props: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    orders(fake, range(1, 6))
    meta = str(tmp_path / "meta")
    args = ("--meta-dir", meta, "--filter", r"shop\.orders")
    code, out, _ = tail(capsys, props, *args, "--from", "mysql-bin.000001:4", "--limit", "3")
    assert code == 0 and out[-1].split()[4] == "id=2"
    assert (tmp_path / "meta" / "example" / "meta.dat").is_file()
    code, out, _ = tail(capsys, props, *args, "--limit", "2")  # resumes after id=2
    assert [line.split()[4] for line in out] == ["id=3", "id=4"]
    code, out, _ = tail(capsys, props, *args, "--from", "mysql-bin.000001:4", "--limit", "2")  # --from wins
    assert out[1].split()[4] == "id=1"


def test_tail_limit_inside_a_multi_row_event_loses_nothing(
    fake: FakeMysql, props: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    orders(fake, range(1, 2))
    fake.insert_many("shop.orders", [{"id": i, "amount": Decimal(i), "note": None} for i in (10, 11, 12)])
    meta = str(tmp_path / "meta")
    args = ("--meta-dir", meta, "--filter", r"shop\.orders", "--json")
    code, out, _ = tail(capsys, props, *args, "--from", "mysql-bin.000001:4", "--limit", "3")
    ids = [json.loads(line)["after"]["id"] for line in out[1:]]
    assert ids == [1, 10]
    code, out, _ = tail(capsys, props, *args)
    assert code == 0
    ids = [json.loads(line)["after"]["id"] for line in out]
    assert ids == [10, 11, 12]  # the event cut by --limit comes again whole; id=1 does not


def test_tail_ctrl_c_ends_cleanly(
    fake: FakeMysql, props: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    orders(fake, range(1, 3))
    real = tail_mod._next_message
    seen: list[int] = []

    def interrupted(instance: Any, batch: int) -> Any:
        if seen:  # Ctrl-C while waiting for the second batch
            raise KeyboardInterrupt
        msg = real(instance, batch)
        if msg.id != -1:
            seen.append(msg.id)
        return msg

    monkeypatch.setattr(tail_mod, "_next_message", interrupted)
    code, out, err = run(capsys, "tail", "--properties", props, "--from", "mysql-bin.000001:4")
    assert code == 0
    assert out and out[0].endswith(ORDERS_DDL)  # the first batch was printed before the interrupt
    assert err == ""


def test_parse_start() -> None:
    assert parse_start("mysql-bin.000003:4").journal_name == "mysql-bin.000003"
    assert parse_start("mysql-bin.000003:120").position == 120
    assert parse_start("mysql-bin.000003").position == 4
    assert parse_start("now").is_now
    assert parse_start("2023-11-14T22:13:20Z").timestamp_ms == 1_700_000_000_000
    assert parse_start("2023-11-14T23:13:20+01:00").timestamp_ms == 1_700_000_000_000
    with pytest.raises(PositionError, match="--from"):
        parse_start("yesterday")


# -- errors ----------------------------------------------------------------------------------------------------------


def test_error_is_one_line_exit_2_without_password(
    fake: FakeMysql, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "missing" / "instance.properties"
    bad.parent.mkdir()
    bad.write_text(f"canal.instance.master.address=fake://no-such-fake\ncanal.instance.dbPassword={SECRET}\n")
    code, out, err = run(capsys, "tail", "--properties", str(bad))
    assert code == 2
    assert out == []
    assert err.startswith("canal tail: error: ") and "no-such-fake" in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert SECRET not in err


def test_password_never_printed(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # secrets stay out by what they are (no message is made from one), not by searching the output for their text
    code, out, err = run(capsys, "tail", "--address", "fake://no-such-fake", "--user", "u", "--password", SECRET)
    assert code == 2 and SECRET not in err + "".join(out) and "no-such-fake" in err
    monkeypatch.setenv("CANAL_PASSWORD", SECRET)
    code, out, err = run(capsys, "tail", "--address", "fake://no-such-fake")
    assert code == 2 and SECRET not in err + "".join(out)


def test_bad_from_and_missing_source(props: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run(capsys, "tail", "--properties", props, "--from", "yesterday")
    assert code == 2 and "--from 'yesterday'" in err
    code, _out, err = run(capsys, "tail")
    assert code == 2 and "--properties" in err
    code, _out, err = run(capsys, "tail", "--properties", props + ".nope")
    assert code == 2 and "no such file" in err


# -- position --------------------------------------------------------------------------------------------------------


def test_position_show_and_set_on_file_meta(
    fake: FakeMysql, props: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    meta = str(tmp_path / "meta")
    code, out, err = run(capsys, "position", "show", "--meta-dir", meta)
    assert code == 1 and out == [] and "example/1001 has no cursor" in err

    code, out, _ = run(capsys, "position", "set", "--meta-dir", meta, "--file", "mysql-bin.000002", "--offset", "120")
    assert code == 0
    code, out, _ = run(capsys, "position", "show", "--meta-dir", meta)
    assert code == 0
    doc = json.loads(out[0])
    assert doc["postion"]["journalName"] == "mysql-bin.000002" and doc["postion"]["position"] == 120

    doc["postion"]["position"] = 4
    doc["rowsDone"] = 2
    code, _, _ = run(capsys, "position", "set", "--meta-dir", meta, "--json", json.dumps(doc), "--client-id", "7")
    assert code == 0
    code, out, _ = run(capsys, "position", "show", "--meta-dir", meta, "--client-id", "7")
    assert json.loads(out[0])["postion"]["position"] == 4 and json.loads(out[0])["rowsDone"] == 2
    code, out, _ = run(capsys, "position", "show", "--meta-dir", meta)  # client 1001 unchanged
    assert json.loads(out[0])["postion"]["position"] == 120

    # an unfinished snapshot is part of the cursor: shown, and set (or cleared) with the rest of it
    doc["snapshot"] = {"tables": ["shop.orders"], "table": 0, "after": [["b", "3432"]], "rows": 1000}
    code, _, _ = run(capsys, "position", "set", "--meta-dir", meta, "--json", json.dumps(doc), "--client-id", "7")
    assert code == 0
    code, out, _ = run(capsys, "position", "show", "--meta-dir", meta, "--client-id", "7")
    assert json.loads(out[0])["snapshot"] == doc["snapshot"]


def test_position_set_then_tail_resumes_there(
    fake: FakeMysql, props: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    orders(fake, range(1, 6))
    offset = _offset_of(capsys, props, 4)
    meta = str(tmp_path / "meta")
    # with a source the offset (inside a transaction) is moved back to the transaction's start
    code, out, _ = run(
        capsys, "position", "set", "--meta-dir", meta, "--file", "mysql-bin.000001", "--offset", str(offset),
        "--properties", props,
    )  # fmt: skip
    assert code == 0
    assert json.loads(out[0])["postion"]["position"] < offset
    code, out, _ = tail(capsys, props, "--meta-dir", meta)
    assert [line.split()[4] for line in out] == ["id=4", "id=5"]


def test_position_set_by_timestamp(
    fake: FakeMysql, props: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    orders(fake, range(1, 3))
    fake.advance_clock(3600)
    orders(fake, range(3, 5))
    meta = str(tmp_path / "meta")
    code, _out, err = run(capsys, "position", "set", "--meta-dir", meta, "--timestamp", "2023-11-14T22:43:20Z")
    assert code == 2 and "--properties" in err  # a timestamp needs the server to resolve it
    code, out, _ = run(
        capsys, "position", "set", "--meta-dir", meta, "--timestamp", "2023-11-14T22:43:20Z", "--properties", props
    )
    assert code == 0
    code, out, _ = tail(capsys, props, "--meta-dir", meta)
    assert [line.split()[4] for line in out] == ["id=3", "id=4"]


def test_position_set_rejects_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    meta = str(tmp_path / "meta")
    code, _, err = run(capsys, "position", "set", "--meta-dir", meta, "--json", "{not json")
    assert code == 2 and "JSON" in err
    code, _, err = run(capsys, "position", "set", "--meta-dir", meta, "--file", "mysql-bin.000001", "--offset", "1")
    assert code == 2 and "at least 4" in err
    code, _, err = run(capsys, "position", "set", "--meta-dir", meta, "--file", "a", "--json", "{}")
    assert code == 2  # argparse: mutually exclusive


# -- check logic (no server: facts as MySQL and MariaDB versions report them) ---------------------------------------

GOOD_VARS = {
    "log_bin": "ON",
    "binlog_format": "ROW",
    "binlog_row_image": "FULL",
    "binlog_row_metadata": "FULL",
    "server_id": "1",
}


def facts(version: str, variables: dict[str, str], grants: list[str], user: str = "canal@%") -> ServerFacts:
    return ServerFacts(version, variables, grants, user)


def statuses(checks: list[Check]) -> dict[str, str]:
    return {c.name: c.status for c in checks}


def test_check_mysql8_all_good_and_partial_json() -> None:
    grants = ["GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `canal`@`%`"]
    variables = {**GOOD_VARS, "binlog_transaction_compression": "OFF", "binlog_row_value_options": ""}
    checks = run_checks(facts("8.0.36", variables, grants))
    # MySQL reports no consistent snapshot position: snapshots need a watermark table, capture does not
    assert all(c.status == "OK" for c in checks if c.name != "snapshot"), [c.line() for c in checks]
    assert statuses(checks)["snapshot"] == "SKIP"
    assert "grant REPLICATION CLIENT" in statuses(checks)
    marked = {c.name: c for c in run_checks(facts("8.0.36", variables, grants), "shop.canal_marks")}
    assert marked["snapshot"].line() == (
        "OK   snapshot: chunks placed by watermarks in shop.canal_marks (needs INSERT and UPDATE)"
    )

    variables |= {"binlog_row_value_options": "PARTIAL_JSON", "binlog_transaction_compression": "ON"}
    bad = {c.name: c for c in run_checks(facts("8.0.36", variables, grants))}
    # under binlog_row_image=FULL a partial JSON update's diff applies to the before image's document: followed
    assert bad["binlog_row_value_options"].status == "OK"
    assert "diffs applied to the before image's document" in bad["binlog_row_value_options"].line()
    assert "SET GLOBAL binlog_transaction_compression = OFF;" in bad["binlog_transaction_compression"].line()


def test_check_old_versions_skip_row_metadata() -> None:
    variables = {k: v for k, v in GOOD_VARS.items() if k != "binlog_row_metadata"}
    grants = ["GRANT ALL PRIVILEGES ON *.* TO 'canal'@'%' WITH GRANT OPTION"]
    for version in ("5.7.44-log", "10.4.32-MariaDB"):
        checks = statuses(run_checks(facts(version, variables, grants)))
        assert checks["binlog_row_metadata"] == "SKIP"
        assert "FAIL" not in checks.values()
    # 10.4 has no BINLOG MONITOR: the fix names REPLICATION CLIENT
    lines = [
        c.line() for c in run_checks(facts("10.4.32-MariaDB", variables, ["GRANT USAGE ON *.* TO 'u'@'h'"], "u@h"))
    ]
    assert "FAIL grant REPLICATION CLIENT: 'u'@'h' lacks it (for SHOW MASTER STATUS / SHOW BINARY LOGS) -- fix: " \
           "GRANT REPLICATION CLIENT ON *.* TO 'u'@'h';" in lines  # fmt: skip
    assert any(line.startswith("FAIL grant SELECT") and "GRANT SELECT ON *.* TO 'u'@'h';" in line for line in lines)


def test_check_binlog_off_and_server_id_zero() -> None:
    variables = {**GOOD_VARS, "log_bin": "OFF", "server_id": "0"}
    lines = {c.name: c.line() for c in run_checks(facts("10.11.6-MariaDB", variables, []))}
    assert lines["log_bin"].startswith("FAIL") and "log_bin = mysql-bin" in lines["log_bin"]
    assert "SET GLOBAL server_id = 1;" in lines["server_id"]


def test_check_names_accounts_that_may_log_statements() -> None:
    quiet = ServerFacts("10.11.6-MariaDB", GOOD_VARS, ["GRANT SELECT ON *.* TO `canal`@`%`"], "canal@%")
    assert statuses(run_checks(quiet))["session_binlog_format"] == "OK"
    loud = ServerFacts("10.11.6-MariaDB", GOOD_VARS, [], "canal@%", statement_loggers=["'app'@'%'"])
    (check,) = [c for c in run_checks(loud) if c.name == "session_binlog_format"]
    assert check.status == "WARN" and "'app'@'%'" in check.detail and "UnmodeledStatementError" in check.detail
    assert check.line().endswith("-- fix: " + check.fix)
    # a capture user that cannot see triggers and views cannot tell what such a statement reaches: said, with the fix
    assert "lacks TRIGGER and SHOW VIEW" in check.detail and "GRANT TRIGGER, SHOW VIEW ON *.*" in check.fix
    seeing = ServerFacts("10.11.6-MariaDB", GOOD_VARS, ["GRANT SELECT, SHOW VIEW, TRIGGER ON *.* TO `canal`@`%`"],
                         "canal@%", statement_loggers=["'app'@'%'"])  # fmt: skip
    (check,) = [c for c in run_checks(seeing) if c.name == "session_binlog_format"]
    assert "lacks" not in check.detail and "GRANT" not in check.fix
