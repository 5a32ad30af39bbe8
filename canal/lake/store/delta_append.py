"""Blind appends to a Delta table, and removals of whole files, written by the Delta protocol itself.

A change log takes one append per table per batch. Through ``deltalake.write_deltalake`` each costs 2-7 ms whatever
it holds (the table's state brought up to date by listing its ``_delta_log``, conflict checks, post-commit hooks),
so a batch spread over 50 tables cost 50 times that. An append that reads nothing needs none of it: write the
Parquet file, then publish the next commit file (``add`` of the file, ``txn`` of the batch id, ``commitInfo``) only
if no writer took that version first -- put-if-absent through a rename that never replaces a file
(:func:`canal.files.rename_if_absent`; delta-rs uses a hard link on a local file system). About a quarter of a
millisecond, half of it Parquet's. Like deltalake's own commits (which call no fsync), an append survives the writing
process's crash, not necessarily the machine's: the files are in the operating system's cache when it returns.

When another writer took the version, its commit is read: a blind append conflicts only with a change of the
table's schema or protocol (``metaData``, ``protocol``), and then :func:`append` gives up, removing its data file,
and the caller appends through ``deltalake`` instead (which merges schemas). Any other commit (a fold's trim, a
compaction: ``add``/``remove``) leaves the append valid at the next version.

Commits behind a checkpoint are deleted by Delta's log cleanup, and a commit file published behind the last
checkpoint (``_delta_log/_last_checkpoint``) would be ignored by every reader: an append whose version is older than
the checkpoint goes ahead only if every commit since is still there (it walks past them, as past any commit another
writer made first). Compactions and trims checkpoint a log every 10 commits, so a batch over 50 tables meets a few
such logs; reading them anew through ``deltalake`` cost 2-10 ms each.
Callers hold the lock that the table's trims and compactions hold (:meth:`canal.lake.upkeep.folds.Folds.appends`), so no
checkpoint is written between that read and the publication; where writers in other processes may trim the same log
(folds as Spark tasks), the caller appends through ``deltalake``. So it does for a table on a file system with neither
such renames nor hard links (some FUSE and object-store mounts): the first append there finds out, and the table's later
appends write nothing before giving up.

A fold's trim removes the log files it folded the same way (:func:`remove_files`): a commit of ``remove`` actions,
valid after any commit that removed none of them and left the schema and protocol alone -- so after the appends
that land meanwhile. It holds no lock: the fold is the only maintenance of the log under way (a compaction waits for
it), in the only process that writes the log, so no checkpoint is written before it publishes.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from typing import Any

from canal.files import HardLinksUnsupportedError, rename_if_absent, write_new
from canal.lake.store import fs

_LOG_DIR = "_delta_log"
_CONFLICTING_ACTIONS = ("metaData", "protocol")


# paths are handled as text: a batch spread over 50 tables builds hundreds of them, and pathlib costs 5 us each

Location = str | os.PathLike[str]


def commit_path(table: Location, version: int) -> str:
    return fs.join(os.fspath(table), _LOG_DIR, f"{version:020d}.json")


# tables (as text) on a file system with neither renames that never replace nor hard links: appended through
# deltalake
_WITHOUT_PUT_IF_ABSENT: set[str] = set()

UNKNOWN_CHECKPOINT = 1 << 62
"""What :func:`last_checkpoint` answers when the table's ``_last_checkpoint`` cannot be read: newer than anything."""


def is_table(table: Location) -> bool:
    """Whether a Delta table is at ``table``: its first commit, or a checkpoint that replaced it, is there (two file
    look-ups, where ``DeltaTable.is_deltatable`` takes 0.1-0.2 ms: a batch asks it for every table it writes)."""
    return fs.is_file(commit_path(table, 0)) or last_checkpoint(table) >= 0


def last_checkpoint(table: Location) -> int:
    """The version of the table's last checkpoint: -1 when it has none, :data:`UNKNOWN_CHECKPOINT` when its
    ``_last_checkpoint`` file cannot be read (being replaced, or damaged: an append then goes through deltalake)."""
    try:
        return int(json.loads(fs.read_text(fs.join(os.fspath(table), _LOG_DIR, "_last_checkpoint")))["version"])
    except FileNotFoundError:
        return -1
    except (OSError, ValueError, KeyError, TypeError):
        return UNKNOWN_CHECKPOINT


def _actions(commit: str) -> list[dict[str, Any]] | None:
    """The actions of a commit file; None when it is gone already (Delta's log cleanup): what it held is unknown."""
    try:
        text = fs.read_text(commit)
    except FileNotFoundError:
        return None
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _conflicts(commit: str, removing: frozenset[str] = frozenset()) -> bool:
    """Whether the commit file changes what a blind commit relies on: the schema or the protocol, or (for a commit
    that removes the files ``removing``) the removal of one of them; a commit file gone already is taken as one."""
    actions = _actions(commit)
    return actions is None or any(
        key in _CONFLICTING_ACTIONS or (key == "remove" and value.get("path") in removing)
        for action in actions
        for key, value in action.items()
    )


def _usable(table: Location, version: int) -> bool:
    """Whether a commit can be published after ``version``, on a file system where commits can be published: the
    table is the one ``version`` was read from, and if a checkpoint is newer, every commit since ``version`` up to it
    is still there -- the publication walks past them, reading each (:func:`_publish`), so it never lands behind the
    checkpoint, where readers would ignore it. (Commits behind a checkpoint are dropped once older than the log's
    retention, a second by default; an append finds those of the last batches there.)"""
    if os.fspath(table) in _WITHOUT_PUT_IF_ABSENT:
        return False
    checkpoint = last_checkpoint(table)
    if checkpoint > version:
        return checkpoint != UNKNOWN_CHECKPOINT and all(
            fs.is_file(commit_path(table, v)) for v in range(version + 1, checkpoint + 1)
        )
    return checkpoint == version or fs.is_file(commit_path(table, version))


def _publish(
    table: Location, version: int, actions: list[dict[str, Any]], removing: frozenset[str] = frozenset()
) -> int | None:
    """Publish ``actions`` (removing the files ``removing``) as the table's first free version after ``version``:
    the version, or None when a commit made after ``version`` conflicts with them (:func:`_conflicts`), or the file
    system cannot publish a file only if there is none (:func:`canal.files.rename_if_absent`)."""
    body = "".join(json.dumps(action) + "\n" for action in actions).encode()
    if fs.remote(os.fspath(table)):  # an object store: a conditional PUT (If-None-Match), as delta-rs commits there
        version += 1
        while not fs.write_bytes(commit_path(table, version), body, replace=False):
            if _conflicts(commit_path(table, version), removing):
                return None
            version += 1
        return version
    staged = os.path.join(table, _LOG_DIR, f".{os.urandom(16).hex()}.json.tmp")
    write_new(staged, body)
    published = False
    try:
        version += 1
        while not rename_if_absent(staged, commit_path(table, version)):
            if _conflicts(commit_path(table, version), removing):
                return None
            version += 1
        published = True
    except HardLinksUnsupportedError:
        _WITHOUT_PUT_IF_ABSENT.add(os.fspath(table))
        return None
    finally:
        if not published:
            _remove(staged)
    return version


def _commit_info(
    now: int, operation: str, parameters: dict[str, str], metadata: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "commitInfo": {
            "timestamp": now,
            "operation": operation,
            "operationParameters": parameters,
            "engineInfo": "pycanal",
            **(metadata or {}),
        }
    }


def encode(rows: Any) -> Any:
    """``rows`` (a pyarrow Table) as the content of a Parquet data file, in memory (then one write: cheaper than
    pyarrow's file for a small file). A caller appending to many tables encodes all their rows first, then appends:
    the Parquet writer's code stays in the processor's caches (50 small files: 5.2 ms encoded one after another,
    6.9 ms each between other work)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    encoded = pa.BufferOutputStream()
    # no dictionary and no statistics: a log file holds one batch's changes of one table, read whole by every fold
    # and read of the current state; both cost a quarter of a small file's encoding
    pq.write_table(rows, encoded, compression="snappy", use_dictionary=False, write_statistics=False)
    return encoded.getvalue()


def append(
    table: Location,
    rows: Any,
    *,
    version: int,
    app_id: str | None = None,
    batch_id: int | None = None,
    encoded: Any = None,
    metadata: dict[str, str] | None = None,
) -> int | None:
    """Append ``rows`` (a pyarrow Table in the table's schema, as of ``version``; ``encoded``: their
    :func:`encode`, when the caller has it) to the Delta table at ``table`` as its next version, with ``app_id``'s
    transaction version ``batch_id`` when given (and ``metadata`` in its ``commitInfo``, as deltalake's
    ``custom_metadata``). The version committed, or None when the table's schema or protocol
    changed after ``version``, or a commit since ``version`` was dropped behind a newer checkpoint (:func:`_usable`):
    nothing was appended, and the caller appends another way."""
    if not _usable(table, version):
        return None
    name = f"part-{uuid.uuid4()}-c000.snappy.parquet"
    data = fs.join(os.fspath(table), name)
    written = encode(rows) if encoded is None else encoded
    if fs.remote(data):
        fs.write_bytes(data, written.to_pybytes())  # a new name: no reader sees it before a commit names it
    else:
        write_new(data, written)  # no reader sees it before a commit names it
    now = int(time.time() * 1000)
    actions: list[dict[str, Any]] = [
        {
            "add": {
                "path": name,
                "partitionValues": {},
                "size": written.size,
                "modificationTime": now,
                "dataChange": True,
                "stats": json.dumps({"numRecords": rows.num_rows}),
            }
        }
    ]
    if app_id is not None and batch_id is not None:
        actions.append({"txn": {"appId": app_id, "version": batch_id, "lastUpdated": now}})
    actions.append(_commit_info(now, "WRITE", {"mode": "Append"}, metadata))
    committed = _publish(table, version, actions)
    if committed is None:
        _remove(data)  # referenced by no commit
    return committed


def remove_files(table: Location, files: list[tuple[str, int]], *, version: int) -> int | None:
    """Remove the data files ``files`` (each its path as the table's ``add`` action names it, and its size) from the
    Delta table at ``table`` (as of ``version``) in its next version, deleting nothing on disk: the version
    committed, or None when nothing was committed -- a commit made after ``version`` removed one of them or changed
    the schema or protocol, or was dropped behind a newer checkpoint (:func:`_usable`). Appends made after
    ``version`` leave it valid: it reads nothing they wrote."""
    if not _usable(table, version):
        return None
    now = int(time.time() * 1000)
    actions: list[dict[str, Any]] = [
        {
            "remove": {
                "path": path,
                "deletionTimestamp": now,
                "dataChange": True,
                "extendedFileMetadata": True,
                "partitionValues": {},
                "size": size,
            }
        }
        for path, size in files
    ]
    actions.append(_commit_info(now, "DELETE", {"predicate": "whole files"}))
    return _publish(table, version, actions, frozenset(path for path, _size in files))


def _remove(path: str) -> None:
    fs.unlink(path)
