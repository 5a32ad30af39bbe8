"""A misspelt key is reported with the key it was meant to be -- also under the prefixes whose other keys pycanal
knowingly ignores (``canal.instance.mysql.slaveID`` and ``canal.instance.network.soTimout`` were dropped at DEBUG
level, though the guide says unread keys are reported)."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from canal.config import InstanceConfig
from canal.config.keys import _edits, _used_keys, near_miss

PROPERTIES = """
canal.instance.master.address = 127.0.0.1:3306
canal.instance.mysql.slaveID = 1234
canal.instance.network.soTimout = 90
pycanal.snapshot.mdoe = initial
canal.instance.network.receiveBufferSize = 16384
canal.instance.tsdb.enable = true
"""


def test_misspelt_keys_are_reported_with_the_key_meant(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="canal.config"):
        config = InstanceConfig.from_properties(PROPERTIES, destination="near")
    warned = {r.getMessage() for r in caplog.records if r.levelno == logging.WARNING}
    for typo, meant in (
        ("canal.instance.mysql.slaveID", "canal.instance.mysql.slaveId"),  # case
        ("canal.instance.network.soTimout", "canal.instance.network.soTimeout"),  # a letter left out
        ("pycanal.snapshot.mdoe", "pycanal.snapshot.mode"),  # two letters swapped
    ):
        assert f"instance.properties (destination near): key {typo} is not read: did you mean {meant}?" in warned
    # canal's own keys of features pycanal does not have stay quiet (DEBUG)
    assert not any("receiveBufferSize" in m or "tsdb" in m for m in warned)
    # and nothing misspelt was applied
    assert config.slave_id is None and config.retry.read_timeout_s == 30.0


def test_a_near_miss_names_every_key_it_may_mean() -> None:
    for key in _used_keys():
        assert near_miss(key) == (key,)  # (a key that is read is never reported)
    assert near_miss("canal.iq") == ("canal.id", "canal.ip")
    assert near_miss("CANAL.INSTANCE.FILTER.QUERY.DML") == ("canal.instance.filter.query.dml",)  # case first
    assert near_miss("canal.instance.filter.query.dxl") == tuple(
        f"canal.instance.filter.query.{kind}" for kind in ("dcl", "ddl", "dml")
    )
    assert near_miss("canal.instance.network.receiveBufferSize") == ()


@given(st.text(max_size=12), st.text(max_size=12))
def test_the_bounded_edit_distance_is_levenshtein_up_to_its_limit(a: str, b: str) -> None:
    def levenshtein(x: str, y: str) -> int:
        row = list(range(len(y) + 1))
        for i, cx in enumerate(x, 1):
            prev, row[0] = row[0], i
            for j, cy in enumerate(y, 1):
                prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (cx != cy))
        return row[-1]

    exact = levenshtein(a, b)
    assert _edits(a, b, 2) == min(exact, 3)
