package io.pycanal.peers;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.source.SourceRecord;

import io.debezium.embedded.Connect;
import io.debezium.engine.ChangeEvent;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.RecordChangeEvent;
import io.debezium.engine.format.ChangeEventFormat;
import io.debezium.engine.format.Json;

/**
 * Debezium's embedded engine as a peer. Each {@code start} command runs one engine with the given connector
 * properties (the MariaDB connector, memory offsets and schema history unless told otherwise):
 * <ul>
 * <li>{@code "format": "json"} (default) prints each change event as Kafka's JsonConverter writes it (schemas on:
 * key, value envelope with its source block, and the schema that says how each value is encoded);</li>
 * <li>{@code "format": "connect"} hands the records, as Connect's SourceRecords, to a consumer that only counts them
 * (the benchmark), and prints a {@code count} line once {@code until_records} data changes have arrived.</li>
 * </ul>
 * Lines out: ready; task_started; polling_started; record (one per change event); count; completed; error; closed.
 */
public final class DebeziumPeer implements Harness.Peer {

    private final Map<String, DebeziumEngine<?>> engines = new ConcurrentHashMap<>();
    private final ExecutorService executor = Executors.newCachedThreadPool(r -> {
        Thread thread = new Thread(r, "peers-debezium");
        thread.setDaemon(true);
        return thread;
    });

    public static void main(String[] args) {
        Harness.run(new DebeziumPeer());
    }

    @Override
    public void command(String name, Map<String, Object> c) throws Exception {
        switch (name) {
            case "start":
                start(c);
                break;
            case "stop":
                stop(Harness.required(c, "name"));
                break;
            default:
                throw new IllegalArgumentException("unknown command " + name);
        }
    }

    private static Properties properties(String name, Map<String, Object> c) {
        Properties props = new Properties();
        props.setProperty("name", name);
        props.setProperty("connector.class", "io.debezium.connector.mariadb.MariaDbConnector");
        props.setProperty("offset.storage", "org.apache.kafka.connect.storage.MemoryOffsetBackingStore");
        props.setProperty("offset.flush.interval.ms", "60000");
        props.setProperty("schema.history.internal", "io.debezium.relational.history.MemorySchemaHistory");
        props.setProperty("topic.prefix", name);
        @SuppressWarnings("unchecked")
        Map<String, Object> given = (Map<String, Object>) c.get("properties");
        if (given != null) {
            for (Map.Entry<String, Object> e : given.entrySet()) {
                props.setProperty(e.getKey(), String.valueOf(e.getValue()));
            }
        }
        // after the given properties: a start at a position takes its own snapshot mode
        if (c.get("offset") != null) {
            // start at a binlog position: an offset store holding it, and the schema history rebuilt from the
            // captured tables' schema (snapshot.mode=recovery: no DDL may lie between the position and now)
            props.setProperty("offset.storage", "org.apache.kafka.connect.storage.FileOffsetBackingStore");
            props.setProperty("offset.storage.file.filename", seedOffset(name, c.get("offset")));
            props.setProperty("snapshot.mode", "recovery");
        }
        return props;
    }

    /**
     * A FileOffsetBackingStore file holding one offset of the connector {@code name} (topic prefix {@code name}):
     * the store's file format (a serialized map of the offset converter's key bytes to its value bytes; JSON without
     * schemas), written directly.
     */
    private static String seedOffset(String name, Object offset) {
        try {
            java.io.File file = java.io.File.createTempFile("peers-offsets-" + name, ".dat");
            file.deleteOnExit();
            java.util.HashMap<byte[], byte[]> raw = new java.util.HashMap<>();
            String key = "[" + JsonText.write(name) + ",{\"server\":" + JsonText.write(name) + "}]";
            raw.put(key.getBytes(java.nio.charset.StandardCharsets.UTF_8),
                JsonText.write(offset).getBytes(java.nio.charset.StandardCharsets.UTF_8));
            try (java.io.ObjectOutputStream out = new java.io.ObjectOutputStream(new java.io.FileOutputStream(file))) {
                out.writeObject(raw);
            }
            return file.getPath();
        } catch (java.io.IOException e) {
            throw new IllegalStateException("the offset file could not be written", e);
        }
    }

    private void start(Map<String, Object> c) {
        String name = Harness.required(c, "name");
        if (engines.containsKey(name)) {
            throw new IllegalStateException("engine " + name + " is already started");
        }
        Properties props = properties(name, c);
        long begun = System.nanoTime();
        DebeziumEngine.ConnectorCallback callbacks = new DebeziumEngine.ConnectorCallback() {
            @Override
            public void taskStarted() {
                Map<String, Object> line = Harness.line("task_started");
                line.put("name", name);
                line.put("start_ms", (System.nanoTime() - begun) / 1_000_000);
                Harness.emit(line);
            }

            @Override
            public void pollingStarted() {
                Map<String, Object> line = Harness.line("polling_started");
                line.put("name", name);
                line.put("start_ms", (System.nanoTime() - begun) / 1_000_000);
                Harness.emit(line);
            }
        };
        DebeziumEngine.CompletionCallback completion = (success, message, error) -> {
            Map<String, Object> line = error == null ? Harness.line("completed") : Harness.error("engine " + name, error);
            if (error != null) {
                line.put("kind", "completed");
            }
            line.put("name", name);
            line.put("success", success);
            line.put("message", message);
            Harness.emit(line);
        };
        DebeziumEngine<?> engine;
        if ("connect".equals(Harness.string(c, "format", "json"))) {
            engine = DebeziumEngine.create(ChangeEventFormat.of(Connect.class))
                .using(props)
                .using(callbacks)
                .using(completion)
                .notifying(new Counting(name, Harness.number(c, "until_records", -1), begun))
                .build();
        } else {
            engine = DebeziumEngine.create(Json.class)
                .using(props)
                .using(callbacks)
                .using(completion)
                .notifying(new Printing(name))
                .build();
        }
        engines.put(name, engine);
        executor.execute(engine);
    }

    private void stop(String name) throws Exception {
        DebeziumEngine<?> engine = engines.remove(name);
        if (engine != null) {
            try {
                engine.close();
            } catch (IllegalStateException e) {
                // the engine stopped on its own (an error it reported as completed): nothing left to stop
            }
        }
    }

    @Override
    public void close() throws Exception {
        for (String name : new ArrayList<>(engines.keySet())) {
            stop(name);
        }
        executor.shutdown();
        executor.awaitTermination(30, TimeUnit.SECONDS);
    }

    /** Prints each change event as JSON lines, a batch at a time. */
    private static final class Printing implements DebeziumEngine.ChangeConsumer<ChangeEvent<String, String>> {
        private final String name;

        Printing(String name) {
            this.name = name;
        }

        @Override
        public void handleBatch(List<ChangeEvent<String, String>> records,
                                DebeziumEngine.RecordCommitter<ChangeEvent<String, String>> committer)
            throws InterruptedException {
            List<Map<String, Object>> lines = new ArrayList<>(records.size());
            for (ChangeEvent<String, String> record : records) {
                Map<String, Object> line = Harness.line("record");
                line.put("name", name);
                line.put("topic", record.destination());
                line.put("partition", record.partition());
                line.put("key", new JsonText.Raw(record.key()));
                line.put("value", new JsonText.Raw(record.value()));
                lines.add(line);
            }
            Harness.emitAll(lines);
            for (ChangeEvent<String, String> record : records) {
                committer.markProcessed(record);
            }
            committer.markBatchFinished();
        }
    }

    /** A consumer that does nothing with the records but count the data changes among them. */
    private static final class Counting implements DebeziumEngine.ChangeConsumer<RecordChangeEvent<SourceRecord>> {
        private final String name;
        private final long until;
        private final long begun;
        private final AtomicLong changes = new AtomicLong();
        private long firstNanos;
        private boolean told;

        Counting(String name, long until, long begun) {
            this.name = name;
            this.until = until;
            this.begun = begun;
        }

        @Override
        public void handleBatch(List<RecordChangeEvent<SourceRecord>> records,
                                DebeziumEngine.RecordCommitter<RecordChangeEvent<SourceRecord>> committer)
            throws InterruptedException {
            long n = 0;
            for (RecordChangeEvent<SourceRecord> event : records) {
                Object value = event.record().value();
                if (value instanceof Struct && ((Struct) value).schema().field("op") != null) {
                    n++;
                }
                committer.markProcessed(event);
            }
            committer.markBatchFinished();
            if (n > 0 && changes.get() == 0) {
                firstNanos = System.nanoTime();
            }
            long total = changes.addAndGet(n);
            if (!told && until > 0 && total >= until) {
                told = true;
                Map<String, Object> line = Harness.line("count");
                line.put("name", name);
                line.put("records", total);
                line.put("first_record_ms", (firstNanos - begun) / 1e6);
                line.put("last_record_ms", (System.nanoTime() - begun) / 1e6);
                Harness.emit(line);
            }
        }
    }
}
