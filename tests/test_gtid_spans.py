"""A run of one source's consecutive GTIDs taken by a GTID set at once (GtidSet.add_span, as EntryConverter.pass_over
adds the GTIDs of transactions a shared reader passed) leaves the set as adding each GTID in turn does."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from canal.errors import ParseError
from canal.gtid import GtidSet, gtid_step

_UUIDS = ("3e11fa47-71ca-11e1-9e33-c80aa9429562", "3E11FA47-71CA-11E1-9E33-C80AA9429563")


def _mysql(sid: int, tag: str, n: int) -> str:
    return f"{_UUIDS[sid]}:{tag + ':' if tag else ''}{n}"


_MYSQL_RUNS = st.lists(
    st.tuples(st.integers(0, 1), st.sampled_from(["", "tag", "Other"]), st.integers(1, 30), st.integers(1, 6)),
    max_size=6,
).map(lambda runs: [_mysql(s, t, n + k) for s, t, n, count in runs for k in range(count)])
_MARIADB_RUNS = st.lists(
    st.tuples(st.integers(0, 2), st.integers(1, 2), st.integers(1, 30), st.integers(1, 6)), max_size=6
).map(lambda runs: [f"{d}-{srv}-{n + k}" for d, srv, n, count in runs for k in range(count)])


def _by_spans(gtids: list[str], start: str) -> GtidSet:
    """What pass_over does: consecutive GTIDs of one source as one span; the others one at a time."""
    spans = GtidSet(start or None)
    run: list[str] = []
    for gtid in [*gtids, ""]:
        step = gtid_step(gtid) if gtid else None
        previous = gtid_step(run[-1]) if run else None
        if step is not None and previous is not None and step.follows(previous):
            run.append(gtid)
            continue
        if run:
            first, last = gtid_step(run[0]), gtid_step(run[-1])
            assert first is not None and last is not None
            if not spans.add_span(first.number, last):
                for one in run:
                    spans.add(one)
        run = [gtid] if gtid else []
    return spans


@settings(deadline=None, max_examples=200)
@given(
    gtids=st.one_of(_MYSQL_RUNS, _MARIADB_RUNS),
    start=st.sampled_from(["", "0-1-12", "1-2-3,0-1-40", f"{_UUIDS[0]}:1-3:10", f"{_UUIDS[0]}:tag:4-8"]),
)
def test_a_span_leaves_the_set_as_each_gtid_in_turn(gtids: list[str], start: str) -> None:
    one_by_one = GtidSet(start or None)
    try:
        for gtid in gtids:
            one_by_one.add(gtid)
    except ParseError:  # a GTID of the other flavour: the spans refuse it the same way
        with pytest.raises(ParseError):
            _by_spans(gtids, start)
        return
    spans = _by_spans(gtids, start)
    assert str(spans) == str(one_by_one)
    assert spans.is_mariadb == one_by_one.is_mariadb


def test_only_plain_gtids_are_steps() -> None:
    step = gtid_step(f"{_UUIDS[1]}:TAG:7")
    assert step is not None and step.source == (_UUIDS[1].lower(), "tag") and step.number == 7 and not step.mariadb
    step = gtid_step("0-2-9")
    assert step is not None and step.source == (0, 2) and step.number == 9 and step.mariadb
    odd = ("0-1-5 ", "0--5", "0-1-+5", "0-1-\u0665", "0-1-5-6", "-0-1")  # \u0665: an Arabic-Indic digit, not [0-9]
    for text in (" 0-1-5", "0-1-5,1-1-2", f"{_UUIDS[0]}:1-3", f"{_UUIDS[0]}:", "0-1", "x", *odd):
        assert gtid_step(text) is None, text
    assert not GtidSet("0-1-5").add_span(1, gtid_step(f"{_UUIDS[0]}:1") or pytest.fail())  # the other flavour


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_holds_answers_as_contains_for_a_gtid_read_already(data: st.DataObject) -> None:
    # what a shared reader asks of each destination's GTID set for every group it opens (GtidSet.holds)
    mariadb = data.draw(st.booleans())
    runs = _MARIADB_RUNS if mariadb else _MYSQL_RUNS
    gtids = GtidSet(mariadb=mariadb)
    for gtid in data.draw(runs):
        gtids.add(gtid)
    for probe in data.draw(runs):
        step = gtid_step(probe)
        assert step is not None
        assert gtids.holds(step) == gtids.contains(probe), probe
