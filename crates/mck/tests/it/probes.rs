//! The probes of `--metrics-addr` for a deployment, through the real binary: `/live`
//! answers while the process serves; `/ready` answers 503 while a cluster of the
//! metadata is not read (here a port nothing listens on) and 200 once the metadata
//! file no longer lists it; the metrics are still served.

use crate::support;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use mck_testkit::{TestCluster, shared_cluster};
use support::{PATIENCE, Run};

/// `GET path` on `addr`: the status code and the body (`None` while nothing answers).
fn get(addr: &str, path: &str) -> Option<(u16, String)> {
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string())?;
    Some((status, body))
}

/// Polls `GET path` until its status is `want`; fails with the last answer.
fn await_status(run: &mut Run, addr: &str, path: &str, want: u16) -> String {
    let until = Instant::now() + PATIENCE;
    let mut last = None;
    loop {
        if let Some(status) = run.child.try_wait().unwrap() {
            panic!("mck exited ({status}); stderr:\n{}", run.stderr());
        }
        last = get(addr, path).or(last);
        if let Some((status, body)) = &last
            && *status == want
        {
            return body.clone();
        }
        assert!(
            Instant::now() < until,
            "{path} never answered {want}; last {last:?}; stderr:\n{}",
            run.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn ready_waits_for_every_cluster_and_live_answers_all_along() {
    let live = shared_cluster("probes").expect("Kafka starts");
    live.create_topic("probed", 2).unwrap();
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("streams.yaml");
    let both = mck_testkit::flink_metadata_at(
        "s",
        &[
            ("live", &live.bootstrap_servers(), &["probed"]),
            ("dead", &format!("127.0.0.1:{dead}"), &["probed"]),
        ],
    );
    std::fs::write(&md, &both).unwrap();
    let addr = format!("127.0.0.1:{}", mck_testkit::free_ports(1).unwrap()[0]);
    let args: Vec<String> = [
        md.to_str().unwrap(),
        "--stream",
        "s",
        "--metrics-addr",
        &addr,
    ]
    .map(String::from)
    .into();
    let mut run = Run::start(&args, dir.path().join("stderr"));

    let body = await_status(&mut run, &addr, "/ready", 503);
    assert!(!body.trim().is_empty(), "a 503 says why");
    assert_eq!(await_status(&mut run, &addr, "/live", 200).trim(), "live");
    // Start-up goes on without the dead cluster; it stays not ready meanwhile.
    let body = await_status(&mut run, &addr, "/ready", 503);
    std::thread::sleep(Duration::from_secs(8));
    let (status, later) = get(&addr, "/ready").expect("the endpoint answers");
    assert_eq!(
        status, 503,
        "still waiting for `dead`: {later}; first {body}"
    );
    assert!(later.contains("1 cluster(s)"), "{later}");

    // The metadata drops the dead cluster: ready.
    std::fs::write(
        &md,
        mck_testkit::flink_metadata_at("s", &[("live", &live.bootstrap_servers(), &["probed"])]),
    )
    .unwrap();
    let body = await_status(&mut run, &addr, "/ready", 200);
    assert!(body.contains("ready: 1 cluster(s) read"), "{body}");
    // The exporter gets the gauges every second.
    let until = Instant::now() + PATIENCE;
    loop {
        let (status, metrics) = get(&addr, "/metrics").unwrap();
        assert_eq!(status, 200);
        if metrics.contains("mck_clusters_waiting 0") {
            break;
        }
        assert!(Instant::now() < until, "{metrics}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // Off its paths, the endpoint says which they are.
    let (status, body) = get(&addr, "/").unwrap();
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("/metrics, /ready and /live"), "{body}");
    run.signal(libc::SIGTERM);
    assert!(run.wait(), "mck ends with 0 on SIGTERM");
}
