"""A new checkpoint location on an existing mirror, as the production report had it: the same mirror root and
destination meta, a new checkpoint. The new query's batch ids start at 0 again, and its first batch -- the changes
after those the mirror holds, from the destination's cursor -- fails with MirrorCheckpointError instead of being
skipped as a replay; nothing of it is written, and the query from the old checkpoint then goes on exactly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from canal.spark import DeltaMirror
from canal.spark.testing import compare_tables, master_position
from tests.test_spark_units import _mirror_available_now, _source_options

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_a_new_checkpoint_on_an_existing_mirror_stops_typed_and_the_old_one_goes_on(
    mariadb: Any, spark: Any, tmp_path: Path
) -> None:
    conn = mariadb.connect()
    db = mariadb.database
    start = master_position(conn)
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE `{db}`.a (id INT PRIMARY KEY, x INT)")
        cur.executemany(f"INSERT INTO `{db}`.a VALUES (%s, %s)", [(i, i) for i in range(20)])
    options = _source_options(mariadb, start, tmp_path, **{"meta.dir": str(tmp_path / "meta")})
    mirror = DeltaMirror(tmp_path / "m")
    assert _mirror_available_now(spark, options, mirror, tmp_path / "ckpt").awaitTermination(120)
    assert all(c.equal for c in compare_tables(conn, mirror, db, ["a"]))
    with conn.cursor() as cur:
        cur.execute(f"UPDATE `{db}`.a SET x = x + 100 WHERE id < 5")
        cur.execute(f"INSERT INTO `{db}`.a VALUES (100, 100)")
    held = sorted(mirror.read(db, "a").to_pylist(), key=lambda r: r["id"])
    mirror.close()

    fresh = {**options, "spool.dir": str(tmp_path / "ckpt2.canal-spool")}
    second = DeltaMirror(tmp_path / "m")
    query = _mirror_available_now(spark, fresh, second, tmp_path / "ckpt2")
    with pytest.raises(Exception, match="MirrorCheckpointError") as stopped:
        query.awaitTermination(120)
    assert "new checkpoint" in str(stopped.value)
    assert sorted(second.read(db, "a").to_pylist(), key=lambda r: r["id"]) == held  # nothing of it written
    second.close()

    again = DeltaMirror(tmp_path / "m")
    assert _mirror_available_now(spark, options, again, tmp_path / "ckpt").awaitTermination(120)
    for c in compare_tables(conn, again, db, ["a"]):
        assert c.equal, str(c)
    again.close()
    conn.close()
