"""The spatial column type names, shared by the row decoder and the fake server so both name them alike.

They belong to the SQL reader's type names (:mod:`canal.sql.types`), which reads them in column definitions.
"""

from __future__ import annotations

from canal.sql.types import GEOMETRY_TYPE_NAMES

__all__ = ["GEOMETRY_TYPE_NAMES"]
