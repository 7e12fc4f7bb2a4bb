//! The fault proxy against a small echo server: pass, blackhole and heal, delay,
//! throttle, reset, an upstream set late, and cleanup on drop.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use mck_testkit::proxy::{FaultProxy, Mode};

/// An echo server on a free loopback port, one thread per connection.
fn echo_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                loop {
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if conn.write_all(&buf[..n]).is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    addr
}

fn connect(proxy: &FaultProxy) -> TcpStream {
    let s = TcpStream::connect(proxy.addr()).unwrap();
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Sends `msg` and reads exactly as many bytes back.
fn round_trip(s: &mut TcpStream, msg: &[u8]) -> Vec<u8> {
    s.write_all(msg).unwrap();
    let mut back = vec![0u8; msg.len()];
    s.read_exact(&mut back).unwrap();
    back
}

#[test]
fn pass_forwards_both_ways_and_counts() {
    let proxy = FaultProxy::start(echo_server()).unwrap();
    assert_eq!(proxy.mode(), Mode::Pass);
    let mut s = connect(&proxy);
    assert_eq!(round_trip(&mut s, b"hello"), b"hello");
    let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let mut reader = s.try_clone().unwrap();
    let expect = big.clone();
    let read = std::thread::spawn(move || {
        let mut back = vec![0u8; expect.len()];
        reader.read_exact(&mut back).unwrap();
        back == expect
    });
    s.write_all(&big).unwrap();
    assert!(read.join().unwrap(), "200 kB came back unchanged");
    // The proxy counts a chunk right after writing it: give it a moment.
    let deadline = Instant::now() + Duration::from_secs(2);
    while proxy.stats().bytes_down < 200_005 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let st = proxy.stats();
    assert_eq!(st.accepted, 1);
    assert_eq!(st.open, 1);
    assert_eq!(st.bytes_up, 200_005);
    assert_eq!(st.bytes_down, 200_005);
}

#[test]
fn a_blackhole_holds_connections_and_heals() {
    let proxy = FaultProxy::start(echo_server()).unwrap();
    let mut before = connect(&proxy);
    assert_eq!(round_trip(&mut before, b"a"), b"a");
    proxy.blackhole();
    // A connection opened during the blackhole is accepted, then held too.
    let mut during = connect(&proxy);
    for s in [&mut before, &mut during] {
        s.write_all(b"held").unwrap();
        s.set_read_timeout(Some(Duration::from_millis(700)))
            .unwrap();
        let mut buf = [0u8; 4];
        let err = s
            .read(&mut buf)
            .expect_err("nothing comes back in a blackhole");
        assert!(
            matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
            "{err}"
        );
    }
    assert_eq!(
        proxy.stats().bytes_down,
        1,
        "only the byte before the blackhole"
    );
    proxy.pass();
    for s in [&mut before, &mut during] {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 4];
        s.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"held", "what was held flows after the heal");
        assert_eq!(round_trip(s, b"again"), b"again");
    }
    assert_eq!(proxy.stats().resets, 0);
}

#[test]
fn delay_applies_each_way_and_keeps_chunks_pipelined() {
    let proxy = FaultProxy::start(echo_server()).unwrap();
    let by = Duration::from_millis(300);
    proxy.delay(by);
    let mut s = connect(&proxy);
    let t = Instant::now();
    assert_eq!(round_trip(&mut s, b"ping"), b"ping");
    let rtt = t.elapsed();
    assert!(rtt >= 2 * by, "round trip {rtt:?} under twice {by:?}");
    assert!(rtt < 2 * by + Duration::from_secs(1), "round trip {rtt:?}");
    // Ten messages sent 20 ms apart all come back about one round trip later, not
    // ten round trips later.
    let t = Instant::now();
    for i in 0..10u8 {
        s.write_all(&[i]).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut back = [0u8; 10];
    s.read_exact(&mut back).unwrap();
    assert_eq!(back, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    let all = t.elapsed();
    assert!(all < 4 * by, "pipelined: 10 messages in {all:?}");
    proxy.pass();
    let t = Instant::now();
    round_trip(&mut s, b"fast");
    assert!(t.elapsed() < by, "no delay after pass: {:?}", t.elapsed());
}

#[test]
fn throttle_limits_the_rate() {
    let proxy = FaultProxy::start(echo_server()).unwrap();
    proxy.throttle(40_000);
    assert_eq!(proxy.mode(), Mode::Throttle(40_000));
    let mut s = connect(&proxy);
    let data = vec![7u8; 40_000];
    let mut reader = s.try_clone().unwrap();
    let t = Instant::now();
    let read = std::thread::spawn(move || {
        let mut back = vec![0u8; 40_000];
        reader.read_exact(&mut back).unwrap();
        back
    });
    s.write_all(&data).unwrap();
    assert_eq!(read.join().unwrap(), data);
    let took = t.elapsed();
    // 40 kB at 40 kB/s each way, pipelined: about a second.
    assert!(
        took >= Duration::from_millis(900),
        "throttled read in {took:?}"
    );
    assert!(took < Duration::from_secs(5), "throttled read in {took:?}");
}

fn assert_reset(s: &mut TcpStream) {
    let mut buf = [0u8; 8];
    // A reset shows as an error (not a clean end of stream) on the next read or write.
    let got = s
        .read(&mut buf)
        .and_then(|_| s.write_all(b"x").and(s.read(&mut buf)));
    match got {
        Err(e) => assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}"),
        Ok(n) => panic!("the connection was not reset; read {n} bytes"),
    }
}

#[test]
fn reset_all_resets_open_connections_and_serves_new_ones() {
    let proxy = FaultProxy::start(echo_server()).unwrap();
    let mut a = connect(&proxy);
    let mut b = connect(&proxy);
    round_trip(&mut a, b"a");
    round_trip(&mut b, b"b");
    proxy.reset_all();
    assert_reset(&mut a);
    assert_reset(&mut b);
    assert_eq!(proxy.mode(), Mode::Pass);
    let mut c = connect(&proxy);
    assert_eq!(round_trip(&mut c, b"new"), b"new");
    let st = proxy.stats();
    assert_eq!(st.resets, 2);
    assert_eq!(st.accepted, 3);
}

#[test]
fn reset_mode_resets_every_connection_until_pass() {
    let proxy = FaultProxy::start(echo_server()).unwrap();
    let mut open = connect(&proxy);
    round_trip(&mut open, b"x");
    proxy.reset();
    assert_reset(&mut open);
    for _ in 0..3 {
        // The handshake completes (the proxy accepts), then the reset comes.
        let mut s = connect(&proxy);
        assert_reset(&mut s);
    }
    proxy.pass();
    let mut s = connect(&proxy);
    assert_eq!(round_trip(&mut s, b"ok"), b"ok");
    assert_eq!(proxy.stats().resets, 4);
}

#[test]
fn connections_wait_for_an_upstream_set_late() {
    let proxy = FaultProxy::bind().unwrap();
    let mut s = connect(&proxy);
    s.write_all(b"early").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    proxy.set_upstream(echo_server());
    let mut back = [0u8; 5];
    s.read_exact(&mut back).unwrap();
    assert_eq!(&back, b"early");
}

#[test]
fn dropping_the_proxy_closes_its_connections_and_port() {
    let proxy = FaultProxy::start(echo_server()).unwrap();
    let addr = proxy.addr();
    let mut s = connect(&proxy);
    round_trip(&mut s, b"x");
    proxy.blackhole();
    let t = Instant::now();
    drop(proxy);
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "drop took {:?}",
        t.elapsed()
    );
    let mut buf = [0u8; 1];
    match s.read(&mut buf) {
        Ok(0) => {}
        Err(e) => assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}"),
        Ok(n) => panic!("read {n} bytes from a dropped proxy"),
    }
    assert!(
        TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err(),
        "the port still accepts"
    );
}
