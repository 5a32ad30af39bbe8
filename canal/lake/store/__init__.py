"""The Delta log and its storage: the files under a mirror's root (local or an object store), each table's base and
change log, appends written by the Delta protocol itself, staged parts, open tables."""
