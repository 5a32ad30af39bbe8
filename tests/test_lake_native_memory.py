"""canal.lake sets deltalake's allocator to give freed memory back at once -- unless told otherwise or too late."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from canal.lake.native_memory import ALLOCATOR_SETTING, PURGE_AT_ONCE

ROOT = Path(__file__).resolve().parent.parent


def _setting_after(code: str, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k != ALLOCATOR_SETTING}
    proc = subprocess.run(
        [sys.executable, "-c", code + f"\nimport os; print(os.environ.get({ALLOCATOR_SETTING!r}))"],
        capture_output=True,
        text=True,
        check=True,
        env={**environ, "PYTHONPATH": str(ROOT), **env},
    )
    return proc.stdout.strip().splitlines()[-1]


def test_importing_the_mirror_sets_the_allocator_before_deltalake_loads() -> None:
    code = "import sys; import canal.spark; assert 'deltalake' not in sys.modules; import canal.lake"
    assert _setting_after(code) == PURGE_AT_ONCE


def test_a_setting_of_the_environment_wins() -> None:
    assert _setting_after("import canal.lake", **{ALLOCATOR_SETTING: "narenas:2"}) == "narenas:2"


def test_nothing_is_set_once_deltalake_is_loaded() -> None:
    # the allocator read its settings when the extension loaded: a setting now would only mislead
    assert _setting_after("import deltalake; import canal.lake") == "None"
