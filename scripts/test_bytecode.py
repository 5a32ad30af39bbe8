"""Write the bytecode pytest caches for the modules it rewrites (its assertion rewriting), several processes at once.

pytest rewrites the asserts of the test modules (``test_*.py``, ``conftest.py``) and of every module of the package
that registers a pytest plugin (``canal``: its ``canal.testing.plugin``), and caches what it compiled beside each
source -- unless PYTHONDONTWRITEBYTECODE is set, as it is on these machines: then every pytest process (each xdist
worker, each test's pytest subprocess) rewrote and compiled all of them from source again, some 11 s of CPU before a
worker ran its first test. Written here once, they are read as pytest would have cached them: pytest checks each
file's source hash and rewrites a module whose file is stale or unreadable, so a file this writes wrong or late is
never used. Needs the pytest it writes for (its private ``_pytest.assertion.rewrite``): with another, it says so and
writes nothing, and pytest rewrites the modules as before.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _write(path: str) -> bool:
    """Write the rewritten bytecode of the module at ``path`` unless an up-to-date one is there; whether it wrote."""
    from _pytest.assertion import rewrite

    source = Path(path)
    pyc = rewrite.get_cache_dir(source) / (source.name[:-3] + rewrite.PYC_TAIL)
    if rewrite._read_pyc(source, pyc) is not None:
        return False
    source_hash, code = rewrite._rewrite_test(source, None)  # no config: as without enable_assertion_pass_hook
    pyc.parent.mkdir(exist_ok=True)
    partial = pyc.with_name(f"{pyc.name}.{os.getpid()}")
    with open(partial, "wb") as fp:
        rewrite._write_pyc_fp(fp, source_hash, code)
    os.replace(partial, pyc)  # whole or not there, as pytest writes its own
    return True


def rewritten_modules() -> list[str]:
    """The files of the modules pytest rewrites in this repository."""
    tests = [p for p in (ROOT / "tests").rglob("*.py") if p.name.startswith("test_") or p.name == "conftest.py"]
    return sorted(str(p) for p in [*tests, *(ROOT / "canal").rglob("*.py")])


def main() -> int:
    try:
        from _pytest.assertion import rewrite

        names = ("get_cache_dir", "PYC_TAIL", "_read_pyc", "_rewrite_test", "_write_pyc_fp")
        missing = [name for name in names if not hasattr(rewrite, name)]
    except ImportError as exc:
        missing = [str(exc)]
    if missing:
        print(f"test bytecode: this pytest lacks {missing}: it rewrites the modules itself", file=sys.stderr)
        return 1
    files = rewritten_modules()
    with ProcessPoolExecutor(os.cpu_count()) as pool:
        written = sum(pool.map(_write, files, chunksize=16))
    print(f"test bytecode: {written} of {len(files)} modules rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
