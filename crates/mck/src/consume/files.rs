//! The run's files: the checkpoint directory's lock, the output file cut back to
//! what the restored checkpoint covers, durable writes, and each checkpoint saved
//! after the output it covers.

use super::*;

/// The error line for a checkpoint directory that could not be opened: another run's
/// lock says what to do about it.
pub(super) fn lock_error(dir: &Path, e: CheckpointError) -> String {
    match &e {
        CheckpointError::Io { source, .. } if source.kind() == std::io::ErrorKind::WouldBlock => {
            format!(
                "--checkpoint-dir {} is in use by another run: {e}; wait for that run to end, \
                 stop it, or give another --checkpoint-dir",
                dir.display()
            )
        }
        _ => format!("--checkpoint-dir {}: {e}", dir.display()),
    }
}

/// Opens `--output`: cut back to what the restored checkpoint covers; without one,
/// started afresh, refusing a non-empty file unless `overwrite` or the checkpoint
/// directory names it as its own (a run there started it before its first checkpoint).
pub(super) fn open_output(
    path: &Path,
    restored: Option<&Checkpoint>,
    store: Option<&FileCheckpointStore>,
    overwrite: bool,
) -> Result<Output, String> {
    if restored.is_some() {
        return Output::file(path, FileStart::Resume(output_length(restored, path)?));
    }
    let Some(store) = store else {
        return Output::file(path, FileStart::Fresh { overwrite });
    };
    let me =
        std::path::absolute(path).map_err(|e| format!("output file {}: {e}", path.display()))?;
    let marker = store.dir().join(OUTPUT_MARKER);
    let ours = std::fs::read(&marker).is_ok_and(|b| b == me.as_os_str().as_bytes());
    let output = Output::file(
        path,
        FileStart::Fresh {
            overwrite: overwrite || ours,
        },
    )?;
    if !ours {
        // Durable before the first record goes to the file.
        write_durably(&marker, me.as_os_str().as_bytes())
            .map_err(|e| format!("{}: {e}", marker.display()))?;
    }
    Ok(output)
}

/// Writes a small file atomically: a temporary file, fsynced, renamed into place, and
/// the directory fsynced.
pub(super) fn write_durably(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    sync_parent(path)
}

/// The output length a restored checkpoint covers (0 without a checkpoint: a fresh file).
pub(super) fn output_length(
    restored: Option<&Checkpoint>,
    path: &std::path::Path,
) -> Result<u64, String> {
    let Some(cp) = restored else { return Ok(0) };
    match cp.user_data.get(OUTPUT_LENGTH) {
        Some(v) => v
            .parse::<u64>()
            .map_err(|_| format!("checkpoint: `{OUTPUT_LENGTH}` is `{v}`, not a byte count")),
        None => Err(format!(
            "the checkpoint was taken without --output, so it does not say how much of {} it covers; \
             use a new --checkpoint-dir for a file output",
            path.display()
        )),
    }
}

/// Flushes and fsyncs the output, takes a checkpoint covering exactly the records
/// written, stores it durably, then hands the commit of its offsets to `commits`
/// (which does not wait for it). A failed commit is reported there and left to the
/// next checkpoint.
pub(super) async fn checkpoint(
    stream: &mut Input,
    output: &mut Output,
    store: Option<&Arc<FileCheckpointStore>>,
    commits: Option<&Commits>,
) -> Result<(), WriteError> {
    // The checkpoint is taken even when stdout's reader has gone, so a `| head` run
    // still records where it stopped; a file output that cannot be made durable is not
    // checkpointed.
    let len = match tokio::task::block_in_place(|| output.sync()) {
        Ok(len) => len,
        Err(WriteError::Closed) => None,
        Err(e) => return Err(e),
    };
    let mut cp = stream
        .checkpoint()
        .map_err(|e| WriteError::Failed(e.to_string()))?;
    if let Some(len) = len {
        cp.user_data.insert(OUTPUT_LENGTH.into(), len.to_string());
    }
    if let Some(store) = store {
        tokio::task::block_in_place(|| store.save(&cp))
            .map_err(|e| WriteError::Failed(format!("cannot save a checkpoint: {e}")))?;
    }
    if let Some(commits) = commits {
        match stream.commit_job(&cp) {
            Ok(Some(job)) => {
                // Group mode: partitions taken back wait for this acknowledgement,
                // which must not queue behind a slow commit.
                job.0.acknowledge(&job.1).await;
                commits.submit(job)
            }
            Ok(None) => {}
            Err(e) => crate::stdio::say!("mck: warning: offset commit skipped: {e}"),
        }
    }
    Ok(())
}
