package io.pycanal.peers;

import java.util.Map;

import com.alibaba.otter.canal.common.AbstractCanalLifeCycle;
import com.alibaba.otter.canal.common.alarm.CanalAlarmHandler;

/**
 * canal's alarms (what its LogAlarmHandler would log: a parse error it retries forever, a lost connection) as
 * {@code alarm} lines, so that a test sees at once that canal stopped delivering and why.
 */
final class AlarmLines extends AbstractCanalLifeCycle implements CanalAlarmHandler {

    @Override
    public void sendAlarm(String destination, String msg) {
        Map<String, Object> line = Harness.line("alarm");
        line.put("destination", destination);
        line.put("message", msg);
        Harness.emit(line);
    }
}
