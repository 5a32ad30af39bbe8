"""README.md stays a short front page: the two commands first, within ~150 lines. Its examples run with every other
page's in tests/test_docs.py."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def test_readme_starts_with_the_two_commands() -> None:
    first = BLOCK.search(README.read_text())
    assert first is not None and first.start() == 0
    lines = [line.split("#")[0].strip() for line in first.group(2).splitlines()]
    assert lines == ["bash scripts/demo.sh", "bash scripts/test.sh"]


def test_readme_is_short() -> None:
    assert len(README.read_text().splitlines()) <= 150
