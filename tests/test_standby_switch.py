"""canal's master/standby switch against real MariaDB: a master (server id 1) and its replica (server id 2,
``log_slave_updates``) configured as the standby; detecting SQL runs on the master; when the master dies the parser
switches to the standby and finds its start there by the last handed-off time minus ``fallback_interval_s``.

Nothing committed on the master is lost; changes inside the fallback window are delivered twice (canal's documented
trade: row images make the replay idempotent), and the test counts them: they are exactly a suffix of the master's
changes, none older than the window. Writes on the promoted replica then arrive as usual.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import attrs
import pytest
from test_source_trouble import Change, Workload, delivered_txlog, row_changes

from canal.config import DetectingConfig, InstanceConfig, MasterConfig, RetryConfig
from canal.instance import Instance
from canal.protocol import Entry, EntryType
from canal.testing.services import MariaDBServer

pytestmark = pytest.mark.integration

FALLBACK_S = 5
OLD_OFFSETS = (-300, -200, -100, -30, -9)  # seconds before now: the early transactions, all outside the window

_LOG = logging.getLogger(__name__)


def _master_config(server: MariaDBServer, **start: Any) -> MasterConfig:
    return MasterConfig(address=server.address, username=server.user, password=server.password, **start)


@attrs.define
class Consumer:
    """Drains an instance with get (acking), keeping every entry in order."""

    inst: Instance
    entries: list[Entry] = attrs.field(factory=list)

    def until(self, predicate: Any, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not predicate(self.entries):
            assert time.monotonic() < deadline, f"timed out; got {len(self.entries)} entries"
            self.entries.extend(self.inst.get(1000, timeout=0.1).entries)


def _transactions(entries: list[Entry]) -> list[tuple[int, list[Change]]]:
    """(end time in ms, row changes) of each whole transaction in ``entries``."""
    out: list[tuple[int, list[Change]]] = []
    current: list[Entry] = []
    for e in entries:
        if e.entry_type is EntryType.TRANSACTIONBEGIN:
            current = []
        elif e.entry_type is EntryType.TRANSACTIONEND:
            out.append((e.header.execute_time, row_changes(current)))
        else:
            current.append(e)
    return out


def test_the_parser_switches_to_the_standby_by_time_minus_the_fallback_interval(mariadb_factory: Any) -> None:
    master: MariaDBServer = mariadb_factory(server_id=1)
    replica: MariaDBServer = mariadb_factory(server_id=2, replica_of=master)
    assert replica.variable("log_slave_updates") == "ON"
    first_file = str(master.execute("SHOW BINARY LOGS")[0][0])
    now = int(time.time())
    conn = master.connect()
    try:
        with conn.cursor() as cur:  # binlog times must not go backwards: the database is as old as the rest
            cur.execute(f"SET timestamp = {now + OLD_OFFSETS[0]}")
            cur.execute("CREATE DATABASE d")
    finally:
        conn.close()
    workload = Workload(master, "d", seed=11)
    promoted = Workload(replica, "d", seed=12, _next_id=10_000)
    try:
        # early transactions, binlogged with times well before the fallback window (a session timestamp)
        workload.create_tables(timestamp=now + OLD_OFFSETS[0])
        for offset in OLD_OFFSETS:
            workload.commit(workload.plan_small(), timestamp=now + offset)
        old = len(workload.changes())

        config = InstanceConfig(
            destination="example",
            master=_master_config(master, journal_name=first_file, position=4),
            standby=_master_config(replica),
            filter_regex=r"d\..*",
            detecting=DetectingConfig(enable=True, sql="SELECT 1", interval_s=0.2, retry_threshold=2, ha_switch=True),
            fallback_interval_s=FALLBACK_S,
            retry=RetryConfig(
                initial_backoff_s=0.01,
                max_backoff_s=0.1,
                max_attempts=None,  # the master stays unreachable until the detecting thread switches
                connect_timeout_s=1.0,
                read_timeout_s=2.0,
                heartbeat_period_s=0.2,
            ),
        )
        with Instance(config) as inst:
            consumer = Consumer(inst)
            # consume while a workload runs on the master
            workload.start(before=0, big_rows=None, after=0, pace_s=0.02)
            consumer.until(lambda es: len(delivered_txlog(es)) >= len(OLD_OFFSETS) + 20)
            workload.finish()
            master_changes = workload.changes()
            last = workload.last_number
            consumer.until(lambda es: last in delivered_txlog(es))
            before_switch = list(consumer.entries)
            assert row_changes(before_switch) == master_changes  # exact, so far
            saved = inst.parser.position
            assert saved is not None and saved.position.timestamp is not None
            last_ms = saved.position.timestamp

            replica.wait_for_replication()
            master.kill()  # a crash: the dump breaks, the detecting SQL fails, the parser switches
            # the promoted replica takes writes; they must follow whatever the switch redelivers
            replica.execute("STOP SLAVE")
            promoted._number = last
            promoted.small(5)
            consumer.until(lambda es: promoted.last_number in delivered_txlog(es))

            assert inst.parser.switches == 1
            assert inst.parser.active_master.address == replica.address
            assert inst.parser.error is None
            cursor = inst.get_cursor()
            assert cursor is not None and cursor.identity.source_address == replica.address

        after_switch = row_changes(consumer.entries[len(before_switch) :])
        new_changes = promoted.changes()
        assert after_switch[len(after_switch) - len(new_changes) :] == new_changes
        replayed = after_switch[: len(after_switch) - len(new_changes)]
        duplicates = len(replayed)
        # every change committed on the master was delivered ...
        delivered = row_changes(consumer.entries)
        assert all(change in delivered for change in master_changes)
        # ... and what the switch delivered again is the tail of the master's changes that lies in the window
        assert duplicates >= 1, "the switch did not fall back in time at all"
        assert replayed == master_changes[len(master_changes) - duplicates :]
        # the window: transactions at or after (last handed-off time - fallback); binlog times are whole seconds, and
        # the search starts at a transaction boundary, so allow one second either side
        window_from = last_ms - FALLBACK_S * 1000
        txns = _transactions(before_switch)
        in_window = sum(len(rows) for end_ms, rows in txns if end_ms >= window_from - 1000)
        surely_in_window = sum(len(rows) for end_ms, rows in txns if end_ms >= window_from + 1000)
        assert surely_in_window <= duplicates <= in_window
        assert duplicates <= len(master_changes) - old  # nothing older than the window came back
        _LOG.warning(
            "standby switch: %d of %d master changes delivered twice (%d..%d in the %d s fallback window)",
            duplicates,
            len(master_changes),
            surely_in_window,
            in_window,
            FALLBACK_S,
        )
    finally:
        workload.close()
        promoted.close()
