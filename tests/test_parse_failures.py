"""Failures in canal/parse that were absorbed before: each now surfaces (or is kept apart from a legitimate case).

* An impossible temporal value (a month past 12, hour 25, a fraction over a second) read from corrupt bytes used to
  become the text of a "zero date"; zero and invalid dates the server really stores still read as their text.
* A binlog-named file that cannot be opened was left out of the file list, so a dump went on with the next file.
* When flushing positions failed for several destinations, only the first failure was reported.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from canal.errors import MetaError, SourceError
from canal.parse.log_position import FileLogPositionManager
from canal.parse.mysql import LocalBinlogSource
from canal.parse.mysql.decoder import (
    make_datetime2_reader,
    make_mariadb_datetime_hires_reader,
    read_date,
    read_old_datetime,
)
from canal.position import EntryPosition, LogIdentity, LogPosition


def _datetime2(y: int, mo: int, d: int, h: int, mi: int, s: int, frac: int = 0, fsp: int = 0) -> int:
    packed = 0x8000000000 + (((y * 13 + mo) << 22) | (d << 17) | (h << 12) | (mi << 6) | s)
    return packed << ((fsp + 1) // 2 * 8) | frac


def test_zero_and_invalid_dates_still_read_as_their_text() -> None:
    assert read_date(0) == "0000-00-00"
    assert read_date(2024 << 9 | 2 << 5 | 30) == "2024-02-30"
    assert make_datetime2_reader(0)(_datetime2(0, 0, 0, 0, 0, 0)) == "0000-00-00 00:00:00"
    assert make_datetime2_reader(6)(_datetime2(2020, 0, 15, 23, 59, 59, 999999, 6)) == "2020-00-15 23:59:59.999999"
    assert read_old_datetime(20200015120000) == "2020-00-15 12:00:00"


@pytest.mark.parametrize(
    "read",
    [
        lambda: read_date(2024 << 9 | 13 << 5 | 1),  # month 13
        lambda: make_datetime2_reader(0)(_datetime2(0, 0, 0, 25, 0, 0)),  # hour 25 on a zero date
        lambda: make_datetime2_reader(0)(_datetime2(2020, 0, 1, 10, 61, 0)),  # minute 61
        lambda: make_datetime2_reader(2)(_datetime2(2020, 0, 1, 10, 0, 0, 255, 2)),  # 2.55 s of fraction
        lambda: read_old_datetime(20201301000000),  # month 13
        lambda: make_mariadb_datetime_hires_reader(0)(10000 * 13 * 32 * 24 * 3600),  # year 10000
    ],
)
def test_impossible_temporal_values_are_errors_not_text(read: Any) -> None:
    with pytest.raises(ValueError, match="impossible"):
        read()


def test_an_unreadable_binlog_file_stops_the_listing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # root reads every file: the permission error is injected for that one file (the rest is the real file system)
    (tmp_path / "mysql-bin.000001").write_bytes(b"\xfebin")
    locked = tmp_path / "mysql-bin.000002"
    locked.write_bytes(b"\xfebin")
    real_open = Path.open

    def open_(self: Path, *args: Any, **kwargs: Any) -> Any:
        if self == locked:
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", open_)
    source = LocalBinlogSource(tmp_path)
    source.open()
    with pytest.raises(SourceError, match=r"cannot read .*mysql-bin\.000002 \(a binlog file\?\): Permission denied"):
        source.binlog_files()


def test_every_failed_position_flush_is_reported(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    position = LogPosition(LogIdentity("127.0.0.1:3306", 9), EntryPosition("mysql-bin.000001", 4), 0)
    for blocked in ("one", "two"):
        (tmp_path / blocked).write_text("a file where the destination's directory belongs")
    manager = FileLogPositionManager(tmp_path, flush_period_s=None)
    manager.start()
    try:
        for destination in ("one", "two", "fine"):
            manager.persist_position(destination, position)
        with caplog.at_level(logging.WARNING), pytest.raises(MetaError):
            manager.flush()
        assert [r for r in caplog.records if "log position flush failed" in r.getMessage()]
        assert FileLogPositionManager(tmp_path, flush_period_s=None).path_of("fine").exists()
    finally:
        for blocked in ("one", "two"):
            (tmp_path / blocked).unlink()
        manager.stop()
