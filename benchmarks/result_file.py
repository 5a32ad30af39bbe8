"""Where the benchmarks keep their figures: one JSON document per benchmark in ``benchmarks/results/``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def result_path(benchmark: str) -> Path:
    return RESULTS_DIR / f"{benchmark}.json"


def write_result(benchmark: str, document: Mapping[str, Any], *, sort_keys: bool = False) -> Path:
    """Write ``document`` as ``results/<benchmark>.json`` (indented, newline-terminated, so diffs stay readable)."""
    path = result_path(benchmark)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, sort_keys=sort_keys) + "\n")
    return path
