"""Every committed run of a benchmark, from the git history of its result file.

``benchmarks/results/<benchmark>.json`` holds the committed run of the code at that commit; each earlier commit of
the file holds an earlier run. This prints one line per commit that changed the file, newest first: the commit, the
run's time (``when``), and the keys asked for (a dotted key reaches into the document: ``many_tables.steady_ratio``;
a key the run did not have prints ``-``). The guides quote the current file only; this is where the runs before it
are, with the commit that says what changed (``git show <commit>``).

    python benchmarks/history.py bench_spark whole_rows_per_s steady_rows_per_s cluster_local_ratio
    python benchmarks/history.py bench_tables many_tables.many_tables_ratio many_tables.steady_ratio

``benchmarks/results/HISTORY.md`` keeps what no result file holds: runs that were not committed and A/B comparisons.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from result_file import result_path

ROOT = Path(__file__).resolve().parent.parent


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def runs(benchmark: str) -> Iterator[tuple[str, dict[str, Any] | None]]:
    """(commit, the result document at it; None where it does not read as JSON), newest first."""
    path = result_path(benchmark).relative_to(ROOT).as_posix()
    for commit in _git("log", "--format=%h", "--", path).split():
        try:
            document = json.loads(_git("show", f"{commit}:{path}"))
        except (subprocess.CalledProcessError, json.JSONDecodeError):
            yield commit, None  # deleted at that commit, or not JSON
            continue
        yield commit, document if isinstance(document, dict) else None


def value(document: dict[str, Any], key: str) -> Any:
    """The value at a dotted ``key``; None where the document has none."""
    found: Any = document
    for part in key.split("."):
        if not isinstance(found, dict) or part not in found:
            return None
        found = found[part]
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("benchmark", help="the result file's name without .json: bench_spark, bench_tables, ...")
    parser.add_argument("keys", nargs="+", help="keys of the result document (dotted for nested ones)")
    args = parser.parse_args(argv)
    print("\t".join(["commit", "when", *args.keys]))
    for commit, document in runs(args.benchmark):
        if document is None:
            print("\t".join([commit, "(no JSON)", *("-" for _ in args.keys)]))
            continue
        found = [value(document, key) for key in args.keys]
        print("\t".join([commit, str(document.get("when", "-")), *("-" if v is None else str(v) for v in found)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
