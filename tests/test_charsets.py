"""The charset table the decoder and the fake share, checked against a real MariaDB's information_schema."""

from __future__ import annotations

import codecs
from typing import Any

import pytest

from canal.sql.charsets import CHARSETS, COLLATION_CHARSETS, charset_named, charset_of_collation


def test_every_charset_has_a_python_codec_under_its_normal_name() -> None:
    for charset in CHARSETS.values():
        if charset.codec is None:
            assert charset.name == "binary"
            continue
        assert codecs.lookup(charset.codec).name == charset.codec
        assert "abc é".encode(charset.codec, "replace").decode(charset.codec).startswith("abc")


def test_unknown_ids_and_names_read_as_utf8mb4() -> None:
    assert charset_of_collation(None).name == charset_of_collation(99999).name == "utf8mb4"
    assert charset_named("UTF8").name == "utf8mb3" and charset_named("nope").codec == "utf-8"
    assert charset_of_collation(63).codec is None  # binary
    assert charset_of_collation(255).name == "utf8mb4"  # MySQL 8's utf8mb4_0900_ai_ci


@pytest.mark.integration
def test_table_matches_the_servers_collations_and_widths(mariadb: Any) -> None:
    rows = mariadb.execute(
        "SELECT co.ID, co.CHARACTER_SET_NAME, cs.MAXLEN FROM information_schema.COLLATIONS co "
        "JOIN information_schema.CHARACTER_SETS cs USING (CHARACTER_SET_NAME) WHERE co.ID IS NOT NULL"
    )
    assert len(rows) > 200
    for collation_id, charset, maxlen in rows:
        assert COLLATION_CHARSETS.get(int(collation_id)) == charset, collation_id
        assert charset_of_collation(int(collation_id)).maxlen == int(maxlen), charset
