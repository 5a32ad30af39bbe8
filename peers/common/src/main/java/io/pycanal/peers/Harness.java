package io.pycanal.peers;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The process shape every peer shares. Commands arrive on stdin, one JSON object a line ({@code {"cmd": ..., ...}});
 * what the peer delivers leaves on stdout, one JSON object a line with a {@code "kind"}. The end of stdin, a
 * {@code {"cmd": "exit"}} or SIGTERM stops the peer cleanly (its close() runs once) and ends the process.
 *
 * Libraries print to System.out too: it is pointed at stderr, and the lines go to the process's real stdout.
 */
public final class Harness {

    /** A peer: runs the commands it knows, and stops everything it started on close. */
    public interface Peer {
        void command(String name, Map<String, Object> command) throws Throwable;

        void close() throws Throwable;
    }

    private static final Object LOCK = new Object();
    private static OutputStream out;
    private static volatile boolean closed;

    private Harness() {
    }

    /** Writes one line. */
    public static void emit(Map<String, Object> line) {
        StringBuilder text = new StringBuilder(256);
        JsonText.write(text, line);
        text.append('\n');
        write(text);
    }

    /** Writes several lines at once (a batch of entries), flushed together. */
    public static void emitAll(List<Map<String, Object>> lines) {
        StringBuilder text = new StringBuilder(256 * lines.size() + 1);
        for (Map<String, Object> line : lines) {
            JsonText.write(text, line);
            text.append('\n');
        }
        write(text);
    }

    private static void write(StringBuilder text) {
        byte[] bytes = text.toString().getBytes(StandardCharsets.US_ASCII);
        synchronized (LOCK) {
            try {
                out.write(bytes);
                out.flush();
            } catch (IOException e) {
                // stdout closed: the reader went away, nothing more to tell it
            }
        }
    }

    public static Map<String, Object> line(String kind) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("kind", kind);
        return line;
    }

    public static Map<String, Object> error(String where, Throwable e) {
        Map<String, Object> line = line("error");
        line.put("where", where);
        line.put("error", e.getClass().getName() + ": " + e.getMessage());
        StringWriter trace = new StringWriter();
        e.printStackTrace(new PrintWriter(trace));
        line.put("trace", trace.toString());
        return line;
    }

    /** Runs {@code peer} until stdin ends, an exit command or SIGTERM. */
    public static void run(Peer peer) {
        out = new FileOutputStream(FileDescriptor.out);
        System.setOut(new PrintStream(new FileOutputStream(FileDescriptor.err), true));
        Runtime.getRuntime().addShutdownHook(new Thread(() -> close(peer), "peers-shutdown"));

        Map<String, Object> ready = line("ready");
        ready.put("pid", ProcessHandle.current().pid());
        ready.put("jvm_start_ms", ManagementFactory.getRuntimeMXBean().getUptime());
        emit(ready);
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String text;
            while ((text = in.readLine()) != null) {
                if (text.isBlank()) {
                    continue;
                }
                Map<String, Object> command = null;
                String name = "?";
                try {
                    @SuppressWarnings("unchecked")
                    Map<String, Object> parsed = (Map<String, Object>) JsonText.read(text);
                    command = parsed;
                    name = String.valueOf(command.get("cmd"));
                    if ("exit".equals(name)) {
                        break;
                    }
                    peer.command(name, command);
                    Map<String, Object> done = line("done");
                    done.put("cmd", name);
                    done.put("id", command.get("id"));
                    emit(done);
                } catch (Throwable e) {
                    Map<String, Object> failed = error("command " + name, e);
                    failed.put("cmd", name);
                    failed.put("id", command == null ? null : command.get("id"));
                    emit(failed);
                }
            }
        } catch (IOException e) {
            emit(error("stdin", e));
        }
        close(peer);
        System.exit(0);
    }

    private static void close(Peer peer) {
        synchronized (Harness.class) {
            if (closed) {
                return;
            }
            closed = true;
        }
        try {
            peer.close();
        } catch (Throwable e) {
            emit(error("close", e));
        }
        emit(line("closed"));
    }

    // ---- settings: command fields with defaults ----

    public static String string(Map<String, Object> c, String key, String fallback) {
        Object v = c.get(key);
        return v == null ? fallback : v.toString();
    }

    public static long number(Map<String, Object> c, String key, long fallback) {
        Object v = c.get(key);
        return v == null ? fallback : ((Number) v).longValue();
    }

    public static boolean flag(Map<String, Object> c, String key, boolean fallback) {
        Object v = c.get(key);
        return v == null ? fallback : (Boolean) v;
    }

    public static String required(Map<String, Object> c, String key) {
        Object v = c.get(key);
        if (v == null) {
            throw new IllegalArgumentException("command needs \"" + key + "\"");
        }
        return v.toString();
    }
}
