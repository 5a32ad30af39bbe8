"""DDL classification: canal's DdlParser semantics on real-world statements."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from canal.parse.ddl import DdlResult, QueryKind, classify_ddl, query_kind, xa_xid
from canal.protocol import EventType as E

D = "db0"  # the query event's current database in these tests

# (sql, expected [(event_type, schema, table)] or [(event_type, schema, table, ori_schema, ori_table)])
CASES: list[tuple[str, list[tuple[object, ...]]]] = [
    # ---- CREATE TABLE
    ("CREATE TABLE t1 (id INT PRIMARY KEY)", [(E.CREATE, D, "t1")]),
    ("create table if not exists `shop`.`orders` (id int)", [(E.CREATE, "shop", "orders")]),
    ("CREATE TEMPORARY TABLE tmp_x (a int)", [(E.CREATE, D, "tmp_x")]),
    ("CREATE TABLE `new_t` LIKE `old_t`", [(E.CREATE, D, "new_t")]),
    ("CREATE TABLE s.t2 AS SELECT * FROM s.t1", [(E.CREATE, "s", "t2")]),
    ("CREATE TABLE t3 SELECT 1 AS a", [(E.CREATE, D, "t3")]),
    ("CREATE OR REPLACE TABLE mdb.t (a int) ENGINE=Aria", [(E.CREATE, "mdb", "t")]),
    ("CREATE TABLE `we``ird`.`t.with.dots` (a int)", [(E.CREATE, "we`ird", "t.with.dots")]),
    ("CREATE TABLE `my schema`.`my table` (`a b` int)", [(E.CREATE, "my schema", "my table")]),
    ("CREATE TABLE 订单.明细 (id int)", [(E.CREATE, "订单", "明细")]),
    ("CREATE TABLE `café`.`naïve` (id int)", [(E.CREATE, "café", "naïve")]),
    ("\n\n   \tCREATE TABLE t4 (id int)", [(E.CREATE, D, "t4")]),
    ("/* app=migrate */ CREATE /* x */ TABLE /* y */ `t5` (id int)", [(E.CREATE, D, "t5")]),
    ("-- leading line comment\nCREATE TABLE t6 (id int)", [(E.CREATE, D, "t6")]),
    ("# hash comment\nCREATE TABLE t7 (id int)", [(E.CREATE, D, "t7")]),
    ("CREATE TABLE db1 . t8 (id int)", [(E.CREATE, "db1", "t8")]),
    ('CREATE TABLE "ansi"."quoted" (id int)', [(E.CREATE, "ansi", "quoted")]),
    (
        # mysqldump
        "CREATE TABLE `users` (\n  `id` bigint(20) NOT NULL AUTO_INCREMENT,\n  `email` varchar(255) NOT NULL,\n"
        "  PRIMARY KEY (`id`),\n  UNIQUE KEY `idx_email` (`email`)\n"
        ") ENGINE=InnoDB AUTO_INCREMENT=42 DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci",
        [(E.CREATE, D, "users")],
    ),
    (
        # Django
        "CREATE TABLE `polls_question` (`id` bigint AUTO_INCREMENT NOT NULL PRIMARY KEY, "
        "`question_text` varchar(200) NOT NULL, `pub_date` datetime(6) NOT NULL)",
        [(E.CREATE, D, "polls_question")],
    ),
    (
        # Flyway history table
        "CREATE TABLE `app`.`flyway_schema_history` (`installed_rank` INT NOT NULL, `version` VARCHAR(50), "
        "CONSTRAINT `flyway_schema_history_pk` PRIMARY KEY (`installed_rank`)) ENGINE=InnoDB",
        [(E.CREATE, "app", "flyway_schema_history")],
    ),
    (
        # gh-ost ghost and changelog tables
        "create /* gh-ost */ table `shop`.`_orders_gho` like `shop`.`orders`",
        [(E.CREATE, "shop", "_orders_gho")],
    ),
    ("/*!40101 SET character_set_client = utf8 */", [(E.QUERY, D, None)]),
    ("CREATE TABLE /*!32312 IF NOT EXISTS*/ `t9` (a int)", [(E.CREATE, D, "t9")]),
    # ---- ALTER TABLE
    ("ALTER TABLE t ADD COLUMN c INT", [(E.ALTER, D, "t")]),
    ("alter table `s`.`t` add `c` int not null default 0 after `b`", [(E.ALTER, "s", "t")]),
    ("ALTER TABLE t DROP COLUMN c", [(E.ALTER, D, "t")]),
    ("ALTER TABLE t MODIFY c BIGINT, CHANGE d e INT", [(E.ALTER, D, "t")]),
    ("ALTER TABLE t ADD INDEX idx_c (c)", [(E.CINDEX, D, "t")]),
    ("ALTER TABLE t ADD UNIQUE KEY uk (a, b)", [(E.CINDEX, D, "t")]),
    ("ALTER TABLE t ADD PRIMARY KEY (id)", [(E.CINDEX, D, "t")]),
    ("ALTER TABLE t ADD FULLTEXT INDEX ft (body)", [(E.CINDEX, D, "t")]),
    ("ALTER TABLE t ADD CONSTRAINT uq UNIQUE (a)", [(E.CINDEX, D, "t")]),
    ("ALTER TABLE t ADD CONSTRAINT fk FOREIGN KEY (a) REFERENCES p (id)", [(E.ALTER, D, "t")]),
    ("ALTER TABLE t DROP INDEX idx_c", [(E.DINDEX, D, "t")]),
    ("ALTER TABLE t DROP KEY idx_c", [(E.DINDEX, D, "t")]),
    ("ALTER TABLE t DROP PRIMARY KEY", [(E.ALTER, D, "t")]),
    ("ALTER TABLE t DROP FOREIGN KEY fk_1", [(E.ALTER, D, "t")]),
    ("ALTER TABLE t ADD COLUMN c INT, ADD INDEX i (c)", [(E.ALTER, D, "t"), (E.CINDEX, D, "t")]),
    ("ALTER TABLE t ADD INDEX i (c), ADD COLUMN d INT", [(E.CINDEX, D, "t"), (E.ALTER, D, "t")]),
    ("ALTER TABLE t ADD INDEX i (c), ENGINE=InnoDB", [(E.ALTER, D, "t"), (E.CINDEX, D, "t")]),
    ("ALTER TABLE t ENGINE=InnoDB", [(E.ALTER, D, "t")]),
    ("ALTER TABLE t COMMENT 'orders, with a comma'", [(E.ALTER, D, "t")]),
    ("ALTER TABLE t ADD COLUMN a INT, ADD COLUMN b INT, ADD COLUMN c INT", [(E.ALTER, D, "t")]),
    ("ALTER TABLE t ADD INDEX i (a, b), ALGORITHM=INPLACE, LOCK=NONE", [(E.CINDEX, D, "t")]),
    ("ALTER TABLE t RENAME TO t_new", [(E.RENAME, D, "t_new", D, "t")]),
    ("ALTER TABLE a.t RENAME AS b.t", [(E.RENAME, "b", "t", "a", "t")]),
    ("ALTER TABLE t RENAME INDEX i1 TO i2", [(E.ALTER, D, "t")]),
    ("ALTER TABLE t RENAME COLUMN c1 TO c2", [(E.ALTER, D, "t")]),
    ("ALTER IGNORE TABLE t ADD UNIQUE (a)", [(E.CINDEX, D, "t")]),
    ("ALTER ONLINE TABLE t ADD COLUMN x INT", [(E.ALTER, D, "t")]),
    ("ALTER TABLE IF EXISTS t ADD COLUMN IF NOT EXISTS x INT", [(E.ALTER, D, "t")]),
    ("ALTER TABLE t WAIT 5 ADD COLUMN x INT", [(E.ALTER, D, "t")]),
    (
        "ALTER TABLE t PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (10), PARTITION p1 VALUES LESS "
        "THAN MAXVALUE)",
        [(E.ALTER, D, "t")],
    ),
    ("ALTER TABLE t TRUNCATE PARTITION p0", [(E.ALTER, D, "t")]),
    ("ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", [(E.ALTER, D, "t")]),
    ("ALTER TABLE t DEFAULT CHARSET=utf8mb4", [(E.ALTER, D, "t")]),
    (
        # Rails
        "ALTER TABLE `users` ADD `confirmed_at` datetime(6), ADD INDEX `index_users_on_email` (`email`)",
        [(E.ALTER, D, "users"), (E.CINDEX, D, "users")],
    ),
    (
        # pt-online-schema-change
        "ALTER TABLE `shop`.`_orders_new` ADD COLUMN note varchar(20)",
        [(E.ALTER, "shop", "_orders_new")],
    ),
    ("/*!40000 ALTER TABLE `t` DISABLE KEYS */", [(E.ALTER, D, "t")]),
    # ---- DROP TABLE
    ("DROP TABLE t", [(E.ERASE, D, "t")]),
    ("DROP TABLE IF EXISTS `s`.`t`", [(E.ERASE, "s", "t")]),
    ("DROP TABLE IF EXISTS a, b.c /* generated by server */", [(E.ERASE, D, "a"), (E.ERASE, "b", "c")]),
    ("DROP TABLE `t1`,`t2` /* generated by server */", [(E.ERASE, D, "t1"), (E.ERASE, D, "t2")]),
    ("DROP TEMPORARY TABLE IF EXISTS `tmp` /* generated by server */", [(E.ERASE, D, "tmp")]),
    ("drop table x.y RESTRICT", [(E.ERASE, "x", "y")]),
    ("DROP TABLES a, b CASCADE", [(E.ERASE, D, "a"), (E.ERASE, D, "b")]),
    ("DROP TABLE IF EXISTS `shop`.`_orders_del`", [(E.ERASE, "shop", "_orders_del")]),
    # ---- TRUNCATE
    ("TRUNCATE TABLE t", [(E.TRUNCATE, D, "t")]),
    ("truncate `s`.`t`", [(E.TRUNCATE, "s", "t")]),
    # ---- RENAME
    ("RENAME TABLE a TO b", [(E.RENAME, D, "b", D, "a")]),
    ("RENAME TABLE a TO b, s.c TO s.d", [(E.RENAME, D, "b", D, "a"), (E.RENAME, "s", "d", "s", "c")]),
    (
        # pt-online-schema-change swap
        "RENAME TABLE `shop`.`orders` TO `shop`.`_orders_old`, `shop`.`_orders_new` TO `shop`.`orders`",
        [(E.RENAME, "shop", "_orders_old", "shop", "orders"), (E.RENAME, "shop", "orders", "shop", "_orders_new")],
    ),
    (
        # gh-ost cut-over
        "rename /* gh-ost */ table `shop`.`orders` to `shop`.`_orders_del`, `shop`.`_orders_gho` to `shop`.`orders`",
        [(E.RENAME, "shop", "_orders_del", "shop", "orders"), (E.RENAME, "shop", "orders", "shop", "_orders_gho")],
    ),
    ("RENAME TABLE IF EXISTS a WAIT 3 TO b", [(E.RENAME, D, "b", D, "a")]),
    # ---- indexes
    ("CREATE INDEX idx ON t (c)", [(E.CINDEX, D, "t")]),
    ("CREATE UNIQUE INDEX `uk` USING BTREE ON `s`.`t` (`a`, `b`)", [(E.CINDEX, "s", "t")]),
    ("CREATE FULLTEXT INDEX ft ON t (body) WITH PARSER ngram", [(E.CINDEX, D, "t")]),
    ("CREATE SPATIAL INDEX sp ON geo.places (g)", [(E.CINDEX, "geo", "places")]),
    ("CREATE OR REPLACE INDEX IF NOT EXISTS i ON t (c)", [(E.CINDEX, D, "t")]),
    ("CREATE INDEX i ON t ((lower(c))) ALGORITHM=INPLACE LOCK=NONE", [(E.CINDEX, D, "t")]),
    ("DROP INDEX idx ON t", [(E.DINDEX, D, "t")]),
    ("DROP INDEX IF EXISTS `idx` ON `s`.`t` ALGORITHM=INPLACE", [(E.DINDEX, "s", "t")]),
    ("DROP INDEX `PRIMARY` ON t", [(E.DINDEX, D, "t")]),
    # ---- databases
    ("CREATE DATABASE shop", [(E.QUERY, "shop", None)]),
    (
        "CREATE DATABASE /*!32312 IF NOT EXISTS*/ `shop` /*!40100 DEFAULT CHARACTER SET utf8mb4 */",
        [(E.QUERY, "shop", None)],
    ),
    ("CREATE SCHEMA IF NOT EXISTS `my db`", [(E.QUERY, "my db", None)]),
    # every table of the database goes: ERASE (canal says QUERY)
    ("DROP DATABASE IF EXISTS old_shop", [(E.ERASE, "old_shop", None)]),
    ("DROP SCHEMA s2", [(E.ERASE, "s2", None)]),
    ("ALTER DATABASE shop CHARACTER SET utf8mb4", [(E.QUERY, "shop", None)]),
    ("ALTER DATABASE DEFAULT CHARACTER SET utf8mb4", [(E.QUERY, D, None)]),
    # ---- views, routines, triggers, events, users
    (
        "/*!50001 CREATE ALGORITHM=UNDEFINED */ /*!50013 DEFINER=`root`@`localhost` SQL SECURITY DEFINER */ "
        "/*!50001 VIEW `v_orders` AS select 1 AS `a` */",
        [(E.QUERY, D, None)],
    ),
    ("CREATE OR REPLACE VIEW rpt.v AS SELECT * FROM t", [(E.QUERY, "rpt", None)]),
    ("ALTER ALGORITHM=MERGE DEFINER=CURRENT_USER VIEW v AS SELECT 1", [(E.QUERY, D, None)]),
    ("DROP VIEW IF EXISTS s.v1, s.v2", [(E.QUERY, "s", None)]),
    (
        "CREATE DEFINER=`root`@`%` TRIGGER `trg` BEFORE INSERT ON `t` FOR EACH ROW BEGIN SET NEW.a = 1; "
        "DROP TABLE x; END",
        [(E.QUERY, D, None)],
    ),
    ("CREATE DEFINER='app'@'10.0.0.%' PROCEDURE p.sp() BEGIN DELETE FROM t; END", [(E.QUERY, "p", None)]),
    ("CREATE FUNCTION f(x INT) RETURNS INT DETERMINISTIC RETURN x + 1", [(E.QUERY, D, None)]),
    ("DROP PROCEDURE IF EXISTS `sp_x`", [(E.QUERY, D, None)]),
    ("DROP TRIGGER s.trg", [(E.QUERY, "s", None)]),
    ("CREATE EVENT e ON SCHEDULE EVERY 1 HOUR DO DELETE FROM t", [(E.QUERY, D, None)]),
    ("ALTER EVENT e DISABLE", [(E.QUERY, D, None)]),
    ("CREATE USER 'bob'@'%' IDENTIFIED BY 'secret'", [(E.QUERY, D, None)]),
    ("GRANT SELECT, REPLICATION SLAVE ON *.* TO 'canal'@'%'", [(E.QUERY, D, None)]),
    ("REVOKE ALL PRIVILEGES ON shop.* FROM 'bob'@'%'", [(E.QUERY, D, None)]),
    ("CREATE SEQUENCE s.seq START WITH 1", [(E.CREATE, "s", "seq")]),
    # ---- statement-form DML
    ("INSERT INTO t (a) VALUES (1)", [(E.INSERT, D, "t")]),
    ("insert ignore into `s`.`t` values (1),(2)", [(E.INSERT, "s", "t")]),
    ("REPLACE INTO s.t VALUES (1)", [(E.INSERT, "s", "t")]),
    ("INSERT t SELECT * FROM u", [(E.INSERT, D, "t")]),
    ("UPDATE t SET a = 1 WHERE id = 2", [(E.UPDATE, D, "t")]),
    ("UPDATE LOW_PRIORITY `s`.`t` AS x SET x.a = 1", [(E.UPDATE, "s", "t")]),
    ("UPDATE t1 JOIN t2 ON t1.id = t2.id SET t1.a = t2.a", [(E.UPDATE, D, None)]),
    ("UPDATE t1, t2 SET t1.a = t2.a", [(E.UPDATE, D, None)]),
    ("DELETE FROM t WHERE id = 1", [(E.DELETE, D, "t")]),
    ("DELETE FROM s.t", [(E.DELETE, "s", "t")]),
    ("DELETE t1 FROM t1 JOIN t2 ON t1.id = t2.id", [(E.DELETE, D, None)]),
    ("DELETE FROM t1, t2 USING t1 JOIN t2", [(E.DELETE, D, None)]),
    ("WITH x AS (SELECT 1 AS id) DELETE FROM t WHERE id IN (SELECT id FROM x)", [(E.DELETE, D, "t")]),
    ("LOAD DATA LOCAL INFILE '/tmp/x.csv' IGNORE INTO TABLE s.t FIELDS TERMINATED BY ','", [(E.INSERT, "s", "t")]),
    # ---- more migration-tool and server-generated forms
    ("DROP TABLE IF EXISTS `t`;", [(E.ERASE, D, "t")]),
    ("DROP TABLE `t` /* generated by server */ /* xid=45 */", [(E.ERASE, D, "t")]),
    ("/*!40000 ALTER TABLE `orders` ENABLE KEYS */;", [(E.ALTER, D, "orders")]),
    (
        # Django foreign key
        "ALTER TABLE `polls_choice` ADD CONSTRAINT `polls_choice_question_id_c5b4b260_fk_polls_question_id` "
        "FOREIGN KEY (`question_id`) REFERENCES `polls_question` (`id`)",
        [(E.ALTER, D, "polls_choice")],
    ),
    (
        "CREATE INDEX `polls_choice_question_id_c5b4b260` ON `polls_choice` (`question_id`)",
        [(E.CINDEX, D, "polls_choice")],
    ),
    (
        # Flyway / Liquibase style, schema-qualified, several clauses
        "ALTER TABLE app.customer ADD COLUMN loyalty_tier VARCHAR(16) NOT NULL DEFAULT 'none', "
        "ADD CONSTRAINT uq_customer_email UNIQUE (email), DROP INDEX idx_old",
        [(E.ALTER, "app", "customer"), (E.CINDEX, "app", "customer"), (E.DINDEX, "app", "customer")],
    ),
    (
        # Rails change_column + rename
        "ALTER TABLE `accounts` CHANGE `name` `name` varchar(100) DEFAULT NULL, RENAME TO `customer_accounts`",
        [(E.ALTER, D, "accounts"), (E.RENAME, D, "customer_accounts", D, "accounts")],
    ),
    (
        # gh-ost changelog
        "create /* gh-ost */ table `shop`.`_orders_ghc` (id bigint auto_increment, last_update timestamp not null "
        "DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, hint varchar(64) charset ascii not null, "
        "value varchar(4096) charset ascii not null, primary key(id), unique key hint_uidx(hint)) "
        "auto_increment=256 comment='gh-ost changelog'",
        [(E.CREATE, "shop", "_orders_ghc")],
    ),
    ("drop /* gh-ost */ table if exists `shop`.`_orders_ghc`", [(E.ERASE, "shop", "_orders_ghc")]),
    (
        # pt-online-schema-change triggers are QUERY
        "CREATE DEFINER=`root`@`localhost` TRIGGER `pt_osc_shop_orders_ins` AFTER INSERT ON `shop`.`orders` "
        "FOR EACH ROW REPLACE INTO `shop`.`_orders_new` (`id`) VALUES (NEW.`id`)",
        [(E.QUERY, D, None)],
    ),
    ("DROP TRIGGER IF EXISTS `shop`.`pt_osc_shop_orders_ins`", [(E.QUERY, "shop", None)]),
    ("ALTER TABLE `t` ADD COLUMN IF NOT EXISTS `c` INT, ALGORITHM=INSTANT", [(E.ALTER, D, "t")]),
    ("ALTER TABLE t ADD CONSTRAINT CHECK (a > 0)", [(E.ALTER, D, "t")]),
    ("ALTER TABLE t ADD CONSTRAINT IF NOT EXISTS u1 UNIQUE (a)", [(E.CINDEX, D, "t")]),
    ("ALTER TABLE t ADD `index` INT, ADD index_count INT", [(E.ALTER, D, "t")]),
    ("ALTER TABLE t DATA DIRECTORY = '/x', INDEX DIRECTORY = '/y'", [(E.ALTER, D, "t")]),
    ("CREATE TABLE t(id int)", [(E.CREATE, D, "t")]),
    ("DROP TABLE `db`.`a`, `b` , c.`d e`", [(E.ERASE, "db", "a"), (E.ERASE, D, "b"), (E.ERASE, "c", "d e")]),
    # ---- everything else
    ("FLUSH PRIVILEGES", [(E.QUERY, D, None)]),
    ("ANALYZE TABLE t", [(E.QUERY, D, None)]),
    ("SET @a = 1", [(E.QUERY, D, None)]),
    ("", [(E.QUERY, D, None)]),
    ("   /* only a comment */  ", [(E.QUERY, D, None)]),
    ("CREATE TABLE", [(E.QUERY, D, None)]),
    ("ALTER TABLE", [(E.QUERY, D, None)]),
    ("DROP TABLE IF EXISTS", [(E.QUERY, D, None)]),
    ("RENAME TABLE a", [(E.QUERY, D, None)]),
    ("CREATE TABLE `unterminated (a int", [(E.CREATE, D, "unterminated (a int")]),
    ("this is not sql at all", [(E.QUERY, D, None)]),
]


def _expect(row: tuple[object, ...]) -> tuple[object, ...]:
    return row if len(row) == 5 else (*row, None, None)


@pytest.mark.parametrize(("sql", "expected"), CASES, ids=[c[0][:60] for c in CASES])
def test_classify(sql: str, expected: list[tuple[object, ...]]) -> None:
    got = [(r.event_type, r.schema, r.table, r.ori_schema, r.ori_table) for r in classify_ddl(sql, D)]
    assert got == [_expect(e) for e in expected]


def test_corpus_is_large() -> None:
    assert len(CASES) >= 100


def test_no_default_schema_keeps_none_and_empty_means_none() -> None:
    assert classify_ddl("CREATE TABLE t (a int)", None) == [DdlResult(E.CREATE, None, "t", kind=QueryKind.DDL)]
    assert classify_ddl("CREATE TABLE t (a int)", "")[0].schema is None
    assert classify_ddl("CREATE TABLE s.t (a int)", None)[0].schema == "s"
    assert classify_ddl("GRANT ALL ON *.* TO x", None)[0].schema is None


def test_alter_rename_without_default_schema_stays_in_table_schema() -> None:
    (r,) = classify_ddl("ALTER TABLE a.t RENAME TO u", None)
    assert (r.event_type, r.schema, r.table, r.ori_schema, r.ori_table) == (E.RENAME, "a", "u", "a", "t")


def test_is_ddl_flag_follows_canal() -> None:
    assert classify_ddl("CREATE TABLE t (a int)", D)[0].is_ddl
    assert classify_ddl("GRANT ALL ON *.* TO x", D)[0].is_ddl  # canal: isDdl = !isDml, QUERY included
    assert not classify_ddl("INSERT INTO t VALUES (1)", D)[0].is_ddl
    assert not classify_ddl("UPDATE t SET a = 1", D)[0].is_ddl
    assert not classify_ddl("DELETE FROM t", D)[0].is_ddl


def test_names_keep_their_case() -> None:
    (r,) = classify_ddl("CREATE TABLE `Shop`.`OrderItems` (a int)", D)
    assert (r.schema, r.table) == ("Shop", "OrderItems")


def test_comment_content_is_not_sql_but_version_comment_content_is() -> None:
    assert classify_ddl("/* DROP TABLE x */ CREATE TABLE y (a int)", D)[0].table == "y"
    assert classify_ddl("/*!50001 DROP TABLE x */", D)[0].event_type is E.ERASE
    assert classify_ddl("/*M!100100 DROP TABLE x */", D)[0].table == "x"
    assert classify_ddl("CREATE TABLE t (a int) -- DROP TABLE z", D) == classify_ddl("CREATE TABLE t (a int)", D)
    # `--` without a following space is an operator, not a comment (MySQL rule)
    assert classify_ddl("ALTER TABLE t--x\n ADD COLUMN c INT", D)[0].table == "t"


def test_strings_hide_keywords() -> None:
    sql = "ALTER TABLE t COMMENT 'ADD INDEX x, DROP INDEX y', ADD COLUMN `drop index` INT"
    assert [r.event_type for r in classify_ddl(sql, D)] == [E.ALTER]
    sql = "ALTER TABLE t MODIFY c ENUM('a,b', 'c\\'d, ADD INDEX'), ADD KEY k (c)"
    assert [r.event_type for r in classify_ddl(sql, D)] == [E.ALTER, E.CINDEX]


def test_multiple_statements() -> None:
    got = classify_ddl("CREATE TABLE a (x int); DROP TABLE b;", D)
    assert [(r.event_type, r.table) for r in got] == [(E.CREATE, "a"), (E.ERASE, "b")]


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE PROCEDURE p() BEGIN DROP TABLE x; CREATE TABLE y (a int); END",
        "CREATE DEFINER=root@10.0.0.1 PROCEDURE p() BEGIN DROP TABLE x; END",
        "CREATE DEFINER=CURRENT_USER() TRIGGER tr AFTER DELETE ON t FOR EACH ROW BEGIN DELETE FROM u; END",
        "CREATE WEIRDTHING w AS BEGIN DROP TABLE x; END",
        "IF 1 THEN DROP TABLE x; END IF",
        "BEGIN NOT ATOMIC DROP TABLE x; END",
    ],
)
def test_compound_bodies_are_not_split_into_statements(sql: str) -> None:
    assert [r.event_type for r in classify_ddl(sql, D)] == [E.QUERY]


KINDS = [
    ("BEGIN", QueryKind.BEGIN),
    ("begin work", QueryKind.BEGIN),
    ("START TRANSACTION", QueryKind.BEGIN),
    ("COMMIT", QueryKind.COMMIT),
    ("COMMIT WORK AND NO CHAIN", QueryKind.COMMIT),
    ("ROLLBACK", QueryKind.ROLLBACK),
    ("ROLLBACK TO SAVEPOINT s1", QueryKind.SAVEPOINT),
    ("ROLLBACK WORK TO s1", QueryKind.SAVEPOINT),
    ("SAVEPOINT s1", QueryKind.SAVEPOINT),
    ("RELEASE SAVEPOINT s1", QueryKind.SAVEPOINT),
    ("XA START X'31',X'',1", QueryKind.XA_START),
    ("XA BEGIN 'x'", QueryKind.XA_START),
    ("XA END X'31',X'',1", QueryKind.XA_END),
    ("XA PREPARE 'x'", QueryKind.XA_PREPARE),
    ("XA COMMIT X'31',X'',1", QueryKind.XA_COMMIT),
    ("XA COMMIT 'x' ONE PHASE", QueryKind.XA_COMMIT),
    ("xa rollback 'x'", QueryKind.XA_ROLLBACK),
    ("XA RECOVER", QueryKind.OTHER),
    ("BEGIN NOT ATOMIC SELECT 1; END", QueryKind.OTHER),
    ("INSERT INTO t VALUES (1)", QueryKind.DML),
    ("REPLACE t VALUES (1)", QueryKind.DML),
    ("UPDATE t SET a = 1", QueryKind.DML),
    ("DELETE FROM t", QueryKind.DML),
    ("/* c */ insert into t values (1)", QueryKind.DML),
    ("CREATE TABLE t (a int)", QueryKind.DDL),
    ("CREATE DATABASE d", QueryKind.DDL),
    ("CREATE VIEW v AS SELECT 1", QueryKind.DDL),
    ("DROP TRIGGER tr", QueryKind.DDL),
    ("TRUNCATE t", QueryKind.DDL),
    ("GRANT SELECT ON *.* TO u", QueryKind.DCL),
    ("REVOKE SELECT ON *.* FROM u", QueryKind.DCL),
    ("CREATE USER u IDENTIFIED BY 'p'", QueryKind.DCL),
    ("ALTER USER u IDENTIFIED BY 'p'", QueryKind.DCL),
    ("DROP USER IF EXISTS u", QueryKind.DCL),
    ("RENAME USER a TO b", QueryKind.DCL),
    ("DROP ROLE r", QueryKind.DCL),
    ("SET PASSWORD FOR u = 'x'", QueryKind.DCL),
    ("SET DEFAULT ROLE r TO u", QueryKind.DCL),
    ("SET NAMES utf8mb4", QueryKind.OTHER),
    ("FLUSH TABLES", QueryKind.OTHER),
    ("OPTIMIZE TABLE t", QueryKind.OTHER),
    ("CALL sp()", QueryKind.OTHER),
    ("", QueryKind.OTHER),
]


@pytest.mark.parametrize(("sql", "kind"), KINDS, ids=[k[0] or "empty" for k in KINDS])
def test_query_kind(sql: str, kind: QueryKind) -> None:
    assert query_kind(sql) is kind
    assert classify_ddl(sql, D)[0].kind is kind


def test_filter_flags() -> None:
    assert QueryKind.DML.filter_flag == "dml"
    assert QueryKind.DDL.filter_flag == "ddl"
    assert QueryKind.DCL.filter_flag == "dcl"
    assert QueryKind.OTHER.filter_flag == "dcl"  # canal files every other query under filter.query.dcl
    assert QueryKind.BEGIN.filter_flag is None
    assert QueryKind.XA_COMMIT.is_transaction_control
    assert not QueryKind.DDL.is_transaction_control


def test_xa_xid() -> None:
    assert xa_xid("XA START X'31',X'',1") == "X'31',X'',1"
    assert xa_xid("xa commit 'abc' ONE PHASE") == "'abc' ONE PHASE"
    assert xa_xid("XA ROLLBACK X'01';") == "X'01'"
    assert xa_xid("COMMIT") is None
    assert xa_xid("XA RECOVER") is None


def test_results_are_fresh_lists() -> None:
    first = classify_ddl("DROP TABLE a, b", D)
    first.clear()
    assert len(classify_ddl("DROP TABLE a, b", D)) == 2


def test_huge_statement_dml_is_read_only_up_to_its_table() -> None:
    sql = "INSERT INTO s.big VALUES " + ",".join(f"({i}, 'x{i}')" for i in range(200_000))
    t0 = time.perf_counter()
    (r,) = classify_ddl(sql, D)
    assert (r.event_type, r.schema, r.table) == (E.INSERT, "s", "big")
    assert time.perf_counter() - t0 < 0.05


def test_fast_enough() -> None:
    stmts = [c[0] for c in CASES]
    # defeat the memo: every statement is new text
    t0 = time.perf_counter()
    for i in range(20):
        for s in stmts:
            classify_ddl(f"{s} /* {i} */", D)
    per = (time.perf_counter() - t0) / (20 * len(stmts))
    assert per < 0.002, f"{per * 1e6:.0f} us per statement"


_PIECES = [*"abcXYZ_ `'\"\\.,;()/*!-#\n\t=@0123456789é", " TABLE ", "CREATE", "DROP", "ALTER", " IF EXISTS ", " TO "]
_sqlish = st.lists(st.sampled_from(_PIECES), max_size=40).map("".join)


@settings(max_examples=300, deadline=None)
@given(_sqlish, st.sampled_from([None, "", "db"]))
def test_never_raises(sql: str, default: str | None) -> None:
    results = classify_ddl(sql, default)
    assert results
    for r in results:
        assert isinstance(r, DdlResult)
        if r.event_type in (E.CREATE, E.ALTER, E.ERASE, E.TRUNCATE, E.CINDEX, E.DINDEX, E.RENAME):
            assert r.table  # a table event always names its table


_ident = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(_ident, _ident)
def test_any_backticked_name_round_trips(schema: str, table: str) -> None:
    def q(name: str) -> str:
        return "`" + name.replace("`", "``") + "`"

    (r,) = classify_ddl(f"DROP TABLE IF EXISTS {q(schema)}.{q(table)} /* generated by server */", D)
    assert (r.event_type, r.schema, r.table) == (E.ERASE, schema, table)
    (r,) = classify_ddl(f"RENAME TABLE {q(table)} TO {q(schema)}.{q(table)}", D)
    assert (r.ori_schema, r.ori_table, r.schema, r.table) == (D, table, schema, table)
