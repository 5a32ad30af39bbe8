"""Binary cells from canal text (their bytes read as latin-1) typed all at once: the same values, and the same
errors, as the per-value path, for any text, nulls, slices and chunks (hypothesis)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("pyarrow")

import pyarrow as pa

from canal.lake.types import MirrorTypeError, latin1_bytes, typed_array, typed_strings

# mostly latin-1 (the bytes of a binary value), sometimes a character beyond it (not binary text)
_LATIN1 = st.text(st.characters(min_codepoint=0, max_codepoint=0xFF), max_size=40)
_BEYOND = st.text(st.characters(min_codepoint=0xF0, max_codepoint=0x1FF, exclude_categories=["Cs"]), max_size=3)
_TEXTS = st.lists(st.none() | _LATIN1 | _BEYOND, max_size=40) | st.lists(st.none() | _LATIN1, max_size=40)


def _outcome(convert: Any) -> Any:
    try:
        return convert()
    except MirrorTypeError as exc:
        return str(exc)


@given(_TEXTS, st.integers(0, 5), st.integers(0, 3))
def test_typed_at_once_as_value_by_value(texts: list[str | None], start: int, chunks: int) -> None:
    strings = pa.array(texts, pa.string()).slice(min(start, len(texts)))
    kept = texts[min(start, len(texts)) :]
    if chunks and len(kept) > 1:  # the same values in several chunks
        cut = len(kept) // 2
        strings = pa.chunked_array([strings.slice(0, cut), strings.slice(cut)], pa.string())
    expected = _outcome(lambda: typed_array(kept, pa.binary()))
    got = _outcome(lambda: typed_strings(strings, pa.binary()))
    if isinstance(expected, str):
        assert got == expected  # the per-value path's error, naming the value
    else:
        assert isinstance(got, (pa.Array, pa.ChunkedArray)) and got.to_pylist() == expected.to_pylist()


def test_beyond_latin1_and_large_strings_go_value_by_value() -> None:
    assert latin1_bytes(pa.array(["caf\u00e9", "\u0100"])) is None
    assert latin1_bytes(pa.array(["caf\u00e9"], pa.large_string())) is None
    assert latin1_bytes(pa.array(["caf\u00e9", None, "\u00ff\u0000"])).to_pylist() == [b"caf\xe9", None, b"\xff\x00"]
