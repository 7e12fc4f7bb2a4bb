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

/// How the file is watched; see [`FileWatchOptions`](super::FileWatchOptions).
#[derive(Clone, Copy, Debug)]
pub(super) struct Timing {
    pub poll_interval: Duration,
    pub debounce: Duration,
    /// The quiet wanted after an event that ends a write (see [`Loop::quiet_after`]).
    pub after_write: Duration,
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
                    let first = self.quiet_after(&event).unwrap_or(self.timing.debounce);
                    if !self.settle(&rx, first) {
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
                    if is_relevant(&event)
                        && let Some(q) = self.quiet_after(&event)
                    {
                        quiet = q;
                    }
                }
                Err(RecvTimeoutError::Timeout) => return true,
            }
        }
    }

    /// How long to wait for more events after `event`:
    ///
    /// - the `after_write` quiet (10 ms by default) when it ends a write of the file:
    ///   the file (or its symlink target) closed after writing, a rename onto its
    ///   name, or, for a symlinked file, a rename onto the first step of its link (a
    ///   ConfigMap's `..data` swap);
    /// - no change to the wait (`None`) for a removal of another file: an editor's
    ///   backup or the old ConfigMap directory removed after the write ended;
    /// - the full debounce after anything else (a write may be under way).
    ///
    /// Never longer than the debounce.
    fn quiet_after(&self, event: &notify::Result<Event>) -> Option<Duration> {
        let debounce = self.timing.debounce;
        let Ok(event) = event else {
            return Some(debounce);
        };
        let ended = match event.kind {
            EventKind::Access(AccessKind::Close(AccessMode::Write)) => {
                event.paths.iter().any(|p| self.is_the_file(p))
            }
            EventKind::Modify(ModifyKind::Name(RenameMode::To | RenameMode::Both)) => event
                .paths
                .last()
                .is_some_and(|p| self.is_the_file(p) || self.is_link_step(p)),
            EventKind::Remove(_) if !event.paths.iter().any(|p| self.is_the_file(p)) => {
                return None;
            }
            _ => false,
        };
        Some(if ended {
            debounce.min(self.timing.after_write)
        } else {
            debounce
        })
    }

    /// Whether `path` is the first step of the watched file's symlink: the entry a
    /// rename swaps to point the link elsewhere (`..data` for a ConfigMap's
    /// `streams.yaml -> ..data/streams.yaml`).
    fn is_link_step(&self, path: &Path) -> bool {
        let Ok(link) = std::fs::read_link(&self.path) else {
            return false;
        };
        let Some(first) = link.components().next() else {
            return false;
        };
        let step = self.dir.join(first.as_os_str());
        step != self.dir && path == step
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

    const AFTER_WRITE: Duration = Duration::from_millis(10);

    fn timing(poll: Duration, file_events: bool) -> Timing {
        Timing {
            poll_interval: poll,
            debounce: Duration::from_millis(20),
            after_write: AFTER_WRITE,
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
                after_write: AFTER_WRITE,
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
        let short = Some(AFTER_WRITE);
        let full = Some(debounce);
        let closed = EventKind::Access(AccessKind::Close(AccessMode::Write));
        let renamed_to = EventKind::Modify(ModifyKind::Name(RenameMode::To));
        let renamed_from = EventKind::Modify(ModifyKind::Name(RenameMode::From));
        let both = EventKind::Modify(ModifyKind::Name(RenameMode::Both));
        let written = EventKind::Modify(ModifyKind::Data(notify::event::DataChange::Any));
        let removed = EventKind::Remove(notify::event::RemoveKind::File);
        assert_eq!(watch.quiet_after(&event(closed, &[&path])), short);
        assert_eq!(watch.quiet_after(&event(renamed_to, &[&path])), short);
        assert_eq!(watch.quiet_after(&event(both, &[&other, &path])), short);
        // Mid-write, another file, the file renamed away, a lost queue: full debounce.
        assert_eq!(watch.quiet_after(&event(written, &[&path])), full);
        assert_eq!(watch.quiet_after(&event(closed, &[&other])), full);
        assert_eq!(watch.quiet_after(&event(renamed_from, &[&path])), full);
        assert_eq!(watch.quiet_after(&event(both, &[&path, &other])), full);
        assert_eq!(watch.quiet_after(&event(renamed_to, &[&other])), full);
        assert_eq!(
            watch.quiet_after(&Err(notify::Error::generic("queue overflow"))),
            full
        );
        // Another file removed (an editor's backup) leaves the wait as it was; the file
        // itself removed does not end a write.
        assert_eq!(watch.quiet_after(&event(removed, &[&other])), None);
        assert_eq!(watch.quiet_after(&event(removed, &[&path])), full);
        // Never longer than the debounce asked for.
        let eager = watch_loop(&path, Duration::ZERO);
        assert_eq!(
            eager.quiet_after(&event(closed, &[&path])),
            Some(Duration::ZERO)
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_symlinked_file_ends_its_write_by_swapping_its_link_only() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("..2026_12_01");
        std::fs::create_dir(&data).unwrap();
        std::fs::write(data.join("streams.yaml"), "a").unwrap();
        let link = dir.path().join("..data");
        std::os::unix::fs::symlink(&data, &link).unwrap();
        let path = dir.path().join("streams.yaml");
        std::os::unix::fs::symlink("..data/streams.yaml", &path).unwrap();
        let watch = watch_loop(&path, Duration::from_millis(500));
        let renamed_to = EventKind::Modify(ModifyKind::Name(RenameMode::To));
        assert_eq!(
            watch.quiet_after(&event(renamed_to, &[&link])),
            Some(AFTER_WRITE)
        );
        // An unrelated rename beside it (an editor's swap file) is not a swap.
        let swap = dir.path().join(".swp");
        assert_eq!(
            watch.quiet_after(&event(renamed_to, &[&swap])),
            Some(Duration::from_millis(500))
        );
        let target = std::fs::canonicalize(&path).unwrap();
        let closed = EventKind::Access(AccessKind::Close(AccessMode::Write));
        assert_eq!(
            watch.quiet_after(&event(closed, &[&target])),
            Some(AFTER_WRITE)
        );
    }

    /// How long after an in-place write (`fs::write`: open, write, close) of a watched
    /// file the watch thread calls back, with these waits.
    fn read_after_a_write(debounce: Duration, after_write: Duration) -> Duration {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("streams.yaml");
        std::fs::write(&path, "a").unwrap();
        let (tx, rx) = std_mpsc::channel();
        let thread = WatchThread::spawn(
            &path,
            Timing {
                poll_interval: Duration::from_secs(3600),
                debounce,
                after_write,
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
        called - written
    }

    #[test]
    fn a_finished_write_is_read_without_waiting_out_the_debounce() {
        let debounce = Duration::from_millis(900);
        // The write closed the file: the wait after it is 10 ms, not the debounce.
        let waited = read_after_a_write(debounce, AFTER_WRITE);
        assert!(waited < debounce, "read {waited:?} after the write");
    }

    #[test]
    fn after_write_as_long_as_the_debounce_waits_it_out() {
        let debounce = Duration::from_millis(300);
        let waited = read_after_a_write(debounce, debounce);
        assert!(waited >= debounce, "read {waited:?} after the write");
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
