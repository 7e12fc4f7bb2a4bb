//! A reader's fetchers: each cluster the reader has splits on has one, which owns that
//! cluster's consumer and takes, copies and deserializes its records a batch at a
//! time, up to two batches ahead of the reader.
//!
//! The fetchers of a reader run on a few threads of its own ([`FetchPool`]): as many
//! as the machine has cores, each serving the consumers of some of the reader's
//! clusters in turn, one batch at a time. Like the split fetchers of Flink's connector
//! base, this lets a reader with splits on several clusters use more than one core,
//! while the reader's own task only hands batches out and tracks positions; unlike a
//! thread per cluster, a reader of 64 clusters does not keep 64 threads that mostly
//! sleep. A thread sleeps until librdkafka's queue-event callback of one of its
//! consumers, or a command, wakes it.
//!
//! The reader and a fetcher talk in turns: the reader keeps [`DEPTH`] requests for a
//! batch open, the fetcher answers each with one (waiting for records if librdkafka
//! has none), and the reader asks again when it starts handing a batch out. So while
//! the reader hands one batch out, the fetcher can have the next ready and be building
//! the one after: it does not wait for the reader's task to wake up between batches.
//! A cluster has at most [`DEPTH`] batches waiting or being built, plus the one being
//! handed out: memory stays bounded by librdkafka's queue limits plus three batches.
//!
//! Commands (add, remove splits) and requests travel on one channel, in order, and
//! are numbered. An answer says which command the fetcher had applied before it
//! polled, so records of splits removed after that are dropped from it: a split
//! removed and then assigned again never gets records of its old assignment.

use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::thread::Thread;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::base::properties::ClientProperties;
use crate::base::split::{KafkaSplit, SplitId};
use crate::deserializer::Deserializer;
use crate::error::SourceError;
use crate::record::RecordBatch;

use super::fetch_path::{FetchPath, Opening, Polled, Wake};

mod pool;
mod thread;

pub(crate) use pool::FetchPool;

/// How many requests for a batch the reader keeps open with each fetcher.
const DEPTH: u32 = 2;

enum Command {
    /// Splits to read, and when the enumerator sent the first of them.
    Add(u64, Vec<KafkaSplit>, Option<Instant>),
    Remove(u64, Vec<SplitId>),
    /// Stop (`true`) or resume fetching these splits.
    Pause(Vec<SplitId>, bool),
    /// Answer with the next batch (or error), waiting for one if need be.
    Poll,
    Stop,
}

/// What a fetcher answered to a request for a batch.
pub(crate) enum Answer<V> {
    /// Records, a failed record, finished splits or lag facts.
    Batch(RecordBatch<V>, Polled),
    /// An error reading the cluster; ask again to go on.
    Failed(SourceError),
    /// The consumer could not be made, or splits could not be assigned to it: the
    /// thread has ended, and the cluster's splits need a new fetcher.
    Gone(SourceError),
    /// The thread panicked (in the deserializer, most likely): the reader passes the
    /// panic on to its caller, as if the record had been deserialized on its task.
    Panicked(Box<dyn std::any::Any + Send>),
}

struct Reply<V> {
    /// The number of the last command applied before the answer was made.
    applied: u64,
    answer: Answer<V>,
}

/// What a fetcher thread needs besides its cluster and properties.
pub(crate) struct FetcherSettings {
    pub max_batch: usize,
    pub include_headers: bool,
    /// What a split does when its position is outside the log or its topic is gone.
    pub policy: crate::base::config::ReadPolicy,
    /// How long the thread sleeps when librdkafka has nothing, unless woken sooner.
    pub idle: Duration,
    /// Woken after every answer (the reader sleeps on it).
    pub reader: Arc<Notify>,
    /// The program's hooks for the cluster's clients.
    pub hooks: Option<Arc<dyn crate::base::hooks::ClientHooks>>,
    /// The source's clients, one of which the consumer may be.
    pub clients: Arc<crate::kafka::shared::ClientShare>,
    /// The reader's tokio runtime, for the native fetch path.
    pub runtime: Option<tokio::runtime::Handle>,
    /// The reader holds records for a merge in time order: see
    /// [`Opening::held`](crate::reader::fetch_path::Opening::held).
    pub held: bool,
    /// Note each batch's [`Shape`](crate::reader::time_order::shape::Shape) for the merge
    /// (held, and event time is the Kafka timestamp).
    pub shape: bool,
}

/// The reader's handle on a fetcher thread. Dropping it stops the thread, which then
/// closes its consumer.
pub(crate) struct Fetcher<V> {
    /// The client properties the consumer was made with.
    pub properties: ClientProperties,
    commands: Sender<Command>,
    replies: Receiver<Reply<V>>,
    /// Wakes the thread serving this fetcher, for this fetcher.
    wake: Arc<Wake>,
    /// Disconnects once the fetcher is done and its consumer let go.
    closed: Option<Receiver<()>>,
    /// Number of the last command sent.
    sent: u64,
    /// Batches asked for and not answered yet (at most [`DEPTH`]).
    asked: u32,
    /// Splits removed while batches were asked for, by command number.
    removed: Vec<(u64, Vec<SplitId>)>,
    /// The thread has ended: it answered [`Answer::Gone`] or [`Answer::Panicked`].
    gone: bool,
}

impl<V> Fetcher<V> {
    fn send(&mut self, command: Command) {
        // A thread that is gone says so in its answer (the channel then disconnects).
        let _ = self.commands.send(command);
        self.wake.wake();
    }

    /// Starts reading these splits at their positions.
    /// `sent` is when the enumerator sent the first of them (for the `assign` phase
    /// metric), if they come from it.
    pub fn add(&mut self, splits: Vec<KafkaSplit>, sent: Option<Instant>) {
        self.sent += 1;
        let n = self.sent;
        self.send(Command::Add(n, splits, sent));
    }

    /// Stops reading these splits: no record of them fetched before comes out of
    /// [`Self::answer`] any more.
    pub fn remove(&mut self, ids: Vec<SplitId>) {
        self.sent += 1;
        if self.asked > 0 {
            self.removed.push((self.sent, ids.clone()));
        }
        let n = self.sent;
        self.send(Command::Remove(n, ids));
    }

    /// Stops or resumes fetching these splits (watermark alignment); records of
    /// theirs already fetched still come.
    pub fn pause(&mut self, ids: Vec<SplitId>, paused: bool) {
        self.send(Command::Pause(ids, paused));
    }

    /// Asks for batches until [`DEPTH`] are asked for.
    pub fn ask(&mut self) {
        while self.asked < DEPTH {
            self.asked += 1;
            self.send(Command::Poll);
        }
    }

    /// The answer to the request, if it has come.
    pub fn answer(&mut self) -> Option<Answer<V>> {
        let reply = match self.replies.try_recv() {
            Ok(reply) => reply,
            Err(TryRecvError::Empty) => return None,
            Err(TryRecvError::Disconnected) => {
                if self.asked == 0 {
                    return None;
                }
                Reply {
                    applied: self.sent,
                    answer: Answer::Gone(SourceError::internal(
                        "a fetcher thread",
                        "it ended without an answer (it panicked)",
                    )),
                }
            }
        };
        self.asked = self.asked.saturating_sub(1);
        let mut answer = reply.answer;
        match &mut answer {
            Answer::Batch(batch, polled) => drop_stale(batch, polled, &self.removed, reply.applied),
            Answer::Gone(_) | Answer::Panicked(_) => self.gone = true,
            Answer::Failed(_) => {}
        }
        // Later answers were made after this one: removals it had applied are applied
        // in them too.
        self.removed.retain(|(n, _)| *n > reply.applied);
        if self.asked == 0 {
            self.removed.clear();
        }
        Some(answer)
    }

    /// Whether the thread has ended ([`Answer::Gone`] or [`Answer::Panicked`]).
    pub fn is_gone(&self) -> bool {
        self.gone
    }

    /// Stops the fetcher; the handle waits until its consumer is let go.
    pub fn stop(mut self) -> Option<Closed> {
        self.send(Command::Stop);
        self.closed.take().map(Closed)
    }
}

impl<V> Drop for Fetcher<V> {
    fn drop(&mut self) {
        let _ = self.commands.send(Command::Stop);
        self.wake.wake();
    }
}

/// Drops from an answer made after command `applied` the splits of the removals the
/// fetcher had not applied yet when it made it.
fn drop_stale<V>(
    batch: &mut RecordBatch<V>,
    polled: &mut Polled,
    removed: &[(u64, Vec<SplitId>)],
    applied: u64,
) {
    for (n, ids) in removed {
        if *n > applied {
            drop_splits(batch, polled, ids);
        }
    }
}

/// Drops what `batch` and `polled` hold of these splits.
pub(crate) fn drop_splits<V>(batch: &mut RecordBatch<V>, polled: &mut Polled, ids: &[SplitId]) {
    let before = batch.len();
    batch.drop_splits(ids);
    if batch.len() != before {
        polled.shape = None;
    }
    polled.records = batch.entries.len();
    if polled.failed.as_ref().is_some_and(|f| {
        ids.iter()
            .any(|id| id.partition == f.partition && *id.topic == *f.topic)
    }) {
        polled.failed = None;
    }
    polled.finished.retain(|id| !ids.contains(id));
    polled.truncated.retain(|(id, _)| !ids.contains(id));
}

/// Waits until a stopped fetcher has let its consumer go.
pub(crate) struct Closed(Receiver<()>);

impl Closed {
    /// Blocks until then.
    pub fn wait(self) {
        let _ = self.0.recv();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deserializer::DeserializeError;
    use crate::reader::fetch_path::Failed;
    use crate::record::BatchEntry;

    fn id(topic: &str, partition: i32) -> SplitId {
        SplitId {
            cluster: "a".into(),
            topic: topic.into(),
            partition,
        }
    }

    /// A batch of cluster `a` with offsets 0..3 of t/0, t/1 and u/0, a failed record
    /// of t/1 after them, and t/0 and u/0 finished.
    fn answer() -> (RecordBatch<u32>, Polled) {
        let mut batch = RecordBatch::new("a".into());
        let (t, u): (Arc<str>, Arc<str>) = ("t".into(), "u".into());
        let mut polled = Polled::default();
        for (topic, partition) in [(&t, 0), (&t, 1), (&u, 0)] {
            let k = batch.topic_index(topic);
            for offset in 0..3 {
                batch
                    .entries
                    .push(BatchEntry::bare(k, partition, offset, offset as u32));
                polled.records += 1;
            }
        }
        polled.failed = Some(Box::new(Failed {
            topic: t.clone(),
            partition: 1,
            offset: 3,
            timestamp: None,
            hash: 0,
            bytes: 1,
            error: DeserializeError {
                cluster: "a".into(),
                topic: "t".into(),
                partition: 1,
                offset: 3,
                reason: "bad".into(),
            },
        }));
        polled.finished = vec![id("t", 0), id("u", 0)];
        (batch, polled)
    }

    fn splits_in(batch: &RecordBatch<u32>) -> Vec<(String, i32)> {
        let mut v: Vec<(String, i32)> = batch
            .entries
            .iter()
            .map(|e| (batch.topics[e.topic as usize].to_string(), e.partition))
            .collect();
        v.dedup();
        v
    }

    #[test]
    fn dropping_splits_removes_their_records_failure_and_finish_and_nothing_else() {
        let (mut batch, mut polled) = answer();
        drop_splits(&mut batch, &mut polled, &[id("t", 1), id("u", 0)]);
        assert_eq!(splits_in(&batch), vec![("t".to_string(), 0)]);
        assert_eq!(polled.records, 3);
        assert!(polled.failed.is_none());
        assert_eq!(polled.finished, vec![id("t", 0)]);
    }

    /// A handle with no thread behind it: the test plays the fetcher's side of the
    /// channels.
    fn handle() -> (Fetcher<u32>, Receiver<Command>, Sender<Reply<u32>>) {
        let (commands, inbox) = mpsc::channel();
        let (outbox, replies) = mpsc::channel();
        let fetcher = Fetcher {
            properties: ClientProperties::default(),
            commands,
            replies,
            wake: Arc::new(Wake::new(std::thread::current())),
            closed: None,
            sent: 0,
            asked: 0,
            removed: Vec::new(),
            gone: false,
        };
        (fetcher, inbox, outbox)
    }

    #[test]
    fn every_answer_made_before_a_removal_loses_the_removed_split() {
        let (mut fetcher, inbox, outbox) = handle();
        fetcher.ask();
        let polls = inbox
            .try_iter()
            .filter(|c| matches!(c, Command::Poll))
            .count();
        assert_eq!(
            polls, DEPTH as usize,
            "the reader keeps DEPTH requests open"
        );
        // Both open requests were answered before the fetcher applied removal 1.
        fetcher.remove(vec![id("t", 0)]);
        for _ in 0..2 {
            let (batch, polled) = answer();
            outbox
                .send(Reply {
                    applied: 0,
                    answer: Answer::Batch(batch, polled),
                })
                .unwrap();
        }
        for n in 0..2 {
            let Some(Answer::Batch(batch, _)) = fetcher.answer() else {
                panic!("answer {n} is a batch");
            };
            assert_eq!(
                splits_in(&batch),
                vec![("t".to_string(), 1), ("u".to_string(), 0)],
                "answer {n}"
            );
        }
        // Split t/0 assigned again (command 2); an answer made after it keeps t/0.
        fetcher.add(Vec::new(), None);
        fetcher.ask();
        let (batch, polled) = answer();
        outbox
            .send(Reply {
                applied: 2,
                answer: Answer::Batch(batch, polled),
            })
            .unwrap();
        let Some(Answer::Batch(batch, _)) = fetcher.answer() else {
            panic!("a batch");
        };
        assert_eq!(splits_in(&batch).len(), 3);
        assert!(fetcher.answer().is_none());
    }

    #[test]
    fn an_answer_keeps_the_splits_of_removals_applied_before_it_was_made() {
        // Removal 3 was applied before the answer (made after command 4): a split
        // removed then and assigned again by command 4 keeps its new records. Removal
        // 5 came after: its split's records are from before the removal.
        let (mut batch, mut polled) = answer();
        let removed = vec![(3, vec![id("t", 0)]), (5, vec![id("u", 0)])];
        drop_stale(&mut batch, &mut polled, &removed, 4);
        assert_eq!(
            splits_in(&batch),
            vec![("t".to_string(), 0), ("t".to_string(), 1)]
        );
        assert_eq!(polled.records, 6);
        assert!(polled.failed.is_some());
        assert_eq!(polled.finished, vec![id("t", 0)]);
    }
}
