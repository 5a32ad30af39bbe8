"""``canal ha status``: who runs each destination, the cluster members, and each client's cursor (ZooKeeper)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from canal.cli.common import parse_hosts
from canal.client import ClientIdentity
from canal.errors import HAError
from canal.ha.running import RELEASED
from canal.meta import zkpaths
from canal.meta.zkclient import make_client


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "ha", help="inspect ZooKeeper HA state", description="Inspect canal's HA state kept in ZooKeeper."
    )
    hsub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    status = hsub.add_parser(
        "status",
        help="who runs each destination, cluster members, client cursors",
        description="Show, per destination, the running node (which server runs it), the servers able to run it, "
        "and each client's running node and cursor; plus the servers registered in the cluster.",
    )
    status.add_argument("--zk", required=True, metavar="HOSTS", help="ZooKeeper hosts, e.g. 127.0.0.1:2181[/chroot]")
    status.add_argument("--destination", metavar="NAME", help="only this destination")
    status.add_argument("--json", action="store_true", help="one JSON document instead of text")
    status.add_argument("--timeout", type=float, default=10.0, metavar="S", help="ZooKeeper connect timeout")
    status.set_defaults(run=run_status)


def _node_json(data: bytes | None) -> Any:
    if data is None:
        return None
    if data == RELEASED:
        return {"released": True}
    if not data:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return {"raw": data.decode("utf-8", "replace")}


def collect_status(zk: Any, only: str | None) -> dict[str, Any]:
    """The HA state as a JSON-friendly dict (see :func:`run_status`)."""
    from kazoo.exceptions import NoNodeError

    def get(path: str) -> bytes | None:
        try:
            data, _ = zk.get(path)
        except NoNodeError:
            return None
        return bytes(data) if data is not None else b""

    def children(path: str) -> list[str]:
        try:
            return sorted(zk.get_children(path))
        except NoNodeError:
            return []

    names = [only] if only is not None else children(zkpaths.DESTINATIONS_ROOT)
    destinations = []
    for name in names:
        clients = []
        for child in children(zkpaths.destination_path(name)):
            if not child.isdigit():
                continue
            client_id = int(child)
            clients.append(
                {
                    "client_id": client_id,
                    "running": _node_json(get(zkpaths.client_running_path(ClientIdentity(name, client_id)))),
                    "cursor": _node_json(get(zkpaths.cursor_path(ClientIdentity(name, client_id)))),
                    "filter": (get(zkpaths.filter_path(ClientIdentity(name, client_id))) or b"").decode() or None,
                }
            )
        destinations.append(
            {
                "destination": name,
                "running": _node_json(get(zkpaths.destination_running_path(name))),
                "cluster": children(zkpaths.destination_cluster_path(name)),
                "clients": clients,
            }
        )
    return {"cluster": children(zkpaths.CLUSTER_ROOT), "destinations": destinations}


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def format_status(status: dict[str, Any]) -> list[str]:
    lines = [f"cluster: {', '.join(status['cluster']) or '(no servers registered)'}"]
    if not status["destinations"]:
        lines.append("no destinations in ZooKeeper")
    for dest in status["destinations"]:
        running = dest["running"]
        if running is None:
            who = "nobody"
        elif running.get("released"):
            who = "nobody (released)"
        else:
            who = f"{running.get('address', '?')} {_compact(running)}"
        lines.append(f"destination {dest['destination']}")
        lines.append(f"  running: {who}")
        lines.append(f"  members: {', '.join(dest['cluster']) or '(none)'}")
        if not dest["clients"]:
            lines.append("  clients: (none)")
        for client in dest["clients"]:
            cursor = "none" if client["cursor"] is None else _compact(client["cursor"])
            consumer = client["running"]
            by = "" if consumer is None else f" consumed by {consumer.get('address', '?')}"
            flt = "" if client["filter"] is None else f" filter {client['filter']!r}"
            lines.append(f"  client {client['client_id']}{by}{flt}: cursor {cursor}")
    return lines


def run_status(args: argparse.Namespace) -> int:
    from kazoo.exceptions import KazooException
    from kazoo.handlers.threading import KazooTimeoutError

    hosts = parse_hosts(args.zk)
    zk = make_client(hosts, args.timeout, read_only=True)  # reads only: the nodes are world-readable
    try:
        try:
            zk.start(timeout=args.timeout)
        except KazooTimeoutError:
            raise HAError(f"cannot connect to ZooKeeper at {hosts} within {args.timeout:g} s") from None
        try:
            status = collect_status(zk, args.destination)
        except KazooException as exc:
            raise HAError(f"ZooKeeper failed: {type(exc).__name__} {exc}".rstrip()) from None
    finally:
        zk.stop()
        zk.close()
    if args.json:
        print(json.dumps(status, indent=2, sort_keys=True))
    else:
        print("\n".join(format_status(status)))
    return 0
