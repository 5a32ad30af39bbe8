"""Where the benchmarks keep their figures: one JSON document per benchmark in ``benchmarks/results/``."""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def result_path(benchmark: str) -> Path:
    return RESULTS_DIR / f"{benchmark}.json"


def environment() -> dict[str, Any]:
    """Where and when a figure was measured (ratios make figures comparable, not machines)."""
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def write_result(benchmark: str, document: Mapping[str, Any], *, sort_keys: bool = False) -> Path:
    """Write ``document`` with :func:`environment` as ``results/<benchmark>.json`` (indented, newline-terminated,
    so diffs stay readable)."""
    path = result_path(benchmark)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**document, **environment()}, indent=2, sort_keys=sort_keys) + "\n")
    return path
