//! The lookups' connections: the addresses to ask, the brokers' addresses from the
//! last metadata answer, and the idle connections taken for a call and given back.

use multicluster_kafka_client::calls::Metadata;
use multicluster_kafka_client::conn::Connection;
use multicluster_kafka_client::error::NativeError;

use super::Lookup;

impl Lookup {
    /// The addresses to ask for metadata: those with idle connections first, then
    /// the known brokers, then the bootstrap servers.
    pub(super) fn addresses(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut add = |a: &String| {
            if !out.contains(a) {
                out.push(a.clone());
            }
        };
        for (addr, conns) in self.idle.lock().expect("lookup idle connections").iter() {
            if !conns.is_empty() {
                add(addr);
            }
        }
        for addr in self.brokers.lock().expect("lookup brokers").values() {
            add(addr);
        }
        for addr in &self.settings.bootstrap {
            add(addr);
        }
        out
    }

    pub(super) fn address_of(&self, node: i32) -> Option<String> {
        self.brokers
            .lock()
            .expect("lookup brokers")
            .get(&node)
            .cloned()
    }

    /// Keeps the brokers' addresses of a metadata answer.
    pub(super) fn learn(&self, md: &Metadata) {
        if md.brokers.is_empty() {
            return;
        }
        let mut brokers = self.brokers.lock().expect("lookup brokers");
        brokers.clear();
        for b in &md.brokers {
            brokers.insert(b.node_id, format!("{}:{}", b.host, b.port));
        }
    }

    /// A connection to `addr`: an idle one (then `true`), unless `fresh`, or a new one.
    pub(super) async fn take(
        &self,
        addr: &str,
        fresh: bool,
    ) -> Result<(Connection, bool), NativeError> {
        if !fresh {
            let idle = self
                .idle
                .lock()
                .expect("lookup idle connections")
                .get_mut(addr)
                .and_then(Vec::pop);
            if let Some(conn) = idle {
                return Ok((conn, true));
            }
        }
        Connection::connect(addr, &self.connect)
            .await
            .map(|c| (c, false))
    }

    /// Gives a connection that answered back to the idle ones.
    pub(super) fn give(&self, conn: Connection) {
        self.idle
            .lock()
            .expect("lookup idle connections")
            .entry(conn.addr().to_string())
            .or_default()
            .push(conn);
    }
}

/// Whether an error on a reused connection may only mean the broker closed it while
/// it was idle.
pub(super) fn stale(e: &NativeError) -> bool {
    matches!(e, NativeError::Io { .. } | NativeError::Closed { .. })
}
