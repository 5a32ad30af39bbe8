"""Fenced ZooKeeper writes: the one place where a write is made conditional on the writer still owning something.

A *fence* names a node and the data version the writer expects it to have -- typically the destination's running
node as this process created it. :func:`fenced_commit` puts a ``check(path, version)`` and the writes into one
ZooKeeper transaction (multi-op), so either the check holds and every write is applied, or nothing is written and
:class:`~canal.errors.FencedWriteError` is raised. A fence is given as

* a :class:`ZkFence` or a ``(path, expected_version)`` pair, fixed; or
* a callable returning one of those, evaluated at every write (the HA monitor's current claim); a callable that
  returns ``None`` means "not the owner now" and the write is refused without touching ZooKeeper.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

import attrs
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NoNodeError, RolledBackError

from canal.errors import FencedWriteError


@attrs.frozen(slots=True)
class ZkFence:
    """Writes are allowed while the node at ``path`` exists with data version ``version``."""

    path: str
    version: int


FenceSpec: TypeAlias = ZkFence | tuple[str, int]
Fence: TypeAlias = FenceSpec | Callable[[], FenceSpec | None]
TxnOp: TypeAlias = Callable[[Any], object]
"""Adds one operation to a kazoo ``TransactionRequest``, e.g. ``lambda t: t.set_data(path, data)``."""


def resolve_fence(fence: Fence | None) -> ZkFence | None:
    """The fence to check now; raises :class:`FencedWriteError` when a fence callable says we do not own."""
    if fence is None:
        return None
    spec = fence() if callable(fence) else fence
    if spec is None:
        raise FencedWriteError("write refused: this process does not own the destination (fence gave no claim)")
    if isinstance(spec, ZkFence):
        return spec
    path, version = spec
    return ZkFence(path, int(version))


def fenced_commit(client: KazooClient, fence: Fence | None, ops: Sequence[TxnOp]) -> list[Any]:
    """Run ``ops`` in one transaction guarded by ``fence``; return the results of ``ops``.

    Raises :class:`FencedWriteError` when the fence check fails (nothing written), or the kazoo exception of the
    first failing operation (e.g. ``NoNodeError`` for a ``set_data`` on a missing node; nothing written either).
    """
    claim = resolve_fence(fence)
    txn = client.transaction()
    if claim is not None:
        txn.check(claim.path, claim.version)
    for op in ops:
        op(txn)
    results: list[Any] = list(txn.commit())
    if claim is not None:
        head = results.pop(0)
        if isinstance(head, Exception) and not isinstance(head, RolledBackError):
            if isinstance(head, NoNodeError):
                why = "is gone"
            elif isinstance(head, BadVersionError):
                why = "has another version"
            else:
                why = f"failed its check ({type(head).__name__})"
            raise FencedWriteError(
                f"write refused: fence node {claim.path} {why} (expected version {claim.version}); "
                "this process no longer owns the destination"
            )
    for result in results:
        if isinstance(result, Exception) and not isinstance(result, RolledBackError):
            raise result
    return results
