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
.venv/bin/python -m pytest -q "$@"
