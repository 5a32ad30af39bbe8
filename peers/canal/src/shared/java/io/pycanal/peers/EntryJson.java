package io.pycanal.peers;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import com.alibaba.otter.canal.protocol.CanalEntry;
import com.google.protobuf.ByteString;
import com.google.protobuf.InvalidProtocolBufferException;

/** canal's entries as JSON: every field of the protocol's Entry, Header, RowChange, RowData and Column, as canal set it. */
final class EntryJson {

    private EntryJson() {
    }

    static Map<String, Object> entry(ByteString raw) throws InvalidProtocolBufferException {
        return entry(CanalEntry.Entry.parseFrom(raw));
    }

    static Map<String, Object> entry(CanalEntry.Entry entry) throws InvalidProtocolBufferException {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("entryType", entry.getEntryType().name());
        out.put("header", header(entry.getHeader()));
        switch (entry.getEntryType()) {
            case TRANSACTIONBEGIN: {
                CanalEntry.TransactionBegin begin = CanalEntry.TransactionBegin.parseFrom(entry.getStoreValue());
                Map<String, Object> b = new LinkedHashMap<>();
                b.put("executeTime", begin.getExecuteTime());
                b.put("transactionId", begin.getTransactionId());
                b.put("threadId", begin.getThreadId());
                b.put("props", pairs(begin.getPropsList()));
                out.put("begin", b);
                break;
            }
            case TRANSACTIONEND: {
                CanalEntry.TransactionEnd end = CanalEntry.TransactionEnd.parseFrom(entry.getStoreValue());
                Map<String, Object> e = new LinkedHashMap<>();
                e.put("executeTime", end.getExecuteTime());
                e.put("transactionId", end.getTransactionId());
                e.put("props", pairs(end.getPropsList()));
                out.put("end", e);
                break;
            }
            case ROWDATA:
                out.put("rowChange", rowChange(CanalEntry.RowChange.parseFrom(entry.getStoreValue())));
                break;
            default:
                break;
        }
        return out;
    }

    /** How many row images an entry holds, for counting without printing. */
    static int rows(CanalEntry.Entry entry) throws InvalidProtocolBufferException {
        if (entry.getEntryType() != CanalEntry.EntryType.ROWDATA) {
            return 0;
        }
        CanalEntry.RowChange change = CanalEntry.RowChange.parseFrom(entry.getStoreValue());
        if (change.getIsDdl()) {
            return 0;
        }
        int rows = 0;
        for (CanalEntry.RowData row : change.getRowDatasList()) {
            // what a consumer reads of each row: its columns' values
            for (CanalEntry.Column c : row.getBeforeColumnsList()) {
                c.getValue();
            }
            for (CanalEntry.Column c : row.getAfterColumnsList()) {
                c.getValue();
            }
            rows++;
        }
        return rows;
    }

    private static Map<String, Object> header(CanalEntry.Header h) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("version", h.getVersion());
        out.put("logfileName", h.getLogfileName());
        out.put("logfileOffset", h.getLogfileOffset());
        out.put("serverId", h.getServerId());
        out.put("serverenCode", h.getServerenCode());
        out.put("executeTime", h.getExecuteTime());
        out.put("sourceType", h.getSourceType().name());
        out.put("schemaName", h.getSchemaName());
        out.put("tableName", h.getTableName());
        out.put("eventLength", h.getEventLength());
        out.put("eventType", h.getEventType().name());
        out.put("gtid", h.getGtid());
        out.put("props", pairs(h.getPropsList()));
        return out;
    }

    private static Map<String, Object> rowChange(CanalEntry.RowChange rc) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("tableId", rc.getTableId());
        out.put("eventType", rc.getEventType().name());
        out.put("isDdl", rc.getIsDdl());
        out.put("sql", rc.getSql());
        out.put("ddlSchemaName", rc.getDdlSchemaName());
        out.put("props", pairs(rc.getPropsList()));
        List<Object> rows = new ArrayList<>(rc.getRowDatasCount());
        for (CanalEntry.RowData row : rc.getRowDatasList()) {
            Map<String, Object> r = new LinkedHashMap<>();
            r.put("beforeColumns", columns(row.getBeforeColumnsList()));
            r.put("afterColumns", columns(row.getAfterColumnsList()));
            r.put("props", pairs(row.getPropsList()));
            rows.add(r);
        }
        out.put("rowDatas", rows);
        return out;
    }

    private static List<Object> columns(List<CanalEntry.Column> columns) {
        List<Object> out = new ArrayList<>(columns.size());
        for (CanalEntry.Column c : columns) {
            Map<String, Object> col = new LinkedHashMap<>();
            col.put("index", c.getIndex());
            col.put("sqlType", c.getSqlType());
            col.put("name", c.getName());
            col.put("isKey", c.getIsKey());
            col.put("updated", c.getUpdated());
            col.put("isNull", c.getIsNull());
            col.put("value", c.getValue());
            col.put("length", c.getLength());
            col.put("mysqlType", c.getMysqlType());
            col.put("props", pairs(c.getPropsList()));
            out.add(col);
        }
        return out;
    }

    private static List<Object> pairs(List<CanalEntry.Pair> pairs) {
        List<Object> out = new ArrayList<>(pairs.size());
        for (CanalEntry.Pair p : pairs) {
            List<Object> kv = new ArrayList<>(2);
            kv.add(p.getKey());
            kv.add(p.getValue());
            out.add(kv);
        }
        return out;
    }
}
