"""``project(df, table)``: one table's change rows as typed columns; ``current_rows``: the rows they leave."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from canal.lake.types import spark_type_sql
from canal.names import split_qualified
from canal.protocol import TableSchema
from canal.spark.options import IMAGE_FORMS, IMAGES_PACKED
from canal.sql import CreateTable, SqlError, read_statement


def parse_create_table(ddl: str) -> tuple[str | None, str, list[tuple[str, str]]]:
    """``(schema, table, [(column, mysql_type), ...])`` of a ``CREATE TABLE`` statement, read by :mod:`canal.sql`
    (``mysql_type`` as written, e.g. ``DECIMAL(12, 2)``); SqlError (a ValueError) for anything else."""
    stmt = read_statement(ddl)
    if not isinstance(stmt, CreateTable) or not stmt.columns:
        raise SqlError(f"not a CREATE TABLE statement with columns: {ddl[:80]!r}", offset=0)
    return stmt.table.schema, stmt.table.name, [(c.name, c.type.text) for c in stmt.columns]


Layout = TableSchema | str | Sequence[tuple[str, str]]


def project(df: Any, table_schema_or_ddl: Layout, table: str | None = None, *, images: str = "json") -> Any:
    """The changes of one table in ``df`` (change rows) as typed columns.

    ``table_schema_or_ddl``: a :class:`~canal.protocol.TableSchema`, a ``CREATE TABLE`` statement, or
    ``[(column, mysql_type), ...]`` together with ``table="schema.table"`` (or a bare table name). Output columns:
    ``op`` (INSERT / UPDATE / DELETE), ``seq``, ``execute_time``, ``absent``, then the table's columns typed (values
    from the after image, or the before image of a DELETE). DDL rows and other tables are dropped. ``images``: the
    form the source gave them (its ``images`` option; named, not read from ``df``'s schema, which a Spark Declarative
    Pipeline's query function may not analyse): ``json`` text is parsed and cast, ``variant`` cells are read with
    ``variant_get`` as the mirror types them.

    A partial row image (``binlog_row_image`` MINIMAL / NOBLOB) does not carry every column: an UPDATE's column its
    after image lacks was not written, so it is taken from the before image where that carries it (the key a MINIMAL
    image logs there); a column neither image carries is NULL in its typed column and named in ``absent`` (an array
    of column names, empty for a whole change) -- a NULL there is no value of the row. So is a JSON column a partial
    JSON update changed by a diff (``json_diffs``, MySQL's ``binlog_row_value_options=PARTIAL_JSON``).
    """
    return _project(df, table_schema_or_ddl, table, images=images, diffed=False)


def _project(df: Any, table_schema_or_ddl: Layout, table: str | None, *, images: str, diffed: bool) -> Any:
    """:func:`project`; with ``diffed``, a column ``diffed`` too: the columns the change's JSON diffs changed."""
    from pyspark.sql import functions as F

    schema_name, table_name, columns = _layout(table_schema_or_ddl, table)
    carried, cell = _cells(images)
    in_after, in_before = (
        [F.coalesce(carried(F.col(side), name), F.lit(False)) for name, _type in columns]
        for side in ("after", "before")
    )
    selected = [F.col("type").alias("op"), F.col("seq"), F.col("execute_time")]
    selected.append(
        F.array_compact(
            F.array(
                *[
                    F.when(~(a | b), F.lit(name))
                    for (name, _type), a, b in zip(columns, in_after, in_before, strict=True)
                ]
            )
        ).alias("absent")
    )
    if diffed:
        selected.append(_diffed())
    selected += [
        F.when(a, cell(F.col("after"), name, mysql_type)).otherwise(cell(F.col("before"), name, mysql_type)).alias(name)
        for (name, mysql_type), a in zip(columns, in_after, strict=True)
    ]
    return df.where(_of_table(schema_name, table_name)).select(*selected)


def cdc_rows(
    df: Any, table_schema_or_ddl: Layout, keys: Sequence[str], table: str | None = None, *, images: str = "json"
) -> Any:
    """:func:`project`'s rows of one table, with a ``DELETE`` of the old key before each UPDATE that moved a row to
    another key (the change row's ``old_keys``): what a merge by key needs that knows no old key -- Delta's MERGE of
    each key's latest row (by ``seq``) in a ``foreachBatch``, or an AUTO CDC flow (``keys=keys, sequence_by="seq",
    apply_as_deletes="op = 'DELETE'"``) where its target supports row-level operations. The DELETE has the UPDATE's
    ``seq``: it is another key's change, ordered with that key's own changes. The table's columns are those of the
    layout given: a column a later DDL adds is not among them until the layout is."""
    from pyspark.sql import functions as F

    schema_name, table_name, columns = _layout(table_schema_or_ddl, table)
    names = [name for name, _ in columns]
    missing = [k for k in keys if k not in names]
    if not keys or missing:
        raise ValueError(f"keys must name columns of the table: {', '.join(missing) or 'none given'}")
    where = f"{schema_name}.{table_name}" if schema_name else table_name
    rows = _project(df, columns, where, images=images, diffed=False)
    _carried, cell = _cells(images)
    moved = df.where(_of_table(schema_name, table_name) & F.col("old_keys").isNotNull()).select(
        F.lit("DELETE").alias("op"),
        F.col("seq"),
        F.col("execute_time"),
        F.array().cast("array<string>").alias("absent"),
        *[
            (
                cell(F.col("old_keys"), name, mysql_type)
                if name in keys
                else F.lit(None).cast(spark_type_sql(mysql_type))
            ).alias(name)
            for name, mysql_type in columns
        ],
    )
    return moved.unionByName(rows)


def current_rows(
    df: Any, table_schema_or_ddl: Layout, keys: Sequence[str], table: str | None = None, *, images: str = "json"
) -> Any:
    """The rows the change rows in ``df`` leave in one table, typed as :func:`project` types them: for each key
    (the columns ``keys``) the state its changes since its last DELETE (or an UPDATE that moved the row to another
    key) leave -- each column from the last of them that carries it, so partial row images (``binlog_row_image``
    MINIMAL / NOBLOB) update the columns they carry. A batch computation over a whole change log (e.g. a Spark
    Declarative Pipeline's materialized view over a streaming table of change rows);
    :class:`~canal.lake.mirror.DeltaMirror` keeps a mirror incrementally instead. The change log must start with the
    table empty or with a snapshot of it: a row a column of which no change carries (an INSERT under MINIMAL that left
    a column to its default, or an UPDATE of a row the log never saw whole) fails the query with an error naming the
    table and the column, never a NULL in its place. So does a row whose JSON column a partial JSON update changed by a
    diff after the last change that carries its document (``json_diffs``; the mirror applies such diffs, this query
    does not), never the document before the diff."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    schema_name, table_name, columns = _layout(table_schema_or_ddl, table)
    names = [name for name, _ in columns]
    missing = [k for k in keys if k not in names]
    if not keys or missing:
        raise ValueError(f"keys must name columns of the table: {', '.join(missing) or 'none given'}")
    where = f"{schema_name}.{table_name}" if schema_name else table_name
    changes = _project(df, columns, where, images=images, diffed=True).select(
        "seq", (F.col("op") == "DELETE").alias("gone"), "absent", "diffed", *names
    )
    # an UPDATE that changed the key also removes the row under its old key, at the same point of the stream
    _carried, cell = _cells(images)
    moves = df.where(_of_table(schema_name, table_name) & F.col("old_keys").isNotNull()).select(
        F.col("seq"),
        F.lit(True).alias("gone"),
        F.array(*[F.lit(name) for name in names if name not in keys]).alias("absent"),
        F.array().cast("array<string>").alias("diffed"),
        *[
            (
                cell(F.col("old_keys"), name, mysql_type)
                if name in keys
                else F.lit(None).cast(spark_type_sql(mysql_type))
            ).alias(name)
            for name, mysql_type in columns
        ],
    )
    # the changes since each key's last removal; each column from the last one that carries it
    gone_at = F.max(F.when(F.col("gone"), F.col("seq"))).over(Window.partitionBy(*keys))
    live = (
        changes.unionByName(moves)
        .select("*", gone_at.alias("_gone_at"))
        .where(F.col("_gone_at").isNull() | (F.col("seq") > F.col("_gone_at")))
    )
    values = []
    for name in names:
        if name in keys:
            continue
        carries = ~F.array_contains(F.col("absent"), name)
        touches = carries | F.array_contains(F.col("diffed"), name)
        values.append(F.max_by(F.col(name), F.when(carries, F.col("seq"))).alias(name))
        values.append(F.max(F.when(carries, F.col("seq"))).alias(f"{_CARRIED}{name}"))
        values.append(F.max(F.when(touches, F.col("seq"))).alias(f"{_TOUCHED}{name}"))
    rows = live.groupBy(*keys).agg(*values)

    def stop(message: str, mysql_type: str) -> Any:
        return F.raise_error(F.lit(f"{where}: {message}")).cast(spark_type_sql(mysql_type))

    checked = [
        F.col(name)
        if name in keys
        else F.when(F.col(f"{_CARRIED}{name}") == F.col(f"{_TOUCHED}{name}"), F.col(name))
        .when(
            F.col(f"{_CARRIED}{name}").isNull() & F.col(f"{_TOUCHED}{name}").isNull(),
            stop(f"no change carries column {name} of a row (a partial row image)", mysql_type),
        )
        .otherwise(
            stop(
                f"a partial JSON update changed column {name} of a row by a diff after the last change that carries "
                "its document (json_diffs): current_rows does not apply diffs; read the mirror (DeltaMirror)",
                mysql_type,
            )
        )
        .alias(name)
        for name, mysql_type in columns
    ]
    return rows.select(*checked)


# columns of current_rows' aggregate: the last change that carries the column named after it, and the last that
# carries or changes it (a partial JSON update's diff)
_CARRIED = "__pycanal_carried_"
_TOUCHED = "__pycanal_touched_"


def _diffed() -> Any:
    """The names of the columns each change row's JSON diffs changed (``json_diffs``), as an array column
    ``diffed``. The column is named, not looked up in ``df``'s schema: a Spark Declarative Pipeline's query function
    may not analyse its DataFrame (change rows of a pycanal before json_diffs: add it as a null string column)."""
    from pyspark.sql import functions as F

    diffs = F.from_json(F.col("json_diffs"), "MAP<STRING,ARRAY<ARRAY<STRING>>>")
    return F.coalesce(F.map_keys(diffs), F.array().cast("array<string>")).alias("diffed")


def _layout(table_schema_or_ddl: Layout, table: str | None) -> tuple[str | None, str, list[tuple[str, str]]]:
    """(schema or None, table, [(column, mysql_type), ...]) of what :func:`project` is given."""
    schema_name: str | None
    if isinstance(table_schema_or_ddl, TableSchema):
        schema_name, table_name = table_schema_or_ddl.schema, table_schema_or_ddl.table
        columns = [(c.name, c.mysql_type) for c in table_schema_or_ddl.columns]
    elif isinstance(table_schema_or_ddl, str):
        schema_name, table_name, columns = parse_create_table(table_schema_or_ddl)
    else:
        if table is None:
            raise ValueError("pass table='schema.table' with a column list")
        columns = [(str(n), str(t)) for n, t in table_schema_or_ddl]
        schema_name, table_name = None, table
    if table is not None:
        # ```shop.eu`.orders`` where a name holds a dot (canal.names)
        schema_name, table_name = split_qualified(table) if "." in table else (schema_name, table)
    return schema_name, table_name, columns


def _of_table(schema_name: str | None, table_name: str) -> Any:
    from pyspark.sql import functions as F

    # row changes only: DDL and statements (SQL text without images, canal.lake.forms.changes) have no values to type
    cond = (F.col("table") == table_name) & (~F.col("is_ddl")) & F.col("columns").isNotNull()
    return cond & (F.col("schema") == schema_name) if schema_name else cond


def _cells(images: str) -> tuple[Any, Any]:
    """How images of the form ``images`` are read: ``carried(image column, column name)`` -- whether an image
    carries the column (null for no image) -- and ``cell(image column, column name, mysql_type) -> typed column``."""
    from pyspark.sql import functions as F

    if images not in IMAGE_FORMS or images == IMAGES_PACKED:
        raise ValueError(
            f"images = {images!r}: expected json or variant (the canal source's images option; images=packed is the "
            "mirror's form, a few rows of packed batches per micro-batch, not a row per change)"
        )
    if images == "variant":

        def from_variant(image: Any, name: str, mysql_type: str) -> Any:
            return F.variant_get(image, variant_path(name), spark_type_sql(mysql_type))

        def in_variant(image: Any, name: str) -> Any:
            # a variant null (SQL NULL) is carried; a field the object leaves out reads as SQL NULL
            return F.when(image.isNotNull(), F.variant_get(image, variant_path(name), "variant").isNotNull())

        return in_variant, from_variant

    def from_json(image: Any, name: str, mysql_type: str) -> Any:
        return _typed(F.from_json(image, "MAP<STRING,STRING>").getItem(name), mysql_type)

    def in_json(image: Any, name: str) -> Any:
        return F.map_contains_key(F.from_json(image, "MAP<STRING,STRING>"), name)

    return in_json, from_json


def variant_path(name: str) -> str:
    """The ``variant_get`` path of a column named ``name`` (any name MySQL allows: dots, brackets, quotes)."""
    if "'" not in name:
        return f"$['{name}']"
    if '"' not in name:
        return f'$["{name}"]'
    raise ValueError(f"column {name!r} holds both kinds of quote: no variant path names it")


def _typed(value: Any, mysql_type: str) -> Any:
    from pyspark.sql import functions as F

    sql_type = spark_type_sql(mysql_type)
    return F.encode(value, "ISO-8859-1") if sql_type == "BINARY" else value.cast(sql_type)
