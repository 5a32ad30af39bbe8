"""DDL under a time zone that is not UTC, on a real MariaDB (issue 64 item 5): the Query event carries the session's
time zone when the statement used it, the DDL entry says it (``TIME_ZONE``; the schema history adds the columns'
types before a MODIFY, ``RETYPED_FROM``), and the mirror converts as the server did:

* ``ADD COLUMN ts TIMESTAMP DEFAULT '2024-01-01 00:00:00'`` at +05:00 gives the existing rows 2023-12-31 19:00 UTC;
* ``MODIFY`` DATETIME -> TIMESTAMP reads local time (12:00 at +05:00 is 07:00 UTC), TIMESTAMP -> DATETIME writes it;
* a named zone (MariaDB's time zone tables, loaded for Europe/Berlin) across its DST changes: a repeated hour is its
  first occurrence, a skipped one the instant it ends (non-strict mode: strict mode refuses the ALTER);
* the server's zone after ``SET GLOBAL time_zone``, and ``SYSTEM`` on a server whose system zone is UTC;
* ``SYSTEM`` on a server started in Europe/Berlin (``system_time_zone`` = ``CET``, an abbreviation): a typed stop
  naming the statement, the zone and the table, nothing of its step written;
* an instant outside TIMESTAMP's range (non-strict mode: the server stores the zero TIMESTAMP): NULL with
  ``zero_dates="null"``, a typed error naming the column with ``zero_dates="error"``;
* a crash after a conversion's commit and before the step journal says so: the replay does not convert twice.

Every table is compared with ``SELECT`` read at ``time_zone = '+00:00'`` (the mirror holds TIMESTAMP values in UTC),
through change rows and typed batches.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
from pathlib import Path
from typing import Any

import attrs
import pytest

pytest.importorskip("deltalake")

from canal.config import InstanceConfig, MasterConfig, StoreConfig
from canal.instance import Instance
from canal.lake.ddl.time_zones import MirrorTimeZoneError
from canal.lake.forms.ranges import RANGE_FROM, RANGE_TO
from canal.lake.types import MirrorTypeError
from canal.spark import DeltaMirror, compare, run_batches
from canal.spark.testing import healed_by, master_position, run_caught_up
from canal.testing.plugin import MariaDBFactory
from canal.testing.services.mariadb import MariaDBServer

pytestmark = pytest.mark.integration

ZONE = "Europe/Berlin"


def _load_zone(server: Any) -> None:
    """MariaDB's time zone tables for :data:`ZONE` (kept out of the binlog)."""
    sql = subprocess.run(
        ["mariadb-tzinfo-to-sql", f"/usr/share/zoneinfo/{ZONE}", ZONE], capture_output=True, text=True, check=True
    ).stdout
    subprocess.run(
        ["mariadb", "--no-defaults", "-uroot", "-h", server.host, "-P", str(server.port), "mysql"],
        input="SET SESSION sql_log_bin=0;\n" + sql,
        capture_output=True,
        text=True,
        check=True,
    )


class Mirrored:
    """A capture of database ``app`` from the server's position now, mirrored by change rows or typed batches."""

    def __init__(self, server: Any, tmp_path: Path, path: str, heal: str = "snapshot", **mirror: Any) -> None:
        self.tmp_path = tmp_path
        self.conn = server.connect()
        self.conn.cursor().execute("CREATE DATABASE app")
        journal, position = master_position(self.conn)
        self.config = InstanceConfig(
            destination="zones",
            master=MasterConfig(
                address=server.address,
                username=server.user,
                password=server.password,
                journal_name=journal,
                position=position,
            ),
            filter_regex=r"app\..*",
            store=StoreConfig(batch_mode="ITEMSIZE"),
            meta_mode="file",
            meta_dir=str(tmp_path / "meta"),
            heal=heal,
        )
        self.mirror = DeltaMirror(tmp_path / "mirror", **mirror)
        self.path = path
        self.props: list[dict[str, str]] = []

    def apply(self, rows: Any, batch_id: int) -> None:
        import json

        for is_ddl, props in zip(rows.column("is_ddl").to_pylist(), rows.column("props").to_pylist(), strict=True):
            # a batch's binlog range rides on its first and last entries' props (canal.lake.forms.ranges)
            kept = {k: v for k, v in json.loads(props).items() if k not in (RANGE_FROM, RANGE_TO)} if props else {}
            if is_ddl and kept:
                self.props.append(kept)
        self.mirror.apply(rows, batch_id)

    def batch(self, *statements: str, conn: Any = None) -> None:
        with (conn or self.conn).cursor() as cur:
            for sql in statements:
                cur.execute(sql)
        run_caught_up(self.conn, self.config, None, self.apply if self.path == "rows" else self.mirror)

    def healed_batch(self, *statements: str) -> int:
        """``batch``, for statements the capture heals: run with run_batches' journal until the heals are over; the
        tables healed."""
        with self.conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql)
        end = master_position(self.conn)
        with Instance(self.config) as inst:
            until = healed_by(inst, end)
            run_batches(inst, None, self.mirror, batch_size=50, timeout=0.5, journal=self.tmp_path / "j", until=until)
            return inst.metrics().heals

    def assert_equal(self, table: str) -> None:
        with self.conn.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")  # TIMESTAMP values as the mirror holds them
            cur.execute(f"SELECT * FROM app.{table}")
            names = [d[0] for d in cur.description]
            rows = [
                {n: None if v == "0000-00-00 00:00:00" else v for n, v in zip(names, row, strict=True)}
                for row in cur.fetchall()
            ]
            cur.execute("SET time_zone = DEFAULT")
        mirrored = self.mirror.read("app", table)
        assert mirrored.column_names == names
        result = compare(mirrored, rows, ["id"], name=table)
        assert result.equal, str(result)


@pytest.mark.parametrize("path", ["rows", "typed"])
def test_ddl_converts_in_the_time_zone_it_ran_in(mariadb_factory: MariaDBFactory, tmp_path: Path, path: str) -> None:
    server = mariadb_factory()
    _load_zone(server)
    m = Mirrored(server, tmp_path, path)
    m.batch(
        "CREATE TABLE app.t (id INT PRIMARY KEY, dt DATETIME, ts TIMESTAMP NULL, b DATETIME(6), bt TIMESTAMP(6) NULL)",
        "INSERT INTO app.t VALUES "
        "(1, '2024-06-01 12:00:00', '2024-06-01 12:00:00', '2024-06-01 12:00:00', '2024-06-01 12:00:00'), "
        # Berlin skips 02:00-03:00 on 2024-03-31 and repeats 02:00-03:00 on 2024-10-27
        "(2, '2024-01-15 08:30:00', '2024-10-27 00:30:00', '2024-03-31 02:30:00.250000', '2024-10-27 00:30:00'), "
        "(3, NULL, NULL, '2024-10-27 02:30:00.5', '2024-10-27 01:30:00.5')",
    )
    m.batch(
        "SET time_zone = '+05:00'",
        "ALTER TABLE app.t ADD COLUMN d1 TIMESTAMP NOT NULL DEFAULT '2024-01-01 00:00:00'",
        "ALTER TABLE app.t MODIFY dt TIMESTAMP NULL",  # 12:00 at +05:00 is 07:00 UTC
        "ALTER TABLE app.t MODIFY ts DATETIME",  # and back: 12:00 UTC is 17:00 at +05:00
        f"SET time_zone = '{ZONE}'",
        "SET sql_mode = ''",  # a skipped local time: strict mode refuses the ALTER
        "ALTER TABLE app.t MODIFY b TIMESTAMP(6) NULL, MODIFY bt DATETIME(6)",
        "SET sql_mode = DEFAULT",
        "ALTER TABLE app.t ADD COLUMN d2 TIMESTAMP NOT NULL DEFAULT '2024-07-01 12:00:00'",
        "SET time_zone = 'SYSTEM'",  # this server's system zone is UTC
        "ALTER TABLE app.t ADD COLUMN d3 TIMESTAMP NOT NULL DEFAULT '2024-01-01 00:00:00'",
        "SET time_zone = DEFAULT",
        "INSERT INTO app.t (id, dt) VALUES (4, '2024-02-02 02:02:02')",
    )
    m.assert_equal("t")
    assert m.mirror.read("app", "t").to_pylist()[0]["d1"] == dt.datetime(2023, 12, 31, 19, 0)
    server.execute("SET GLOBAL time_zone = '+03:00'")  # the server's zone: a new session's
    try:
        other = server.connect()
        m.batch(
            "ALTER TABLE app.t ADD COLUMN d4 TIMESTAMP NOT NULL DEFAULT '2024-01-01 03:00:00', MODIFY d1 DATETIME",
            conn=other,
        )
        other.close()
    finally:
        server.execute("SET GLOBAL time_zone = 'SYSTEM'")
    m.assert_equal("t")
    if path == "rows":  # the entries say the zone each DDL converted in, and the types before a MODIFY
        zones = [p.get("TIME_ZONE") for p in m.props]
        assert zones == ["+05:00", "+05:00", "+05:00", ZONE, ZONE, "SYSTEM", "+03:00"]
        assert m.props[1]["RETYPED_FROM"] == '{"dt":"datetime"}' and m.props[5]["SYSTEM_TIME_ZONE"] == "UTC"
    m.mirror.close()


def test_an_instant_outside_timestamp_range_is_the_zero_timestamp(
    mariadb_factory: MariaDBFactory, tmp_path: Path
) -> None:
    server = mariadb_factory()
    for zero_dates in ("error", "null"):
        m = Mirrored(server, tmp_path / zero_dates, "typed", zero_dates=zero_dates)
        m.batch(
            "CREATE TABLE app.t (id INT PRIMARY KEY, dt DATETIME)",
            "INSERT INTO app.t VALUES (1, '2024-06-01 12:00:00'), (2, '1970-01-01 03:00:00')",
        )
        statements = ("SET time_zone = '+05:00'", "SET sql_mode = ''", "ALTER TABLE app.t MODIFY dt TIMESTAMP NULL")
        if zero_dates == "error":
            with pytest.raises(MirrorTypeError, match=r"app\.t.*column 'dt'.*1970-01-01 03:00:00.*\+05:00"):
                m.batch(*statements)
            assert m.mirror.read("app", "t").column("dt").to_pylist()[1] == dt.datetime(1970, 1, 1, 3)  # unchanged
        else:
            m.batch(*statements)
            m.assert_equal("t")  # 1970-01-01 03:00 at +05:00 is before 1970 in UTC: the zero TIMESTAMP, NULL here
        m.mirror.close()
        server.execute("DROP DATABASE app")


class _BerlinServer(MariaDBServer):
    """A MariaDB started in Europe/Berlin: its ``system_time_zone`` is ``CET`` (an abbreviation, not a zone)."""

    def _environment(self) -> dict[str, str] | None:
        return {**os.environ, "TZ": ZONE}


def test_system_time_zone_the_mirror_cannot_know_heals_or_is_a_typed_stop(tmp_path: Path) -> None:
    """The server's system zone is not one the mirror knows the rules of: a conversion in it heals by default (the
    table is read again from the ALTER on: equal to SELECT), and is the mirror's typed stop under heal="stop"."""
    server = _BerlinServer()
    server.start()
    try:
        assert server.execute("SELECT @@system_time_zone")[0][0] in ("CET", "CEST")
        m = Mirrored(server, tmp_path / "stop", "typed", heal="stop")
        m.batch("CREATE TABLE app.t (id INT PRIMARY KEY, dt DATETIME)", "INSERT INTO app.t VALUES (1, '2024-06-01')")
        # a destination that heals, from the same start (and run before the ALTER, as in production)
        healing = Mirrored.__new__(Mirrored)
        healing.conn, healing.tmp_path, healing.path = m.conn, tmp_path / "heal", "typed"
        healing.config = attrs.evolve(m.config, destination="healing", heal="snapshot", meta_dir=str(tmp_path / "hm"))
        healing.mirror = DeltaMirror(tmp_path / "heal" / "mirror")
        assert healing.healed_batch() == 0
        with pytest.raises(MirrorTimeZoneError, match=r"MODIFY dt TIMESTAMP.*app\.t.*'SYSTEM'.*'CE"):
            m.batch("ALTER TABLE app.t MODIFY dt TIMESTAMP NULL")  # the session's zone is SYSTEM
        assert m.mirror.read("app", "t").to_pylist() == [{"id": 1, "dt": dt.datetime(2024, 6, 1)}]
        m.mirror.close()
        assert healing.healed_batch("INSERT INTO app.t VALUES (2, '2024-12-01 10:00:00')") == 1
        healing.assert_equal("t")
        assert healing.mirror.metrics().heals == 1 and healing.mirror.read("app", "t").num_rows == 2
        healing.mirror.close()
    finally:
        server.stop()


def test_a_conversion_replayed_after_a_crash_is_not_made_twice(mariadb_factory: MariaDBFactory, tmp_path: Path) -> None:
    import shutil

    from canal.lake.planning.plan import batch_steps, in_order

    server = mariadb_factory()
    m = Mirrored(server, tmp_path, "typed")
    m.batch("CREATE TABLE app.t (id INT PRIMARY KEY, dt DATETIME, ts TIMESTAMP NULL)")
    m.batch("INSERT INTO app.t VALUES (1, '2024-06-01 12:00:00', '2024-06-01 12:00:00')")
    with m.conn.cursor() as cur:
        for sql in (
            "SET time_zone = '+05:00'",
            "ALTER TABLE app.t MODIFY dt TIMESTAMP NULL",
            "INSERT INTO app.t VALUES (2, '2024-06-02 12:00:00', '2024-06-02 12:00:00')",
            "ALTER TABLE app.t MODIFY ts DATETIME",
            "SET time_zone = DEFAULT",
        ):
            cur.execute(sql)
    batches: list[tuple[Any, int]] = []
    run_caught_up(m.conn, m.config, None, lambda rows, batch_id: batches.append((rows, batch_id)))
    rows, batch_id = _one_batch(batches)
    steps = len(batch_steps(in_order(rows), None))
    m.mirror.wait_for_folds()
    before = m.mirror.root  # the mirror before the batch, copied for each crash

    class Crash(Exception):
        pass

    for crash_at in range(1, steps + 1):
        root = tmp_path / f"replay{crash_at}"
        shutil.copytree(before, root)
        m.mirror = DeltaMirror(root)
        write = m.mirror._write_journal

        def crash_before(batch: int, done: int, at: int = crash_at, write: Any = write) -> None:
            if done >= at:
                raise Crash  # the step's commit is made, the journal does not say so
            write(batch, done)

        m.mirror._write_journal = crash_before  # type: ignore[method-assign]
        with pytest.raises(Crash):
            m.mirror.apply(rows, batch_id)
        m.mirror._write_journal = write  # type: ignore[method-assign]
        m.mirror.apply(rows, batch_id)
        m.assert_equal("t")
        m.mirror.close()


def _one_batch(batches: list[tuple[Any, int]]) -> tuple[Any, int]:
    """The batches a run made of the statements as one (a loaded machine may cut them in two), under the last id."""
    import pyarrow as pa

    return pa.concat_tables([rows for rows, _id in batches]), batches[-1][1]
