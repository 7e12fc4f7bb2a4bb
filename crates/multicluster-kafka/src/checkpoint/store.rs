use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

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
}

const PREFIX: &str = "checkpoint-";
const SUFFIX: &str = ".json";

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
        fs::create_dir_all(&dir).map_err(io(&dir))?;
        Ok(Self {
            dir,
            keep: keep.max(1),
        })
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
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io(&self.dir))?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::split::{KafkaSplit, SplitId};

    fn cp(offset: i64) -> Checkpoint {
        Checkpoint::from_splits([KafkaSplit {
            id: SplitId::new("c", "t", 0),
            next_offset: offset,
            stop_offset: None,
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
}
