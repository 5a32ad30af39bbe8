"""A private S3-compatible object store: moto's ``moto_server`` (see :mod:`canal.testing.services`)."""

from __future__ import annotations

import secrets
import shutil
import sys
import urllib.request
from pathlib import Path
from typing import Any, ClassVar

from canal.errors import ServiceError
from canal.testing.services.process import SETUP_COMMAND, _Service, listens_on

_REGION = "us-east-1"


class S3Server(_Service):
    """moto's S3 server (PyPI ``moto[server]``) on a free loopback port, in memory.

    :meth:`storage_options` gives the options ``deltalake`` (object_store) takes, :meth:`pyarrow_options` the keyword
    arguments of ``pyarrow.fs.S3FileSystem``. The keys are random per server; moto does not check signatures, but
    they are still kept out of reprs and logs like a real secret.

    What the store offers a committer (measured with moto 5.2, ``test_s3_service.py`` checks each):

    - ``PutObject`` with ``If-None-Match: *`` is honoured on signed requests: a second put of an existing key
      answers 412 ``PreconditionFailed`` and leaves the first object -- the no-replace write a commit protocol needs.
      (An unsigned request with that header gets 403: use signed clients, as every real one is.)
    - ``PutObject`` with ``If-Match: <etag>`` is honoured: a stale ETag answers 412, the current one replaces the
      object -- compare-and-swap.
    - No links and no rename (S3 has none); ``deltalake`` writes and reads tables here with only the options of
      :meth:`storage_options` (no lock provider, no unsafe-rename flag).
    """

    kind: ClassVar[str] = "s3"
    start_timeout: float = 60.0
    region: ClassVar[str] = _REGION

    def __init__(self, port: int | None = None) -> None:
        super().__init__(port)
        self.access_key = f"pycanal-{secrets.token_hex(4)}"
        self._secret_key = secrets.token_hex(16)

    def __repr__(self) -> str:
        return f"S3Server(endpoint={self.endpoint_url!r}, pid={self.pid}, running={self.is_running})"

    @property
    def endpoint_url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://{self.address}"

    def storage_options(self) -> dict[str, str]:
        """Options for ``deltalake`` (``storage_options=``): endpoint, keys, region, plain HTTP allowed."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self._secret_key,
            "AWS_REGION": self.region,
            "AWS_ALLOW_HTTP": "true",
        }

    def pyarrow_options(self) -> dict[str, str]:
        """Keyword arguments of ``pyarrow.fs.S3FileSystem`` for this server."""
        return {
            "endpoint_override": self.address,
            "scheme": "http",
            "access_key": self.access_key,
            "secret_key": self._secret_key,
            "region": self.region,
        }

    def client(self) -> Any:
        """A boto3 S3 client signed with this server's keys (boto3 comes with ``moto[server]``)."""
        import boto3

        options = self.storage_options()
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=options["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=options["AWS_SECRET_ACCESS_KEY"],
            region_name=self.region,
        )

    def create_bucket(self, name: str) -> str:
        """Create bucket ``name`` (3-63 characters: lower-case letters, digits, hyphens); returns ``s3://name``."""
        self.client().create_bucket(Bucket=name)
        return f"s3://{name}"

    def _check_binaries(self) -> None:
        # moto_server is installed next to this interpreter (a venv's bin), which need not be on PATH
        beside = Path(sys.executable).parent / "moto_server"
        found = str(beside) if beside.is_file() else shutil.which("moto_server")
        if found is None:
            raise ServiceError(
                f"S3Server needs moto_server (PyPI moto[server], in pycanal's dev extra), not installed: "
                f"run {SETUP_COMMAND}"
            )
        self._moto = found

    def _initialize(self, workdir: Path) -> None:
        pass  # moto keeps everything in memory

    def _command(self) -> list[str]:
        return [self._moto, "-H", self.host, "-p", str(self.port)]

    def _probe(self) -> bool:
        # moto's own API (JSON) rather than S3's: it tells moto from some other server that took the port
        try:
            with urllib.request.urlopen(f"{self.endpoint_url}/moto-api/data.json", timeout=1.0) as response:
                first: bytes = response.read(1)
        except (OSError, ValueError):
            return False
        return first == b"{" and self.pid is not None and listens_on(self.pid, self.host, self.port)

    def _launch(self) -> None:
        try:
            super()._launch()
        except ServiceError as exc:
            if "Address already in use" in str(exc):
                raise ServiceError(f"s3 port {self.port} is in use: {exc}") from exc
            raise
