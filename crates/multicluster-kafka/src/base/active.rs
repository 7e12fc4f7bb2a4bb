//! Which clusters the metadata service calls active, shared between the enumerator
//! (which learns it at every metadata read) and the readers (which drop the errors of
//! clusters no longer active: a cluster on its way out of the metadata, whose topics
//! an operator may already be deleting, must not fail the source).

use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};

/// Shared between the enumerator and the readers of one source.
#[derive(Clone, Debug, Default)]
pub(crate) struct ActiveClusters(Arc<RwLock<Option<BTreeSet<String>>>>);

impl ActiveClusters {
    /// Replaces the set.
    pub fn set(&self, clusters: BTreeSet<String>) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = Some(clusters);
    }

    /// True for an active cluster, and for every cluster before the first metadata read.
    pub fn is_active(&self, cluster: &str) -> bool {
        match &*self.0.read().unwrap_or_else(|p| p.into_inner()) {
            Some(set) => set.contains(cluster),
            None => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cluster_is_active_until_the_first_set_then_only_those_named() {
        let a = ActiveClusters::default();
        assert!(a.is_active("east"));
        a.clone().set(["west".to_string()].into());
        assert!(!a.is_active("east"));
        assert!(a.is_active("west"));
    }
}
