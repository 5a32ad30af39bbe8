#!/usr/bin/env bash
# Installs what pycanal needs to run its tests and demo; idempotent and quick when nothing changed.
#  - system packages mariadb-server, mariadb-client, tzdata, zookeeper, default-jre-headless, prometheus,
#    percona-toolkit (only those missing; their services are not started: pycanal runs its own private servers;
#    prometheus brings promtool, which checks the alert rules in monitoring/, and the server that
#    scripts/dashboard_png.py scrapes the demo with; percona-toolkit's pt-online-schema-change runs a real online
#    schema change in the tests)
#  - .venv (Python >= 3.11) with pycanal installed editable with the dev, spark, pipelines, query and docs extras, reinstalled
#    only when pyproject.toml changed since the last install
#  - its bytecode (.pyc), and the project's and its tests' (pytest's rewritten modules too: scripts/test_bytecode.py):
#    nothing else writes it where PYTHONDONTWRITEBYTECODE is set
#  - the peers' harness (peers/: canal's embedded server and Debezium's engine, which the differential tests and
#    benchmarks/bench_peers.py run beside pycanal), built with Maven when mvn is installed, rebuilt only when its
#    sources changed; without mvn its tests skip, saying so
#  - the jars (jars/: Spark's Delta, Kafka and S3A connectors, the tests' Kafka broker, canal's MQ classes), fetched
#    from Maven Central and built when mvn is installed, again only when their pom files changed; without mvn the
#    tests that need them skip, saying so
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf 'setup: %s\n' "$*" >&2; }

have_file_or_cmd() {  # NAME [PATH...]: true if NAME is on PATH or any PATH exists
    local name=$1; shift
    command -v "$name" >/dev/null 2>&1 && return 0
    local path
    for path in "$@"; do [[ -e $path ]] && return 0; done
    return 1
}

PYTHON=${PYTHON:-}
python_ok() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; }
if [[ -z $PYTHON ]]; then
    for candidate in python3 python3.13 python3.12 python3.11; do
        if command -v "$candidate" >/dev/null 2>&1 && python_ok "$candidate"; then PYTHON=$candidate; break; fi
    done
fi

missing=()
have_file_or_cmd mariadbd /usr/sbin/mariadbd || missing+=(mariadb-server)
have_file_or_cmd mariadb-install-db || missing+=(mariadb-server)
# the time-zone tests load MariaDB's zone tables (mariadb-tzinfo-to-sql, the mariadb client) from the tz database,
# which Python's zoneinfo reads too
have_file_or_cmd mariadb-tzinfo-to-sql || missing+=(mariadb-client)
have_file_or_cmd mariadb || missing+=(mariadb-client)
[[ -f /usr/share/zoneinfo/Europe/Berlin ]] || missing+=(tzdata)
[[ -f /usr/share/java/zookeeper.jar ]] || missing+=(zookeeper)
have_file_or_cmd java || missing+=(default-jre-headless)
# peers/ compiles its harness of canal and Debezium, jars/ fetches Spark's connectors (both from Maven Central)
have_file_or_cmd javac || missing+=(default-jdk-headless)
have_file_or_cmd mvn || missing+=(maven)
have_file_or_cmd promtool /usr/bin/promtool || missing+=(prometheus)
have_file_or_cmd pt-online-schema-change || missing+=(percona-toolkit)
if [[ -z $PYTHON ]]; then
    missing+=(python3 python3-venv)
elif [[ ! -x .venv/bin/python ]] && ! "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1; then
    missing+=(python3-venv)
fi

if ((${#missing[@]})); then
    mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
    command -v apt-get >/dev/null 2>&1 || { log "missing ${missing[*]} and no apt-get: install them by hand"; exit 1; }
    sudo=()
    if [[ $(id -u) -ne 0 ]]; then sudo=(sudo); fi
    log "installing ${missing[*]}"
    # Keep Debian's maintainer scripts from starting system services while installing (the usual policy-rc.d hook).
    policy=/usr/sbin/policy-rc.d
    added_policy=0
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
        "${sudo[@]}" chmod +x "$policy"
        added_policy=1
    fi
    cleanup_policy() { if ((added_policy)); then "${sudo[@]}" rm -f "$policy"; fi; }
    trap cleanup_policy EXIT
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -q
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
    cleanup_policy
    trap - EXIT
    if [[ -z $PYTHON ]]; then PYTHON=python3; fi
fi

if [[ ! -x .venv/bin/python ]]; then
    python_ok "$PYTHON" || { log "$PYTHON is older than 3.11"; exit 1; }
    log "creating .venv with $("$PYTHON" --version)"
    "$PYTHON" -m venv .venv
fi

stamp=.venv/.pycanal-install-stamp
want=$(sha256sum < pyproject.toml | cut -d' ' -f1)
if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
    log "installing pycanal (editable, extras dev, spark, pipelines, query and docs) into .venv (log: .venv/pip-install.log)"
    # uv (from PyPI, into the venv) installs the same requirements in a third of pip's time on a fresh machine
    # (parallel downloads; pyspark's 400 MB unpacked once); pip does it where uv cannot be had or fails
    extras='.[dev,spark,pipelines,query,docs]'
    if ! { .venv/bin/python -m pip install uv && VIRTUAL_ENV="$PWD/.venv" .venv/bin/uv pip install -e "$extras"; } \
        > .venv/pip-install.log 2>&1; then
        log "uv could not install pycanal; pip does (log: .venv/pip-install.log)"
        if ! { .venv/bin/python -m pip install --upgrade pip && .venv/bin/python -m pip install -e "$extras"; } \
            >> .venv/pip-install.log 2>&1; then
            tail -n 40 .venv/pip-install.log >&2
            log "pip install failed; full log in .venv/pip-install.log"
            exit 1
        fi
    fi
    printf '%s\n' "$want" > "$stamp"
fi

# Bytecode, written once here: where PYTHONDONTWRITEBYTECODE is set (it is on these machines) no import writes a .pyc,
# so every process -- each PySpark worker, each test's subprocess -- would compile pyspark, pandas, numpy and the
# rest from source again (1.75 s against 0.9 s to import them with the bytecode there). compileall writes it whatever
# that variable says; a second run only checks the files' times.
bytecode_stamp=.venv/.pycanal-bytecode-stamp
if [[ ! -f $bytecode_stamp || $(cat "$bytecode_stamp") != "$want" ]]; then
    log "compiling the virtualenv's bytecode"
    # a file a package ships that does not compile stays source, imported as before: not a reason to stop
    if ! .venv/bin/python -m compileall -q -j 0 .venv/lib > .venv/compileall.log 2>&1; then
        log "some files stay source (.venv/compileall.log)"
    fi
    printf '%s\n' "$want" > "$bytecode_stamp"
fi
.venv/bin/python -m compileall -q -j 0 canal tests > /dev/null  # the project's own and the tests', as they are now
# and what pytest compiles for the modules whose asserts it rewrites (the tests', and canal's: canal registers pytest's
# plugin), which it caches only where PYTHONDONTWRITEBYTECODE is not set: each xdist worker spent some 11 s of CPU
# rewriting them from source before its first test (scripts/test_bytecode.py; 0.5 s when they are up to date)
.venv/bin/python scripts/test_bytecode.py > /dev/null || log "pytest rewrites the tests' modules itself at each run"
# pyspark's zip, which Spark puts first on every Python worker's path and whose modules no import can cache: each
# worker (the data source planners, the streaming source's runner, the daemon) compiled pyspark again, 1.7 s of CPU
# against 0.6 with the bytecode beside the sources; and pyspark's test suites out of it, which each new worker's first
# task rereads the directory entries of (canal.spark.zip_bytecode; a zip already written so is left alone)
.venv/bin/python -m canal.spark.zip_bytecode > /dev/null || log "pyspark's zips keep their sources only"

# The Maven projects: `mvn compile` of peers/ writes each module's classes and its class path (canal's embedded server,
# Debezium's engine: tests/peer_harness.py); of jars/, copies the Spark connectors into jars/spark/target/jars and
# writes the class paths of the Kafka broker and of canal's MQ classes (canal.testing.jars). Jars come from Maven
# Central into ~/.m2 the first time, offline afterwards. The stamp is the digest of the project's sources, which its
# users compare before they use it.
build_maven() {  # DIR WHAT-SKIPS
    local dir=$1 skips=$2 want
    want=$(cd "$dir" && find . -name target -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum \
        | sha256sum | cut -d' ' -f1)
    if [[ -f $dir/target/build-stamp && $(cat "$dir/target/build-stamp") == "$want" ]]; then
        return
    fi
    log "building $dir/ with Maven (log: $dir/target/build.log)"
    mkdir -p "$dir/target"
    # offline first: with every jar in ~/.m2 nothing asks Maven Central
    if (cd "$dir" && { mvn -B -q -o compile || mvn -B -q compile; }) > "$dir/target/build.log" 2>&1; then
        printf '%s
' "$want" > "$dir/target/build-stamp"
    else
        tail -n 30 "$dir/target/build.log" >&2
        log "$dir/ did not build ($dir/target/build.log): $skips skip"
    fi
}
if command -v mvn >/dev/null 2>&1; then
    build_maven peers "the tests against canal and Debezium"
    build_maven jars "the tests of Delta's, Kafka's and S3A's connectors"
else
    log "no mvn: peers/ and jars/ are not built; the tests against canal and Debezium and of Spark's connectors skip"
fi

# The class archive of the tests' Spark driver JVMs (canal.testing.services.spark_archive): written once, in about
# 40 s, for this pyspark and this JVM (after an upgrade of either it is written again), then every Spark JVM of the
# tests maps its classes instead of loading them from the jars again: half the CPU of a SparkSession's start. Without
# it the tests run as before, each JVM loading its classes itself.
if command -v java >/dev/null 2>&1 && ! .venv/bin/python -c \
        'import sys; from canal.testing.services.spark_archive import driver_archive as a; p = a(); sys.exit(p is None or not p.is_file())'; then
    log "writing the Spark JVMs' class archive (log: .venv/spark-archive.log)"
    .venv/bin/python -m canal.testing.services.spark_archive > .venv/spark-archive.log 2>&1 \
        || log "no class archive (.venv/spark-archive.log): the Spark JVMs load their classes from the jars"
fi
