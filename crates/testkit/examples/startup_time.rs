//! Measures how long a single-broker KRaft cluster takes to start (jars already
//! cached): `cargo run --release -p mck-testkit --example startup_time [runs]`.

use mck_testkit::{ClusterOptions, KafkaCluster, kafka_libs};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3);
    kafka_libs()?;
    let mut secs = Vec::new();
    for i in 0..runs {
        let c = KafkaCluster::start(ClusterOptions::new(format!("startup-{i}")))?;
        secs.push(c.startup_time().as_secs_f64());
        println!("run {i}: {:.2} s", secs[i]);
    }
    secs.sort_by(f64::total_cmp);
    println!(
        "single-broker start, {runs} runs: min {:.2} s, median {:.2} s, max {:.2} s",
        secs[0],
        secs[secs.len() / 2],
        secs[secs.len() - 1]
    );
    Ok(())
}
