"""The README's install lines give what its examples need, and a feature whose extra is missing says which to
install.

The mirror quick start ran ``current_duckdb`` and ``current_polars`` with the install line ``pycanal[spark]``, which
brings neither (they are the ``query`` extra's), and failed with a bare ``ModuleNotFoundError``. Here it runs in a
process where only what its install line's extras bring can be imported.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from canal.errors import MissingExtraError

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
IMPORT_NAMES = {"prometheus-client": "prometheus_client"}
"""Distribution names whose module is named otherwise."""
EXTRAS_OF_FEATURES = ("lake", "spark", "prometheus", "query")
"""The extras whose packages pycanal imports (pipelines, docs and dev are tools)."""


def extras() -> dict[str, set[str]]:
    """Extra -> the modules of its packages."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    out = {}
    for extra in EXTRAS_OF_FEATURES:
        names = {re.split(r"[<>=!\[;]", spec)[0].strip() for spec in project["optional-dependencies"][extra]}
        out[extra] = {IMPORT_NAMES.get(name, name) for name in names}
    return out


def not_installed(modules: list[str]) -> str:
    """Python that makes ``modules`` (and their submodules) fail to import, as when they are not installed."""
    return textwrap.dedent(
        f"""
        import importlib.abc
        import sys

        class NotInstalled(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path, target=None):
                if name.partition(".")[0] in {set(modules)!r}:
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
                return None

        sys.meta_path.insert(0, NotInstalled())
        """
    )


def section(title: str) -> str:
    text = README.read_text()
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : None if end < 0 else end]


def test_the_mirror_quick_start_runs_with_the_extras_its_install_line_names(tmp_path: Path) -> None:
    mirror = section("Quick start: a Delta table that stays equal to the source")
    install = re.compile(r"pip install\s+'pycanal\[([\w,]+)\]'")
    line = install.search(mirror) or install.search(README.read_text())  # its own line, else the README's first
    assert line is not None, "the README names no install line"
    named = set(line.group(1).split(","))
    modules = extras()
    allowed = set().union(*(modules[extra] for extra in named))
    blocked = sorted(set().union(*modules.values()) - allowed)
    code = re.search(r"```python\n(.*?)```", mirror, re.S)
    assert code is not None
    script = tmp_path / "quick_start.py"
    script.write_text(not_installed(blocked) + code.group(1))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, f"with pycanal[{line.group(1)}] only:\n{done.stderr[-2000:]}"
    assert "{'id': 2, 'qty': 0}" in done.stdout


def test_a_missing_extra_is_a_typed_error_naming_it(tmp_path: Path) -> None:
    script = tmp_path / "missing.py"
    script.write_text(
        not_installed(["duckdb", "polars"])
        + textwrap.dedent(
            """
            from canal.errors import MissingExtraError
            from canal.spark import current_duckdb, current_polars
            for read in (current_duckdb, current_polars):
                try:
                    read("/nowhere")
                except MissingExtraError as exc:
                    print(type(exc).__name__, exc.extra, exc)
            """
        )
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "MissingExtraError query current_duckdb needs duckdb: pip install 'pycanal[query]'",
        "MissingExtraError query current_polars needs polars: pip install 'pycanal[query]'",
    ]
    assert issubclass(MissingExtraError, ImportError)  # code catching ImportError still does


def test_the_extras_are_read() -> None:
    found = extras()
    assert {"duckdb", "polars"} == found["query"] and "deltalake" in found["lake"] and "pyspark" in found["spark"]
    with pytest.raises(KeyError):
        extras()["nope"]
