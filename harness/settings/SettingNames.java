// Dumps the setting names the software on the classpath knows, for harness.settings.catalogue.
// Run as a single-file program (`java -cp JARS SettingNames.java MODE OUT`); nothing is compiled into git.
//
// MODE spark: every Spark config holder object in the spark-* jars is initialised (a class whose bytes mention
//   ConfigBuilder: SQLConf, StaticSQLConf, internal.config.package$, the k8s/YARN/streaming/... objects), then
//   ConfigEntry's registry is read with each entry's alternative names; SparkConf's deprecated names and
//   alternatives and SQLConf's deprecated names are added, and the key prefixes the holders define (String
//   constants such as "spark.kubernetes.driver.label."). Also the Kafka consumer names of the kafka-clients jar
//   on the classpath (the one Spark's Kafka source uses).
// MODE kafka: the broker's names (KafkaConfig), topic names (LogConfig), the Java producer's and consumer's.
// Both modes also dump each setting's value type (kind `type` for Spark, `<kind>-type` for Kafka's ConfigDefs),
//   which harness.settings.values checks a scenario's values against.
//
// Output: one `kind<TAB>name` a line.
import java.io.*;
import java.lang.reflect.*;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.util.*;
import java.util.regex.Pattern;
import java.util.zip.*;

public class SettingNames {
    static final Pattern PREFIX = Pattern.compile("spark\\.[A-Za-z0-9._-]*\\.");
    static final Pattern LITERAL = Pattern.compile("spark\\.[A-Za-z0-9._-]+");
    static final TreeSet<String> out = new TreeSet<>();

    static void add(String kind, Object name) {
        if (name != null) out.add(kind + "\t" + name);
    }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("spark")) spark();
        else kafka();
        try (Writer w = Files.newBufferedWriter(Paths.get(args[1]), StandardCharsets.UTF_8)) {
            for (String line : out) w.write(line + "\n");
        }
        System.exit(0);  // config holders may start non-daemon threads; the dump is written
    }

    static Object module(String cls) throws Exception {
        return Class.forName(cls).getField("MODULE$").get(null);
    }

    static void names(String kind, Iterable<?> it) {
        for (Object o : it) add(kind, o);
    }

    static void scalaKeys(String kind, Object scalaMap) throws Exception {
        Object keys = scalaMap.getClass().getMethod("keys").invoke(scalaMap);
        Object iter = keys.getClass().getMethod("iterator").invoke(keys);
        Method hasNext = iter.getClass().getMethod("hasNext"), next = iter.getClass().getMethod("next");
        hasNext.setAccessible(true);
        next.setAccessible(true);
        while ((Boolean) hasNext.invoke(iter)) add(kind, next.invoke(iter));
    }

    static void spark() throws Exception {
        List<String> holders = new ArrayList<>();
        for (String path : System.getProperty("java.class.path").split(File.pathSeparator)) {
            String file = Paths.get(path).getFileName().toString();
            if (!file.startsWith("spark-") || !file.endsWith(".jar")) continue;
            try (ZipFile zip = new ZipFile(path)) {
                for (ZipEntry e : Collections.list(zip.entries())) {
                    String n = e.getName();
                    if (!n.startsWith("org/apache/spark/") || !n.endsWith(".class")) continue;
                    if (!n.endsWith("$.class") || n.contains("$anon")) {
                        literals(zip.getInputStream(e).readAllBytes());
                        continue;
                    }
                    byte[] bytes = zip.getInputStream(e).readAllBytes();
                    literals(bytes);
                    if (new String(bytes, StandardCharsets.ISO_8859_1).contains("ConfigBuilder"))
                        holders.add(n.substring(0, n.length() - 6).replace('/', '.'));
                }
            }
        }
        ClassLoader loader = SettingNames.class.getClassLoader();
        for (String cls : holders) {
            try {
                Class<?> c = Class.forName(cls, true, loader);
                Field f = c.getField("MODULE$");
                Object holder = f.get(null);
                for (Method m : c.getMethods()) {
                    if (m.getParameterCount() != 0 || m.getReturnType() != String.class
                            || Modifier.isStatic(m.getModifiers())) continue;
                    try {
                        Object v = m.invoke(holder);
                        if (v instanceof String && PREFIX.matcher((String) v).matches()) add("prefix", v);
                    } catch (Throwable ignored) { }
                }
            } catch (Throwable ignored) {
                // not an object, or one that cannot start outside a Spark application: its entries are
                // registered by whichever holder it belongs to
            }
        }
        Object registry = module("org.apache.spark.internal.config.ConfigEntry$");
        Map<?, ?> known = (Map<?, ?>) registry.getClass().getMethod("knownConfigs").invoke(registry);
        for (Object entry : known.values()) {
            add("entry", entry.getClass().getMethod("key").invoke(entry));
            String type = sparkType(entry);
            Object alts = entry.getClass().getMethod("alternatives").invoke(entry);
            Object iter = alts.getClass().getMethod("iterator").invoke(alts);
            Method hasNext = iter.getClass().getMethod("hasNext"), next = iter.getClass().getMethod("next");
            hasNext.setAccessible(true);
            next.setAccessible(true);
            while ((Boolean) hasNext.invoke(iter)) {
                Object alt = next.invoke(iter);
                add("alternative", alt);
                if (type != null) add("type", alt + "\t" + type);  // an older name takes the same values
            }
        }
        try {
            for (Object entry : (Collection<?>) registry.getClass().getMethod("listAllProtoDefinedConfigs").invoke(registry))
                add("entry", entry.getClass().getMethod("key").invoke(entry));
        } catch (NoSuchMethodException ignored) { }
        Object sparkConf = module("org.apache.spark.SparkConf$");
        Field deprecated = sparkConf.getClass().getDeclaredField("deprecatedConfigs");
        deprecated.setAccessible(true);
        scalaKeys("deprecated", deprecated.get(sparkConf));
        Object withAlternatives = sparkConf.getClass()
                .getMethod("org$apache$spark$SparkConf$$configsWithAlternatives").invoke(sparkConf);
        scalaKeys("entry", withAlternatives);
        Object alternatesMap = withAlternatives;
        Object values = alternatesMap.getClass().getMethod("values").invoke(alternatesMap);
        Object vit = values.getClass().getMethod("iterator").invoke(values);
        Method vHas = vit.getClass().getMethod("hasNext"), vNext = vit.getClass().getMethod("next");
        vHas.setAccessible(true);
        vNext.setAccessible(true);
        while ((Boolean) vHas.invoke(vit)) {
            Object seq = vNext.invoke(vit);
            Object it = seq.getClass().getMethod("iterator").invoke(seq);
            Method h = it.getClass().getMethod("hasNext"), n = it.getClass().getMethod("next");
            h.setAccessible(true);
            n.setAccessible(true);
            while ((Boolean) h.invoke(it)) {
                Object alt = n.invoke(it);
                add("alternative", alt.getClass().getMethod("key").invoke(alt));
            }
        }
        Object sqlConf = module("org.apache.spark.sql.internal.SQLConf$");
        scalaKeys("deprecated", sqlConf.getClass().getMethod("deprecatedSQLConfigs").invoke(sqlConf));
        consumer();
    }

    /** One entry's value type, learnt from its own converter (which includes its checkValue/checkValues):
     *  `key TAB type TAB min TAB options TAB max TAB unit`. type: boolean, int, long, double, time, bytes, enum,
     *  string or other (a type nothing here checks). min: "" when it takes -1, "0" when 0 and not -1, ">0" when
     *  only positive values (1, or 0.001 for a fraction), "?" for a bound this probe cannot tell. options: an
     *  enum's values ("|"-joined, then "|i" when it takes them in any case). max: the largest whole number it
     *  takes (see max()). unit: a time's in nanoseconds, a size's in bytes (what a bare number means). */
    static String sparkType(Object entry) {
        try {
            Object convObj;
            try {
                convObj = entry.getClass().getMethod("rawValueConverter").invoke(entry);
            } catch (NoSuchMethodException e) {
                convObj = entry.getClass().getMethod("valueConverter").invoke(entry);
            }
            Method apply = convObj.getClass().getMethod("apply", Object.class);
            apply.setAccessible(true);
            final Object conv = convObj;
            java.util.function.Function<String, Object> convert = s -> {
                try {
                    Object v = apply.invoke(conv, s);
                    if (v instanceof scala.Option) v = ((scala.Option<?>) v).isDefined() ? ((scala.Option<?>) v).get() : null;
                    return v == null ? REFUSED : v;
                } catch (Throwable t) {
                    lastError = t instanceof InvocationTargetException ? t.getCause() : t;
                    return REFUSED;
                }
            };
            String key = (String) entry.getClass().getMethod("key").invoke(entry);
            String dflt = (String) entry.getClass().getMethod("defaultValueString").invoke(entry);
            Object sample = REFUSED;
            for (String s : new String[]{dflt, "true", "100", "1", "0", "1.5", "100s", "100m", "x"}) {
                sample = convert.apply(s);
                if (sample != REFUSED) break;
            }
            String type, min = "", options = "";
            if (sample instanceof Boolean) type = "boolean";
            else if (sample instanceof Integer) type = "int";
            else if (sample instanceof Long) {
                boolean time = false, bytes = false;
                for (String s : new String[]{"1s", "100s", "100000s", "1h", "1000ms"}) time |= convert.apply(s) != REFUSED;
                for (String s : new String[]{"1k", "100k", "1g", "100g", "1t"}) bytes |= convert.apply(s) != REFUSED;
                type = time && !bytes ? "time" : bytes && !time ? "bytes" : "long";
            } else if (sample instanceof Number) {
                type = "double";  // Double, or a BigDecimal (spark.task.cpus)
            } else if (sample != REFUSED && (convert.apply("x") != REFUSED || convert.apply("xyzzy-value") != REFUSED)) {
                type = sample instanceof String ? "string" : "other";
            } else {
                // refuses an arbitrary word: an enum when Spark's error lists the values, each of which it takes
                options = enumOptions(lastError);
                String[] each = options.isEmpty() ? new String[0] : options.split("\\|");
                boolean sound = each.length > 0 && new HashSet<>(Arrays.asList(each)).size() == each.length;
                for (String o : each) sound &= convert.apply(o) != REFUSED;
                if (sound) {
                    type = "enum";
                    String first = each[0];
                    if (convert.apply(first.toLowerCase(Locale.ROOT)) != REFUSED
                            && convert.apply(first.toUpperCase(Locale.ROOT)) != REFUSED) options += "|i";
                } else {
                    type = sample instanceof String ? "string?" : "other";
                    options = "";
                }
            }
            if (type.equals("int") || type.equals("long") || type.equals("double") || type.equals("time") || type.equals("bytes")) {
                min = convert.apply("-1") != REFUSED ? "" : convert.apply("0") != REFUSED ? "0"
                        : convert.apply(type.equals("double") ? "0.001" : "1") != REFUSED ? ">0" : "?";
            }
            String max = "", unit = "";
            if (type.equals("time") || type.equals("bytes")) unit = unit(convert, type);
            if (!min.isEmpty() || type.equals("int") || type.equals("long") || type.equals("double")
                    || type.equals("time") || type.equals("bytes")) max = max(convert, type);
            String fields = type + "\t" + min + "\t" + options + "\t" + max + "\t" + unit;
            add("type", key + "\t" + fields);
            return fields;
        } catch (Throwable ignored) {
            // an entry whose converter cannot be reached: its name is still known, its value is not checked
            return null;
        }
    }

    /** The largest whole number (in the entry's unit) the converter takes, by bisection: "" when it takes the
     *  largest its type holds, "?" when it takes none of 0, 1, 100. */
    static String max(java.util.function.Function<String, Object> convert, String type) {
        long hi = type.equals("int") ? Integer.MAX_VALUE : Long.MAX_VALUE;
        if (convert.apply(Long.toString(hi)) != REFUSED) return "";
        long lo = -1;
        for (String s : new String[]{"0", "1", "100"}) if (convert.apply(s) != REFUSED) lo = Long.parseLong(s);
        if (lo < 0) return "?";
        while (hi - lo > 1) {
            long mid = lo + (hi - lo) / 2;
            if (convert.apply(Long.toString(mid)) != REFUSED) lo = mid;
            else hi = mid;
        }
        return Long.toString(lo);
    }

    /** A time entry's unit in nanoseconds, a size entry's in bytes: what a number without a suffix means. */
    static String unit(java.util.function.Function<String, Object> convert, String type) {
        String[] numbers = type.equals("time") ? new String[]{"3600000", "3600", "60", "1"} : new String[]{"1", "1024"};
        for (String n : numbers) {
            Object plain = convert.apply(n);
            Object big = convert.apply(n + (type.equals("time") ? "s" : "g"));
            if (!(plain instanceof Long) || !(big instanceof Long) || (Long) big <= 0) continue;
            double per = (type.equals("time") ? 1e9 : 1073741824.0) * Long.parseLong(n) / (Long) big;
            return Long.toString(Math.round(per));
        }
        return "";
    }

    static final Object REFUSED = new Object();
    static Throwable lastError;

    /** An enum's values from the error Spark's checkValues raises (INVALID_CONF_VALUE.OUT_OF_RANGE_OF_OPTIONS,
     *  parameter confOptions); "" when the refusal was something else. */
    static String enumOptions(Throwable error) {
        if (error == null) return "";
        try {
            Map<?, ?> params = (Map<?, ?>) error.getClass().getMethod("getMessageParameters").invoke(error);
            Object opts = params.get("confOptions");
            if (opts == null) return "";
            StringBuilder b = new StringBuilder();
            for (String o : opts.toString().split(",")) {
                if (o.trim().isEmpty()) continue;
                if (b.length() > 0) b.append('|');
                b.append(o.trim());
            }
            return b.toString();
        } catch (Throwable t) {
            return "";
        }
    }

    /** Each config's ConfigDef type and, where its validator is one of ConfigDef's own, its bounds or allowed
     *  strings: `name TAB TYPE TAB min TAB max TAB strings` (strings "|"-joined, then "|i" when any case). */
    static void configDef(String kind, Object def) throws Exception {
        Map<?, ?> keys = (Map<?, ?>) def.getClass().getMethod("configKeys").invoke(def);
        for (Object k : keys.values()) {
            Class<?> c = k.getClass();
            String name = (String) c.getField("name").get(k);
            Object type = c.getField("type").get(k);
            Object validator = c.getField("validator").get(k);
            String min = "", max = "", strings = "";
            if (validator != null) {
                String v = validator.getClass().getSimpleName();
                try {
                    if (v.equals("Range")) {
                        min = String.valueOf(field(validator, "min"));
                        max = String.valueOf(field(validator, "max"));
                    } else if (v.equals("ValidString")) {
                        strings = String.join("|", (Collection<String>) field(validator, "validStrings"));
                    } else if (v.equals("CaseInsensitiveValidString")) {
                        strings = String.join("|", (Collection<String>) field(validator, "validStrings")) + "|i";
                    } else if (v.equals("ValidList")) {
                        Object vs = field(validator, "validString");
                        if (vs != null) strings = String.join("|", (Collection<String>) field(vs, "validStrings"));
                    }
                } catch (Throwable ignored) { }
            }
            add(kind + "-type", name + "\t" + type + "\t" + min + "\t" + max + "\t" + strings);
        }
    }

    static Object field(Object o, String name) throws Exception {
        Field f = o.getClass().getDeclaredField(name);
        f.setAccessible(true);
        return f.get(o);
    }

    /** The `spark.` string constants of one class file (its constant pool's UTF-8 entries): the names Spark
     *  reads by literal (spark.master, spark.app.name, spark.local.dir), and the key prefixes it tests for. */
    static void literals(byte[] bytes) throws IOException {
        DataInputStream in = new DataInputStream(new ByteArrayInputStream(bytes));
        if (in.readInt() != 0xCAFEBABE) return;
        in.skipBytes(4);
        int count = in.readUnsignedShort();
        for (int i = 1; i < count; i++) {
            int tag = in.readUnsignedByte();
            switch (tag) {
                case 1:
                    String s = in.readUTF();
                    if (LITERAL.matcher(s).matches()) add("literal", s);
                    break;
                case 3: case 4: case 9: case 10: case 11: case 12: case 17: case 18: in.skipBytes(4); break;
                case 5: case 6: in.skipBytes(8); i++; break;
                case 7: case 8: case 16: case 19: case 20: in.skipBytes(2); break;
                case 15: in.skipBytes(3); break;
                default: return;  // a constant this reader does not know: stop, rather than misread
            }
        }
    }

    static void consumer() throws Exception {
        Class<?> c = Class.forName("org.apache.kafka.clients.consumer.ConsumerConfig");
        names("consumer", (Set<?>) c.getMethod("configNames").invoke(null));
        configDef("consumer", c.getMethod("configDef").invoke(null));
    }

    static void kafka() throws Exception {
        consumer();
        Class<?> producer = Class.forName("org.apache.kafka.clients.producer.ProducerConfig");
        names("producer", (Set<?>) producer.getMethod("configNames").invoke(null));
        configDef("producer", producer.getMethod("configDef").invoke(null));
        Class<?> log = Class.forName("org.apache.kafka.storage.internals.log.LogConfig");
        names("topic", (List<?>) log.getMethod("configNames").invoke(null));
        configDef("topic", log.getMethod("configDefCopy").invoke(null));
        Class<?> server = Class.forName("kafka.server.KafkaConfig");
        configDef("broker", server.getMethod("configDef").invoke(null));
        Object seq = server.getMethod("configNames").invoke(null);
        Object it = seq.getClass().getMethod("iterator").invoke(seq);
        Method h = it.getClass().getMethod("hasNext"), n = it.getClass().getMethod("next");
        h.setAccessible(true);
        n.setAccessible(true);
        while ((Boolean) h.invoke(it)) add("broker", n.invoke(it));
    }
}
