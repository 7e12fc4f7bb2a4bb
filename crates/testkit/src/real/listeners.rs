//! The secured and `PROXIED` listeners of a running cluster.

use std::fs;

use super::{KafkaCluster, io};
#[cfg(doc)]
use crate::ClusterOptions;
use crate::TestkitError;
use crate::process::kill_and_wait;
use crate::secured::{Listener, Security};

impl KafkaCluster {
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
}
