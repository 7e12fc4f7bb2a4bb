//! The bytes of fetch answers that all the native fetches of one source may hold
//! queued for their readers, together: a source reading many clusters holds one
//! budget, not one per cluster.
//!
//! The budget is the largest `queued.max.messages.kbytes` of the clusters fetched so
//! far. A cluster fetches while the source's queued answers are within it and its own
//! are within its own budget; a cluster with nothing queued may always fetch, so one
//! whose reader waits for another cluster's records (time order, alignment) can never
//! be starved by the others' backlogs. What a source holds is so at most the budget
//! plus one answer per cluster.

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;

/// A source's budget of queued answer bytes, shared by its native fetches.
#[derive(Debug, Default)]
pub struct Budget {
    limit: AtomicUsize,
    used: AtomicUsize,
    /// Woken when the queued bytes fall back below the limit.
    room: Notify,
}

impl Budget {
    /// Raises the limit to `bytes` if it is lower (a cluster with a larger budget
    /// starts fetching).
    pub fn raise_to(&self, bytes: usize) {
        if self.limit.fetch_max(bytes, Ordering::SeqCst) < bytes {
            self.room.notify_waiters();
        }
    }

    /// Whether the queued answers are below the limit.
    pub fn has_room(&self) -> bool {
        self.used.load(Ordering::SeqCst) < self.limit.load(Ordering::SeqCst)
    }

    /// Bytes of answers queued.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::SeqCst)
    }

    /// Counts an answer of `bytes` queued.
    pub fn add(&self, bytes: usize) {
        self.used.fetch_add(bytes, Ordering::SeqCst);
    }

    /// Counts `bytes` of answers taken (or dropped); wakes the fetches waiting for
    /// room when there is some again.
    pub fn release(&self, bytes: usize) {
        if bytes == 0 {
            return;
        }
        let before = self
            .used
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |u| {
                Some(u.saturating_sub(bytes))
            })
            .unwrap_or(0);
        let limit = self.limit.load(Ordering::SeqCst);
        if before >= limit && before.saturating_sub(bytes) < limit {
            self.room.notify_waiters();
        }
    }

    /// Completes once room may have come back (see [`Notify::notified`]).
    pub fn room(&self) -> tokio::sync::futures::Notified<'_> {
        self.room.notified()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_comes_and_goes_with_the_queued_bytes() {
        let budget = Budget::default();
        assert!(!budget.has_room(), "no limit before a cluster raises it");
        budget.raise_to(100);
        budget.raise_to(50);
        assert!(budget.has_room());
        budget.add(60);
        budget.add(60);
        assert!(!budget.has_room());
        assert_eq!(budget.used(), 120);
        budget.release(20);
        assert!(!budget.has_room(), "at the limit");
        budget.release(30);
        assert!(budget.has_room());
        budget.release(1_000);
        assert_eq!(budget.used(), 0);
    }

    #[tokio::test]
    async fn a_release_below_the_limit_wakes_the_waiting() {
        let budget = std::sync::Arc::new(Budget::default());
        budget.raise_to(10);
        budget.add(15);
        let waiting = {
            let budget = budget.clone();
            tokio::spawn(async move {
                let room = budget.room();
                tokio::pin!(room);
                room.as_mut().enable();
                while !budget.has_room() {
                    room.as_mut().await;
                    room.set(budget.room());
                    room.as_mut().enable();
                }
            })
        };
        tokio::task::yield_now().await;
        budget.release(3);
        budget.release(3);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .expect("woken once below the limit")
            .unwrap();
    }
}
