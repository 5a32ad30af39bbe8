"""ZooKeeper with authentication: pycanal's nodes get an ACL (all for its identity, read for the world).

A real private ZooKeeper: two EmbeddedServers authenticate with a digest credential; an unauthenticated client can
read what canal's tools read but cannot delete the running node or write the cursor; HA still fails over; the
credential never appears in reprs or log records.
"""

from __future__ import annotations

import logging
from decimal import Decimal

import pytest
from kazoo.exceptions import NoAuthError

from canal.client import ClientIdentity
from canal.config import InstanceConfig, MasterConfig, ServerConfig, StoreConfig, ZkAuth
from canal.errors import ConfigError
from canal.meta import zkpaths
from canal.server import EmbeddedServer
from canal.testing.fake import FakeMysql
from canal.testing.plugin import ZooKeeperChroot

pytestmark = pytest.mark.integration

SECRET = "s3cr3t-pw"
AUTH = ("digest", f"canal:{SECRET}")
DEST = "authed"
CLIENT = ClientIdentity(DEST, 1001)


@pytest.fixture
def fake(fake_mysql: FakeMysql) -> FakeMysql:
    fake_mysql.execute("CREATE TABLE shop.t (id INT PRIMARY KEY, amount DECIMAL(10,2))")
    for i in range(6):  # one transaction each: several entries per batch
        fake_mysql.insert("shop.t", {"id": i, "amount": Decimal(i)})
    return fake_mysql


def _config(fake: FakeMysql) -> InstanceConfig:
    return InstanceConfig(
        destination=DEST,
        master=MasterConfig(address=fake.address, journal_name="mysql-bin.000001", position=4),
        store=StoreConfig(batch_mode="ITEMSIZE"),
    )


def _server(zookeeper: ZooKeeperChroot, fake: FakeMysql, port: int) -> EmbeddedServer:
    server = EmbeddedServer(zk_hosts=zookeeper.hosts, zk_auth=AUTH, address=f"127.0.0.1:{port}", ha_delay_s=0.2)
    server.add_destination(_config(fake))
    return server


def test_pycanal_nodes_refuse_writes_without_the_credential_and_failover_works(
    zookeeper: ZooKeeperChroot, fake: FakeMysql, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    first = _server(zookeeper, fake, 31001)
    second = _server(zookeeper, fake, 31002)
    try:
        _serve_and_fail_over(zookeeper, first, second, caplog)
        for text in (repr(first), repr(second), repr(_config(fake)), caplog.text):
            assert SECRET not in text
    finally:
        # only the credential may delete what pycanal created (the fixture's cleanup has none)
        zookeeper.client(auth_data=[AUTH]).delete("/otter", recursive=True)


def _serve_and_fail_over(
    zookeeper: ZooKeeperChroot, first: EmbeddedServer, second: EmbeddedServer, caplog: pytest.LogCaptureFixture
) -> None:
    with first, second:
        assert first.wait_serving(DEST, 15)
        msg = first.get(CLIENT, 3, timeout=5)
        assert msg.id != -1
        first.instance(DEST).meta.flush()  # type: ignore[attr-defined]  # period-mixed: write the cursor now

        anonymous = zookeeper.client()
        running = zkpaths.destination_running_path(DEST)
        cursor = zkpaths.cursor_path(CLIENT)
        data, _ = anonymous.get(running)  # readable, as canal's tools need
        assert b"31001" in data
        cursor_before, _ = anonymous.get(cursor)
        with pytest.raises(NoAuthError):
            anonymous.delete(running)
        with pytest.raises(NoAuthError):
            anonymous.set(cursor, b'{"forged": true}')
        with pytest.raises(NoAuthError):
            anonymous.set(zkpaths.destination_epoch_path(DEST), b"x")
        assert anonymous.get(cursor)[0] == cursor_before
        acl, _ = anonymous.get_acls(running)  # ZooKeeper shows a digest id as "user:x"
        assert sorted((a.id.scheme, a.id.id.split(":")[0], a.perms) for a in acl) == [
            ("digest", "canal", 31),  # every permission
            ("world", "anyone", 1),  # read
        ]

        # the authenticated standby takes over when the owner stops, and resumes from the cursor
        first.stop()
        assert second.wait_serving(DEST, 15)
        rest = second.get(CLIENT, 100, timeout=5, linger=0.05)  # what is left, once the stream went quiet
        assert rest.id != -1


def test_zk_auth_is_read_from_canal_properties_and_never_shown(tmp_path: pytest.TempPathFactory) -> None:
    text = f"canal.zkServers = 127.0.0.1:2181\npycanal.zookeeper.auth = digest:canal:{SECRET}\n"
    config = ServerConfig.from_properties(text)
    assert config.zk_auth == ZkAuth("digest", f"canal:{SECRET}")
    assert SECRET not in repr(config) and SECRET not in repr(config.zk_auth)


@pytest.mark.parametrize(
    ("bad", "secret"),
    [("digest:nopassword", "nopassword"), ("sasl:u:hidden1", "hidden1"), ("digest::hidden2", "hidden2"), ("x", "x:")],
)
def test_a_bad_zk_auth_is_a_config_error_without_the_secret(bad: str, secret: str) -> None:
    with pytest.raises(ConfigError) as err:
        EmbeddedServer(zk_hosts="127.0.0.1:1", zk_auth=bad)
    assert secret not in str(err.value)
