package io.mck.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.PipelineOptions;
import org.apache.flink.configuration.TaskManagerOptions;
import org.apache.flink.connector.kafka.dynamic.metadata.ClusterMetadata;
import org.apache.flink.connector.kafka.dynamic.metadata.KafkaMetadataService;
import org.apache.flink.connector.kafka.dynamic.metadata.KafkaStream;
import org.apache.flink.connector.kafka.dynamic.source.DynamicKafkaSource;
import org.apache.flink.connector.kafka.dynamic.source.DynamicKafkaSourceBuilder;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Flink's DynamicKafkaSource as a peer of multicluster-kafka, in a local Flink job
 * (MiniCluster, in this JVM).
 *
 * <pre>
 * throughput: --mode throughput --cluster ID=BOOTSTRAP... --topic T --expected N
 *             [--parallelism P] [--warmup-rounds W] [--rounds R]
 * handover:   --mode handover --cluster ID=BOOTSTRAP --cluster ID=BOOTSTRAP --topic T
 *             [--rounds R] [--discovery-interval-ms I]
 * </pre>
 *
 * <p>Every result is one line on stdout, {@code MCK-FLINK key=value ...}; everything else
 * goes to stderr. Failures print {@code MCK-FLINK-ERROR <reason>} and exit with status 1.
 */
public final class FlinkDynamicBench {
    private static final String STREAM = "bench";
    private static final String MARKER_PREFIX = "mck-";
    /** The marker produced to the first cluster to see that the job is reading. */
    private static final int READY_MARKER = 1_000_000;

    private FlinkDynamicBench() {}

    public static void main(String[] argv) {
        try {
            Args args = Args.parse(argv);
            switch (args.mode) {
                case "throughput" -> throughput(args);
                case "handover" -> handover(args);
                default -> throw new IllegalArgumentException("unknown --mode " + args.mode);
            }
            System.out.flush();
            // Kafka and Flink leave non-daemon threads behind.
            System.exit(0);
        } catch (Throwable e) {
            Throwable root = e;
            while (root.getCause() != null && root.getCause() != root) {
                root = root.getCause();
            }
            System.err.println("flink-dynamic bench failed:");
            e.printStackTrace();
            String reason = (e == root ? "" : e.getClass().getSimpleName() + ": ")
                    + root.getClass().getSimpleName() + ": " + root.getMessage();
            System.out.println("MCK-FLINK-ERROR " + reason.replace('\n', ' '));
            System.out.flush();
            System.exit(1);
        }
    }

    // ---------------------------------------------------------------- throughput

    private static void throughput(Args args) throws Exception {
        if (args.expected <= 0) {
            throw new IllegalArgumentException("--expected must be the number of records to read");
        }
        Path metadata = Files.createTempFile("mck-flink-metadata-", ".txt");
        try {
            FileMetadataService.write(metadata, args.clusters, args.topic);
            int total = args.warmupRounds + args.rounds;
            for (int round = 0; round < total; round++) {
                boolean warmup = round < args.warmupRounds;
                Counters.reset(args.expected, Integer.MIN_VALUE);
                StreamExecutionEnvironment env = localEnv(args.parallelism);
                DynamicKafkaSource<Integer> source = baseSource(metadata, new SizeDeserializer())
                        .setBounded(OffsetsInitializer.latest())
                        .build();
                env.fromSource(source, WatermarkStrategy.noWatermarks(), "dynamic-kafka")
                        .sinkTo(new CountingSink(false))
                        .name("counting-sink");
                long submit = System.nanoTime();
                JobClient job = env.executeAsync("mck-flink-dynamic-throughput");
                job.getJobExecutionResult().get(args.timeoutSeconds, TimeUnit.SECONDS);
                long done = System.nanoTime();
                long records = Counters.RECORDS.get();
                if (records != args.expected) {
                    throw new IllegalStateException("read " + records + " records, expected "
                            + args.expected + " (topic " + args.topic + ")");
                }
                long open = Counters.FIRST_OPEN.get();
                long first = Counters.FIRST_RECORD.get();
                long last = Counters.LAST_RECORD.get();
                System.out.printf(Locale.ROOT,
                        "MCK-FLINK mode=throughput round=%d warmup=%b parallelism=%d records=%d bytes=%d"
                                + " open_to_last_ms=%.3f first_to_last_ms=%.3f submit_to_open_ms=%.3f"
                                + " submit_to_last_ms=%.3f submit_to_done_ms=%.3f%n",
                        round, warmup, args.parallelism, records, Counters.BYTES.get(),
                        ms(last - open), ms(last - first), ms(open - submit), ms(last - submit),
                        ms(done - submit));
                System.out.flush();
            }
        } finally {
            Files.deleteIfExists(metadata);
        }
    }

    // ---------------------------------------------------------------- handover

    private static void handover(Args args) throws Exception {
        if (args.clusters.size() != 2) {
            throw new IllegalArgumentException("handover needs exactly two --cluster (A, then B)");
        }
        List<Map.Entry<String, String>> clusters = new ArrayList<>(args.clusters.entrySet());
        Map<String, String> onlyA = Map.of(clusters.get(0).getKey(), clusters.get(0).getValue());
        Map<String, String> both = args.clusters;
        String bootstrapA = clusters.get(0).getValue();
        String bootstrapB = clusters.get(1).getValue();

        Path metadata = Files.createTempFile("mck-flink-metadata-", ".txt");
        FileMetadataService.write(metadata, onlyA, args.topic);
        Counters.reset(Long.MAX_VALUE, READY_MARKER);
        StreamExecutionEnvironment env = localEnv(args.parallelism);
        DynamicKafkaSource<Integer> source = baseSource(metadata, new MarkerDeserializer())
                .setProperty("stream-metadata-discovery-interval-ms",
                        Long.toString(args.discoveryIntervalMs))
                .build();
        env.fromSource(source, WatermarkStrategy.noWatermarks(), "dynamic-kafka")
                .sinkTo(new CountingSink(true))
                .name("counting-sink");
        JobClient job = env.executeAsync("mck-flink-dynamic-handover");
        try (KafkaProducer<byte[], byte[]> producerA = producer(bootstrapA);
                KafkaProducer<byte[], byte[]> producerB = producer(bootstrapB)) {
            // The job reads cluster A before the clock ever starts.
            produce(producerA, args.topic, READY_MARKER);
            awaitMarker(args.timeoutSeconds, "the job's first record from cluster A");
            for (int round = 0; round < args.rounds; round++) {
                Counters.awaitMarker(round);
                produce(producerB, args.topic, round);
                long t0 = System.nanoTime();
                FileMetadataService.write(metadata, both, args.topic);
                long seen = awaitMarker(args.timeoutSeconds,
                        "round " + round + ": a record from the added cluster");
                System.out.printf(Locale.ROOT, "MCK-FLINK mode=handover round=%d discovery_interval_ms=%d latency_ms=%.3f%n",
                        round, args.discoveryIntervalMs, ms(seen - t0));
                System.out.flush();
                // Remove B again and let the job settle before the next round.
                FileMetadataService.write(metadata, onlyA, args.topic);
                Thread.sleep(Math.max(1500, 3 * args.discoveryIntervalMs));
            }
        } finally {
            job.cancel().get(60, TimeUnit.SECONDS);
            // Not deleted now: the enumerator may still poll it while the job winds down.
            metadata.toFile().deleteOnExit();
        }
    }

    private static long awaitMarker(long timeoutSeconds, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutSeconds);
        while (System.nanoTime() < deadline) {
            long seen = Counters.MARKER_SEEN.get();
            if (seen != 0) {
                return seen;
            }
            Thread.sleep(0, 200_000);
        }
        throw new IllegalStateException("no " + what + " within " + timeoutSeconds + " s");
    }

    private static KafkaProducer<byte[], byte[]> producer(String bootstrap) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        return new KafkaProducer<>(p);
    }

    private static void produce(KafkaProducer<byte[], byte[]> producer, String topic, int marker)
            throws Exception {
        byte[] value = (MARKER_PREFIX + marker).getBytes(StandardCharsets.UTF_8);
        producer.send(new ProducerRecord<>(topic, value)).get(30, TimeUnit.SECONDS);
    }

    // ---------------------------------------------------------------- job pieces

    private static StreamExecutionEnvironment localEnv(int parallelism) {
        Configuration conf = new Configuration();
        conf.set(TaskManagerOptions.NUM_TASK_SLOTS, parallelism);
        // Records go from the source to the chained sink without a defensive copy, as a
        // throughput-minded user would configure it.
        conf.set(PipelineOptions.OBJECT_REUSE, true);
        return StreamExecutionEnvironment.createLocalEnvironment(parallelism, conf);
    }

    private static DynamicKafkaSourceBuilder<Integer> baseSource(
            Path metadata, KafkaRecordDeserializationSchema<Integer> deserializer) {
        return DynamicKafkaSource.<Integer>builder()
                .setStreamIds(Set.of(STREAM))
                .setKafkaMetadataService(new FileMetadataService(metadata.toString()))
                .setDeserializer(deserializer)
                .setStartingOffsets(OffsetsInitializer.earliest())
                .setClientIdPrefix("mck-bench-flink");
    }

    private static double ms(long nanos) {
        return nanos / 1e6;
    }

    /** Shared by the sink writers and the main thread: the MiniCluster runs in this JVM. */
    static final class Counters {
        static final AtomicLong RECORDS = new AtomicLong();
        static final AtomicLong BYTES = new AtomicLong();
        static final AtomicLong FIRST_OPEN = new AtomicLong();
        static final AtomicLong FIRST_RECORD = new AtomicLong();
        static final AtomicLong LAST_RECORD = new AtomicLong();
        static final AtomicLong MARKER_SEEN = new AtomicLong();
        static volatile long expected;
        static volatile int awaitedMarker;

        static void reset(long expectedRecords, int marker) {
            RECORDS.set(0);
            BYTES.set(0);
            FIRST_OPEN.set(0);
            FIRST_RECORD.set(0);
            LAST_RECORD.set(0);
            MARKER_SEEN.set(0);
            expected = expectedRecords;
            awaitedMarker = marker;
        }

        static void awaitMarker(int marker) {
            MARKER_SEEN.set(0);
            awaitedMarker = marker;
        }

        /** Keeps the earliest non-zero time. */
        static void first(AtomicLong slot, long now) {
            slot.accumulateAndGet(now, (old, n) -> old == 0 ? n : Math.min(old, n));
        }
    }

    /** Emits key + value size: the per-record work of the benchmark's application. */
    static final class SizeDeserializer implements KafkaRecordDeserializationSchema<Integer> {
        private static final long serialVersionUID = 1L;

        @Override
        public void deserialize(ConsumerRecord<byte[], byte[]> record, Collector<Integer> out) {
            byte[] key = record.key();
            byte[] value = record.value();
            out.collect((key == null ? 0 : key.length) + (value == null ? 0 : value.length));
        }

        @Override
        public TypeInformation<Integer> getProducedType() {
            return Types.INT;
        }
    }

    /** Emits the number in a {@code mck-<n>} marker value, {@code Integer.MIN_VALUE} otherwise. */
    static final class MarkerDeserializer implements KafkaRecordDeserializationSchema<Integer> {
        private static final long serialVersionUID = 1L;

        @Override
        public void deserialize(ConsumerRecord<byte[], byte[]> record, Collector<Integer> out) {
            byte[] value = record.value();
            int marker = Integer.MIN_VALUE;
            if (value != null) {
                String s = new String(value, StandardCharsets.UTF_8);
                if (s.startsWith(MARKER_PREFIX)) {
                    try {
                        marker = Integer.parseInt(s.substring(MARKER_PREFIX.length()));
                    } catch (NumberFormatException ignored) {
                        // Not a marker.
                    }
                }
            }
            out.collect(marker);
        }

        @Override
        public TypeInformation<Integer> getProducedType() {
            return Types.INT;
        }
    }

    /**
     * Discards records, counting them per writer; a writer publishes its counts at end of
     * input, so the hot path touches no shared state. With {@code watchMarkers} (handover)
     * it also records when the awaited marker arrives.
     */
    static final class CountingSink implements Sink<Integer> {
        private static final long serialVersionUID = 1L;
        private final boolean watchMarkers;

        CountingSink(boolean watchMarkers) {
            this.watchMarkers = watchMarkers;
        }

        @Override
        public SinkWriter<Integer> createWriter(WriterInitContext context) {
            Counters.first(Counters.FIRST_OPEN, System.nanoTime());
            return new SinkWriter<>() {
                private long records;
                private long bytes;
                private boolean published;

                @Override
                public void write(Integer element, Context ctx) {
                    if (records == 0) {
                        Counters.first(Counters.FIRST_RECORD, System.nanoTime());
                    }
                    records++;
                    int v = element;
                    bytes += v;
                    if (watchMarkers && v == Counters.awaitedMarker) {
                        Counters.MARKER_SEEN.compareAndSet(0, System.nanoTime());
                    }
                }

                @Override
                public void flush(boolean endOfInput) {
                    if (endOfInput && !published) {
                        published = true;
                        long total = Counters.RECORDS.addAndGet(records);
                        Counters.BYTES.addAndGet(bytes);
                        if (total >= Counters.expected) {
                            Counters.LAST_RECORD.compareAndSet(0, System.nanoTime());
                        }
                    }
                }

                @Override
                public void close() {}
            };
        }
    }

    /**
     * A metadata service over a small text file, read on every call, one cluster per line:
     * {@code <stream> <cluster-id> <bootstrap-servers> <topic>[,<topic>...]}. Writes are
     * atomic (temporary file + rename), so a reader never sees half a file.
     */
    static final class FileMetadataService implements KafkaMetadataService {
        private static final long serialVersionUID = 1L;
        private final String path;

        FileMetadataService(String path) {
            this.path = path;
        }

        static void write(Path path, Map<String, String> clusters, String topic) throws IOException {
            StringBuilder text = new StringBuilder();
            clusters.forEach((id, bootstrap) -> text.append(STREAM).append(' ').append(id).append(' ')
                    .append(bootstrap).append(' ').append(topic).append('\n'));
            Path tmp = path.resolveSibling(path.getFileName() + ".tmp");
            Files.writeString(tmp, text);
            Files.move(tmp, path, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        }

        private Map<String, KafkaStream> read() {
            List<String> lines;
            try {
                lines = Files.readAllLines(Path.of(path));
            } catch (IOException e) {
                throw new IllegalStateException("cannot read metadata file " + path + ": " + e, e);
            }
            Map<String, Map<String, ClusterMetadata>> streams = new LinkedHashMap<>();
            for (int i = 0; i < lines.size(); i++) {
                String line = lines.get(i).trim();
                if (line.isEmpty()) {
                    continue;
                }
                String[] f = line.split("\\s+");
                if (f.length != 4) {
                    throw new IllegalStateException(path + ":" + (i + 1)
                            + ": expected '<stream> <cluster> <bootstrap> <topics>', got '" + line + "'");
                }
                Properties props = new Properties();
                props.setProperty("bootstrap.servers", f[2]);
                streams.computeIfAbsent(f[0], k -> new LinkedHashMap<>())
                        .put(f[1], new ClusterMetadata(Set.of(f[3].split(",")), props));
            }
            Map<String, KafkaStream> out = new HashMap<>();
            streams.forEach((id, clusters) -> out.put(id, new KafkaStream(id, clusters)));
            return out;
        }

        @Override
        public Set<KafkaStream> getAllStreams() {
            return Set.copyOf(read().values());
        }

        @Override
        public Map<String, KafkaStream> describeStreams(Collection<String> streamIds) {
            Map<String, KafkaStream> all = read();
            Map<String, KafkaStream> out = new HashMap<>();
            for (String id : streamIds) {
                KafkaStream s = all.get(id);
                if (s != null) {
                    out.put(id, s);
                }
            }
            return out;
        }

        @Override
        public boolean isClusterActive(String clusterId) {
            return read().values().stream()
                    .anyMatch(s -> s.getClusterMetadataMap().containsKey(clusterId));
        }

        @Override
        public void close() {}
    }

    /** Command-line arguments. */
    static final class Args {
        String mode;
        final Map<String, String> clusters = new LinkedHashMap<>();
        String topic;
        long expected;
        int parallelism = 1;
        int warmupRounds = 1;
        int rounds = 1;
        long discoveryIntervalMs = 1;
        long timeoutSeconds = 300;

        static Args parse(String[] argv) {
            Args a = new Args();
            for (int i = 0; i < argv.length; i++) {
                String flag = argv[i];
                if (i + 1 >= argv.length) {
                    throw new IllegalArgumentException(flag + " needs a value");
                }
                String v = argv[++i];
                switch (flag) {
                    case "--mode" -> a.mode = v;
                    case "--cluster" -> {
                        int eq = v.indexOf('=');
                        if (eq <= 0) {
                            throw new IllegalArgumentException("--cluster wants ID=BOOTSTRAP, got " + v);
                        }
                        a.clusters.put(v.substring(0, eq), v.substring(eq + 1));
                    }
                    case "--topic" -> a.topic = v;
                    case "--expected" -> a.expected = Long.parseLong(v);
                    case "--parallelism" -> a.parallelism = Integer.parseInt(v);
                    case "--warmup-rounds" -> a.warmupRounds = Integer.parseInt(v);
                    case "--rounds" -> a.rounds = Integer.parseInt(v);
                    case "--discovery-interval-ms" -> a.discoveryIntervalMs = Long.parseLong(v);
                    case "--timeout-s" -> a.timeoutSeconds = Long.parseLong(v);
                    default -> throw new IllegalArgumentException("unknown flag " + flag);
                }
            }
            if (a.mode == null || a.topic == null || a.clusters.isEmpty()) {
                throw new IllegalArgumentException("--mode, --topic and at least one --cluster are required");
            }
            if (a.parallelism < 1 || a.rounds < 1 || a.warmupRounds < 0 || a.discoveryIntervalMs < 1) {
                throw new IllegalArgumentException(
                        "--parallelism, --rounds, --discovery-interval-ms must be >= 1, --warmup-rounds >= 0");
            }
            return a;
        }
    }
}
