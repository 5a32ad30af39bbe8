"""The remedies the guides give for a mirror that cannot go on as it is, against real MariaDB: "mirror under a new
app_id from a snapshot" on the same root is refused before anything is written (its rows would merge into tables
that keep every row the source deleted since: a snapshot only upserts), "mirror into a new root from a snapshot"
gives tables equal to SELECT -- rows deleted since the old mirror's last batch absent --, and the old mirror, under
its own app id, can still go on. Two destinations mirrored into one root under the default app id: the second is
refused, nothing written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from canal import Instance, InstanceConfig, MasterConfig, SnapshotConfig
from canal.config import SnapshotMode
from canal.spark import DeltaMirror, MirrorLineageError, RunStats, run_batches
from canal.spark.testing import compare_tables, master_position

pytestmark = pytest.mark.integration


def _config(mariadb: Any, meta: Path, start: tuple[str, int] | None, *, destination: str = "shop") -> InstanceConfig:
    master = MasterConfig(
        address=mariadb.address,
        username=mariadb.user,
        password=mariadb.password,
        journal_name=None if start is None else start[0],
        position=None if start is None else start[1],
    )
    return InstanceConfig(
        destination=destination,
        master=master,
        filter_regex=rf"{mariadb.database}\..*",
        meta_mode="file",
        meta_dir=str(meta),
        snapshot=SnapshotConfig(mode="initial" if start is None else "never"),
    )


def _run(conn: Any, config: InstanceConfig, mirror: DeltaMirror, journal: Path) -> None:
    until = master_position(conn)
    with Instance(config) as inst:

        def done(stats: RunStats) -> bool:
            if config.snapshot.mode is SnapshotMode.NEVER:
                return stats.reached(*until)
            # nothing is written meanwhile: the snapshot's end, acked, is the end
            cursor = inst.get_cursor()
            return cursor is not None and cursor.snapshot is None and inst.snapshots[-1].progress().done

        run_batches(inst, None, mirror, journal=journal, until=done, idle_stop_s=60)


def _exact(conn: Any, mirror: DeltaMirror, db: str) -> None:
    for c in compare_tables(conn, mirror, db, ["t"]):
        assert c.equal, str(c)


def test_a_snapshot_under_a_new_app_id_is_refused_and_one_into_a_new_root_is_exact(
    mariadb: Any, tmp_path: Path
) -> None:
    conn = mariadb.connect()
    db = mariadb.database
    start = master_position(conn)
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v VARCHAR(20))")
        cur.executemany(f"INSERT INTO `{db}`.t VALUES (%s, %s)", [(i, f"v{i}") for i in range(60)])
    mirror = DeltaMirror(tmp_path / "m")
    _run(conn, _config(mariadb, tmp_path / "meta", start), mirror, tmp_path / "journal")
    _exact(conn, mirror, db)
    mirror.close()
    with conn.cursor() as cur:  # what the old mirror has not seen: new rows, changed rows, deleted rows
        cur.executemany(f"INSERT INTO `{db}`.t VALUES (%s, %s)", [(i, f"v{i}") for i in range(60, 89)])
        cur.execute(f"UPDATE `{db}`.t SET v = 'changed' WHERE id % 2 = 0 AND id < 56")
        cur.execute(f"DELETE FROM `{db}`.t WHERE id % 7 = 3")
    held = sorted(DeltaMirror(tmp_path / "m").read(db, "t").to_pylist(), key=lambda r: r["id"])

    fresh = DeltaMirror(tmp_path / "m", app_id="from-a-snapshot")
    with pytest.raises(MirrorLineageError, match="holds batches of app id 'pycanal-mirror'"):
        _run(conn, _config(mariadb, tmp_path / "meta2", None), fresh, tmp_path / "journal2")
    assert sorted(fresh.read(db, "t").to_pylist(), key=lambda r: r["id"]) == held  # nothing written
    fresh.close()

    new_root = DeltaMirror(tmp_path / "m-new")
    _run(conn, _config(mariadb, tmp_path / "meta3", None), new_root, tmp_path / "journal3")
    _exact(conn, new_root, db)
    new_root.close()

    old = DeltaMirror(tmp_path / "m")  # the old mirror, from its own meta and journal, goes on
    _run(conn, _config(mariadb, tmp_path / "meta", start), old, tmp_path / "journal")
    _exact(conn, old, db)
    old.close()
    conn.close()


def test_a_second_destination_under_the_default_app_id_is_refused(mariadb: Any, tmp_path: Path) -> None:
    conn = mariadb.connect()
    db = mariadb.database
    start = master_position(conn)
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v VARCHAR(20))")
        cur.executemany(f"INSERT INTO `{db}`.t VALUES (%s, %s)", [(i, f"v{i}") for i in range(10)])
    first = DeltaMirror(tmp_path / "m")
    _run(conn, _config(mariadb, tmp_path / "meta-a", start, destination="a"), first, tmp_path / "ja")
    first.close()
    held = sorted(first.read(db, "t").to_pylist(), key=lambda r: r["id"])
    with conn.cursor() as cur:
        cur.execute(f"UPDATE `{db}`.t SET v = 'b' WHERE id < 5")
    second = DeltaMirror(tmp_path / "m")  # destination b, the same root and default app id
    with pytest.raises(MirrorLineageError, match=r"mirrors destination 'a'.*'b'"):
        _run(conn, _config(mariadb, tmp_path / "meta-b", start, destination="b"), second, tmp_path / "jb")
    assert sorted(second.read(db, "t").to_pylist(), key=lambda r: r["id"]) == held
    second.close()
    conn.close()
