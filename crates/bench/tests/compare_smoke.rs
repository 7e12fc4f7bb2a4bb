//! CI smoke test of the end-to-end benchmark: `mck-bench compare --quick` runs every measure,
//! Java peers included, on tiny sizes and prints a table in which every row has a
//! number. It checks the harness, not the targets. Needs Java 17+ and Maven (the Flink
//! peer is built on first use; with a warm `~/.cache/multicluster-kafka` this takes
//! about two minutes). A failure of Java or Maven fails the test.

use std::process::Command;

#[test]
fn compare_quick_prints_a_number_in_every_row() {
    let out = Command::new(env!("CARGO_BIN_EXE_mck-bench"))
        .args(["compare", "--quick"])
        .output()
        .expect("mck-bench starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "mck-bench compare --quick failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| measure"))
        .collect();
    let number = |cell: &str| {
        cell.split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
            .is_some_and(f64::is_finite)
    };
    for wanted in [
        "throughput 100 B, 1 reader(s), vs plain rdkafka",
        "throughput 100 B, 2 reader(s), vs plain rdkafka",
        "throughput 1 KiB, 1 reader(s), vs plain rdkafka",
        "throughput 1 KiB, 2 reader(s), vs plain rdkafka",
        "vs ConsumerPerformance",
        "vs Flink DynamicKafkaSource parallelism 1",
        "vs Flink DynamicKafkaSource parallelism 2",
        "peak RSS",
        "handover",
        "isolation",
        "checkpoint of 10 splits",
        "checkpoint of 1000 splits",
        "checkpoint of 10000 splits",
    ] {
        assert!(
            rows.iter().any(|r| r.contains(wanted)),
            "no row `{wanted}` in:\n{stdout}"
        );
    }
    for row in &rows {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        // ["", measure, ours, peer, ratio, target, met?, ""]
        assert_eq!(cells.len(), 8, "six cells in `{row}`");
        assert!(number(cells[2]), "a number for ours in `{row}`");
        let has_peer = !cells[3].is_empty() && cells[3] != "-";
        if has_peer {
            assert!(number(cells[3]), "a number for the peer in `{row}`");
            assert!(number(cells[4]), "a ratio in `{row}`");
        }
    }
    assert!(!stdout.contains("skipped"), "the Java peers ran:\n{stdout}");
    for fact in ["machine:", "versions: Kafka", "settings:"] {
        assert!(stdout.contains(fact), "`{fact}` in:\n{stdout}");
    }
}
