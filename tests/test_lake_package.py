"""The Delta mirror's package stands on its own: ``canal.lake`` imports without pyspark and without ``canal.spark``,
its modules import one another without cycles, and no module of ``canal/`` but the decoder passes 800 lines.

Each import runs in a fresh interpreter in which ``pyspark`` cannot be imported (``sys.modules['pyspark'] = None``
makes ``import pyspark`` raise), as on a machine with the ``lake`` extra only; the last test applies a batch there.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CANAL = ROOT / "canal"
LAKE_MODULES = sorted(
    ".".join(path.relative_to(ROOT).with_suffix("").parts[: -1 if path.name == "__init__.py" else None])
    for path in (CANAL / "lake").rglob("*.py")
)
MAX_LINES = 800
DECODER = "canal/parse/mysql/decoder.py"  # its docstring says why it is one module


def _without_pyspark(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` run by a fresh interpreter in which pyspark cannot be imported."""
    prelude = "import sys\nsys.modules['pyspark'] = None\n"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
        check=False,
    )


def test_every_lake_module_imports_without_pyspark_or_canal_spark() -> None:
    # each module imported with no module of canal.lake loaded before it (an interpreter started once: the rest of
    # canal and pyarrow take seconds to import), so a module that only imports because another one was imported
    # first fails here
    done = _without_pyspark(
        f"""
        import importlib
        for module in {LAKE_MODULES!r}:
            for name in [name for name in sys.modules if name == "canal.lake" or name.startswith("canal.lake.")]:
                del sys.modules[name]
            importlib.import_module(module)
            loaded = [name for name in sys.modules if name.startswith(("canal.spark", "pyspark")) and sys.modules[name]]
            print(module, sorted(loaded))
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"{module} []" for module in LAKE_MODULES]


def test_the_spark_names_are_the_lake_ones() -> None:
    import canal.lake
    import canal.spark
    from canal.errors import CanalError

    for name in canal.lake.__all__:
        if hasattr(canal.spark, name) and name != "DeltaMirror":
            assert getattr(canal.spark, name) is getattr(canal.lake, name), name
    # the Spark side's mirror is the lake's, with the DataFrame entry point only canal.spark can give it
    assert issubclass(canal.spark.DeltaMirror, canal.lake.DeltaMirror)
    assert canal.spark.DeltaMirror.__module__ == "canal.spark.mirror"
    assert issubclass(canal.lake.MirrorError, CanalError)
    for error in ("MirrorCheckpointError", "MirrorFoldError", "MirrorXAError", "StorageError"):
        assert issubclass(getattr(canal.lake, error), CanalError), error


def _module_imports(path: Path, module: str) -> set[str]:
    """The ``canal`` modules ``path`` imports when it is imported: its top-level imports, outside
    ``if TYPE_CHECKING:`` blocks and functions (``from pkg import sub`` names the submodule when there is one)."""
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, ast.If):
                test = node.test
                if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
                    visit(node.orelse)
                    continue
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    found.add(sub if _module_path(sub) is not None else base)

    visit(tree.body)
    return {name for name in found if name == "canal" or name.startswith("canal.")}


def _module_path(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _all_modules() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for path in CANAL.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    return modules


def test_no_module_level_import_cycles() -> None:
    modules = _all_modules()
    graph = {
        name: sorted(m for m in _module_imports(path, name) if m in modules and m != name)
        for name, path in modules.items()
    }
    # every cycle found by a depth-first walk (a package's __init__ reached through ``from pkg import sub`` is not an
    # edge to the package: Python imports the submodule when the package does not hold the name yet)
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the walk's path, 2: done
    path: list[str] = []

    def walk(node: str) -> None:
        state[node] = 1
        path.append(node)
        for other in graph[node]:
            if state.get(other) == 1:
                cycles.append([*path[path.index(other) :], other])
            elif other not in state:
                walk(other)
        path.pop()
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            walk(name)
    assert cycles == []
    lake = {name for name in modules if name.startswith("canal.lake")}
    assert all(not dep.startswith("canal.spark") for name in lake for dep in graph[name])


@pytest.mark.parametrize("path", sorted(str(p.relative_to(ROOT)) for p in CANAL.rglob("*.py")))
def test_module_is_at_most_800_lines(path: str) -> None:
    lines = len((ROOT / path).read_text().splitlines())
    if path == DECODER:
        assert "over 800 lines, on purpose" in (ROOT / path).read_text()
        return
    assert lines <= MAX_LINES, f"{path}: {lines} lines"


def test_an_embedded_mirror_applies_a_batch_without_pyspark(tmp_path: Path) -> None:
    done = _without_pyspark(
        f"""
        import json
        import pyarrow as pa
        from canal.lake import DeltaMirror, compare

        layout = json.dumps([["id", "int(11)", True], ["v", "varchar(9)", False]])
        rows = [
            {{"seq": n, "schema": "s", "table": "t", "type": "INSERT", "is_ddl": False, "sql": None,
              "keys": json.dumps({{"id": str(n)}}), "old_keys": None,
              "after": json.dumps({{"id": str(n), "v": f"v{{n}}"}}), "columns": layout}}
            for n in range(1, 4)
        ]
        with DeltaMirror({str(tmp_path)!r}, background_folds=False) as mirror:
            mirror.apply(pa.Table.from_pylist(rows), 1)
            mirror.apply(pa.Table.from_pylist(rows), 1)  # a replay: skipped
            result = compare(mirror.read("s", "t"), [{{"id": n, "v": f"v{{n}}"}} for n in range(1, 4)], ["id"])
            print(result.equal, mirror.history[-1].tables, mirror.version("s", "t"))
        print(sorted(name for name in sys.modules if name.startswith(("canal.spark", "pyspark")) and sys.modules[name]))
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["True {'s.t': 'skipped'} 1", "[]"]


def _lake_imports() -> dict[str, set[str]]:
    """The ``canal`` modules each module of canal/lake imports anywhere: at module level, inside functions (lazy
    imports) and under ``TYPE_CHECKING`` -- each is a dependency a reader of the package must know about."""
    from test_layers import imports_of, module_name  # not test_layers.graph: it leaves out the layers' hooks

    paths = {module_name(p): p for p in CANAL.rglob("*.py")}
    known = set(paths)
    return {m: imports_of(p, m, known) for m, p in paths.items() if m.split(".")[:2] == ["canal", "lake"]}


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle a depth-first walk of ``edges`` finds."""
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the walk's path, 2: done
    path: list[str] = []

    def walk(node: str) -> None:
        state[node] = 1
        path.append(node)
        for other in sorted(edges.get(node, ())):
            if state.get(other) == 1:
                cycles.append([*path[path.index(other) :], other])
            elif other not in state:
                walk(other)
        path.pop()
        state[node] = 2

    for name in sorted(edges):
        if name not in state:
            walk(name)
    return cycles


def test_the_lake_imports_no_canal_spark_nor_pyspark_even_lazily() -> None:
    # the DataFrame entry point is canal.spark's (canal.spark.DeltaMirror), which hands the lake Arrow
    spark = sorted((m, t) for m, targets in _lake_imports().items() for t in targets if t.startswith("canal.spark"))
    assert spark == []
    for path in (CANAL / "lake").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(n == "pyspark" or n.startswith("pyspark.") for n in names), path


def test_the_lake_modules_and_its_sub_packages_import_one_another_one_way() -> None:
    imports = _lake_imports()
    # no circle between two modules of the package, counting every import (log_writer and staging imported each
    # other, one of them under TYPE_CHECKING)
    modules = {m: {t for t in targets if t in imports and t != "canal.lake"} for m, targets in imports.items()}
    assert _cycles({m: ts for m, ts in modules.items() if m != "canal.lake"}) == []
    assert "canal.lake.apply.log_writer" not in modules["canal.lake.apply.staging"]

    # nor between its parts: a sub-package, or a module at the top (the facade, its settings, the shared vocabulary)
    def part(module: str) -> str:
        return ".".join(module.split(".")[:3])

    parts: dict[str, set[str]] = {}
    for module, targets in modules.items():
        if module != "canal.lake":  # the package re-exports its parts' names
            parts.setdefault(part(module), set()).update(part(t) for t in targets if part(t) != part(module))
    assert _cycles(parts) == []
    # no part imports the package itself, which imports the facade and through it every part
    assert sorted(m for m, targets in imports.items() if m != "canal.lake" and "canal.lake" in targets) == []


def test_every_lake_sub_package_is_on_the_architecture_page() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    packages = sorted(p.parent.name for p in (CANAL / "lake").glob("*/__init__.py"))
    assert len(packages) >= 6
    assert [p for p in packages if f"`canal.lake.{p}`" not in doc] == []


def test_the_lake_mirror_refuses_a_dataframe_it_would_have_to_hand_to_spark_tasks(tmp_path: Path) -> None:
    from canal.lake import DeltaMirror, MirrorError

    class Frame:  # what the mirror recognises a Spark DataFrame by
        sparkSession = object()

        def toArrow(self) -> None:
            raise AssertionError("a refused batch is not read")

    root = tmp_path / "m"
    with DeltaMirror(root, background_folds=False) as mirror:
        with pytest.raises(MirrorError, match=r"canal\.spark\.DeltaMirror"):
            mirror(Frame(), 1)
        assert mirror.tables() == [] and mirror.history == []


def test_a_comparison_names_its_table_whatever_its_columns() -> None:
    """A table with a date column was reported under that column's name (a loop over the dated columns reused the
    name's variable)."""
    import datetime

    import pyarrow as pa

    from canal.lake import compare

    table = pa.table({"id": [1], "day": pa.array([datetime.date(2024, 1, 1)])})
    result = compare(table, [{"id": 1, "day": datetime.date(2024, 1, 1)}], ["id"], name="shop.t")
    assert result.equal and result.table == "shop.t"
