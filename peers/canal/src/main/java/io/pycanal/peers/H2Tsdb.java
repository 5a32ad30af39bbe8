package io.pycanal.peers;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.ibatis.mapping.Environment;
import org.apache.ibatis.session.Configuration;
import org.apache.ibatis.session.SqlSessionFactory;
import org.apache.ibatis.session.SqlSessionFactoryBuilder;
import org.apache.ibatis.transaction.jdbc.JdbcTransactionFactory;
import org.h2.jdbcx.JdbcDataSource;

import com.alibaba.otter.canal.parse.inbound.mysql.tsdb.DatabaseTableMeta;
import com.alibaba.otter.canal.parse.inbound.mysql.tsdb.TableMetaTSDB;
import com.alibaba.otter.canal.parse.inbound.mysql.tsdb.TableMetaTSDBFactory;
import com.alibaba.otter.canal.parse.inbound.mysql.tsdb.dao.MetaHistoryDAO;
import com.alibaba.otter.canal.parse.inbound.mysql.tsdb.dao.MetaHistoryMapper;
import com.alibaba.otter.canal.parse.inbound.mysql.tsdb.dao.MetaSnapshotDAO;
import com.alibaba.otter.canal.parse.inbound.mysql.tsdb.dao.MetaSnapshotMapper;

/**
 * canal's table-meta TSDB (DatabaseTableMeta: its DDL replay, snapshots and rollback) over an in-memory H2 database,
 * as canal's deployer runs it by default (canal.instance.tsdb.enable=true with its H2 spring file). canal publishes
 * that spring file and its MyBatis mapping only in the deployer's distribution, which Maven Central serves up to
 * 1.1.4: the DAOs here are canal's, wired by hand, and the mapping (the mapper XML beside canal's mapper interfaces
 * under this module's resources) is pycanal's own SQL for the statements the DAOs call. The tables are created by
 * canal's own DDL (ddl/h2/*.sql in canal.parse).
 */
final class H2Tsdb implements TableMetaTSDBFactory {

    private final Map<String, DatabaseTableMeta> built = new ConcurrentHashMap<>();

    @Override
    public TableMetaTSDB build(String destination, String springXml) {
        return built.computeIfAbsent(destination, H2Tsdb::create);
    }

    @Override
    public void destory(String destination) {
        DatabaseTableMeta meta = built.remove(destination);
        if (meta != null) {
            meta.destory();
        }
    }

    private static DatabaseTableMeta create(String destination) {
        JdbcDataSource dataSource = new JdbcDataSource();
        dataSource.setURL("jdbc:h2:mem:tsdb_" + destination.replaceAll("\\W", "_") + ";MODE=MYSQL;DB_CLOSE_DELAY=-1");
        Configuration configuration = new Configuration(
            new Environment("tsdb", new JdbcTransactionFactory(), dataSource));
        configuration.addMapper(MetaHistoryMapper.class);
        configuration.addMapper(MetaSnapshotMapper.class);
        SqlSessionFactory factory = new SqlSessionFactoryBuilder().build(configuration);
        MetaHistoryDAO history = new MetaHistoryDAO();
        history.setSqlSessionFactory(factory);
        MetaSnapshotDAO snapshots = new MetaSnapshotDAO();
        snapshots.setSqlSessionFactory(factory);
        ClassLoader previous = Thread.currentThread().getContextClassLoader();
        Thread.currentThread().setContextClassLoader(H2Tsdb.class.getClassLoader());
        try {
            history.afterPropertiesSet(); // creates canal's tables (its ddl/h2 files)
            snapshots.afterPropertiesSet();
        } catch (Exception e) {
            throw new IllegalStateException("canal's TSDB tables could not be created", e);
        } finally {
            Thread.currentThread().setContextClassLoader(previous);
        }
        DatabaseTableMeta meta = new DatabaseTableMeta();
        meta.setMetaHistoryDAO(history);
        meta.setMetaSnapshotDAO(snapshots);
        return meta;
    }
}
