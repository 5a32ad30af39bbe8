"""The Delta mirror written by Spark tasks: no change row collected to the driver, tables in parallel.

Under ``foreachBatch``, :meth:`DeltaMirror.__call__ <canal.lake.mirror.DeltaMirror.__call__>` hands a DataFrame to
:func:`apply_on_executors`. A batch without DDL (nearly all of them) is written by Spark tasks through the mirror's
own code, so no change row is collected to the driver:

* a batch in one partition (the ``canal`` source's micro-batches) by its one task, tables in parallel threads
  (``mapInArrow``: one Spark job, no shuffle); the task answers instead, writing nothing, when the batch holds DDL;
* a batch in several partitions grouped by table, each group by a task (``applyInArrow``), so a cluster adds mirror
  throughput -- after a first job that looks for DDL (the batch is cached for the two).

Each task builds the mirror from :meth:`DeltaMirror.settings` (a frozen :class:`~canal.lake.settings.MirrorSettings`;
once per Python worker and value, kept for the next batches, with the Delta tables it opened -- which it opens anew
when the driver's :attr:`~canal.lake.mirror.DeltaMirror.tables_epoch` says that the driver rewrote, moved or dropped a
table since: a kept handle would read the new table's commits on top of the old table's files, or fail)
and applies its rows without the step journal: a table whose last
committed batch number is at least the batch's is skipped, so a retried task, a replayed micro-batch and a speculative
duplicate change nothing (merge-on-read: a duplicate append holds the same changes, and the latest change per key is
the same row; copy-on-write: the second MERGE fails on Delta's conflict check and its retry is skipped).

Which rows are new, and the batch's number, come from the mirror's record (:mod:`canal.lake.identity.admit`), before any
task writes: the one-partition task admits its batch itself (it has all of its rows; a batch the record refuses, or
whose partial row images the mirror cannot complete, is answered ``refused`` with nothing written, and the driver
raises the typed error); for several partitions the driver
admits the batch from one aggregation of its rows (its fingerprint, destinations, a change whose lineage nothing
relates to the record's, its tables), and each task applies the rows of its tables the record does not hold. Each
task answers what its rows add to the record (:class:`~canal.lake.identity.lineage.Advance`), which the driver writes
once every answer is in. Tasks check before each commit that the driver still holds the mirror's lease (its token).

A batch that holds DDL is applied by the driver, in order, with the step journal (:meth:`DeltaMirror.apply`): DDL can
touch several tables at once (``RENAME TABLE a TO b, b TO a``), which per-table tasks could not order. The driver
waits for the folds under way first. The one-partition task hands such a batch over as an Arrow file beside the
tables (the mirror's root, which the driver and the executors both reach), never inside its answer: a collected
answer travels through the driver's JVM heap, and a batch of tens of megabytes there can exhaust it.

Every task ends its answer with one ``done`` row (a table group's, or the whole partition's). The driver counts them
before it records anything: PySpark's ``collect`` returns the rows it received when the thread serving them dies
(an ``OutOfMemoryError`` does that), so a short answer must fail the batch -- Spark then runs it again, and the
tables a task wrote are skipped by batch id -- rather than pass as a batch with fewer tables.

Folds run as Spark tasks too: the tasks report which tables' logs are due (:meth:`DeltaMirror.fold_due`), and the
driver starts one Spark job folding them, a table per task, in a background thread -- the next micro-batches land
meanwhile (appends and folds never block each other: :mod:`canal.lake.store.changelog`).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

import attrs

from canal.gtid import GtidSet
from canal.lake.apply.partial import MirrorPartialImageError
from canal.lake.forms.packed import is_packed, unpack_all
from canal.lake.forms.ranges import RANGE_FROM, RANGE_TO, UNMARKED_PATTERN, Cursor
from canal.lake.forms.ranges import marked as carries_marks
from canal.lake.forms.typed_batch import TypedBatch
from canal.lake.identity.admit import admit, check_interrupted, check_range, range_end
from canal.lake.identity.applied import (
    Applied,
    Pending,
    decide,
    position_key,
    read_applied,
    root_number,
    with_pending,
    write_applied,
)
from canal.lake.identity.forks import find_fork, fork_error
from canal.lake.identity.forks import parse as parse_origins
from canal.lake.identity.journal import StepJournal
from canal.lake.identity.lineage import (
    FINGERPRINT_FIELDS,
    Advance,
    check_destination,
    fingerprint_of,
    follow,
    unprovable_error,
)
from canal.lake.planning.plan import OPTIONAL_COLUMNS
from canal.lake.settings import MirrorSettings
from canal.lake.store import fs, names
from canal.lake.types import MirrorCheckpointError, MirrorError, MirrorLineageError

if TYPE_CHECKING:
    from canal.lake.mirror import DeltaMirror
    from canal.lake.results import ApplyResult

RESULT_SCHEMA = "table string, status string, rows long, fold_due boolean, spill string, lineage string"
DONE_MARK = "done"  # the status of the row that ends a task's answer (its rows: the change rows it was given)
DDL_MARK = "ddl"  # the status a one-partition task answers for a batch with DDL, having applied nothing
# the status a one-partition task answers, having applied nothing, for a batch the mirror's record refuses
# (canal.lake.identity.admit): ``spill`` names the error's class, ``lineage`` holds its message; the driver raises it
REFUSED_MARK = "refused"
_REFUSALS: dict[str, type[MirrorError]] = {
    "MirrorLineageError": MirrorLineageError,
    "MirrorCheckpointError": MirrorCheckpointError,
}


def _refusal(exc: MirrorError) -> tuple[str, str]:
    """What a task answers for an error that refused its batch: the error's class and what the driver rebuilds it
    from (its message; a partial image's fields, as JSON)."""
    if isinstance(exc, MirrorPartialImageError):
        fields = {"schema": exc.schema, "table": exc.table, "columns": exc.columns, "key": exc.key}
        return type(exc).__name__, json.dumps({**fields, "reason": exc.reason})
    return type(exc).__name__, str(exc)


def _refused(kind: str | None, text: str | None) -> MirrorError:
    """The error a task answered ``refused`` with (:func:`_refusal`), for the driver to raise."""
    if kind == MirrorPartialImageError.__name__ and text is not None:
        return MirrorPartialImageError(**json.loads(text))
    return _REFUSALS.get(kind or "", MirrorError)(text)


SPILL_PREFIX = "_pycanal_ddl_batch."  # files of batches with DDL handed from a task to the driver, in the root


def _result_arrow() -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            ("table", pa.string()),
            ("status", pa.string()),
            ("rows", pa.int64()),
            ("fold_due", pa.bool_()),
            ("spill", pa.string()),
            ("lineage", pa.string()),
        ]
    )


def _answer(rows: list[tuple[str, str, int, bool, str | None, str | None]]) -> Any:
    """Result rows ``(table, status, rows, fold_due, spill, lineage)`` as a table of :data:`RESULT_SCHEMA`
    (``lineage``, on a task's ``done`` row: what its rows add to the mirror's record, as JSON -- :func:`_outcome`)."""
    import pyarrow as pa

    schema = _result_arrow()
    columns = list(zip(*rows, strict=True))
    return pa.Table.from_arrays(
        [pa.array(list(values), type=field.type) for values, field in zip(columns, schema, strict=True)],
        schema=schema,
    )


_WORKER_MIRRORS: dict[MirrorSettings, DeltaMirror] = {}
_WORKER_LOCK = threading.Lock()


def worker_mirror(kind: type[DeltaMirror], settings: MirrorSettings, epoch: str) -> DeltaMirror:
    """The mirror a task writes with (``kind``: the driver's mirror class, so this module need not import it): one
    per settings in a Python worker, kept between tasks so its open Delta tables are reused; it starts no fold of its
    own and never writes on executors itself. ``epoch``: the driver's tables epoch (module docstring)."""
    with _WORKER_LOCK:
        mirror = _WORKER_MIRRORS.get(settings)
        if mirror is None:
            own = attrs.evolve(settings, background_folds=False, on_executors=False)
            mirror = _WORKER_MIRRORS[settings] = kind(**own.arguments())
            mirror.sole_log_writer = False  # folds run in other tasks: appends go through deltalake's checks
        mirror.follow_tables_epoch(epoch)
        return mirror


def write_group(
    kind: type[DeltaMirror],
    settings: MirrorSettings,
    epoch: str,
    number: int,
    rows: Any,
    recorded: Applied | None,
    token: str | None,
    outcome: dict[str, Any] | None = None,
    skip: bool = False,
) -> Any:
    """Change rows of a batch (one table's, or a whole batch's typed batch) the driver admitted as ``number``,
    applied by a task -- those the record before the batch (``recorded``) does not hold -- while the driver holds
    the lease ``token``: one result row per table, then the ``done`` row, holding what the rows add to the record
    (``outcome``: the admission's, when the task admitted the batch itself; ``skip``: the batch is a replay, none of
    it applied, its tables reported skipped)."""
    mirror = worker_mirror(kind, settings, epoch)
    mirror.fencing.token = token  # its commits fenced by the driver's lease (canal.lake.identity.lease)
    result = mirror.apply(rows, number, steps_journal=False, fold=False, follow=recorded, skip=skip)
    due = set(result.folds)
    answer: list[tuple[str, str, int, bool, str | None, str | None]] = [
        (name, result.tables[name], 0, name in due, None, None) for name in sorted(result.tables)
    ]
    changes = rows.changes if isinstance(rows, TypedBatch) else rows
    advance = follow(changes, recorded, settings.root, settings.app_id).advance
    lineage = {**(outcome or {}), "advance": advance.to_json()}
    # the newest change the task applied and its execute time, for the driver's metrics (canal.lake.upkeep.health)
    lineage["newest"], lineage["newest_ms"] = result.newest, result.newest_time_ms
    answer.append(("", DONE_MARK, rows.num_rows, False, None, json.dumps(lineage)))
    return _answer(answer)


def fold_in_task(kind: type[DeltaMirror], settings: MirrorSettings, epoch: str, name: str) -> None:
    """A Spark task's fold of one table (by its directory name, :func:`canal.lake.store.names.directory`)."""
    from canal.lake.store.changelog import FoldRaceError

    pair = names.parse(name)
    if pair is None:
        raise MirrorError(f"{name!r} names no mirror table")
    schema, table = pair
    # a speculative twin of this task folded the table, or appends kept it from trimming the log (the next fold
    # trims it): nothing to do now
    with contextlib.suppress(FoldRaceError):
        worker_mirror(kind, settings, epoch).fold(schema, table)


def write_partition(
    kind: type[DeltaMirror], settings: MirrorSettings, epoch: str, batch_id: int, batches: Any, token: str | None
) -> Any:
    """A micro-batch held by one partition, admitted (:mod:`canal.lake.identity.admit`) and applied by its task (tables
    in parallel threads) -- or, when it holds DDL, written to a file in the mirror's root and answered with one row
    naming it, nothing applied: the driver then applies it, in order, without reading the batch a second time.
    Packed batches (``images=packed``) are unpacked here (:func:`canal.lake.forms.packed.unpack_all`) and handed over to
    the driver packed. A batch the record refuses, or whose partial images the mirror cannot complete
    (:class:`~canal.lake.apply.partial.MirrorPartialImageError`), is answered ``refused``, nothing written."""
    import pyarrow as pa
    import pyarrow.compute as pc

    received = list(batches)
    rows = pa.Table.from_batches(received) if received else pa.table({"is_ddl": pa.array([], pa.bool_())})
    batch: Any = rows  # what the mirror applies: the change rows, or the packed rows unpacked
    if received and is_packed(rows.column_names):
        batch = unpack_all(rows)
    changes = batch.changes if isinstance(batch, TypedBatch) else batch  # the metadata of each change row
    # the root's options, for the reads below (in an object store) before the task's mirror is built
    fs.register(settings.root, "the mirror's root", settings.options or None)
    if changes.num_rows == 0:
        answer = _answer([("", DONE_MARK, 0, False, None, None)])
    elif pc.any(changes.column("is_ddl")).as_py() or _for_the_driver(changes):
        path = fs.join(settings.root, f"{SPILL_PREFIX}{batch_id}.{uuid.uuid4().hex}.arrow")
        _spill(path, rows)
        answer = _answer([("", DDL_MARK, changes.num_rows, False, path, None)])
    else:
        try:
            journal = StepJournal(settings.root, settings.app_id).read()
            admitted = admit(changes, batch_id, settings.root, settings.app_id, journal, filtered=False)
            outcome = {
                "number": admitted.number,
                "fingerprint": admitted.fingerprint,
                "skip": admitted.skip,
                "replay": admitted.replay,
                "through": admitted.through,
            }
            number, recorded = admitted.number, admitted.recorded
            answer = write_group(kind, settings, epoch, number, batch, recorded, token, outcome, admitted.skip)
        # refused before anything was written: by the record, or a partial image the mirror cannot complete (the
        # completion runs before any table's first write in a batch without DDL: canal.lake.apply.partial)
        except (MirrorLineageError, MirrorCheckpointError, MirrorPartialImageError) as exc:
            answer = _answer([("", REFUSED_MARK, changes.num_rows, False, *_refusal(exc))])
    yield from answer.to_batches()


def _spill(path: str, rows: Any) -> None:
    """Write the batch ``rows`` whole to ``path``: locally streamed to a temporary file renamed over it (a batch of
    tens of megabytes is not held twice in memory), in an object store serialized and PUT once."""
    import pyarrow as pa

    from canal.files import AtomicFile

    if fs.remote(path):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_file(sink, rows.schema) as writer:
            writer.write_table(rows)
        fs.write_bytes(path, sink.getvalue().to_pybytes())
        return
    with AtomicFile(path) as spill:
        with pa.ipc.new_file(spill.fh, rows.schema) as writer:
            writer.write_table(rows)
        spill.publish()


def _for_the_driver(rows: Any) -> bool:
    """Whether a batch without DDL still needs the driver's :meth:`DeltaMirror.apply`: statements (it stops at DML
    ones) or rows marked in ``props`` (an XA transaction's, held until its commit; a cascade's, where it stops)."""
    import pyarrow.compute as pc

    if "sql" in rows.column_names and pc.any(pc.is_valid(rows.column("sql"))).as_py():
        return True
    return "props" in rows.column_names and bool(pc.any(carries_marks(rows.column("props"))).as_py())


def _read_spill(path: str) -> Any:
    """The batch a task wrote to ``path`` (it is deleted once read: the driver applies it now, and a retry of the
    batch writes its own)."""
    import pyarrow as pa

    try:
        if fs.remote(path):
            table = pa.ipc.open_file(pa.py_buffer(fs.read_bytes(path))).read_all()
        else:  # mapped, not copied into memory
            with pa.memory_map(path) as source:
                table = pa.ipc.open_file(source).read_all()
    finally:
        fs.unlink(path)
    return table


def _drop_spills(root: str | os.PathLike[str], batch_id: int) -> None:
    """Delete the files of DDL batches before ``batch_id`` that a failed driver left behind (read or not, Spark
    never asks for those batches again)."""
    root = os.fspath(root)
    for name in fs.listdir(root):
        if not (name.startswith(SPILL_PREFIX) and name.endswith(".arrow")):
            continue
        try:
            spilled_for = int(name.removeprefix(SPILL_PREFIX).split(".", 1)[0])
        except ValueError:
            continue
        if spilled_for < batch_id:
            fs.unlink(fs.join(root, name))


def _checked(outcome: list[Any], expected: int, batch_id: int) -> list[Any]:
    """``outcome`` (collected result rows) when it holds the ``done`` or ``ddl`` rows of all ``expected`` task
    answers (a ``done`` row counts the change rows its task was given); a :class:`~canal.lake.types.MirrorError`
    otherwise -- part of the answer was lost on its way to the driver, and the batch must fail rather than be
    recorded with fewer tables."""
    from canal.lake.types import MirrorError

    ends = sum(1 for row in outcome if row["status"] in (DONE_MARK, DDL_MARK, REFUSED_MARK))
    if ends != expected:
        raise MirrorError(
            f"batch {batch_id}: the driver received the answers of {ends} of {expected} mirror tasks (Spark lost "
            "the rest of the collected result); nothing is recorded for the batch, and the tables the tasks wrote "
            "are skipped by batch id when Spark runs it again"
        )
    return outcome


def apply_on_executors(mirror: DeltaMirror, df: Any, batch_id: int) -> ApplyResult:
    """Apply a micro-batch (a Spark DataFrame of change rows) with Spark tasks (module docstring)."""
    mirror.hold_lease()  # the driver writes the root (canal.lake.identity.lease), renewed while the tasks run
    try:
        return _apply_on_executors(mirror, df, batch_id)
    finally:
        mirror.fencing.pause()


def _apply_on_executors(mirror: DeltaMirror, df: Any, batch_id: int) -> ApplyResult:
    from pyspark import StorageLevel

    began = time.perf_counter()
    mirror.check_folds()  # nothing of the batch written while a table's folds keep failing (canal.lake.upkeep.health)
    # tasks append to the change logs: what the driver staged goes first (canal.lake.store.staged)
    mirror.flush_staged()
    mirror.tasks_append = True  # the driver's own folds must not trim by whole files while tasks append
    if not mirror.reach_checked:
        spark = df.sparkSession
        # a local master's executors are threads of the driver's JVM, on its file system: nothing to check
        if not (spark.conf.get("spark.master", "") or "").startswith("local"):
            check_executors_reach(str(mirror.root), spark)
        mirror.reach_checked = True
    kind = type(mirror)
    settings = mirror.settings()
    epoch = mirror.tables_epoch  # after the DDL of earlier batches, which the driver applied
    token = mirror.fencing.held_token
    recorded = read_applied(mirror.root, mirror.app_id)  # the record before the batch (canal.lake.identity.applied)
    packed = is_packed(df.columns)  # images=packed: a few rows of packed batches, applied together by one task
    if packed:
        changes = df if _one_partition(df) else df.coalesce(1)
    else:
        # the XA marks, positions, absent columns and lineage too: a batch holding XA marks (or statements) is the
        # driver's (_for_the_driver)
        wanted = (*OPTIONAL_COLUMNS, "destination", "row_index", "gtid", "log_server_id")
        changes = df.select(*mirror.COLUMNS, *(name for name in wanted if name in df.columns))
    if packed or _one_partition(changes):
        # the whole batch in one partition (the canal source's micro-batches): one job, no shuffle -- its task
        # admits the batch and writes every table, in parallel threads, or answers that the batch holds DDL
        def write_all(batches: Any) -> Any:
            return write_partition(kind, settings, epoch, batch_id, batches, token)

        outcome = _checked(changes.mapInArrow(write_all, RESULT_SCHEMA).collect(), 1, batch_id)
        for row in outcome:
            if row["status"] == REFUSED_MARK:
                raise _refused(row["spill"], row["lineage"])
        spilled = [row["spill"] for row in outcome if row["status"] == DDL_MARK]
        if spilled:
            _drop_spills(mirror.root, batch_id)
            rows = _read_spill(spilled[0])
            mirror.wait_for_folds()
            return mirror.apply(rows, batch_id)
    else:
        # two Spark jobs read the batch (is there DDL, which tables, what lineage? write it, a table per task):
        # cached, so the source is read once
        changes = changes.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            shape = _shape(changes, recorded)
            if shape is None or shape["ddl"] is None:  # no rows
                outcome = []
            elif shape["ddl"]:
                mirror.wait_for_folds()
                return mirror.apply(changes, batch_id)
            else:
                admission = _admit_shape(mirror, shape, recorded, batch_id)
                number, replay = admission["number"], admission["replay"]

                def write(rows: Any) -> Any:
                    return write_group(kind, settings, epoch, number, rows, recorded, token, skip=replay)

                collected = changes.groupBy("schema", "table").applyInArrow(write, RESULT_SCHEMA).collect()
                outcome = _checked(collected, len(shape["tables"]), batch_id)
                outcome.append({"status": "admitted", "lineage": json.dumps(admission)})
        finally:
            changes.unpersist()
    result = mirror.new_result(batch_id)
    due: list[str] = []
    answered: dict[str, Any] = {}
    advance = Advance()
    newest: list[tuple[str, int]] = []  # the tasks' newest changes and execute times (for metrics)
    newest_ms: list[int] = []
    for row in outcome:
        if row["status"] in (DONE_MARK, "admitted"):
            if row["status"] == DONE_MARK:
                result.rows += row["rows"]
            if row["lineage"]:
                found = json.loads(row["lineage"])
                advance = advance.merge(Advance.from_json(found.pop("advance", None) or Advance().to_json()))
                if found.get("newest"):
                    newest.append((found["newest"][0], int(found["newest"][1])))
                if found.get("newest_ms") is not None:
                    newest_ms.append(int(found["newest_ms"]))
                found.pop("newest", None), found.pop("newest_ms", None)
                answered.update(found)
            continue
        result.tables[row["table"]] = row["status"]
        stats = mirror.table_stats(row["table"])
        if row["status"] == "applied":
            stats.applied += 1
        else:
            stats.skipped += 1
        if row["fold_due"]:
            due.append(row["table"])
    result.merge_s = time.perf_counter() - began
    if newest:
        result.newest = max(newest, key=lambda p: position_key(*p))
    result.newest_time_ms = max(newest_ms) if newest_ms else None
    if answered and not answered.get("replay"):
        mirror.fencing.check()
        number, through = int(answered["number"]), answered.get("through")
        after = advance.recorded(recorded, batch_id, answered.get("fingerprint"), number, through)
        write_applied(mirror.root, mirror.app_id, after)  # the batch finished: its lineage, its number
        result.destination = after.destination
    if due:
        result.folds = start_folds(mirror, df.sparkSession, due)
    mirror.history.append(result)
    return result


def _shape(changes: Any, recorded: Applied | None) -> Any:
    """One aggregation of a batch of several partitions: whether it holds DDL (or what else the driver applies), its
    tables, its row count and its first and last rows (its fingerprint), its destinations, and the first change
    whose lineage nothing relates to the record's (:func:`canal.lake.identity.lineage.follow`'s rule)."""
    from pyspark.sql import functions as F

    def column(name: str, sql_type: str) -> Any:
        return F.col(name) if name in changes.columns else F.lit(None).cast(sql_type)

    driver = F.col("is_ddl") | F.col("sql").isNotNull()
    if "props" in changes.columns:  # (a range's props only say where the batch lies: canal.lake.forms.ranges)
        marks = F.regexp_replace(F.col("props"), UNMARKED_PATTERN, "").contains('":')
        driver = driver | F.coalesce(marks, F.lit(False))
    fields = [
        column(name, "bigint" if name in ("log_server_id", "log_offset", "row_index") else "string").alias(name)
        for name in FINGERPRINT_FIELDS
    ]
    ordered = F.struct(F.col("seq").alias("seq"), *fields)
    measures = [
        F.max(driver.cast("int")).alias("ddl"),
        F.collect_set(F.struct(F.col("schema"), F.col("table"))).alias("tables"),
        F.count(F.lit(1)).alias("count"),
        F.min(ordered).alias("first"),
        F.max(ordered).alias("last"),
        F.collect_set(column("destination", "string")).alias("destinations"),
    ]
    if "props" in changes.columns:  # the batch's binlog range (canal.lake.forms.ranges): its first and last ends
        for key, pick in ((RANGE_FROM, F.min), (RANGE_TO, F.max)):
            stamped = F.col("props").contains(f'"{key}":')
            measures.append(pick(F.when(stamped, F.struct(F.col("seq"), F.col("props")))).alias(key))
    if recorded is not None and recorded.server_id is not None:
        server, gtid = column("log_server_id", "bigint"), column("gtid", "string")
        other = server.isNotNull() & (server != F.lit(recorded.server_id)) & (F.col("type") != F.lit("SNAPSHOT"))
        unprovable = other & (gtid.isNull() if recorded.gtids else F.lit(True))
        measures.append(F.min(F.when(unprovable, ordered)).alias("unprovable"))
        if recorded.origins:  # MariaDB: the other servers' transactions, to tell a fork from a replay
            candidate = F.when(other & gtid.isNotNull(), F.struct(gtid.alias("gtid"), server.alias("server")))
            measures.append(F.collect_set(candidate).alias("others"))
    return changes.agg(*measures).first()


def _admit_shape(mirror: DeltaMirror, shape: Any, recorded: Applied | None, batch_id: int) -> dict[str, Any]:
    """The driver's admission of a batch of several partitions from its :func:`_shape`
    (:func:`canal.lake.identity.admit. admit`'s rules): refused, a replay, or numbered and recorded as in flight before
    any task writes."""
    root, app_id = mirror.root, mirror.app_id
    check_destination(shape["destinations"], recorded, root, app_id)
    found = shape.asDict().get("unprovable")
    if found is not None and recorded is not None:
        raise unprovable_error(
            recorded, found["log_server_id"], found["log_file"], found["log_offset"], found["gtid"], root=root,
            app_id=app_id,
        )  # fmt: skip
    others = shape.asDict().get("others")
    if others and recorded is not None and recorded.gtids:
        held = GtidSet(recorded.gtids)
        found_in = {row["gtid"]: row["server"] for row in others}
        applied_ids = [g for g in found_in if g != recorded.open_gtid and held.contains(g)]
        forked = find_fork(parse_origins(recorded.origins), applied_ids) if held.is_mariadb else None
        if forked is not None:
            raise fork_error(recorded, found_in[forked], forked, root=root, app_id=app_id)
    mirror.check_owners([(pair["schema"], pair["table"]) for pair in shape["tables"] if pair["table"]])

    def ends(row: Any) -> list[Any] | None:
        return None if row is None else [row[name] for name in FINGERPRINT_FIELDS]

    mark = fingerprint_of(shape["count"], ends(shape["first"]), ends(shape["last"]))
    decision = decide(recorded, batch_id, mark, lambda: root_number(root, app_id))
    admission: dict[str, Any] = {"number": decision.number, "fingerprint": mark, "replay": decision.replay}
    if decision.replay:
        return admission
    given = shape.asDict()

    def range_side(key: str) -> Cursor | None:
        found = given.get(key)
        return None if found is None else Cursor.parse(json.loads(found["props"]).get(key))

    check_range(recorded, range_side(RANGE_FROM), batch_id, root, app_id)
    admission["through"] = range_end(recorded, range_side(RANGE_TO))
    check_interrupted(decision, StepJournal(root, app_id).read(), batch_id, root, app_id)
    if not decision.resume:
        write_applied(root, app_id, with_pending(recorded, Pending(batch_id, mark, decision.number)), synced=False)
    return admission


REACH_PREFIX = "_pycanal_reach."  # a file the driver writes in the root for the executors to find
REACH_TASKS = 8  # tasks looking for it: enough to land on every executor of a small cluster


def check_executors_reach(root: str, spark: Any) -> None:
    """:class:`MirrorUnreachableError` unless Spark tasks find, under ``root``, the file the driver just wrote
    there: a root on a disk of the driver's own (a local path on a cluster) would have each task write its tables
    to its executor's disk, where the driver and the next batches never see them. Tasks land on executors as Spark
    schedules them, so a cluster whose executors differ (some mount the root, some not) may pass unnoticed; a
    local path, the case this catches, is on no executor of another host."""
    import pyarrow as pa

    from canal.lake.store.storage import StorageError
    from canal.lake.types import MirrorUnreachableError

    token = uuid.uuid4().hex
    probe = fs.join(root, f"{REACH_PREFIX}{token}")
    options = fs.delta_options(root)  # a root in an object store: the options that reach it (canal.lake.store.fs)
    fs.makedirs(root)
    fs.write_bytes(probe, token.encode())

    def look(batches: Any) -> Any:
        import os
        import socket

        if options is not None:
            fs.register(root, "the mirror's root", options)
        for batch in batches:
            try:
                seen = fs.read_text(probe) == token
            except (OSError, StorageError):  # not there, or a store this executor cannot reach
                seen = False
            where = f"{socket.gethostname()} (pid {os.getpid()})"
            yield pa.RecordBatch.from_pydict({"seen": [seen] * batch.num_rows, "task": [where] * batch.num_rows})

    try:
        answers = spark.range(0, REACH_TASKS, 1, REACH_TASKS).mapInArrow(look, "seen boolean, task string").collect()
    finally:
        fs.unlink(probe)
    blind = sorted({row["task"] for row in answers if not row["seen"]})
    if blind or len(answers) != REACH_TASKS:
        raise MirrorUnreachableError(
            f"mirror root {root}: Spark tasks on {', '.join(blind) or 'the executors'} do not see the file the "
            "driver wrote there, so they would write the mirror's tables to their own disks. Give the mirror a "
            "root every executor and the driver reach (an object store URI, or a file system mounted on all hosts), "
            "or apply batches on the driver (DeltaMirror(..., on_executors=False))."
        )


def _one_partition(df: Any) -> bool:
    """Whether ``df`` is known to be one partition. A Spark Connect client cannot ask (no RDDs), so there it is
    taken for several: the grouped path is right for any number of partitions, only slower for one."""
    if type(df).__module__.startswith("pyspark.sql.connect"):
        return False
    return bool(df.rdd.getNumPartitions() == 1)


def start_folds(mirror: DeltaMirror, spark: Any, names: list[str]) -> list[str]:
    """Fold ``names`` (the tables' directory names) in one Spark job, a table per task, from a background thread of
    the driver; tables whose fold is under way are left for a later batch. The tables started."""
    settings = mirror.settings()
    epoch = mirror.tables_epoch
    kind = type(mirror)
    paths = {name: fs.join(os.fspath(mirror.root), name) for name in names}
    started = mirror.claim_folds(list(paths.values()))
    if not started:
        return []
    chosen = [name for name, path in paths.items() if path in started]

    def run() -> None:
        def fold(batches: Any) -> Any:
            for batch in batches:
                for name in batch.column("name").to_pylist():
                    fold_in_task(kind, settings, epoch, name)
            return iter(())

        # a DataFrame job (not an RDD one: Spark Connect has no RDDs), a table per partition as far as hashing
        # spreads them
        tables = spark.createDataFrame([(name,) for name in chosen], "name string").repartition(len(chosen), "name")
        tables.mapInArrow(fold, "name string").collect()

    mirror.run_folds(started, run)
    return chosen
