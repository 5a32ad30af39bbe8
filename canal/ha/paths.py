"""canal's ZooKeeper layout (``ZookeeperPathUtils``), in one place for the HA monitors and the meta managers.

::

    /otter/canal/cluster/{ip:port}                              ephemeral: a running server
    /otter/canal/destinations/{dest}/running                    ephemeral: {"cid", "address", "active"}
    /otter/canal/destinations/{dest}/cluster/{ip:port}          ephemeral: a server able to run {dest}
    /otter/canal/destinations/{dest}/{clientId}/running         ephemeral: the process consuming that client id
    /otter/canal/destinations/{dest}/{clientId}/cursor          the client's cursor (canal's LogPosition JSON)
    /otter/canal/destinations/{dest}/{clientId}/filter          the client's subscription filter
    /otter/canal/destinations/{dest}/{clientId}/mark/{batchId}  outstanding batch marks

pycanal adds ``/otter/canal/destinations/{dest}/epoch`` (and ``.../{clientId}/epoch``): persistent nodes whose
version is the fencing token of the current activation. canal ignores them.
"""

from __future__ import annotations

ROOT = "/otter/canal"
CLUSTER_ROOT = f"{ROOT}/cluster"
DESTINATIONS_ROOT = f"{ROOT}/destinations"


def destination(dest: str) -> str:
    return f"{DESTINATIONS_ROOT}/{dest}"


def server_running(dest: str) -> str:
    return f"{destination(dest)}/running"


def server_epoch(dest: str) -> str:
    return f"{destination(dest)}/epoch"


def destination_cluster(dest: str) -> str:
    return f"{destination(dest)}/cluster"


def destination_cluster_member(dest: str, address: str) -> str:
    return f"{destination_cluster(dest)}/{address}"


def cluster_member(address: str) -> str:
    return f"{CLUSTER_ROOT}/{address}"


def client(dest: str, client_id: int) -> str:
    return f"{destination(dest)}/{client_id}"


def client_running(dest: str, client_id: int) -> str:
    return f"{client(dest, client_id)}/running"


def client_epoch(dest: str, client_id: int) -> str:
    return f"{client(dest, client_id)}/epoch"


def client_cursor(dest: str, client_id: int) -> str:
    return f"{client(dest, client_id)}/cursor"


def client_filter(dest: str, client_id: int) -> str:
    return f"{client(dest, client_id)}/filter"


def client_marks(dest: str, client_id: int) -> str:
    return f"{client(dest, client_id)}/mark"
