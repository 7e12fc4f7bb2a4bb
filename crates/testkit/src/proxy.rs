//! A TCP proxy that injects network faults between a client and a server.
//!
//! [`FaultProxy`] listens on a free loopback port and forwards every connection to an
//! upstream address. Its [`Mode`] switches at any time and applies to open
//! connections at once:
//!
//! - [`Mode::Pass`]: bytes flow unchanged;
//! - [`Mode::Blackhole`]: connections are accepted and held, nothing is forwarded in
//!   either direction; what was held flows again once the mode changes, as TCP would
//!   retransmit it after a partition heals;
//! - [`Mode::Delay`]: every chunk is delivered that long after it arrived, in each
//!   direction (a round trip takes twice as long more); chunks stay pipelined, so
//!   throughput is not cut;
//! - [`Mode::Throttle`]: each direction of each connection forwards at most that
//!   many bytes a second;
//! - [`Mode::Reset`]: every open connection is closed with a TCP reset (`SO_LINGER`
//!   0) and so is every new one, right after it is accepted.
//!
//! [`FaultProxy::reset_all`] resets the open connections once and leaves the mode as
//! it is. [`ProxiedCluster`] puts a real Kafka cluster behind one proxy per broker.
//!
//! The proxy runs on its own thread and runtime, so it keeps working while a test
//! blocks its own; dropping it stops it and closes its connections.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::TestkitError;
use crate::real::{ClusterOptions, KafkaCluster};

/// What a [`FaultProxy`] does to its connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Forward everything unchanged.
    Pass,
    /// Hold every connection open and forward nothing, both ways.
    Blackhole,
    /// Deliver every chunk this long after it arrived, in each direction.
    Delay(Duration),
    /// Forward at most this many bytes a second per connection and direction.
    Throttle(u64),
    /// Reset every open connection and every new one.
    Reset,
}

/// Counters of a [`FaultProxy`] since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProxyStats {
    /// Connections accepted.
    pub accepted: u64,
    /// Connections open now.
    pub open: u64,
    /// Connections the proxy closed with a reset.
    pub resets: u64,
    /// Bytes forwarded from clients to the upstream.
    pub bytes_up: u64,
    /// Bytes forwarded from the upstream to clients.
    pub bytes_down: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct State {
    mode: Mode,
    /// Bumped by every reset order; connections open at that moment reset.
    reset_epoch: u64,
    upstream: Option<SocketAddr>,
    shutdown: bool,
}

#[derive(Default)]
struct Counters {
    accepted: AtomicU64,
    open: AtomicU64,
    resets: AtomicU64,
    bytes_up: AtomicU64,
    bytes_down: AtomicU64,
}

/// A fault-injecting TCP proxy on `127.0.0.1`. See the [module docs](self).
pub struct FaultProxy {
    addr: SocketAddr,
    state: watch::Sender<State>,
    counters: Arc<Counters>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = *self.state.borrow();
        f.debug_struct("FaultProxy")
            .field("addr", &self.addr)
            .field("upstream", &s.upstream)
            .field("mode", &s.mode)
            .finish()
    }
}

impl FaultProxy {
    /// Starts a proxy to `upstream` in [`Mode::Pass`].
    pub fn start(upstream: SocketAddr) -> io::Result<FaultProxy> {
        let proxy = Self::bind()?;
        proxy.set_upstream(upstream);
        Ok(proxy)
    }

    /// Starts a proxy that knows no upstream yet: it listens at once (so its port can
    /// be handed out) and holds the connections it accepts until
    /// [`set_upstream`](Self::set_upstream).
    pub fn bind() -> io::Result<FaultProxy> {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let (tx, rx) = watch::channel(State {
            mode: Mode::Pass,
            reset_epoch: 0,
            upstream: None,
            shutdown: false,
        });
        let counters = Arc::new(Counters::default());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let c = counters.clone();
        let thread = std::thread::Builder::new()
            .name(format!("fault-proxy-{}", addr.port()))
            .spawn(move || {
                runtime.block_on(async move {
                    match TcpListener::from_std(std_listener) {
                        Ok(listener) => accept_loop(listener, rx, c).await,
                        Err(e) => tracing::error!(error = %e, "fault proxy cannot listen"),
                    }
                });
                // Dropping the runtime drops every connection task and its sockets.
            })?;
        Ok(FaultProxy {
            addr,
            state: tx,
            counters,
            thread: Some(thread),
        })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Sets where new connections go (open ones keep theirs).
    pub fn set_upstream(&self, upstream: SocketAddr) {
        self.state.send_modify(|s| s.upstream = Some(upstream));
    }

    /// The mode in force.
    pub fn mode(&self) -> Mode {
        self.state.borrow().mode
    }

    /// Switches the mode; open connections follow at once. [`Mode::Reset`] also resets
    /// every open connection.
    pub fn set_mode(&self, mode: Mode) {
        tracing::info!(proxy = %self.addr, ?mode, "fault proxy mode");
        self.state.send_modify(|s| {
            s.mode = mode;
            if mode == Mode::Reset {
                s.reset_epoch += 1;
            }
        });
    }

    /// Forwards everything again.
    pub fn pass(&self) {
        self.set_mode(Mode::Pass);
    }

    /// Holds every connection and forwards nothing.
    pub fn blackhole(&self) {
        self.set_mode(Mode::Blackhole);
    }

    /// Delays every chunk by `by` in each direction.
    pub fn delay(&self, by: Duration) {
        self.set_mode(Mode::Delay(by));
    }

    /// Limits each direction of each connection to `bytes_per_sec`.
    pub fn throttle(&self, bytes_per_sec: u64) {
        self.set_mode(Mode::Throttle(bytes_per_sec.max(1)));
    }

    /// Resets every connection now and every new one until the mode changes.
    pub fn reset(&self) {
        self.set_mode(Mode::Reset);
    }

    /// Resets every open connection now; the mode stays, new connections are served.
    pub fn reset_all(&self) {
        self.state.send_modify(|s| s.reset_epoch += 1);
    }

    /// The counters so far.
    pub fn stats(&self) -> ProxyStats {
        let c = &self.counters;
        ProxyStats {
            accepted: c.accepted.load(Ordering::Relaxed),
            open: c.open.load(Ordering::Relaxed),
            resets: c.resets.load(Ordering::Relaxed),
            bytes_up: c.bytes_up.load(Ordering::Relaxed),
            bytes_down: c.bytes_down.load(Ordering::Relaxed),
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.state.send_modify(|s| s.shutdown = true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn accept_loop(listener: TcpListener, mut state: watch::Receiver<State>, c: Arc<Counters>) {
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = state.wait_for(|s| s.shutdown) => return,
        };
        let client = match accepted {
            Ok((client, _)) => client,
            Err(e) => {
                tracing::warn!(error = %e, "fault proxy accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        c.accepted.fetch_add(1, Ordering::Relaxed);
        let _ = client.set_nodelay(true);
        if state.borrow().mode == Mode::Reset {
            abort(client, &c);
            continue;
        }
        let state = state.clone();
        let c = c.clone();
        tokio::spawn(async move {
            c.open.fetch_add(1, Ordering::Relaxed);
            serve(client, state, &c).await;
            c.open.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

/// Closes a socket with a reset rather than a FIN.
fn abort(stream: TcpStream, c: &Counters) {
    let _ = stream.set_zero_linger();
    drop(stream);
    c.resets.fetch_add(1, Ordering::Relaxed);
}

async fn serve(mut client: TcpStream, mut state: watch::Receiver<State>, c: &Counters) {
    let epoch = state.borrow_and_update().reset_epoch;
    let reset = |s: &State| s.shutdown || s.reset_epoch != epoch;
    // Wait for an upstream (unless reset or shut down first).
    let upstream = match state.wait_for(|s| s.upstream.is_some() || reset(s)).await {
        Ok(s) if !reset(&s) => s.upstream.expect("waited for it"),
        _ => return abort(client, c),
    };
    let mut server = match TcpStream::connect(upstream).await {
        Ok(s) => s,
        Err(e) => {
            tracing::debug!(%upstream, error = %e, "fault proxy cannot reach the upstream");
            return abort(client, c);
        }
    };
    let _ = server.set_nodelay(true);
    let reset_now = {
        let (cr, cw) = client.split();
        let (sr, sw) = server.split();
        let up = pump(cr, sw, state.clone(), &c.bytes_up);
        let down = pump(sr, cw, state.clone(), &c.bytes_down);
        tokio::select! {
            _ = async { tokio::join!(up, down) } => false,
            _ = state.wait_for(reset) => true,
        }
    };
    if reset_now {
        let _ = server.set_zero_linger();
        abort(client, c);
    }
}

/// Forwards one direction until end of stream or an error, under the current mode.
async fn pump(
    mut from: tokio::net::tcp::ReadHalf<'_>,
    mut to: tokio::net::tcp::WriteHalf<'_>,
    state: watch::Receiver<State>,
    bytes: &AtomicU64,
) {
    // Bounded: a held connection stops reading once this many chunks wait.
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(32);
    let reading = async move {
        loop {
            let mut buf = vec![0u8; 16 * 1024];
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    buf.truncate(n);
                    if tx.send((Instant::now(), buf)).await.is_err() {
                        return;
                    }
                }
            }
        }
    };
    let writing = async move {
        let mut state = state;
        while let Some((arrived, chunk)) = rx.recv().await {
            let mode = match state.wait_for(|s| s.mode != Mode::Blackhole).await {
                Ok(s) => s.mode,
                Err(_) => return,
            };
            let sent = match mode {
                Mode::Delay(by) => {
                    tokio::time::sleep_until(arrived + by).await;
                    to.write_all(&chunk).await
                }
                Mode::Throttle(rate) => throttled(&mut to, &chunk, rate).await,
                _ => to.write_all(&chunk).await,
            };
            if sent.is_err() {
                return;
            }
            bytes.fetch_add(chunk.len() as u64, Ordering::Relaxed);
        }
        // The other side closed its sending half: pass the FIN on.
        let _ = to.shutdown().await;
    };
    tokio::join!(reading, writing);
}

/// Writes `chunk` at `rate` bytes a second, in slices of a tenth of a second.
async fn throttled(
    to: &mut tokio::net::tcp::WriteHalf<'_>,
    chunk: &[u8],
    rate: u64,
) -> io::Result<()> {
    let slice = (rate / 10).clamp(1, 16 * 1024) as usize;
    for part in chunk.chunks(slice) {
        let began = Instant::now();
        to.write_all(part).await?;
        let due = Duration::from_secs_f64(part.len() as f64 / rate as f64);
        tokio::time::sleep_until(began + due).await;
    }
    Ok(())
}

/// A real Kafka cluster whose clients, when they bootstrap at
/// [`bootstrap_servers`](Self::bootstrap_servers), reach every broker through its own
/// [`FaultProxy`]: each broker advertises its proxy's address
/// ([`ClusterOptions::advertise_via`]). The test kit's own calls on
/// [`cluster`](Self::cluster) (create topics, produce) use the direct listener and
/// are not affected by the proxies' faults.
pub struct ProxiedCluster {
    proxies: Vec<FaultProxy>,
    cluster: KafkaCluster,
}

impl std::fmt::Debug for ProxiedCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxiedCluster")
            .field("cluster", &self.cluster)
            .field("proxies", &self.proxies)
            .finish()
    }
}

impl ProxiedCluster {
    /// Binds one proxy per broker, then starts the cluster advertising them.
    pub fn start(options: ClusterOptions) -> Result<ProxiedCluster, TestkitError> {
        let fail = |e: io::Error| TestkitError::Kafka {
            cluster: options.logical_id.clone(),
            message: format!("cannot start a fault proxy: {e}"),
        };
        let proxies = (0..options.brokers.max(1))
            .map(|_| FaultProxy::bind().map_err(fail))
            .collect::<Result<Vec<_>, _>>()?;
        let ports: Vec<u16> = proxies.iter().map(FaultProxy::port).collect();
        let cluster = KafkaCluster::start(options.advertise_via(ports))?;
        for (proxy, target) in proxies.iter().zip(cluster.proxied_listeners()) {
            proxy.set_upstream(target);
        }
        Ok(ProxiedCluster { proxies, cluster })
    }

    /// `host:port,…` of the proxies: what a client under test bootstraps to.
    pub fn proxied_bootstrap_servers(&self) -> String {
        self.proxies
            .iter()
            .map(|p| p.addr().to_string())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The proxy of the first broker.
    pub fn proxy(&self) -> &FaultProxy {
        &self.proxies[0]
    }

    /// The proxies, in broker order.
    pub fn proxies(&self) -> &[FaultProxy] {
        &self.proxies
    }

    /// Switches every proxy to `mode`.
    pub fn set_mode(&self, mode: Mode) {
        for p in &self.proxies {
            p.set_mode(mode);
        }
    }

    /// The cluster itself; its [`crate::TestCluster::bootstrap_servers`] are direct.
    pub fn cluster(&self) -> &KafkaCluster {
        &self.cluster
    }
}
