"""The documentation's reference pages, generated from the code when the site builds (an MkDocs hook, see mkdocs.yml).

A page asks for a reference with a line ``<!-- reference:NAME -->``; the hook replaces it with the markdown that
``REFERENCES[NAME]()`` returns. Nothing in these tables is written by hand: the settings come from the attrs field
declarations of ``canal.config`` (canal's key in the field metadata, the description in the field's docstring), the
Spark source options from ``canal.spark.options``, the command line from its argparse parser, the Prometheus series
from ``canal.metrics.CanalCollector`` and the errors from their classes. A setting without a docstring fails the
build.
"""

from __future__ import annotations

import argparse
import ast
import enum
import inspect
import re
import textwrap
from collections.abc import Callable
from typing import Any

import attrs

MARKER = re.compile(r"^<!-- reference:([a-z_-]+) -->$", re.M)


# -- settings ----------------------------------------------------------------------------------------------------------


def setting_classes() -> list[type]:
    """The setting classes, in the order the reference shows them."""
    import canal.config  # noqa: F401  (imports every keyed class)
    from canal.config import InstanceConfig, ServerConfig, SslConfig
    from canal.config.fields import KEYED_CLASSES

    first = [InstanceConfig]
    rest = [c for c in KEYED_CLASSES if c not in (InstanceConfig, ServerConfig)]
    rest.insert(rest.index(next(c for c in rest if c.__name__ == "MasterConfig")) + 1, SslConfig)
    return [*first, *rest, ServerConfig]


def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each attrs field declaration of ``cls`` (PEP 257 attribute docstrings)."""
    source = textwrap.dedent(inspect.getsource(cls))
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.ClassDef)
    docs: dict[str, str] = {}
    for stmt, after in zip(node.body, node.body[1:], strict=False):
        if (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[stmt.target.id] = " ".join(after.value.value.split())
    return docs


def settings() -> list[tuple[str, str, str | None, str, str, str]]:
    """Every setting: (class, field, canal key or None, type, default, description)."""
    rows = []
    for cls in setting_classes():
        docs = field_docs(cls)
        for field in attrs.fields(cls):
            if not field.init:
                continue
            if field.name not in docs:
                raise ValueError(f"{cls.__name__}.{field.name} has no docstring: document it under its declaration")
            key = field.metadata.get("canal_key")
            if key is not None and "{prefix}" in key:
                key = key.replace("{prefix}", "master")
            rows.append((cls.__name__, field.name, key, str(field.type), _default(field), docs[field.name]))
    return rows


def _default(field: attrs.Attribute[Any]) -> str:
    default = field.default
    if default is attrs.NOTHING:
        return "required"
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        factory = default.factory
        return f"{factory.__name__}()" if isinstance(factory, type) else "{}" if factory is dict else "()"
    if isinstance(default, enum.Enum):
        return repr(default.value)
    return repr(default)


def _cell(text: str) -> str:
    """``text`` for a table cell: pipes outside code spans escaped (inside them, tables leave pipes alone)."""
    parts = text.split("`")
    return "`".join(p if i % 2 else p.replace("|", "\\|") for i, p in enumerate(parts))


def _code(text: str) -> str:
    """``text`` as a code span for a table cell: its pipes stay as they are (a table does not split a code span, and
    an escaped pipe inside one would show its backslash)."""
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def config_reference() -> str:
    from canal.config.keys import SSL_PROPERTY_KEYS

    out: list[str] = []
    current = None
    for cls_name, name, key, type_, default, doc in settings():
        if cls_name != current:
            current = cls_name
            out += ["", f"### {cls_name}", "", "| setting | canal key | type | default | what it does |"]
            out.append("|---|---|---|---|---|")
        shown_key = f"`{key}`" if key else "--"
        out.append(f"| `{cls_name}.{name}` | {shown_key} | {_code(type_)} | {_code(default)} | {_cell(doc)} |")
    out += [
        "",
        "### TLS keys {#tls-keys}",
        "",
        "canal's TLS keys, read into `MasterConfig.ssl` (likewise for the standby):",
    ]
    out += [""] + [f"* `{k}`" for k in SSL_PROPERTY_KEYS if ".master." in k] + [""]
    out.append("`pycanal.master.ssl.key` names a private key kept in a file of its own.")
    return "\n".join(out) + "\n"


# -- Spark source options ----------------------------------------------------------------------------------------------


def spark_options_reference() -> str:
    from canal.spark.options import CONNECTION_OPTIONS, READER_OPTIONS

    out = ["### Connection (short names of instance.properties keys)", "", "| option | canal key | what it does |"]
    out.append("|---|---|---|")
    out += [f"| `{o.name}` | `{o.canal_key}` | {_cell(o.description)} |" for o in CONNECTION_OPTIONS]
    out += ["", "### Reader", "", "| option | default | what it does |", "|---|---|---|"]
    out += [
        f"| `{o.name}` | {f'`{o.default}`' if o.default else '--'} | {_cell(o.description)} |" for o in READER_OPTIONS
    ]
    return "\n".join(out) + "\n"


# -- command line ------------------------------------------------------------------------------------------------------


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _commands(parser: argparse.ArgumentParser, prefix: str) -> list[tuple[str, argparse.ArgumentParser]]:
    out = [(prefix, parser)]
    for name, sub in _subparsers(parser).items():
        out += _commands(sub, f"{prefix} {name}")
    return out


def cli_reference() -> str:
    from canal.cli import build_parser

    out: list[str] = []
    for name, parser in _commands(build_parser(), "canal"):
        out += ["", f"### `{name}`", ""]
        if parser.description:
            out += [parser.description, ""]
        options = [a for a in parser._actions if not isinstance(a, argparse._SubParsersAction | argparse._HelpAction)]
        if options:
            out += ["| option | what it does | default |", "|---|---|---|"]
            for action in options:
                flags = ", ".join(action.option_strings) or (action.metavar or action.dest)
                if action.option_strings and action.nargs != 0:
                    flags += f" {action.metavar or action.dest.upper()}"
                default = action.default
                shown = "--" if default in (None, False, argparse.SUPPRESS) else f"`{default}`"
                help_text = (action.help or "").replace("%(default)s", str(default)).replace("%%", "%")
                if action.choices:
                    help_text += f" (one of {', '.join(f'`{c}`' for c in action.choices)})"
                out.append(f"| {_code(flags)} | {_cell(' '.join(help_text.split()))} | {_cell(shown)} |")
        subs = _subparsers(parser)
        if subs:
            out += ["", "Commands: " + ", ".join(f"`{name} {s}`" for s in subs)]
    return "\n".join(out) + "\n"


# -- metrics -----------------------------------------------------------------------------------------------------------


def metrics_reference() -> str:
    from canal.lake.metrics import MirrorCollector
    from canal.metrics import SERVER_SERIES, CanalCollector
    from canal.spark.progress import SourceCollector

    out = ["| series | type | what it measures |", "|---|---|---|"]
    # labels beside the collector's
    extra = {
        "canal_source_changes": ", type",
        "canal_mirror_stops": ", error",
        "canal_mirror_info": ", destination",
        "canal_instance_last_error_info": ", error",
    }
    # the process's own HA series (EmbeddedServer.balance_state) are not a destination's
    own = {
        "canal_ha_serving_destinations": "",
        "canal_ha_assigned_destinations": "",
        "canal_ha_share": "",
        "canal_ha_members": "",
        "canal_ha_moves": "direction",
    }
    collectors = (
        (CanalCollector(dict), "destination"),
        (SourceCollector(), "destination"),
        (MirrorCollector([]), "root, app_id"),
    )
    for collector, labels in collectors:
        for family in collector.collect():
            name = family.name + ("_total" if family.type == "counter" else "")
            shown = own.get(family.name, labels + extra.get(family.name, ""))
            selector = f"{name}{{{shown}}}" if shown else name
            out.append(f"| `{selector}` | {family.type} | {_cell(family.documentation)} |")
    for name, doc in SERVER_SERIES.items():  # a server's own (CanalCollector serves them for an EmbeddedServer)
        out.append(f"| `canal_server_{name}` | gauge | {_cell(doc)} |")
    return "\n".join(out) + "\n"


# -- errors ------------------------------------------------------------------------------------------------------------


def error_classes() -> list[type[BaseException]]:
    import canal.errors
    import canal.spark

    classes = [
        c for _, c in inspect.getmembers(canal.errors, inspect.isclass) if issubclass(c, canal.errors.CanalError)
    ]
    classes += [
        c for _, c in inspect.getmembers(canal.spark, inspect.isclass) if issubclass(c, canal.errors.CanalError)
    ]
    return sorted(set(classes), key=lambda c: ([b.__name__ for b in reversed(c.__mro__)], c.__name__))


def errors_reference() -> str:

    out = ["| error | is a | module | what it means |", "|---|---|---|---|"]
    for cls in error_classes():
        bases = ", ".join(f"`{b.__name__}`" for b in cls.__bases__)
        doc = " ".join((cls.__doc__ or "").split())
        doc = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", doc).replace("``", "`")
        out.append(f"| `{cls.__name__}` | {bases} | `{cls.__module__}` | {_cell(doc)} |")
    return "\n".join(out) + "\n"


REFERENCES: dict[str, Callable[[], str]] = {
    "config": config_reference,
    "spark-options": spark_options_reference,
    "cli": cli_reference,
    "metrics": metrics_reference,
    "errors": errors_reference,
}


def expand(markdown: str) -> str:
    """``markdown`` with every reference marker replaced by its generated table."""
    return MARKER.sub(lambda m: REFERENCES[m.group(1)]().strip("\n"), markdown)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """MkDocs hook."""
    return expand(markdown)
