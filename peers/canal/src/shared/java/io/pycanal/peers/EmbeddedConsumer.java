package io.pycanal.peers;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import com.alibaba.otter.canal.protocol.CanalEntry;
import com.alibaba.otter.canal.protocol.ClientIdentity;
import com.alibaba.otter.canal.protocol.Message;
import com.alibaba.otter.canal.server.embedded.CanalServerWithEmbedded;
import com.google.protobuf.ByteString;

/**
 * One client of one destination of canal's embedded server: gets, prints (or counts) and acks, as a consumer of
 * canal's entries does. Shared by the canal peers of every canal version (their CanalServerWithEmbedded has the same
 * API): its source is compiled into each.
 */
final class EmbeddedConsumer implements Runnable {
    final ClientIdentity client;
    final int batchSize;
    final long timeoutMs;
    final boolean print;
    final long untilRows;
    final long begun;
    final Thread thread;
    volatile boolean running = true;
    boolean subscribed;
    long rows;
    long entries;
    long firstRowNanos;
    long lastRowNanos;

    private final CanalServerWithEmbedded server;

    EmbeddedConsumer(CanalServerWithEmbedded server, ClientIdentity client, Map<String, Object> c, long begun) {
        this.server = server;
        this.client = client;
        this.batchSize = (int) Harness.number(c, "batch_size", 1000);
        this.timeoutMs = Harness.number(c, "timeout_ms", 200);
        this.print = Harness.flag(c, "print", true);
        this.untilRows = Harness.number(c, "until_rows", -1);
        this.begun = begun;
        this.thread = new Thread(this, "peers-consumer-" + client.getDestination());
        this.thread.setDaemon(true);
    }

    void subscribe() {
        if (!subscribed) {
            server.subscribe(client);
            // what canal's client connector does when it connects: batches a former consumer got and never
            // acked (in the meta, as marks) are handed out again from the cursor
            server.rollback(client);
            subscribed = true;
        }
    }

    @Override
    public void run() {
        while (running) {
            try {
                if (!server.isStart(client.getDestination())) {
                    subscribed = false; // a standby: wait until this process runs the destination
                    Thread.sleep(20);
                    continue;
                }
                subscribe();
                once(true, batchSize);
            } catch (InterruptedException e) {
                return;
            } catch (Throwable e) {
                if (running) {
                    Harness.emit(Harness.error("consume " + client.getDestination(), e));
                    try {
                        Thread.sleep(200);
                    } catch (InterruptedException interrupted) {
                        return;
                    }
                }
            }
        }
    }

    /** One getWithoutAck; its entries printed (or counted), then acked if {@code ack}. */
    void once(boolean ack, int size) throws Exception {
        Message message = server.getWithoutAck(client, size, timeoutMs, TimeUnit.MILLISECONDS);
        long id = message.getId();
        if (id == -1) {
            return;
        }
        List<?> raw = message.isRaw() ? message.getRawEntries() : message.getEntries();
        int batchRows = 0;
        List<Map<String, Object>> lines = print ? new ArrayList<>(raw.size() + 1) : null;
        for (Object item : raw) {
            CanalEntry.Entry entry = item instanceof ByteString ? CanalEntry.Entry.parseFrom((ByteString) item)
                : (CanalEntry.Entry) item;
            batchRows += EntryJson.rows(entry);
            if (print) {
                Map<String, Object> line = Harness.line("entry");
                line.put("destination", client.getDestination());
                line.put("batch", id);
                line.putAll(EntryJson.entry(entry));
                lines.add(line);
            }
        }
        entries += raw.size();
        if (batchRows > 0) {
            long now = System.nanoTime();
            if (rows == 0) {
                firstRowNanos = now;
            }
            lastRowNanos = now;
            rows += batchRows;
        }
        if (print) {
            Map<String, Object> batch = Harness.line("batch");
            batch.put("destination", client.getDestination());
            batch.put("batch", id);
            batch.put("entries", raw.size());
            batch.put("rows", batchRows);
            lines.add(batch);
            Harness.emitAll(lines);
        }
        if (ack) {
            server.ack(client, id);
            if (print) {
                Map<String, Object> line = Harness.line("ack");
                line.put("destination", client.getDestination());
                line.put("batch", id);
                Harness.emit(line);
            }
        }
        if (untilRows > 0 && rows >= untilRows) {
            Map<String, Object> count = Harness.line("count");
            count.put("destination", client.getDestination());
            count.put("rows", rows);
            count.put("entries", entries);
            count.put("first_row_ms", (firstRowNanos - begun) / 1e6);
            count.put("last_row_ms", (lastRowNanos - begun) / 1e6);
            Harness.emit(count);
            untilRowsReached();
        }
    }

    private void untilRowsReached() {
        running = false;
    }

    void halt() {
        running = false;
        thread.interrupt();
        try {
            thread.join(5000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
