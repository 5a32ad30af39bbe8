package io.pycanal.peers;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A canal conf directory's keys as a {@link CanalPeer} start: {@code canal.properties}, then
 * {@code {destination}/instance.properties} over it, {@code ${key:default}} placeholders resolved (system properties
 * first), as canal's spring files bind them. canal reads a conf directory through spring XMLs its release tarball
 * ships beside the directory and Maven Central does not serve (for no canal version): this maps the keys canal
 * documents onto the CanalParameter and parser settings those files set, and canal's classes read the values (the
 * filters' regexes, the position, the field filters).
 */
final class ConfDir {

    private static final Pattern PLACEHOLDER = Pattern.compile("\\$\\{([^}:]+)(?::([^}]*))?}");

    private ConfDir() {
    }

    static Map<String, Object> settings(String confDir, String destination, Map<String, Object> extra)
        throws IOException {
        Properties merged = new Properties();
        load(merged, Paths.get(confDir, "canal.properties"));
        load(merged, Paths.get(confDir, destination, "instance.properties"));
        Map<String, Object> c = new LinkedHashMap<>(extra);
        c.put("destination", destination);
        c.put("address", value(merged, "canal.instance.master.address"));
        put(c, "standby", value(merged, "canal.instance.standby.address"));
        c.put("username", value(merged, "canal.instance.dbUsername"));
        c.put("password", value(merged, "canal.instance.dbPassword"));
        Map<String, Object> position = new LinkedHashMap<>();
        put(position, "journalName", value(merged, "canal.instance.master.journal.name"));
        put(position, "position", number(value(merged, "canal.instance.master.position")));
        put(position, "timestamp", number(value(merged, "canal.instance.master.timestamp")));
        put(position, "gtid", value(merged, "canal.instance.master.gtid"));
        if (!position.isEmpty()) {
            c.put("position", position);
        }
        put(c, "slave_id", number(value(merged, "canal.instance.mysql.slaveId")));
        put(c, "filter", value(merged, "canal.instance.filter.regex"));
        put(c, "black_filter", value(merged, "canal.instance.filter.black.regex"));
        put(c, "field_filter", value(merged, "canal.instance.filter.field"));
        put(c, "field_black_filter", value(merged, "canal.instance.filter.black.field"));
        put(c, "gtid", bool(value(merged, "canal.instance.gtidon")));
        put(c, "tsdb", bool(value(merged, "canal.instance.tsdb.enable")));
        put(c, "parallel", bool(value(merged, "canal.instance.parser.parallel")));
        put(c, "buffer_size", number(value(merged, "canal.instance.memory.buffer.size")));
        put(c, "batch_mode", value(merged, "canal.instance.memory.batch.mode"));
        put(c, "raw", bool(value(merged, "canal.instance.memory.rawEntry")));
        put(c, "transaction_size", number(value(merged, "canal.instance.transaction.size")));
        put(c, "fallback_interval_s", number(value(merged, "canal.instance.fallbackIntervalInSeconds")));
        return c;
    }

    private static void load(Properties into, Path file) throws IOException {
        try (InputStream in = Files.newInputStream(file)) {
            into.load(in);
        }
    }

    private static String value(Properties p, String key) {
        String raw = System.getProperty(key, p.getProperty(key));
        if (raw == null) {
            return null;
        }
        String text = raw.trim();
        for (int depth = 0; depth < 10; depth++) {
            Matcher m = PLACEHOLDER.matcher(text);
            if (!m.find()) {
                break;
            }
            StringBuilder out = new StringBuilder();
            do {
                String found = value(p, m.group(1));
                String replacement = found != null ? found : (m.group(2) != null ? m.group(2) : "");
                m.appendReplacement(out, Matcher.quoteReplacement(replacement));
            } while (m.find());
            m.appendTail(out);
            text = out.toString();
        }
        return text.isEmpty() ? null : text;
    }

    private static void put(Map<String, Object> into, String key, Object value) {
        if (value != null) {
            into.put(key, value);
        }
    }

    private static Long number(String text) {
        return text == null ? null : Long.valueOf(text);
    }

    private static Boolean bool(String text) {
        return text == null ? null : Boolean.valueOf(text);
    }
}
