"""The import graph of ``canal/`` (read with ast): layers point one way and no modules import each other in a cycle.

The layer order is the one docs/architecture.md documents; a module may import modules of its own layer and of the
layers before it. For the layer order every import counts -- at module level, inside functions, and under
``TYPE_CHECKING`` -- because each is a dependency a reader must know about. For cycles, imports under
``TYPE_CHECKING`` do not: a part of a package naming its facade in a type hint (the fake's parts and ``FakeMysql``)
is not a dependency at run time. Inside the packages of :data:`ONE_WAY` they do: their modules import one way, type
hints included (a part names what it needs of another in a protocol of its own).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

CANAL = Path(__file__).resolve().parent.parent / "canal"

# (layer name, module prefixes), lowest first; the longest matching prefix decides a module's layer
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "foundation",
        (
            "canal.errors",
            "canal.log",
            "canal.start_stop",
            "canal.position",
            "canal.protocol",
            "canal.value_text",
            "canal.mysql_json",
            "canal.client",
            "canal.filter",
            "canal.address",
            "canal.gtid",
            "canal.files",
            "canal.secrets",
            "canal.names",
        ),
    ),
    ("sql", ("canal.sql",)),
    ("schema", ("canal.schema",)),
    ("config", ("canal.config", "canal.filter")),
    ("storage", ("canal.meta", "canal.store")),
    ("parse", ("canal.parse",)),
    ("snapshot", ("canal.snapshot",)),
    ("sink", ("canal.sink",)),
    ("instance", ("canal.assembly", "canal.instance", "canal.instance_metrics")),
    ("server", ("canal.ha", "canal.server", "canal.metrics")),
    ("lake", ("canal.lake",)),
    ("applications", ("canal.spark", "canal.cli", "canal")),
    ("testing", ("canal.testing", "canal.spark.testing", "canal.demo")),
]


# imports the layer order allows as documented hooks, each made inside a function (none now: canal.spark.DeltaMirror
# hands a Spark DataFrame to the Spark side of the mirror, canal.lake never imports canal.spark)
HOOKS: set[tuple[str, str]] = set()


# packages whose modules import one way, imports under TYPE_CHECKING included
ONE_WAY: tuple[str, ...] = ("canal.parse",)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(CANAL.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> int:
    best, best_len = -1, -1
    for index, (_name, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    assert best >= 0, f"{module} is in no layer: add it to LAYERS and docs/architecture.md"
    return best


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes inside ``if TYPE_CHECKING:`` blocks."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                inside.update(id(n) for n in ast.walk(child))
    return inside


def imports_of(path: Path, module: str, known: set[str], *, type_checking: bool = True) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    skip = set() if type_checking else _type_checking_nodes(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for name in names:
            # the deepest known module the import names (``from canal.meta import zkpaths`` is canal.meta.zkpaths)
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found


def graph(*, type_checking: bool = True) -> dict[str, set[str]]:
    """The import graph (a copy each time: tests change theirs), read once per kind."""
    return {m: set(ts) for m, ts in _graph(type_checking).items()}


@functools.cache
def _graph(type_checking: bool) -> dict[str, set[str]]:
    paths = {module_name(p): p for p in CANAL.rglob("*.py")}
    known = set(paths)
    found = {m: imports_of(p, m, known, type_checking=type_checking) for m, p in paths.items()}
    return {m: {t for t in targets if (m, t) not in HOOKS} for m, targets in found.items()}


def test_every_import_points_to_the_same_or_a_lower_layer() -> None:
    wrong = []
    for module, targets in sorted(graph().items()):
        for target in sorted(targets):
            if layer_of(target) > layer_of(module):
                wrong.append(
                    f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
                )
    assert not wrong, "imports against the layer order:\n" + "\n".join(wrong)


def cycles_of(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``edges`` (a module's package ``__init__`` re-exporting it is not a dependency the
    other way round)."""
    edges = {m: {t for t in ts if not m.startswith(t + ".")} for m, ts in edges.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def connect(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            connect(v)
    return cycles


def test_no_import_cycles_between_modules() -> None:
    cycles = cycles_of(graph(type_checking=False))
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def in_package(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_one_way_packages_import_one_way_even_in_type_hints() -> None:
    edges = graph(type_checking=True)
    for package in ONE_WAY:
        inside = {m: {t for t in ts if in_package(t, package)} for m, ts in edges.items() if in_package(m, package)}
        cycles = cycles_of(inside)
        assert not cycles, f"import cycles in {package}:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_a_cycle_through_a_type_hint_is_found() -> None:
    # the check above sees what it is for: the shared reader's queue naming the reader in a type hint
    edges = graph(type_checking=True)
    edges["canal.parse.shared.queue"] = {*edges["canal.parse.shared.queue"], "canal.parse.shared.reader"}
    inside = {
        m: {t for t in ts if in_package(t, "canal.parse")} for m, ts in edges.items() if in_package(m, "canal.parse")
    }
    assert ["canal.parse.shared.queue", "canal.parse.shared.reader"] in cycles_of(inside)


def test_the_layers_are_the_documented_ones() -> None:
    doc = (CANAL.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    for name, prefixes in LAYERS:
        assert f"**{name}**" in doc, name
        for prefix in prefixes:
            if prefix != "canal":
                assert f"`{prefix}`" in doc, prefix
