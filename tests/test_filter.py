"""canal's table filters (AviaterRegexFilter semantics) and field filters."""

from __future__ import annotations

import gc
import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from canal.errors import ConfigError, FilterError
from canal.filter import (
    FieldFilter,
    TableFilters,
    compile_field_filter,
    compile_table_filter,
    split_patterns,
)
from canal.protocol import ColumnMeta, RowData, TableSchema

# ---- canal's documented examples (canal wiki "AdminGuide", instance.properties)


def test_all_tables() -> None:
    f = compile_table_filter(r".*\..*")
    assert f.matches("canal", "test1")
    assert f.matches("mysql", "user")
    assert f.matches_all


def test_doubled_backslash_as_in_canal_properties_docs() -> None:
    f = compile_table_filter(r".*\\..*")
    assert f.matches("any", "thing") and f.matches_all
    g = compile_table_filter(r"canal\\..*")
    assert g.matches("canal", "t1")
    assert not g.matches("canalx", "t1")


def test_all_tables_of_one_schema() -> None:
    f = compile_table_filter(r"canal\..*")
    assert f.matches("canal", "test1")
    assert f.matches("canal", "x")
    assert not f.matches("canal2", "test1")
    assert not f.matches("mysql", "canal")


def test_tables_with_prefix() -> None:
    f = compile_table_filter(r"canal\.canal.*")
    assert f.matches("canal", "canal_orders")
    assert f.matches("canal", "canal")
    assert not f.matches("canal", "orders")


def test_single_table() -> None:
    f = compile_table_filter(r"canal\.test1")
    assert f.matches("canal", "test1")
    assert not f.matches("canal", "test10")  # anchored at the end
    assert not f.matches("xcanal", "test1")  # anchored at the start


def test_unescaped_dot_is_a_regex_dot_as_in_canal() -> None:
    f = compile_table_filter("canal.test1")
    assert f.matches("canal", "test1")
    assert f.matches_name("canalxtest1")  # the dot matches any character
    assert not f.matches("canal", "test1x")
    f = compile_table_filter("test.a")
    assert not f.matches("test", "ab")  # full match: 'test.a' never matches 'test.ab'


def test_several_rules() -> None:
    f = compile_table_filter(r"canal\..*,mysql.test1,mysql.test2")
    assert f.matches("canal", "anything")
    assert f.matches("mysql", "test1")
    assert f.matches("mysql", "test2")
    assert not f.matches("mysql", "test3")
    assert not f.matches("other", "test1")


def test_canal_unit_test_cases() -> None:
    f = compile_table_filter(r"s1\..*,s2\..*")
    assert f.matches("s1", "t1")
    assert not f.matches("s12", "t1")
    assert f.matches("S1", "S2")  # case-insensitive
    assert not f.matches("s3", "t2")
    assert compile_table_filter("foooo,f.*t").matches_name("fooooot")
    f4 = compile_table_filter("otter2.otter_stability1|otter1.otter_stability1|retl.retl_mark|retl.xdual")
    assert f4.matches("otter1", "otter_stability1")
    assert f4.matches("retl", "xdual")
    assert not f4.matches("retl", "xdual2")
    fd = compile_table_filter(r"u\..*,uvw\..*,uv\..*,a\.x,a\.xyz,a\.xy,abc\.x,abc\.xyz,abc\.xy,ab\.x,ab\.xyz,ab\.xy")
    assert fd.matches("u", "abc")
    assert fd.matches("ab", "x")
    assert not fd.matches("ab", "xyz1")
    assert fd.matches("abc", "xyz")
    assert fd.matches("uv", "xyz")


def test_commas_inside_quantifiers_classes_and_groups_do_not_split() -> None:
    f = compile_table_filter(r"test\.order_\d{1,2}")
    assert f.patterns == (r"test\.order_\d{1,2}",)
    assert f.matches("test", "order_5") and f.matches("test", "order_42")
    assert not f.matches("test", "order_123")
    assert split_patterns(r"a\.[x,y],b\.(c|d),e\.f{2,}") == [r"a\.[x,y]", r"b\.(c|d)", r"e\.f{2,}"]
    assert split_patterns(r"a\,b,c") == [r"a\,b", "c"]  # an escaped comma does not split


def test_spaces_around_commas_are_trimmed_and_empty_pieces_dropped() -> None:
    f = compile_table_filter(r" shop\.orders , shop\.items ,, ")
    assert f.patterns == (r"shop\.orders", r"shop\.items")
    assert f.matches("shop", "items")
    assert f.matches("SHOP", "Orders")


def test_case_insensitive_both_ways() -> None:
    assert compile_table_filter(r"SHOP\.ORDERS").matches("shop", "orders")
    assert compile_table_filter(r"shop\.orders").matches("Shop", "ORDERS")
    assert compile_table_filter(r"shop\.[a-z]+").matches("shop", "ORDERS")


def test_empty_white_matches_all_empty_black_matches_nothing() -> None:
    white = compile_table_filter("")
    black = compile_table_filter("   ", "black_regex", match_empty=False)
    assert white.is_empty and white.matches("a", "b") and white.matches_all
    assert black.is_empty and not black.matches("a", "b") and not black.matches_all
    assert compile_table_filter(None).matches("a", "b")


def test_groups_and_backreferences_keep_their_meaning_with_several_patterns() -> None:
    f = compile_table_filter(r"(a)\.\1x,(b)\.\1y")
    assert f.matches("a", "ax")
    assert f.matches("b", "by")
    assert not f.matches("b", "bx")


def test_inline_flags_in_one_pattern() -> None:
    f = compile_table_filter(r"(?i)shop\.x,other\.y")
    assert f.matches("shop", "x") and f.matches("other", "y")
    assert not f.matches("shop", "y")


def test_bad_regex_names_key_and_pattern() -> None:
    with pytest.raises(FilterError) as info:
        compile_table_filter(r"ok\..*, bad[\..* ", key="canal.instance.filter.regex")
    err = info.value
    assert isinstance(err, ConfigError)
    assert err.key == "canal.instance.filter.regex"
    assert "canal.instance.filter.regex" in str(err)
    assert repr(r"bad[\..*") in str(err)
    with pytest.raises(FilterError, match="black_regex"):
        compile_table_filter("a(b", "black_regex", match_empty=False)
    with pytest.raises(FilterError, match=r"\*\*"):
        compile_table_filter("**")


def test_memo_is_bounded_and_correct() -> None:
    from canal import filter as filter_module

    f = compile_table_filter(r"s\.t\d+")
    for i in range(filter_module._MEMO_MAX + 10):
        assert f.matches("s", f"t{i}")
    assert len(f._memo) <= filter_module._MEMO_MAX
    assert not f.matches("s", "x")
    assert not f.matches("s", "x")  # a memoized False is still False


def test_matches_is_fast() -> None:
    f = compile_table_filter(",".join(rf"s{i}\.t{i}_.*" for i in range(50)))
    assert f.matches("s7", "t7_x")
    t0 = time.perf_counter()
    for _ in range(100_000):
        f.matches("s7", "t7_x")
    per = (time.perf_counter() - t0) / 100_000
    assert per < 2e-6, f"{per * 1e9:.0f} ns per call"


# ---- white + black, narrowed


def test_white_and_black() -> None:
    fs = TableFilters.from_strings(r"shop\..*", r"shop\.audit_.*,shop\.tmp")
    assert fs.includes("shop", "orders")
    assert not fs.includes("shop", "audit_log")
    assert not fs.includes("shop", "tmp")
    assert fs.includes("shop", "tmp2")
    assert not fs.includes("crm", "orders")


def test_defaults_include_everything() -> None:
    fs = TableFilters()
    assert fs.includes("any", "thing")
    fs = TableFilters.from_strings("", "")
    assert fs.includes("any", "thing")


def test_empty_black_list_excludes_nothing_however_compiled() -> None:
    fs = TableFilters(compile_table_filter(r"shop\..*"), compile_table_filter(""))
    assert fs.includes("shop", "orders")
    assert not fs.includes("crm", "orders")


def test_black_only() -> None:
    fs = TableFilters.from_strings(r".*\..*", r"mysql\..*")
    assert fs.includes("shop", "orders")
    assert not fs.includes("mysql", "user")


def test_from_strings_names_the_key_of_the_bad_filter() -> None:
    with pytest.raises(FilterError) as info:
        TableFilters.from_strings(r"ok\..*", "bad(", black_key="canal.instance.filter.black.regex")
    assert info.value.key == "canal.instance.filter.black.regex"


def test_client_filter_narrows_instance_filter() -> None:
    instance = TableFilters.from_strings(r"shop\..*", r"shop\.secret")
    client = compile_table_filter(r".*\.orders,crm\..*")
    narrowed = instance.narrowed(client)
    assert narrowed.includes("shop", "orders")
    assert not narrowed.includes("crm", "contacts")  # the client asks, but the instance does not capture crm
    assert not narrowed.includes("shop", "items")  # the instance captures it, the client did not ask
    assert not instance.narrowed(compile_table_filter(r"shop\..*")).includes("shop", "secret")
    # the original is untouched
    assert instance.includes("shop", "items")


def test_narrowed_with_pairs_and_trivial_filters() -> None:
    a = TableFilters.from_strings(r"shop\..*", r"shop\.a")
    b = TableFilters.from_strings(r".*\.[a-c]", r"shop\.c")
    ab = a.narrowed(b)
    assert not ab.includes("shop", "a")
    assert ab.includes("shop", "b")
    assert not ab.includes("shop", "c")
    assert not ab.includes("shop", "d")
    assert a.narrowed(None) is a
    assert a.narrowed(compile_table_filter("")).white is a.white  # an empty client filter narrows nothing
    narrowed = compile_table_filter(r"x\..*").narrowed(compile_table_filter(r".*\.y"))
    assert narrowed.matches("x", "y") and not narrowed.matches("x", "z")


# ---- hypothesis: matches == the straightforward reference

_atoms = st.sampled_from(["a", "b", "ab", "A", ".", r"\.", ".*", ".+", "[ab]", "[a-c]*", "x?", r"\d", "_", "(a|b)"])
_pattern = st.lists(_atoms, min_size=1, max_size=5).map("".join)
_name = st.text(alphabet="abcAB_x.0 ", max_size=5)


@settings(max_examples=200, deadline=None)
@given(st.lists(_pattern, min_size=1, max_size=4), st.lists(st.tuples(_name, _name), min_size=1, max_size=6))
def test_matches_agrees_with_reference(patterns: list[str], names: list[tuple[str, str]]) -> None:
    f = compile_table_filter(",".join(patterns))
    for schema, table in names:
        expected = any(re.fullmatch(p, f"{schema}.{table}", re.I) for p in patterns)
        assert f.matches(schema, table) is expected
        assert f.matches(schema, table) is expected  # memoized answer


# ---- field filters


def _table(schema: str = "shop", table: str = "orders") -> TableSchema:
    return TableSchema(
        schema,
        table,
        (
            ColumnMeta("id", is_key=True),
            ColumnMeta("amount"),
            ColumnMeta("Note"),
            ColumnMeta("secret"),
        ),
    )


def test_field_white_list_keeps_listed_columns_only() -> None:
    ff = FieldFilter.parse("shop.orders:amount/note")
    t = _table()
    assert ff.keep_indexes(t) == (1, 2)
    narrowed = ff.project_schema(t)
    assert narrowed.names == ("amount", "Note")
    assert narrowed.key_indexes == ()  # canal does not keep the primary key unless listed
    row = ff.project(RowData(t, before=(1, 5, "a", "x"), after=(1, 6, "b", "y")))
    assert row.table is narrowed
    assert (row.before, row.after) == ((5, "a"), (6, "b"))
    assert row.after_dict() == {"amount": 6, "Note": "b"}


def test_field_white_list_with_key_listed() -> None:
    ff = FieldFilter.parse("SHOP.ORDERS:ID/Secret")
    t = _table()
    row = ff.project(RowData(t, after=(1, 5, "a", "x")))
    assert row.table.names == ("id", "secret")
    assert row.table.key_indexes == (0,)
    assert row.key() == (1,)
    assert row.before is None


def test_field_black_list_drops_columns() -> None:
    ff = compile_field_filter("", "shop.orders:secret")
    t = _table()
    assert ff.keep_indexes(t) == (0, 1, 2)
    row = ff.project(RowData(t, before=(1, 5, "a", "x")))
    assert row.before == (1, 5, "a") and row.after is None


def test_field_white_list_wins_over_black_list_as_in_canal() -> None:
    ff = FieldFilter.parse("shop.orders:id/secret", "shop.orders:secret")
    assert ff.keep_indexes(_table()) == (0, 3)


def test_other_tables_pass_untouched() -> None:
    ff = FieldFilter.parse("shop.orders:id", "shop.items:secret")
    other = _table("shop", "customers")
    row = RowData(other, after=(1, 2, "n", "s"))
    assert ff.keep_indexes(other) is None
    assert ff.project_schema(other) is other
    assert ff.project(row) is row
    # a black list naming no existing column changes nothing either
    assert ff.project(RowData(_table("shop", "items"), after=(1, 2, "n", "s"))).table.names == ("id", "amount", "Note")
    assert FieldFilter.parse("shop.x:nothere").keep_indexes(_table("shop", "x")) == ()


def test_single_column_and_empty_projection() -> None:
    t = _table()
    row = FieldFilter.parse("shop.orders:note").project(RowData(t, after=(1, 2, "n", "s")))
    assert row.after == ("n",)
    row = FieldFilter.parse("shop.orders:nothere").project(RowData(t, after=(1, 2, "n", "s")))
    assert row.after == () and len(row.table) == 0


def test_projection_cached_per_schema_object() -> None:
    ff = FieldFilter.parse("shop.orders:id/amount")
    t1 = _table()
    s1 = ff.project_schema(t1)
    assert ff.project_schema(t1) is s1
    assert ff.project(RowData(t1, after=(1, 2, "n", "s"))).table is s1
    t2 = _table()  # an equal but distinct schema version gets its own projection
    assert ff.project_schema(t2) is not s1
    assert ff.project_schema(t2) == s1
    assert len(ff._cache) == 2
    del t1, t2
    gc.collect()
    assert len(ff._cache) == 0  # dead schemas leave the cache


def test_schema_change_is_seen() -> None:
    ff = FieldFilter.parse("shop.orders:note")
    t = _table()
    t_after_alter = TableSchema("shop", "orders", (ColumnMeta("note"), *t.columns[:2]))
    assert ff.keep_indexes(t) == (2,)
    assert ff.keep_indexes(t_after_alter) == (0,)


def test_empty_field_filter() -> None:
    ff = FieldFilter.parse("", None)
    assert ff.is_empty
    t = _table()
    row = RowData(t, after=(1, 2, "n", "s"))
    assert ff.project(row) is row
    assert not FieldFilter.parse("a.b:c").is_empty


def test_field_filter_several_tables_and_spaces() -> None:
    ff = FieldFilter.parse(" shop.orders : id / amount , shop.items:id ,, shop.orders:note")
    assert ff.keep_indexes(_table()) == (0, 1, 2)  # repeated table entries add up
    assert ff.keep_indexes(_table("shop", "items")) == (0,)


@pytest.mark.parametrize("bad", ["shop.orders", "shop.orders:", "orders:id", "shop.orders:a:b", ".x:a", "x.:a"])
def test_malformed_field_filter_names_key(bad: str) -> None:
    with pytest.raises(FilterError) as info:
        FieldFilter.parse(bad, include_key="canal.instance.filter.field")
    assert info.value.key == "canal.instance.filter.field"
    assert repr(bad.strip()) in str(info.value)
    with pytest.raises(FilterError, match="black_field_filter"):
        compile_field_filter("", bad)


@pytest.mark.parametrize(
    ("white", "black", "schema", "expected"),
    [
        (r"shop\..*", "", "shop", True),
        (r"shop\..*", "", "other", False),
        (r"shop\.orders", "", "shop", True),
        (r"shop\.orders", "", "SHOP", True),  # names compare as canal's filter does: case-insensitive
        (r"shop\.orders", "", "shop2", False),
        (r".*\..*", "", "anything", True),
        ("", "", "anything", True),
        (r".*orders", "", "other", True),  # no schema part to read: it may match any schema
        (r"(shop|crm)\..*", "", "crm", True),
        (r"(shop|crm)\..*", "", "hr", False),
        (r"shop\.a|crm\.b", "", "hr", True),  # a top-level | : unsure, so it passes
        (r"s[.]x\.t", "", "s.x", True),  # a dot in a class is not the separator
        (r"s[.]x\.t", "", "s", False),
        (r"shop\..*,crm\.b", "", "crm", True),
        (r".*\..*", r"other\..*", "other", False),  # every table of it black-listed
        (r".*\..*", r"other\.t", "other", True),  # only some
        (r".*\..*", r".*\..*", "other", False),
    ],
)
def test_a_database_ddl_passes_when_a_table_of_it_may(white: str, black: str, schema: str, expected: bool) -> None:
    filters = TableFilters.from_strings(white, black)
    assert filters.may_include_schema(schema) is expected
    if not expected:  # never wrong in that direction: no table of the schema is included
        assert not any(filters.includes(schema, t) for t in ["t", "orders", "b", "a", "x"])


_NAME_CHARS = st.sampled_from([*"abcAB_z09$-. ", "K", "\u212a", "s", "\u017f", "\u00e9", "\u00c9"])


@settings(max_examples=300, deadline=None)
@given(
    names=st.lists(st.text(_NAME_CHARS, min_size=1, max_size=6), min_size=1, max_size=3),
    probe=st.text(_NAME_CHARS, min_size=1, max_size=8),
    escape_dots=st.booleans(),
)
def test_a_filter_of_plain_names_answers_as_its_regexes(names: list[str], probe: str, escape_dots: bool) -> None:
    """Plain names are looked up, not matched (a shared reader asks each table of each destination): the answer is
    the regexes' -- case-insensitive, a name with a metacharacter or outside ASCII matched by its regex."""
    patterns = [re.sub(r"\.", r"\\.", n) if escape_dots else n for n in names]
    patterns = [p for p in patterns if p.strip() and "," not in p]
    if not patterns:
        return
    try:
        f = compile_table_filter(",".join(patterns))
    except FilterError:
        return
    compiled = [re.compile(p, re.IGNORECASE | re.DOTALL) for p in f.patterns]  # as the filter split them
    # a shared reader routes an ASCII name by the names' index (TableFilters.literal_names) when there is one
    index = TableFilters(f).literal_names
    for name in (probe, *names, *(n.upper() for n in names), *(n.lower() for n in names)):
        expected = any(c.fullmatch(name) is not None for c in compiled)
        assert f.matches_name(name) is expected, (patterns, name)
        if index is not None and name.isascii():
            assert (name.lower() in index) is expected, (patterns, name)
    assert TableFilters(f, compile_table_filter("x", match_empty=False)).literal_names is None  # a black list
