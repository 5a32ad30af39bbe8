#!/usr/bin/env bash
# Builds the documentation site into site/ (offline; warnings are errors). Extra arguments go to mkdocs build.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --site-dir site "$@"
