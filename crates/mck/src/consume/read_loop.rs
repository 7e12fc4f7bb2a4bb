//! The read loop: records rendered to the output, checkpoints on the interval (and
//! when a group wants partitions back), the progress line and the metadata file's
//! state, until the run completes, a signal comes or the output goes away.

use super::*;

/// What the read loop works with besides the stream and the output.
pub(super) struct Run<'a> {
    pub(super) args: &'a ConsumeArgs,
    pub(super) service: &'a Service,
    pub(super) layout: &'a Layout,
    pub(super) store: Option<&'a Arc<FileCheckpointStore>>,
    pub(super) commits: Option<&'a Commits>,
    /// Whether the run checkpoints: it has a checkpoint directory or a group.
    pub(super) checkpointing: bool,
}

/// Reads and writes until the run ends, and says why it ended.
pub(super) async fn read_loop(
    run: &Run<'_>,
    stream: &mut Input,
    output: &mut Output,
    sigint: &mut tokio::signal::unix::Signal,
    sigterm: &mut tokio::signal::unix::Signal,
) -> Result<End, String> {
    let args = run.args;
    let checkpointing = run.checkpointing;
    let mut ticker = tokio::time::interval(args.checkpoint_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    // Wakes the loop to redraw progress, notice metadata-file errors and a pipe whose
    // reader has gone while no record comes.
    let mut status = tokio::time::interval(Duration::from_millis(250));
    // The live line is drawn on stderr when records do not go to the same terminal.
    let records_elsewhere = args.output.is_some() || !std::io::stdout().is_terminal();
    let mut progress = Progress::new(records_elsewhere);
    let mut lines = Lines {
        output,
        layout: run.layout,
        partitions: args.partitions.iter().copied().collect(),
        line: Vec::with_capacity(512),
        parts: JsonParts::default(),
        records: 0,
        unflushed: 0,
        flushed_at: Instant::now(),
    };
    let mut metadata_error: Option<String> = None;
    let group_mode = matches!(args.scale_out, ScaleOut::KafkaGroup);
    let mut ack_check = tokio::time::interval(Duration::from_millis(100));
    ack_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let asks = stream
        .acknowledgement_requests()
        .filter(|_| group_mode && checkpointing);

    // Partitions ended by a mirror that diverged: the run reads the others on, and a
    // bounded run that completes says so in its exit status.
    let mut ended_partitions = 0usize;
    let end: Result<End, String> = loop {
        if args.count.is_some_and(|n| lines.records >= n) {
            break Ok(End::Completed);
        }
        // No record is taken that may not be written.
        let room = args.count.map_or(usize::MAX, |n| {
            usize::try_from(n - lines.records).unwrap_or(usize::MAX)
        });
        tokio::select! {
            biased;
            _ = sigint.recv() => break Ok(End::Signal("SIGINT")),
            _ = sigterm.recv() => break Ok(End::Signal("SIGTERM")),
            _ = ticker.tick(), if checkpointing => {
                if let Err(end) = keep_going(lines.checkpoint(stream, run).await) {
                    break end;
                }
            }
            // Group mode: a cluster's group takes partitions back once what was
            // written of them is acknowledged; checkpoint (and commit) as soon as
            // asked, and again on the tick while it is still wanted.
            () = async { asks.as_ref().expect("guarded").asked().await }, if asks.is_some() => {
                if let Err(end) = keep_going(lines.checkpoint(stream, run).await) {
                    break end;
                }
            }
            _ = ack_check.tick(), if group_mode && checkpointing => {
                if stream.acknowledgement_wanted()
                    && let Err(end) = keep_going(lines.checkpoint(stream, run).await)
                {
                    break end;
                }
            }
            next = stream.next(room) => match next {
                None if ended_partitions > 0 => break Ok(End::PartitionsEnded(ended_partitions)),
                None => break Ok(End::Completed),
                Some(Ok(Read::Batch(batch))) => {
                    if let Err(end) = keep_going(lines.batch(&batch)) {
                        break end;
                    }
                    continue;
                }
                Some(Ok(Read::One(item))) => {
                    if let Err(end) = keep_going(lines.one(&item)) {
                        break end;
                    }
                    continue;
                }
                Some(Err(e @ SourceError::MirrorDiverged(_))) => {
                    progress.finish();
                    crate::stdio::say!("mck: error: {e} (this partition ends; the others read on)");
                    ended_partitions += 1;
                    progress = Progress::new(records_elsewhere);
                }
                Some(Err(e)) if e.reads_on() => {
                    progress.finish();
                    crate::stdio::say!("mck: warning: {e} (reading on)");
                    progress = Progress::new(records_elsewhere);
                }
                // The Kafka stage of a --backfill run starts here.
                Some(Err(e)) => break Err(located(e, run.service, args).await),
            },
            // Taken only when no record is ready: the reader is idle, so what was
            // written goes out now.
            () = std::future::ready(()), if lines.unflushed > 0 => {
                if let Err(end) = keep_going(lines.flush()) {
                    break end;
                }
            }
            _ = status.tick() => {
                if lines.output.reader_gone() {
                    break Ok(End::OutputClosed);
                }
            }
        }
        note_metadata_state(
            run.service,
            &mut metadata_error,
            &mut progress,
            records_elsewhere,
        );
        let watermark = if progress.due() {
            stream.watermark()
        } else {
            None
        };
        progress.tick(
            lines.records,
            watermark,
            metadata_error.as_deref().map(|_| "metadata file invalid"),
        );
    };
    progress.finish();
    end
}

/// The file service warns about a rejected edit itself; the run says when the file is
/// in force again, and the progress line shows the state meanwhile.
fn note_metadata_state(
    service: &Service,
    metadata_error: &mut Option<String>,
    progress: &mut Progress,
    records_elsewhere: bool,
) {
    let now_error = service.last_error();
    if now_error != *metadata_error {
        if now_error.is_none() {
            progress.finish();
            crate::stdio::say!("mck: metadata: the file is valid again and in force");
            *progress = Progress::new(records_elsewhere);
        }
        *metadata_error = now_error;
    }
}

/// The records the loop renders and writes, and the lines of them that wait in the
/// output's buffer since its last flush.
struct Lines<'a> {
    output: &'a mut Output,
    layout: &'a Layout,
    /// `--partition`: only these (all when empty).
    partitions: BTreeSet<i32>,
    line: Vec<u8>,
    /// JSON's parts of the last partition written.
    parts: JsonParts,
    /// Records written.
    records: u64,
    /// Lines written since the last flush, and when that flush was.
    unflushed: u32,
    flushed_at: Instant,
}

impl Lines<'_> {
    /// Checkpoints, which flushes the output first.
    async fn checkpoint(&mut self, stream: &mut Input, run: &Run<'_>) -> Result<(), WriteError> {
        self.flushed();
        checkpoint(stream, self.output, run.store, run.commits).await
    }

    fn flushed(&mut self) {
        (self.unflushed, self.flushed_at) = (0, Instant::now());
    }

    /// Hands what waits in the buffer to the operating system.
    fn flush(&mut self) -> Result<(), WriteError> {
        self.output.flush()?;
        self.flushed();
        Ok(())
    }

    /// Writes a batch. While batches keep coming, the buffer still goes out every
    /// FLUSH_EVERY.
    fn batch(&mut self, batch: &RecordBatch<()>) -> Result<(), WriteError> {
        let mut written = 0;
        write_batch(
            batch,
            &self.partitions,
            (self.layout, &mut self.parts),
            &mut self.line,
            self.output,
            &mut written,
        )?;
        self.records += u64::from(written);
        self.unflushed += written;
        if self.unflushed > 0 && self.flushed_at.elapsed() >= FLUSH_EVERY {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes one record, unless the partition filter leaves it out. While records
    /// keep coming, the buffer still goes out every FLUSH_EVERY; the clock is read
    /// only every CLOCK_EVERY lines.
    fn one(&mut self, item: &Item) -> Result<(), WriteError> {
        match item {
            HybridRecord::Kafka(r)
                if !self.partitions.is_empty() && !self.partitions.contains(&r.partition) =>
            {
                return Ok(());
            }
            HybridRecord::Kafka(r) => render(r, self.layout, &mut self.line),
            HybridRecord::File(r) => render_file(r, self.layout, &mut self.line),
        }
        self.output.write(&self.line)?;
        self.records += 1;
        self.unflushed += 1;
        if self.unflushed.is_multiple_of(CLOCK_EVERY) && self.flushed_at.elapsed() >= FLUSH_EVERY {
            self.flush()?;
        }
        Ok(())
    }
}

/// Writes the records of `batch` that pass the partition filter (all when it is
/// empty) in `layout`: rendered in place into `lines`, handed to `output` in chunks
/// of about [`WRITE_CHUNK`] bytes. `written` counts the records rendered.
fn write_batch(
    batch: &RecordBatch<()>,
    partitions: &BTreeSet<i32>,
    (layout, parts): (&Layout, &mut JsonParts),
    lines: &mut Vec<u8>,
    output: &mut Output,
    written: &mut u32,
) -> Result<(), WriteError> {
    lines.clear();
    for r in batch {
        if !partitions.is_empty() && !partitions.contains(&r.partition) {
            continue;
        }
        append_with(&r, layout, parts, lines);
        *written += 1;
        if lines.len() >= WRITE_CHUNK {
            output.write(lines)?;
            lines.clear();
        }
    }
    if lines.is_empty() {
        Ok(())
    } else {
        output.write(lines)
    }
}
