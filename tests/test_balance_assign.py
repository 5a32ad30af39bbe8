"""The balance group's assignment (canal.ha.assign) against its rules, by property: within one, caps, sticky joins
and leaves that move only what they must, preferred hosts, one master together, pins, destinations held outside the
group, and a fixed point (members that compute it again from its own answer change nothing)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from canal.ha.assign import Member, Placement, Plan, assign, quotas


def dests(count: int, masters: int = 2) -> dict[str, Placement]:
    return {f"d{i:02d}": Placement(master=f"canal@db{i % masters}:3306") for i in range(count)}


def members(count: int, embedded: Mapping[str, Placement], start: int = 0, **kw: object) -> list[Member]:
    return [Member(f"m-{start + i:010d}", f"10.0.0.{start + i}:11111", embedded, **kw) for i in range(count)]  # type: ignore[arg-type]


def loads(plan: Plan, live: list[Member]) -> dict[str, int]:
    count = Counter(o for o in plan.owners.values() if o is not None)
    return {m.id: count[m.id] for m in live}


def settled(group: list[Member], previous: Mapping[str, str | None] | None = None) -> Plan:
    plan = assign(group, previous or {})
    assert assign(group, plan.owners).owners == plan.owners, "not a fixed point"
    return plan


@given(n=st.integers(1, 8), m=st.integers(0, 60), masters=st.integers(1, 4))
def test_a_fresh_group_is_within_one_and_a_fixed_point(n: int, m: int, masters: int) -> None:
    group = members(n, dests(m, masters))
    plan = settled(group)
    assert all(owner is not None for owner in plan.owners.values())
    counts = loads(plan, group)
    assert max(counts.values()) - min(counts.values()) <= 1
    assert counts == dict(plan.quotas)
    # the same answer whatever order the members are listed in
    assert assign(list(reversed(group)), {}).owners == plan.owners


def test_a_fresh_group_deals_each_member_one_master() -> None:
    group = members(4, dests(40, masters=2))
    plan = settled(group)
    for member in group:
        held = plan.of(member.id)
        assert len(held) == 10
        assert len({group[0].destinations[d].master for d in held}) == 1, held


@settings(max_examples=60)
@given(n=st.integers(1, 6), m=st.integers(1, 50), seed=st.integers(0, 1000))
def test_a_join_moves_only_onto_the_new_member_at_most_its_share(n: int, m: int, seed: int) -> None:
    embedded = dests(m, masters=1 + seed % 3)
    group = members(n, embedded)
    before = settled(group)
    joined = group + members(1, embedded, start=n)
    after = settled(joined, before.owners)
    moved = [d for d in embedded if after.owners[d] != before.owners[d]]
    newcomer = joined[-1].id
    assert all(after.owners[d] == newcomer for d in moved)
    assert len(moved) == after.quotas[newcomer] <= math.ceil(m / n)
    counts = loads(after, joined)
    assert max(counts.values()) - min(counts.values()) <= 1


@settings(max_examples=60)
@given(n=st.integers(2, 6), m=st.integers(1, 50), gone=st.integers(0, 5))
def test_a_leave_moves_only_what_the_member_held(n: int, m: int, gone: int) -> None:
    embedded = dests(m)
    group = members(n, embedded)
    before = settled(group)
    leaver = group[gone % n]
    rest = [g for g in group if g is not leaver]
    after = settled(rest, before.owners)
    moved = {d for d in embedded if after.owners[d] != before.owners[d]}
    assert moved == {d for d, o in before.owners.items() if o == leaver.id}
    counts = loads(after, rest)
    assert max(counts.values()) - min(counts.values()) <= 1
    # a member leaving on purpose (still listed, "leaving") gives the same answer as one gone
    assert assign([*rest, attrs_evolve(leaver, leaving=True)], before.owners).owners == after.owners


def attrs_evolve(member: Member, **changes: object) -> Member:
    import attrs

    return attrs.evolve(member, **changes)  # type: ignore[arg-type]


@given(caps=st.lists(st.one_of(st.none(), st.integers(0, 12)), min_size=1, max_size=6), m=st.integers(0, 50))
def test_caps_are_never_exceeded_and_spare_room_is_used(caps: list[int | None], m: int) -> None:
    embedded = dests(m)
    group = [Member(f"m-{i:010d}", f"h{i}:1", embedded, max_destinations=c) for i, c in enumerate(caps)]
    plan = settled(group)
    counts = loads(plan, group)
    for member in group:
        assert member.max_destinations is None or counts[member.id] <= member.max_destinations
    room = sum(math.inf if c is None else c for c in caps)
    owned = sum(counts.values())
    assert owned == min(m, room)
    uncapped = [counts[g.id] for g in group if g.max_destinations is None]
    if uncapped:
        assert max(uncapped) - min(uncapped) <= 1


def test_quotas_give_the_extra_ones_to_who_holds_most() -> None:
    group = members(3, {})
    assert quotas(group, 10, {group[2].id: 5}) == {group[2].id: 4, group[0].id: 3, group[1].id: 3}


def test_preferred_hosts_take_their_destinations_and_fall_back_when_gone() -> None:
    embedded = dests(12)
    embedded["d03"] = Placement("canal@db1:3306", prefer=("10.0.0.9",))
    embedded["d04"] = Placement("canal@db0:3306", prefer=("10.0.0.9", "10.0.0.1:11111"))
    group = members(3, embedded)
    plan = settled(group)
    assert plan.owners["d04"] == group[1].id  # 10.0.0.1:11111 named by its address; .9 is absent
    preferred = Member("m-0000000009", "10.0.0.9:11111", embedded)
    joined = [*group, preferred]
    after = settled(joined, plan.owners)
    assert after.owners["d03"] == preferred.id
    assert after.owners["d04"] == group[1].id  # on a host it prefers already: it stays
    counts = loads(after, joined)
    assert max(counts.values()) - min(counts.values()) <= 1
    # the preferred host goes away: its destinations fall back to the others
    back = settled(group, after.owners)
    assert back.owners["d03"] in {g.id for g in group}


def test_a_pin_holds_and_the_pinned_member_gives_another_away() -> None:
    embedded = dests(8)
    group = members(2, embedded)
    plan = settled(group)
    far = next(d for d, o in plan.owners.items() if o == group[0].id)
    pinned = assign(group, plan.owners, pins={far: group[1].id})
    assert pinned.owners[far] == group[1].id
    counts = loads(pinned, group)
    assert counts == {group[0].id: 4, group[1].id: 4}
    moved = [d for d in embedded if pinned.owners[d] != plan.owners[d]]
    assert len(moved) == 2  # the pinned one over, one other back
    assert assign(group, pinned.owners, pins={far: group[1].id}).owners == pinned.owners


def test_destinations_held_outside_the_group_have_no_owner_and_count_nowhere() -> None:
    embedded = dests(9)
    group = members(2, embedded)
    plan = settled(group)
    outside = assign(group, plan.owners, foreign={"d00", "d01", "d02"})
    assert all(outside.owners[d] is None for d in ("d00", "d01", "d02"))
    counts = loads(outside, group)
    assert sorted(counts.values()) == [3, 3]


def test_declined_and_unembedded_destinations_go_elsewhere() -> None:
    embedded = dests(4)
    a, b = members(2, embedded)
    a = attrs_evolve(a, declined=frozenset({"d00", "d01", "d02", "d03"}))
    plan = settled([a, b])
    assert set(plan.owners.values()) == {b.id}
    alone = Member("m-0000000005", "x:1", {"d99": Placement()})
    plan = settled([a, b, alone])
    assert plan.owners["d99"] == alone.id


@settings(max_examples=150)
@given(
    spec=st.lists(
        st.tuples(
            st.frozensets(st.integers(0, 11), max_size=12),  # destinations embedded
            st.one_of(st.none(), st.integers(0, 6)),  # cap
            st.booleans(),  # leaving
        ),
        min_size=1,
        max_size=5,
    ),
    prefer=st.dictionaries(st.integers(0, 11), st.integers(0, 4), max_size=4),
    foreign=st.frozensets(st.integers(0, 11), max_size=3),
    previous=st.dictionaries(st.integers(0, 11), st.integers(0, 5), max_size=12),
)
def test_any_inputs_give_a_fixed_point_that_honours_eligibility_and_caps(
    spec: list[tuple[frozenset[int], int | None, bool]],
    prefer: dict[int, int],
    foreign: frozenset[int],
    previous: dict[int, int],
) -> None:
    def placement(d: int) -> Placement:
        return Placement(f"db{d % 3}", prefer=(f"h{prefer[d]}",) if d in prefer else ())

    group = [
        Member(f"m-{i:010d}", f"h{i}:1", {f"d{d}": placement(d) for d in ds}, max_destinations=cap, leaving=leaving)
        for i, (ds, cap, leaving) in enumerate(spec)
    ]
    before = {f"d{d}": f"m-{o:010d}" for d, o in previous.items()}
    plan = assign(group, before, foreign={f"d{d}" for d in foreign})
    again = assign(group, plan.owners, foreign={f"d{d}" for d in foreign})
    assert again.owners == plan.owners
    by_id = {m.id: m for m in group}
    counts = Counter(o for o in plan.owners.values() if o is not None)
    for dest, owner in plan.owners.items():
        if owner is None:
            # nobody could take it: held outside, or every member that embeds it is full or leaving
            assert int(dest[1:]) in foreign or all(
                not m.embeds(dest) or (m.max_destinations is not None and counts[m.id] >= m.max_destinations)
                for m in group
            )
        else:
            assert by_id[owner].embeds(dest) and int(dest[1:]) not in foreign
    for member in group:
        assert member.max_destinations is None or counts[member.id] <= member.max_destinations
