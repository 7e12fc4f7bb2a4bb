//! Pieces of the end-to-end benchmark shared by the `mck-bench` command and the examples.
//!
//! - [`peers`]: the Java peers (Kafka's `ConsumerPerformance`, Flink's
//!   `DynamicKafkaSource`), run as child processes against the test kit's brokers.

pub mod peers;
