"""run_batches' journal: a file it cannot read is a typed error before anything is consumed, never ignored."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pyarrow")

from canal.instance import Instance
from canal.spark import JournalError, run_batches


@pytest.mark.parametrize(
    "text",
    ["", "{", "not json", "[]", '{"pending": "7"}', '{"pending": true}', '{"other": 1}', '{"pending": 1, "done": 2}'],
)
def test_a_corrupt_journal_fails_before_anything_is_consumed(
    shop_instance: Instance, tmp_path: Path, text: str
) -> None:
    journal = tmp_path / "journal.json"
    journal.write_text(text)
    with pytest.raises(JournalError, match="journal"):
        run_batches(shop_instance, None, lambda df, batch_id: None, journal=journal, max_batches=1)
    # nothing acked, nothing outstanding
    assert shop_instance.get_cursor() is None and shop_instance.list_batch_ids() == []
    assert shop_instance.store.stats().get_sequence == -1  # nothing taken from the store
    assert journal.read_text() == text  # the evidence is left for the user


def test_an_unreadable_journal_is_a_journal_error(shop_instance: Instance, tmp_path: Path) -> None:
    journal = tmp_path / "journal.json"
    journal.mkdir()  # a directory where the file should be: reading it fails
    with pytest.raises(JournalError, match="cannot read"):
        run_batches(shop_instance, None, lambda df, batch_id: None, journal=journal, max_batches=1)
    assert shop_instance.get_cursor() is None
