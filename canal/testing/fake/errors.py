"""The fake server's own error: the test drove it wrongly."""

from __future__ import annotations

from canal.errors import CanalError

__all__ = ["FakeMysqlError"]


class FakeMysqlError(CanalError, ValueError):
    """A test drove the fake wrongly: SQL it cannot read, an unknown table or column, a value that does not fit."""
