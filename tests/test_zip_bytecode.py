"""``canal.spark.zip_bytecode``: pyspark's zips get each module's bytecode beside its source, which zipimport loads
without compiling; a zip with bytecode is left alone, and a module that does not compile stays source."""

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
            "pkg/data.txt": "not a module",
        },
    )
    assert _imported_from(archive, "pkg.mod").splitlines()[0].endswith("pkg.zip/pkg/mod.py")  # source: compiled
    assert add_bytecode(archive) == 2  # pkg/__init__ and pkg/mod; broken does not compile, tests are skipped
    with zipfile.ZipFile(archive) as zin:
        names = set(zin.namelist())
        assert zin.read("pkg/data.txt") == b"not a module" and zin.read("pkg/mod.py") == b"VALUE = sum(range(5))\n"
    assert {"pkg/__init__.pyc", "pkg/mod.pyc"} <= names and "pkg/broken.pyc" not in names
    assert "pkg/tests/test_x.pyc" not in names
    lines = _imported_from(archive, "pkg.mod").splitlines()
    assert lines == [str(archive / "pkg" / "mod.pyc"), "10"]  # loaded from the bytecode, the same module
    before = archive.read_bytes()
    assert add_bytecode(archive) == 0 and archive.read_bytes() == before  # holds bytecode already: left alone


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
    assert again.stdout.splitlines() == ["one.zip: holds bytecode already", "two.zip: holds bytecode already"]
    assert _imported_from(zips[1], "two").splitlines() == [str(zips[1] / "two" / "__init__.pyc"), "2"]
