package io.pycanal.peers;

import java.util.Map;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.classic.spi.IThrowableProxy;
import ch.qos.logback.core.AppenderBase;

/**
 * canal's logged errors as {@code log_error} lines (thread, message, the causes' messages): canal raises its alarm
 * only when it retries a dump, seconds after its parser thread logged why it stopped; the thread's name says which
 * destination it was (canal names its threads after the destination).
 */
public final class ErrorLines extends AppenderBase<ILoggingEvent> {

    @Override
    protected void append(ILoggingEvent event) {
        if (!event.getLevel().isGreaterOrEqual(Level.ERROR)) {
            return;
        }
        StringBuilder causes = new StringBuilder();
        for (IThrowableProxy t = event.getThrowableProxy(); t != null; t = t.getCause()) {
            causes.append(t.getClassName()).append(": ").append(t.getMessage()).append('\n');
        }
        Map<String, Object> line = Harness.line("log_error");
        line.put("thread", event.getThreadName());
        line.put("message", event.getFormattedMessage());
        line.put("causes", causes.toString());
        Harness.emit(line);
    }
}
