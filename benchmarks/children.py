"""A benchmark's measurement in a fresh process of its own script.

The child is told what to measure (the server's address and login among it) on its standard input, not on its
command line, which every user of the machine can read (``ps``); it prints its figures as a JSON line, its last.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _command(script: str, flag: str) -> list[str]:
    return [sys.executable, str(Path(script).resolve()), flag]


def _env(root: Path = ROOT) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(root)}


def run_child(
    script: str, flag: str, spec: Mapping[str, Any], *, timeout: float, what: str, root: Path = ROOT
) -> dict[str, Any]:
    """Run ``script flag`` with ``spec`` on its stdin and return the JSON document of its last line; SystemExit naming
    ``what`` with the end of its stderr when it fails. ``root``: the tree whose ``canal`` the child imports (another
    version's checkout: benchmarks/ab.py)."""
    proc = subprocess.run(
        _command(script, flag),
        input=json.dumps(spec) + "\n",
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_env(root),
    )
    if proc.returncode != 0:
        raise SystemExit(f"{what} failed: {proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def start_child(script: str, flag: str, spec: Mapping[str, Any]) -> subprocess.Popen[str]:
    """Start ``script flag`` with ``spec`` as the first line of its stdin, which stays open (more lines may follow:
    a signal to begin); its stdout a pipe."""
    proc = subprocess.Popen(
        _command(script, flag), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=_env()
    )
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(spec) + "\n")
    proc.stdin.flush()
    return proc


def read_spec() -> dict[str, Any]:
    """In the child: what its parent wrote on the first line of its stdin."""
    spec: dict[str, Any] = json.loads(sys.stdin.readline())
    return spec
