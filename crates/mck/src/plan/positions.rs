//! Where a running source reads: the positions of a checkpoint, from
//! `--checkpoint` or the newest of `--checkpoint-dir`.

use multicluster_kafka::checkpoint::{Checkpoint, FileCheckpointStore};

use super::*;

/// Where positions come from: a checkpoint, and the file it was read from.
#[derive(Debug)]
pub struct Positions {
    /// The file the checkpoint was read from.
    pub file: PathBuf,
    /// The checkpoint.
    pub checkpoint: Checkpoint,
}

/// The checkpoint in `file`, or the newest one of `dir` that decodes (a newer one
/// that does not is named in a warning).
pub fn read_positions(
    dir: Option<&Path>,
    file: Option<&Path>,
) -> Result<Option<Positions>, String> {
    if let Some(file) = file {
        let bytes =
            std::fs::read(file).map_err(|e| format!("--checkpoint {}: {e}", file.display()))?;
        let checkpoint = Checkpoint::decode(&bytes).map_err(|e| {
            let e = e.to_string();
            let reason = e.strip_prefix("<bytes>: ").unwrap_or(&e);
            format!("--checkpoint {}: {reason}", file.display())
        })?;
        return Ok(Some(Positions {
            file: file.to_path_buf(),
            checkpoint,
        }));
    }
    let Some(dir) = dir else { return Ok(None) };
    if !dir.is_dir() {
        return Err(format!(
            "--checkpoint-dir {}: not a directory",
            dir.display()
        ));
    }
    let store = FileCheckpointStore::open(dir, usize::MAX)
        .map_err(|e| format!("--checkpoint-dir {}: {e}", dir.display()))?;
    let files = store
        .list()
        .map_err(|e| format!("--checkpoint-dir {}: {e}", dir.display()))?;
    let mut newest_error: Option<String> = None;
    for (_, path) in files.iter().rev() {
        let decoded = std::fs::read(path)
            .map_err(|e| format!("{}: {e}", path.display()))
            .and_then(|bytes| {
                Checkpoint::decode(&bytes).map_err(|e| {
                    let e = e.to_string();
                    format!(
                        "{}: {}",
                        path.display(),
                        e.strip_prefix("<bytes>: ").unwrap_or(&e)
                    )
                })
            });
        match decoded {
            Ok(checkpoint) => {
                if let Some(e) = &newest_error {
                    crate::stdio::say!(
                        "mck: warning: {e}; using the checkpoint before it, {}",
                        path.display()
                    );
                }
                return Ok(Some(Positions {
                    file: path.clone(),
                    checkpoint,
                }));
            }
            Err(e) => {
                newest_error.get_or_insert(e);
            }
        }
    }
    Err(match newest_error {
        Some(e) => e,
        None => format!("--checkpoint-dir {}: no checkpoint there", dir.display()),
    })
}
