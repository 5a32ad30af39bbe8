"""Every example in README.md runs: plain Python blocks are executed, test-file blocks run under pytest, and every
documented command line parses."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from canal.cli import main as canal_main

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def blocks(language: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(README.read_text()) if lang == language]


def test_readme_starts_with_the_two_commands() -> None:
    first = BLOCK.search(README.read_text())
    assert first is not None and first.start() == 0
    lines = [line.split("#")[0].strip() for line in first.group(2).splitlines()]
    assert lines == ["bash scripts/demo.sh", "bash scripts/test.sh"]


@pytest.mark.parametrize("code", [b for b in blocks("python") if "def test_" not in b])
def test_python_example_runs(code: str, capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(code, str(README), "exec"), {"__name__": "readme_example"})
    assert capsys.readouterr().out  # each example shows something


@pytest.mark.integration
@pytest.mark.parametrize("code", [b for b in blocks("python") if "def test_" in b])
def test_test_file_example_passes_under_pytest(code: str, tmp_path: Path) -> None:
    (tmp_path / "test_readme_example.py").write_text(code)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    "command",
    [line.split("#")[0].strip() for b in blocks("bash")[1:] for line in b.splitlines() if line.startswith("canal ")],
)
def test_documented_command_lines_parse(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    words = shlex.split(command)[1:]
    subcommand = [w for w in words if not w.startswith("-")][:2]
    # the documented subcommand exists (--help answers 0 before anything runs) and shows its options
    assert canal_main([*words, "--help"]) == 0
    out = capsys.readouterr().out
    assert subcommand[0] in out
    assert all(option in out for option in words if option.startswith("--"))
