use std::fs::{self, File, TryLockError};
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{Checkpoint, CheckpointError};

/// Where checkpoints are kept. Calls block (file or network IO): from async code run
/// them with `tokio::task::spawn_blocking`.
pub trait CheckpointStore: Send + Sync {
    /// Stores a checkpoint durably; when this returns `Ok`, the checkpoint survives a
    /// crash. Returns its sequence number.
    fn save(&self, checkpoint: &Checkpoint) -> Result<u64, CheckpointError>;

    /// The newest stored checkpoint, if any. A store that keeps several may fall back
    /// to an older one when the newest cannot be read (saying so in a warning).
    fn latest(&self) -> Result<Option<Checkpoint>, CheckpointError>;
}

/// Checkpoints as files in a directory: `checkpoint-<sequence>.json`, written to a
/// temporary file, fsynced, renamed into place and the directory fsynced, so a crash
/// leaves either the old or the new file, never a torn one. Keeps the newest `keep`;
/// when the newest cannot be decoded (a disk that lost a write, a hand-edited file),
/// [`latest`](CheckpointStore::latest) warns and falls back to the one before it.
///
/// [`open_exclusive`](Self::open_exclusive) also takes an advisory lock (`flock`) on the
/// directory's `lock` file, so a second process on the same directory fails at once
/// with the first one's pid; the kernel releases the lock when its holder dies, so a
/// lock file left by a `kill -9` does not block the next run.
///
/// ```
/// use multicluster_kafka::checkpoint::{Checkpoint, CheckpointStore, FileCheckpointStore};
/// let dir = tempfile::tempdir().unwrap();
/// let store = FileCheckpointStore::open(dir.path(), 3).unwrap();
/// assert!(store.latest().unwrap().is_none());
/// let mut cp = Checkpoint::default();
/// cp.user_data.insert("output-length".into(), "42".into());
/// store.save(&cp).unwrap();
/// assert_eq!(store.latest().unwrap(), Some(cp));
/// ```
#[derive(Debug)]
pub struct FileCheckpointStore {
    dir: PathBuf,
    keep: usize,
    /// The locked `lock` file of [`open_exclusive`](Self::open_exclusive), held while
    /// the store lives.
    lock: Option<File>,
}

const PREFIX: &str = "checkpoint-";
const SUFFIX: &str = ".json";
/// The lock file of [`FileCheckpointStore::open_exclusive`].
const LOCK_FILE: &str = "lock";
/// How long a process that found the directory locked waits for the holder to write
/// its pid into the lock file (it does so right after locking).
const PID_WAIT: Duration = Duration::from_millis(200);

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CheckpointError + '_ {
    move |source| CheckpointError::Io {
        path: path.display().to_string(),
        source,
    }
}

impl FileCheckpointStore {
    /// Opens (creating if needed) a checkpoint directory keeping the newest `keep`
    /// checkpoints (at least 1).
    pub fn open(dir: impl Into<PathBuf>, keep: usize) -> Result<Self, CheckpointError> {
        let dir = dir.into();
        create_dir_durably(&dir).map_err(io(&dir))?;
        Ok(Self {
            dir,
            keep: keep.max(1),
            lock: None,
        })
    }

    /// Like [`open`](Self::open), and takes the directory's lock for as long as the
    /// store lives: while another process holds it, this fails at once with an
    /// [`Io`](CheckpointError::Io) error of kind [`WouldBlock`](io::ErrorKind::WouldBlock)
    /// naming the lock file and the holder's pid. The lock is advisory (`flock`) and
    /// held by the open file, so it goes with the process however that ends.
    ///
    /// ```
    /// use multicluster_kafka::checkpoint::FileCheckpointStore;
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = FileCheckpointStore::open_exclusive(dir.path(), 3).unwrap();
    /// let e = FileCheckpointStore::open_exclusive(dir.path(), 3).unwrap_err();
    /// assert!(e.to_string().contains(&format!("pid {}", std::process::id())), "{e}");
    /// drop(store);
    /// FileCheckpointStore::open_exclusive(dir.path(), 3).unwrap();
    /// ```
    pub fn open_exclusive(dir: impl Into<PathBuf>, keep: usize) -> Result<Self, CheckpointError> {
        let mut store = Self::open(dir, keep)?;
        let path = store.dir.join(LOCK_FILE);
        let existed = path.exists();
        let mut file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io(&path))?;
        if !existed {
            sync_dir(&store.dir).map_err(io(&store.dir))?;
        }
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let holder = match lock_holder(&mut file) {
                    Some(pid) => format!("pid {pid}"),
                    None => "pid unknown".to_string(),
                };
                return Err(CheckpointError::Io {
                    path: path.display().to_string(),
                    source: io::Error::new(
                        io::ErrorKind::WouldBlock,
                        format!("locked by another process ({holder})"),
                    ),
                });
            }
            Err(TryLockError::Error(e)) => return Err(io(&path)(e)),
        }
        // The holder's pid, for the message of the next one to try. A crash leaves the
        // old pid in the file but releases the lock.
        file.set_len(0).map_err(io(&path))?;
        file.seek(io::SeekFrom::Start(0)).map_err(io(&path))?;
        writeln!(file, "{}", std::process::id()).map_err(io(&path))?;
        store.lock = Some(file);
        Ok(store)
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Stored checkpoint files, oldest first, with their sequence numbers.
    pub fn list(&self) -> Result<Vec<(u64, PathBuf)>, CheckpointError> {
        let mut out = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(io(&self.dir))? {
            let entry = entry.map_err(io(&self.dir))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if let Some(seq) = name
                .strip_prefix(PREFIX)
                .and_then(|r| r.strip_suffix(SUFFIX))
                .and_then(|n| n.parse::<u64>().ok())
            {
                out.push((seq, entry.path()));
            }
        }
        out.sort();
        Ok(out)
    }
}

impl CheckpointStore for FileCheckpointStore {
    fn save(&self, checkpoint: &Checkpoint) -> Result<u64, CheckpointError> {
        let existing = self.list()?;
        let seq = existing.last().map(|(s, _)| s + 1).unwrap_or(1);
        let path = self.dir.join(format!("{PREFIX}{seq:020}{SUFFIX}"));
        let tmp = self.dir.join(format!(".{PREFIX}{seq:020}{SUFFIX}.tmp"));
        {
            let mut f = File::create(&tmp).map_err(io(&tmp))?;
            f.write_all(&checkpoint.encode()).map_err(io(&tmp))?;
            f.sync_all().map_err(io(&tmp))?;
        }
        fs::rename(&tmp, &path).map_err(io(&path))?;
        sync_dir(&self.dir).map_err(io(&self.dir))?;
        let mut all = existing;
        all.push((seq, path));
        let excess = all.len().saturating_sub(self.keep);
        for (_, old) in all.into_iter().take(excess) {
            let _ = fs::remove_file(old);
        }
        Ok(seq)
    }

    /// The newest checkpoint that decodes. Each newer one that does not is named in
    /// a warning; when none of them does, the error names the newest.
    fn latest(&self) -> Result<Option<Checkpoint>, CheckpointError> {
        let files = self.list()?;
        let mut newest_error = None;
        for (_, path) in files.iter().rev() {
            let bytes = match fs::read(path) {
                Ok(b) => b,
                // Pruned by a save since the listing: an older one is next.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io(path)(e)),
            };
            match Checkpoint::decode_from(&bytes, &path.display().to_string()) {
                Ok(cp) => {
                    if let Some(e) = &newest_error {
                        tracing::warn!(
                            "{e}; restoring from the previous checkpoint, {}",
                            path.display()
                        );
                    }
                    return Ok(Some(cp));
                }
                Err(e) => {
                    if newest_error.is_none() {
                        newest_error = Some(e);
                    } else {
                        tracing::warn!("{e}");
                    }
                }
            }
        }
        match newest_error {
            None => Ok(None),
            Some(CheckpointError::Decode { origin, reason }) if files.len() > 1 => {
                Err(CheckpointError::Decode {
                    origin,
                    reason: format!(
                        "{reason} (and none of the {} older checkpoints in {} is readable either)",
                        files.len() - 1,
                        self.dir.display()
                    ),
                })
            }
            Some(e) => Err(e),
        }
    }
}

/// The pid a lock holder wrote into the lock file, waiting briefly for a holder that
/// has just taken the lock to write it.
fn lock_holder(file: &mut File) -> Option<u32> {
    let until = Instant::now() + PID_WAIT;
    loop {
        let mut text = String::new();
        if file.seek(io::SeekFrom::Start(0)).is_ok()
            && file.read_to_string(&mut text).is_ok()
            && let Ok(pid) = text.trim().parse()
        {
            return Some(pid);
        }
        if Instant::now() >= until {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The directory a path's entry lives in (`.` for a bare name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Fsyncs a directory, making the entries created, renamed or removed in it durable.
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// `create_dir_all`, then fsyncs the parent of every directory it created, so the new
/// directories survive a crash along with what is written into them.
fn create_dir_durably(dir: &Path) -> io::Result<()> {
    let mut missing = Vec::new();
    let mut at = dir;
    while !at.exists() {
        missing.push(at);
        match at.parent() {
            Some(p) if !p.as_os_str().is_empty() => at = p,
            _ => break,
        }
    }
    fs::create_dir_all(dir)?;
    for created in missing {
        sync_dir(parent_dir(created))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::split::{KafkaSplit, SplitId};

    fn cp(offset: i64) -> Checkpoint {
        Checkpoint::from_splits([KafkaSplit {
            id: SplitId::new("c", "t", 0),
            next_offset: offset,
            stop_offset: None,
            last: None,
        }])
    }

    #[test]
    fn keeps_only_the_newest_k_and_returns_the_newest() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileCheckpointStore::open(dir.path(), 2).unwrap();
        for i in 1..=5 {
            assert_eq!(store.save(&cp(i)).unwrap(), i as u64);
        }
        let kept: Vec<u64> = store.list().unwrap().into_iter().map(|(s, _)| s).collect();
        assert_eq!(kept, vec![4, 5]);
        assert_eq!(store.latest().unwrap(), Some(cp(5)));
        let leftovers: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty());
    }

    #[test]
    fn a_corrupt_or_truncated_newest_checkpoint_falls_back_to_the_previous_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileCheckpointStore::open(dir.path(), 5).unwrap();
        store.save(&cp(1)).unwrap();
        store.save(&cp(2)).unwrap();
        let newest = dir.path().join("checkpoint-00000000000000000002.json");
        let bytes = fs::read(&newest).unwrap();
        fs::write(&newest, &bytes[..bytes.len() / 2]).unwrap();
        assert_eq!(store.latest().unwrap(), Some(cp(1)));
        fs::write(dir.path().join("checkpoint-00000000000000000003.json"), b"").unwrap();
        assert_eq!(
            store.latest().unwrap(),
            Some(cp(1)),
            "two bad ones in a row"
        );
        // The next save follows the newest file, readable or not.
        assert_eq!(store.save(&cp(4)).unwrap(), 4);
        assert_eq!(store.latest().unwrap(), Some(cp(4)));
    }

    #[test]
    fn no_readable_checkpoint_is_an_error_naming_the_newest_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileCheckpointStore::open(dir.path(), 5).unwrap();
        fs::write(
            dir.path().join("checkpoint-00000000000000000002.json"),
            b"{",
        )
        .unwrap();
        let e = store.latest().unwrap_err().to_string();
        assert!(e.contains("checkpoint-00000000000000000002.json"), "{e}");
        fs::write(
            dir.path().join("checkpoint-00000000000000000001.json"),
            b"{\"format\"",
        )
        .unwrap();
        let e = store.latest().unwrap_err().to_string();
        assert!(e.contains("checkpoint-00000000000000000002.json"), "{e}");
        assert!(e.contains("none of the 1 older checkpoints"), "{e}");
    }

    #[test]
    fn the_lock_fails_at_once_naming_the_holder_and_goes_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let first = FileCheckpointStore::open_exclusive(dir.path(), 3).unwrap();
        let started = Instant::now();
        let e = FileCheckpointStore::open_exclusive(dir.path(), 3).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(1));
        let CheckpointError::Io { path, source } = &e else {
            panic!("{e:?}")
        };
        assert!(path.ends_with("lock"), "{path}");
        assert_eq!(source.kind(), io::ErrorKind::WouldBlock);
        assert!(
            e.to_string()
                .contains(&format!("(pid {})", std::process::id())),
            "{e}"
        );
        // A plain open does not lock.
        FileCheckpointStore::open(dir.path(), 3).unwrap();
        drop(first);
        // The lock file stays, with the old pid; the lock does not.
        fs::write(dir.path().join(LOCK_FILE), "999999999\n").unwrap();
        let again = FileCheckpointStore::open_exclusive(dir.path(), 3).unwrap();
        assert_eq!(
            fs::read_to_string(dir.path().join(LOCK_FILE)).unwrap(),
            format!("{}\n", std::process::id())
        );
        assert!(
            again.list().unwrap().is_empty(),
            "the lock file is no checkpoint"
        );
    }

    #[test]
    fn missing_directories_are_created() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("a/b/c");
        let store = FileCheckpointStore::open(&deep, 1).unwrap();
        store.save(&cp(7)).unwrap();
        assert_eq!(store.latest().unwrap(), Some(cp(7)));
        assert_eq!(parent_dir(Path::new("ck")), Path::new("."));
        assert_eq!(parent_dir(Path::new("a/ck")), Path::new("a"));
    }
}
