//! A fetch thread: the fetchers it was handed, each given a turn to apply its commands
//! and answer a request for a batch from its fetch path.

use super::*;
use crate::reader::cluster_consumer::ClusterConsumer;

/// A fetcher handed to a thread: its cluster, channels and what it needs to make its
/// consumer.
pub(super) struct NewFetcher<D: Deserializer> {
    pub(super) cluster: Arc<str>,
    pub(super) wake: Arc<Wake>,
    pub(super) props: ClientProperties,
    pub(super) deserializer: Arc<D>,
    pub(super) settings: FetcherSettings,
    pub(super) inbox: Receiver<Command>,
    pub(super) outbox: Sender<Reply<D::Value>>,
    pub(super) closed: Sender<()>,
}

/// A fetcher on its thread.
struct Running<D: Deserializer> {
    cluster: Arc<str>,
    wake: Arc<Wake>,
    consumer: Box<dyn FetchPath<D>>,
    deserializer: Arc<D>,
    settings: FetcherSettings,
    inbox: Receiver<Command>,
    outbox: Sender<Reply<D::Value>>,
    /// Number of the last command applied.
    applied: u64,
    /// Batches asked for and not answered yet.
    asked: u32,
    /// Key and value bytes per record of the last batch (0 before the first).
    record_bytes: usize,
    /// Splits added already at their stop, reported with the next answer.
    done: Vec<SplitId>,
    closed: Sender<()>,
}

/// About the most key and value bytes a batch holds: fewer records than the batch
/// size when they are large, so a reader's batches ahead hold a few MiB, not the
/// batch size times large records.
const BATCH_BYTES: usize = 4 << 20;

/// How many records to ask the fetch path for: `max_batch`, or fewer when records
/// of `record_bytes` (as the last batch's were) would pass [`BATCH_BYTES`].
fn batch_records(max_batch: usize, record_bytes: usize) -> usize {
    max_batch.min(BATCH_BYTES / record_bytes.max(1)).max(1)
}

/// What one turn of a fetcher did.
enum Turn {
    /// Answered a request, or applied commands: give it another turn.
    Busy,
    /// Waiting for records.
    Waiting,
    /// Nothing asked of it.
    Idle,
    /// Stopped, or its reader is gone.
    Ended,
}

impl<D: Deserializer> Running<D> {
    fn reply(&self, applied: u64, answer: Answer<D::Value>) -> bool {
        let sent = self.outbox.send(Reply { applied, answer }).is_ok();
        self.settings.reader.notify_one();
        sent
    }

    /// Applies the commands that came, then answers one request if it can.
    fn turn(&mut self) -> Turn {
        let mut busy = false;
        loop {
            match self.inbox.try_recv() {
                Ok(Command::Add(n, splits, sent)) => {
                    self.applied = n;
                    busy = true;
                    match self.consumer.add(splits) {
                        Ok(ids) => {
                            self.done.extend(ids);
                            if let Some(sent) = sent {
                                crate::metrics::phase("assign", sent.elapsed());
                            }
                        }
                        Err(e) => {
                            // The reader starts a new fetcher for all of the cluster's
                            // splits, at their positions: none is left unassigned.
                            self.reply(n, Answer::Gone(e));
                            return Turn::Ended;
                        }
                    }
                }
                Ok(Command::Remove(n, ids)) => {
                    self.applied = n;
                    self.done.retain(|id| !ids.contains(id));
                    self.consumer.remove(&ids);
                }
                Ok(Command::Pause(ids, paused)) => self.consumer.pause(&ids, paused),
                Ok(Command::Poll) => {
                    self.asked += 1;
                    busy = true;
                }
                Ok(Command::Stop) | Err(TryRecvError::Disconnected) => return Turn::Ended,
                Err(TryRecvError::Empty) => break,
            }
        }
        if self.asked == 0 {
            return if busy { Turn::Busy } else { Turn::Idle };
        }
        let mut batch = RecordBatch::new(self.cluster.clone());
        let max = batch_records(self.settings.max_batch, self.record_bytes);
        let answer = match self
            .consumer
            .poll(self.deserializer.as_ref(), max, &mut batch)
        {
            Ok(mut polled) => {
                if let Some(per) = polled.bytes.checked_div(polled.records) {
                    self.record_bytes = per;
                }
                polled.finished.append(&mut self.done);
                if self.settings.shape && polled.records > 0 {
                    polled.shape = Some(Box::new(crate::reader::time_order::shape::Shape::of(
                        &batch,
                    )));
                }
                if polled.records > 0
                    || polled.failed.is_some()
                    || !polled.finished.is_empty()
                    || !polled.high_watermarks.is_empty()
                    || !polled.truncated.is_empty()
                {
                    Answer::Batch(batch, polled)
                } else {
                    return Turn::Waiting;
                }
            }
            Err(e) => Answer::Failed(e),
        };
        self.asked -= 1;
        if self.reply(self.applied, answer) {
            Turn::Busy
        } else {
            Turn::Ended
        }
    }

    /// Lets the consumer go: what the reader read with it is unassigned at once; the
    /// client, when this was its last holder, is closed on a thread of its own so a
    /// cluster that does not answer holds no other fetcher. `closed` disconnects
    /// after that.
    fn end(self) {
        self.consumer.close(self.closed);
    }
}

/// A fetch thread: makes the consumers of the fetchers it is handed, and gives each
/// a turn until it is stopped; ends when the pool is gone and its fetchers with it.
pub(super) fn serve<D: Deserializer>(
    arrivals: Receiver<NewFetcher<D>>,
    load: &std::sync::atomic::AtomicUsize,
) {
    use std::sync::atomic::Ordering;
    let mut running: Vec<Running<D>> = Vec::new();
    let mut idle = Duration::from_millis(100);
    let mut pool_gone = false;
    // Every fetcher gets a turn at least this often, woken or not: bounded splits
    // that end without a record at their stop are found so.
    let mut last_sweep = std::time::Instant::now();
    loop {
        loop {
            match arrivals.try_recv() {
                Ok(new) => {
                    idle = new.settings.idle;
                    match open::<D>(Opening {
                        cluster: new.cluster.clone(),
                        props: &new.props,
                        wake: new.wake.clone(),
                        include_headers: new.settings.include_headers,
                        policy: new.settings.policy,
                        hooks: new.settings.hooks.clone(),
                        clients: &new.settings.clients,
                        runtime: new.settings.runtime.clone(),
                        held: new.settings.held,
                    }) {
                        Ok(consumer) => running.push(Running {
                            cluster: new.cluster,
                            wake: new.wake,
                            consumer,
                            deserializer: new.deserializer,
                            settings: new.settings,
                            inbox: new.inbox,
                            outbox: new.outbox,
                            applied: 0,
                            asked: 0,
                            record_bytes: 0,
                            done: Vec::new(),
                            closed: new.closed,
                        }),
                        Err(e) => {
                            let _ = new.outbox.send(Reply {
                                applied: 0,
                                answer: Answer::Gone(e),
                            });
                            new.settings.reader.notify_one();
                            load.fetch_sub(1, Ordering::Relaxed);
                        }
                    }
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    pool_gone = true;
                    break;
                }
            }
        }
        if pool_gone && running.is_empty() {
            return;
        }
        let (mut busy, mut waiting) = (false, false);
        let sweep = last_sweep.elapsed() >= idle;
        if sweep {
            last_sweep = std::time::Instant::now();
        }
        let mut i = 0;
        while i < running.len() {
            let f = &mut running[i];
            // Only the fetchers woken (by records, a command or a turn that left
            // work), so a wake-up costs the same at 2 clusters as at 64.
            if !f.wake.take() && !sweep {
                if f.asked > 0 {
                    waiting = true;
                }
                i += 1;
                continue;
            }
            // A panic (in the deserializer, most likely) ends only its fetcher: the
            // reader passes it on to its caller, as if the record had been
            // deserialized on its task.
            let turn = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f.turn()))
                .unwrap_or_else(|payload| {
                    let _ = f.outbox.send(Reply {
                        applied: 0,
                        answer: Answer::Panicked(payload),
                    });
                    Turn::Ended
                });
            match turn {
                Turn::Busy => {
                    busy = true;
                    // It may have more: another turn.
                    running[i].wake.again();
                }
                Turn::Waiting => waiting = true,
                Turn::Idle => {}
                Turn::Ended => {
                    let f = running.swap_remove(i);
                    // Whatever ended it, the reader looks at its answers.
                    f.settings.reader.notify_one();
                    f.end();
                    load.fetch_sub(1, Ordering::Relaxed);
                    // Look again (the pool may be gone and this the last fetcher).
                    busy = true;
                    continue;
                }
            }
            i += 1;
        }
        if busy {
            continue;
        }
        if waiting {
            // librdkafka wakes the thread when records come; the timeout also finds
            // bounded splits that end without a record at their stop.
            std::thread::park_timeout(idle);
        } else {
            // Every command and every new fetcher wakes the thread.
            std::thread::park();
        }
    }
}

/// Opens the fetch path of one cluster for a fetcher: the native one or librdkafka's
/// consumer, as the cluster's `fetch.backend` says.
fn open<D: Deserializer>(opening: Opening<'_>) -> Result<Box<dyn FetchPath<D>>, SourceError> {
    if crate::reader::native_fetch::choose(&opening)? {
        return Ok(Box::new(crate::reader::native_fetch::NativeFetch::open(
            opening,
        )?));
    }
    let consumer = ClusterConsumer::create(
        opening.cluster,
        opening.props,
        opening.wake,
        opening.include_headers,
        opening.policy,
        opening.hooks,
        opening.clients,
    )?;
    Ok(Box::new(consumer))
}

#[cfg(test)]
mod tests {
    use super::batch_records;

    #[test]
    fn a_batch_of_large_records_holds_about_four_mebibytes() {
        // Before the first batch, and for small records: the batch size.
        assert_eq!(batch_records(4096, 0), 4096);
        assert_eq!(batch_records(4096, 100), 4096);
        assert_eq!(batch_records(4096, 1024), 4096);
        // Larger ones: fewer, down to one.
        assert_eq!(batch_records(4096, 2048), 2048);
        assert_eq!(batch_records(4096, 10 * 1024), 409);
        assert_eq!(batch_records(1024, 16 << 20), 1);
    }
}
