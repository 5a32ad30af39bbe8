"""Private MariaDB, ZooKeeper, S3 (moto), Kafka (KRaft), Spark standalone and Spark Connect servers for tests and
the demo.

Each server runs as a child process on a free 127.0.0.1 port with its own temporary directory, never touching the
system services or their configuration. Servers are stopped by pid: explicitly (:meth:`stop`), by leaving a ``with``
block, or at interpreter exit for anything still running. When started from the main thread the child also gets a
parent-death signal, so it dies with the Python process even if that process is killed outright.

Liveness is read from ``/proc/PID/stat`` (a crashed, unreaped child is a zombie, which ``kill -0`` reports alive).

The binaries come from the system packages ``mariadb-server``, ``zookeeper`` and a JRE, and from the Python packages
``moto[server]`` (``moto_server``) and ``pyspark`` (a whole Spark distribution), installed by ``scripts/setup.sh``;
a missing binary raises :class:`~canal.errors.ServiceError` naming that script.
"""

from canal.testing.services.kafka import KafkaServer
from canal.testing.services.mariadb import MariaDBServer
from canal.testing.services.process import SETUP_COMMAND, free_port, live_services, process_state
from canal.testing.services.s3 import S3Server
from canal.testing.services.spark import SparkCluster, SparkConnectServer, SparkMaster, SparkWorker
from canal.testing.services.zookeeper import ZooKeeperServer

__all__ = [
    "SETUP_COMMAND",
    "KafkaServer",
    "MariaDBServer",
    "S3Server",
    "SparkCluster",
    "SparkConnectServer",
    "SparkMaster",
    "SparkWorker",
    "ZooKeeperServer",
    "free_port",
    "live_services",
    "process_state",
]
