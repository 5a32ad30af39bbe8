#!/usr/bin/env bash
# Lint, type-check and run the whole test suite (unit and integration). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
echo "== ruff check" >&2
.venv/bin/ruff check canal tests benchmarks examples
echo "== mypy (strict)" >&2
.venv/bin/mypy canal
echo "== pytest" >&2
# two worker processes, a test file each at a time (module fixtures stay whole), each with its own private MariaDB,
# ZooKeeper and SparkSession: most tests wait on those servers and processes, so two halve the run on 2 cores. Files
# go to the workers in collection order, the slowest first (tests/conftest.py), not by their number of tests
.venv/bin/python -m pytest -q -n "${PYCANAL_TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder "$@"
