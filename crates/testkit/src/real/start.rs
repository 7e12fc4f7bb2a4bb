//! Starting a cluster: its directories, ports and broker configurations, then the
//! brokers themselves.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use base64::Engine;

use super::{ClusterOptions, KafkaCluster, Node, io};
use crate::secured::{Listener, Security};
use crate::util::free_ports;
use crate::{TestCluster, TestkitError, kafka_libs};

fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"),
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
        if !crate::process::is_alive(pid) {
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
        let began = Instant::now();
        let libs = kafka_libs()?;
        let (data_root, log_root) = prepare_run_dirs(&options.logical_id)?;
        let n = options.brokers.max(1);
        check_advertise_via(&options, n)?;
        let security = if options.secured {
            Some(Security::generate(&data_root.join("security"))?)
        } else {
            None
        };
        let nodes = write_node_configs(&options, security.as_ref(), &data_root, &log_root)?;
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
        cluster.launch(nodes)?;
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

    /// Formats the nodes' log dirs, spawns every broker and waits until each answers.
    fn launch(&self, mut nodes: Vec<Node>) -> Result<(), TestkitError> {
        self.format(&nodes)?;
        for node in &mut nodes {
            node.child = Some(self.spawn_broker(node)?);
        }
        let n = nodes.len();
        *self.nodes.lock().unwrap_or_else(|p| p.into_inner()) = nodes;
        for i in 0..n {
            self.await_ready(i)?;
        }
        Ok(())
    }
}

/// Creates this start's data and log directories (under `target/kafka-tests/`, named
/// by process, sequence number and logical id) with the log4j configuration of the
/// JVMs it starts (each logs to `server.log` in its `-Dkafka.logs.dir`), after removing
/// what dead test processes left. Returns `(data root, log root)`.
pub(crate) fn prepare_run_dirs(logical_id: &str) -> Result<(PathBuf, PathBuf), TestkitError> {
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    let base = target_dir().join("kafka-tests");
    let data_base = base.join("data");
    sweep_stale(&data_base);
    let run = format!(
        "{}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed),
        logical_id
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
    Ok((data_root, log_root))
}

/// `advertise_via` names either no port or one per broker.
fn check_advertise_via(options: &ClusterOptions, n: usize) -> Result<(), TestkitError> {
    if !options.advertise_via.is_empty() && options.advertise_via.len() != n {
        return Err(TestkitError::Kafka {
            cluster: options.logical_id.clone(),
            message: format!(
                "advertise_via names {} ports for {n} brokers",
                options.advertise_via.len()
            ),
        });
    }
    Ok(())
}

/// The ports of one node.
struct NodePorts {
    /// The `PLAINTEXT` listener.
    port: u16,
    /// The `CONTROLLER` listener (bound only on a controller).
    controller: u16,
    /// The secured listeners, in [`Listener::ALL`] order (empty if none).
    secured: Vec<u16>,
    /// The `PROXIED` listener, if any.
    proxied: Option<u16>,
}

/// Free ports for `n` nodes: two each, plus `secured_count` and one more if `proxied`.
fn pick_ports(
    n: usize,
    secured_count: usize,
    proxied: bool,
    data_root: &Path,
) -> Result<Vec<NodePorts>, TestkitError> {
    let per_node = 2 + secured_count + usize::from(proxied);
    let all = free_ports(per_node * n).map_err(io(data_root))?;
    Ok(all
        .chunks(per_node)
        .map(|c| NodePorts {
            port: c[0],
            controller: c[1],
            secured: c[2..2 + secured_count].to_vec(),
            proxied: proxied.then(|| c[per_node - 1]),
        })
        .collect())
}

/// Picks every node's ports and writes its `server.properties` into the log root;
/// the nodes come back without a running broker.
fn write_node_configs(
    options: &ClusterOptions,
    security: Option<&Security>,
    data_root: &Path,
    log_root: &Path,
) -> Result<Vec<Node>, TestkitError> {
    let n = options.brokers.max(1);
    let controllers = if n >= 3 { 3 } else { 1 };
    let secured_count = if security.is_some() {
        Listener::ALL.len()
    } else {
        0
    };
    let ports = pick_ports(
        n,
        secured_count,
        !options.advertise_via.is_empty(),
        data_root,
    )?;
    let voters: Vec<String> = (0..controllers)
        .map(|i| format!("{}@127.0.0.1:{}", i + 1, ports[i].controller))
        .collect();
    let cluster = ClusterLayout {
        voters: voters.join(","),
        replication_factor: n.min(3),
    };
    let mut nodes = Vec::new();
    for (i, node_ports) in ports.into_iter().enumerate() {
        let node_id = i + 1;
        let data_dir = data_root.join(format!("node-{node_id}"));
        let log_dir = log_root.join(format!("node-{node_id}"));
        fs::create_dir_all(&log_dir).map_err(io(&log_dir))?;
        let advertised_proxy = node_ports.proxied.map(|_| options.advertise_via[i]);
        let mut props = broker_properties(
            node_id,
            i < controllers,
            &node_ports,
            advertised_proxy,
            &cluster,
            &data_dir,
        );
        if let Some(sec) = security {
            props.extend(sec.broker_properties());
        }
        if options.racks {
            props.push(("broker.rack".into(), format!("rack-{i}")));
            props.push((
                "replica.selector.class".into(),
                "org.apache.kafka.common.replica.RackAwareReplicaSelector".into(),
            ));
        }
        props.extend(options.broker_config.iter().cloned());
        let config = log_root.join(format!("node-{node_id}.properties"));
        let text: String = props.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        fs::write(&config, text).map_err(io(&config))?;
        nodes.push(Node {
            node_id,
            port: node_ports.port,
            secured_ports: node_ports.secured,
            proxied_port: node_ports.proxied,
            data_dir,
            config,
            log_dir,
            child: None,
        });
    }
    Ok(nodes)
}

/// What every node's configuration shares.
struct ClusterLayout {
    /// `controller.quorum.voters`.
    voters: String,
    /// The replication factor of the internal topics.
    replication_factor: usize,
}

/// The `listeners`, `advertised.listeners` and `listener.security.protocol.map` of a
/// node, each as one comma-separated list.
struct ListenerLists {
    listeners: String,
    advertised: String,
    protocol_map: String,
}

/// The listeners of a node: `PLAINTEXT` (the test kit's own), `CONTROLLER` on a
/// controller, the secured ones, and `PROXIED` advertised at `advertised_proxy`.
fn listener_lists(
    is_controller: bool,
    ports: &NodePorts,
    advertised_proxy: Option<u16>,
) -> ListenerLists {
    let port = ports.port;
    let cport = ports.controller;
    let mut secured_listeners = String::new();
    let mut secured_map = String::new();
    for (listener, p) in Listener::ALL.iter().zip(&ports.secured) {
        secured_listeners.push_str(&format!(",{}://127.0.0.1:{p}", listener.name()));
        secured_map.push_str(&format!(",{}:{}", listener.name(), listener.protocol()));
    }
    let (proxied_listener, proxied_advertised, proxied_map) =
        match (ports.proxied, advertised_proxy) {
            (Some(p), Some(a)) => (
                format!(",PROXIED://127.0.0.1:{p}"),
                format!(",PROXIED://127.0.0.1:{a}"),
                ",PROXIED:PLAINTEXT",
            ),
            _ => (String::new(), String::new(), ""),
        };
    ListenerLists {
        listeners: if is_controller {
            format!(
                "PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}{secured_listeners}{proxied_listener}"
            )
        } else {
            format!("PLAINTEXT://127.0.0.1:{port}{secured_listeners}{proxied_listener}")
        },
        advertised: format!("PLAINTEXT://127.0.0.1:{port}{secured_listeners}{proxied_advertised}"),
        protocol_map: format!("PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT{secured_map}{proxied_map}"),
    }
}

/// The test kit's `server.properties` of a node, before the security settings and
/// [`ClusterOptions::broker_config`].
fn broker_properties(
    node_id: usize,
    is_controller: bool,
    ports: &NodePorts,
    advertised_proxy: Option<u16>,
    cluster: &ClusterLayout,
    data_dir: &Path,
) -> Vec<(String, String)> {
    let lists = listener_lists(is_controller, ports, advertised_proxy);
    let rf = cluster.replication_factor;
    vec![
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
        ("controller.quorum.voters".into(), cluster.voters.clone()),
        ("listeners".into(), lists.listeners),
        ("advertised.listeners".into(), lists.advertised),
        ("controller.listener.names".into(), "CONTROLLER".into()),
        ("inter.broker.listener.name".into(), "PLAINTEXT".into()),
        ("listener.security.protocol.map".into(), lists.protocol_map),
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
        // Tests write records with fixed timestamps years old: time-based retention
        // would delete them at its first check, 30 s after the broker starts.
        ("log.retention.ms".into(), "-1".into()),
        (
            "log.flush.interval.messages".into(),
            "9223372036854775807".into(),
        ),
    ]
}
