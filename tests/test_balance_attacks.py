"""Balance groups attacked the way production does, on a real ZooKeeper, services in this process over fake
masters: an assignment document that is corrupt or of an older format, two processes started at the same instant,
a consumer whose on_revoked hangs while other destinations move, and a member that flaps. (Real processes paused
past their session: tests/test_balance_attack_processes.py.)"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import pytest
from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.watchers import DataWatch
from procs.balance_harness import Ownership
from test_balance_zookeeper import Ledger, Service, Writer, await_ledger, check_callbacks_alternate, configs

from canal.ha.balance import newer_format
from canal.meta import zkpaths
from canal.testing.fake import FakeMysql
from canal.testing.plugin import ZooKeeperChroot

pytestmark = pytest.mark.integration


@pytest.fixture
def fakes() -> Iterator[list[FakeMysql]]:
    made = [FakeMysql(name=f"atk{i}{threading.get_ident() % 10**6}") for i in range(2)]
    yield made
    for fake in made:
        fake.unregister()


@pytest.mark.parametrize(
    "document",
    [
        pytest.param(b"\x00garbage{", id="corrupt"),
        pytest.param(json.dumps({"version": 0, "owners": {"d00": "m-0000000007"}}).encode(), id="older-format"),
        pytest.param(b"", id="empty"),
    ],
)
def test_an_unreadable_assignment_document_is_replaced_not_a_stalled_group(
    zookeeper: ZooKeeperChroot, fakes: list[FakeMysql], document: bytes
) -> None:
    # an operator's mistake, a half-written restore, a document an older pycanal left: the group must go on (before,
    # every member failed each step on it, retried forever, and no destination was ever assigned)
    m = 6
    writer = Writer(fakes, m)
    writer.write(1)
    zk = zookeeper.client()
    zk.create(zkpaths.balance_assignment_path("default"), document, makepath=True)
    ledger = Ledger()
    services = [Service(f"u{i}", zookeeper, ledger) for i in range(2)]
    owners = Ownership(zk, [c.destination for c in configs(fakes, m)])
    try:
        for service in services:
            service.server.start()
            for config in configs(fakes, m):
                service.server.start_destination(config)
        owners.wait(lambda o: o.settled(s.address for s in services), 30, "balanced over an unreadable document")
        await_ledger(ledger, writer)
        services.append(joiner := Service("u2", zookeeper, ledger))  # a sticky assignment no fresh one equals
        joiner.server.start()
        for config in configs(fakes, m):
            joiner.server.start_destination(config)
        before = owners.wait(lambda o: o.settled(s.address for s in services), 30, "balanced after a join")
        # spoilt while the group runs: it is written again from who holds what, and nothing moves
        t0 = time.monotonic()
        spoilt = zk.set(zkpaths.balance_assignment_path("default"), document).version
        rewritten = threading.Event()

        def seen(_data: bytes | None, stat: ZnodeStat | None) -> bool:
            if stat is not None and stat.version > spoilt:
                rewritten.set()
                return False  # (the watch ends)
            return True

        DataWatch(zk, zkpaths.balance_assignment_path("default"), seen)
        assert rewritten.wait(30), "the spoilt document was not written again"
        after = owners.wait(lambda o: o.settled(s.address for s in services), 30, "the document written again")
        assert after == before and owners.changes_after(t0) == []
        writer.write(1)
        await_ledger(ledger, writer)
    finally:
        for service in services:
            service.server.stop()
    assert dict(ledger.rows) == writer.expected()
    check_callbacks_alternate(services)


def test_only_a_document_of_a_newer_format_is_left_alone() -> None:
    assert newer_format(b'{"version": 2, "owners": {}}')
    for data in (b'{"version": 1}', b'{"version": 0}', b'{"version": true}', b"[]", b"", b"\xff{", b'{"version": "9"}'):
        assert not newer_format(data), data
