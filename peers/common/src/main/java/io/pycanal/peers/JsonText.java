package io.pycanal.peers;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * JSON for the harness's lines: a writer of maps, lists, strings, numbers, booleans and null (ASCII out: every other
 * character as a \\u escape, so a lone surrogate in a peer's text reaches Python as it is), and a reader of the
 * commands Python sends. A few dozen lines of our own rather than a dependency, because each peer brings a
 * different JSON library (canal fastjson, Debezium Jackson) and the harness must not pin either's version.
 */
public final class JsonText {

    private JsonText() {
    }

    public static String write(Object value) {
        StringBuilder out = new StringBuilder(256);
        write(out, value);
        return out.toString();
    }

    /** JSON text already (a converter's output), written as it is but for its characters beyond ASCII. */
    public static final class Raw {
        final String text;

        public Raw(String text) {
            this.text = text;
        }
    }

    @SuppressWarnings("unchecked")
    public static void write(StringBuilder out, Object value) {
        if (value == null) {
            out.append("null");
        } else if (value instanceof Raw) {
            String raw = ((Raw) value).text;
            if (raw == null) {
                out.append("null");
            } else {
                // JSON text: a character beyond ASCII can only be inside a string, where its \\u escape is the same
                for (int i = 0; i < raw.length(); i++) {
                    char c = raw.charAt(i);
                    if (c > 0x7e) {
                        out.append("\\u").append(HEX[(c >> 12) & 15]).append(HEX[(c >> 8) & 15])
                            .append(HEX[(c >> 4) & 15]).append(HEX[c & 15]);
                    } else {
                        out.append(c);
                    }
                }
            }
        } else if (value instanceof CharSequence) {
            writeString(out, value.toString());
        } else if (value instanceof Boolean) {
            out.append(((Boolean) value).booleanValue() ? "true" : "false");
        } else if (value instanceof Integer || value instanceof Long || value instanceof Short || value instanceof Byte
            || value instanceof BigInteger) {
            out.append(value.toString());
        } else if (value instanceof BigDecimal) {
            out.append(((BigDecimal) value).toPlainString());
        } else if (value instanceof Number) {
            double d = ((Number) value).doubleValue();
            if (Double.isNaN(d) || Double.isInfinite(d)) {
                writeString(out, value.toString());
            } else {
                out.append(value.toString());
            }
        } else if (value instanceof Map) {
            out.append('{');
            boolean first = true;
            for (Map.Entry<Object, Object> e : ((Map<Object, Object>) value).entrySet()) {
                if (!first) {
                    out.append(',');
                }
                first = false;
                writeString(out, String.valueOf(e.getKey()));
                out.append(':');
                write(out, e.getValue());
            }
            out.append('}');
        } else if (value instanceof Iterable) {
            out.append('[');
            boolean first = true;
            for (Object item : (Iterable<Object>) value) {
                if (!first) {
                    out.append(',');
                }
                first = false;
                write(out, item);
            }
            out.append(']');
        } else if (value instanceof byte[]) {
            writeString(out, java.util.Base64.getEncoder().encodeToString((byte[]) value));
        } else {
            writeString(out, value.toString());
        }
    }

    private static final char[] HEX = "0123456789abcdef".toCharArray();

    public static void writeString(StringBuilder out, String s) {
        out.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"':
                    out.append("\\\"");
                    break;
                case '\\':
                    out.append("\\\\");
                    break;
                case '\n':
                    out.append("\\n");
                    break;
                case '\r':
                    out.append("\\r");
                    break;
                case '\t':
                    out.append("\\t");
                    break;
                default:
                    if (c < 0x20 || c > 0x7e) {
                        out.append("\\u").append(HEX[(c >> 12) & 15]).append(HEX[(c >> 8) & 15])
                            .append(HEX[(c >> 4) & 15]).append(HEX[c & 15]);
                    } else {
                        out.append(c);
                    }
            }
        }
        out.append('"');
    }

    /** Reads one JSON value (objects as ordered maps, numbers as Long or BigDecimal). */
    public static Object read(String text) {
        Reader r = new Reader(text);
        r.space();
        Object value = r.value();
        r.space();
        if (r.pos != text.length()) {
            throw new IllegalArgumentException("trailing text at " + r.pos + " in JSON: " + text);
        }
        return value;
    }

    private static final class Reader {
        final String s;
        int pos;

        Reader(String s) {
            this.s = s;
        }

        void space() {
            while (pos < s.length() && Character.isWhitespace(s.charAt(pos))) {
                pos++;
            }
        }

        IllegalArgumentException error(String what) {
            return new IllegalArgumentException(what + " at " + pos + " in JSON: " + s);
        }

        Object value() {
            if (pos >= s.length()) {
                throw error("value expected");
            }
            char c = s.charAt(pos);
            if (c == '{') {
                pos++;
                Map<String, Object> map = new LinkedHashMap<>();
                space();
                if (s.charAt(pos) == '}') {
                    pos++;
                    return map;
                }
                while (true) {
                    space();
                    String key = string();
                    space();
                    expect(':');
                    space();
                    map.put(key, value());
                    space();
                    if (s.charAt(pos) == ',') {
                        pos++;
                    } else {
                        expect('}');
                        return map;
                    }
                }
            } else if (c == '[') {
                pos++;
                List<Object> list = new ArrayList<>();
                space();
                if (s.charAt(pos) == ']') {
                    pos++;
                    return list;
                }
                while (true) {
                    space();
                    list.add(value());
                    space();
                    if (s.charAt(pos) == ',') {
                        pos++;
                    } else {
                        expect(']');
                        return list;
                    }
                }
            } else if (c == '"') {
                return string();
            } else if (s.startsWith("true", pos)) {
                pos += 4;
                return Boolean.TRUE;
            } else if (s.startsWith("false", pos)) {
                pos += 5;
                return Boolean.FALSE;
            } else if (s.startsWith("null", pos)) {
                pos += 4;
                return null;
            } else {
                int start = pos;
                while (pos < s.length() && "+-0123456789.eE".indexOf(s.charAt(pos)) >= 0) {
                    pos++;
                }
                String number = s.substring(start, pos);
                if (number.isEmpty()) {
                    throw error("value expected");
                }
                if (number.indexOf('.') < 0 && number.indexOf('e') < 0 && number.indexOf('E') < 0) {
                    return Long.valueOf(number);
                }
                return new BigDecimal(number);
            }
        }

        void expect(char c) {
            if (pos >= s.length() || s.charAt(pos) != c) {
                throw error("'" + c + "' expected");
            }
            pos++;
        }

        String string() {
            expect('"');
            StringBuilder out = new StringBuilder();
            while (true) {
                if (pos >= s.length()) {
                    throw error("unterminated string");
                }
                char c = s.charAt(pos++);
                if (c == '"') {
                    return out.toString();
                }
                if (c != '\\') {
                    out.append(c);
                    continue;
                }
                char e = s.charAt(pos++);
                switch (e) {
                    case 'n':
                        out.append('\n');
                        break;
                    case 'r':
                        out.append('\r');
                        break;
                    case 't':
                        out.append('\t');
                        break;
                    case 'b':
                        out.append('\b');
                        break;
                    case 'f':
                        out.append('\f');
                        break;
                    case 'u':
                        out.append((char) Integer.parseInt(s.substring(pos, pos + 4), 16));
                        pos += 4;
                        break;
                    default:
                        out.append(e);
                }
            }
        }
    }
}
