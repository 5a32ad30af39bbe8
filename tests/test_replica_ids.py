"""The replica ids dumps register with when no ``slave_id`` is configured (canal.parse.mysql.replica_ids)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from canal.errors import ReplicaIdConflictError
from canal.parse.mysql.replica_ids import FIRST_DERIVED_ID, MAX_ID, ReplicaIds, derive_replica_id

ADDRESS = "10.0.0.1:3306"


def test_destinations_of_a_process_never_share_an_id() -> None:
    ids = ReplicaIds()
    leased = [ids.lease(ADDRESS, f"d{i}") for i in range(200)]
    assert len(set(leased)) == 200
    assert all(FIRST_DERIVED_ID <= i <= MAX_ID for i in leased)
    ids.lease("10.0.0.2:3306", "d0")  # another master's dumps are counted apart
    assert ids.held(ADDRESS) == {i: f"d{n}" for n, i in enumerate(leased)}


def test_a_destination_leases_its_id_again_after_a_reconnect() -> None:
    ids = ReplicaIds()
    first = ids.lease(ADDRESS, "orders")
    ids.release(ADDRESS, first)
    assert ids.lease(ADDRESS, "orders") == first  # it replaces a dump of its own the server still lists


def test_a_second_dump_of_one_destination_steps_over_its_first() -> None:
    ids = ReplicaIds()
    first = ids.lease(ADDRESS, "orders")
    second = ids.lease(ADDRESS, "orders")  # an XA read-back beside the stream
    assert second != first
    configured = ids.lease(ADDRESS, "shop", configured=1234)
    assert configured == 1234 and ids.lease(ADDRESS, "shop", configured=1234) >= FIRST_DERIVED_ID


def test_a_second_dump_of_a_configured_destination_never_takes_the_next_configured_id() -> None:
    """A shared reader made from destination one's source dumps beside one's own dump: it takes a derived id, not
    7102, which destination two has set (two was refused with ReplicaIdConflictError naming one: found by
    test_e2e_mariadb's two destinations under load)."""
    ids = ReplicaIds()
    assert ids.lease(ADDRESS, "one", configured=7101) == 7101
    beside = ids.lease(ADDRESS, "one", configured=7101)
    assert beside not in (7101, 7102) and beside >= FIRST_DERIVED_ID
    assert ids.lease(ADDRESS, "two", configured=7102) == 7102
    assert ids.held(ADDRESS) == {7101: "one", beside: "one", 7102: "two"}


def test_derived_ids_step_over_held_ones_and_the_master(monkeypatch: pytest.MonkeyPatch) -> None:
    ids = ReplicaIds(salt=b"s" * 16)
    wanted = derive_replica_id(ADDRESS, "a", salt=b"s" * 16)
    assert ids.lease(ADDRESS, "a", master_id=wanted) == wanted + 1
    held = ids.lease(ADDRESS, "x", configured=wanted)
    assert held == wanted
    ids.release(ADDRESS, wanted + 1)
    assert ids.lease(ADDRESS, "a") == wanted + 1  # wanted is held by x


def test_two_destinations_configured_with_one_id_are_refused_at_once() -> None:
    ids = ReplicaIds()
    ids.lease(ADDRESS, "one", configured=77)
    with pytest.raises(ReplicaIdConflictError, match=r"slave_id.*canal\.instance\.mysql\.slaveId") as info:
        ids.lease(ADDRESS, "two", configured=77)
    assert info.value.certain and info.value.replica_id == 77
    assert ids.held(ADDRESS) == {77: "one"}  # nothing changed
    assert ids.lease("10.0.0.9:3306", "two", configured=77) == 77  # another master: no clash


def test_a_redraw_derives_another_id() -> None:
    ids = ReplicaIds()
    first = ids.lease(ADDRESS, "orders")
    ids.release(ADDRESS, first)
    ids.redraw(ADDRESS, "orders")
    assert ids.lease(ADDRESS, "orders") != first


def test_processes_draw_independently() -> None:
    # the same destination of the same master in two processes (two salts): other ids
    assert derive_replica_id(ADDRESS, "orders", salt=b"a" * 16) != derive_replica_id(ADDRESS, "orders", salt=b"b" * 16)


@settings(deadline=None, max_examples=50)
@given(
    st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=40, unique=True),
    st.binary(min_size=16, max_size=16),
)
def test_leases_are_unique_and_in_range(names: list[str], salt: bytes) -> None:
    ids = ReplicaIds(salt=salt)
    leased = [ids.lease(ADDRESS, name, master_id=1) for name in names]
    assert len(set(leased)) == len(names)
    assert all(FIRST_DERIVED_ID <= i <= MAX_ID and i != 1 for i in leased)
    for i in leased:
        ids.release(ADDRESS, i)
    assert ids.held(ADDRESS) == {}
