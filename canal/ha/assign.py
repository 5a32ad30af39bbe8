"""Who serves which destination: the balanced, sticky assignment every member of a balance group computes.

:func:`assign` is a pure function of what ZooKeeper holds -- the live members (each with the destinations it embeds,
its cap and its join order), the owners of the previous assignment, the destinations a process outside the group
holds, and the pins an operator set -- so any member computes the same answer, and whichever writes it first
writes what the others would have (:mod:`canal.ha.balance`). What it guarantees, in this order:

1. **Caps.** A member never gets more than its ``max_destinations``. Destinations no member has room for have no
   owner (the alert on unowned destinations says so).
2. **Within one.** Each member's *quota* is its share of the destinations: the members' caps are filled first
   (water-filling), the rest split as evenly as integers allow, so two uncapped members' quotas differ by at most
   one. Where the extra ones go is sticky too: to the members that hold the most already.
3. **Sticky.** A destination stays with its previous owner while that owner is live, still embeds it and is not
   over its quota; a member over quota gives away only its excess. So a member that joins takes at most its quota
   (each move is to it), and a member that leaves moves only what it held.
4. **Preferred hosts** (canal's "run this instance on that host, fall back to any"): a destination that prefers a
   host goes to a member on it while that member holds fewer preferred destinations than its quota; otherwise it
   goes anywhere.
5. **One master together.** Among the members with room, a destination goes to the one holding the most
   destinations of its master, so that they share one read and one decode of the binlog in that process
   (:mod:`canal.parse.shared`). A fresh group therefore deals each member contiguous runs of one master.

Pins (``canal ha move DEST --to ADDRESS``) place a destination on a member whatever the rest says, for as long as that
member lives; the member then gives away another destination if the pin put it over its quota.

The answer is a fixed point: given its own owners as the previous ones, :func:`assign` returns them unchanged, so
members agree and nothing moves until the inputs change. Kafka's sticky assignor follows the same rules (balance
first, then keep what is where it is); Kafka Connect's incremental cooperative protocol moves only what changes
owner, as the hand-over in :mod:`canal.server` does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence

import attrs

from canal.address import split_address


@attrs.frozen(slots=True)
class Placement:
    """What a member says about one destination it embeds: the master it reads (``user@host:port``; destinations
    of one master share one read in a process) and the hosts it prefers (a member's host or whole address)."""

    master: str | None = None
    prefer: tuple[str, ...] = ()


def host_of(address: str) -> str:
    """The host part of a member's address (``10.0.0.5:11111`` -> ``10.0.0.5``; ``host:pid`` -> ``host``)."""
    try:
        return split_address(address)[0]
    except ValueError:
        return address


@attrs.frozen(slots=True)
class Member:
    """A live process of the group. ``id`` is its member node's name (``m-`` and ZooKeeper's sequence: join
    order); ``leaving`` members are handing everything over; ``declined`` destinations it embeds but gave away
    (:meth:`EmbeddedServer.release <canal.server.EmbeddedServer.release>`)."""

    id: str
    address: str
    destinations: Mapping[str, Placement] = attrs.field(factory=dict)
    max_destinations: int | None = None
    leaving: bool = False
    declined: frozenset[str] = frozenset()

    @property
    def host(self) -> str:
        return host_of(self.address)

    def embeds(self, destination: str) -> bool:
        """Whether this member may serve ``destination`` now."""
        return not self.leaving and destination in self.destinations and destination not in self.declined

    def prefers(self, placement: Placement) -> bool:
        """Whether ``placement`` names this member's host (or address) among its preferred hosts."""
        return any(p in (self.host, self.address) for p in placement.prefer)

    @property
    def cap(self) -> int | None:
        return self.max_destinations


@attrs.frozen(slots=True)
class Plan:
    """An assignment: ``owners`` (destination -> member id, None: nobody) and each live member's ``quotas``."""

    owners: Mapping[str, str | None]
    quotas: Mapping[str, int]

    def of(self, member_id: str) -> list[str]:
        """The destinations assigned to ``member_id``, sorted."""
        return sorted(d for d, owner in self.owners.items() if owner == member_id)


def quotas(
    live: Sequence[Member], total: int, load: Mapping[str, int], caps: Mapping[str, int | None] | None = None
) -> dict[str, int]:
    """Each member's share of ``total`` destinations: caps first (``caps``, by default each member's
    ``max_destinations``), the rest as even as integers allow; the members holding most (``load``), then the
    oldest, get the extra ones."""
    cap = {m.id: m.cap for m in live} if caps is None else dict(caps)
    out: dict[str, int] = {}
    pool = sorted(live, key=lambda m: m.id)
    left = total
    while pool:
        base, extra = divmod(left, len(pool))
        capped = [m for m in pool if (c := cap.get(m.id)) is not None and c <= base]
        if capped:
            for member in capped:
                limit = cap[member.id]
                assert limit is not None
                out[member.id] = limit
                left -= limit
                pool.remove(member)
            continue
        ranked = sorted(pool, key=lambda m: (-load.get(m.id, 0), m.id))
        for index, member in enumerate(ranked):
            out[member.id] = base + (1 if index < extra else 0)
        break
    return out


ROUNDS = 8
"""At most this many rounds of :func:`assign_once` to reach a fixed point (one or two do, in practice)."""


def assign(
    members: Sequence[Member],
    previous: Mapping[str, str | None],
    *,
    foreign: Collection[str] = (),
    pins: Mapping[str, str] | None = None,
) -> Plan:
    """The owners of every destination some member embeds (see the module docstring for the rules).

    ``previous``: the owners of the last assignment; ``foreign``: destinations held by a process outside the group
    (a canal server, a pycanal process that does not balance), which nobody here is assigned; ``pins``: destination
    -> member id, kept while that member is live and embeds it.

    One round (:func:`assign_once`) is a fixed point when the members embed the same destinations; when they embed
    different ones its quotas may not be reachable, and the next round from its answer moves a destination again.
    The rounds go on from each answer until one changes nothing, so the answer is a fixed point and what moves is
    only the difference between ``previous`` and it.
    """
    plan = assign_once(members, previous, foreign=foreign, pins=pins)
    for _ in range(ROUNDS - 1):
        again = assign_once(members, plan.owners, foreign=foreign, pins=pins)
        if again.owners == plan.owners:
            break
        plan = again
    return plan


def assign_once(
    members: Sequence[Member],
    previous: Mapping[str, str | None],
    *,
    foreign: Collection[str] = (),
    pins: Mapping[str, str] | None = None,
) -> Plan:
    """One round of :func:`assign`."""
    live = sorted((m for m in members if not m.leaving), key=lambda m: m.id)
    by_id = {m.id: m for m in live}
    everything = sorted({d for m in members for d in m.destinations})
    outside = set(foreign)
    eligible: dict[str, list[Member]] = {}
    placement: dict[str, Placement] = {}
    for dest in everything:
        if dest in outside:
            continue
        who = [m for m in live if m.embeds(dest)]
        if who:
            eligible[dest] = who
            placement[dest] = who[0].destinations[dest]  # the oldest member's word, for everyone the same
    dests = sorted(eligible)
    owners: dict[str, str | None] = dict.fromkeys(everything)
    pinned: set[str] = set()
    held: Counter[str] = Counter()  # what each member keeps, never beyond its cap: pins first, then the previous

    def keep(dest: str, member_id: str | None) -> bool:
        member = by_id.get(member_id or "")
        if member is None or not member.embeds(dest) or (member.cap is not None and held[member.id] >= member.cap):
            return False
        owners[dest] = member.id
        held[member.id] += 1
        return True

    for dest in dests:
        if keep(dest, (pins or {}).get(dest)):
            pinned.add(dest)
    for dest in dests:
        if dest not in pinned:
            keep(dest, previous.get(dest))
    load: Counter[str] = Counter()
    of_master: Counter[tuple[str, str | None]] = Counter()  # (member, master) -> destinations held
    preferring: Counter[str] = Counter()  # member -> destinations held that prefer it

    def count(dest: str, member_id: str, step: int) -> None:
        load[member_id] += step
        of_master[(member_id, placement[dest].master)] += step
        if by_id[member_id].prefers(placement[dest]):
            preferring[member_id] += step

    def move(dest: str, to: str | None) -> None:
        before = owners[dest]
        if before is not None:
            count(dest, before, -1)
        owners[dest] = to
        if to is not None:
            count(dest, to, 1)

    for dest in dests:
        owner = owners[dest]
        if owner is not None:
            count(dest, owner, 1)
    # a member's share is at most its cap and the number of destinations it can serve
    serves = Counter(m.id for d in dests for m in eligible[d])
    limit = {m.id: serves[m.id] if m.cap is None else min(m.cap, serves[m.id]) for m in live}
    quota = quotas(live, len(dests), load, limit)

    def grouped(member: Member, master: str | None) -> int:
        return 0 if master is None else of_master[(member.id, master)]

    def under_cap(member: Member) -> bool:
        return member.cap is None or load[member.id] < member.cap

    # preferred hosts: onto a member on one, while it holds fewer preferred destinations than its quota
    for dest in dests:
        wanted = placement[dest]
        owner = owners[dest]
        if not wanted.prefer or dest in pinned or (owner is not None and by_id[owner].prefers(wanted)):
            continue
        room = [
            m for m in eligible[dest] if m.prefers(wanted) and preferring[m.id] < quota.get(m.id, 0) and under_cap(m)
        ]
        if room:
            target = min(room, key=lambda m: (load[m.id] >= quota[m.id], -grouped(m, wanted.master), load[m.id], m.id))
            move(dest, target.id)

    # members over quota give away their excess -- what another member embedding it has room for (counted in
    # advance), never a pinned destination or one preferring them; first those of the masters they hold fewest of,
    # so what stays together is one master's
    def shed() -> bool:
        room = {m.id: quota.get(m.id, 0) - load[m.id] for m in live}
        gave = False
        for member in live:
            excess = load[member.id] - quota.get(member.id, 0)
            held = [d for d in dests if owners[d] == member.id and d not in pinned and not member.prefers(placement[d])]
            held.sort(key=lambda d: (grouped(member, placement[d].master), placement[d].master or "", d))
            for dest in held:
                if excess <= 0:
                    break
                taker = next((m for m in eligible[dest] if m is not member and room[m.id] > 0), None)
                if taker is not None:
                    room[taker.id] -= 1
                    excess -= 1
                    move(dest, None)
                    gave = True
        return gave

    # what has no owner goes to a member with room: the most constrained first (fewest members embed it), those
    # preferring a host first; to a preferred member, then the member holding most of its master, then the least
    # loaded, then the oldest
    def place() -> None:
        waiting = sorted(
            (d for d in dests if owners[d] is None),
            key=lambda d: (len(eligible[d]), not placement[d].prefer, placement[d].master or "", d),
        )
        for dest in waiting:
            wanted = placement[dest]
            free = [m for m in eligible[dest] if load[m.id] < quota.get(m.id, 0) and under_cap(m)]
            if not free:  # the quotas cannot be met (members embed different destinations): anyone under its cap
                free = [m for m in eligible[dest] if under_cap(m)]
            if not free:
                continue  # every member that embeds it is at its cap: no owner
            target = min(free, key=lambda m: (not m.prefers(wanted), -grouped(m, wanted.master), load[m.id], m.id))
            move(dest, target.id)

    # a placement beyond a quota (members embedding different destinations) may leave room a shed can use: again
    # until nothing is given away, so that the answer is a fixed point (each round lowers the excess)
    shed()
    for _ in range(len(dests) + 1):
        place()
        if not shed():
            break
    return Plan(owners, quota)
