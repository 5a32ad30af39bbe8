"""Many tables cost per change what one table costs: the parser's work for a stream round-robin over N tables grows
with N, not with N squared (``benchmarks/bench_tables.py`` measures the same on a real server, in seconds).

Counted, not timed: the Python calls the parser thread makes (``threading.setprofile``) from the instance's start
to the last change handed to the store, the same transactions over 50 tables and over 200. A cost paid once per
table (its first table map, its decoders, its schema lookups) is fine; one that grows with the number of tables the
destination knows -- the schema history's foreign keys were once indexed again for each table's first DELETE or
UPDATE, a pass over every table each time -- makes each table dearer as the schema grows.
"""

from __future__ import annotations

import collections
import itertools
import threading
import types
from typing import Any

from canal.config import InstanceConfig, MasterConfig
from canal.instance import Instance
from canal.testing.fake import FakeMysql

_names = itertools.count()


def _parser_calls(tables: int) -> int:
    """The calls of the parser thread while it hands on an insert, an update and a delete of each of ``tables``
    tables (each change its own transaction, round-robin over the tables, as the benchmark writes them), read
    from a start after the tables were created (the schema history bootstraps them all)."""
    with FakeMysql(name=f"many_tables{next(_names)}", server_id=1) as fake:
        fake.execute("CREATE DATABASE many")
        for i in range(tables):
            fake.execute(f"CREATE TABLE many.t{i} (id INT PRIMARY KEY, a INT, b VARCHAR(20))")
        start = fake.master_status()
        for i in range(tables):
            fake.insert(f"many.t{i}", {"id": i, "a": i, "b": "a"})
        for i in range(tables):
            fake.update(f"many.t{i}", {"id": i}, {"b": "b"})
        for i in range(tables):
            fake.delete(f"many.t{i}", {"id": i})
        cfg = InstanceConfig(
            destination=f"many{tables}",
            master=MasterConfig(address=fake.address, journal_name=start.journal_name, position=start.position),
        )
        calls: collections.Counter[str] = collections.Counter()

        def count(_frame: types.FrameType, event: str, _arg: Any) -> None:
            if event in ("call", "c_call"):
                calls[threading.current_thread().name] += 1

        threading.setprofile(count)  # threads started from here on: the instance's parser
        try:
            with Instance(cfg) as inst:
                changes = 0
                while changes < 3 * tables:
                    msg = inst.get(1024, timeout=1.0, linger=0.05)
                    changes += sum(len(e.row_change.rows) for e in msg.entries if e.row_change is not None)
        finally:
            threading.setprofile(None)  # type: ignore[arg-type]
    assert changes == 3 * tables
    parser = [n for n in calls if n.startswith("canal-parser-")]
    assert len(parser) == 1, calls
    return calls[parser[0]]


def test_the_parsers_calls_per_table_do_not_grow_with_the_tables() -> None:
    few, many = _parser_calls(50), _parser_calls(200)
    # measured: 655-670 calls a table at both sizes (the waits vary the count a little); with the foreign keys
    # indexed again for each table, 674 at 50 tables and 816 at 200 (before other changes added about 45 a table)
    assert many / 200 <= 1.08 * few / 50, (few / 50, many / 200)
