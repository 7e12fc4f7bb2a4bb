//! The service over a metadata file: [`FileMetadataService`] serves the metadata in
//! force and reloads the file, on demand or as [`FileWatchOptions`] say it watches.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;

use super::read::read_metadata;
use super::watcher::{Timing, WatchThread};
use crate::metadata::{KafkaMetadataService, KafkaStream, MetadataError};

/// How [`FileMetadataService::watch_with`] notices changes.
///
/// ```
/// use std::time::Duration;
/// use multicluster_kafka::metadata::file::{FileMetadataService, FileWatchOptions};
///
/// let options = FileWatchOptions::new()
///     .poll_interval(Duration::from_secs(30))
///     .debounce(Duration::from_millis(250));
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("streams.yaml");
/// # std::fs::write(&path, "[]").unwrap();
/// let service = FileMetadataService::watch_with(&path, options).unwrap();
/// assert_eq!(service.generation(), 0);
/// ```
#[derive(Clone, Debug)]
pub struct FileWatchOptions {
    poll_interval: Duration,
    debounce: Duration,
    after_write: Duration,
    file_events: bool,
}

impl Default for FileWatchOptions {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_secs(10),
            debounce: Duration::from_millis(100),
            after_write: Duration::from_millis(10),
            file_events: true,
        }
    }
}

impl FileWatchOptions {
    /// Defaults: file events on, re-read every 10 s, 100 ms debounce, 10 ms after a
    /// write ends.
    pub fn new() -> Self {
        Self::default()
    }

    /// How often the file is re-read whatever the file events say (default 10 s,
    /// at least 10 ms). This catches what events cannot: network file systems, and
    /// `${file:…}` secrets rotated in place.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval.max(Duration::from_millis(10));
        self
    }

    /// How long events must stay quiet before the file is read (default 100 ms, at
    /// most 1 s), so a truncate-then-write is read once, complete. After an event that
    /// ends a write the wait is [`after_write`](Self::after_write) instead, or this if
    /// shorter.
    pub fn debounce(mut self, debounce: Duration) -> Self {
        self.debounce = debounce;
        self
    }

    /// How long events must stay quiet after one that ends a write (default 10 ms):
    /// the file closed after writing, a complete file renamed onto its name, or a
    /// symlinked file's link swapped (a Kubernetes ConfigMap update). It merges a
    /// script's next write when that follows at once; a writer that closes the file
    /// and opens it again later (`echo a > f; slow-command >> f`) should write a new
    /// file and rename it into place, or set this as long as the debounce, which
    /// turns the shortcut off.
    pub fn after_write(mut self, quiet: Duration) -> Self {
        self.after_write = quiet;
        self
    }

    /// Whether to watch file-system events at all (default true). Without them
    /// changes are seen at the next poll.
    pub fn file_events(mut self, enabled: bool) -> Self {
        self.file_events = enabled;
        self
    }
}

/// Stream metadata from a YAML or JSON file, optionally hot reloaded.
///
/// [`load`](Self::load) reads the file once. [`watch`](Self::watch) reads it once
/// (failing if it is bad), then follows it: file-system events on the file's
/// directory (correct for in-place writes, atomic renames and Kubernetes ConfigMap
/// `..data` symlink swaps) plus a periodic re-read as a fallback. Changes are decided
/// by comparing the parsed metadata, not modification times.
///
/// During hot reload a bad file keeps the last good metadata in force; the error is
/// logged once (`tracing` warning, one line, no secrets) and available from
/// [`last_error`](Self::last_error) until a good file clears it.
///
/// The watch runs on its own thread, never on an async worker. It ends on
/// [`close`](KafkaMetadataService::close) or when the service is dropped.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use multicluster_kafka::metadata::{FileMetadataService, KafkaMetadataService};
///
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("streams.yaml");
/// std::fs::write(&path, "
/// - streamId: orders
///   clusterMetadataList:
///     - { clusterId: east, bootstrapServers: 'east-1:9092', topics: [orders] }
/// ").unwrap();
///
/// let service = FileMetadataService::watch(&path).unwrap();
/// assert!(service.is_cluster_active("east").await.unwrap());
/// service.close().await.unwrap();
/// # });
/// ```
pub struct FileMetadataService {
    pub(super) shared: Arc<Shared>,
    pub(super) watch: Mutex<Option<WatchThread>>,
}

struct State {
    streams: BTreeMap<String, KafkaStream>,
    last_error: Option<MetadataError>,
}

/// What the service and its watch thread share.
pub(super) struct Shared {
    path: PathBuf,
    state: RwLock<State>,
    /// The generation: bumped on every applied change.
    changes: watch::Sender<u64>,
    /// Bumped whenever a reload changes what the service reports, errors included.
    reloads: watch::Sender<u64>,
    /// Held for a whole read-and-apply, so a slow read of an older file can never
    /// overwrite a newer one applied meanwhile.
    reloading: Mutex<()>,
    closed: AtomicBool,
}

impl FileMetadataService {
    /// Reads the file once; no watching. Fails when the file cannot be read or is
    /// invalid.
    ///
    /// A relative path is made absolute (symlinks are kept, not resolved), so a later
    /// change of the working directory does not change which file is read.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, MetadataError> {
        let path = path.as_ref();
        let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let streams = read_metadata(&path)?;
        Ok(Self {
            shared: Arc::new(Shared::new(path, streams)),
            watch: Mutex::new(None),
        })
    }

    /// Reads the file once (failing if it is bad), then hot-reloads it with the
    /// default [`FileWatchOptions`].
    pub fn watch(path: impl AsRef<Path>) -> Result<Self, MetadataError> {
        Self::watch_with(path, FileWatchOptions::default())
    }

    /// Reads the file once (failing if it is bad), then hot-reloads it.
    pub fn watch_with(
        path: impl AsRef<Path>,
        options: FileWatchOptions,
    ) -> Result<Self, MetadataError> {
        let service = Self::load(path)?;
        let timing = Timing {
            poll_interval: options.poll_interval,
            debounce: options.debounce,
            after_write: options.after_write,
            file_events: options.file_events,
        };
        let shared = service.shared.clone();
        let thread = WatchThread::spawn(&service.shared.path, timing, move || {
            let _ = shared.reload();
        })
        .map_err(|e| MetadataError::Io {
            path: service.shared.path.clone(),
            message: format!("cannot start the watch thread: {e}"),
        })?;
        *service.watch.lock().unwrap_or_else(PoisonError::into_inner) = Some(thread);
        // A change between the first read and the start of the watch.
        let _ = service.shared.reload();
        Ok(service)
    }

    /// The metadata file.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// How many changes were applied since the service started (0 at first).
    pub fn generation(&self) -> u64 {
        *self.shared.changes.borrow()
    }

    /// Why the file on disk is not in force, if it is not: the last reload failed and
    /// the previous good metadata is still served. Cleared by the next good reload.
    pub fn last_error(&self) -> Option<MetadataError> {
        self.shared.read().last_error.clone()
    }

    /// The metadata currently in force.
    pub fn streams(&self) -> BTreeMap<String, KafkaStream> {
        self.shared.read().streams.clone()
    }

    /// Re-reads the file now. Returns whether the metadata changed; on error the last
    /// good metadata stays in force and the error is also kept for
    /// [`last_error`](Self::last_error).
    pub fn reload(&self) -> Result<bool, MetadataError> {
        self.shared.check_open()?;
        self.shared.reload()
    }

    /// A channel that ticks whenever a reload changes what the service reports: new
    /// metadata applied, a new error recorded, or an error cleared. (Use
    /// [`KafkaMetadataService::changes`] for metadata changes only.)
    pub fn reloads(&self) -> watch::Receiver<u64> {
        self.shared.reloads.subscribe()
    }
}

impl Shared {
    fn new(path: PathBuf, streams: BTreeMap<String, KafkaStream>) -> Self {
        Self {
            path,
            state: RwLock::new(State {
                streams,
                last_error: None,
            }),
            changes: watch::Sender::new(0),
            reloads: watch::Sender::new(0),
            reloading: Mutex::new(()),
            closed: AtomicBool::new(false),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn check_open(&self) -> Result<(), MetadataError> {
        if self.closed.load(Ordering::Acquire) {
            Err(MetadataError::Closed)
        } else {
            Ok(())
        }
    }

    fn reload(&self) -> Result<bool, MetadataError> {
        let _one_at_a_time = self
            .reloading
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let outcome = read_metadata(&self.path);
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        match outcome {
            Ok(streams) => {
                let changed = state.streams != streams;
                let recovered = state.last_error.take().is_some();
                if changed {
                    state.streams = streams;
                }
                let count = state.streams.len();
                drop(state);
                if changed {
                    let mut generation = 0;
                    self.changes.send_modify(|g| {
                        *g += 1;
                        generation = *g;
                    });
                    tracing::info!(path = %self.path.display(), generation, streams = count, "metadata file reloaded");
                } else if recovered {
                    tracing::info!(path = %self.path.display(), "metadata file is valid again");
                }
                if changed || recovered {
                    self.reloads.send_modify(|n| *n += 1);
                }
                Ok(changed)
            }
            Err(error) => {
                let is_new = state.last_error.as_ref() != Some(&error);
                state.last_error = Some(error.clone());
                drop(state);
                if is_new {
                    tracing::warn!(%error, "metadata file rejected; keeping the last good metadata");
                    self.reloads.send_modify(|n| *n += 1);
                }
                Err(error)
            }
        }
    }
}

impl fmt::Debug for FileMetadataService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let watching = self.watch.lock().map(|w| w.is_some()).unwrap_or(false);
        f.debug_struct("FileMetadataService")
            .field("path", &self.shared.path)
            .field("generation", &self.generation())
            .field("watching", &watching)
            .field("last_error", &self.last_error())
            .finish()
    }
}

#[async_trait]
impl KafkaMetadataService for FileMetadataService {
    async fn describe_streams(
        &self,
        stream_ids: &[String],
    ) -> Result<BTreeMap<String, KafkaStream>, MetadataError> {
        self.shared.check_open()?;
        let state = self.shared.read();
        Ok(stream_ids
            .iter()
            .filter_map(|id| state.streams.get(id).map(|s| (id.clone(), s.clone())))
            .collect())
    }

    async fn all_streams(&self) -> Result<BTreeMap<String, KafkaStream>, MetadataError> {
        self.shared.check_open()?;
        Ok(self.streams())
    }

    /// Looks in the file's current streams, without copying them (the default copies
    /// every stream for each cluster asked about).
    async fn is_cluster_active(&self, cluster_id: &str) -> Result<bool, MetadataError> {
        self.shared.check_open()?;
        let state = self.shared.read();
        Ok(state
            .streams
            .values()
            .any(|s| s.clusters.contains_key(cluster_id)))
    }

    /// Stops the watch thread (waiting for it, at most one file read) and refuses
    /// later calls. Calling it twice is fine.
    async fn close(&self) -> Result<(), MetadataError> {
        self.shared.closed.store(true, Ordering::Release);
        let thread = self
            .watch
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(mut thread) = thread {
            thread.stop();
        }
        Ok(())
    }

    /// Ticks with the new [`generation`](FileMetadataService::generation) after every
    /// applied change (hot reload or [`reload`](FileMetadataService::reload)).
    fn changes(&self) -> Option<watch::Receiver<u64>> {
        Some(self.shared.changes.subscribe())
    }
}
