//! Fetchers that ended (most often one whose consumer or connections could not be
//! opened): each cluster's next fetcher starts after a backoff that doubles while its
//! fetchers keep ending without an answer, and an error is said once while it stays
//! the same. Without it a fetcher that cannot open was started again on every poll,
//! and a program that reads on after errors got the same one in a tight loop.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::SourceError;

/// The first wait before a cluster's fetcher starts again.
const FIRST: Duration = Duration::from_millis(100);

/// The longest (as librdkafka's `reconnect.backoff.max.ms` by default).
const MOST: Duration = Duration::from_secs(10);

/// The clusters whose last fetcher ended without an answer since.
#[derive(Debug, Default)]
pub(super) struct Reopening {
    ended: HashMap<Arc<str>, Ended>,
}

#[derive(Debug)]
struct Ended {
    /// Not started again before this.
    at: Instant,
    backoff: Duration,
    /// The error said last.
    said: String,
}

impl Reopening {
    /// `cluster`'s fetcher ended with `error`: the next starts after the backoff.
    /// True when the error is to be said (it is not the one said last).
    pub(super) fn ended(&mut self, cluster: &Arc<str>, error: &SourceError) -> bool {
        let text = error.to_string();
        let now = Instant::now();
        match self.ended.get_mut(cluster) {
            Some(e) => {
                e.backoff = (e.backoff * 2).min(MOST);
                e.at = now + e.backoff;
                let new = e.said != text;
                e.said = text;
                new
            }
            None => {
                self.ended.insert(
                    cluster.clone(),
                    Ended {
                        at: now + FIRST,
                        backoff: FIRST,
                        said: text,
                    },
                );
                true
            }
        }
    }

    /// Whether a fetcher of `cluster` may start now.
    pub(super) fn may_start(&self, cluster: &str) -> bool {
        self.ended
            .get(cluster)
            .is_none_or(|e| e.at <= Instant::now())
    }

    /// `cluster`'s fetcher answered: the next one starts at once, and its errors are
    /// said again.
    #[inline]
    pub(super) fn answered(&mut self, cluster: &str) {
        if !self.ended.is_empty() {
            self.ended.remove(cluster);
        }
    }

    /// When the next waiting fetcher may start, if one is not due yet. A cluster
    /// whose time has come is started by the call that looks (and until its new
    /// fetcher answers, the reader waits for that answer as for any other).
    pub(super) fn next_start(&self) -> Option<Instant> {
        let now = Instant::now();
        self.ended
            .values()
            .map(|e| e.at)
            .filter(|at| *at > now)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_backoff_doubles_to_its_most_and_an_error_is_said_once() {
        let mut r = Reopening::default();
        let c: Arc<str> = "east".into();
        let refused = SourceError::internal("a fetcher", "cannot open");
        assert!(r.may_start(&c));
        assert!(r.ended(&c, &refused), "said the first time");
        assert!(!r.may_start(&c));
        tokio::time::advance(FIRST).await;
        assert!(r.may_start(&c));
        assert_eq!(r.next_start(), None, "due: nothing to wait for");
        assert!(!r.ended(&c, &refused), "not said again");
        assert_eq!(r.next_start(), Some(Instant::now() + 2 * FIRST));
        for _ in 0..10 {
            r.ended(&c, &refused);
        }
        assert_eq!(r.next_start(), Some(Instant::now() + MOST));
        let other = SourceError::internal("a fetcher", "another reason");
        assert!(r.ended(&c, &other), "a different error is said");
        r.answered(&c);
        assert!(r.may_start(&c));
        assert_eq!(r.next_start(), None);
        assert!(r.ended(&c, &other), "said again after an answer");
    }
}
