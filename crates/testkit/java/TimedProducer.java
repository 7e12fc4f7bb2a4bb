// Sends records with the timestamps it is given, through Kafka's own Java producer.
// Run by the test kit as a single-file program (java TimedProducer.java) with the
// Kafka jars on the class path. Arguments: bootstrap servers, topic. Standard input:
// one record per line, `timestamp<TAB>partition<TAB>key<TAB>value` (partition -1: the
// producer's choice). Exits 0 once every record is acknowledged, 1 on the first error.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

public class TimedProducer {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("acks", "all");
        props.put("enable.idempotence", "true");
        props.put("linger.ms", "20");
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        AtomicReference<Exception> failed = new AtomicReference<>();
        long sent = 0;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props);
             BufferedReader in = new BufferedReader(
                 new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null && failed.get() == null) {
                String[] f = line.split("\t", 4);
                int partition = Integer.parseInt(f[1]);
                ProducerRecord<String, String> record = new ProducerRecord<>(
                    args[1], partition < 0 ? null : partition, Long.parseLong(f[0]), f[2], f[3]);
                producer.send(record, (meta, e) -> {
                    if (e != null) {
                        failed.compareAndSet(null, e);
                    }
                });
                sent++;
            }
            producer.flush();
        }
        if (failed.get() != null) {
            System.err.println("ERROR sending to " + args[1] + ": " + failed.get());
            System.exit(1);
        }
        System.out.println("sent " + sent);
    }
}
