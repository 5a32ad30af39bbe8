"""Hostile configuration text, fuzzed with hypothesis: canal ``.properties`` files and filter expressions.

Whatever the text -- arbitrary characters, NUL bytes, broken escapes and placeholders, canal's own keys with values
of the wrong kind, names no file system accepts, undecodable bytes in files -- loading either succeeds or raises a
:class:`~canal.errors.ConfigError` (a :class:`~canal.errors.FilterError` for filters); never another exception, and
never with the password in the message.
"""

from __future__ import annotations

import contextlib
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from canal.config import InstanceConfig, ServerConfig, format_properties, load_conf_dir, parse_properties
from canal.config import keys as K
from canal.errors import ConfigError, FilterError
from canal.filter import FieldFilter, TableFilters, compile_table_filter

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")  # re's "possible nested set" on odd patterns

CANAL_KEYS = sorted(K._used_keys())  # every key pycanal reads, as its setting classes declare them
SECRET = "S3cr3t-7f0b6e2d9c"

_tricky = st.sampled_from(
    [
        "", " ", "0", "-1", "1e400", "99999999999999999999999", "nan", "inf", "-0.0", "0x10", "true", "yes", "maybe",
        "${x}", "${", "$}", "${a:b}", "${canal.instance.master.address}", "\\u0000", "\\uZZZZ", "\\", "a,b",
        "[", "(?P<", ".*\\..*", "fake://x", "file://", "127.0.0.1:99999", "host:-1", "[::1]:0", "::::",
        "mysql-bin.000001", "ITEMSIZE", "MEMSIZE", "memory", "file", "zookeeper", "period-mixed", "é€😀", "a" * 500,
    ]
)  # fmt: skip
_values = st.one_of(_tricky, st.text(max_size=40), st.integers().map(str))
_keys = st.one_of(st.sampled_from(CANAL_KEYS), st.text(min_size=1, max_size=30))
_HOSTILE = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _typed(fn: object) -> None:
    try:
        fn()  # type: ignore[operator]
    except ConfigError as e:
        assert SECRET not in str(e)


_properties_chars = st.characters(codec="utf-8") | st.sampled_from(list("=:\\$ {}#!\n\r\t\x00"))


@_HOSTILE
@given(text=st.text(alphabet=_properties_chars, max_size=300))
def test_arbitrary_properties_text_is_config_or_config_error(text: str) -> None:
    _typed(lambda: parse_properties(text))
    _typed(lambda: InstanceConfig.from_properties(text + "\n", destination="fuzz"))
    _typed(lambda: InstanceConfig.from_properties(text + "\n"))
    _typed(lambda: ServerConfig.from_properties(text + "\n"))


@_HOSTILE
@given(props=st.dictionaries(_keys, _values, max_size=10), secret_first=st.booleans())
def test_canal_keys_with_any_values_are_config_or_config_error(props: dict[str, str], secret_first: bool) -> None:
    secret = {"canal.instance.dbPassword": SECRET, "canal.instance.master.password": SECRET}
    merged = {**secret, **props} if secret_first else {**props, **secret}
    text = format_properties(merged)
    _typed(lambda: InstanceConfig.from_properties(text, destination="fuzz"))
    _typed(lambda: InstanceConfig.from_properties(text, destination="fuzz", canal_properties=text))
    _typed(lambda: ServerConfig.from_properties(text))


@_HOSTILE
@given(name=st.text(alphabet=st.characters(blacklist_characters="\n=:"), min_size=0, max_size=300))
def test_a_name_that_is_no_readable_file_is_a_config_error(name: str) -> None:
    """A one-line string without ``=``/``:`` is a path: NUL bytes, overlong names, directories, missing files."""
    _typed(lambda: InstanceConfig.from_properties(name, destination="fuzz"))
    _typed(lambda: ServerConfig.from_properties(name))
    _typed(lambda: load_conf_dir(name or "."))


_properties_bytes = st.dictionaries(_keys, _values, max_size=6).map(lambda d: format_properties(d).encode())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    canal=st.binary(max_size=200) | _properties_bytes,
    instance=st.binary(max_size=200) | _properties_bytes,
    destination=st.text(alphabet=string.ascii_letters + string.digits + "_-./", min_size=1, max_size=12),
)
def test_a_conf_directory_of_any_bytes_is_config_or_config_error(
    tmp_path_factory: pytest.TempPathFactory, canal: bytes, instance: bytes, destination: str
) -> None:
    conf = tmp_path_factory.mktemp("conf")
    (conf / "canal.properties").write_bytes(canal + b"\ncanal.destinations=" + destination.encode() + b"\n")
    sub = conf / "example"
    sub.mkdir()
    (sub / "instance.properties").write_bytes(instance)
    _typed(lambda: load_conf_dir(conf))


_filter_text = st.lists(
    st.sampled_from([*"ab.*\\,(){}[]?+|^$:/ -_&\x00é", "\\d", "(?i)", "(?P<x>", "{1,", "[[", "&&"]), max_size=24
).map("".join)


@_HOSTILE
@given(white=_filter_text, black=_filter_text, schema=st.text(max_size=8), table=st.text(max_size=8))
def test_any_filter_text_compiles_or_is_a_filter_error(white: str, black: str, schema: str, table: str) -> None:
    try:
        filters = TableFilters.from_strings(white, black)
    except FilterError:
        pass
    else:
        assert isinstance(filters.includes(schema, table), bool)
    for build in (lambda: compile_table_filter(white), lambda: FieldFilter.parse(white, black)):
        with contextlib.suppress(FilterError):
            build()


def test_the_failures_fuzzing_found() -> None:
    """NUL bytes and overlong names raised ValueError / OSError from the file system, not ConfigError."""
    with pytest.raises(ConfigError, match="embedded null byte"):
        InstanceConfig.from_properties("conf\x00dir", destination="x")
    with pytest.raises(ConfigError, match=r"no canal\.properties"):
        load_conf_dir("x" * 5000)


def test_a_conf_directory_is_read_after_the_fixes(tmp_path: Path) -> None:
    (tmp_path / "canal.properties").write_text("canal.destinations=example\n")
    (tmp_path / "example").mkdir()
    (tmp_path / "example" / "instance.properties").write_text("canal.instance.master.address=127.0.0.1:3306\n")
    server, instances = load_conf_dir(tmp_path)
    assert list(instances) == ["example"] and server.destinations == ("example",)
