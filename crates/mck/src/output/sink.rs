//! Where records go: standard output, or a file whose length a checkpoint records.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Where records go: standard output, or a file whose length is tracked.
pub enum Output {
    /// Standard output.
    Stdout(BufWriter<io::Stdout>),
    /// A file, appended to; `len` is its length including buffered bytes.
    File {
        path: PathBuf,
        writer: BufWriter<File>,
        len: u64,
    },
}

impl Output {
    /// Standard output.
    pub fn stdout() -> Self {
        Output::Stdout(BufWriter::with_capacity(1 << 16, io::stdout()))
    }

    /// Opens `path` for appending: cut back to the length a checkpoint covers, or
    /// started afresh. A file created here has its directory fsynced, so the file
    /// survives a crash along with the checkpoints that count its bytes.
    pub fn file(path: &Path, start: FileStart) -> Result<Self, String> {
        let at = |e: io::Error| format!("output file {}: {e}", path.display());
        let mut options = OpenOptions::new();
        options.write(true).truncate(false).read(true);
        let (file, created) = match options.open(path) {
            Ok(f) => (f, false),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                (options.create(true).open(path).map_err(at)?, true)
            }
            Err(e) => return Err(at(e)),
        };
        let len = file.metadata().map_err(at)?.len();
        let keep = match start {
            FileStart::Resume(keep) if len < keep => {
                return Err(format!(
                    "output file {} is {len} bytes, shorter than the {keep} bytes the checkpoint covers; \
                     records the checkpoint counts as written are missing (restore the file or start with a new checkpoint directory)",
                    path.display()
                ));
            }
            FileStart::Resume(keep) => keep,
            FileStart::Fresh { overwrite: false } if len > 0 => {
                return Err(format!(
                    "output file {} already holds {len} bytes and no checkpoint covers them; \
                     give --overwrite to replace it, or the --checkpoint-dir of the run that wrote it to resume",
                    path.display()
                ));
            }
            FileStart::Fresh { .. } => 0,
        };
        if len != keep {
            file.set_len(keep).map_err(at)?;
        }
        file.sync_all().map_err(at)?;
        if created {
            sync_parent(path).map_err(at)?;
        }
        let mut writer = BufWriter::with_capacity(1 << 16, file);
        io::Seek::seek(&mut writer, io::SeekFrom::Start(keep)).map_err(at)?;
        Ok(Output::File {
            path: path.to_path_buf(),
            writer,
            len: keep,
        })
    }

    /// Writes one rendered line.
    pub fn write(&mut self, line: &[u8]) -> Result<(), WriteError> {
        match self {
            Output::Stdout(w) => w.write_all(line).map_err(|e| WriteError::stdout(&e)),
            Output::File { path, writer, len } => {
                writer.write_all(line).map_err(|e| {
                    WriteError::Failed(format!("output file {}: {e}", path.display()))
                })?;
                *len += line.len() as u64;
                Ok(())
            }
        }
    }

    /// Hands buffered lines to the operating system (no fsync), so a reader of the
    /// pipe, terminal or file sees them now.
    pub fn flush(&mut self) -> Result<(), WriteError> {
        match self {
            Output::Stdout(w) => w.flush().map_err(|e| WriteError::stdout(&e)),
            Output::File { path, writer, .. } => writer
                .flush()
                .map_err(|e| WriteError::Failed(format!("output file {}: {e}", path.display()))),
        }
    }

    /// Flushes buffered lines; for a file, also makes them durable (fsync) and returns
    /// the file's length.
    pub fn sync(&mut self) -> Result<Option<u64>, WriteError> {
        match self {
            Output::Stdout(w) => {
                w.flush().map_err(|e| WriteError::stdout(&e))?;
                Ok(None)
            }
            Output::File { path, writer, len } => {
                let at = |e: io::Error| {
                    WriteError::Failed(format!("output file {}: {e}", path.display()))
                };
                writer.flush().map_err(at)?;
                writer.get_ref().sync_data().map_err(at)?;
                Ok(Some(*len))
            }
        }
    }

    /// True when standard output is a pipe whose reader has gone (`| head` ended): the
    /// run can end without waiting for a record to write.
    pub fn reader_gone(&self) -> bool {
        if !matches!(self, Output::Stdout(_)) {
            return false;
        }
        let mut fd = libc::pollfd {
            fd: libc::STDOUT_FILENO,
            events: 0,
            revents: 0,
        };
        // SAFETY: one valid pollfd, zero timeout; poll only reads and writes `fd`.
        let n = unsafe { libc::poll(&mut fd, 1, 0) };
        n == 1 && fd.revents & libc::POLLERR != 0
    }
}

/// How [`Output::file`] starts a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileStart {
    /// Cut back to the length a checkpoint covers (a shorter file is refused: records
    /// the checkpoint counts as written are gone).
    Resume(u64),
    /// Empty. An existing non-empty file is refused unless `overwrite`.
    Fresh {
        /// Replace what the file holds.
        overwrite: bool,
    },
}

/// Fsyncs the directory holding `path`, making its entry (a new or renamed file)
/// durable.
pub fn sync_parent(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

/// Why a line could not be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteError {
    /// Standard output's reader has gone (a broken pipe): the run ends quietly.
    Closed,
    /// Anything else, located.
    Failed(String),
}

impl WriteError {
    fn stdout(e: &io::Error) -> Self {
        if e.kind() == io::ErrorKind::BrokenPipe {
            WriteError::Closed
        } else {
            WriteError::Failed(format!("stdout: {e}"))
        }
    }
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteError::Closed => f.write_str("stdout: the reader has gone (broken pipe)"),
            WriteError::Failed(e) => f.write_str(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_output_is_cut_to_the_checkpointed_length_and_refuses_a_short_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        std::fs::write(&path, b"one\ntwo\nthree-partial").unwrap();
        let mut out = Output::file(&path, FileStart::Resume(8)).unwrap();
        out.write(b"three\n").unwrap();
        assert_eq!(out.sync().unwrap(), Some(14));
        assert_eq!(std::fs::read(&path).unwrap(), b"one\ntwo\nthree\n");
        drop(out);
        let err = Output::file(&path, FileStart::Resume(100)).err().unwrap();
        assert!(err.contains("14 bytes, shorter than the 100"), "{err}");
        assert_eq!(
            std::fs::read(&path).unwrap().len(),
            14,
            "a refused file is left as it was"
        );
    }

    #[test]
    fn a_fresh_start_refuses_a_non_empty_file_unless_told_to_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let fresh = FileStart::Fresh { overwrite: false };
        // A new file, and an empty one, are fine.
        let mut out = Output::file(&path, fresh).unwrap();
        assert_eq!(out.sync().unwrap(), Some(0));
        drop(out);
        Output::file(&path, fresh).unwrap();
        std::fs::write(&path, b"precious\n").unwrap();
        let err = Output::file(&path, fresh).err().unwrap();
        assert!(err.contains("out.jsonl already holds 9 bytes"), "{err}");
        assert!(err.contains("--overwrite"), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), b"precious\n", "untouched");
        let mut out = Output::file(&path, FileStart::Fresh { overwrite: true }).unwrap();
        out.write(b"new\n").unwrap();
        assert_eq!(out.sync().unwrap(), Some(4));
        assert_eq!(std::fs::read(&path).unwrap(), b"new\n");
        // A directory that does not exist is an error naming the file.
        let err = Output::file(&dir.path().join("no/such.jsonl"), fresh)
            .err()
            .unwrap();
        assert!(err.contains("no/such.jsonl"), "{err}");
    }
}
