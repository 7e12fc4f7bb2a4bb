//! The fetch threads of one reader, started as clusters come.

use super::thread::{NewFetcher, serve};
use super::*;

/// One of a pool's threads, as the pool sees it.
struct Worker<D: Deserializer> {
    thread: Thread,
    join: Option<std::thread::JoinHandle<()>>,
    intake: Sender<NewFetcher<D>>,
    /// Fetchers it serves now.
    load: Arc<std::sync::atomic::AtomicUsize>,
}

/// The fetch threads of one reader: at most one per core, started as clusters come.
/// Dropping the pool lets each thread end once its fetchers are stopped.
pub(crate) struct FetchPool<D: Deserializer> {
    workers: Vec<Worker<D>>,
    max: usize,
}

impl<D: Deserializer> FetchPool<D> {
    pub fn new() -> Self {
        let max = std::thread::available_parallelism().map_or(2, |n| n.get());
        Self {
            workers: Vec::new(),
            max,
        }
    }

    /// Starts a fetcher of `cluster` on the least busy thread (a new one while there
    /// are fewer than the cores); the thread makes the consumer, and an error in that
    /// is the fetcher's first answer ([`Answer::Gone`]).
    pub fn start(
        &mut self,
        cluster: Arc<str>,
        properties: ClientProperties,
        deserializer: Arc<D>,
        settings: FetcherSettings,
    ) -> Result<Fetcher<D::Value>, SourceError> {
        use std::sync::atomic::Ordering;
        let least = self
            .workers
            .iter()
            .enumerate()
            .min_by_key(|(_, w)| w.load.load(Ordering::Relaxed))
            .map(|(i, w)| (i, w.load.load(Ordering::Relaxed)));
        let index = match least {
            Some((i, load)) if load == 0 || self.workers.len() >= self.max => i,
            _ => {
                self.workers.push(Worker::spawn(self.workers.len())?);
                self.workers.len() - 1
            }
        };
        let worker = &self.workers[index];
        let (commands, inbox) = mpsc::channel();
        let (outbox, replies) = mpsc::channel();
        let (closed_tx, closed) = mpsc::channel();
        let wake = Arc::new(Wake::new(worker.thread.clone()));
        worker.load.fetch_add(1, Ordering::Relaxed);
        let handed = worker.intake.send(NewFetcher {
            cluster,
            wake: wake.clone(),
            props: properties.clone(),
            deserializer,
            settings,
            inbox,
            outbox,
            closed: closed_tx,
        });
        if handed.is_err() {
            return Err(SourceError::internal(
                "a fetcher thread",
                "it ended without being stopped",
            ));
        }
        worker.thread.unpark();
        Ok(Fetcher {
            properties,
            commands,
            replies,
            wake,
            closed: Some(closed),
            sent: 0,
            asked: 0,
            removed: Vec::new(),
            gone: false,
        })
    }
}

impl<D: Deserializer> FetchPool<D> {
    /// Lets the threads end once their fetchers are stopped; returns them, to be
    /// joined.
    pub fn stop(&mut self) -> Vec<std::thread::JoinHandle<()>> {
        std::mem::take(&mut self.workers)
            .into_iter()
            .filter_map(|mut w| {
                let thread = w.thread.clone();
                let join = w.join.take();
                drop(w);
                thread.unpark();
                join
            })
            .collect()
    }
}

impl<D: Deserializer> Drop for FetchPool<D> {
    fn drop(&mut self) {
        drop(self.stop());
    }
}

impl<D: Deserializer> Worker<D> {
    fn spawn(index: usize) -> Result<Self, SourceError> {
        let (intake, arrivals) = mpsc::channel();
        let load = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        // Events of the thread go where the reader's go (a subscriber set for a scope).
        let dispatch = tracing::dispatcher::get_default(|d| d.clone());
        let join = std::thread::Builder::new()
            .name(format!("mck-fetch-{index}"))
            .spawn({
                let load = load.clone();
                move || {
                    let _guard = crate::base::dispatch::enter(&dispatch);
                    serve::<D>(arrivals, &load);
                }
            })
            .map_err(|e| SourceError::internal("starting a fetcher thread", e))?;
        Ok(Self {
            thread: join.thread().clone(),
            join: Some(join),
            intake,
            load,
        })
    }
}
