"""Table schemas: what a table's columns are at any binlog position.

:class:`SchemaCatalog` applies DDL statements (read by :mod:`canal.sql`) to table layouts (:class:`TableDef` of
:class:`TableColumn`); the fake server keeps its tables with it, and the schema history follows the binlog with it.
"""

from canal.schema.catalog import DEFAULT_CHARSET, SchemaCatalog, TableChange, TableDef
from canal.schema.columns import (
    TableColumn,
    column_meta,
    column_sql,
    effective_charset,
    mysql_type_text,
    resolve_column,
    sql_type_of,
    type_with_charset,
)

__all__ = [
    "DEFAULT_CHARSET",
    "SchemaCatalog",
    "TableChange",
    "TableColumn",
    "TableDef",
    "column_meta",
    "column_sql",
    "effective_charset",
    "mysql_type_text",
    "resolve_column",
    "sql_type_of",
    "type_with_charset",
]
