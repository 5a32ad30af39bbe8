"""``canal.spark.zip_bytecode``: pyspark's zips get each module's bytecode beside its source, which zipimport loads
without compiling, and lose their test suites; a zip with bytecode and no test suite is left alone, and a module that
does not compile stays source."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from canal.spark.zip_bytecode import add_bytecode


def _zip(path: Path, files: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for name, text in files.items():
            out.writestr(name, text)
    return path


def _imported_from(archive: Path, module: str) -> str:
    code = f"import {module}; print({module}.__file__); print({module}.VALUE)"
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(archive), "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def test_modules_load_from_the_bytecode_added_and_the_sources_stay(tmp_path: Path) -> None:
    archive = _zip(
        tmp_path / "pkg.zip",
        {
            "pkg/__init__.py": "VALUE = 'package'\n",
            "pkg/mod.py": "VALUE = sum(range(5))\n",
            "pkg/broken.py": "def (:\n",
            "pkg/tests/test_x.py": "VALUE = 1\n",
            "pkg/tests/data/input.txt": "a test's data",
            "pkg/testsuite.py": "VALUE = 'not a test directory'\n",
            "pkg/data.txt": "not a module",
        },
    )
    assert _imported_from(archive, "pkg.mod").splitlines()[0].endswith("pkg.zip/pkg/mod.py")  # source: compiled
    # pkg/__init__, pkg/mod and pkg/testsuite; broken does not compile, the tests are left out
    assert add_bytecode(archive) == 3
    with zipfile.ZipFile(archive) as zin:
        names = set(zin.namelist())
        assert zin.read("pkg/data.txt") == b"not a module" and zin.read("pkg/mod.py") == b"VALUE = sum(range(5))\n"
    assert {"pkg/__init__.pyc", "pkg/mod.pyc", "pkg/testsuite.py", "pkg/testsuite.pyc"} <= names
    assert "pkg/broken.pyc" not in names and "pkg/broken.py" in names
    assert not {name for name in names if name.startswith("pkg/tests/")}  # the test suite is gone
    lines = _imported_from(archive, "pkg.mod").splitlines()
    assert lines == [str(archive / "pkg" / "mod.pyc"), "10"]  # loaded from the bytecode, the same module
    before = archive.read_bytes()
    assert add_bytecode(archive) == 0 and archive.read_bytes() == before  # holds bytecode already: left alone


def test_a_zip_with_bytecode_and_its_test_suites_is_written_again_without_them(tmp_path: Path) -> None:
    """A zip an earlier version of the tool gave bytecode and kept the tests of: its test suites cost each new worker
    a reread of their directory entries (module docstring), so it is written again, its bytecode compiled anew."""
    archive = _zip(
        tmp_path / "pkg.zip",
        {
            "pkg/__init__.py": "VALUE = 'package'\n",
            "pkg/__init__.pyc": "stale bytes, not bytecode",
            "pkg/tests/__init__.py": "",
            "pkg/tests/test_x.py": "VALUE = 1\n",
        },
    )
    assert add_bytecode(archive) == 1
    with zipfile.ZipFile(archive) as zin:
        assert sorted(zin.namelist()) == ["pkg/__init__.py", "pkg/__init__.pyc"]
    assert _imported_from(archive, "pkg").splitlines() == [str(archive / "pkg" / "__init__.pyc"), "package"]
    assert add_bytecode(archive) == 0


def test_a_failed_rewrite_leaves_the_zip_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = _zip(tmp_path / "pkg.zip", {"pkg/__init__.py": "VALUE = 1\n"})
    before = archive.read_bytes()

    def fail(*_args: object, **_kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        add_bytecode(archive)
    assert archive.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["pkg.zip"]  # no temporary file left


def test_the_command_the_cluster_guide_gives(tmp_path: Path) -> None:
    """``python -m canal.spark.zip_bytecode ZIP...``, as docs/guides/cluster.md runs it on each node."""
    zips = [_zip(tmp_path / f"{name}.zip", {f"{name}/__init__.py": "VALUE = 2\n"}) for name in ("one", "two")]
    command = [sys.executable, "-m", "canal.spark.zip_bytecode", *map(str, zips)]
    first = subprocess.run(command, capture_output=True, text=True, check=True)
    assert first.stdout.splitlines() == ["one.zip: 1 modules compiled", "two.zip: 1 modules compiled"]
    again = subprocess.run(command, capture_output=True, text=True, check=True)
    left = [f"{name}.zip: holds bytecode and no test suite already" for name in ("one", "two")]
    assert again.stdout.splitlines() == left
    assert _imported_from(zips[1], "two").splitlines() == [str(zips[1] / "two" / "__init__.pyc"), "2"]
