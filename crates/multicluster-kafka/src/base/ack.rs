//! Group mode's request for an acknowledgement: set by the enumerator while a
//! revocation waits for the program to commit what it was handed out, read by the
//! program, which can also wait to be asked rather than look on a timer.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

/// Whether group mode wants the program to acknowledge (commit) what it was handed
/// out, shared between the source's enumerator and the program
/// ([`SourceCoordinator::acknowledgement_requests`](crate::SourceCoordinator::acknowledgement_requests)).
#[derive(Clone, Debug, Default)]
pub struct AckRequests(Arc<Inner>);

#[derive(Debug, Default)]
struct Inner {
    wanted: AtomicBool,
    asked: Notify,
}

impl AckRequests {
    /// Asks for an acknowledgement (the program is woken if it was not asked
    /// already), or stops asking.
    pub(crate) fn set(&self, wanted: bool) {
        let was = self.0.wanted.swap(wanted, Ordering::SeqCst);
        if wanted && !was {
            // One waiter (the program's loop); kept for it if it is not waiting yet.
            self.0.asked.notify_one();
        }
    }

    /// Whether an acknowledgement is wanted.
    pub fn get(&self) -> bool {
        self.0.wanted.load(Ordering::SeqCst)
    }

    /// Returns once an acknowledgement is asked for after the last return (or was
    /// asked for before the first call).
    pub async fn asked(&self) {
        self.0.asked.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_request_wakes_the_waiting_program_and_one_made_before_it_waited_too() {
        let ack = AckRequests::default();
        let waiting = tokio::spawn({
            let ack = ack.clone();
            async move { ack.asked().await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        ack.set(true);
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("woken")
            .unwrap();
        assert!(ack.get());
        ack.set(true);
        let again = tokio::time::timeout(Duration::from_millis(50), ack.asked()).await;
        assert!(
            again.is_err(),
            "asked again while still asked: not woken again"
        );
        ack.set(false);
        assert!(!ack.get());
        ack.set(true);
        tokio::time::timeout(Duration::from_secs(5), ack.asked())
            .await
            .expect("asked before waiting");
        let again = tokio::time::timeout(Duration::from_millis(50), ack.asked()).await;
        assert!(again.is_err(), "asked once, woken once");
    }
}
