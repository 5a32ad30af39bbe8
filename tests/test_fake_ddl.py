"""FakeMysql DDL: CREATE/ALTER/RENAME/DROP/TRUNCATE keep table schemas and contents the way a server does."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import pytest

from canal.parse.events import QueryEvent, RowsEvent, TableMapEvent
from canal.protocol import SqlType
from canal.testing.fake import FakeMysql, FakeMysqlError


@pytest.fixture
def fake() -> Iterator[FakeMysql]:
    with FakeMysql(name="t_ddl", database="shop") as f:
        yield f


def test_create_table_column_definitions(fake: FakeMysql) -> None:
    fake.execute(
        """CREATE TABLE IF NOT EXISTS `shop`.`items` (
            `id` bigint(20) unsigned NOT NULL AUTO_INCREMENT COMMENT 'the id, (with parens)',
            sku CHAR(8) CHARACTER SET ascii NOT NULL DEFAULT 'x,y',
            price decimal(12, 3) DEFAULT '0.000',
            ratio DOUBLE PRECISION,
            flags SET('a','b''c') DEFAULT NULL,
            kind ENUM('new', 'old') NOT NULL DEFAULT 'new',
            made DATETIME(6) DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
            body TEXT,
            raw VARBINARY(16),
            doc JSON,
            ok BOOLEAN DEFAULT b'1',
            `key` int,
            PRIMARY KEY (`id`, sku) USING BTREE,
            UNIQUE KEY uk (sku),
            KEY ix_price (price)
        ) ENGINE=InnoDB DEFAULT CHARSET=latin1"""
    )
    s = fake.table("shop.items")
    assert s.names == ("id", "sku", "price", "ratio", "flags", "kind", "made", "body", "raw", "doc", "ok", "key")
    c = {m.name: m for m in s.columns}
    assert s.key_indexes == (0, 1)
    assert c["id"].mysql_type == "bigint unsigned" and c["id"].unsigned and c["id"].sql_type == SqlType.DECIMAL
    assert c["sku"].charset == "ascii" and c["sku"].sql_type == SqlType.CHAR and not c["sku"].nullable
    assert c["price"].mysql_type == "decimal(12,3)" and c["price"].sql_type == SqlType.DECIMAL
    assert c["ratio"].mysql_type == "double" and c["ratio"].sql_type == SqlType.DOUBLE
    assert c["flags"].labels == ("a", "b'c") and c["flags"].mysql_type == "set('a','b''c')"
    assert c["kind"].labels == ("new", "old") and not c["kind"].nullable
    assert c["made"].fsp == 6 and c["made"].sql_type == SqlType.TIMESTAMP and c["made"].mysql_type == "datetime(6)"
    assert c["body"].charset == "cp1252" and c["body"].sql_type == SqlType.CLOB  # table default latin1
    assert c["raw"].charset is None and c["raw"].sql_type == SqlType.BLOB
    assert c["doc"].mysql_type == "json" and c["ok"].mysql_type == "tinyint(1)"
    assert c["key"].nullable and c["key"].mysql_type == "int"


def test_mariadb_type_texts() -> None:
    with FakeMysql(name="t_ddl_m", mariadb=True) as m:
        m.execute("CREATE TABLE d.t (a INT UNSIGNED PRIMARY KEY, b SMALLINT, c JSON, d YEAR)")
        cols = m.table("d.t").columns
        assert [c.mysql_type for c in cols] == ["int(10) unsigned", "smallint(6)", "longtext", "year(4)"]
        m.insert("d.t", {"a": 1, "c": {"k": [1, 2]}})
        assert m.rows("d.t")[0]["c"] == '{"k": [1, 2]}'  # MariaDB JSON is text in the binlog


def test_alter_table_clauses(fake: FakeMysql) -> None:
    fake.execute("CREATE TABLE t (id INT NOT NULL, a VARCHAR(10), b INT, c INT, CONSTRAINT pk PRIMARY KEY (id))")
    fake.insert("shop.t", {"id": 1, "a": "x", "b": 2, "c": 3})
    fake.execute(
        "ALTER TABLE t ADD COLUMN z INT FIRST, DROP COLUMN c, MODIFY a VARCHAR(30) NOT NULL, "
        "CHANGE COLUMN b bb BIGINT AFTER z, ADD (p INT, q INT), ENGINE=InnoDB"
    )
    with pytest.raises(FakeMysqlError, match="Unknown column 'r'"):  # as MariaDB: r is not a column of the original
        fake.execute("ALTER TABLE t ADD r INT, RENAME COLUMN r TO rr")
    fake.execute("ALTER TABLE t RENAME COLUMN q TO qq")
    s = fake.table("shop.t")
    assert s.names == ("z", "bb", "id", "a", "p", "qq")
    assert s.columns[3].mysql_type == "varchar(30)" and not s.columns[3].nullable
    assert s.columns[1].mysql_type == "bigint" and s.key_indexes == (2,)
    assert fake.rows("shop.t") == [{"z": None, "bb": 2, "id": 1, "a": "x", "p": None, "qq": None}]
    fake.execute("ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (id, a)")
    assert fake.table("shop.t").key_indexes == (2, 3)
    fake.execute("ALTER TABLE t RENAME TO t_new")
    assert fake.tables() == ["shop.t_new"] and fake.rows("shop.t_new")[0]["bb"] == 2
    with pytest.raises(FakeMysqlError, match="Unknown column"):
        fake.execute("ALTER TABLE t_new DROP COLUMN nope")
    assert fake.table("shop.t_new").names == ("z", "bb", "id", "a", "p", "qq")  # unchanged after the error
    fake.execute("ALTER TABLE t_new MODIFY bb VARCHAR(5)")
    assert fake.rows("shop.t_new")[0]["bb"] == "2"  # converted like the server would


def test_rename_truncate_drop(fake: FakeMysql) -> None:
    fake.execute("CREATE TABLE a (id INT PRIMARY KEY)")
    fake.execute("CREATE TABLE b LIKE a")
    fake.insert("shop.a", {"id": 1})
    fake.execute("RENAME TABLE a TO a2, b TO other.b")
    assert fake.tables() == ["other.b", "shop.a2"]
    assert fake.rows("shop.a2") == [{"id": 1}]
    tid = fake.insert("shop.a2", {"id": 2})[1]
    fake.execute("TRUNCATE TABLE a2")
    assert fake.rows("shop.a2") == []
    tid2 = fake.insert("shop.a2", {"id": 2})[1]
    assert isinstance(tid, TableMapEvent) and isinstance(tid2, TableMapEvent) and tid.table_id != tid2.table_id
    ev = fake.execute("DROP TABLE IF EXISTS a2, nope")
    assert isinstance(ev[0], QueryEvent)
    assert ev[0].sql == "DROP TABLE IF EXISTS `a2`,`nope` /* generated by server */"
    with pytest.raises(FakeMysqlError, match="Unknown table"):
        fake.execute("DROP TABLE a2")
    fake.execute("DROP DATABASE other")
    assert fake.tables() == []
    with pytest.raises(FakeMysqlError, match="doesn't exist"):
        fake.insert("other.b", {"id": 1})


def test_errors_write_nothing(fake: FakeMysql) -> None:
    end = fake.end
    for bad in (
        "CREATE TABLE x (id FOO)",
        "CREATE TABLE x (id INT, id INT)",
        "CREATE TABLE x (id INT, PRIMARY KEY (nope))",
        "INSERT INTO x VALUES (1)",
        "SELECT 1",
        "ALTER TABLE missing ADD c INT",
    ):
        with pytest.raises(FakeMysqlError):
            fake.execute(bad)
    assert fake.end == end
    fake.execute("CREATE TABLE x (id INT PRIMARY KEY)")
    with pytest.raises(FakeMysqlError, match="already exists"):
        fake.execute("CREATE TABLE x (id INT)")
    assert fake.execute("CREATE TABLE IF NOT EXISTS x (id INT)") != []  # logged, no change
    assert fake.table("x").key_indexes == (0,)
    with FakeMysql(name="t_ddl_nodb") as nodb, pytest.raises(FakeMysqlError, match="No database selected"):
        nodb.execute("CREATE TABLE t (a INT)")


def test_ddl_inside_transaction_is_refused(fake: FakeMysql) -> None:
    fake.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    with pytest.raises(FakeMysqlError, match="transaction is open"), fake.transaction() as tx:
        tx.insert("t", {"id": 1})
        fake.execute("ALTER TABLE t ADD c INT")
    assert fake.rows("t") == []


def test_show_create_table_and_select(fake: FakeMysql) -> None:
    fake.execute("CREATE TABLE t (id INT PRIMARY KEY, v DECIMAL(5,1))")
    fake.insert("t", {"id": 1, "v": Decimal("2.25")})
    ((name, ddl),) = fake.query("SHOW CREATE TABLE shop.t")
    assert name == "t" and "`v` decimal(5,1)" in ddl and "PRIMARY KEY (`id`)" in ddl
    # MariaDB stores 2.25 in DECIMAL(5,1) as 2.3: half away from zero (checked on the private server)
    assert fake.query("SELECT * FROM shop.t") == [(1, Decimal("2.3"))]


def test_no_primary_key_table(fake: FakeMysql) -> None:
    fake.execute("CREATE TABLE log (msg VARCHAR(10), n INT)")
    fake.insert_many("log", [{"msg": "a", "n": 1}, {"msg": "b", "n": 2}])
    ev = fake.delete("log", {"msg": "a", "n": 1})
    rows = next(e for e in ev if isinstance(e, RowsEvent))
    assert rows.rows[0].before == ("a", 1)
    assert fake.rows("log") == [{"msg": "b", "n": 2}]


def test_names_starting_with_digits_and_quoted_names(fake: FakeMysql) -> None:
    fake.execute("CREATE TABLE shop.2024_orders (`order id` INT PRIMARY KEY, `select` VARCHAR(3) DEFAULT 1.5)")
    assert fake.tables() == ["shop.2024_orders"]
    assert fake.table("shop.2024_orders").names == ("order id", "select")
    fake.insert("`shop`.`2024_orders`", {"order id": 1, "select": "a"})
    assert fake.rows("shop.2024_orders") == [{"order id": 1, "select": "a"}]


def test_a_rename_of_several_pairs_swaps_two_tables_through_a_third_name(fake: FakeMysql) -> None:
    fake.execute("CREATE TABLE a (id INT PRIMARY KEY, x INT)")
    fake.execute("CREATE TABLE b (id INT PRIMARY KEY, y VARCHAR(3))")
    fake.insert("shop.a", {"id": 1, "x": 2})
    fake.insert("shop.b", {"id": 5, "y": "q"})
    fake.execute("RENAME TABLE a TO tmp, b TO a, tmp TO b")
    assert fake.tables() == ["shop.a", "shop.b"]
    assert fake.rows("shop.a") == [{"id": 5, "y": "q"}] and fake.rows("shop.b") == [{"id": 1, "x": 2}]
    assert fake.table("shop.a").names == ("id", "y") and fake.table("shop.b").names == ("id", "x")


def test_a_sequence_is_a_table_of_the_servers_sequence_layout(fake: FakeMysql) -> None:
    fake.execute("CREATE SEQUENCE s START WITH 10")
    assert fake.table("shop.s").names[:2] == ("next_not_cached_value", "minimum_value")
    fake.execute("DROP SEQUENCE s")
    assert "shop.s" not in fake.tables()
