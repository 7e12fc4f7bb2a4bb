//! Making a cluster's lookup client: in the source's share (the client a reader of the
//! cluster fetches with) or aside, for lookups that must not wait behind a fetch.

use std::sync::Arc;

use crate::base::config::SourceConfig;
use crate::base::properties::ClientProperties;
use crate::error::SourceError;
use crate::kafka::client::ClusterClient;
use crate::kafka::config::ClientSetup;
use crate::kafka::shared::ClientShare;

/// Makes the lookup client of `cluster` (the one of the source's clients a reader of
/// the cluster will fetch with), on the caller's (blocking) thread. A client
/// librdkafka refuses is a configuration error.
pub(super) fn client(
    cfg: &SourceConfig,
    share: &Arc<ClientShare>,
    cluster: &Arc<str>,
    props: &ClientProperties,
) -> impl FnOnce() -> Result<ClusterClient, SourceError> + Send + 'static {
    make_client(cfg, Some(share.clone()), cluster, props)
}

/// Makes a lookup client of `cluster` outside the source's share: a client of its own,
/// for lookups that must not wait behind a reader's fetch (see
/// [`ClusterClient::is_read`]). Closed when dropped.
pub(super) fn client_aside(
    cfg: &SourceConfig,
    cluster: &Arc<str>,
    props: &ClientProperties,
) -> impl FnOnce() -> Result<ClusterClient, SourceError> + Send + 'static {
    make_client(cfg, None, cluster, props)
}

fn make_client(
    cfg: &SourceConfig,
    share: Option<Arc<ClientShare>>,
    cluster: &Arc<str>,
    props: &ClientProperties,
) -> impl FnOnce() -> Result<ClusterClient, SourceError> + Send + 'static {
    let (cluster, props, group, timeout) = (
        cluster.clone(),
        props.clone(),
        cfg.group_id.clone(),
        cfg.client_timeout,
    );
    let setup = ClientSetup::new(cfg.client_hooks.as_ref(), &cluster);
    // Made on a lookup thread: the runtime the enumerator runs on, where native
    // lookups go.
    let runtime = tokio::runtime::Handle::try_current().ok();
    move || {
        ClusterClient::new(
            share.as_deref(),
            cluster,
            &props,
            group.as_deref(),
            timeout,
            setup,
            runtime,
        )
    }
}
