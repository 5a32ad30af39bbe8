"""The source registry: fake:// is registered by canal.testing, and production code never imports the test support."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from canal.config import InstanceConfig, MasterConfig
from canal.errors import ConfigError
from canal.parse import sources
from canal.parse.sources import open_source, register_source_scheme, source_factory
from canal.testing.fake import FakeBinlogSource, FakeMysql


def _run(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter, where the pytest plugin has not imported canal.testing."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, check=False
    )


def test_production_modules_do_not_import_the_test_support() -> None:
    result = _run(
        """
        import sys
        import canal, canal.instance, canal.server, canal.parse.sources, canal.parse.parser, canal.cli
        import canal.sql, canal.parse.ddl, canal.parse.boundary
        assert not [m for m in sys.modules if m.startswith("canal.testing")], sorted(sys.modules)
        print("clean")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "clean"


def test_a_fake_address_without_canal_testing_is_a_config_error_that_says_what_to_import() -> None:
    result = _run(
        """
        from canal import Instance, InstanceConfig, MasterConfig
        from canal.errors import ConfigError
        config = InstanceConfig(destination="d", master=MasterConfig(address="fake://shop"))
        try:
            Instance(config)
        except ConfigError as exc:
            print("ConfigError:", exc)
        else:
            print("no error")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ConfigError:"), result.stdout
    assert "import canal.testing" in result.stdout and "fake://shop" in result.stdout


def test_importing_canal_testing_registers_fake_addresses() -> None:
    result = _run(
        """
        import canal.testing
        from canal import Instance, InstanceConfig, MasterConfig
        fake = canal.testing.FakeMysql(name="shop")
        config = InstanceConfig(destination="d", master=MasterConfig(address="fake://shop"))
        with Instance(config) as inst:
            print(type(inst).__name__, "started")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Instance started"


def test_registered_scheme_opens_its_source(fake_mysql: FakeMysql) -> None:
    config = InstanceConfig(destination="d", master=MasterConfig(address=fake_mysql.address))
    source = open_source(config.master, config)
    assert isinstance(source, FakeBinlogSource) and source.fake is fake_mysql
    assert isinstance(source_factory(config)(config.master), FakeBinlogSource)


def test_scheme_names_are_checked_and_nothing_changes_on_error() -> None:
    before = dict(sources._OPENERS)
    for bad in ("fake", "file://", "x:/"):
        with pytest.raises(ConfigError):
            register_source_scheme(bad, FakeBinlogSource)
        assert before == sources._OPENERS
