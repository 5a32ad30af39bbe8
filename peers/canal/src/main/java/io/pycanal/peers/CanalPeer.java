package io.pycanal.peers;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.I0Itec.zkclient.exception.ZkNodeExistsException;

import com.alibaba.otter.canal.common.zookeeper.ZkClientx;
import com.alibaba.otter.canal.common.zookeeper.ZookeeperPathUtils;
import com.alibaba.otter.canal.common.zookeeper.running.ServerRunningData;
import com.alibaba.otter.canal.common.zookeeper.running.ServerRunningListener;
import com.alibaba.otter.canal.common.zookeeper.running.ServerRunningMonitor;
import com.alibaba.otter.canal.common.zookeeper.running.ServerRunningMonitors;
import com.alibaba.otter.canal.instance.core.CanalInstance;
import com.alibaba.otter.canal.instance.manager.CanalInstanceWithManager;
import com.alibaba.otter.canal.instance.manager.model.Canal;
import com.alibaba.otter.canal.instance.manager.model.CanalParameter;
import com.alibaba.otter.canal.instance.manager.model.CanalParameter.HAMode;
import com.alibaba.otter.canal.instance.manager.model.CanalParameter.IndexMode;
import com.alibaba.otter.canal.instance.manager.model.CanalParameter.MetaMode;
import com.alibaba.otter.canal.instance.manager.model.CanalParameter.SourcingType;
import com.alibaba.otter.canal.instance.manager.model.CanalParameter.StorageMode;
import com.alibaba.otter.canal.parse.inbound.mysql.MysqlEventParser;
import com.alibaba.otter.canal.protocol.ClientIdentity;
import com.alibaba.otter.canal.server.embedded.CanalServerWithEmbedded;

/**
 * canal's embedded server as a peer. Each {@code start} command builds one destination: a CanalInstanceWithManager
 * from a CanalParameter (memory, ZooKeeper or mixed meta; canal's TSDB over H2 unless told otherwise), started in
 * CanalServerWithEmbedded -- at once, or, with {@code "ha": true}, when canal's ServerRunningMonitor wins the
 * destination's running node on ZooKeeper (what canal's deployer does for each destination). A consumer thread then
 * gets, prints and acks batches ({@code "consume": "auto"}), or Python drives it with get / ack / rollback commands.
 *
 * Lines out: ready; started / active / inactive / standby; entry (one per entry, with its batch id); batch (id,
 * entries, rows); ack; count (without printing: rows and times); alarm (canal's alarms: a parse error it retries);
 * error; closed.
 */
public final class CanalPeer implements Harness.Peer {

    private final CanalServerWithEmbedded server = CanalServerWithEmbedded.instance();
    private final Map<String, Map<String, Object>> configs = new ConcurrentHashMap<>();
    private final Map<String, EmbeddedConsumer> consumers = new ConcurrentHashMap<>();
    private final Map<String, ServerRunningMonitor> monitors = new ConcurrentHashMap<>();
    private final H2Tsdb tsdb = new H2Tsdb();
    private volatile boolean serverStarted;

    public static void main(String[] args) {
        Harness.run(new CanalPeer());
    }

    @Override
    public void command(String name, Map<String, Object> c) throws Exception {
        switch (name) {
            case "start":
                start(c);
                break;
            case "start_conf":
                start(ConfDir.settings(Harness.required(c, "conf_dir"), Harness.required(c, "destination"), c));
                break;
            case "stop":
                stop(Harness.required(c, "destination"));
                break;
            case "get":
                get(c);
                break;
            case "ack": {
                ClientIdentity client = client(c);
                server.ack(client, Harness.number(c, "batch", -1));
                Map<String, Object> line = Harness.line("ack");
                line.put("destination", client.getDestination());
                line.put("batch", Harness.number(c, "batch", -1));
                Harness.emit(line);
                break;
            }
            case "rollback": {
                ClientIdentity client = client(c);
                if (c.containsKey("batch")) {
                    server.rollback(client, Harness.number(c, "batch", -1));
                } else {
                    server.rollback(client);
                }
                break;
            }
            case "release": {
                // canal's "release" admin action: give the running node up for another server to take
                ServerRunningMonitor monitor = monitors.get(Harness.required(c, "destination"));
                if (monitor != null) {
                    monitor.release();
                }
                break;
            }
            default:
                throw new IllegalArgumentException("unknown command " + name);
        }
    }

    private synchronized void ensureServer() {
        if (!serverStarted) {
            server.setCanalInstanceGenerator(this::generate);
            server.start();
            serverStarted = true;
        }
    }

    private CanalInstance generate(String destination) {
        Map<String, Object> c = configs.get(destination);
        if (c == null) {
            throw new IllegalStateException("no configuration for destination " + destination);
        }
        Canal canal = new Canal();
        canal.setId(Harness.number(c, "canal_id", 1));
        canal.setName(destination);
        canal.setCanalParameter(parameter(c));
        CanalInstanceWithManager instance = new CanalInstanceWithManager(canal, Harness.string(c, "filter", ".*\\..*"));
        AlarmLines alarms = new AlarmLines();
        alarms.start();
        instance.setAlarmHandler(alarms);
        if (instance.getEventParser() instanceof MysqlEventParser) {
            // canal.instance.filter.field / filter.black.field: not CanalParameter settings, the parser's
            MysqlEventParser parser = (MysqlEventParser) instance.getEventParser();
            if (c.get("field_filter") != null) {
                parser.setFieldFilter(c.get("field_filter").toString());
            }
            if (c.get("field_black_filter") != null) {
                parser.setFieldBlackFilter(c.get("field_black_filter").toString());
            }
        }
        if (Harness.flag(c, "tsdb", true) && instance.getEventParser() instanceof MysqlEventParser) {
            MysqlEventParser parser = (MysqlEventParser) instance.getEventParser();
            parser.setTableMetaTSDBFactory(tsdb);
            parser.setTsdbSpringXml("pycanal-peers:h2");
            parser.setTsdbJdbcUrl("jdbc:h2:mem");
            parser.setTsdbJdbcUserName("");
            parser.setTsdbJdbcPassword("");
            parser.setEnableTsdb(true);
        }
        return instance;
    }

    private static CanalParameter parameter(Map<String, Object> c) {
        CanalParameter p = new CanalParameter();
        List<InetSocketAddress> addresses = new ArrayList<>();
        addresses.add(address(Harness.required(c, "address")));
        if (c.get("standby") != null) {
            addresses.add(address(c.get("standby").toString()));
        }
        p.setDbAddresses(addresses);
        p.setDbUsername(Harness.string(c, "username", "canal"));
        p.setDbPassword(Harness.string(c, "password", "canal"));
        p.setSlaveId(Harness.number(c, "slave_id", 1234));
        p.setSourcingType(SourcingType.MYSQL);
        p.setHaMode(HAMode.HEARTBEAT);
        p.setDetectingEnable(Harness.flag(c, "detecting", false));
        p.setDetectingSQL("select 1");
        List<String> positions = new ArrayList<>();
        if (c.get("position") != null) {
            positions.add(JsonText.write(c.get("position")));
        }
        if (c.get("standby_position") != null) {
            positions.add(JsonText.write(c.get("standby_position")));
        }
        p.setPositions(positions);
        String meta = Harness.string(c, "meta", "memory");
        p.setMetaMode(MetaMode.valueOf(meta.toUpperCase()));
        p.setIndexMode(IndexMode.valueOf(Harness.string(c, "index", "memory_meta_failback").toUpperCase()));
        if (c.get("zk") != null) {
            p.setZkClusters(Arrays.asList(c.get("zk").toString().split(",")));
        }
        if (c.get("data_dir") != null) {
            p.setDataDir(c.get("data_dir").toString());
        }
        p.setStorageMode(StorageMode.MEMORY);
        p.setMemoryStorageBufferSize((int) Harness.number(c, "buffer_size", 16 * 1024));
        p.setMemoryStorageRawEntry(Harness.flag(c, "raw", true));
        p.setStorageBatchMode(CanalParameter.BatchMode.valueOf(Harness.string(c, "batch_mode", "MEMSIZE")));
        p.setTransactionSize((int) Harness.number(c, "transaction_size", 1024));
        // canal.instance.parser.parallel defaults to true in canal's deployer (CanalParameter's own default is false)
        p.setParallel(Harness.flag(c, "parallel", true));
        p.setGtidEnable(Harness.flag(c, "gtid", false));
        p.setBlackFilter(Harness.string(c, "black_filter", null));
        p.setConnectionCharset("UTF-8");
        p.setFallbackIntervalInSeconds((int) Harness.number(c, "fallback_interval_s", 60));
        p.setDefaultConnectionTimeoutInSeconds(30);
        return p;
    }

    private static InetSocketAddress address(String hostPort) {
        int colon = hostPort.lastIndexOf(':');
        return new InetSocketAddress(hostPort.substring(0, colon), Integer.parseInt(hostPort.substring(colon + 1)));
    }

    private static ClientIdentity client(Map<String, Object> c) {
        return new ClientIdentity(Harness.required(c, "destination"), (short) Harness.number(c, "client_id", 1001));
    }

    private void start(Map<String, Object> c) throws Exception {
        String destination = Harness.required(c, "destination");
        if (configs.putIfAbsent(destination, c) != null) {
            throw new IllegalStateException("destination " + destination + " is already started");
        }
        ensureServer();
        long begun = System.nanoTime();
        EmbeddedConsumer consumer = new EmbeddedConsumer(server, client(c), c, begun);
        if (Harness.flag(c, "ha", false)) {
            monitor(destination, c, consumer);
        } else {
            server.start(destination);
            Map<String, Object> started = Harness.line("started");
            started.put("destination", destination);
            started.put("start_ms", (System.nanoTime() - begun) / 1_000_000);
            Harness.emit(started);
        }
        consumers.put(destination, consumer);
        if ("auto".equals(Harness.string(c, "consume", "auto"))) {
            consumer.thread.start();
        }
    }

    /** Runs the destination the way canal's deployer does under ZooKeeper: only while this process holds its running node. */
    private void monitor(String destination, Map<String, Object> c, EmbeddedConsumer consumer) {
        // canal's deployer uses ZkClient's default session (30 s); a test that kills the owner sets a shorter one
        ZkClientx zk = new ZkClientx(Harness.required(c, "zk"), (int) Harness.number(c, "zk_session_ms", 30_000),
            (int) Harness.number(c, "zk_connect_ms", 30_000));
        zk.createPersistent(ZookeeperPathUtils.DESTINATION_ROOT_NODE, true);
        zk.createPersistent(ZookeeperPathUtils.CANAL_CLUSTER_ROOT_NODE, true);
        String registered = Harness.required(c, "server_address"); // canal.register.ip:canal.port
        ServerRunningData data = new ServerRunningData(registered);
        ServerRunningMonitors.setServerData(data);
        ServerRunningMonitor monitor = new ServerRunningMonitor(data);
        monitor.setDestination(destination);
        monitor.setZkClient(zk);
        monitor.setDelayTime((int) Harness.number(c, "delay_s", 5));
        monitor.setListener(new ServerRunningListener() {

            @Override
            public void processActiveEnter() {
                server.start(destination);
                Map<String, Object> line = Harness.line("active");
                line.put("destination", destination);
                line.put("start_ms", (System.nanoTime() - consumer.begun) / 1_000_000);
                Harness.emit(line);
            }

            @Override
            public void processActiveExit() {
                server.stop(destination);
                Map<String, Object> line = Harness.line("inactive");
                line.put("destination", destination);
                Harness.emit(line);
            }

            @Override
            public void processStart() {
                String path = ZookeeperPathUtils.getDestinationClusterNode(destination, registered);
                zk.createPersistent(ZookeeperPathUtils.getDestinationClusterRoot(destination), true);
                try {
                    zk.createEphemeral(path);
                } catch (ZkNodeExistsException e) {
                    // registered already: the monitor's init and start both call this, as in canal's deployer
                }
            }

            @Override
            public void processStop() {
                String path = ZookeeperPathUtils.getDestinationClusterNode(destination, registered);
                zk.delete(path);
            }
        });
        monitors.put(destination, monitor);
        monitor.init();
        monitor.start();
        if (!server.isStart(destination)) {
            Map<String, Object> line = Harness.line("standby");
            line.put("destination", destination);
            Harness.emit(line);
        }
    }

    private void get(Map<String, Object> c) throws Exception {
        ClientIdentity client = client(c);
        EmbeddedConsumer consumer = consumers.get(client.getDestination());
        if (consumer == null) {
            throw new IllegalStateException("destination " + client.getDestination() + " is not started");
        }
        consumer.subscribe();
        consumer.once(Harness.flag(c, "ack", false), (int) Harness.number(c, "batch_size", consumer.batchSize));
    }

    private void stop(String destination) {
        EmbeddedConsumer consumer = consumers.remove(destination);
        if (consumer != null) {
            consumer.halt();
        }
        ServerRunningMonitor monitor = monitors.remove(destination);
        if (monitor != null) {
            monitor.stop();
        } else if (server.isStart(destination)) {
            server.stop(destination);
        }
        configs.remove(destination);
        tsdb.destory(destination);
    }

    @Override
    public void close() {
        for (String destination : new ArrayList<>(configs.keySet())) {
            try {
                stop(destination);
            } catch (Throwable e) {
                Harness.emit(Harness.error("stop " + destination, e));
            }
        }
        if (serverStarted) {
            server.stop();
        }
    }
}
