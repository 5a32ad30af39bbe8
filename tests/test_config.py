"""Unit tests of canal.config: the attrs classes, validation, and loading canal's .properties files."""

from __future__ import annotations

import logging
import random
import shutil
import uuid
from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from canal.config import (
    BatchMode,
    DetectingConfig,
    FilterFlags,
    InstanceConfig,
    MasterConfig,
    MetaMode,
    RetryConfig,
    ServerConfig,
    StoreConfig,
    format_properties,
    load_conf_dir,
    parse_properties,
    resolve_placeholders,
)
from canal.errors import ConfigError, FilterError
from canal.filter import FieldFilter, compile_table_filter

DATA = Path(__file__).parent / "data" / "canal_conf"
EXAMPLE = DATA / "example" / "instance.properties"
CANAL_PROPERTIES = DATA / "canal.properties"
SECRET = "s3cr3t-Pa55w0rd"


def props(**extra: str) -> str:
    """A minimal instance.properties text plus ``extra`` keys (``__`` in a name stands for ``.``)."""
    values = {"canal.instance.master.address": "127.0.0.1:3306"}
    values.update({k.replace("__", "."): v for k, v in extra.items()})
    return "".join(f"{k}={v}\n" for k, v in values.items())


def load(text: str, **kwargs: object) -> InstanceConfig:
    kwargs.setdefault("destination", "example")
    return InstanceConfig.from_properties(text, **kwargs)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------------------------------
# construction
# --------------------------------------------------------------------------------------------------------------------


def test_design_example_constructs() -> None:
    cfg = InstanceConfig(
        destination="example", master=MasterConfig(address="127.0.0.1:3306", username="canal", password="canal")
    )
    assert cfg.master.host == "127.0.0.1"
    assert cfg.master.port == 3306
    assert cfg.filter_regex == r".*\..*"
    assert cfg.store == StoreConfig(buffer_size=16384, memory_unit=1024, batch_mode="MEMSIZE", ddl_isolation=False)
    assert cfg.store.batch_mode is BatchMode.MEMSIZE
    assert cfg.meta_mode is MetaMode.MEMORY
    assert cfg.detecting == DetectingConfig(enable=False, sql="SELECT 1", interval_s=3, retry_threshold=3)
    assert cfg.filter_flags == FilterFlags()
    assert cfg.retry == RetryConfig()
    assert cfg.fallback_interval_s == 60
    assert cfg.transaction_size == 1024
    assert cfg.table_filters.includes("shop", "orders")
    assert cfg.table_filters.black.matches("any", "table") is False


def test_full_design_signature() -> None:
    cfg = InstanceConfig(
        destination="example",
        master=MasterConfig(
            address="127.0.0.1:3306",
            username="canal",
            password="canal",
            journal_name="mysql-bin.000003",
            position=4,
            timestamp=None,
            gtid=None,
        ),
        standby=MasterConfig(address="[::1]:3307"),
        slave_id=1234,
        charset="utf8mb4",
        gtid_mode=False,
        filter_regex=r"shop\..*,test\.t_\d{1,3}",
        black_regex=r"mysql\.slave_.*",
        field_filter="shop.orders:id/amount",
        black_field_filter="shop.users:password_hash",
        store=StoreConfig(buffer_size=1024, memory_unit=512, batch_mode="ITEMSIZE", ddl_isolation=True),
        meta_mode="period-mixed",
        meta_dir=None,
        zk_hosts="127.0.0.1:2181,zk2:2181/canal",
        flush_period_s=0.5,
        detecting=DetectingConfig(enable=True, sql="SELECT 1", interval_s=3, retry_threshold=3, ha_switch=True),
        fallback_interval_s=60,
        transaction_size=1024,
    )
    assert cfg.standby is not None
    assert (cfg.standby.host, cfg.standby.port) == ("::1", 3307)
    assert cfg.meta_mode is MetaMode.PERIOD_MIXED
    assert cfg.table_filters.includes("SHOP", "Orders")
    assert cfg.table_filters.includes("test", "t_123")  # the comma inside {1,3} does not split the list
    assert not cfg.table_filters.includes("test", "t_1234")
    assert not cfg.table_filters.includes("shopx", "orders")
    assert not cfg.table_filters.includes("mysql", "slave_relay_log_info")  # white would match, black excludes
    assert cfg.field_filters.include == {"shop.orders": frozenset({"id", "amount"})}
    assert cfg.field_filters.exclude == {"shop.users": frozenset({"password_hash"})}
    assert cfg.store.max_bytes == 1024 * 512


def test_fake_address() -> None:
    master = MasterConfig(address="fake://shop")
    assert master.is_fake and master.fake_name == "shop" and master.port == 0
    assert not MasterConfig(address="db.example.com:3306").is_fake
    with pytest.raises(ConfigError):
        MasterConfig(address="fake://")


def test_configs_are_frozen_and_hashable() -> None:
    cfg = InstanceConfig(destination="d", master=MasterConfig(address="h:1"))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        cfg.destination = "other"  # type: ignore[misc]
    assert hash(cfg) == hash(attrs.evolve(cfg))
    assert attrs.evolve(cfg, transaction_size=5).transaction_size == 5


@pytest.mark.parametrize(
    ("build", "key", "shown"),
    [
        (lambda: MasterConfig(address="localhost"), "address", "localhost"),
        (lambda: MasterConfig(address="127.0.0.1:99999"), "address", "99999"),
        (lambda: MasterConfig(address="127.0.0.1:0"), "address", "127.0.0.1:0"),
        (lambda: MasterConfig(address="bad host:3306"), "address", "bad host"),
        (lambda: MasterConfig(address="h:1", position=-4, journal_name="mysql-bin.000001"), "position", "-4"),
        (lambda: MasterConfig(address="h:1", position=4), "position", "4"),
        (lambda: MasterConfig(address="h:1", timestamp=-1), "timestamp", "-1"),
        (lambda: StoreConfig(buffer_size=1000), "buffer_size", "1000"),
        (lambda: StoreConfig(buffer_size=0), "buffer_size", "0"),
        (lambda: StoreConfig(memory_unit=-1), "memory_unit", "-1"),
        (lambda: StoreConfig(batch_mode="BYTES"), "batch_mode", "BYTES"),
        (lambda: StoreConfig(ddl_isolation="yes"), "ddl_isolation", "yes"),  # type: ignore[arg-type]
        (lambda: DetectingConfig(interval_s=0), "interval_s", "0"),
        (lambda: DetectingConfig(retry_threshold=0), "retry_threshold", "0"),
        (lambda: RetryConfig(initial_backoff_s=-0.1), "initial_backoff_s", "-0.1"),
        (lambda: RetryConfig(initial_backoff_s=2, max_backoff_s=1), "max_backoff_s", "1"),
        (lambda: RetryConfig(jitter=1.5), "jitter", "1.5"),
        (lambda: RetryConfig(max_attempts=0), "max_attempts", "0"),
        (lambda: RetryConfig(heartbeat_period_s=40), "heartbeat_period_s", "40"),
        (lambda: _inst(destination="../etc"), "destination", "../etc"),
        (lambda: _inst(destination="a/b"), "destination", "a/b"),
        (lambda: _inst(destination=""), "destination", "''"),
        (lambda: _inst(slave_id=0), "slave_id", "0"),
        (lambda: _inst(slave_id=-3), "slave_id", "-3"),
        (lambda: _inst(charset="klingon"), "charset", "klingon"),
        (lambda: _inst(meta_mode="redis"), "meta_mode", "redis"),
        (lambda: _inst(meta_mode="file"), "meta_dir", "None"),
        (lambda: _inst(meta_mode="zookeeper"), "zk_hosts", "None"),
        (lambda: _inst(meta_mode="period-mixed"), "zk_hosts", "None"),
        (lambda: _inst(zk_hosts="zk 1:2181"), "zk_hosts", "zk 1"),
        (lambda: _inst(flush_period_s=-1), "flush_period_s", "-1"),
        (lambda: _inst(transaction_size=-1), "transaction_size", "-1"),
        (lambda: _inst(fallback_interval_s=-1), "fallback_interval_s", "-1"),
    ],
)
def test_bad_values_raise_config_error_naming_field_and_value(build: object, key: str, shown: str) -> None:
    with pytest.raises(ConfigError) as info:
        build()  # type: ignore[operator]
    assert info.value.key == key
    assert key in str(info.value)
    assert shown in str(info.value)


def _inst(**kwargs: object) -> InstanceConfig:
    return InstanceConfig(destination=kwargs.pop("destination", "d"), master=MasterConfig(address="h:1"), **kwargs)  # type: ignore[arg-type]


def test_cross_field_ok() -> None:
    assert _inst(meta_mode="file", meta_dir="/tmp/x").meta_dir == "/tmp/x"
    assert _inst(meta_mode=MetaMode.ZOOKEEPER, zk_hosts="127.0.0.1:2181").zk_hosts == "127.0.0.1:2181"
    assert _inst(meta_mode="FILE", meta_dir=Path("/tmp/y")).meta_dir == "/tmp/y"
    assert _inst(charset="UTF-8").charset == "utf8mb4"
    assert _inst(charset="GBK").charset == "gbk"
    assert _inst(slave_id=2**32 - 1).slave_id == 2**32 - 1


@pytest.mark.parametrize(
    ("field", "pattern"),
    [("filter_regex", "shop\\.(orders"), ("black_regex", "ok\\..*, [bad"), ("filter_regex", "*.x")],
)
def test_bad_regex_raises_filter_error(field: str, pattern: str) -> None:
    with pytest.raises(FilterError) as info:
        _inst(**{field: pattern})
    assert info.value.key == field
    bad = pattern.split(", ")[-1]
    assert repr(bad) in str(info.value)


def test_compile_table_filter() -> None:
    flt = compile_table_filter(r" shop\..* , test\.t1,, ", "canal.instance.filter.regex")
    assert len(flt.patterns) == 2
    assert flt.matches("Shop", "Anything") and flt.matches("TEST", "T1")
    assert not flt.matches("test", "t10")  # whole-name match, as canal's
    assert compile_table_filter("").is_empty
    with pytest.raises(FilterError, match=r"canal\.instance\.filter\.regex.*'\(\)\)'"):
        compile_table_filter("a\\.b,())", "canal.instance.filter.regex")


@pytest.mark.parametrize(
    "text",
    ["shop.orders", "shop.orders:", "orders:id", "shop.:id", "shop.orders:id//name", "a.b:c:d"],
)
def test_bad_field_filter(text: str) -> None:
    with pytest.raises(FilterError) as info:
        FieldFilter.parse(text, "", include_key="canal.instance.filter.field")
    assert info.value.key == "canal.instance.filter.field"
    with pytest.raises(ConfigError) as info2:
        _inst(black_field_filter=text)
    assert info2.value.key == "black_field_filter"


def test_field_filter_parses() -> None:
    parsed = FieldFilter.parse("test1.t_product:id/subject/keywords, Test2.T_Company:id/name/contact/ch")
    assert parsed.include == {
        "test1.t_product": frozenset({"id", "subject", "keywords"}),
        "test2.t_company": frozenset({"id", "name", "contact", "ch"}),
    }
    assert FieldFilter.parse("").is_empty


def test_timestamp_in_seconds_is_warned(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="canal.config")
    MasterConfig(address="h:1", timestamp=1_700_000_123)
    assert any("ms since the epoch" in r.getMessage() for r in caplog.records)


def test_retry_backoff() -> None:
    retry = RetryConfig(initial_backoff_s=0.1, max_backoff_s=5.0, multiplier=2.0, jitter=0.0)
    assert [retry.backoff_s(n) for n in (1, 2, 3)] == [0.1, 0.2, 0.4]
    assert retry.backoff_s(50) == 5.0
    assert retry.backoff_s(10_000) == 5.0
    jittered = RetryConfig(jitter=0.5)
    rng = random.Random(1)
    delays = [jittered.backoff_s(3, rng) for _ in range(200)]
    assert all(0.2 <= d <= 0.6 for d in delays) and len(set(delays)) > 1


# --------------------------------------------------------------------------------------------------------------------
# secrets
# --------------------------------------------------------------------------------------------------------------------


def test_password_never_shown(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    master = MasterConfig(address="127.0.0.1:3306", password=SECRET)
    cfg = InstanceConfig(destination="example", master=master, standby=master)
    for text in (repr(master), str(master), repr(cfg), str(cfg), str(cfg.redacted()), str(master.redacted())):
        assert SECRET not in text
    assert "password='***'" in repr(master)
    assert cfg.redacted()["master"]["password"] == "***"
    assert master.password == SECRET
    assert SECRET not in cfg.to_properties()
    assert SECRET in cfg.to_properties(include_password=True)
    loaded = InstanceConfig.from_properties(props(canal__instance__dbPassword=SECRET), destination="example")
    assert loaded.master.password == SECRET
    spaced = InstanceConfig.from_properties(props(canal__instance__dbPassword="pw  "), destination="example")
    assert spaced.master.password == "pw  "  # Java keeps trailing blanks of a value
    assert SECRET not in repr(loaded)
    assert all(SECRET not in r.getMessage() and SECRET not in str(r.args) for r in caplog.records)


def test_password_not_in_errors(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ConfigError) as info:
        MasterConfig(address="h:1", password=123)  # type: ignore[arg-type]
    assert "123" not in str(info.value)
    with pytest.raises(ConfigError) as info:
        load(props(canal__instance__dbPassword=SECRET, canal__instance__master__address="nope"))
    assert SECRET not in str(info.value)
    with pytest.raises(ConfigError) as info:
        load(props(canal__instance__dbPassword=SECRET + "${NO_SUCH_VAR_X1}"))
    assert info.value.key == "canal.instance.dbPassword"
    assert SECRET not in str(info.value) and "NO_SUCH_VAR_X1" not in str(info.value)
    assert all(SECRET not in r.getMessage() for r in caplog.records)


# --------------------------------------------------------------------------------------------------------------------
# loading canal's files
# --------------------------------------------------------------------------------------------------------------------


def test_canal_example_instance_properties() -> None:
    cfg = InstanceConfig.from_properties(EXAMPLE)
    assert cfg.destination == "example"  # the directory name
    assert cfg.master == MasterConfig(address="127.0.0.1:3306", username="canal", password="canal")
    assert cfg.standby is None
    assert cfg.slave_id is None  # commented out: auto
    assert cfg.gtid_mode is False
    assert cfg.charset == "utf8mb4"  # UTF-8
    assert cfg.filter_regex == r".*\..*"
    assert cfg.black_regex == r"mysql\.slave_.*"
    assert not cfg.table_filters.includes("mysql", "slave_master_info")
    assert cfg.field_filter == "" and cfg.field_filters.is_empty
    assert cfg.meta_mode is MetaMode.MEMORY  # no canal.properties given
    assert cfg.store == StoreConfig()
    # the text itself works too, and as a str path
    assert InstanceConfig.from_properties(EXAMPLE.read_text(), destination="example") == cfg
    assert InstanceConfig.from_properties(str(EXAMPLE)) == cfg


def test_example_with_canal_properties() -> None:
    cfg = InstanceConfig.from_properties(EXAMPLE, canal_properties=CANAL_PROPERTIES)
    assert cfg.meta_mode is MetaMode.FILE  # canal.instance.global.spring.xml = classpath:spring/file-instance.xml
    assert cfg.meta_dir == "../conf"  # ${canal.conf.dir}, relative to the working directory (no base_dir given)
    assert cfg.flush_period_s == 1.0  # canal.file.flush.period = 1000 ms
    assert cfg.detecting == DetectingConfig(enable=False, sql="select 1", interval_s=3, retry_threshold=3)
    assert cfg.transaction_size == 1024 and cfg.fallback_interval_s == 60
    assert cfg.store == StoreConfig(16384, 1024, BatchMode.MEMSIZE, False)  # "1024 " has a trailing blank
    assert cfg.retry.read_timeout_s == 30  # canal.instance.network.soTimeout
    assert cfg.retry.reset_on_purge is False
    assert cfg.filter_flags == FilterFlags()


def test_load_conf_dir(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    shutil.copytree(DATA, conf)
    (conf / "other").mkdir()
    (conf / "other" / "instance.properties").write_text(
        props(canal__instance__filter__regex="shop\\\\..*", canal__instance__mysql__slaveId="1002")
    )
    (conf / "spring").mkdir()  # not a destination: no instance.properties
    server, instances = load_conf_dir(conf)
    assert server.destinations == ("example",)
    assert set(instances) == {"example", "other"}  # canal.auto.scan = true picks up "other"
    assert server.meta_mode is MetaMode.FILE
    assert server.conf_dir == str(conf)
    assert server.file_data_dir == str(conf)
    assert server.port == 11111 and server.auto_scan and server.auto_scan_interval_s == 5
    assert server.zk_hosts is None
    assert "canal.admin.passwd" not in repr(server)
    example = instances["example"]
    assert example.meta_mode is MetaMode.FILE
    assert example.meta_dir == str(conf)  # canal.file.data.dir = ${canal.conf.dir} = ../conf -> the conf dir
    other = instances["other"]
    assert other.destination == "other" and other.slave_id == 1002
    assert other.filter_regex == "shop\\..*"
    assert load_conf_dir(conf / "canal.properties")[1] == instances


def test_load_conf_dir_without_auto_scan_and_zookeeper(tmp_path: Path) -> None:
    conf = tmp_path / "myconf"
    (conf / "a").mkdir(parents=True)
    (conf / "b").mkdir()
    (conf / "a" / "instance.properties").write_text(props())
    (conf / "b" / "instance.properties").write_text(props(canal__instance__master__address="fake://b"))
    (conf / "canal.properties").write_text(
        "canal.destinations = a\n"
        "canal.auto.scan = false\n"
        "canal.zkServers = 127.0.0.1:2181\n"
        "canal.zookeeper.flush.period = 250\n"
        "canal.instance.global.spring.xml = classpath:spring/default-instance.xml\n"
        "canal.instance.a.spring.xml = classpath:spring/default-instance.xml\n"
        "canal.id = 7\ncanal.ip = 10.0.0.5\ncanal.port = 12000\n"
    )
    server, instances = load_conf_dir(conf)
    assert list(instances) == ["a"]
    assert server.canal_id == 7 and server.registration_address == "10.0.0.5:12000"
    assert server.meta_mode_for("a") is MetaMode.PERIOD_MIXED
    a = instances["a"]
    assert a.meta_mode is MetaMode.PERIOD_MIXED and a.zk_hosts == "127.0.0.1:2181" and a.flush_period_s == 0.25


def test_load_conf_dir_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"canal\.properties"):
        load_conf_dir(tmp_path)
    (tmp_path / "canal.properties").write_text("canal.destinations = ghost\n")
    with pytest.raises(ConfigError) as info:
        load_conf_dir(tmp_path)
    assert info.value.key == "canal.destinations" and "ghost" in str(info.value)


def test_server_config_from_properties() -> None:
    server = ServerConfig.from_properties(CANAL_PROPERTIES)
    assert server.destinations == ("example",)
    assert server.conf_dir == "../conf" and server.file_data_dir == "../conf"
    assert server.file_flush_period_s == 1.0 and server.zk_flush_period_s == 1.0
    assert server.meta_mode is MetaMode.FILE
    assert server.properties["canal.port"] == "11111"
    assert "password" not in str(server.redacted())
    with pytest.raises(ConfigError) as info:
        ServerConfig.from_properties("canal.port = 70000\n")
    assert info.value.key == "canal.port" and "70000" in str(info.value)
    with pytest.raises(ConfigError) as info:
        ServerConfig.from_properties("canal.destinations = ok,bad/name\n")
    assert info.value.key == "canal.destinations" and "bad/name" in str(info.value)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("canal.instance.master.address", "127.0.0.1"),
        ("canal.instance.master.address", "127.0.0.1:65536"),
        ("canal.instance.master.address", "127.0.0.1:port"),
        ("canal.instance.standby.address", "::1:3306x"),
        ("canal.instance.master.position", "abc"),
        ("canal.instance.master.timestamp", "-5"),
        ("canal.instance.memory.buffer.size", "1000"),
        ("canal.instance.memory.buffer.size", "abc"),
        ("canal.instance.memory.buffer.memunit", "-1024"),
        ("canal.instance.memory.batch.mode", "BYTES"),
        ("canal.instance.get.ddl.isolation", "maybe"),
        ("canal.instance.gtidon", "2"),
        ("canal.instance.mysql.slaveId", "-1"),
        ("canal.instance.mysql.slaveId", "x1"),
        ("canal.instance.connectionCharset", "EBCDIC-ZZ"),
        ("canal.instance.transaction.size", "-1"),
        ("canal.instance.transaction.size", "1.5"),
        ("canal.instance.fallbackIntervalInSeconds", "-60"),
        ("canal.instance.detecting.interval.time", "0"),
        ("canal.instance.detecting.retry.threshold", "three"),
        ("canal.instance.filter.query.dml", "nope"),
        ("canal.instance.filter.field", "test1.t_product"),
        ("canal.instance.filter.black.field", "test1:id"),
        ("canal.instance.global.spring.xml", "classpath:spring/weird-instance.xml"),
        ("pycanal.meta.mode", "redis"),
        ("canal.instance.destination", "bad name"),
        ("canal.auto.reset.latest.pos.mode", "sometimes"),
        ("canal.instance.network.soTimeout", "-3"),
        ("pycanal.retry.max.attempts", "0"),
        ("canal.instance.master.sslMode", "SOMETIMES"),
        ("canal.instance.enableDruid", "true"),
    ],
)
def test_bad_property_values_name_key_and_value(key: str, value: str) -> None:
    text = props(**{key.replace(".", "__"): value})
    with pytest.raises(ConfigError) as info:
        InstanceConfig.from_properties(text, destination=None if key == "canal.instance.destination" else "example")
    assert info.value.key == key
    assert key in str(info.value)
    assert value in str(info.value)


@pytest.mark.parametrize(
    ("key", "value", "bad"),
    [
        ("canal.instance.filter.regex", "shop\\\\.(orders", "shop\\.(orders"),
        ("canal.instance.filter.black.regex", "ok\\\\..*,[bad", "[bad"),
    ],
)
def test_bad_regex_property(key: str, value: str, bad: str) -> None:
    with pytest.raises(FilterError) as info:
        load(props(**{key.replace(".", "__"): value}))
    assert info.value.key == key
    assert repr(bad) in str(info.value)


def test_missing_meta_dir_and_zk_hosts_in_properties() -> None:
    with pytest.raises(ConfigError) as info:
        load(props(canal__instance__global__spring__xml="classpath:spring/file-instance.xml"))
    assert info.value.key == "canal.file.data.dir"
    with pytest.raises(ConfigError) as info:
        load(props(pycanal__meta__mode="zookeeper"))
    assert info.value.key == "canal.zkServers"
    with pytest.raises(ConfigError) as info:
        load(props(canal__instance__global__spring__xml="classpath:spring/default-instance.xml", canal__zkServers=""))
    assert info.value.key == "canal.zkServers"


def test_missing_master_address_and_destination() -> None:
    with pytest.raises(ConfigError) as info:
        InstanceConfig.from_properties("canal.instance.dbUsername=x\n", destination="d")
    assert info.value.key == "canal.instance.master.address"
    with pytest.raises(ConfigError) as info:
        InstanceConfig.from_properties(props())
    assert info.value.key == "canal.instance.destination"
    with pytest.raises(ConfigError, match="cannot read"):
        InstanceConfig.from_properties("/no/such/dir/instance.properties")


def test_all_instance_keys() -> None:
    text = props(
        canal__instance__master__journal__name="mysql-bin.000042",
        canal__instance__master__position="1234",
        canal__instance__master__timestamp="1700000000000",
        canal__instance__master__gtid="",
        canal__instance__standby__address="fake://standby",
        canal__instance__standby__gtid="3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5",
        canal__instance__dbUsername="repl",
        canal__instance__connectionCharset="GBK",
        canal__instance__gtidon="true",
        canal__instance__mysql__slaveId="1234",
        canal__instance__filter__field="test1.t_product:id/subject",
        canal__instance__filter__black__field="test2.t_company:contact",
        canal__instance__filter__query__dml="true",
        canal__instance__filter__query__ddl="yes",
        canal__instance__filter__query__dcl="on",
        canal__instance__filter__rows="1",
        canal__instance__filter__table__error="TRUE",
        canal__instance__filter__transaction__entry="true",
        canal__instance__filter__dml__delete="true",
        canal__instance__detecting__enable="true",
        canal__instance__detecting__sql="insert into retl.xdual values(1,now())",
        canal__instance__detecting__interval__time="5",
        canal__instance__detecting__retry__threshold="4",
        canal__instance__detecting__heartbeatHaEnable="true",
        canal__instance__fallbackIntervalInSeconds="30",
        canal__instance__transaction__size="2048",
        canal__instance__memory__buffer__size="1024",
        canal__instance__memory__buffer__memunit="2048",
        canal__instance__memory__batch__mode="itemsize",
        canal__instance__get__ddl__isolation="true",
        canal__instance__global__spring__xml="classpath:spring/file-instance.xml",
        canal__file__data__dir="/var/lib/canal",
        canal__file__flush__period="500",
        canal__auto__reset__latest__pos__mode="true",
        pycanal__retry__backoff__initial="0.5",
        pycanal__retry__max__attempts="10",
    )
    cfg = load(text)
    assert cfg.master == MasterConfig(
        address="127.0.0.1:3306",
        username="repl",
        password="canal",
        journal_name="mysql-bin.000042",
        position=1234,
        timestamp=1700000000000,
    )
    assert cfg.standby is not None and cfg.standby.fake_name == "standby" and cfg.standby.username == "repl"
    assert cfg.standby.gtid == "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5"
    assert (cfg.charset, cfg.gtid_mode, cfg.slave_id) == ("gbk", True, 1234)
    assert cfg.field_filters.include == {"test1.t_product": frozenset({"id", "subject"})}
    assert cfg.field_filters.exclude == {"test2.t_company": frozenset({"contact"})}
    assert cfg.filter_flags == FilterFlags(
        query_dml=True, query_ddl=True, query_dcl=True, rows=True, table_error=True, transaction_entry=True,
        dml_delete=True,
    )  # fmt: skip
    assert cfg.detecting == DetectingConfig(True, "insert into retl.xdual values(1,now())", 5, 4, True)
    assert (cfg.fallback_interval_s, cfg.transaction_size) == (30, 2048)
    assert cfg.store == StoreConfig(1024, 2048, BatchMode.ITEMSIZE, True)
    assert (cfg.meta_mode, cfg.meta_dir, cfg.flush_period_s) == (MetaMode.FILE, "/var/lib/canal", 0.5)
    assert cfg.retry.reset_on_purge and cfg.retry.initial_backoff_s == 0.5 and cfg.retry.max_attempts == 10


def test_instance_file_overrides_canal_properties() -> None:
    cfg = load(props(canal__instance__memory__buffer__size="256"), canal_properties=CANAL_PROPERTIES)
    assert cfg.store.buffer_size == 256
    cfg = load(props(), canal_properties={"canal.instance.memory.buffer.size": "512"})
    assert cfg.store.buffer_size == 512


def test_placeholders(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CANAL_TEST_DB_PASSWORD", SECRET)
    monkeypatch.setenv("CANAL_INSTANCE_DBUSERNAME_TEST", "envuser")
    monkeypatch.delenv("NO_SUCH_VAR_X2", raising=False)
    text = (
        "db.host = 10.1.2.3\n"
        "canal.instance.master.address = ${db.host}:${db.port:3307}\n"
        "canal.instance.dbPassword = ${CANAL_TEST_DB_PASSWORD}\n"
        "canal.instance.dbUsername = ${canal.instance.dbUsername.test:fallback}\n"
        "canal.instance.filter.regex = ${NO_SUCH_VAR_X2:.*\\\\..*}\n"
        "canal.file.data.dir = ${canal.conf.dir:../conf}/${canal.instance.destination:}\n"
        "pycanal.meta.mode = file\n"
    )
    cfg = load(text, destination="dest1")
    assert cfg.master.address == "10.1.2.3:3307"
    assert cfg.master.password == SECRET
    assert cfg.master.username == "envuser"  # relaxed env name
    assert cfg.filter_regex == r".*\..*"
    assert cfg.meta_dir == "../conf/dest1"


def test_placeholder_errors() -> None:
    with pytest.raises(ConfigError) as info:
        load(props(canal__instance__master__address="${no.such.key.zz}"))
    assert info.value.key == "canal.instance.master.address" and "no.such.key.zz" in str(info.value)
    with pytest.raises(ConfigError, match="circular"):
        load("a=${b}\nb=${a}\ncanal.instance.master.address=${a}\n")
    # an unresolvable placeholder in a key pycanal does not read is harmless (canal.admin.manager is unset)
    assert load(props(canal__instance__global__manager__address="${canal.admin.manager}")).destination == "example"


def test_resolve_placeholders_nested() -> None:
    table = {"a": "x", "b": "${a}y", "name": "b"}
    assert resolve_placeholders("${${name}}-${c:${a}}-${d:}", table.get, environ={}) == "xy-x-"
    assert resolve_placeholders("no } placeholder ${", table.get, environ={}) == "no } placeholder ${"


def test_unknown_key_warned_once(caplog: pytest.LogCaptureFixture) -> None:
    unknown = f"canal.instance.frobnicate{uuid.uuid4().hex}"
    caplog.set_level(logging.DEBUG, logger="canal.config")
    text = props(**{unknown.replace(".", "__"): SECRET, "canal.instance.tsdb.dbUsername": "canal"})
    load(text)
    load(text)
    InstanceConfig.from_properties(text, destination="another")
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and unknown in r.getMessage()]
    assert len(warnings) == 1
    assert SECRET not in warnings[0].getMessage()
    # canal's tsdb database keys are knowingly unused (pycanal keeps the history with the meta): debug only
    tsdb = [r for r in caplog.records if "canal.instance.tsdb.dbUsername" in r.getMessage()]
    assert tsdb and all(r.levelno == logging.DEBUG for r in tsdb)


def test_canal_example_files_warn_about_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="canal.config")
    InstanceConfig.from_properties(EXAMPLE, canal_properties=CANAL_PROPERTIES)
    ServerConfig.from_properties(CANAL_PROPERTIES)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


# --------------------------------------------------------------------------------------------------------------------
# .properties syntax
# --------------------------------------------------------------------------------------------------------------------


def test_properties_syntax() -> None:
    text = (
        "# comment\n"
        "   ! another comment\n"
        "\n"
        "a=1\n"
        "b : 2\n"
        "c 3\n"
        "  d   =   spaced value  \n"
        "e=line one \\\n"
        "     continued \\\n"
        "  end\n"
        "f=ends with backslash \\\\\n"
        "g\\ key\\:x=\\u0041\\t\\z\n"
        "h=\n"
        "i\n"
        "j=a=b:c\n"
        "# comment \\\n"
        "k=after comment\n"
        "a=override\r\n"
        "l = \\  leading\r"
        "m=last \\"
    )
    assert parse_properties(text) == {
        "a": "override",
        "b": "2",
        "c": "3",
        "d": "spaced value  ",
        "e": "line one continued end",
        "f": "ends with backslash \\",
        "g key:x": "A\tz",
        "h": "",
        "i": "",
        "j": "a=b:c",
        "k": "after comment",
        "l": "  leading",
        "m": "last ",
    }


def test_malformed_unicode_escape() -> None:
    with pytest.raises(ConfigError, match="uxxxx"):
        parse_properties("a=\\u12G4\n")


_keys = st.text(min_size=1, max_size=20)
_values = st.text(max_size=30)


@given(st.dictionaries(_keys, _values, max_size=8))
@settings(max_examples=200, deadline=None)
def test_properties_round_trip(values: dict[str, str]) -> None:
    text = format_properties(values)
    assert text.isascii()
    assert parse_properties(text) == values


_names = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,20}", fullmatch=True)
_plain = st.text(st.characters(codec="utf-8"), min_size=1, max_size=12).filter(
    lambda s: s.strip() == s and "${" not in s
)
_regex = st.lists(st.from_regex(r"[a-z_]{1,8}\\\.(\.\*|[a-z_]{1,8}\.\*?)", fullmatch=True), min_size=1, max_size=3)
_ident = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True)
_field_filter = st.dictionaries(
    st.tuples(_ident, _ident).map(".".join), st.lists(_ident, min_size=1, max_size=3, unique=True), max_size=3
).map(lambda d: ",".join(f"{t}:{'/'.join(cols)}" for t, cols in d.items()))


@st.composite
def instance_configs(draw: st.DrawFn) -> InstanceConfig:
    def master() -> MasterConfig:
        journal = draw(st.none() | st.from_regex(r"mysql-bin\.[0-9]{6}", fullmatch=True))
        return MasterConfig(
            address=draw(
                st.sampled_from(["127.0.0.1:3306", "db.example.com:1", "[::1]:65535"])
                | _names.map(lambda n: f"fake://{n}")
            ),
            username=draw(_plain),
            password=draw(_plain),
            journal_name=journal,
            position=draw(st.none() | st.integers(0, 2**40)) if journal else None,
            timestamp=draw(st.none() | st.integers(10**11, 10**13)),
            gtid=draw(st.none() | _plain),
        )

    main = master()
    standby = draw(
        st.none() | st.builds(lambda: attrs.evolve(master(), username=main.username, password=main.password))
    )
    meta_mode = draw(st.sampled_from(MetaMode))
    ms = st.integers(1, 100_000).map(lambda n: n / 1000)
    return InstanceConfig(
        destination=draw(_names),
        master=main,
        standby=standby,
        slave_id=draw(st.none() | st.integers(1, 2**32 - 1)),
        charset=draw(st.sampled_from(["utf8mb4", "latin1", "gbk", "binary"])),
        gtid_mode=draw(st.booleans()),
        filter_regex=",".join(draw(_regex)),
        black_regex=",".join(draw(st.lists(_regex.map(",".join), max_size=1))),
        field_filter=draw(_field_filter),
        black_field_filter=draw(_field_filter),
        filter_flags=FilterFlags(*draw(st.lists(st.booleans(), min_size=9, max_size=9))),
        store=StoreConfig(
            buffer_size=2 ** draw(st.integers(0, 20)),
            memory_unit=draw(st.integers(1, 10**6)),
            batch_mode=draw(st.sampled_from(BatchMode)),
            ddl_isolation=draw(st.booleans()),
        ),
        meta_mode=meta_mode,
        meta_dir=draw(st.just("/var/lib/canal") if meta_mode is MetaMode.FILE else st.none() | st.just("/tmp/m")),
        zk_hosts=draw(st.just("zk1:2181,zk2:2181/canal") if meta_mode in (MetaMode.ZOOKEEPER, MetaMode.PERIOD_MIXED)
                      else st.none()),
        flush_period_s=draw(ms),
        detecting=DetectingConfig(
            enable=draw(st.booleans()),
            sql=draw(_plain),
            interval_s=draw(st.integers(1, 100) | st.floats(0.01, 100)),
            retry_threshold=draw(st.integers(1, 10)),
            ha_switch=draw(st.booleans()),
        ),
        fallback_interval_s=draw(st.integers(0, 1000)),
        transaction_size=draw(st.integers(1, 10**6)),
        retry=RetryConfig(
            initial_backoff_s=draw(st.floats(0.001, 1)),
            max_backoff_s=draw(st.floats(1, 60)),
            jitter=draw(st.floats(0, 1)),
            max_attempts=draw(st.none() | st.integers(1, 100)),
            purge_threshold=draw(st.integers(1, 10)),
            reset_on_purge=draw(st.booleans()),
            read_timeout_s=draw(st.floats(20, 100)),
            heartbeat_period_s=draw(st.floats(0, 19)),
        ),
    )  # fmt: skip


@given(instance_configs())
@settings(max_examples=60, deadline=None)
def test_instance_config_round_trips_through_properties(cfg: InstanceConfig) -> None:
    text = cfg.to_properties(include_password=True)
    assert InstanceConfig.from_properties(text) == cfg
    without = InstanceConfig.from_properties(cfg.to_properties())
    assert without == attrs.evolve(cfg, master=attrs.evolve(cfg.master, password="canal"),
                                   standby=cfg.standby and attrs.evolve(cfg.standby, password="canal"))  # fmt: skip


def test_each_canal_key_is_declared_once_on_its_field() -> None:
    """A setting's canal key is written once, in its attrs field's metadata; loaders, writers and the report of
    unknown keys derive from it (a key two settings share is declared by one and referenced by the other)."""
    import attrs

    from canal.config import fields, keys

    source = "".join(path.read_text() for path in Path(keys.__file__).parent.glob("*.py"))
    declared = {
        field.metadata["canal_key"]
        for cls in fields.KEYED_CLASSES
        for field in attrs.fields(cls)
        if "canal_key" in field.metadata
    }
    assert {cls.__name__ for cls in fields.KEYED_CLASSES} >= {"InstanceConfig", "ServerConfig", "MasterConfig"}
    assert len(declared) > 50
    repeated = {key: source.count(f'"{key}"') for key in declared if source.count(f'"{key}"') > 1}
    assert repeated == {}
    # every declared key is known (no "unknown key" warning for it)
    for prefix in ("master", "standby"):
        assert {k.format(prefix=prefix) for k in declared} <= keys._used_keys()


def test_schema_history_settings_read_canal_tsdb_keys() -> None:
    text = props(
        canal__instance__tsdb__enable="false",
        canal__instance__tsdb__snapshot__interval="6",
        canal__instance__tsdb__snapshot__expire="48",
        pycanal__schema__snapshot__ddls="50",
    )
    config = load(text)
    assert (config.schema_history.enable, config.schema_history.snapshot_interval_h) == (False, 6)
    assert (config.schema_history.snapshot_expire_h, config.schema_history.snapshot_ddls) == (48, 50)
    assert InstanceConfig.from_properties(config.to_properties(), destination="example") == config
    with pytest.raises(ConfigError, match=r"canal\.instance\.tsdb\.snapshot\.expire") as caught:
        load(props(canal__instance__tsdb__snapshot__expire="-1"))
    assert caught.value.key == "canal.instance.tsdb.snapshot.expire"
