"""How a ``fake://NAME`` address finds its fake: the process-wide registry of FakeMysql servers, and the
:class:`~canal.parse.source.BinlogSource` a parser reads them through. Importing this package registers the
``fake://`` scheme with the source registry (:func:`canal.parse.sources.register_source_scheme`)."""

from __future__ import annotations

import contextlib
import re
import threading
from typing import TYPE_CHECKING, Any, Final

from canal.errors import SourceUnreachableError
from canal.parse.source import BinlogFile, DumpRequest
from canal.position import EntryPosition
from canal.schema import SchemaCatalog

if TYPE_CHECKING:
    from canal.testing.fake.dump import FakeDump
    from canal.testing.fake.server import FakeMysql

__all__ = ["NAME_PATTERN", "FakeBinlogSource", "fake_source", "lookup_fake", "register", "unregister"]

NAME_PATTERN: Final = re.compile(r"^[A-Za-z0-9_.\-]+$")
_REGISTRY: dict[str, FakeMysql] = {}
_REGISTRY_LOCK = threading.Lock()


def register(fake: FakeMysql) -> FakeMysql | None:
    """Register ``fake`` under its name; returns the fake it replaced, if any."""
    with _REGISTRY_LOCK:
        old = _REGISTRY.get(fake.name)
        _REGISTRY[fake.name] = fake
    return old if old is not fake else None


def unregister(fake: FakeMysql) -> None:
    """Remove ``fake`` from the registry if it is still the one registered under its name."""
    with _REGISTRY_LOCK:
        if _REGISTRY.get(fake.name) is fake:
            del _REGISTRY[fake.name]


class FakeBinlogSource:
    """The :class:`~canal.parse.source.BinlogSource` of a :class:`FakeMysql`.

    Built from a fake (``fake.source()``) it talks to that object; built from an address (``fake_source("fake://shop")``)
    it looks the name up in the registry on every call, so a fake registered later, or re-registered, is found, and an
    unknown name fails like an unreachable server (SourceUnreachableError, errno 2003).
    """

    def __init__(self, target: FakeMysql | str) -> None:
        if not isinstance(target, str):
            self._bound: FakeMysql | None = target
            self._name = target.name
        else:
            self._bound = None
            self._name = _name_of(target)
        self._generation = 0
        self._is_open = False
        self._dumps: list[FakeDump] = []

    def __repr__(self) -> str:
        return f"FakeBinlogSource({self.address!r})"

    @property
    def fake(self) -> FakeMysql:
        return self._bound if self._bound is not None else lookup_fake(self._name)

    @property
    def address(self) -> str:
        return f"fake://{self._name}"

    @property
    def share_key(self) -> str:
        """What a read of this fake is valid for in the process: its address (destinations of one fake may share a
        reader, :mod:`canal.parse.shared`, as those of one server do)."""
        return self.address

    @property
    def is_mariadb(self) -> bool:
        return self.fake.is_mariadb

    @property
    def is_open(self) -> bool:
        return self._is_open

    def open(self) -> None:
        fake = self.fake
        with fake._lock:
            fake._connect_attempts += 1
            fake._faults.check_connect(fake.address)
        self._is_open = True

    def close(self) -> None:
        self._is_open = False
        self._generation += 1
        for dump in list(self._dumps):
            with dump._fake._cond:
                dump._fake._cond.notify_all()

    def _forget(self, dump: FakeDump) -> None:
        with contextlib.suppress(ValueError):
            self._dumps.remove(dump)

    def server_id(self) -> int:
        fake = self.fake
        fake._faults.check_up(fake.address)
        return fake.server_id()

    def master_status(self) -> EntryPosition:
        fake = self.fake
        fake._faults.check_up(fake.address)
        return fake.master_status()

    def binlog_files(self) -> list[BinlogFile]:
        fake = self.fake
        fake._faults.check_up(fake.address)
        return fake.binlog_files()

    def dump(self, request: DumpRequest) -> FakeDump:
        dump = self.fake._open_dump(self, request)
        self._dumps.append(dump)
        return dump

    @property
    def logs_column_names(self) -> bool:
        """A fake's table maps always name their columns (``binlog_row_metadata=FULL``)."""
        return True

    @property
    def lower_case_names(self) -> bool:
        """A fake keeps names as typed (``lower_case_table_names=0``)."""
        return False

    @property
    def system_time_zone(self) -> str | None:
        """A fake's statements log no time zone: its system's is UTC."""
        return "UTC"

    def schema_catalog(self, *, objects: bool = False) -> SchemaCatalog:
        """The fake's table layouts now (its catalog is the schema history's), and its views, triggers and routines
        (it keeps those its DDL made)."""
        return self.fake.schema_catalog()

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        return self.fake.query(sql)


def _name_of(address: str) -> str:
    name = address[len("fake://") :] if address.startswith("fake://") else address
    name = name.rstrip("/")
    if not NAME_PATTERN.match(name):
        raise SourceUnreachableError(f"{address!r} is not a fake address (expected fake://NAME)", errno=2003)
    return name


def lookup_fake(address: str) -> FakeMysql:
    """The FakeMysql registered in this process under ``fake://NAME`` (or NAME).

    Raises SourceUnreachableError (errno 2003) when none is.
    """
    name = _name_of(address)
    with _REGISTRY_LOCK:
        fake = _REGISTRY.get(name)
        known = sorted(_REGISTRY)
    if fake is None:
        raise SourceUnreachableError(
            f"Can't connect to fake://{name}: no FakeMysql of that name in this process (registered: "
            f"{', '.join(known) or 'none'})",
            errno=2003,
        )
    return fake


def fake_source(address: str) -> FakeBinlogSource:
    """A BinlogSource for a ``fake://NAME`` address (the name is resolved on each connect, see FakeBinlogSource)."""
    return FakeBinlogSource(address)
