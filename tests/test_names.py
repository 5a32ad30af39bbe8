"""A table's name as one string (canal.names): it reads back as the name it was written from, whatever the name holds
-- dots, backquotes, quotes, spaces, non-ASCII letters --, two names never share a string, and a plain name is
written as it always was."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from canal.names import qualified, split_qualified

NAMES = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)


@given(NAMES, NAMES)
def test_a_name_reads_back_as_written(schema: str, table: str) -> None:
    assert split_qualified(qualified(schema, table)) == (schema, table)


@given(NAMES, NAMES, NAMES, NAMES)
def test_two_names_never_share_a_string(a: str, b: str, c: str, d: str) -> None:
    assert (qualified(a, b) == qualified(c, d)) == ((a, b) == (c, d))


@pytest.mark.parametrize(
    ("schema", "table", "text"),
    [
        ("shop", "orders", "shop.orders"),
        ("shop.eu", "t", "`shop.eu`.t"),
        ("db", "a.b", "db.`a.b`"),
        ("db", "a`b", "db.`a``b`"),
        ("q'\"", "tä", "q'\".tä"),
        ("", "t", ".t"),
    ],
)
def test_plain_names_stand_for_themselves_and_the_others_are_backquoted(schema: str, table: str, text: str) -> None:
    assert qualified(schema, table) == text
    assert split_qualified(text) == (schema, table)


@pytest.mark.parametrize("text", ["nodot", "shop.eu.t", "`open.t", "a`b.t", "`a`x.t", "db.`t`x"])
def test_a_string_that_names_no_one_table_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        split_qualified(text)
