"""Every example in README.md and on every page under docs/ runs, and the documentation site builds with warnings as
errors: plain Python blocks are executed, test-file blocks (holding ``def test_``) run under pytest, every documented
``canal`` command line parses, and the generated configuration reference lists exactly the declared settings."""

from __future__ import annotations

import html
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from xml.etree import ElementTree

import pytest

from canal.cli import main as canal_main

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)


def blocks(language: str) -> list[tuple[str, str]]:
    """(page:index, body) of every ``language`` block on every page."""
    out = []
    for page in PAGES:
        found = [body for lang, body in BLOCK.findall(page.read_text()) if lang == language]
        out += [(f"{page.relative_to(ROOT)}:{i}", body) for i, body in enumerate(found)]
    return out


def _ids(items: list[tuple[str, str]]) -> list[str]:
    return [where for where, _ in items]


EXAMPLES = [b for b in blocks("python") if "def test_" not in b[1]]
TEST_FILES = [b for b in blocks("python") if "def test_" in b[1]]
COMMANDS = [
    (where, line.split("#")[0].strip())
    for where, body in blocks("bash")
    if where != "README.md:0"  # the two commands
    for line in body.splitlines()
    if line.startswith("canal ")
]


@pytest.mark.parametrize("code", [c for _, c in EXAMPLES], ids=_ids(EXAMPLES))
def test_python_example_runs(code: str, capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(code, "doc_example", "exec"), {"__name__": "doc_example"})
    assert capsys.readouterr().out  # each example shows something


@pytest.fixture(scope="module")
def test_file_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, list[str]], str]:
    """Every test-file example, each in a file of its own, run by one pytest process (one MariaDB and one Spark
    session for them all, as in a user's suite): each file's test outcomes (``passed``, ``failed``, ...) and the
    run's output."""
    work = tmp_path_factory.mktemp("doc-test-files")
    files = []
    for index, (_, code) in enumerate(TEST_FILES):
        files.append(work / f"test_doc_example_{index}.py")
        files[-1].write_text(code)
    # pytest runs the files in the order given: those that end the process's Spark JVM (stop_spark) last, so that
    # every other example's SparkSession starts in the JVM the first one started (a JVM's start is most of a session's)
    files.sort(key=lambda file: "stop_spark(" in file.read_text())
    report = work / "report.xml"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", *map(str, files)],
        capture_output=True,
        text=True,
        cwd=work,
        timeout=600,
    )
    outcomes: dict[str, list[str]] = {}
    if report.exists():
        for case in ElementTree.parse(report).iter("testcase"):
            marks = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
            module = case.get("classname", "").split(".")[0]
            outcomes.setdefault(module, []).append(marks[0] if marks else "passed")
    return outcomes, done.stdout + done.stderr


@pytest.mark.integration
@pytest.mark.parametrize("index", range(len(TEST_FILES)), ids=_ids(TEST_FILES))
def test_test_file_example_passes_under_pytest(index: int, test_file_run: tuple[dict[str, list[str]], str]) -> None:
    outcomes, output = test_file_run
    seen = outcomes.get(f"test_doc_example_{index}", [])
    assert seen and all(outcome == "passed" for outcome in seen), output


@pytest.mark.parametrize("command", [c for _, c in COMMANDS], ids=_ids(COMMANDS))
def test_documented_command_lines_parse(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    words = shlex.split(command)[1:]
    subcommand = [w for w in words if not w.startswith("-")][:2]
    # the documented subcommand exists (--help answers 0 before anything runs) and shows its options
    assert canal_main([*words, "--help"]) == 0
    out = capsys.readouterr().out
    assert subcommand[0] in out
    assert all(option in out for option in words if option.startswith("--"))


def test_every_page_is_in_the_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in (ROOT / "docs").rglob("*.md"):
        assert str(page.relative_to(ROOT / "docs")) in nav, page


# -- the site --------------------------------------------------------------------------------------------------------


def _reference() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "scripts" / "docs_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built as scripts/docs.sh builds it (strict: any warning -- a broken link, a reference to a renamed
    object, an undocumented setting -- fails the build)."""
    out = tmp_path_factory.mktemp("site")
    mkdocs = Path(sys.executable).with_name("mkdocs")
    done = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_site_builds_strictly(site: Path) -> None:
    assert (site / "index.html").is_file()
    assert "get_without_ack" in (site / "reference" / "api" / "index.html").read_text()  # docstrings rendered


def test_readme_links_reach_pages_and_their_headings(site: Path) -> None:
    """The site's build checks the links between its pages and to their headings (``validation.anchors``), but
    README.md is not one of them: each of its relative links names a file of the repository, and a link into docs/
    with a ``#heading`` names one the built page has."""
    targets = re.findall(r"\]\((?!https?://)([^)\s]+)\)", (ROOT / "README.md").read_text())
    assert targets
    for target in targets:
        file, _, anchor = target.partition("#")
        assert (ROOT / file).is_file(), target
        if anchor:
            page = Path(file).relative_to("docs").with_suffix("")
            built = site / ("" if page.name == "index" else page) / "index.html"
            assert f'id="{anchor}"' in built.read_text(), target


def test_config_reference_lists_every_declared_setting(site: Path) -> None:
    import attrs

    page = html.unescape((site / "reference" / "config" / "index.html").read_text())
    rows = re.findall(r"<tr>\s*<td><code>(\w+)\.(\w+)</code></td>\s*<td>(?:<code>([^<]+)</code>|--)</td>", page)
    shown = {(cls, field): key or None for cls, field, key in rows}
    declared = {}
    for cls in _reference().setting_classes():
        for field in attrs.fields(cls):
            if field.init:
                key = field.metadata.get("canal_key")
                declared[(cls.__name__, field.name)] = key.replace("{prefix}", "master") if key else None
    assert shown == declared
    assert len(rows) == len(declared)  # each once


def test_reference_code_cells_show_pipes_without_a_backslash(site: Path) -> None:
    """A type such as ``int | None`` in a table cell's code span reads as typed: no escaped pipe in the page."""
    page = (site / "reference" / "config" / "index.html").read_text()
    assert "<code>int | None</code>" in page
    assert "\\|" not in page


def test_spark_options_reference_lists_every_option(site: Path) -> None:
    from canal.spark.options import CONNECTION_OPTIONS, READER_OPTIONS

    page = html.unescape((site / "reference" / "spark-options" / "index.html").read_text())
    shown = re.findall(r"<tr>\s*<td><code>([\w.<>]+)</code></td>", page)
    assert shown == [o.name for o in (*CONNECTION_OPTIONS, *READER_OPTIONS)]


PROPERTIES = blocks("properties")


@pytest.mark.parametrize("text", [t for _, t in PROPERTIES], ids=_ids(PROPERTIES))
def test_properties_example_loads(text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ``instance.properties`` example loads (a fragment gets a master address), its keys read and valid."""
    from canal import InstanceConfig

    for name in re.findall(r"\$\{(\w+)\}", text):
        monkeypatch.setenv(name, "from-the-environment")
    if "master.address" not in text:
        text = "canal.instance.master.address = 127.0.0.1:3306\n" + text
    path = tmp_path / "example" / "instance.properties"
    path.parent.mkdir()
    path.write_text(text)
    config = InstanceConfig.from_properties(str(path))
    assert config.destination == "example"
