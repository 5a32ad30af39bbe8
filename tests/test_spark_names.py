"""``canal.lake.store.names``: (schema, table) <-> a directory name, for any names a server may hold (hypothesis)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from canal.lake.store import names
from canal.spark import MirrorError

# MariaDB names: any BMP character but NUL (text, so no lone surrogate); the pool's characters drawn often
CHARACTER = st.one_of(
    st.sampled_from("./\\`'\" %#~_$-Aaé€Ω"),
    st.characters(max_codepoint=0xFFFF, exclude_characters="\0", exclude_categories=["Cs"]),
)
NAME = st.text(CHARACTER, min_size=1, max_size=12)


@settings(max_examples=300)
@given(a=st.tuples(st.text(CHARACTER, max_size=12), NAME), b=st.tuples(st.text(CHARACTER, max_size=12), NAME))
def test_directories_are_reversible_injective_and_one_plain_entry(a: tuple[str, str], b: tuple[str, str]) -> None:
    first, second = names.directory(*a), names.directory(*b)
    assert names.parse(first) == a
    assert (first == second) == (a == b)
    assert re.fullmatch(r"[A-Za-z0-9_$~.-]+", first)  # ASCII every Delta reader takes, no "/"
    assert first.count(".") == 1 and first not in (".", "..")


def test_plain_names_keep_their_directory_and_others_do_not_parse() -> None:
    assert names.directory("shop", "orders") == "shop.orders"
    assert names.directory("Shop", "Orders") != names.directory("shop", "orders")
    assert names.directory("D", "x.y") != names.directory("D.x", "y")
    for other in ["_changes", "_pycanal_steps.app.json", "shop.orders.rewritten", "a~2", "a~2e.b", "a.b c"]:
        assert names.parse(other) is None


def test_a_name_too_long_for_a_directory_is_a_mirror_error() -> None:
    with pytest.raises(MirrorError, match="over the"):
        names.directory("Ω" * 64, "Ω" * 64)
    with pytest.raises(MirrorError):
        names.directory("shop", "")
