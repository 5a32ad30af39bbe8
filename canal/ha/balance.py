"""Balance groups: processes that embed the same destinations on one ZooKeeper share them.

canal's cluster mode lets the first server started win every destination; the others stand by. A balance group
spreads them instead, the way a Kafka consumer group spreads partitions, with canal's running nodes and pycanal's
fencing left as they are: a destination still runs only in the process holding its running node, and the
assignment below only says which process *competes* for it. ZooKeeper holds, beside canal's layout:

* ``/otter/canal/balance/{group}/members/m-{sequence}`` -- one ephemeral sequential node per live process, its JSON
  ``{"address", "max", "leaving", "declined", "destinations": {dest: {"master", "prefer"}}}`` (what it embeds, its
  cap, whether it is handing everything over). The sequence is the join order.
* ``/otter/canal/balance/{group}/assignment`` -- a persistent JSON document: the owners (destination -> member),
  the quotas, the operator's pins, and the *inputs* they were computed from (each member's id, address and data
  version; the destinations held outside the group).

**No leader, no stop-the-world.** Every member watches the members, the document and the running nodes of the
destinations. When what it reads differs from the document's inputs, it computes the new owners from the document's
owners (:func:`canal.ha.assign.assign`, deterministic and sticky) and writes the document with a version check; the
first writer wins, the others' writes fail and they read it instead -- they would have written the same. Each member
then competes for what the document gives it and revokes what it no longer does; destinations whose owner does not
change are never touched. kazoo's ``SetPartitioner`` recipe, by contrast, releases every partition on every change of
membership and waits for all members to acquire again.

**Outside the group.** A destination whose running node is held by a session that is not a member's -- a canal
server, or a pycanal process with balancing off -- is *foreign*: nobody here is assigned it and it counts in no
share. When that holder lets it go, the running node's watch makes a member recompute, and it is assigned again.

The reads are ordered (the document, then the members, then the running nodes) so that a member never judges a
running node held by a member newer than the document it read as foreign without its write then failing the
version check.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.protocol.states import KazooState

from canal.errors import HAError
from canal.ha.assign import Member, Placement, assign
from canal.log import destination_logger
from canal.meta import zkpaths

DOC_VERSION = 1
RETRY_FIRST_S = 0.05  # a failed reconcile is tried again after this, doubling up to RETRY_MAX_S
RETRY_MAX_S = 2.0
QUIET_S = 0.1  # after what this process says of itself changed, the group is told once it was quiet this long
QUIET_MAX_S = 1.0  # ... but no later than this after the first change
Watch = Callable[[Any], None]


@attrs.frozen(slots=True)
class AssignmentDoc:
    """The group's assignment document (see the module docstring)."""

    members: Mapping[str, tuple[str, int]]  # member id -> (address, data version) it was computed from
    foreign: tuple[str, ...]
    owners: Mapping[str, str | None]
    quotas: Mapping[str, int]
    pins: Mapping[str, str] = attrs.field(factory=dict)

    def to_bytes(self) -> bytes:
        body = {
            "version": DOC_VERSION,
            "members": {m: {"address": a, "data": v} for m, (a, v) in sorted(self.members.items())},
            "foreign": list(self.foreign),
            "owners": dict(sorted(self.owners.items())),
            "quotas": dict(sorted(self.quotas.items())),
            "pins": dict(sorted(self.pins.items())),
        }
        return json.dumps(body, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> AssignmentDoc:
        try:
            body = json.loads(data)
            if body.get("version") != DOC_VERSION:
                raise ValueError(f"document version {body.get('version')!r}, expected {DOC_VERSION}")
            return cls(
                members={m: (str(v["address"]), int(v["data"])) for m, v in body["members"].items()},
                foreign=tuple(body["foreign"]),
                owners={d: (None if o is None else str(o)) for d, o in body["owners"].items()},
                quotas={m: int(q) for m, q in body["quotas"].items()},
                pins={d: str(m) for d, m in body.get("pins", {}).items()},
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise HAError(f"unreadable balance assignment document: {exc}") from None

    def mine(self, member_id: str | None) -> list[str]:
        """The destinations assigned to ``member_id``, sorted."""
        return sorted(d for d, o in self.owners.items() if member_id is not None and o == member_id)


def member_bytes(
    address: str,
    destinations: Mapping[str, Placement],
    *,
    max_destinations: int | None,
    leaving: bool,
    declined: Iterable[str],
) -> bytes:
    """A member node's data."""
    body = {
        "address": address,
        "max": max_destinations,
        "leaving": leaving,
        "declined": sorted(declined),
        "destinations": {d: {"master": p.master, "prefer": list(p.prefer)} for d, p in sorted(destinations.items())},
    }
    return json.dumps(body, separators=(",", ":")).encode()


def parse_member(member_id: str, data: bytes) -> Member:
    """A member from its node's name and data; HAError when the data is not a member's."""
    try:
        body = json.loads(data)
        return Member(
            member_id,
            str(body["address"]),
            {
                d: Placement(None if p.get("master") is None else str(p["master"]), tuple(p.get("prefer", ())))
                for d, p in body["destinations"].items()
            },
            None if body.get("max") is None else int(body["max"]),
            bool(body.get("leaving", False)),
            frozenset(body.get("declined", ())),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise HAError(f"unreadable balance member node {member_id}: {exc}") from None


@attrs.frozen(slots=True)
class GroupView:
    """One read of a group: its members (with their sessions and data versions), its document, and who holds each
    destination's running node (a session id, None: nobody)."""

    group: str
    members: tuple[Member, ...]
    sessions: Mapping[str, int]
    versions: Mapping[str, int]
    doc: AssignmentDoc | None
    doc_version: int  # -1: no document yet
    holders: Mapping[str, int | None]

    @property
    def foreign(self) -> tuple[str, ...]:
        """Destinations whose running node a session outside the group holds."""
        ours = set(self.sessions.values())
        return tuple(sorted(d for d, s in self.holders.items() if s is not None and s not in ours))

    def inputs(self) -> dict[str, tuple[str, int]]:
        return {m.id: (m.address, self.versions[m.id]) for m in self.members}

    def current(self) -> bool:
        """Whether the document was computed from what this view holds."""
        return self.doc is not None and dict(self.doc.members) == self.inputs() and self.doc.foreign == self.foreign

    def compute(self, pins: Mapping[str, str] | None = None) -> AssignmentDoc:
        """The document for this view: the owners from the current document's (sticky), its pins kept for live
        members (``pins`` instead, when given)."""
        live = {m.id for m in self.members}
        kept = dict(self.doc.pins) if pins is None and self.doc is not None else dict(pins or {})
        kept = {d: m for d, m in kept.items() if m in live}
        plan = assign(
            self.members, self.holding() if self.doc is None else self.doc.owners, foreign=self.foreign, pins=kept
        )
        return AssignmentDoc(self.inputs(), self.foreign, dict(plan.owners), dict(plan.quotas), kept)

    def holding(self) -> dict[str, str | None]:
        """Each destination's member by the running node its session holds: the previous owners when there is no
        document to take them from (none yet, deleted, or unreadable), so that what runs stays where it runs."""
        member_of = {s: m for m, s in self.sessions.items()}
        return {d: member_of.get(s) for d, s in self.holders.items() if s is not None}

    def member(self, member_id: str) -> Member | None:
        return next((m for m in self.members if m.id == member_id), None)

    def serving(self, member_id: str) -> list[str]:
        """The destinations whose running node ``member_id``'s session holds."""
        session = self.sessions.get(member_id)
        return sorted(d for d, s in self.holders.items() if s is not None and s == session)


def newer_format(data: bytes) -> bool:
    """Whether ``data`` is an assignment document of a format newer than this pycanal's (a later release wrote it)."""
    try:
        version = json.loads(data).get("version")
    except (ValueError, AttributeError):
        return False
    return isinstance(version, int) and not isinstance(version, bool) and version > DOC_VERSION


def read_doc(
    client: KazooClient, group: str, *, timeout: float, watch: Watch | None = None
) -> tuple[AssignmentDoc | None, int]:
    """The group's document and its version (None, -1: none yet), with ``watch`` left on it.

    A document that cannot be read -- corrupt, empty, or of an older format -- is as good as none, but its version
    is returned, so the next write replaces it (with the version check) instead of every member failing on it for
    ever, with no destination ever assigned again. One of a newer format (a later pycanal runs the group) raises
    HAError: overwriting it would undo that release's assignment; this process takes no part until it is upgraded.
    """
    doc_path = zkpaths.balance_assignment_path(group)
    try:
        raw, stat = client.get_async(doc_path, watch).get(timeout=timeout)
    except NoNodeError:
        client.exists_async(doc_path, watch).get(timeout=timeout)  # a watch for its creation
        return None, -1
    try:
        return AssignmentDoc.from_bytes(raw), int(stat.version)
    except HAError as exc:
        if newer_format(raw):
            raise HAError(f"{exc}: a newer pycanal runs balance group {group!r}; upgrade this process") from None
        destination_logger(__name__, f"balance:{group}").warning("%s: the next write replaces it", exc)
        return None, int(stat.version)


def read_group(
    client: KazooClient,
    group: str,
    *,
    timeout: float,
    watch: Watch | None = None,
    doc: tuple[AssignmentDoc | None, int] | None = None,
) -> GroupView:
    """Read a group (with ``watch`` left on the members, the document and every running node read); ``doc``: the
    document as just read (:func:`read_doc`), read first either way."""
    document, doc_version = read_doc(client, group, timeout=timeout, watch=watch) if doc is None else doc
    members_path = zkpaths.balance_members_path(group)
    try:
        children = sorted(client.get_children_async(members_path, watch).get(timeout=timeout))
    except NoNodeError:
        children = []
    reads = {c: client.get_async(f"{members_path}/{c}") for c in children}
    members: list[Member] = []
    sessions: dict[str, int] = {}
    versions: dict[str, int] = {}
    for child, result in reads.items():
        try:
            raw, stat = result.get(timeout=timeout)
        except NoNodeError:
            continue  # left since the list was read
        try:
            member = parse_member(child, raw)
        except HAError as exc:
            # another format (a newer pycanal?): it takes no part, and what it holds counts as held outside
            destination_logger(__name__, f"balance:{group}").warning("%s: it is left out of the assignment", exc)
            continue
        members.append(member)
        sessions[child], versions[child] = int(stat.ephemeralOwner), int(stat.version)
    destinations = sorted({d for m in members for d in m.destinations} | set(document.owners if document else ()))
    running = {d: client.exists_async(zkpaths.destination_running_path(d), watch) for d in destinations}
    holders: dict[str, int | None] = {}
    for dest, result in running.items():
        stat = result.get(timeout=timeout)
        holders[dest] = None if stat is None else int(stat.ephemeralOwner)
    return GroupView(group, tuple(members), sessions, versions, document, doc_version, holders)


def write_doc(client: KazooClient, group: str, doc: AssignmentDoc, version: int, *, timeout: float) -> bool:
    """Write the document over ``version`` (-1: create it); False when another write came first."""
    path = zkpaths.balance_assignment_path(group)
    try:
        if version < 0:
            client.create_async(path, doc.to_bytes(), makepath=True).get(timeout=timeout)
        else:
            client.set_async(path, doc.to_bytes(), version=version).get(timeout=timeout)
    except (BadVersionError, NodeExistsError, NoNodeError):
        return False
    return True


def request_move(client: KazooClient, group: str, destination: str, address: str, *, timeout: float) -> AssignmentDoc:
    """Pin ``destination`` to the member at ``address`` (``canal ha move``) and write the document: that member's
    running monitor takes it over once its owner has handed it over. Raises HAError when no single live member
    there embeds it, when it has no room under its cap, or when a process outside the group holds it."""
    for _ in range(50):
        view = read_group(client, group, timeout=timeout)
        at = [m for m in view.members if m.address == address]
        if not at:
            known = ", ".join(sorted(m.address for m in view.members)) or "none"
            raise HAError(f"no member of balance group {group!r} has address {address!r} (members: {known})")
        if len(at) > 1:
            raise HAError(f"{len(at)} members of balance group {group!r} have address {address!r}: move by hand")
        target = at[0]
        if not target.embeds(destination):
            why = (
                "is leaving"
                if target.leaving
                else "declined it"
                if destination in target.declined
                else "does not embed it"
            )
            raise HAError(f"cannot move {destination!r} to {address}: that process {why}")
        if destination in view.foreign:
            raise HAError(f"{destination!r} is held by a process outside balance group {group!r}")
        held = sum(1 for o in (view.doc.owners if view.doc else {}).values() if o == target.id)
        already = view.doc is not None and view.doc.owners.get(destination) == target.id
        if target.cap is not None and held >= target.cap and not already:
            raise HAError(f"cannot move {destination!r} to {address}: it serves its max_destinations ({target.cap})")
        pins = {**(view.doc.pins if view.doc else {}), destination: target.id}
        doc = view.compute(pins)
        if write_doc(client, group, doc, view.doc_version, timeout=timeout):
            return doc
    raise HAError(f"could not write the assignment of balance group {group!r}: too much contention")


def group_names(client: KazooClient, *, timeout: float) -> list[str]:
    try:
        return sorted(client.get_children_async(zkpaths.BALANCE_ROOT).get(timeout=timeout))
    except NoNodeError:
        return []


class Balancer:
    """One process's membership of a balance group: registers it, keeps the document current, and tells the
    server what it is assigned (``on_assignment(doc, member_id)``, on the balancer's thread; it must not block).

    All ZooKeeper work runs on one thread (``canal-balance-{group}``); kazoo's threads only wake it.
    """

    def __init__(
        self,
        client: KazooClient,
        *,
        group: str,
        address: str,
        max_destinations: int | None,
        on_assignment: Callable[[AssignmentDoc, str | None], None],
        timeout_s: float,
    ) -> None:
        zkpaths.balance_path(group)  # validates the name
        self._client = client
        self.group = group
        self.address = address
        self.max_destinations = max_destinations
        self._on_assignment = on_assignment
        self._timeout = timeout_s
        self._log = destination_logger(__name__, f"balance:{group}")
        self._lock = threading.Lock()
        self._destinations: dict[str, Placement] = {}
        self._declined: set[str] = set()
        self._leaving = False
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._local: tuple[float, float] | None = None  # (first, last) monotonic time of local changes not told
        self._thread: threading.Thread | None = None
        self._node: str | None = None  # the member node's path, in the session ``_node_session``
        self._node_session: int | None = None
        self._written: bytes | None = None
        self._left_version: int | None = None  # the member node's data version that says "leaving"
        self._changed = threading.Condition()
        self.member_id: str | None = None
        self.doc: AssignmentDoc | None = None  # the document last handed to the server
        self.members = 0

    # -- what this process says about itself
    def publish(self, destinations: Mapping[str, Placement]) -> None:
        """The destinations this process embeds now (the whole set). A service starting many destinations one by one
        publishes each time: the group hears of them together, once they came :data:`QUIET_S` apart or more."""
        with self._lock:
            self._destinations = dict(destinations)
            self._declined &= set(destinations)
            self._changed_here(quiet=True)
        self.poke()

    def _changed_here(self, *, quiet: bool) -> None:
        now = time.monotonic()
        first = now if self._local is None else self._local[0]
        self._local = (first, now) if quiet else (first, first - QUIET_S)

    def decline(self, destination: str, declined: bool = True) -> None:
        """Give ``destination`` away (another member gets it, or nobody) -- or take it back."""
        with self._lock:
            if declined:
                self._declined.add(destination)
            else:
                self._declined.discard(destination)
            self._changed_here(quiet=False)
        self.poke()

    def leave(self) -> None:
        """Hand everything over: the member stays listed (``leaving``) until :meth:`stop`."""
        with self._lock:
            self._leaving = True
            self._changed_here(quiet=False)
        self.poke()

    # -- lifecycle
    def start(self) -> None:
        self._client.add_listener(self._on_state)
        self._thread = threading.Thread(target=self._run, name=f"canal-balance-{self.group}", daemon=True)
        self._thread.start()
        self.poke()

    def stop(self, timeout: float | None = None) -> None:
        """Stop reconciling and leave the group (the member node is deleted when ZooKeeper can be reached)."""
        self._stop.set()
        self._wake.set()
        self._client.remove_listener(self._on_state)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(self._timeout if timeout is None else timeout)
        node, self._node = self._node, None
        if node is not None and self._client.connected:
            try:
                self._client.delete_async(node).get(timeout=self._timeout if timeout is None else timeout)
            except Exception as exc:  # gone with its session, or ZooKeeper went away: it expires with the session
                self._log.info("member node %s not deleted: %s: %s", node, type(exc).__name__, exc)

    def wait_left(self, timeout: float | None) -> bool:
        """After :meth:`leave`: wait until the document handed to the server was computed with this member leaving
        (every other member then competes for what it held); whether it was."""

        def left(doc: AssignmentDoc | None, member_id: str | None) -> bool:
            version = self._left_version
            if doc is None or member_id is None or version is None:
                return False
            return doc.members.get(member_id, ("", -1))[1] >= version

        return self.wait(left, timeout)

    def wait(self, predicate: Callable[[AssignmentDoc | None, str | None], bool], timeout: float | None) -> bool:
        """Wait until ``predicate(doc, member_id)`` holds for the document handed to the server; whether it did."""
        with self._changed:
            return self._changed.wait_for(lambda: predicate(self.doc, self.member_id), timeout)

    def poke(self, *_event: Any) -> None:
        """Reconcile soon (a watch fired, or something local changed)."""
        self._wake.set()

    def _on_state(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            self.poke()

    # -- the balancer's thread
    def _run(self) -> None:
        failures = 0
        while True:
            self._wake.wait()
            if self._stop.is_set():
                return
            if self._quiet_for() > 0:
                if self._stop.wait(self._quiet_for()):
                    return
                continue  # (the wake stays set)
            self._wake.clear()
            try:
                self._reconcile()
            except Exception as exc:
                failures += 1
                delay = min(RETRY_MAX_S, RETRY_FIRST_S * 2 ** (failures - 1))
                self._log.warning(
                    "balance step failed (attempt %d), retrying in %.2fs: %s: %s",
                    failures,
                    delay,
                    type(exc).__name__,
                    exc,
                )
                if self._stop.wait(delay):
                    return
                self._wake.set()
            else:
                failures = 0

    def _quiet_for(self) -> float:
        """How long to wait before telling the group of local changes (0: now)."""
        with self._lock:
            if self._local is None:
                return 0.0
            first, last = self._local
        now = time.monotonic()
        return max(0.0, min(last + QUIET_S, first + QUIET_MAX_S) - now)

    def _member_data(self) -> tuple[bytes, bool]:
        with self._lock:
            self._local = None
            data = member_bytes(
                self.address,
                self._destinations,
                max_destinations=self.max_destinations,
                leaving=self._leaving,
                declined=self._declined,
            )
            return data, self._leaving

    def _register(self, session: int) -> None:
        data, leaving = self._member_data()
        if self._node is None or self._node_session != session:
            # first, or a new session (the old node died with the old one)
            self._node = self._client.create_async(
                f"{zkpaths.balance_members_path(self.group)}/m-", data, ephemeral=True, sequence=True, makepath=True
            ).get(timeout=self._timeout)
            self._node_session, self._written = session, data
            self.member_id = self._node.rsplit("/", 1)[1]
            if leaving:
                self._left_version = 0
            self._log.info("joined balance group %r as %s (%s)", self.group, self.member_id, self.address)
        elif data != self._written:
            try:
                stat = self._client.set_async(self._node, data).get(timeout=self._timeout)
            except NoNodeError:
                self._node = None  # gone with a session we did not see end: register again
                raise
            self._written = data
            if leaving:
                self._left_version = int(stat.version)

    def _reconcile(self) -> None:
        client = self._client
        if not client.connected or client.client_id is None:
            return  # the CONNECTED listener wakes this thread again
        self._register(int(client.client_id[0]))
        read = read_doc(client, self.group, timeout=self._timeout, watch=self.poke)
        if read[0] is not None and read[0] != self.doc and self.member_id in read[0].members:
            # what the document says now goes to the server at once: a newer one, should this one be stale, only
            # changes it again (a hand-over starts, or a takeover waits, a group read sooner)
            self._deliver(read[0], len(read[0].members))
        view = read_group(client, self.group, timeout=self._timeout, watch=self.poke, doc=read)
        if self.member_id not in view.sessions:
            self._node = None  # our node is gone: register again
            self.poke()
            return
        doc = view.doc
        if not view.current():
            doc = view.compute()
            if not write_doc(client, self.group, doc, view.doc_version, timeout=self._timeout):
                self.poke()  # another member wrote first: read what it wrote
                return
            moved = [d for d, o in doc.owners.items() if view.doc is None or view.doc.owners.get(d) != o]
            (self._log.info if moved else self._log.debug)(
                "assignment for %d members written: %d destinations moved%s",
                len(view.members),
                len(moved),
                f" ({', '.join(moved[:10])}{' ...' if len(moved) > 10 else ''})" if moved else "",
            )
        assert doc is not None
        self._deliver(doc, len(view.members))

    def _deliver(self, doc: AssignmentDoc, members: int) -> None:
        with self._changed:
            self.doc = doc
            self.members = members
            self._changed.notify_all()
        self._on_assignment(doc, self.member_id)
