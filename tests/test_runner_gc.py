"""The garbage collector of the process Spark runs the ``canal`` source's reader in (:mod:`canal.spark.runner_gc`):
tuned there, once, as the ``reader.gc.threshold`` option says, and nowhere else; a bad value is a typed error before
anything exists. Tuning runs in fresh interpreters: the collector is this process's, the test suite's."""

from __future__ import annotations

import gc
import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from canal.spark.runner_gc import RUNNER_MODULE
from canal.spark.source_options import SparkSourceError

_PROBE = textwrap.dedent(
    """
    import gc, json, sys
    from canal.spark.runner_gc import RUNNER_MODULE, main_module, tune_runner_gc

    before = gc.get_threshold()
    running = sys.argv[1] if sys.argv[1] != "-" else None
    first = tune_runner_gc(int(sys.argv[2]), running)
    again = tune_runner_gc(int(sys.argv[2]) * 2, running)
    print(json.dumps({"before": before, "after": gc.get_threshold(), "first": first, "again": again,
                      "frozen": gc.get_freeze_count(), "main": main_module()}))
    """
)


def _probe(tmp_path: Path, running: str, threshold: int, *, as_module: str | None = None) -> dict[str, object]:
    """What the probe above reports, run as a script or (``as_module``) with ``python -m``."""
    (tmp_path / "probe_mod.py").write_text(_PROBE)
    command = [sys.executable, "-m", as_module] if as_module else [sys.executable, str(tmp_path / "probe_mod.py")]
    done = subprocess.run(
        [*command, running, str(threshold)], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=True
    )
    found: dict[str, object] = json.loads(done.stdout)
    return found


def test_the_readers_process_gets_the_threshold_once_with_its_imports_frozen(tmp_path: Path) -> None:
    found = _probe(tmp_path, RUNNER_MODULE, 50_000)
    before, after = found["before"], found["after"]
    assert isinstance(before, list) and isinstance(after, list)
    assert found["first"] is True and after == [50_000, *before[1:]]  # the older generations' stay Python's
    assert found["frozen"] > 0  # type: ignore[operator]
    assert found["again"] is False  # once a process: a second reader there changes nothing


@pytest.mark.parametrize(("running", "threshold"), [("some_app", 50_000), (RUNNER_MODULE, 0), ("-", 50_000)])
def test_any_other_process_or_a_zero_leaves_the_collector_alone(tmp_path: Path, running: str, threshold: int) -> None:
    found = _probe(tmp_path, running, threshold)
    assert found["first"] is False and found["after"] == found["before"] and found["frozen"] == 0


def test_the_process_is_known_by_the_module_python_runs(tmp_path: Path) -> None:
    """``python -m`` names the module in ``__main__.__spec__``: how the reader knows Spark's process (``-``: this
    process's own name, here the probe's, not the runner's)."""
    found = _probe(tmp_path, "-", 50_000, as_module="probe_mod")
    assert found["main"] == "probe_mod" and found["first"] is False
    # the module Spark runs a Python streaming source in is there, under that name, in the pyspark installed
    pytest.importorskip("pyspark")
    assert importlib.util.find_spec(RUNNER_MODULE) is not None


@pytest.mark.parametrize("text", ["-1", "many", "1.5", ""])
def test_a_bad_threshold_is_a_typed_error_before_anything_exists(tmp_path: Path, text: str) -> None:
    pytest.importorskip("pyspark")
    from canal.spark import sessions
    from canal.spark.source import CanalStreamReader

    options = {"destination": "d", "master.address": "127.0.0.1:3306", "spool.dir": str(tmp_path / "spool")}
    held, collector = dict(sessions._SESSIONS), gc.get_threshold()
    with pytest.raises(SparkSourceError, match=r"reader\.gc\.threshold = .*: expected a positive int or 0"):
        CanalStreamReader({**options, "reader.gc.threshold": text})
    assert not (tmp_path / "spool").exists() and held == sessions._SESSIONS and gc.get_threshold() == collector


def test_good_thresholds_and_a_reader_outside_sparks_process(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    from canal.spark.source import CanalStreamReader

    collector = gc.get_threshold()
    options = {"destination": "d", "master.address": "127.0.0.1:3306", "spool.dir": str(tmp_path / "spool")}
    given = [CanalStreamReader({**options, "reader.gc.threshold": t}).gc_threshold for t in ("0", " 7 ", "50000")]
    assert given == [0, 7, 50_000]
    assert CanalStreamReader(options).gc_threshold == 50_000  # the default
    assert CanalStreamReader({**options, "READER.GC.THRESHOLD": "0"}).gc_threshold == 0  # names match without case
    assert gc.get_threshold() == collector  # the test suite's process is not Spark's reader process
