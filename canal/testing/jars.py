"""The jars of the checkout's Maven project (``jars/``), which ``scripts/setup.sh`` fetches from Maven Central and
builds: Spark's connectors for a SparkSession (Delta Lake's, Kafka's, Hadoop's S3A), the test suite's Kafka broker and
canal's MQ classes.

A SparkSession gets the connectors through ``spark.jars`` (:func:`spark_conf`), local files: nothing is resolved
from a repository when Spark starts (``spark.jars.packages`` would ask Maven Central then). What pyspark's own
``jars/`` directory already holds (Scala, Hadoop's client, the compression codecs, logging, ...) is left out, so no
library is on the class path twice in two versions. Where Maven was not there when the setup ran, :func:`skip_reason`
says so and the tests that need the jars skip with that reason.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

from canal.errors import ServiceError
from canal.testing.services.process import SETUP_COMMAND

MODULES = ("spark", "kafka", "canal-mq")

SPARK_VERSION = "4.2.0"
"""The Spark the connectors are built for, which pyspark is pinned to (a connector jar must match its Spark)."""
DELTA_VERSION = "4.4.0"
KAFKA_VERSION = "4.4.0"
CANAL_VERSION = "1.1.7"

DELTA_SQL_CONF = {
    # a Delta log's state is rebuilt in this many tasks (Delta's default is 50: a test's table has a few files)
    "spark.databricks.delta.snapshotPartitions": "2",
    # VACUUM lists a table's directories in a job of this many tasks (Spark's default is 10,000: minutes of empty
    # tasks on 2 cores)
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
    # Delta's SQL (DESCRIBE HISTORY, VACUUM, OPTIMIZE, time travel in SQL) and its catalog (CREATE TABLE ... USING
    # delta, a Declarative Pipeline's Delta tables)
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


def root() -> Path:
    """The Maven project: ``$PYCANAL_JARS_DIR``, else ``jars/`` of the checkout this package is imported from."""
    given = os.environ.get("PYCANAL_JARS_DIR")
    return Path(given) if given else Path(__file__).resolve().parent.parent.parent / "jars"


def stamp_path() -> Path:
    return root() / "target" / "build-stamp"


def sources_digest() -> str:
    """What ``scripts/setup.sh`` writes to the build stamp: the SHA-256 of ``sha256sum``'s lines for every file
    under ``jars/`` outside ``target/`` directories, in byte order of their paths (``./pom.xml`` ...)."""
    base = root()
    names = sorted(
        (
            "./" + p.relative_to(base).as_posix()
            for p in base.rglob("*")
            if p.is_file() and "target" not in p.relative_to(base).parts
        ),
        key=str.encode,
    )
    lines = "".join(f"{hashlib.sha256((base / n).read_bytes()).hexdigest()}  {n}\n" for n in names)
    return hashlib.sha256(lines.encode()).hexdigest()


def skip_reason() -> str | None:
    """Why the jars cannot be used here (None: they can)."""
    if shutil.which("java") is None:
        return f"no java on PATH: run {SETUP_COMMAND}"
    base = root()
    if not (base / "pom.xml").is_file():
        return f"no Maven project at {base} (set PYCANAL_JARS_DIR)"
    built = (base / "spark" / "target" / "jars").is_dir() and all(
        (base / m / "target" / "classpath.txt").is_file() for m in MODULES[1:]
    )
    if not stamp_path().is_file() or not built:
        if shutil.which("mvn") is None:
            return f"the jars ({base}) are not built and Maven is not installed: install maven, run {SETUP_COMMAND}"
        return f"the jars ({base}) are not built: run {SETUP_COMMAND}"
    if stamp_path().read_text().strip() != sources_digest():
        return f"the jars ({base}) are older than their pom files: run {SETUP_COMMAND}"
    return None


def _require() -> Path:
    reason = skip_reason()
    if reason is not None:
        raise ServiceError(reason)
    return root()


_VERSIONED = re.compile(r"^(?P<name>.+?)-\d[\w.+-]*\.jar$")


def _artifact(jar: str) -> str:
    match = _VERSIONED.match(jar)
    return match.group("name") if match else jar


def spark_jars() -> list[str]:
    """The connector jars, less those whose artifact pyspark ships (in any version)."""
    from canal.testing.services.spark import spark_home

    shipped = {_artifact(p.name) for p in (spark_home() / "jars").glob("*.jar")}
    folder = _require() / "spark" / "target" / "jars"
    return sorted(str(p) for p in folder.glob("*.jar") if _artifact(p.name) not in shipped)


def spark_conf(*, delta_sql: bool = True) -> dict[str, str]:
    """SparkSession settings that add the connectors (and, with ``delta_sql``, Delta's SQL and catalog)."""
    conf = {"spark.jars": ",".join(spark_jars())}
    if delta_sql:
        conf.update(DELTA_SQL_CONF)
    return conf


def classpath(module: str) -> str:
    """The class path a module wrote (``kafka``: the broker; ``canal-mq``: canal's classes and this module's)."""
    base = _require() / module / "target"
    jars = (base / "classpath.txt").read_text().strip()
    classes = base / "classes"
    return os.pathsep.join([str(classes), jars] if classes.is_dir() else [jars])


__all__ = [
    "CANAL_VERSION",
    "DELTA_SQL_CONF",
    "DELTA_VERSION",
    "KAFKA_VERSION",
    "SPARK_VERSION",
    "classpath",
    "root",
    "skip_reason",
    "sources_digest",
    "spark_conf",
    "spark_jars",
]
