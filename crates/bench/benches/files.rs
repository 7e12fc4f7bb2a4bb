//! Throughput of the history-file source (`FileSource`) against a hand-written peer:
//! one thread reading the same files line by line and parsing each line into a
//! `serde_json::Value` (what a user writes without the library). Both validate every
//! line as JSON and take its timestamp field.
//!
//! `cargo bench -p mck-bench --bench files`

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use multicluster_kafka::file_source::FileSource;

const FILES: usize = 4;
const LINES_PER_FILE: usize = 50_000;

/// Writes FILES files of LINES_PER_FILE lines (about 120 B each) with `suffix`.
fn write_files(dir: &Path, suffix: &str) -> u64 {
    let mut bytes = 0;
    for f in 0..FILES {
        let mut text = String::new();
        for i in 0..LINES_PER_FILE {
            text.push_str(&format!(
                "{{\"id\":\"order-{f}-{i}\",\"ts\":{},\"customer\":{},\"amount\":{}.{:02},\"currency\":\"EUR\"}}\n",
                1_700_000_000_000u64 + i as u64,
                i % 997,
                i % 500,
                i % 100
            ));
        }
        bytes += text.len() as u64;
        let path = dir.join(format!("part-{f}.jsonl{suffix}"));
        match suffix {
            ".gz" => {
                let mut e = flate2::write::GzEncoder::new(
                    std::fs::File::create(path).unwrap(),
                    flate2::Compression::default(),
                );
                e.write_all(text.as_bytes()).unwrap();
                e.finish().unwrap();
            }
            ".zst" => {
                std::fs::write(path, zstd::stream::encode_all(text.as_bytes(), 3).unwrap()).unwrap()
            }
            _ => std::fs::write(path, text).unwrap(),
        }
    }
    bytes
}

/// The peer: sequential, one `serde_json::Value` per line.
fn peer(dir: &Path) -> usize {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    let mut n = 0;
    for path in names {
        let file = std::fs::File::open(&path).unwrap();
        let name = path.to_string_lossy().into_owned();
        let raw: Box<dyn Read> = if name.ends_with(".gz") {
            Box::new(flate2::read::MultiGzDecoder::new(BufReader::new(file)))
        } else if name.ends_with(".zst") {
            Box::new(zstd::stream::read::Decoder::new(file).unwrap())
        } else {
            Box::new(file)
        };
        let mut reader = BufReader::with_capacity(1 << 16, raw);
        let mut line = Vec::new();
        loop {
            line.clear();
            if reader.read_until(b'\n', &mut line).unwrap() == 0 {
                break;
            }
            let v: serde_json::Value = serde_json::from_slice(&line).unwrap();
            std::hint::black_box(v["ts"].as_i64().unwrap());
            n += 1;
        }
    }
    n
}

fn ours(rt: &tokio::runtime::Runtime, dir: &Path, threads: usize) -> usize {
    rt.block_on(async {
        let mut src = FileSource::builder(dir)
            .timestamp_field("ts")
            .parallelism(threads)
            .open()
            .unwrap();
        let mut n = 0;
        while let Some(r) = src.next().await {
            std::hint::black_box(r.unwrap());
            n += 1;
        }
        n
    })
}

fn files(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    for suffix in ["", ".gz", ".zst"] {
        let dir = tempfile::tempdir().unwrap();
        let bytes = write_files(dir.path(), suffix);
        let kind = if suffix.is_empty() {
            "plain"
        } else {
            &suffix[1..]
        };
        let mut g = c.benchmark_group(format!("files_{kind}"));
        g.sample_size(10);
        g.throughput(Throughput::Elements((FILES * LINES_PER_FILE) as u64));
        println!(
            "{kind}: {FILES} files, {} lines, {bytes} bytes uncompressed",
            FILES * LINES_PER_FILE
        );
        g.bench_function("peer_serde_value_1_thread", |b| {
            b.iter(|| assert_eq!(peer(dir.path()), FILES * LINES_PER_FILE))
        });
        for threads in [1, 2] {
            g.bench_function(format!("file_source_{threads}_threads"), |b| {
                b.iter(|| assert_eq!(ours(&rt, dir.path(), threads), FILES * LINES_PER_FILE))
            });
        }
        g.finish();
    }
}

criterion_group!(benches, files);
criterion_main!(benches);
