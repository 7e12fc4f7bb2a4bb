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

use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};
use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};

/// The longest a burst of events may postpone a re-read.
const MAX_SETTLE: Duration = Duration::from_secs(1);

/// The quiet wanted after a write ended (the writer closed the file, or a rename put a
/// complete file in place): only long enough to merge a script's next write.
const AFTER_WRITE_ENDED: Duration = Duration::from_millis(10);

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
                    if !self.settle(&rx, self.quiet_after(&event)) {
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

    /// Waits until no relevant event arrived for the quiet time the last one asks for
    /// (see [`Loop::quiet_after`]; at most [`MAX_SETTLE`] in all), so a
    /// truncate-then-write is read once, complete. False when told to stop.
    fn settle(&self, rx: &mpsc::Receiver<Message>, first: Duration) -> bool {
        let give_up = Instant::now() + MAX_SETTLE;
        let mut quiet = first;
        loop {
            let wait = quiet.min(give_up.saturating_duration_since(Instant::now()));
            if wait.is_zero() {
                return true;
            }
            match rx.recv_timeout(wait) {
                Ok(Message::Stop) | Err(RecvTimeoutError::Disconnected) => return false,
                Ok(Message::Fs(event)) => {
                    if is_relevant(&event) {
                        quiet = self.quiet_after(&event);
                    }
                }
                Err(RecvTimeoutError::Timeout) => return true,
            }
        }
    }

    /// How long to wait for more events after `event`: [`AFTER_WRITE_ENDED`] when it
    /// ends a write of the file (closed after writing, or a complete file renamed onto
    /// its name, or, for a symlinked file, any rename in the directory: a ConfigMap's
    /// `..data` swap), the full debounce after anything else (a write may be under
    /// way). Never longer than the debounce.
    fn quiet_after(&self, event: &notify::Result<Event>) -> Duration {
        let debounce = self.timing.debounce;
        let Ok(event) = event else {
            return debounce;
        };
        let ended = match event.kind {
            EventKind::Access(AccessKind::Close(AccessMode::Write)) => {
                event.paths.iter().any(|p| self.is_the_file(p))
            }
            EventKind::Modify(ModifyKind::Name(RenameMode::To | RenameMode::Both)) => {
                event.paths.last().is_some_and(|p| self.is_the_file(p)) || self.is_symlink()
            }
            _ => false,
        };
        if ended {
            debounce.min(AFTER_WRITE_ENDED)
        } else {
            debounce
        }
    }

    /// Whether `path` is the watched file or, when that is a symlink, its target.
    fn is_the_file(&self, path: &Path) -> bool {
        path == self.path
            || (self.is_symlink()
                && std::fs::canonicalize(&self.path).is_ok_and(|target| target == path))
    }

    fn is_symlink(&self) -> bool {
        std::fs::symlink_metadata(&self.path).is_ok_and(|m| m.file_type().is_symlink())
    }

    /// Watches the directory of the symlink target too, following it when it moves.
    fn follow_symlink(&mut self) {
        let is_link = self.is_symlink();
        let Some(watcher) = self.watcher.as_mut() else {
            return;
        };
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

    fn watch_loop(path: &Path, debounce: Duration) -> Loop {
        Loop {
            path: path.to_path_buf(),
            dir: parent_dir(path),
            target_dir: None,
            watcher: None,
            timing: Timing {
                poll_interval: Duration::from_secs(3600),
                debounce,
                file_events: true,
            },
        }
    }

    fn event(kind: EventKind, paths: &[&Path]) -> notify::Result<Event> {
        let mut event = Event::new(kind);
        for p in paths {
            event = event.add_path(p.to_path_buf());
        }
        Ok(event)
    }

    #[test]
    fn only_an_ended_write_of_the_file_shortens_the_wait() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("streams.yaml");
        let other = dir.path().join(".streams.yaml.swp");
        std::fs::write(&path, "a").unwrap();
        let debounce = Duration::from_millis(500);
        let watch = watch_loop(&path, debounce);
        let closed = EventKind::Access(AccessKind::Close(AccessMode::Write));
        let renamed_to = EventKind::Modify(ModifyKind::Name(RenameMode::To));
        let renamed_from = EventKind::Modify(ModifyKind::Name(RenameMode::From));
        let written = EventKind::Modify(ModifyKind::Data(notify::event::DataChange::Any));
        assert_eq!(
            watch.quiet_after(&event(closed, &[&path])),
            AFTER_WRITE_ENDED
        );
        assert_eq!(
            watch.quiet_after(&event(renamed_to, &[&path])),
            AFTER_WRITE_ENDED
        );
        let both = EventKind::Modify(ModifyKind::Name(RenameMode::Both));
        assert_eq!(
            watch.quiet_after(&event(both, &[&other, &path])),
            AFTER_WRITE_ENDED
        );
        // Mid-write, another file, the file renamed away, a lost queue: full debounce.
        assert_eq!(watch.quiet_after(&event(written, &[&path])), debounce);
        assert_eq!(watch.quiet_after(&event(closed, &[&other])), debounce);
        assert_eq!(watch.quiet_after(&event(renamed_from, &[&path])), debounce);
        assert_eq!(watch.quiet_after(&event(both, &[&path, &other])), debounce);
        assert_eq!(
            watch.quiet_after(&Err(notify::Error::generic("queue overflow"))),
            debounce
        );
        // Never longer than the debounce asked for.
        let eager = watch_loop(&path, Duration::ZERO);
        assert_eq!(eager.quiet_after(&event(closed, &[&path])), Duration::ZERO);
    }

    #[cfg(unix)]
    #[test]
    fn a_symlinked_file_ends_its_write_by_a_rename_in_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("..2026_12_01");
        std::fs::create_dir(&data).unwrap();
        std::fs::write(data.join("streams.yaml"), "a").unwrap();
        std::os::unix::fs::symlink(&data, dir.path().join("..data")).unwrap();
        let path = dir.path().join("streams.yaml");
        std::os::unix::fs::symlink("..data/streams.yaml", &path).unwrap();
        let watch = watch_loop(&path, Duration::from_millis(500));
        let swapped = EventKind::Modify(ModifyKind::Name(RenameMode::To));
        let link = dir.path().join("..data");
        assert_eq!(
            watch.quiet_after(&event(swapped, &[&link])),
            AFTER_WRITE_ENDED
        );
        let target = std::fs::canonicalize(&path).unwrap();
        let closed = EventKind::Access(AccessKind::Close(AccessMode::Write));
        assert_eq!(
            watch.quiet_after(&event(closed, &[&target])),
            AFTER_WRITE_ENDED
        );
    }

    #[test]
    fn a_finished_write_is_read_without_waiting_out_the_debounce() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("streams.yaml");
        std::fs::write(&path, "a").unwrap();
        let (tx, rx) = std_mpsc::channel();
        let debounce = Duration::from_millis(900);
        let thread = WatchThread::spawn(
            &path,
            Timing {
                poll_interval: Duration::from_secs(3600),
                debounce,
                file_events: true,
            },
            move || {
                let _ = tx.send(Instant::now());
            },
        )
        .unwrap();
        let written = Instant::now();
        std::fs::write(&path, "b").unwrap();
        let called = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("a file event");
        drop(thread);
        // The write closed the file: the wait after it is 10 ms, not the debounce.
        let waited = called - written;
        assert!(waited < debounce, "read {waited:?} after the write");
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
