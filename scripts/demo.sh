#!/usr/bin/env bash
# The end-to-end demo: private MariaDB and ZooKeeper, started and stopped by the demo itself.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
exec .venv/bin/python -m canal.demo "$@"
