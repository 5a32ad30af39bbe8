"""The spatial column type names, shared by the row decoder and the fake server so both name them alike."""

from __future__ import annotations

from typing import Final

# Indexed by the geometry type code a table map's optional metadata carries (0 = plain GEOMETRY).
GEOMETRY_TYPE_NAMES: Final = (
    "geometry",
    "point",
    "linestring",
    "polygon",
    "multipoint",
    "multilinestring",
    "multipolygon",
    "geometrycollection",
)
