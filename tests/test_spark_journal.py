"""run_batches' journal: a file it cannot read is a typed error before anything is consumed, never ignored."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")

from canal.config import InstanceConfig, MasterConfig
from canal.instance import Instance
from canal.spark import JournalError, run_batches
from canal.testing.fake import FakeMysql


@pytest.fixture
def inst(fake_mysql: FakeMysql) -> Iterator[Instance]:
    fake_mysql.execute("CREATE TABLE shop.t (id INT PRIMARY KEY)")
    for i in range(5):
        fake_mysql.insert("shop.t", {"id": i})
    config = InstanceConfig(
        destination="journal",
        master=MasterConfig(address=fake_mysql.address, journal_name="mysql-bin.000001", position=4),
    )
    with Instance(config) as inst:
        yield inst


@pytest.mark.parametrize(
    "text",
    ["", "{", "not json", "[]", '{"pending": "7"}', '{"pending": true}', '{"other": 1}', '{"pending": 1, "done": 2}'],
)
def test_a_corrupt_journal_fails_before_anything_is_consumed(inst: Instance, tmp_path: Path, text: str) -> None:
    journal = tmp_path / "journal.json"
    journal.write_text(text)
    with pytest.raises(JournalError, match="journal"):
        run_batches(inst, None, lambda df, batch_id: None, journal=journal, max_batches=1)
    assert inst.get_cursor() is None and inst.list_batch_ids() == []  # nothing acked, nothing outstanding
    assert inst.store.stats().get_sequence == -1  # nothing taken from the store
    assert journal.read_text() == text  # the evidence is left for the user


def test_an_unreadable_journal_is_a_journal_error(inst: Instance, tmp_path: Path) -> None:
    journal = tmp_path / "journal.json"
    journal.mkdir()  # a directory where the file should be: reading it fails
    with pytest.raises(JournalError, match="cannot read"):
        run_batches(inst, None, lambda df, batch_id: None, journal=journal, max_batches=1)
    assert inst.get_cursor() is None
