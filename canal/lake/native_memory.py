"""deltalake's native allocator told to give freed memory back to the system at once.

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
"""

from __future__ import annotations

import os
import sys

ALLOCATOR_SETTING = "_RJEM_MALLOC_CONF"
PURGE_AT_ONCE = "dirty_decay_ms:0,muzzy_decay_ms:0"


def purge_freed_memory() -> bool:
    """Set deltalake's allocator to return freed pages at once, if it is not loaded yet and the environment does not
    say otherwise. Whether the setting is the one it will use."""
    if "deltalake" not in sys.modules:
        os.environ.setdefault(ALLOCATOR_SETTING, PURGE_AT_ONCE)
    return os.environ.get(ALLOCATOR_SETTING) == PURGE_AT_ONCE
