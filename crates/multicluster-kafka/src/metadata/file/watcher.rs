//! The watch thread: file-system events on the file's directory plus a periodic
//! re-read, each calling back into the service, until it is stopped.
//!
//! The **directory** is watched, not the file: an editor's atomic rename and a
//! Kubernetes ConfigMap update (`..data` symlink swapped to a new timestamped
//! directory) replace the file's inode, which a watch on the file itself would
//! never see again. When the file is a symlink, the directory its target lives in is
//! watched as well, so an in-place write to the target is seen too.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use notify::event::{AccessKind, AccessMode};
use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};

/// The longest a burst of events may postpone a re-read.
const MAX_SETTLE: Duration = Duration::from_secs(1);

/// How the file is watched; see [`FileWatchOptions`](super::FileWatchOptions).
#[derive(Clone, Copy, Debug)]
pub(super) struct Timing {
    pub poll_interval: Duration,
    pub debounce: Duration,
    pub file_events: bool,
}

enum Message {
    Fs(notify::Result<Event>),
    Stop,
}

/// A running watch thread. [`WatchThread::stop`] (or dropping it) ends the thread
/// and waits for it.
#[derive(Debug)]
pub(super) struct WatchThread {
    stop: mpsc::Sender<Message>,
    handle: Option<JoinHandle<()>>,
}

impl WatchThread {
    /// Starts watching `path`, calling `on_change` after file events (once they
    /// settle) and every `poll_interval`. File-system watch failures are logged and
    /// leave polling in charge; only failing to start the thread is an error.
    pub(super) fn spawn(
        path: &Path,
        timing: Timing,
        on_change: impl FnMut() + Send + 'static,
    ) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel();
        let watcher = if timing.file_events {
            start_watcher(path, tx.clone())
        } else {
            None
        };
        let mut state = Loop {
            path: path.to_path_buf(),
            dir: parent_dir(path),
            target_dir: None,
            watcher,
            timing,
        };
        // Before the thread starts, so a write right after `spawn` returns is seen.
        state.follow_symlink();
        let handle = std::thread::Builder::new()
            .name("mck-metadata-watch".into())
            .spawn(move || state.run(rx, on_change))?;
        Ok(Self {
            stop: tx,
            handle: Some(handle),
        })
    }

    /// Stops the thread and waits for it to end.
    pub(super) fn stop(&mut self) {
        let _ = self.stop.send(Message::Stop);
        if let Some(handle) = self.handle.take()
            && handle.join().is_err()
        {
            tracing::warn!("the metadata file watch thread panicked");
        }
    }
}

impl Drop for WatchThread {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The directory holding `path` (`.` for a bare file name).
fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn start_watcher(path: &Path, tx: mpsc::Sender<Message>) -> Option<RecommendedWatcher> {
    let dir = parent_dir(path);
    let watcher = notify::recommended_watcher(move |event| {
        let _ = tx.send(Message::Fs(event));
    });
    let mut watcher = match watcher {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot watch the metadata file; polling only");
            return None;
        }
    };
    if let Err(e) = watcher.watch(&dir, RecursiveMode::NonRecursive) {
        tracing::warn!(dir = %dir.display(), error = %e, "cannot watch the metadata file's directory; polling only");
        return None;
    }
    Some(watcher)
}

/// True for events that may mean the file changed (not our own reads).
fn is_relevant(event: &notify::Result<Event>) -> bool {
    match event {
        Ok(event) => match event.kind {
            EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
            EventKind::Access(_) => false,
            _ => true,
        },
        // A lost or overflowing event queue: re-read to be safe.
        Err(_) => true,
    }
}

struct Loop {
    path: PathBuf,
    dir: PathBuf,
    /// The extra directory watched because the file is a symlink into it.
    target_dir: Option<PathBuf>,
    watcher: Option<RecommendedWatcher>,
    timing: Timing,
}

impl Loop {
    fn run(&mut self, rx: mpsc::Receiver<Message>, mut on_change: impl FnMut()) {
        let mut next_poll = Instant::now() + self.timing.poll_interval;
        loop {
            let wait = next_poll.saturating_duration_since(Instant::now());
            match rx.recv_timeout(wait) {
                Ok(Message::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                Ok(Message::Fs(event)) => {
                    if !is_relevant(&event) {
                        continue;
                    }
                    if !self.settle(&rx) {
                        return;
                    }
                    on_change();
                    self.follow_symlink();
                }
                Err(RecvTimeoutError::Timeout) => {
                    on_change();
                    self.follow_symlink();
                    next_poll = Instant::now() + self.timing.poll_interval;
                }
            }
        }
    }

    /// Waits until no relevant event arrived for `debounce` (at most [`MAX_SETTLE`]),
    /// so a truncate-then-write is read once, complete. False when told to stop.
    fn settle(&self, rx: &mpsc::Receiver<Message>) -> bool {
        let give_up = Instant::now() + MAX_SETTLE;
        loop {
            let wait = self
                .timing
                .debounce
                .min(give_up.saturating_duration_since(Instant::now()));
            if wait.is_zero() {
                return true;
            }
            match rx.recv_timeout(wait) {
                Ok(Message::Stop) | Err(RecvTimeoutError::Disconnected) => return false,
                Ok(Message::Fs(_)) => {}
                Err(RecvTimeoutError::Timeout) => return true,
            }
        }
    }

    /// Watches the directory of the symlink target too, following it when it moves.
    fn follow_symlink(&mut self) {
        let Some(watcher) = self.watcher.as_mut() else {
            return;
        };
        let is_link =
            std::fs::symlink_metadata(&self.path).is_ok_and(|m| m.file_type().is_symlink());
        let wanted = if is_link {
            std::fs::canonicalize(&self.path)
                .ok()
                .map(|target| parent_dir(&target))
                .filter(|d| std::fs::canonicalize(&self.dir).map_or(true, |own| own != *d))
        } else {
            None
        };
        if wanted == self.target_dir {
            return;
        }
        if let Some(old) = self.target_dir.take() {
            // The old target directory may be gone already (ConfigMap swap).
            let _ = watcher.unwatch(&old);
        }
        if let Some(dir) = wanted {
            match watcher.watch(&dir, RecursiveMode::NonRecursive) {
                Ok(()) => self.target_dir = Some(dir),
                Err(e) => {
                    tracing::debug!(dir = %dir.display(), error = %e, "cannot watch the symlink target's directory")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, mpsc as std_mpsc};

    fn timing(poll: Duration, file_events: bool) -> Timing {
        Timing {
            poll_interval: poll,
            debounce: Duration::from_millis(20),
            file_events,
        }
    }

    #[test]
    fn polling_calls_back_and_stop_ends_the_thread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("streams.yaml");
        std::fs::write(&path, "x").unwrap();
        let (tx, rx) = std_mpsc::channel();
        let mut thread =
            WatchThread::spawn(&path, timing(Duration::from_millis(10), false), move || {
                let _ = tx.send(());
            })
            .unwrap();
        rx.recv_timeout(Duration::from_secs(30)).expect("a poll");
        thread.stop();
        assert!(thread.handle.is_none());
        // The callback (and its sender) went away with the thread.
        while rx.try_recv().is_ok() {}
        assert!(matches!(
            rx.try_recv(),
            Err(std_mpsc::TryRecvError::Disconnected)
        ));
    }

    #[test]
    fn a_write_in_the_directory_calls_back_without_polling() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("streams.yaml");
        std::fs::write(&path, "a").unwrap();
        let calls = Arc::new(AtomicU64::new(0));
        let (tx, rx) = std_mpsc::channel();
        let seen = calls.clone();
        let thread =
            WatchThread::spawn(&path, timing(Duration::from_secs(3600), true), move || {
                seen.fetch_add(1, Ordering::SeqCst);
                let _ = tx.send(());
            })
            .unwrap();
        std::fs::write(&path, "b").unwrap();
        rx.recv_timeout(Duration::from_secs(30))
            .expect("a file event");
        drop(thread);
        assert!(calls.load(Ordering::SeqCst) >= 1);
    }

    #[test]
    fn own_reads_are_not_changes() {
        let open = Ok(Event::new(EventKind::Access(AccessKind::Open(
            AccessMode::Any,
        ))));
        let closed_after_write = Ok(Event::new(EventKind::Access(AccessKind::Close(
            AccessMode::Write,
        ))));
        let created = Ok(Event::new(EventKind::Create(
            notify::event::CreateKind::File,
        )));
        assert!(!is_relevant(&open));
        assert!(is_relevant(&closed_after_write));
        assert!(is_relevant(&created));
    }

    #[test]
    fn a_bare_file_name_lives_in_the_current_directory() {
        assert_eq!(parent_dir(Path::new("streams.yaml")), PathBuf::from("."));
        assert_eq!(
            parent_dir(Path::new("/etc/mck/streams.yaml")),
            PathBuf::from("/etc/mck")
        );
    }
}
