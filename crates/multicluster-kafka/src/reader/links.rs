//! A reader's links to the rest of its source: the enumerator's events and the
//! notices back, what the enumerator said of the end of its splits, and the handles
//! the reader shares with the enumerator and the other readers. Only this file
//! changes them.

use std::sync::Arc;

use tokio::sync::mpsc;

use crate::base::active::ActiveClusters;
use crate::base::metadata::index::StreamIndex;
use crate::base::protocol::{ReaderEvent, ReaderNotice};
use crate::base::retention::Retained;
use crate::kafka::shared::ClientShare;

/// The handles a reader shares with the enumerator of its source.
pub(crate) struct SharedHandles {
    /// The source's librdkafka clients.
    pub clients: Arc<ClientShare>,
    /// Positions of removed splits.
    pub retained: Retained,
    /// Clusters whose errors count (the others are leaving the metadata).
    pub active: ActiveClusters,
    /// The streams of each cluster's topic, named on the records handed out.
    pub stream_index: StreamIndex,
}

/// The links of one reader.
pub(super) struct Links {
    events: mpsc::UnboundedReceiver<ReaderEvent>,
    notices: mpsc::UnboundedSender<ReaderNotice>,
    /// The enumerator said no more splits will come (bounded mode).
    no_more_splits: bool,
    /// The enumerator is gone (its side of `events` closed).
    enumerator_gone: bool,
    shared: SharedHandles,
}

impl Links {
    pub(super) fn new(
        events: mpsc::UnboundedReceiver<ReaderEvent>,
        notices: mpsc::UnboundedSender<ReaderNotice>,
        shared: SharedHandles,
    ) -> Self {
        Self {
            events,
            notices,
            no_more_splits: false,
            enumerator_gone: false,
            shared,
        }
    }

    /// An event the enumerator already sent, if any.
    pub(super) fn try_event(&mut self) -> Option<ReaderEvent> {
        self.events.try_recv().ok()
    }

    /// The enumerator's next event; `None` once, when the enumerator is gone (after
    /// which this waits forever).
    pub(super) async fn event(&mut self) -> Option<ReaderEvent> {
        if self.enumerator_gone {
            return std::future::pending().await;
        }
        let event = self.events.recv().await;
        self.enumerator_gone = event.is_none();
        event
    }

    /// Tells the enumerator (which may be gone: then nobody listens).
    pub(super) fn notice(&self, notice: ReaderNotice) {
        let _ = self.notices.send(notice);
    }

    pub(super) fn set_no_more_splits(&mut self) {
        self.no_more_splits = true;
    }

    pub(super) fn no_more_splits(&self) -> bool {
        self.no_more_splits
    }

    pub(super) fn clients(&self) -> &Arc<ClientShare> {
        &self.shared.clients
    }

    pub(super) fn retained(&self) -> &Retained {
        &self.shared.retained
    }

    pub(super) fn active(&self) -> &ActiveClusters {
        &self.shared.active
    }

    pub(super) fn stream_index(&self) -> &StreamIndex {
        &self.shared.stream_index
    }
}
