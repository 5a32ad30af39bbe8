"""The capture the mirror tests run: one test database's tables from a binlog position, with a file meta."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from canal.config import InstanceConfig, StoreConfig
from canal.testing.plugin import MariaDBDatabase


def capture_config(
    db: MariaDBDatabase,
    meta_dir: Path,
    start: Sequence[Any],
    destination: str,
    *,
    schema: str | None = None,
    **settings: Any,
) -> InstanceConfig:
    """Capture of the tables of ``schema`` (default: ``db``'s database) on ``db``'s server from ``start``
    (``(journal, position)``), meta files under ``meta_dir``; ``settings`` are further :class:`InstanceConfig`
    fields."""
    return InstanceConfig(
        destination=destination,
        master=db.master(start),
        filter_regex=rf"{schema or db.database}\..*",
        store=StoreConfig(batch_mode="ITEMSIZE"),
        meta_mode="file",
        meta_dir=str(meta_dir),
        **settings,
    )
