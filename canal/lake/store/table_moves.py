"""Moving and replacing a mirror table in an object store, where there is no rename.

Locally a RENAME TABLE renames the table's directory and its change log's, and a rewrite that reorders columns writes
the table anew beside itself and swaps the two by renames (:meth:`canal.lake.apply.evolve.TableDDL.move`,
``_recreate``). An object store has no rename: a table is moved by copying its objects (server-side) and deleting the
originals. Each function here orders its copies and deletes so that a crash at any point leaves a state the same call,
made again when the step journal replays the step, finishes:

* a copy writes the Delta log (``_delta_log``) last (:func:`canal.lake.store.fs.copy_tree`), so a partial copy is not a
  table, or is one whose files are all the source's (:func:`_copy_of`) -- told apart from a table of that name the
  mirror held before, which a move refuses;
* the originals are deleted only once the copy is whole, their Delta log first (``_delta_log`` sorts before the data
  files), so a half-deleted source is no longer a table and is not copied again.

Readers of the table see it missing, or half-copied (not a table yet), while a move or a replace runs; a mirror in
an object store is read through :mod:`canal.spark.current` between batches, as a local one is.
"""

from __future__ import annotations

from canal.lake.store import fs
from canal.lake.types import MirrorError

_LOG = "_delta_log"


def _copy_of(source: str, target: str) -> bool:
    """Whether ``target`` holds a copy of the table at ``source`` (a copy, or a deletion of the source, cut short):
    the first Delta log file both have holds the same bytes -- commit files are numbered alike in every table, but
    each holds its own table's id, file names and times -- or, before the target has a log, each of its names is
    one of the source's (data files have unique names)."""
    source_log, target_log = fs.listdir(fs.join(source, _LOG)), fs.listdir(fs.join(target, _LOG))
    common = sorted(name for name in set(source_log) & set(target_log) if name[:1].isdigit())  # versioned files
    if common:
        first = fs.join(_LOG, common[0])
        return fs.read_bytes(fs.join(target, first)) == fs.read_bytes(fs.join(source, first))
    return not target_log and set(fs.listdir(target)) <= set(fs.listdir(source))


def move_table(base: str, log: str, target: str, target_log: str) -> None:
    """RENAME TABLE in an object store: the table at ``base`` and its change log ``log`` (if any) go to ``target``
    and ``target_log``. A source that is not a table moves nothing (the mirror does not hold it, or the move
    finished); one whose copy is whole and whose deletion a crash cut short has its deletion finished."""
    if not fs.is_delta_table(base):
        if fs.exists(base) and fs.is_delta_table(target):  # deleting the source was under way: finish it
            fs.rmtree(base)
            fs.rmtree(log)
        return
    if fs.exists(target) and not _copy_of(base, target):
        raise MirrorError(f"cannot rename {base} to {target}: the mirror already has that table")
    # the change log first, whole, while the source base -- and so this step's replay -- still stands
    fs.rmtree(target_log)  # a change log left by an earlier table of that name, or a copy cut short
    if fs.exists(log):
        fs.copy_tree(log, target_log)
    fs.copy_tree(base, target)
    fs.rmtree(base)  # its Delta log first: from then on the source is no table, and a replay only finishes this
    fs.rmtree(log)


def replace_tree(fresh: str, path: str) -> None:
    """The table at ``path`` replaced by the one written at ``fresh`` (a rewrite in a new column order), ``fresh``
    then deleted."""
    fs.rmtree(path)
    fs.copy_tree(fresh, path)
    fs.rmtree(fresh)


def finish_replace(fresh: str, path: str) -> None:
    """Finish a :func:`replace_tree` a crash cut short: a whole rewritten table at ``fresh`` replaces ``path``
    (again); one whose writing or deletion was cut short is dropped (the step's replay writes it anew, or the
    replace had finished its copy)."""
    if not fs.is_dir(fresh):
        return  # (one listing: there is seldom anything to finish)
    if fs.is_delta_table(fresh):
        replace_tree(fresh, path)
    else:
        fs.rmtree(fresh)


__all__ = ["finish_replace", "move_table", "replace_tree"]
