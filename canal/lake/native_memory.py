"""Native memory given back to the system: deltalake's allocator told to return freed pages at once, and glibc's
free pages returned after each large batch.

deltalake's extension allocates through its own jemalloc, outside pyarrow's pool, which by default keeps freed pages
for 10 seconds (``dirty_decay_ms``) in an arena per thread. Each write and MERGE of a wide table (DataFusion builds
its plans and buffers per column) leaves hundreds of MB there that no later call reuses in time: into the embedded
mirror, 21,000 changes of a 1,000-column row peaked at about 1 GB RSS, 650-1,000 MB of it at rest between batches,
where pyarrow's pool held under 60 MB (``benchmarks/bench_wide.py``). With freed pages purged at once the same run
peaked at about 700 MB and rested at 600, with no change in its wall time (the purges cost system time inside
deltalake's calls, which the mirror makes off the decoder's thread).

jemalloc reads its settings once, from ``_RJEM_MALLOC_CONF``, when the extension is loaded: this module sets it
before anything here imports deltalake, unless the environment sets it already (a user's setting wins), and it
does nothing when deltalake was imported first. The package ``canal.lake`` calls it on import (its modules import
deltalake only when used). Processes started from this one (Spark workers) inherit it.

glibc keeps what Python frees -- a batch's decoded rows, whose tuples of hundreds of cells are too large for
Python's own allocator -- in an arena per thread that allocated it, and returns to the system only the top of each.
Between the parser's, the consumer's and the folds' threads (and the threads deltalake starts for its calls), the
embedded mirror at 1,000 columns rested at about 610 MB with 130 MB of it free in those arenas, and its peak grew
with the run's length (638-640 MB for 21,000 changes, 706-727 for 41,000). ``run_batches`` calls
:func:`give_back_freed` (``malloc_trim``) after each large batch, once its rows are released: the same runs peaked
at 542-576 and 555-570 MB (``benchmarks/bench_wide.py``). ``MALLOC_ARENA_MAX=2`` (fewer arenas) gave no clear gain
beside it (548-552 MB).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys
from collections.abc import Callable

ALLOCATOR_SETTING = "_RJEM_MALLOC_CONF"
PURGE_AT_ONCE = "dirty_decay_ms:0,muzzy_decay_ms:0"


def purge_freed_memory() -> bool:
    """Set deltalake's allocator to return freed pages at once, if it is not loaded yet and the environment does not
    say otherwise. Whether the setting is the one it will use."""
    if "deltalake" not in sys.modules:
        os.environ.setdefault(ALLOCATOR_SETTING, PURGE_AT_ONCE)
    return os.environ.get(ALLOCATOR_SETTING) == PURGE_AT_ONCE


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none (musl, macOS, Windows)."""
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


def give_back_freed() -> bool:
    """Return the free pages of glibc's arenas to the system (the module docstring says why); False where the C
    library cannot. It takes a few milliseconds with hundreds of MB in the arenas, so callers do it after a large
    batch, not after each small one."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
