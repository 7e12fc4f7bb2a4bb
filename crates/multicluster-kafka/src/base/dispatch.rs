//! Carrying the program's `tracing` subscriber onto the source's own threads.
//!
//! A thread the source starts takes the subscriber in force where it was started (a
//! subscriber a program set for a scope reaches the source's threads too). When none
//! was set there, the thread is left to the global subscriber as it is when an event
//! comes: pinning "no subscriber" would hide everything the thread says from a global
//! subscriber set later, for as long as the thread lives (the fetch threads and the
//! events thread serve every later source of the process).

use tracing::Dispatch;
use tracing::dispatcher::{self, DefaultGuard};
use tracing::subscriber::NoSubscriber;

/// Makes `dispatch` the default of this thread until the guard drops, unless it is
/// "no subscriber".
pub(crate) fn enter(dispatch: &Dispatch) -> Option<DefaultGuard> {
    (!dispatch.is::<NoSubscriber>()).then(|| dispatcher::set_default(dispatch))
}

/// Runs `f` with `dispatch` as the default, unless it is "no subscriber".
pub(crate) fn within<R>(dispatch: &Dispatch, f: impl FnOnce() -> R) -> R {
    if dispatch.is::<NoSubscriber>() {
        f()
    } else {
        dispatcher::with_default(dispatch, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_subscriber_is_not_pinned_and_a_real_one_is() {
        assert!(enter(&Dispatch::none()).is_none());
        let scoped = Dispatch::new(tracing_subscriber_free::Counting);
        let guard = enter(&scoped);
        assert!(guard.is_some());
        assert!(dispatcher::get_default(|d| {
            d.is::<tracing_subscriber_free::Counting>()
        }));
        drop(guard);
        assert_eq!(within(&Dispatch::none(), || 7), 7);
    }

    /// A subscriber of the test's own (the library does not depend on
    /// tracing-subscriber).
    mod tracing_subscriber_free {
        use tracing::span::{Attributes, Id, Record};
        use tracing::{Event, Metadata, Subscriber};

        pub struct Counting;

        impl Subscriber for Counting {
            fn enabled(&self, _: &Metadata<'_>) -> bool {
                true
            }
            fn new_span(&self, _: &Attributes<'_>) -> Id {
                Id::from_u64(1)
            }
            fn record(&self, _: &Id, _: &Record<'_>) {}
            fn record_follows_from(&self, _: &Id, _: &Id) {}
            fn event(&self, _: &Event<'_>) {}
            fn enter(&self, _: &Id) {}
            fn exit(&self, _: &Id) {}
        }
    }
}
