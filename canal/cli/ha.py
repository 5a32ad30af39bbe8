"""``canal ha status``: who runs each destination, the cluster members, the balance groups' members and shares, and
each client's cursor (ZooKeeper); ``canal ha move DEST --to ADDRESS``: move a destination to a process of its balance
group by hand, as canal-admin's stop and start do."""

from __future__ import annotations

import argparse
import json
import threading
from typing import Any

from canal.cli.common import ZK_TIMEOUT_S, parse_hosts, positive_float
from canal.client import ClientIdentity
from canal.errors import HAError
from canal.ha.balance import GroupView, group_names, read_group, request_move
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
    status.add_argument(
        "--timeout",
        "--zk-timeout",
        dest="timeout",
        type=positive_float,
        default=ZK_TIMEOUT_S,
        metavar="S",
        help=f"seconds to wait for ZooKeeper (its connection, each read) before failing (default {ZK_TIMEOUT_S:g})",
    )
    status.set_defaults(run=run_status)
    move = hsub.add_parser(
        "move",
        help="move a destination to another process of its balance group",
        description="Pin DEST to the process registered as ADDRESS in the balance group: its owner hands it over "
        "(on_revoked, acks, meta flushed) and that process takes it over from the acked cursor. The pin lasts while "
        "that process lives; the group moves another destination the other way when the pin would unbalance it.",
    )
    move.add_argument("destination", metavar="DEST", help="the destination to move")
    move.add_argument("--to", required=True, metavar="ADDRESS", help="the address of the process that should run it")
    move.add_argument("--zk", required=True, metavar="HOSTS", help="ZooKeeper hosts, e.g. 127.0.0.1:2181[/chroot]")
    move.add_argument("--group", default="default", metavar="NAME", help="the balance group (default: default)")
    move.add_argument(
        "--wait", type=float, default=0.0, metavar="S", help="wait up to S seconds until that process runs it"
    )
    move.add_argument(
        "--timeout",
        "--zk-timeout",
        dest="timeout",
        type=positive_float,
        default=ZK_TIMEOUT_S,
        metavar="S",
        help=f"seconds to wait for ZooKeeper (its connection, each read) before failing (default {ZK_TIMEOUT_S:g})",
    )
    move.set_defaults(run=run_move)


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


def collect_status(zk: Any, only: str | None, timeout: float = ZK_TIMEOUT_S) -> dict[str, Any]:
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
    groups = [_group_status(read_group(zk, g, timeout=timeout)) for g in group_names(zk, timeout=timeout)]
    if only is not None:
        for group in groups:
            group["owners"] = {d: o for d, o in group["owners"].items() if d == only}
    return {"cluster": children(zkpaths.CLUSTER_ROOT), "destinations": destinations, "balance": groups}


def _group_status(view: GroupView) -> dict[str, Any]:
    """A balance group as JSON: members with their shares, what is assigned to and served by each, pins, and the
    destinations held outside the group."""
    doc = view.doc
    address = {m.id: m.address for m in view.members}
    members = [
        {
            "id": m.id,
            "address": m.address,
            "share": None if doc is None else doc.quotas.get(m.id),
            "max": m.max_destinations,
            "leaving": m.leaving,
            "assigned": [] if doc is None else doc.mine(m.id),
            "serving": view.serving(m.id),
        }
        for m in view.members
    ]
    return {
        "group": view.group,
        "members": members,
        "owners": {} if doc is None else {d: address.get(o or "") for d, o in sorted(doc.owners.items())},
        "pins": {} if doc is None else {d: address.get(m, m) for d, m in sorted(doc.pins.items())},
        "foreign": list(view.foreign),
    }


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def format_status(status: dict[str, Any]) -> list[str]:
    lines = [f"cluster: {', '.join(status['cluster']) or '(no servers registered)'}"]
    for group in status.get("balance", ()):
        lines.append(f"balance group {group['group']}: {len(group['members'])} members")
        for m in group["members"]:
            share = "-" if m["share"] is None else m["share"]
            cap = "" if m["max"] is None else f", max {m['max']}"
            leaving = ", leaving" if m["leaving"] else ""
            lines.append(
                f"  {m['address']} ({m['id']}): share {share}, assigned {len(m['assigned'])}, "
                f"serving {len(m['serving'])}{cap}{leaving}: {', '.join(m['serving']) or '-'}"
            )
        if group["foreign"]:
            lines.append(f"  outside the group: {', '.join(group['foreign'])}")
        if group["pins"]:
            lines.append("  pinned: " + ", ".join(f"{d} -> {a}" for d, a in group["pins"].items()))
    assigned = {d: (g["group"], a) for g in status.get("balance", ()) for d, a in g["owners"].items()}
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
        if dest["destination"] in assigned:
            group, to = assigned[dest["destination"]]
            lines.append(f"  assigned: {to or 'nobody'} (balance group {group})")
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
            status = collect_status(zk, args.destination, args.timeout)
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


def run_move(args: argparse.Namespace) -> int:
    from kazoo.exceptions import KazooException
    from kazoo.handlers.threading import KazooTimeoutError
    from kazoo.recipe.watchers import DataWatch

    hosts = parse_hosts(args.zk)
    zk = make_client(hosts, args.timeout)
    try:
        try:
            zk.start(timeout=args.timeout)
        except KazooTimeoutError:
            raise HAError(f"cannot connect to ZooKeeper at {hosts} within {args.timeout:g} s") from None
        try:
            doc = request_move(zk, args.group, args.destination, args.to, timeout=args.timeout)
            target = next(m for m, (address, _) in doc.members.items() if address == args.to)
            print(f"{args.destination}: moving to {args.to} ({target}) in balance group {args.group}")
            if args.wait > 0:
                session = read_group(zk, args.group, timeout=args.timeout).sessions.get(target)
                there = threading.Event()

                def watch(_data: bytes | None, stat: Any) -> bool | None:
                    if stat is not None and stat.ephemeralOwner == session:
                        there.set()
                        return False
                    return None

                DataWatch(zk, zkpaths.destination_running_path(args.destination), watch)
                if not there.wait(args.wait):
                    raise HAError(f"{args.destination} is not running at {args.to} after {args.wait:g} s")
                print(f"{args.destination}: running at {args.to}")
        except KazooException as exc:
            raise HAError(f"ZooKeeper failed: {type(exc).__name__} {exc}".rstrip()) from None
    finally:
        zk.stop()
        zk.close()
    return 0
