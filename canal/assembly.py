"""The one place that composes a destination's parts from an :class:`~canal.config.InstanceConfig`.

canal's ``CanalInstanceWithManager.init*`` methods: meta manager, log-position manager, store, sink and parser (or
the parsers of a group), wired so that the parser hands off into the sink, the sink puts into the store, and the
parser's restart point falls back to the slowest consumer cursor in the meta. :class:`~canal.instance.Instance`
builds its parts here and nothing else reaches into them: the HA server passes its ZooKeeper client and fence, the
Spark source a start cursor, group mode its member masters.

A start cursor (``start``) makes the instance begin right after it whatever the meta holds: the parser's first dump
starts there, and :meth:`Instance.start <canal.instance.Instance.start>` writes it as the default client's cursor
(a failed write fails the start), so a restart of this process resumes from it too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from canal.config import InstanceConfig, MasterConfig, MetaMode
from canal.errors import ConfigError
from canal.log import destination_logger
from canal.meta import FileMetaManager, MemoryMetaManager, MetaManager, PeriodMixedMetaManager, ZooKeeperMetaManager
from canal.meta.fence import Fence
from canal.parse.log_position import (
    FailbackLogPositionManager,
    LogPositionManager,
    MemoryLogPositionManager,
    MetaLogPositionManager,
)
from canal.parse.parser import EventParser, SourceFactory
from canal.parse.source import RowsForm
from canal.parse.sources import source_factory as default_source_factory
from canal.position import LogPosition
from canal.schema.history import SchemaHistory
from canal.sink import EntrySink, GroupSink
from canal.sink.group_sink import MemberSink
from canal.snapshot.merge import SnapshotMerge
from canal.store import MemoryEventStore

ErrorCallback = Callable[[BaseException], None]


def build_meta(config: InstanceConfig, *, zk: Any = None, fence: Fence | None = None) -> MetaManager:
    """The meta manager ``config.meta_mode`` names; ``zk`` is a started kazoo client to share (else one is made
    from ``config.zk_hosts``), ``fence`` guards every ZooKeeper write (the HA server's activation token).

    With ``zk`` (the HA server) the meta always lives in ZooKeeper, where the next owner finds it: ``zookeeper``
    as configured, any other mode as ``period-mixed`` (canal's default for a cluster).
    """
    mode = config.meta_mode
    if zk is not None and mode not in (MetaMode.ZOOKEEPER, MetaMode.PERIOD_MIXED):
        mode = MetaMode.PERIOD_MIXED
    if mode is MetaMode.MEMORY:
        return MemoryMetaManager()
    if mode is MetaMode.FILE:
        assert config.meta_dir is not None  # checked by InstanceConfig
        return FileMetaManager(Path(config.meta_dir), flush_period_s=config.flush_period_s)
    if zk is None:
        assert config.zk_hosts is not None  # checked by InstanceConfig
        zk = config.zk_hosts
    zookeeper = ZooKeeperMetaManager(zk, fence=fence, auth=config.zk_auth)
    if mode is MetaMode.ZOOKEEPER:
        return zookeeper
    return PeriodMixedMetaManager(zookeeper, flush_period_s=config.flush_period_s)


def build_schema_history(config: InstanceConfig, meta: MetaManager) -> SchemaHistory | None:
    """The destination's schema history, persisted with its meta (None: ``schema_history.enable`` is off)."""
    settings = config.schema_history
    if not settings.enable:
        return None
    return SchemaHistory(
        meta.schema_history_store(config.destination),
        snapshot_every=settings.snapshot_ddls,
        snapshot_interval_s=settings.snapshot_interval_h * 3600,
        expire_s=settings.snapshot_expire_h * 3600,
        destination=config.destination,
    )


def member_destination(destination: str, index: int) -> str:
    """The name member ``index`` of a group instance uses for its parser's log position and its log records."""
    return f"{destination}#member{index}"


class ParserGroup:
    """The parsers of a group instance (:meth:`Instance.group <canal.instance.Instance.group>`) behind the
    one-parser face the Instance uses.

    Member ``i`` dumps ``members[i]`` on its own thread with its own restart point (``member_destination(dest, i)``
    in the shared log-position manager) and hands off through ``GroupSink.member(i)``; the group sink merges the
    hand-offs in time order into the instance's entry sink, keeping transactions whole.
    """

    def __init__(
        self,
        config: InstanceConfig,
        members: Sequence[MasterConfig],
        source_factory: SourceFactory | None,
        downstream: MemberSink,
        log_positions: LogPositionManager,
        on_error: ErrorCallback,
        meta: MetaManager | None = None,
    ) -> None:
        if not members:
            raise ConfigError("a group instance needs at least one member master", key="members")
        self.members = tuple(members)
        self.group_sink = GroupSink(downstream, len(self.members), heartbeat_clock=lambda: int(time.time() * 1000))
        self.parsers: list[EventParser] = []
        self.rows_form = RowsForm()  # one form for every member's dumps
        for index, master in enumerate(self.members):
            slave_id = None if config.slave_id is None else config.slave_id + index
            member_config = attrs.evolve(config, master=master, standby=None, slave_id=slave_id)
            name = member_destination(config.destination, index)
            # each member server has its own binlog, so its own schema history (kept under the member's name)
            history = (
                None if meta is None else build_schema_history(attrs.evolve(member_config, destination=name), meta)
            )
            self.parsers.append(
                EventParser(
                    name,
                    member_config,
                    source_factory or default_source_factory(member_config),
                    self.group_sink.member(index),
                    log_positions,
                    on_error=on_error,
                    schema_history=history,
                )
            )
            self.parsers[-1].rows_form = self.rows_form

    def start(self) -> None:
        self.group_sink.reset()
        for parser in self.parsers:
            parser.start()

    def stop(self) -> None:
        self.group_sink.stop()  # release members waiting for their turn
        for parser in self.parsers:
            parser.stop()

    @property
    def error(self) -> BaseException | None:
        """The first member's fatal error: the merge cannot go on without that member."""
        return next((p.error for p in self.parsers if p.error is not None), None)

    @property
    def last_error(self) -> BaseException | None:
        return next((p.last_error for p in self.parsers if p.last_error is not None), None)

    @property
    def reconnects(self) -> int:
        return sum(p.reconnects for p in self.parsers)

    @property
    def fatal_errors(self) -> int:
        return sum(p.fatal_errors for p in self.parsers)

    @property
    def connected(self) -> bool:
        """Whether every member's dump reads from its server: the merge waits for a member that does not."""
        return all(p.connected for p in self.parsers)

    @property
    def read_through_ms(self) -> int | None:
        """The earliest of the members' (the merge holds what is later until every member has read that far)."""
        times = [p.read_through_ms for p in self.parsers]
        return None if any(t is None for t in times) else min(t for t in times if t is not None)


@attrs.define(slots=True)
class InstanceParts:
    """What :func:`assemble` built. ``own_meta``: the meta was built here, so the instance stops it."""

    meta: MetaManager
    own_meta: bool
    log_positions: LogPositionManager
    store: MemoryEventStore
    sink: EntrySink
    parser: EventParser | ParserGroup
    start: LogPosition | None


def assemble(
    config: InstanceConfig,
    on_error: ErrorCallback,
    *,
    start: LogPosition | None = None,
    meta: MetaManager | None = None,
    log_positions: LogPositionManager | None = None,
    source_factory: SourceFactory | None = None,
    members: Sequence[MasterConfig] | None = None,
    zk: Any = None,
    fence: Fence | None = None,
) -> InstanceParts:
    """Compose one destination's parts (see the module docstring). ``meta`` / ``log_positions`` are injected
    parts (tests, tools); otherwise they follow the config. ``on_error`` receives a parser's fatal error."""
    if start is not None and members is not None:
        raise ConfigError("a group instance cannot start at one cursor: it names a position on one member only")
    own_meta = meta is None
    if meta is None:
        meta = build_meta(config, zk=zk, fence=fence)
    if log_positions is None:
        if members is not None:
            # a consumer cursor is a position on one member only: not a restart point
            log_positions = MemoryLogPositionManager()
        else:
            # canal's choice for the embedded server: restart where the parser last handed off while this process
            # lives, else where the slowest subscribed client acked
            memory = MemoryLogPositionManager()
            if start is not None:
                memory.start()
                memory.persist_position(config.destination, start)
            log_positions = FailbackLogPositionManager(memory, MetaLogPositionManager(meta))
    elif start is not None:
        raise ConfigError("give either a start cursor or a log-position manager, not both")
    store_cfg = config.store
    store = MemoryEventStore(
        buffer_size=store_cfg.buffer_size,
        memory_unit=store_cfg.memory_unit,
        batch_mode=store_cfg.batch_mode,
        ddl_isolation=store_cfg.ddl_isolation,
        destination=config.destination,
    )
    sink = EntrySink(
        store, destination=config.destination, filter_transaction_entry=config.filter_flags.transaction_entry
    )
    if config.transaction_size > store_cfg.buffer_size:
        # a hand-off is put whole, so one larger than the store could never be put: a transaction reaches a store
        # smaller than it in parts of the store's size, which the consumer acks one after the other
        destination_logger(__name__, config.destination).info(
            "transaction_size %d exceeds the store's buffer_size %d: large transactions are handed off in parts of %d",
            config.transaction_size,
            store_cfg.buffer_size,
            store_cfg.buffer_size,
        )
        config = attrs.evolve(config, transaction_size=store_cfg.buffer_size)
    parser: EventParser | ParserGroup
    if members is None:
        parser = EventParser(
            config.destination,
            config,
            source_factory or default_source_factory(config),
            sink.sink,
            log_positions,
            on_error=on_error,
            schema_history=build_schema_history(config, meta),
        )
        parser.merge = SnapshotMerge(config.snapshot.watermark)
        parser.empty_transactions = sink.drops_empty  # transactions a shared reader leaves out count against it
        parser.room = sink.room  # a shared reader may then take its events on its own thread (canal.parse.shared)
    else:
        parser = ParserGroup(config, members, source_factory, sink.sink, log_positions, on_error, meta)
    return InstanceParts(meta, own_meta, log_positions, store, sink, parser, start)
