//! Real Apache Kafka clusters (KRaft combined mode) as child JVM processes.

use std::collections::HashMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use base64::Engine;
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewPartitions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};

use crate::process::{kill_and_wait, spawn_tied};
use crate::secured::{Listener, Security};
use crate::util::{block_on, free_ports, produce_records, tail_lines};
use crate::{DEFAULT_READY_TIMEOUT, Produced, TestCluster, TestRecord, TestkitError, kafka_libs};

/// How to start a [`KafkaCluster`].
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// Logical cluster id (names directories, logs and errors).
    pub logical_id: String,
    /// Number of brokers (default 1). The first min(3, n) run as combined
    /// broker+controller when n ≥ 3, otherwise only the first one is a controller.
    pub brokers: usize,
    /// JVM options for each broker.
    pub jvm_options: Vec<String>,
    /// Extra `server.properties` entries, applied last.
    pub broker_config: Vec<(String, String)>,
    /// How long a broker may take to answer a metadata request.
    pub ready_timeout: Duration,
    /// Adds the secured listeners of [`Listener`] to every broker, with certificates
    /// and credentials generated at start (see [`KafkaCluster::security`]).
    pub secured: bool,
    /// One port per broker: each broker gets a `PROXIED` listener (plaintext) that it
    /// advertises at `127.0.0.1:<port>` instead of its own, so clients that bootstrap
    /// through a proxy on that port stay behind it. Empty: no such listener.
    pub advertise_via: Vec<u16>,
}

impl ClusterOptions {
    /// One broker with small-heap defaults.
    pub fn new(logical_id: impl Into<String>) -> Self {
        Self {
            logical_id: logical_id.into(),
            brokers: 1,
            jvm_options: [
                "-Xms256m",
                "-Xmx512m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-Xshare:auto",
                "-Djava.awt.headless=true",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            broker_config: Vec::new(),
            ready_timeout: DEFAULT_READY_TIMEOUT,
            secured: false,
            advertise_via: Vec::new(),
        }
    }

    /// Adds a `PROXIED` listener to every broker, advertised at `127.0.0.1:<port>`
    /// (one port per broker, in order) rather than at the broker's own port; see
    /// [`KafkaCluster::proxied_listeners`] for where a proxy must forward to. The
    /// `PLAINTEXT` listener the test kit itself uses stays direct.
    pub fn advertise_via(mut self, ports: impl IntoIterator<Item = u16>) -> Self {
        self.advertise_via = ports.into_iter().collect();
        self
    }

    /// Adds the secured listeners ([`Listener`]): mTLS, SASL_SSL with SCRAM-SHA-512,
    /// SASL_PLAINTEXT with PLAIN, SASL_SSL with OAUTHBEARER, and two SSL listeners
    /// with a bad broker certificate (expired; another host's). The `PLAINTEXT`
    /// listener stays for the test kit's own calls.
    pub fn secured(mut self) -> Self {
        self.secured = true;
        self
    }

    /// Turns on KRaft's standard authorizer. Resources without ACLs stay open to
    /// everyone, and the test kit's own `PLAINTEXT` principal (and the brokers') is a
    /// super user, so only the ACLs a test adds (see [`crate::tools::add_acl`]) restrict
    /// anything.
    pub fn authorizer(self) -> Self {
        self.broker_config(
            "authorizer.class.name",
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        )
        .broker_config("allow.everyone.if.no.acl.found", "true")
        .broker_config("super.users", "User:ANONYMOUS")
    }

    /// Sets the broker count.
    pub fn brokers(mut self, n: usize) -> Self {
        self.brokers = n.max(1);
        self
    }

    /// Adds a `server.properties` entry.
    pub fn broker_config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.broker_config.push((key.into(), value.into()));
        self
    }

    /// Replaces the JVM options (for example to let C2 compile for benchmarks).
    pub fn jvm_options<I: IntoIterator<Item = S>, S: Into<String>>(mut self, opts: I) -> Self {
        self.jvm_options = opts.into_iter().map(Into::into).collect();
        self
    }
}

struct Node {
    node_id: usize,
    port: u16,
    /// Ports of the secured listeners, in [`Listener::ALL`] order (empty if none).
    secured_ports: Vec<u16>,
    /// Port of the `PROXIED` listener, if any.
    proxied_port: Option<u16>,
    data_dir: PathBuf,
    config: PathBuf,
    log_dir: PathBuf,
    child: Option<Child>,
}

/// A running Apache Kafka cluster of child JVM processes on loopback ports.
///
/// Dropping it kills every broker and deletes its data; broker logs stay under
/// `target/kafka-tests/logs/`. Brokers also die with the test process, whatever
/// ends it.
pub struct KafkaCluster {
    options: ClusterOptions,
    kafka_cluster_id: String,
    libs: PathBuf,
    data_root: PathBuf,
    log_root: PathBuf,
    nodes: Mutex<Vec<Node>>,
    started_in: Duration,
    security: Option<Security>,
}

impl std::fmt::Debug for KafkaCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaCluster")
            .field("logical_id", &self.options.logical_id)
            .field("kafka_cluster_id", &self.kafka_cluster_id)
            .field("bootstrap", &self.bootstrap_servers())
            .finish()
    }
}

fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"),
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TestkitError + '_ {
    move |source| TestkitError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A fresh Kafka `cluster.id`: 16 random bytes, URL-safe base64 without padding.
fn random_cluster_id() -> String {
    let mut bytes = [0u8; 16];
    let read = fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if read.is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        bytes = (nanos ^ (u128::from(std::process::id()) << 64)).to_le_bytes();
    }
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Removes data directories left by test processes that died without cleaning up.
fn sweep_stale(data_base: &Path) {
    let Ok(entries) = fs::read_dir(data_base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.split('-').next().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        // SAFETY: kill with signal 0 only checks for existence.
        let alive = unsafe { libc::kill(pid, 0) } == 0;
        if !alive {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

fn is_port_clash(e: &TestkitError) -> bool {
    let text = e.to_string();
    text.contains("Address already in use") || text.contains("BindException")
}

impl KafkaCluster {
    /// Starts a cluster and waits until every broker answers a metadata request.
    ///
    /// Ports are picked free, but another process may take one before the broker binds
    /// it; such a start is retried (up to 3 attempts) with new ports.
    pub fn start(options: ClusterOptions) -> Result<KafkaCluster, TestkitError> {
        let mut attempt = 1;
        loop {
            match Self::start_once(options.clone()) {
                Err(e) if attempt < 3 && is_port_clash(&e) => {
                    tracing::warn!(cluster = %options.logical_id, attempt, "port taken before the broker bound it; retrying");
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    fn start_once(options: ClusterOptions) -> Result<KafkaCluster, TestkitError> {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let began = Instant::now();
        let libs = kafka_libs()?;
        let base = target_dir().join("kafka-tests");
        let data_base = base.join("data");
        sweep_stale(&data_base);
        let run = format!(
            "{}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed),
            options.logical_id
        );
        let data_root = data_base.join(&run);
        let log_root = base.join("logs").join(&run);
        let _ = fs::remove_dir_all(&log_root);
        fs::create_dir_all(&data_root).map_err(io(&data_root))?;
        fs::create_dir_all(&log_root).map_err(io(&log_root))?;
        let log4j = log_root.join("log4j2.properties");
        fs::write(
            &log4j,
            "appender.f.type=File\nappender.f.name=F\n\
             appender.f.fileName=${sys:kafka.logs.dir}/server.log\n\
             appender.f.layout.type=PatternLayout\n\
             appender.f.layout.pattern=[%d] %p %m (%c)%n\n\
             rootLogger.level=INFO\nrootLogger.appenderRef.f.ref=F\n\
             logger.state.name=state.change.logger\nlogger.state.level=WARN\n",
        )
        .map_err(io(&log4j))?;

        let n = options.brokers.max(1);
        let proxied = !options.advertise_via.is_empty();
        if proxied && options.advertise_via.len() != n {
            return Err(TestkitError::Kafka {
                cluster: options.logical_id.clone(),
                message: format!(
                    "advertise_via names {} ports for {n} brokers",
                    options.advertise_via.len()
                ),
            });
        }
        let controllers = if n >= 3 { 3 } else { 1 };
        let security = if options.secured {
            Some(Security::generate(&data_root.join("security"))?)
        } else {
            None
        };
        let secured_count = if security.is_some() {
            Listener::ALL.len()
        } else {
            0
        };
        let per_node = 2 + secured_count + usize::from(proxied);
        let all = free_ports(per_node * n).map_err(io(&data_root))?;
        let ports: Vec<(u16, u16)> = all.chunks(per_node).map(|c| (c[0], c[1])).collect();
        let extra_ports: Vec<Vec<u16>> = all
            .chunks(per_node)
            .map(|c| c[2..2 + secured_count].to_vec())
            .collect();
        let voters: Vec<String> = (0..controllers)
            .map(|i| format!("{}@127.0.0.1:{}", i + 1, ports[i].1))
            .collect();
        let rf = n.min(3);
        let mut nodes = Vec::new();
        for (i, (port, cport)) in ports.iter().enumerate() {
            let node_id = i + 1;
            let is_controller = i < controllers;
            let data_dir = data_root.join(format!("node-{node_id}"));
            let log_dir = log_root.join(format!("node-{node_id}"));
            fs::create_dir_all(&log_dir).map_err(io(&log_dir))?;
            let secured_ports = extra_ports[i].clone();
            let (secured_listeners, secured_map) = if security.is_some() {
                let mut l = String::new();
                let mut m = String::new();
                for (listener, p) in Listener::ALL.iter().zip(&secured_ports) {
                    l.push_str(&format!(",{}://127.0.0.1:{p}", listener.name()));
                    m.push_str(&format!(",{}:{}", listener.name(), listener.protocol()));
                }
                (l, m)
            } else {
                (String::new(), String::new())
            };
            let proxied_port = proxied.then(|| all[(i + 1) * per_node - 1]);
            let (proxied_listener, proxied_advertised, proxied_map) = match proxied_port {
                Some(p) => (
                    format!(",PROXIED://127.0.0.1:{p}"),
                    format!(",PROXIED://127.0.0.1:{}", options.advertise_via[i]),
                    ",PROXIED:PLAINTEXT",
                ),
                None => (String::new(), String::new(), ""),
            };
            let mut props: Vec<(String, String)> = vec![
                (
                    "process.roles".into(),
                    if is_controller {
                        "broker,controller"
                    } else {
                        "broker"
                    }
                    .into(),
                ),
                ("node.id".into(), node_id.to_string()),
                ("controller.quorum.voters".into(), voters.join(",")),
                (
                    "listeners".into(),
                    if is_controller {
                        format!(
                            "PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}{secured_listeners}{proxied_listener}"
                        )
                    } else {
                        format!("PLAINTEXT://127.0.0.1:{port}{secured_listeners}{proxied_listener}")
                    },
                ),
                (
                    "advertised.listeners".into(),
                    format!("PLAINTEXT://127.0.0.1:{port}{secured_listeners}{proxied_advertised}"),
                ),
                ("controller.listener.names".into(), "CONTROLLER".into()),
                ("inter.broker.listener.name".into(), "PLAINTEXT".into()),
                (
                    "listener.security.protocol.map".into(),
                    format!("PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT{secured_map}{proxied_map}"),
                ),
                ("log.dirs".into(), data_dir.display().to_string()),
                ("num.partitions".into(), "1".into()),
                ("default.replication.factor".into(), rf.to_string()),
                ("min.insync.replicas".into(), "1".into()),
                ("offsets.topic.replication.factor".into(), rf.to_string()),
                ("offsets.topic.num.partitions".into(), "3".into()),
                (
                    "transaction.state.log.replication.factor".into(),
                    rf.to_string(),
                ),
                ("transaction.state.log.min.isr".into(), "1".into()),
                ("transaction.state.log.num.partitions".into(), "3".into()),
                (
                    "share.coordinator.state.topic.replication.factor".into(),
                    rf.to_string(),
                ),
                ("share.coordinator.state.topic.min.isr".into(), "1".into()),
                (
                    "share.coordinator.state.topic.num.partitions".into(),
                    "3".into(),
                ),
                ("group.initial.rebalance.delay.ms".into(), "0".into()),
                ("auto.create.topics.enable".into(), "false".into()),
                (
                    "log.flush.interval.messages".into(),
                    "9223372036854775807".into(),
                ),
            ];
            if let Some(sec) = &security {
                props.extend(sec.broker_properties());
            }
            props.extend(options.broker_config.iter().cloned());
            let config = log_root.join(format!("node-{node_id}.properties"));
            let text: String = props.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
            fs::write(&config, text).map_err(io(&config))?;
            nodes.push(Node {
                node_id,
                port: *port,
                secured_ports,
                proxied_port,
                data_dir,
                config,
                log_dir,
                child: None,
            });
        }
        let cluster = KafkaCluster {
            kafka_cluster_id: random_cluster_id(),
            libs,
            data_root,
            log_root,
            nodes: Mutex::new(Vec::new()),
            options,
            started_in: Duration::ZERO,
            security,
        };
        cluster.format(&nodes)?;
        for node in &mut nodes {
            node.child = Some(cluster.spawn_broker(node)?);
        }
        *cluster.nodes.lock().unwrap_or_else(|p| p.into_inner()) = nodes;
        for i in 0..n {
            cluster.await_ready(i)?;
        }
        let mut cluster = cluster;
        cluster.started_in = began.elapsed();
        tracing::info!(
            cluster = %cluster.options.logical_id,
            bootstrap = %cluster.bootstrap_servers(),
            secs = cluster.started_in.as_secs_f64(),
            "kafka cluster ready"
        );
        Ok(cluster)
    }

    fn java(&self) -> Command {
        let java = std::env::var_os("JAVA_HOME")
            .map(|h| PathBuf::from(h).join("bin/java"))
            .filter(|p| p.exists())
            .unwrap_or_else(|| PathBuf::from("java"));
        let mut cmd = Command::new(java);
        cmd.args(&self.options.jvm_options);
        cmd.arg(format!(
            "-Dlog4j2.configurationFile={}",
            self.log_root.join("log4j2.properties").display()
        ));
        cmd.arg("-cp").arg(format!("{}/*", self.libs.display()));
        cmd
    }

    /// Formats every node's log dir (in parallel; each format is one short JVM).
    fn format(&self, nodes: &[Node]) -> Result<(), TestkitError> {
        let mut children = Vec::new();
        for node in nodes {
            let out_path = node.log_dir.join("format.log");
            let out = fs::File::create(&out_path).map_err(io(&out_path))?;
            let err = out.try_clone().map_err(io(&out_path))?;
            let mut cmd = self.java();
            cmd.arg(format!("-Dkafka.logs.dir={}", node.log_dir.display()))
                .arg("kafka.tools.StorageTool")
                .arg("format")
                // `=` form: a generated id may start with `-`, which argparse
                // would read as an option.
                .arg(format!("--cluster-id={}", self.kafka_cluster_id))
                .arg("-c")
                .arg(&node.config)
                .args(self.security.iter().flat_map(Security::format_args))
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err);
            let child = spawn_tied(cmd).map_err(|e| TestkitError::Java(e.to_string()))?;
            children.push((node, child, out_path));
        }
        for (node, mut child, out_path) in children {
            let status = child
                .wait()
                .map_err(|e| TestkitError::Java(e.to_string()))?;
            if !status.success() {
                let text = fs::read_to_string(&out_path).unwrap_or_default();
                return Err(TestkitError::BrokerNotReady {
                    cluster: self.options.logical_id.clone(),
                    broker: node.node_id - 1,
                    reason: format!("formatting the log dir failed ({status})"),
                    log: out_path,
                    tail: tail_lines(&text, 30),
                });
            }
        }
        Ok(())
    }

    fn spawn_broker(&self, node: &Node) -> Result<Child, TestkitError> {
        let out_path = node.log_dir.join("stdout.log");
        let out = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&out_path)
            .map_err(io(&out_path))?;
        let err = out.try_clone().map_err(io(&out_path))?;
        let mut cmd = self.java();
        cmd.arg(format!("-Dkafka.logs.dir={}", node.log_dir.display()))
            .arg("kafka.Kafka")
            .arg(&node.config)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        spawn_tied(cmd).map_err(|e| TestkitError::Java(format!("{e} (is a JDK 17+ installed?)")))
    }

    fn log_tail(node_log_dir: &Path) -> String {
        let mut text = String::new();
        for f in ["server.log", "stdout.log"] {
            if let Ok(t) = fs::read_to_string(node_log_dir.join(f)) {
                text.push_str(&format!("[{f}]\n{}\n", tail_lines(&t, 25)));
            }
        }
        text
    }

    /// Waits until broker `index` answers a metadata request that lists it.
    fn await_ready(&self, index: usize) -> Result<(), TestkitError> {
        let deadline = Instant::now() + self.options.ready_timeout;
        let (port, node_id, log_dir) = {
            let nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
            let n = &nodes[index];
            (n.port, n.node_id, n.log_dir.clone())
        };
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", format!("127.0.0.1:{port}"))
            .set("socket.connection.setup.timeout.ms", "1000")
            .set("reconnect.backoff.max.ms", "200")
            .set("log_level", "0")
            .create()
            .map_err(|e| self.kafka_err(format!("cannot create client: {e}")))?;
        loop {
            {
                let mut nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(child) = nodes[index].child.as_mut()
                    && let Ok(Some(status)) = child.try_wait()
                {
                    return Err(self.not_ready(
                        index,
                        &log_dir,
                        format!("the JVM exited ({status})"),
                    ));
                }
            }
            let last = match consumer.fetch_metadata(None, Duration::from_millis(1000)) {
                Ok(md) if md.brokers().iter().any(|b| b.id() as usize == node_id) => return Ok(()),
                Ok(md) => format!(
                    "metadata lists brokers {:?}",
                    md.brokers().iter().map(|b| b.id()).collect::<Vec<_>>()
                ),
                Err(e) => e.to_string(),
            };
            if Instant::now() > deadline {
                return Err(self.not_ready(
                    index,
                    &log_dir,
                    format!(
                        "no metadata answer within {:?}; last: {last}",
                        self.options.ready_timeout
                    ),
                ));
            }
        }
    }

    fn not_ready(&self, index: usize, log_dir: &Path, reason: String) -> TestkitError {
        TestkitError::BrokerNotReady {
            cluster: self.options.logical_id.clone(),
            broker: index,
            reason,
            log: log_dir.join("server.log"),
            tail: Self::log_tail(log_dir),
        }
    }

    fn kafka_err(&self, message: String) -> TestkitError {
        TestkitError::Kafka {
            cluster: self.options.logical_id.clone(),
            message,
        }
    }

    /// The Kafka `cluster.id` the log dirs were formatted with.
    pub fn kafka_cluster_id(&self) -> &str {
        &self.kafka_cluster_id
    }

    /// How long [`KafkaCluster::start`] took (jar fetch excluded when cached).
    pub fn startup_time(&self) -> Duration {
        self.started_in
    }

    /// Where the brokers' logs are.
    pub fn log_dir(&self) -> &Path {
        &self.log_root
    }

    /// A client config pointing at this cluster.
    pub fn client_config(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", self.bootstrap_servers());
        c
    }

    /// The certificates and credentials of a cluster started with
    /// [`ClusterOptions::secured`]; `None` otherwise.
    pub fn security(&self) -> Option<&Security> {
        self.security.as_ref()
    }

    /// `host:port,…` of `listener` on every broker.
    ///
    /// # Panics
    /// If the cluster was not started with [`ClusterOptions::secured`].
    pub fn listener_bootstrap(&self, listener: Listener) -> String {
        assert!(
            self.security.is_some(),
            "cluster `{}` has no secured listeners (ClusterOptions::secured)",
            self.options.logical_id
        );
        let nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
        nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.secured_ports[Security::slot(listener)]))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Where each broker's `PROXIED` listener ([`ClusterOptions::advertise_via`])
    /// really listens, in broker order: what a proxy forwards to. Empty without one.
    pub fn proxied_listeners(&self) -> Vec<std::net::SocketAddr> {
        let nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
        nodes
            .iter()
            .filter_map(|n| n.proxied_port)
            .map(|p| std::net::SocketAddr::from(([127, 0, 0, 1], p)))
            .collect()
    }

    /// Restarts broker `index` advertising its `PROXIED` listener
    /// ([`ClusterOptions::advertise_via`]) at `127.0.0.1:<port>`: a broker that comes
    /// back at another address, as a pod does with a new IP, while the address clients
    /// bootstrap from stays. Waits until it answers.
    pub fn restart_advertising_via(&self, index: usize, port: u16) -> Result<(), TestkitError> {
        {
            let mut nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
            let node = nodes
                .get_mut(index)
                .ok_or_else(|| self.kafka_err(format!("no broker {index}")))?;
            if node.proxied_port.is_none() {
                return Err(self.kafka_err(format!(
                    "broker {index} has no PROXIED listener (ClusterOptions::advertise_via)"
                )));
            }
            if let Some(mut child) = node.child.take() {
                kill_and_wait(&mut child);
            }
            let text = fs::read_to_string(&node.config).map_err(io(&node.config))?;
            let text: String = text
                .lines()
                .map(|line| match line.strip_prefix("advertised.listeners=") {
                    Some(list) => {
                        let list: Vec<String> = list
                            .split(',')
                            .map(|l| match l.strip_prefix("PROXIED://") {
                                Some(_) => format!("PROXIED://127.0.0.1:{port}"),
                                None => l.to_string(),
                            })
                            .collect();
                        format!("advertised.listeners={}\n", list.join(","))
                    }
                    None => format!("{line}\n"),
                })
                .collect();
            fs::write(&node.config, text).map_err(io(&node.config))?;
            let child = self.spawn_broker(node)?;
            node.child = Some(child);
        }
        self.await_ready(index)
    }

    /// The librdkafka properties that reach `listener` with valid credentials,
    /// `bootstrap.servers` first.
    ///
    /// # Panics
    /// If the cluster was not started with [`ClusterOptions::secured`].
    pub fn listener_properties(&self, listener: Listener) -> Vec<(String, String)> {
        let mut p = vec![(
            "bootstrap.servers".to_string(),
            self.listener_bootstrap(listener),
        )];
        p.extend(
            self.security
                .as_ref()
                .expect("checked by listener_bootstrap")
                .client_properties(listener),
        );
        p
    }

    /// Kafka's console producer on `topic` over the `PLAINTEXT` listener, reading
    /// `key<TAB>value` lines from a piped stdin, its output and logs in the directory
    /// `java-producer/<name>` of the cluster's logs. Returns the command (to which
    /// producer options may be added), that directory and its `stdout.log`.
    fn console_producer(
        &self,
        topic: &str,
        name: &str,
    ) -> Result<(Command, PathBuf, PathBuf), TestkitError> {
        let dir = self.log_root.join("java-producer").join(name);
        fs::create_dir_all(&dir).map_err(io(&dir))?;
        let out_path = dir.join("stdout.log");
        let out = fs::File::create(&out_path).map_err(io(&out_path))?;
        let err = out.try_clone().map_err(io(&out_path))?;
        let mut cmd = self.java();
        cmd.arg(format!("-Dkafka.logs.dir={}", dir.display()))
            .arg("org.apache.kafka.tools.ConsoleProducer")
            .arg("--bootstrap-server")
            .arg(self.bootstrap_servers())
            .arg("--topic")
            .arg(topic)
            .args(["--property", "parse.key=true"])
            .args(["--property", "key.separator=\t"]);
        cmd.stdin(Stdio::piped()).stdout(out).stderr(err);
        Ok((cmd, dir, out_path))
    }

    /// Produces `values` (one record each, keys `k<i>`, in order) to `topic` with
    /// Kafka's own Java producer (`kafka-console-producer` from the test kit's jars)
    /// over the `PLAINTEXT` listener, with extra producer properties such as
    /// `compression.type=zstd`. Values must not contain a newline or a tab.
    pub fn produce_with_java(
        &self,
        topic: &str,
        values: &[String],
        producer_properties: &[(&str, &str)],
    ) -> Result<(), TestkitError> {
        use std::io::Write;
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let (mut cmd, dir, out_path) = self.console_producer(topic, &format!("{topic}-{n}"))?;
        cmd.args(["--producer-property", "acks=all"])
            .args(["--producer-property", "linger.ms=50"]);
        for (k, v) in producer_properties {
            if *k == "compression.type" {
                // The console producer sets compression.type from this option (default
                // none) over any --producer-property.
                cmd.arg("--compression-codec").arg(v);
            } else {
                cmd.arg("--producer-property").arg(format!("{k}={v}"));
            }
        }
        let mut child = spawn_tied(cmd).map_err(|e| TestkitError::Java(e.to_string()))?;
        let mut text = String::new();
        for (i, v) in values.iter().enumerate() {
            assert!(
                !v.contains(['\n', '\t']),
                "a value for the console producer holds a newline or tab: {v:?}"
            );
            text.push_str(&format!("k{i}\t{v}\n"));
        }
        let wrote = child
            .stdin
            .take()
            .expect("stdin is piped")
            .write_all(text.as_bytes());
        // Closing stdin ends the producer once everything is sent.
        let status = child
            .wait()
            .map_err(|e| TestkitError::Java(e.to_string()))?;
        let mut log = fs::read_to_string(&out_path).unwrap_or_default();
        log.push_str(&fs::read_to_string(dir.join("server.log")).unwrap_or_default());
        if wrote.is_err() || !status.success() || log.contains("ERROR") {
            return Err(self.kafka_err(format!(
                "the Java console producer to {topic} failed ({status}); {}:\n{}",
                dir.display(),
                tail_lines(&log, 30)
            )));
        }
        Ok(())
    }

    /// Starts Kafka's own Java producer (`kafka-console-producer` from the test kit's
    /// jars) on `topic` over the `PLAINTEXT` listener, for records sent one at a time
    /// with [`JavaProducer::send`] until [`JavaProducer::finish`]. It is set up to ride
    /// out broker failures without losing or repeating a record: `acks=all`,
    /// `enable.idempotence=true`, retries without limit for up to two minutes per
    /// record. `producer_properties` come last (they may override those).
    pub fn java_producer(
        &self,
        topic: &str,
        producer_properties: &[(&str, &str)],
    ) -> Result<JavaProducer, TestkitError> {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let (mut cmd, dir, _) = self.console_producer(topic, &format!("{topic}-stream-{n}"))?;
        // The console producer's own defaults (3 retries, 1.5 s request timeout) would
        // give up on a record while a partition changes leader.
        let defaults = [
            ("acks", "all"),
            ("enable.idempotence", "true"),
            ("retries", "2147483647"),
            ("request.timeout.ms", "30000"),
            ("delivery.timeout.ms", "120000"),
            ("linger.ms", "5"),
        ];
        for (k, v) in defaults.iter().chain(producer_properties) {
            cmd.arg("--producer-property").arg(format!("{k}={v}"));
        }
        let mut child = spawn_tied(cmd).map_err(|e| TestkitError::Java(e.to_string()))?;
        let stdin = child.stdin.take().expect("stdin is piped");
        Ok(JavaProducer {
            cluster: self.options.logical_id.clone(),
            topic: topic.to_string(),
            child,
            stdin: Some(std::io::BufWriter::new(stdin)),
            dir,
            sent: 0,
        })
    }

    /// The broker index ([`TestCluster::kill_broker`]'s `index`) leading each
    /// partition of `topic`, in partition order; `None` for a partition without a
    /// leader right now.
    pub fn partition_leaders(&self, topic: &str) -> Result<Vec<Option<usize>>, TestkitError> {
        let md = self.topic_metadata(topic)?;
        Ok(md
            .into_iter()
            .map(|(_, leader, _, _)| self.broker_index(leader))
            .collect())
    }

    /// Waits until every partition of `topic` has a leader and every replica in sync:
    /// the moment another broker may fail without a partition going below
    /// `min.insync.replicas` for long.
    pub fn await_in_sync(&self, topic: &str, within: Duration) -> Result<(), TestkitError> {
        let deadline = Instant::now() + within;
        loop {
            let last = match self.topic_metadata(topic) {
                Ok(parts) => {
                    let lagging: Vec<String> = parts
                        .iter()
                        .filter(|(_, leader, replicas, isr)| {
                            *leader < 0 || isr.len() < replicas.len()
                        })
                        .map(|(p, leader, replicas, isr)| {
                            format!("{p}: leader {leader}, replicas {replicas:?}, isr {isr:?}")
                        })
                        .collect();
                    if lagging.is_empty() {
                        return Ok(());
                    }
                    lagging.join("; ")
                }
                Err(e) => e.to_string(),
            };
            if Instant::now() > deadline {
                return Err(self.kafka_err(format!(
                    "{topic} not fully in sync within {within:?}: {last}"
                )));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Every partition of `topic`, in partition order, from a fresh metadata request.
    fn topic_metadata(&self, topic: &str) -> Result<Vec<PartitionState>, TestkitError> {
        let consumer: BaseConsumer = self
            .client_config()
            .set("log_level", "0")
            .create()
            .map_err(|e| self.kafka_err(format!("cannot create client: {e}")))?;
        let md = consumer
            .fetch_metadata(Some(topic), Duration::from_secs(10))
            .map_err(|e| self.kafka_err(format!("metadata of {topic}: {e}")))?;
        let t = md
            .topics()
            .first()
            .filter(|t| t.error().is_none())
            .ok_or_else(|| self.kafka_err(format!("no metadata for {topic}")))?;
        let mut parts: Vec<_> = t
            .partitions()
            .iter()
            .map(|p| (p.id(), p.leader(), p.replicas().to_vec(), p.isr().to_vec()))
            .collect();
        parts.sort_by_key(|p| p.0);
        Ok(parts)
    }

    /// The index of the broker with this node id.
    fn broker_index(&self, node_id: i32) -> Option<usize> {
        let nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
        nodes.iter().position(|n| n.node_id as i32 == node_id)
    }

    /// The compression codecs of the record batches of every partition of `topic` on
    /// the first broker, as Kafka's `kafka-dump-log` names them (`none`, `gzip`,
    /// `snappy`, `lz4`, `zstd`): proof of what a producer really wrote.
    pub fn batch_codecs(
        &self,
        topic: &str,
    ) -> Result<std::collections::BTreeSet<String>, TestkitError> {
        let (data_dir, log_dir) = {
            let nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
            (nodes[0].data_dir.clone(), nodes[0].log_dir.clone())
        };
        let prefix = format!("{topic}-");
        let mut segments = Vec::new();
        for e in fs::read_dir(&data_dir).map_err(io(&data_dir))?.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let is_partition = name
                .strip_prefix(&prefix)
                .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
            if !is_partition {
                continue;
            }
            for f in fs::read_dir(e.path()).map_err(io(&e.path()))?.flatten() {
                if f.path().extension().is_some_and(|x| x == "log") {
                    segments.push(f.path().display().to_string());
                }
            }
        }
        if segments.is_empty() {
            return Err(self.kafka_err(format!("no log segment of {topic} on broker 0")));
        }
        let out = self
            .java()
            .arg(format!("-Dkafka.logs.dir={}", log_dir.display()))
            .arg("kafka.tools.DumpLogSegments")
            .arg("--files")
            .arg(segments.join(","))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| TestkitError::Java(e.to_string()))?;
        let text = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(self.kafka_err(format!(
                "kafka-dump-log on {topic} failed ({}): {}",
                out.status,
                tail_lines(
                    &format!("{text}{}", String::from_utf8_lossy(&out.stderr)),
                    20
                )
            )));
        }
        Ok(text
            .split_whitespace()
            .collect::<Vec<_>>()
            .windows(2)
            .filter(|w| w[0] == "compresscodec:")
            .map(|w| w[1].to_lowercase())
            .collect())
    }

    fn admin(&self) -> Result<AdminClient<DefaultClientContext>, TestkitError> {
        self.client_config()
            .create()
            .map_err(|e| self.kafka_err(format!("cannot create admin client: {e}")))
    }

    /// Grows a topic to `total` partitions.
    pub fn add_partitions(&self, topic: &str, total: usize) -> Result<(), TestkitError> {
        let admin = self.admin()?;
        let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
        let results = block_on(admin.create_partitions(&[NewPartitions::new(topic, total)], &opts))
            .map_err(|e| self.kafka_err(format!("create partitions for {topic}: {e}")))?;
        for r in results {
            r.map_err(|(t, e)| self.kafka_err(format!("create partitions for {t}: {e}")))?;
        }
        self.await_partitions(topic, total)
    }

    /// Deletes a topic.
    pub fn delete_topic(&self, topic: &str) -> Result<(), TestkitError> {
        let admin = self.admin()?;
        let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
        let results = block_on(admin.delete_topics(&[topic], &opts))
            .map_err(|e| self.kafka_err(format!("delete topic {topic}: {e}")))?;
        for r in results {
            r.map_err(|(t, e)| self.kafka_err(format!("delete topic {t}: {e}")))?;
        }
        Ok(())
    }

    /// Waits until metadata shows `topic` with `count` partitions, each with a leader.
    fn await_partitions(&self, topic: &str, count: usize) -> Result<(), TestkitError> {
        let consumer: BaseConsumer = self
            .client_config()
            .create()
            .map_err(|e| self.kafka_err(format!("cannot create client: {e}")))?;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(md) = consumer.fetch_metadata(Some(topic), Duration::from_secs(2))
                && let Some(t) = md.topics().first()
                && t.error().is_none()
                && t.partitions().len() == count
                && t.partitions()
                    .iter()
                    .all(|p| p.leader() >= 0 && p.error().is_none())
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(self.kafka_err(format!(
                    "topic {topic} did not show {count} partitions with leaders within 30s"
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills every broker and removes the data (logs are kept).
    pub fn shutdown(&self) {
        let mut nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
        for node in nodes.iter_mut() {
            if let Some(mut child) = node.child.take() {
                kill_and_wait(&mut child);
            }
        }
        let _ = fs::remove_dir_all(&self.data_root);
    }
}

impl Drop for KafkaCluster {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl TestCluster for KafkaCluster {
    fn logical_id(&self) -> &str {
        &self.options.logical_id
    }

    fn bootstrap_servers(&self) -> String {
        let nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
        nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn create_topic(&self, topic: &str, partitions: i32) -> Result<(), TestkitError> {
        let admin = self.admin()?;
        let rf = self.broker_count().min(3) as i32;
        let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
        let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(rf));
        let results = block_on(admin.create_topics(&[new], &opts))
            .map_err(|e| self.kafka_err(format!("create topic {topic}: {e}")))?;
        for r in results {
            r.map_err(|(t, e)| self.kafka_err(format!("create topic {t}: {e}")))?;
        }
        self.await_partitions(topic, partitions as usize)
    }

    fn produce(&self, topic: &str, records: &[TestRecord]) -> Result<Vec<Produced>, TestkitError> {
        produce_records(
            &self.options.logical_id,
            &self.bootstrap_servers(),
            topic,
            records,
            &[],
        )
    }

    fn kill_broker(&self, index: usize) -> Result<(), TestkitError> {
        let mut nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
        let node = nodes
            .get_mut(index)
            .ok_or_else(|| self.kafka_err(format!("no broker {index}")))?;
        if let Some(mut child) = node.child.take() {
            kill_and_wait(&mut child);
        }
        Ok(())
    }

    fn restart_broker(&self, index: usize) -> Result<(), TestkitError> {
        {
            let mut nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
            let node = nodes
                .get_mut(index)
                .ok_or_else(|| self.kafka_err(format!("no broker {index}")))?;
            if let Some(mut child) = node.child.take() {
                kill_and_wait(&mut child);
            }
            // The data dir survives a kill; the broker recovers its log on start.
            debug_assert!(node.data_dir.exists());
            let child = self.spawn_broker(node)?;
            node.child = Some(child);
        }
        self.await_ready(index)
    }

    fn broker_count(&self) -> usize {
        self.nodes.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

/// `(partition, leader node id, replicas, in-sync replicas)` of a partition.
type PartitionState = (i32, i32, Vec<i32>, Vec<i32>);

/// Kafka's Java console producer, running; see [`KafkaCluster::java_producer`].
///
/// Records are sent as they are given; [`finish`](Self::finish) waits for every one
/// to be acknowledged. Dropping it without finishing kills the JVM.
pub struct JavaProducer {
    cluster: String,
    topic: String,
    child: Child,
    stdin: Option<std::io::BufWriter<std::process::ChildStdin>>,
    dir: PathBuf,
    sent: usize,
}

impl JavaProducer {
    /// Sends a record with this value and the key `k<n>` (`n` counting the records
    /// sent). The value must not contain a newline or a tab.
    pub fn send(&mut self, value: &str) -> Result<(), TestkitError> {
        use std::io::Write;
        assert!(
            !value.contains(['\n', '\t']),
            "a value for the console producer holds a newline or tab: {value:?}"
        );
        let line = format!("k{}\t{value}\n", self.sent);
        let stdin = self.stdin.as_mut().expect("stdin is open until finish");
        // Flushed at once: the producer sees each record when it is given.
        stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.flush())
            .map_err(|e| self.failed(format!("writing to the producer failed: {e}")))?;
        self.sent += 1;
        Ok(())
    }

    /// Records sent so far.
    pub fn sent(&self) -> usize {
        self.sent
    }

    /// Ends the input and waits for the producer to exit: every record sent is then
    /// acknowledged, or this fails with the end of the producer's log (a send that
    /// failed is logged as an ERROR).
    pub fn finish(mut self) -> Result<(), TestkitError> {
        use std::io::Write;
        let flushed = self.stdin.take().map(|mut s| s.flush());
        let status = self
            .child
            .wait()
            .map_err(|e| TestkitError::Java(e.to_string()))?;
        let log = self.log();
        if matches!(flushed, Some(Err(_))) || !status.success() || log.contains("ERROR") {
            return Err(self.failed(format!("the producer ended with {status}")));
        }
        Ok(())
    }

    fn log(&self) -> String {
        let mut log = fs::read_to_string(self.dir.join("stdout.log")).unwrap_or_default();
        log.push_str(&fs::read_to_string(self.dir.join("server.log")).unwrap_or_default());
        log
    }

    fn failed(&self, what: String) -> TestkitError {
        TestkitError::Kafka {
            cluster: self.cluster.clone(),
            message: format!(
                "the Java console producer to {}: {what}; {}:\n{}",
                self.topic,
                self.dir.display(),
                tail_lines(&self.log(), 30)
            ),
        }
    }
}

impl Drop for JavaProducer {
    fn drop(&mut self) {
        if self.stdin.is_some() {
            kill_and_wait(&mut self.child);
        }
    }
}

/// One slot per name; a slot is locked only while its cluster starts, so clusters of
/// different names start at the same time.
type Slot = std::sync::Arc<Mutex<Option<&'static KafkaCluster>>>;
type Registry = HashMap<String, Slot>;

static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();

extern "C" fn shutdown_shared() {
    if let Some(reg) = REGISTRY.get() {
        let reg = reg.lock().unwrap_or_else(|p| p.into_inner());
        for slot in reg.values() {
            // A slot still locked is a cluster still starting: its JVMs die with
            // this process all the same.
            if let Ok(Some(c)) = slot.try_lock().as_deref() {
                c.shutdown();
            }
        }
    }
}

/// A single-broker cluster shared by every test of this test binary that asks for the
/// same `name`. Started on first use; killed and deleted when the process exits.
///
/// Share a cluster only between tests that use their own topics and never kill its
/// broker.
pub fn shared_cluster(name: &str) -> Result<&'static KafkaCluster, TestkitError> {
    shared_cluster_with(ClusterOptions::new(name))
}

/// Like [`shared_cluster`], started with `options` on first use; shared by every test
/// of this test binary that asks for the same `options.logical_id` (later callers'
/// other options are ignored). For example one secured cluster
/// (`ClusterOptions::new("secure").secured()`) for every test of a binary.
pub fn shared_cluster_with(options: ClusterOptions) -> Result<&'static KafkaCluster, TestkitError> {
    let name = options.logical_id.clone();
    let reg = REGISTRY.get_or_init(|| {
        // SAFETY: registers a plain extern "C" function that captures nothing.
        unsafe {
            libc::atexit(shutdown_shared);
        }
        Mutex::new(HashMap::new())
    });
    let slot = reg
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(name)
        .or_default()
        .clone();
    let mut guard = slot.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(c) = *guard {
        return Ok(c);
    }
    // A failed start leaves the slot empty: the next caller tries again.
    let cluster: &'static KafkaCluster = Box::leak(Box::new(KafkaCluster::start(options)?));
    *guard = Some(cluster);
    Ok(cluster)
}

/// The shared secured cluster `secure` ([`ClusterOptions::secured`]: a broker with every
/// [`Listener`](crate::Listener)), as [`shared_cluster_with`] gives it.
pub fn shared_secured_cluster() -> Result<&'static KafkaCluster, TestkitError> {
    shared_cluster_with(ClusterOptions::new("secure").secured())
}

/// The shared plaintext cluster `plain` and [`shared_secured_cluster`], started at the
/// same time.
pub fn shared_plain_and_secured()
-> Result<(&'static KafkaCluster, &'static KafkaCluster), TestkitError> {
    std::thread::scope(|s| {
        let plain = s.spawn(|| shared_cluster("plain"));
        let secure = shared_secured_cluster();
        let plain = plain.join().expect("the thread starting `plain` panicked");
        Ok((plain?, secure?))
    })
}
