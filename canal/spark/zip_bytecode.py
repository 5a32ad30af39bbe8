"""Add bytecode to pyspark's ``pyspark.zip`` (and py4j's zip beside it), which every PySpark worker process imports
pyspark from.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on each Python worker's path -- the data source planners, the
streaming source's runner, the daemon and its workers -- and the zip holds sources only. Python caches no bytecode
for modules imported from a zip, so each of those processes compiles pyspark again: 1.7 s of CPU to import
``pyspark.worker`` from the zip against 0.5 s from compiled files on the machines of the project's figures, several
times over at a query's start. This writes the zip anew with each module's bytecode beside its source, as zipimport
looks for it (``module.pyc`` next to ``module.py``), in the unchecked-hash form (PEP 552): zipimport then loads it
without comparing times, which a zip's two-second DOS timestamps in local time would make fragile. The sources stay,
for tracebacks.

The rewrite leaves out the zip's test suites (every entry under a directory named ``tests``: 1,041 of pyspark 4's
1,485 entries), which no worker imports. Each worker's first task calls ``importlib.invalidate_caches()`` (pyspark's
``setup_spark_files`` puts the task's file directory on its path), and Python 3.11's zipimport then reads the zip's
whole directory again once for each of its packages a worker imported from it (15 for a task's): 0.125 s a new worker
with the tests, 0.055 s without them. A zip that holds bytecode and no test suite is left as it is; a reinstalled
pyspark brings the zip as it ships, which imports as before.

Usage: ``python -m canal.spark.zip_bytecode [ZIP...]`` (default: the installed pyspark's zips). On a cluster, run it
with each node's Python against ``$SPARK_HOME/python/lib/*.zip``: the workers import from those.
"""

from __future__ import annotations

import importlib.util
import os
import py_compile
import sys
import tempfile
import warnings
import zipfile
from pathlib import Path


def installed_zips() -> list[Path]:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise SystemExit("pyspark is not installed")
    return sorted((Path(spec.origin).parent / "python" / "lib").glob("*.zip"))


def bytecode(source: bytes, name: str, scratch: Path) -> bytes | None:
    """The unchecked-hash pyc of ``source`` (None when it does not compile: that module stays source), compiled
    through the file ``scratch``."""
    py, pyc = scratch.with_suffix(".py"), scratch.with_suffix(".pyc")
    py.write_bytes(source)
    with warnings.catch_warnings():  # a module's own warnings are its import's business, not this tool's
        warnings.simplefilter("ignore")
        try:
            py_compile.compile(
                str(py),
                str(pyc),
                dfile=name,
                doraise=True,
                invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
            )
        except py_compile.PyCompileError:
            return None
    return pyc.read_bytes()


def is_test_entry(name: str) -> bool:
    """Whether the zip entry ``name`` is part of a test suite: under a directory named ``tests``."""
    return "tests" in name.split("/")[:-1]


def add_bytecode(path: Path) -> int:
    """Write ``path`` anew with bytecode beside each module and without its test suites; the modules compiled (0: it
    held bytecode and no test suite already, and is left as it is). Bytecode already there is compiled again, from
    the source beside it."""
    with zipfile.ZipFile(path) as zin:
        names = zin.namelist()
        if any(name.endswith(".pyc") for name in names) and not any(map(is_test_entry, names)):
            return 0
        fd, tmp = tempfile.mkstemp(prefix=".pyspark-", suffix=".zip", dir=path.parent)
        os.close(fd)
        compiled = 0
        try:
            with (
                tempfile.TemporaryDirectory() as scratch,
                zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zout,
            ):
                for info in zin.infolist():
                    if is_test_entry(info.filename) or info.filename.endswith(".pyc"):
                        continue
                    data = zin.read(info)
                    zout.writestr(info, data)
                    if info.filename.endswith(".py"):
                        pyc = bytecode(data, info.filename, Path(scratch) / "module")
                        if pyc is not None:
                            entry = zipfile.ZipInfo(info.filename + "c", info.date_time)
                            entry.compress_type = zipfile.ZIP_DEFLATED
                            zout.writestr(entry, pyc)
                            compiled += 1
            os.chmod(tmp, path.stat().st_mode & 0o777)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    return compiled


def main(argv: list[str]) -> int:
    for path in [Path(a) for a in argv[1:]] or installed_zips():
        compiled = add_bytecode(path)
        done = f"{compiled} modules compiled" if compiled else "holds bytecode and no test suite already"
        print(f"{path.name}: {done}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
