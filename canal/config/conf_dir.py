"""Whole canal ``conf/`` directories: ``canal.properties`` and every ``{destination}/instance.properties``."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from canal.client import DESTINATION_RE
from canal.config.instance import InstanceConfig
from canal.config.keys import (
    _is_file,
    _key,
    _read_source,
)
from canal.config.properties import parse_properties
from canal.config.server import ServerConfig, _server_from_raw
from canal.errors import ConfigError

logger = logging.getLogger(__name__)


def load_conf_dir(path: str | os.PathLike[str]) -> tuple[ServerConfig, dict[str, InstanceConfig]]:
    """Load a canal ``conf/`` directory: ``conf/canal.properties`` and ``conf/{destination}/instance.properties``.

    ``path`` is the conf directory (or its ``canal.properties``). The destinations are those of
    ``canal.destinations``; with ``canal.auto.scan`` (canal's default) every other sub-directory holding an
    ``instance.properties`` is a destination too. Relative directories in the files are resolved as canal does,
    against its working directory ``{conf}/../bin`` (so canal's ``../conf`` means the conf directory).
    """
    conf = Path(path)
    if _is_file(conf):
        conf = conf.parent
    canal_file = conf / "canal.properties"
    if not _is_file(canal_file):
        raise ConfigError(f"no canal.properties in {os.fspath(conf)!r}", key="canal.properties")
    base_dir = os.path.normpath(os.fspath(conf.parent / "bin"))
    text, _path = _read_source(canal_file)
    server = _server_from_raw(parse_properties(text), base_dir, os.path.normpath(os.fspath(conf)))
    names = list(server.destinations)
    for name in names:
        if not _is_file(conf / name / "instance.properties"):
            raise ConfigError(
                f"invalid {_key(ServerConfig, 'destinations')} = {','.join(names)!r}: no {name}/instance.properties in "
                f"{os.fspath(conf)!r}",
                key=_key(ServerConfig, "destinations"),
            )
    if server.auto_scan:
        try:
            children = sorted(conf.iterdir())
        except OSError as exc:
            what = exc.strerror or exc
            raise ConfigError(f"cannot list {os.fspath(conf)!r}: {what}", key=_key(ServerConfig, "auto_scan")) from None
        for child in children:
            if child.name not in names and _is_file(child / "instance.properties"):
                if DESTINATION_RE.fullmatch(child.name):
                    names.append(child.name)
                else:
                    logger.warning("ignoring %s: %r is not a valid destination name", child, child.name)
    instances = {
        name: InstanceConfig.from_properties(
            conf / name / "instance.properties", destination=name, canal_properties=server, base_dir=base_dir
        )
        for name in names
    }
    return server, instances
