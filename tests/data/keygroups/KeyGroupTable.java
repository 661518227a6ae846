/*
 * KeyGroupTable: writes a deterministic table of key-group assignments as
 * computed by Apache Flink's own
 * org.apache.flink.runtime.state.KeyGroupRangeAssignment, for use as test data
 * by flinkstate's Python implementation.
 *
 * This is flinkstate's own generator program; it only *calls* Flink.
 * Build and run (see regenerate.sh):
 *   javac -cp flink-dist-X.jar -d OUTDIR KeyGroupTable.java
 *   java  -cp flink-dist-X.jar:OUTDIR KeyGroupTable > flink_key_groups.tsv
 *
 * Output format: see README.md next to this file. All output is ASCII,
 * tab-separated, '\n' line ends. All randomness uses java.util.Random with
 * fixed seeds (its algorithm is fixed by the Java spec), so the output is
 * identical on every run and JVM.
 */

import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;

import java.io.BufferedWriter;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeSet;

public final class KeyGroupTable {

    static final int[] MAX_PARALLELISMS = {
        1, 2, 3, 7, 10, 100, 127, 128, 129, 255, 256, 1000, 1024, 4096, 32767, 32768
    };

    static final int[] EXTRA_PARALLELISMS = {100, 1000, 4096};

    /** A key: its TYPE tag, the boxed Java object, and its VALUE encoding. */
    static final class Key {
        final String type;
        final Object obj;
        final String value;

        Key(String type, Object obj, String value) {
            this.type = type;
            this.obj = obj;
            this.value = value;
        }
    }

    // insertion-ordered, deduplicated by "TYPE\tVALUE"
    private final Map<String, Key> keys = new LinkedHashMap<>();
    private final Writer out;

    KeyGroupTable(Writer out) {
        this.out = out;
    }

    // ------------------------------------------------------------------ encoding

    static String hex(byte[] bytes) {
        StringBuilder sb = new StringBuilder(bytes.length * 2);
        for (byte b : bytes) {
            sb.append(Character.forDigit((b >> 4) & 0xF, 16));
            sb.append(Character.forDigit(b & 0xF, 16));
        }
        return sb.toString();
    }

    static String hex16(long v) {
        String s = Long.toHexString(v);
        return "0000000000000000".substring(s.length()) + s;
    }

    static String hex8(int v) {
        String s = Integer.toHexString(v);
        return "00000000".substring(s.length()) + s;
    }

    static Key keyOf(Object o) {
        if (o instanceof String) {
            String s = (String) o;
            checkNoLoneSurrogates(s);
            return new Key("STRING", s, hex(s.getBytes(StandardCharsets.UTF_8)));
        } else if (o instanceof Integer) {
            return new Key("INT", o, o.toString());
        } else if (o instanceof Long) {
            return new Key("LONG", o, o.toString());
        } else if (o instanceof Short) {
            return new Key("SHORT", o, o.toString());
        } else if (o instanceof Byte) {
            return new Key("BYTE", o, o.toString());
        } else if (o instanceof Boolean) {
            return new Key("BOOLEAN", o, o.toString());
        } else if (o instanceof Double) {
            return new Key("DOUBLE", o, hex16(Double.doubleToRawLongBits((Double) o)));
        } else if (o instanceof Float) {
            return new Key("FLOAT", o, hex8(Float.floatToRawIntBits((Float) o)));
        } else if (o instanceof Character) {
            return new Key("CHAR", o, Integer.toString((int) (Character) o));
        }
        throw new IllegalArgumentException("unsupported key type: " + o.getClass());
    }

    static void checkNoLoneSurrogates(String s) {
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (Character.isHighSurrogate(c)) {
                if (i + 1 >= s.length() || !Character.isLowSurrogate(s.charAt(i + 1))) {
                    throw new IllegalStateException("lone high surrogate in test string");
                }
                i++;
            } else if (Character.isLowSurrogate(c)) {
                throw new IllegalStateException("lone low surrogate in test string");
            }
        }
    }

    void add(Object o) {
        Key k = keyOf(o);
        keys.putIfAbsent(k.type + "\t" + k.value, k);
    }

    // ------------------------------------------------------------------ keys

    static String repeat(String s, int n) {
        StringBuilder sb = new StringBuilder(s.length() * n);
        for (int i = 0; i < n; i++) {
            sb.append(s);
        }
        return sb.toString();
    }

    static String cp(int... codePoints) {
        StringBuilder sb = new StringBuilder();
        for (int c : codePoints) {
            sb.appendCodePoint(c);
        }
        return sb.toString();
    }

    /** A random non-surrogate code point from one of several script pools. */
    static int randomCodePoint(Random r, int pool) {
        switch (pool) {
            case 0: return 0x20 + r.nextInt(0x7F - 0x20);          // printable ASCII
            case 1: return 0xA0 + r.nextInt(0x100 - 0xA0);         // Latin-1 supplement
            case 2: return 0x370 + r.nextInt(0x530 - 0x370);       // Greek, Cyrillic
            case 3: return 0x4E00 + r.nextInt(0x9FFF - 0x4E00);    // CJK unified
            case 4: return 0x1F300 + r.nextInt(0x1FAFF - 0x1F300); // emoji & symbols (non-BMP)
            case 5: return 0x10000 + r.nextInt(0x10FFFF - 0x10000 + 1); // any supplementary
            default: {
                int c;
                do {
                    c = r.nextInt(0x10000);                        // any BMP but surrogates
                } while (c >= 0xD800 && c <= 0xDFFF);
                return c;
            }
        }
    }

    static String randomString(Random r, int length, int pool) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < length; i++) {
            int p = pool >= 0 ? pool : r.nextInt(7);
            sb.appendCodePoint(randomCodePoint(r, p));
        }
        return sb.toString();
    }

    void buildKeys() {
        // ---- STRING
        String[] fixed = {
            "", "a", "A", "z", "0", " ", "hello", "Hello", "hello world", "key",
            "abcdefghij", "abcdefghik", "Abcdefghij",
            // String.hashCode collisions
            "Aa", "BB", "AaAa", "BBBB", "AaBB", "BBAa",
            // hashCode == Integer.MIN_VALUE
            "polygenelubricants",
            // control characters
            "\u0000", "a\u0000b", "tab\there", "line\nbreak", "\r\n", "\u007f",
            // Latin-1 and other European
            "caf\u00e9", "na\u00efve", "\u00dcn\u00efc\u00f6d\u00e9", "\u00ff", "\u00a0",
            "stra\u00dfe", "e\u0301", "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac",
            "\u041f\u0440\u0438\u0432\u0435\u0442",
            // CJK, Korean, RTL, Devanagari
            "\u4e2d\u6587", "\u65e5\u672c\u8a9e", "\ud55c\uad6d\uc5b4", "\u952e", "\u952e\u503c",
            "\u72b6\u6001\u540e\u7aef", "\u05e9\u05dc\u05d5\u05dd", "\u0645\u0631\u062d\u0628\u0627",
            "\u0928\u092e\u0938\u094d\u0924\u0947",
            // BMP specials
            "\ufeff", "\ufffd", "\uffff", "\u2603", "\u20ac100",
            // outside the BMP (surrogate pairs)
            cp(0x1F600), cp(0x1F44D, 0x1F3FD),
            cp(0x1F468, 0x200D, 0x1F469, 0x200D, 0x1F467, 0x200D, 0x1F466),
            cp(0x1F1E9, 0x1F1EA), cp(0x1D11E), cp(0x10348), cp(0x2070E),
            cp(0x10000), cp(0x10FFFF), "a" + cp(0x1F600) + "b",
            cp(0x1F600, 0x1F601), cp(0x1F600, 0x1F602),
            "key-" + cp(0x1F511), "key-" + cp(0x1F512),
        };
        for (String s : fixed) {
            add(s);
        }
        // strings that differ in exactly one char
        for (int i = 0; i < 10; i++) {
            add("key" + i);
        }
        for (int i = 1; i <= 5; i++) {
            add("user-" + i);
        }
        // long strings (1000+ chars)
        add(repeat("a", 1000));
        add(repeat("a", 999) + "b");
        add(repeat("0123456789", 100));
        add(repeat("0123456789", 100) + "!");
        add(repeat("\u4e2d", 1000));
        add(repeat(cp(0x1F600), 600));
        Random lr = new Random(20240501L);
        add(randomString(lr, 1500, -1));
        // random strings, fixed seed
        Random sr = new Random(42L);
        for (int i = 0; i < 42; i++) {
            int len = 1 + sr.nextInt(40);
            int pool = (i % 8) - 1; // -1 = mixed, 0..6 = single pool
            add(randomString(sr, len, pool));
        }

        // ---- INT
        int[] ints = {
            0, 1, -1, 2, 3, 5, 10, 42, 100, 127, 128, 255, 256, 1000, -42, -100, -1000,
            Integer.MIN_VALUE, Integer.MAX_VALUE, Integer.MIN_VALUE + 1, Integer.MAX_VALUE - 1,
            123456789, -123456789,
        };
        for (int v : ints) {
            add(v);
        }
        for (int k = 1; k <= 30; k++) {
            int p = 1 << k;
            add(p - 1);
            add(p);
            add(p + 1);
        }
        for (int k : new int[] {1, 2, 3, 4, 7, 8, 15, 16, 24, 30, 31}) {
            add(-(1 << k));
        }
        for (int k : new int[] {7, 8, 16, 30}) {
            add(-(1 << k) - 1);
            add(-(1 << k) + 1);
        }
        Random ir = new Random(7L);
        for (int i = 0; i < 25; i++) {
            add(ir.nextInt());
        }

        // ---- LONG
        long[] longs = {
            0L, 1L, -1L, 42L, -42L, Long.MIN_VALUE, Long.MAX_VALUE, Long.MIN_VALUE + 1,
            Long.MAX_VALUE - 1, 1L << 31, -(1L << 31), (1L << 31) - 1,
            0xFFFFFFFFL, 1L << 32, (1L << 32) + 1, (1L << 32) - 1, -(1L << 32),
            -(1L << 32) - 1, (1L << 33) + 7, 1L << 62, -(1L << 62), 1L << 63 >>> 1,
            0x0000000100000001L, 0x7FFFFFFF7FFFFFFFL, 0xFFFFFFFF00000000L,
            0x00000000FFFFFFFFL ^ 0xFFFFFFFF00000000L,
            1234567890123L, -987654321098765L, 9007199254740993L, -9007199254740993L,
            (long) Integer.MAX_VALUE, (long) Integer.MIN_VALUE,
        };
        for (long v : longs) {
            add(v);
        }
        Random lgr = new Random(11L);
        for (int i = 0; i < 15; i++) {
            add(lgr.nextLong());
        }

        // ---- SHORT
        short[] shorts = {
            0, 1, -1, Short.MIN_VALUE, Short.MAX_VALUE, 127, 128, 255, 256, -128, -129,
            1000, -1000, 12345, -12345,
        };
        for (short v : shorts) {
            add(v);
        }

        // ---- BYTE
        byte[] bytes = {0, 1, -1, Byte.MIN_VALUE, Byte.MAX_VALUE, 42, -42, 64, -64, 100};
        for (byte v : bytes) {
            add(v);
        }

        // ---- BOOLEAN
        add(Boolean.TRUE);
        add(Boolean.FALSE);

        // ---- DOUBLE
        double[] doubles = {
            0.0, -0.0, Double.NaN, Double.POSITIVE_INFINITY, Double.NEGATIVE_INFINITY,
            Double.MIN_VALUE, -Double.MIN_VALUE, Double.MAX_VALUE, -Double.MAX_VALUE,
            Double.MIN_NORMAL, 1.0, -1.0, 1.5, -1.5, 0.5, 2.0, 3.0, 0.1, 1e10, 1e-10,
            Math.PI, Math.E, 123456789.0, 4294967296.0, 42.0, -273.15,
        };
        for (double v : doubles) {
            add(v);
        }
        // NaNs with other bit patterns (Double.hashCode() canonicalises NaN)
        add(Double.longBitsToDouble(0x7ff8000000000001L));
        add(Double.longBitsToDouble(0xfff8000000000000L));
        add(Double.longBitsToDouble(0x7fffffffffffffffL));
        Random dr = new Random(13L);
        for (int i = 0; i < 6; i++) {
            add(dr.nextDouble());
        }
        for (int i = 0; i < 6; i++) {
            add((dr.nextDouble() - 0.5) * 1e6);
        }
        for (int i = 0; i < 4; i++) {
            double d;
            do {
                d = Double.longBitsToDouble(dr.nextLong());
            } while (Double.isNaN(d));
            add(d);
        }

        // ---- FLOAT
        float[] floats = {
            0.0f, -0.0f, Float.NaN, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY,
            Float.MIN_VALUE, Float.MAX_VALUE, 1.0f, -1.0f, 1.5f, -2.5f, 0.1f, 3.14159f,
        };
        for (float v : floats) {
            add(v);
        }
        add(Float.intBitsToFloat(0x7fc00001));
        add(Float.intBitsToFloat(0xffc00000));
        Random fr = new Random(17L);
        for (int i = 0; i < 4; i++) {
            add((fr.nextFloat() - 0.5f) * 1000f);
        }

        // ---- CHAR (UTF-16 code units; includes surrogate code units on purpose)
        char[] chars = {
            0, 'A', 'a', 'z', '0', ' ', 0x7F, 0xE9, 0xFF, 0x100, 0x4E2D, 0x3042,
            0xFFFD, 0xFFFF, 0xD800, 0xDFFF,
        };
        for (char c : chars) {
            add(c);
        }
    }

    // ------------------------------------------------------------------ output

    void line(String... fields) throws IOException {
        out.write(String.join("\t", fields));
        out.write('\n');
    }

    static String s(int v) {
        return Integer.toString(v);
    }

    /** Parallelisms used for maxP in the R and O records, ascending, deduplicated. */
    static List<Integer> parallelismsFor(int maxP) {
        TreeSet<Integer> ps = new TreeSet<>();
        for (int p = 1; p <= Math.min(maxP, 16); p++) {
            ps.add(p);
        }
        if (maxP <= 256) {
            ps.add(maxP);
            if (maxP - 1 >= 1) {
                ps.add(maxP - 1);
            }
        }
        for (int p : EXTRA_PARALLELISMS) {
            if (p <= maxP) {
                ps.add(p);
            }
        }
        return new ArrayList<>(ps);
    }

    void writeKeyRecords() throws IOException {
        line("# K\tTYPE\tVALUE\tMAX_PARALLELISM\tJAVA_HASHCODE\tKEY_GROUP");
        for (Key k : keys.values()) {
            int hash = k.obj.hashCode();
            for (int maxP : MAX_PARALLELISMS) {
                int kg = KeyGroupRangeAssignment.assignToKeyGroup(k.obj, maxP);
                line("K", k.type, k.value, s(maxP), s(hash), s(kg));
            }
        }
    }

    void writeRangeRecords() throws IOException {
        line("# R\tMAX_PARALLELISM\tPARALLELISM\tOPERATOR_INDEX\tSTART\tEND");
        for (int maxP : MAX_PARALLELISMS) {
            for (int p : parallelismsFor(maxP)) {
                TreeSet<Integer> indices = new TreeSet<>();
                if (p <= 256) {
                    for (int i = 0; i < p; i++) {
                        indices.add(i);
                    }
                } else {
                    for (int i : new int[] {0, 1, p / 2, p - 2, p - 1}) {
                        indices.add(i);
                    }
                }
                for (int i : indices) {
                    KeyGroupRange r =
                            KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex(maxP, p, i);
                    line("R", s(maxP), s(p), s(i), s(r.getStartKeyGroup()), s(r.getEndKeyGroup()));
                }
            }
        }
    }

    void writeOperatorIndexRecords() throws IOException {
        line("# O\tMAX_PARALLELISM\tPARALLELISM\tKEY_GROUP\tOPERATOR_INDEX");
        Random r = new Random(99L);
        for (int maxP : MAX_PARALLELISMS) {
            for (int p : parallelismsFor(maxP)) {
                TreeSet<Integer> kgs = new TreeSet<>();
                for (int kg : new int[] {0, 1, maxP / 2, maxP - 2, maxP - 1}) {
                    kgs.add(kg);
                }
                for (int i = 0; i < 10; i++) {
                    kgs.add(r.nextInt(maxP));
                }
                for (int kg : kgs) {
                    if (kg < 0 || kg >= maxP) {
                        continue;
                    }
                    int op = KeyGroupRangeAssignment.computeOperatorIndexForKeyGroup(maxP, p, kg);
                    line("O", s(maxP), s(p), s(kg), s(op));
                }
            }
        }
    }

    interface Call {
        String run();
    }

    void error(String function, String args, Call call) throws IOException {
        String result;
        try {
            result = "NONE:" + call.run();
        } catch (RuntimeException e) {
            result = e.getClass().getSimpleName();
        }
        line("E", function, args, result);
    }

    static String range(KeyGroupRange r) {
        return r.getStartKeyGroup() + ".." + r.getEndKeyGroup();
    }

    void errorAssign(Object key, int maxP) throws IOException {
        String keyArg = key == null ? "NULL" : keyOf(key).type + ":" + keyOf(key).value;
        error("assignToKeyGroup", keyArg + "," + maxP,
                () -> s(KeyGroupRangeAssignment.assignToKeyGroup(key, maxP)));
    }

    void errorRange(int maxP, int p, int i) throws IOException {
        error("computeKeyGroupRangeForOperatorIndex", maxP + "," + p + "," + i,
                () -> range(KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex(maxP, p, i)));
    }

    void errorOp(int maxP, int p, int kg) throws IOException {
        error("computeOperatorIndexForKeyGroup", maxP + "," + p + "," + kg,
                () -> s(KeyGroupRangeAssignment.computeOperatorIndexForKeyGroup(maxP, p, kg)));
    }

    void writeErrorRecords() throws IOException {
        line("# E\tFUNCTION\tARGS\tRESULT (exception simple class name, or NONE:<value>)");
        // assignToKeyGroup(key, maxParallelism): ARGS = TYPE:VALUE,maxParallelism
        errorAssign(42, 0);
        errorAssign(42, -1);
        errorAssign(42, 32769);
        errorAssign(42, 40000);
        errorAssign(42, -128);
        errorAssign(42, Integer.MIN_VALUE);
        errorAssign("hello", 0);
        errorAssign("hello", -1);
        errorAssign("hello", 32769);
        errorAssign(null, 128);
        // computeKeyGroupRangeForOperatorIndex(maxParallelism, parallelism, operatorIndex)
        errorRange(0, 1, 0);
        errorRange(-1, 1, 0);
        errorRange(32769, 1, 0);
        errorRange(32769, 32769, 0);
        errorRange(128, 0, 0);
        errorRange(128, -1, 0);
        errorRange(128, 129, 0);
        errorRange(1, 2, 0);
        errorRange(128, 32769, 0);
        errorRange(128, 4, 4);
        errorRange(128, 4, 5);
        errorRange(128, 4, -1);
        errorRange(128, 1, 1);
        errorRange(128, 128, 128);
        errorRange(32768, 32768, 65536);
        errorRange(32768, 1, 65535);
        // computeOperatorIndexForKeyGroup(maxParallelism, parallelism, keyGroupId)
        errorOp(0, 1, 0);
        errorOp(-1, 1, 0);
        errorOp(32769, 2, 32768);
        errorOp(128, 0, 5);
        errorOp(128, -4, 100);
        errorOp(128, 129, 5);
        errorOp(128, 4, 128);
        errorOp(128, 4, 1000);
        errorOp(128, 4, -1);
        errorOp(128, 4, -200);
        errorOp(32768, 32768, 70000);
    }

    static String flinkVersion() {
        // Implementation-Version from flink-dist's manifest; fall back to Flink's
        // own version lookup (which also initialises logging, hence second).
        String v = KeyGroupRangeAssignment.class.getPackage().getImplementationVersion();
        if (v == null || v.isEmpty()) {
            try {
                v = org.apache.flink.runtime.util.EnvironmentInformation.getVersion();
            } catch (Throwable t) {
                v = null;
            }
        }
        return v == null ? "unknown" : v;
    }

    void writeAll() throws IOException {
        buildKeys();
        line("# flink_version: " + flinkVersion());
        line("# generator: tests/data/keygroups/KeyGroupTable.java calling "
                + "org.apache.flink.runtime.state.KeyGroupRangeAssignment from flink-dist");
        line("# format: tab-separated; see tests/data/keygroups/README.md");
        line("# distinct_keys: " + keys.size());
        writeKeyRecords();
        writeRangeRecords();
        writeOperatorIndexRecords();
        writeErrorRecords();
    }

    public static void main(String[] args) throws IOException {
        Writer w = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8));
        new KeyGroupTable(w).writeAll();
        w.flush();
    }
}
