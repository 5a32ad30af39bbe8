"""``benchmarks/history.py`` lists a benchmark's committed runs from git, newest first: the guides quote the current
result file only, and send readers there for the runs before it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RESULT = "benchmarks/results/bench_spark.json"


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def test_each_commit_of_a_result_file_is_a_row_newest_first() -> None:
    try:
        commits = _git("log", "--format=%h", "--", RESULT).split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    if not commits:
        pytest.skip("the result file has no commit here")
    done = subprocess.run(
        [sys.executable, "benchmarks/history.py", "bench_spark", "whole_rows_per_s", "machine_cpu.cores", "no.such"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    header, *rows = [line.split("\t") for line in done.stdout.splitlines()]
    assert header == ["commit", "when", "whole_rows_per_s", "machine_cpu.cores", "no.such"]
    assert [row[0] for row in rows] == commits
    newest = json.loads(_git("show", f"{commits[0]}:{RESULT}"))
    cores = newest.get("machine_cpu", {}).get("cores")
    assert rows[0] == [commits[0], newest["when"], str(newest["whole_rows_per_s"]), str(cores), "-"]
