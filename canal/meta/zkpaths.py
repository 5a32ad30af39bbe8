"""canal's ZooKeeper layout (``ZookeeperPathUtils``)::

/otter/canal/cluster/{ip:port}
/otter/canal/destinations/{dest}/running               server running node (ephemeral)
/otter/canal/destinations/{dest}/cluster/{ip:port}
/otter/canal/destinations/{dest}/parse                 parser log position
/otter/canal/destinations/{dest}/{clientId}            a subscription
/otter/canal/destinations/{dest}/{clientId}/filter
/otter/canal/destinations/{dest}/{clientId}/cursor
/otter/canal/destinations/{dest}/{clientId}/running    client running node (ephemeral)
/otter/canal/destinations/{dest}/{clientId}/mark/{batchId:010d}

and pycanal's additions: ``.../{dest}/epoch`` and ``.../{clientId}/epoch`` (fencing tokens),
``.../{dest}/schema_history``, and the balance groups ``/otter/canal/balance/{group}/members/m-{sequence}`` and
``.../{group}/assignment``.
"""

from __future__ import annotations

from canal.client import ClientIdentity, validate_destination

CANAL_ROOT = "/otter/canal"
DESTINATIONS_ROOT = f"{CANAL_ROOT}/destinations"
CLUSTER_ROOT = f"{CANAL_ROOT}/cluster"


def destination_path(destination: str) -> str:
    return f"{DESTINATIONS_ROOT}/{validate_destination(destination)}"


def parse_path(destination: str) -> str:
    return f"{destination_path(destination)}/parse"


def schema_history_path(destination: str) -> str:
    """pycanal's node for the destination's schema history (zlib-compressed JSON)."""
    return f"{destination_path(destination)}/schema_history"


def destination_running_path(destination: str) -> str:
    return f"{destination_path(destination)}/running"


def destination_cluster_path(destination: str, node: str | None = None) -> str:
    base = f"{destination_path(destination)}/cluster"
    return base if node is None else f"{base}/{node}"


def client_path(client: ClientIdentity) -> str:
    return f"{destination_path(client.destination)}/{client.client_id}"


def filter_path(client: ClientIdentity) -> str:
    return f"{client_path(client)}/filter"


def cursor_path(client: ClientIdentity) -> str:
    return f"{client_path(client)}/cursor"


def client_running_path(client: ClientIdentity) -> str:
    return f"{client_path(client)}/running"


def mark_root_path(client: ClientIdentity) -> str:
    return f"{client_path(client)}/mark"


def mark_node_name(batch_id: int) -> str:
    """canal pads batch ids to 10 digits, like ZooKeeper's sequential suffix."""
    return f"{batch_id:010d}"


def mark_path(client: ClientIdentity, batch_id: int) -> str:
    return f"{mark_root_path(client)}/{mark_node_name(batch_id)}"


def cluster_member_path(address: str) -> str:
    """``/otter/canal/cluster/{ip:port}``: a running server (ephemeral)."""
    return f"{CLUSTER_ROOT}/{address}"


def destination_epoch_path(destination: str) -> str:
    """pycanal's addition: the version of this persistent node is the server running monitor's fencing token."""
    return f"{destination_path(destination)}/epoch"


def client_epoch_path(client: ClientIdentity) -> str:
    """pycanal's addition: the client running monitor's fencing token (the version of this node)."""
    return f"{client_path(client)}/epoch"


BALANCE_ROOT = f"{CANAL_ROOT}/balance"


def balance_path(group: str) -> str:
    """pycanal's addition: a balance group (``canal.ha.balance``)."""
    return f"{BALANCE_ROOT}/{validate_destination(group)}"


def balance_members_path(group: str) -> str:
    """The group's members: ephemeral sequential ``m-<sequence>`` nodes, one per live process."""
    return f"{balance_path(group)}/members"


def balance_assignment_path(group: str) -> str:
    """The group's assignment: a persistent JSON document, written with a version check."""
    return f"{balance_path(group)}/assignment"
