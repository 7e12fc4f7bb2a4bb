//! A client kept between the connection attempts of a cluster that does not answer,
//! so a cluster down for hours costs one client rather than one per attempt.

use std::sync::Arc;

use crate::kafka::client::{ClusterClient, close_detached};

/// A client kept between the attempts of a pending cluster.
#[derive(Clone, Default)]
pub(super) struct Spare(Arc<std::sync::Mutex<Option<ClusterClient>>>);

impl Spare {
    /// Takes the kept client, if any.
    pub(super) fn take(&self) -> Option<ClusterClient> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Keeps `client`; one kept before is closed off the caller's thread.
    pub(super) fn put(&self, client: ClusterClient) {
        let old = self
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .replace(client);
        if let Some(old) = old {
            close_detached(old);
        }
    }

    /// Closes the kept client, if any, off the caller's thread.
    pub(super) fn discard(&self) {
        if let Some(c) = self.take() {
            close_detached(c);
        }
    }
}
