//! The client's integration tests, one module per part, linked into one binary: record
//! batches and Fetch responses decoded from bytes built here or by kafka-protocol, and
//! connections, calls, sessions, TLS and SASL against real brokers the test kit starts
//! (`mck_testkit::shared_cluster`, each test on topics of its own).
//!
//! Run one module with a filter: `cargo test -p multicluster-kafka-client --test it -- tls::`.

mod batch;
mod codecs;
mod conn;
mod fetch_response;
mod partition;
mod sasl;
mod session;
mod tls;
