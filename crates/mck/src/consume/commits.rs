//! Offset commits to `--group`, off the path of the records.

use super::*;

/// Offset commits to `--group`, off the path of the records: each checkpoint, once
/// saved, hands its commit to a task of its own and the run goes on writing. The task
/// commits in the order asked; while one commit waits for a slow coordinator, newer
/// checkpoints replace the older ones still waiting (offsets only go forward, so the
/// newest says everything). A failure is said when it starts or its reason changes,
/// and the recovery once.
pub(super) struct Commits {
    jobs: tokio::sync::mpsc::UnboundedSender<(Committer, Checkpoint)>,
    task: tokio::task::JoinHandle<()>,
}

impl Commits {
    pub(super) fn start() -> Self {
        let (jobs, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Committer, Checkpoint)>();
        let task = tokio::spawn(async move {
            let mut failing: Option<String> = None;
            while let Some(mut job) = rx.recv().await {
                while let Ok(newer) = rx.try_recv() {
                    job = newer;
                }
                let (committer, cp) = job;
                match committer.commit(&cp).await {
                    Ok(()) => {
                        if failing.take().is_some() {
                            crate::stdio::say!("{}mck: offset commits succeed again", clear_line());
                        }
                    }
                    Err(e) => {
                        let reason = e.to_string();
                        if failing.as_deref() != Some(reason.as_str()) {
                            crate::stdio::say!(
                                "{}mck: warning: {reason} (the checkpoint is saved; each \
                                 checkpoint commits again; said again when this changes)",
                                clear_line()
                            );
                            failing = Some(reason);
                        }
                    }
                }
            }
        });
        Commits { jobs, task }
    }

    /// Queues the commit of a saved checkpoint; returns at once.
    pub(super) fn submit(&self, job: (Committer, Checkpoint)) {
        let _ = self.jobs.send(job);
    }

    /// Waits, at most [`SHUTDOWN_GRACE`], for the commits queued so far (the last
    /// checkpoint's included); a commit still running then is abandoned, and said.
    pub(super) async fn finish(self) {
        let Commits { jobs, mut task } = self;
        drop(jobs);
        if tokio::time::timeout(SHUTDOWN_GRACE, &mut task)
            .await
            .is_err()
        {
            task.abort();
            crate::stdio::say!(
                "mck: warning: offset commit abandoned after {SHUTDOWN_GRACE:?} at the end of \
                 the run (the checkpoint is saved; the group's offsets stay behind it)"
            );
        }
    }
}
