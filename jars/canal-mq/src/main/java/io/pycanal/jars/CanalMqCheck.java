package io.pycanal.jars;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

import com.alibaba.fastjson2.JSON;
import com.alibaba.fastjson2.JSONObject;
import com.alibaba.fastjson2.JSONWriter;
import com.alibaba.otter.canal.connector.core.consumer.CommonMessage;
import com.alibaba.otter.canal.connector.core.producer.MQMessageUtils;
import com.alibaba.otter.canal.protocol.CanalEntry;
import com.alibaba.otter.canal.protocol.FlatMessage;
import com.alibaba.otter.canal.protocol.Message;

/**
 * Reads every message of some Kafka topics, from their start to their end when called, with canal 1.1.7's own MQ
 * classes, and prints one JSON line a message:
 * <ul>
 * <li>{@code same}: the value parsed into canal's {@link FlatMessage} (fastjson2, as canal's clients parse it) and
 * written again as canal's Kafka producer writes it ({@code JSON.toJSONBytes(flatMessage, WriteNulls)}) is the same
 * JSON (every field, value and type; a row's columns in any order, as fastjson2 parses a row into a hash map):
 * the message is one canal's producer could have written; {@code identical} says whether the bytes are too;
 * {@code canal} holds canal's text when it is not the same;</li>
 * <li>{@code common}: canal-adapter's form ({@link CommonMessage}) parsed from it, its row count;</li>
 * <li>{@code topic_expected}, {@code partitions_expected}: where canal's producer routes a message of its database
 * and table ({@link MQMessageUtils#messageTopics}, then {@link MQMessageUtils#parseDynamicTopicPartition} and
 * {@link MQMessageUtils#messagePartition}) with the routing settings given.</li>
 * </ul>
 * The one argument is a JSON object: {@code bootstrap}, {@code topics} (a list), and canal's keys {@code topic},
 * {@code dynamicTopic}, {@code partition}, {@code partitionsNum}, {@code partitionHash},
 * {@code dynamicTopicPartitionNum}, {@code databaseHash}. The last line is {@code {"kind":"end","messages":N}}.
 */
public final class CanalMqCheck {

    private CanalMqCheck() {
    }

    public static void main(String[] args) throws Exception {
        JSONObject settings = JSON.parseObject(args[0]);
        Properties props = new Properties();
        props.put("bootstrap.servers", settings.getString("bootstrap"));
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        props.put("enable.auto.commit", "false");
        List<String> topics = settings.getList("topics", String.class);
        int count = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (String topic : topics) {
                for (PartitionInfo info : consumer.partitionsFor(topic, Duration.ofSeconds(30))) {
                    partitions.add(new TopicPartition(topic, info.partition()));
                }
            }
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> ends = new LinkedHashMap<>(consumer.endOffsets(partitions));
            ends.values().removeIf(end -> end == 0L);
            while (!ends.isEmpty()) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofSeconds(1))) {
                    TopicPartition tp = new TopicPartition(record.topic(), record.partition());
                    Long end = ends.get(tp);
                    if (end == null || record.offset() >= end) {
                        continue;
                    }
                    System.out.println(JSON.toJSONString(check(record, settings)));
                    count++;
                    if (record.offset() + 1 >= end) {
                        ends.remove(tp);
                    }
                }
            }
        }
        Map<String, Object> last = new LinkedHashMap<>();
        last.put("kind", "end");
        last.put("messages", count);
        System.out.println(JSON.toJSONString(last));
    }

    private static Map<String, Object> check(ConsumerRecord<byte[], byte[]> record, JSONObject settings) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("kind", "message");
        out.put("topic", record.topic());
        out.put("partition", record.partition());
        out.put("offset", record.offset());
        out.put("key", record.key() == null ? null : new String(record.key(), StandardCharsets.UTF_8));
        String text = new String(record.value(), StandardCharsets.UTF_8);
        FlatMessage flat = JSON.parseObject(text, FlatMessage.class);
        byte[] again = JSON.toJSONBytes(flat, JSONWriter.Feature.WriteNulls);
        // fastjson2 parses a row's map into a hash map: written again, its columns may come in another order than
        // canal's producer writes them (column order); the rest is compared byte for byte
        boolean same = JSON.parse(again).equals(JSON.parse(record.value()));
        out.put("same", same);
        out.put("identical", Arrays.equals(again, record.value()));
        if (!same) {
            out.put("canal", new String(again, StandardCharsets.UTF_8));
        }
        CommonMessage common = JSON.parseObject(text, CommonMessage.class);
        out.put("common_rows", common.getData() == null ? 0 : common.getData().size());
        out.put("type", flat.getType());
        out.put("database", flat.getDatabase());
        out.put("table", flat.getTable());
        out.put("rows", flat.getData() == null ? 0 : flat.getData().size());

        // canal's producer's routing of a message of this database and table
        String topic = settings.getString("topic");
        String dynamic = settings.getString("dynamicTopic");
        if (dynamic != null && !dynamic.isEmpty()) {
            CanalEntry.Header header = CanalEntry.Header.newBuilder()
                .setSchemaName(flat.getDatabase() == null ? "" : flat.getDatabase())
                .setTableName(flat.getTable() == null ? "" : flat.getTable())
                .build();
            CanalEntry.Entry entry = CanalEntry.Entry.newBuilder()
                .setHeader(header)
                .setEntryType(CanalEntry.EntryType.ROWDATA)
                .build();
            Message message = new Message(1L, new ArrayList<>(Collections.singletonList(entry)));
            List<String> names = new ArrayList<>();
            for (String name : MQMessageUtils.messageTopics(message, topic, dynamic).keySet()) {
                names.add(name.replace('.', '_'));
            }
            out.put("topic_expected", names);
        } else {
            out.put("topic_expected", Collections.singletonList(topic));
        }
        String hash = settings.getString("partitionHash");
        List<Integer> expected = new ArrayList<>();
        if (hash != null && !hash.isEmpty()) {
            Integer number = MQMessageUtils.parseDynamicTopicPartition(record.topic(),
                settings.getString("dynamicTopicPartitionNum"));
            if (number == null) {
                number = settings.getInteger("partitionsNum");
            }
            boolean databaseHash = settings.getBoolean("databaseHash") == null || settings.getBoolean("databaseHash");
            FlatMessage[] parts = MQMessageUtils.messagePartition(flat, number, hash, databaseHash);
            for (int i = 0; i < parts.length; i++) {
                if (parts[i] != null) {
                    expected.add(i);
                }
            }
        } else {
            Integer partition = settings.getInteger("partition");
            expected.add(partition == null ? 0 : partition);
        }
        out.put("partitions_expected", expected);
        return out;
    }
}
