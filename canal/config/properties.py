"""Java ``.properties`` syntax (:func:`parse_properties`, :func:`format_properties`) and canal's ``${name:default}``
placeholders (:func:`resolve_placeholders`)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Final

from canal.errors import ConfigError

# --------------------------------------------------------------------------------------------------------------------
# .properties syntax
# --------------------------------------------------------------------------------------------------------------------

_WS: Final = " \t\f"
_ESCAPES: Final = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        if i + 1 >= len(text):  # a lone trailing backslash (end of file) vanishes, as in Java
            break
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise ConfigError(f"malformed \\uxxxx escape in .properties text: {text[i : i + 6]!r}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    joined = "".join(out)
    # \\uD83D\\uDE00 style surrogate pairs -> one code point
    return re.sub(
        "[\ud800-\udbff][\udc00-\udfff]",
        lambda m: chr(0x10000 + ((ord(m.group()[0]) - 0xD800) << 10) + (ord(m.group()[1]) - 0xDC00)),
        joined,
    )


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text (``java.util.Properties.load`` rules): ``key=value``, ``key: value`` or
    ``key value``; ``#``/``!`` comment lines; a line ending in an odd number of backslashes continues on the next
    (whose leading whitespace is dropped); ``\\t \\n \\r \\f \\uXXXX`` escapes, ``\\x`` -> ``x``. Later keys win.
    Values keep trailing whitespace (as Java does); pycanal strips it when it interprets a value."""
    result: dict[str, str] = {}
    lines = re.split(r"\r\n|\r|\n", text)
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(_WS)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(_WS)
            i += 1
        if _continues(line):
            line = line[:-1]
        key_end = len(line)
        value_start = len(line)
        j = 0
        while j < len(line):
            ch = line[j]
            if ch == "\\":
                j += 2
                continue
            if ch in "=:" or ch in _WS:
                key_end = j
                k = j
                while k < len(line) and line[k] in _WS:
                    k += 1
                if ch in _WS and k < len(line) and line[k] in "=:":
                    k += 1
                elif ch in "=:":
                    k = j + 1
                while k < len(line) and line[k] in _WS:
                    k += 1
                value_start = k
                break
            j += 1
        result[_unescape(line[:key_end])] = _unescape(line[value_start:])
    return result


def _continues(line: str) -> bool:
    count = len(line) - len(line.rstrip("\\"))
    return count % 2 == 1


def _escape(text: str, *, is_key: bool) -> str:
    out: list[str] = []
    for idx, ch in enumerate(text):
        code = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[ch])
        elif ch == " " and (is_key or idx == 0):
            out.append("\\ ")
        elif ch in "=:#!" and (is_key or idx == 0):
            out.append("\\" + ch)
        elif code < 0x20 or code >= 0x7F:
            if code > 0xFFFF:
                code -= 0x10000
                out.append(f"\\u{0xD800 + (code >> 10):04X}\\u{0xDC00 + (code & 0x3FF):04X}")
            else:
                out.append(f"\\u{code:04X}")
        else:
            out.append(ch)
    return "".join(out)


def format_properties(values: Mapping[str, str]) -> str:
    """Java ``.properties`` text for ``values`` (one ``key=value`` line each, ASCII with ``\\uXXXX`` escapes), such
    that :func:`parse_properties` (and Java) reads back exactly ``values``."""
    return "".join(f"{_escape(k, is_key=True)}={_escape(v, is_key=False)}\n" for k, v in values.items())


# --------------------------------------------------------------------------------------------------------------------
# placeholders
# --------------------------------------------------------------------------------------------------------------------


def _find_close(text: str, start: int) -> int:
    """Index of the ``}`` closing the placeholder whose body starts at ``start``, or -1."""
    depth = 1
    i = start
    while i < len(text):
        if text.startswith("${", i):
            depth += 1
            i += 2
            continue
        if text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _split_default(body: str) -> tuple[str, str | None]:
    depth = 0
    i = 0
    while i < len(body):
        if body.startswith("${", i):
            depth += 1
            i += 2
            continue
        if body[i] == "}":
            depth -= 1
        elif body[i] == ":" and depth == 0:
            return body[:i], body[i + 1 :]
        i += 1
    return body, None


def _env_lookup(name: str, environ: Mapping[str, str]) -> str | None:
    if name in environ:
        return environ[name]
    relaxed = re.sub(r"[.\-]", "_", name).upper()
    return environ.get(relaxed)


def resolve_placeholders(
    value: str,
    lookup: Callable[[str], str | None],
    *,
    key: str = "value",
    environ: Mapping[str, str] | None = None,
    _stack: tuple[str, ...] = (),
) -> str:
    """Resolve ``${name}`` / ``${name:default}`` in ``value`` as canal's Spring configuration does.

    ``name`` is looked up with ``lookup`` (other keys; its result is resolved in turn), then in ``environ`` (default
    ``os.environ``) as ``name`` or ``NAME_WITH_UNDERSCORES``, then the default is used. Placeholders nest. An
    unresolvable placeholder or a cycle raises ConfigError naming ``key`` (never the value).
    """
    env = os.environ if environ is None else environ
    out: list[str] = []
    i = 0
    while True:
        start = value.find("${", i)
        if start < 0:
            out.append(value[i:])
            break
        end = _find_close(value, start + 2)
        if end < 0:
            out.append(value[i:])
            break
        out.append(value[i:start])
        body = value[start + 2 : end]
        name_part, default = _split_default(body)
        name = resolve_placeholders(name_part, lookup, key=key, environ=env, _stack=_stack).strip()
        if name in _stack:
            raise ConfigError(f"{key}: circular placeholder ${{{name}}}", key=key)
        found = lookup(name)
        if found is not None:
            found = resolve_placeholders(found, lookup, key=key, environ=env, _stack=(*_stack, name))
        else:
            found = _env_lookup(name, env)
        if found is None:
            if default is None:
                raise ConfigError(
                    f"{key}: cannot resolve placeholder ${{{name}}} (no such key or environment variable, no default)",
                    key=key,
                )
            found = resolve_placeholders(default, lookup, key=key, environ=env, _stack=_stack)
        out.append(found)
        i = end + 1
    return "".join(out)
