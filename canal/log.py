"""Logging with the destination in every record.

Every component that belongs to a destination logs through :func:`destination_logger`; each record then carries
``record.destination`` (for formatters and filters) and its message starts with ``[destination]``.
Nothing on the hot path logs per row or per entry.
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from typing import Any


class DestinationAdapter(logging.LoggerAdapter[logging.Logger]):
    """A logger adapter that stamps the destination on every record."""

    def __init__(self, logger: logging.Logger, destination: str) -> None:
        super().__init__(logger, {"destination": destination})
        self.destination = destination

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        extra = dict(kwargs.get("extra") or {})
        extra.setdefault("destination", self.destination)
        kwargs["extra"] = extra
        return f"[{self.destination}] {msg}", kwargs


def destination_logger(module: str, destination: str) -> DestinationAdapter:
    """The logger of ``module`` (pass ``__name__``) bound to ``destination``."""
    return DestinationAdapter(logging.getLogger(module), destination)
