//! The reading threads: each takes the next file from the queue and sends its lines'
//! outcomes, a chunk at a time, with the position after each.

use super::timestamp::timestamp_of;
use super::*;

/// Lines per hand-over from a reading thread to the consumer.
pub(super) const CHUNK: usize = 256;

/// One file to read, from a position.
pub(super) struct Task {
    pub(super) name: Arc<str>,
    pub(super) path: PathBuf,
    pub(super) start: FilePosition,
}

/// What a reading thread sends: a line's outcome with the position after it.
pub(super) struct Item {
    pub(super) file: Arc<str>,
    pub(super) line: u64,
    pub(super) end: u64,
    pub(super) kind: Kind,
}

pub(super) enum Kind {
    Record { timestamp: i64, value: Bytes },
    Blank,
    Malformed(String),
    Eof,
    Failed(String),
}

/// A reading thread: takes files off the queue until it is empty or the consumer is
/// gone.
pub(super) fn read_files(
    queue: Arc<Mutex<Vec<Task>>>,
    tx: mpsc::Sender<Vec<Item>>,
    field: Arc<str>,
) {
    loop {
        let task = {
            let mut q = queue.lock().unwrap_or_else(|e| e.into_inner());
            if q.is_empty() {
                return;
            }
            q.remove(0)
        };
        let name = task.name.clone();
        let failed = |message: String| Item {
            file: name.clone(),
            line: 0,
            end: 0,
            kind: Kind::Failed(message),
        };
        match read_file(&task, &tx, &field) {
            Ok(true) => {}
            Ok(false) => return, // the consumer is gone
            Err(e) => {
                let _ = tx.blocking_send(vec![failed(e)]);
                return;
            }
        }
    }
}

/// Opens a file with the decoder its name asks for, positioned at `offset`
/// (decompressed bytes).
pub(super) fn open_at(path: &Path, offset: u64) -> Result<Box<dyn BufRead + Send>, String> {
    let mut file = File::open(path).map_err(|e| e.to_string())?;
    let name = path.to_string_lossy();
    let mut reader: Box<dyn BufRead + Send> = if name.ends_with(".gz") {
        Box::new(BufReader::with_capacity(
            1 << 16,
            flate2::read::MultiGzDecoder::new(BufReader::new(file)),
        ))
    } else if name.ends_with(".zst") || name.ends_with(".zstd") {
        let decoder = zstd::stream::read::Decoder::new(file).map_err(|e| e.to_string())?;
        Box::new(BufReader::with_capacity(1 << 16, decoder))
    } else {
        file.seek(SeekFrom::Start(offset))
            .map_err(|e| e.to_string())?;
        return Ok(Box::new(BufReader::with_capacity(1 << 16, file)));
    };
    let skipped = std::io::copy(&mut (&mut reader).take(offset), &mut std::io::sink())
        .map_err(|e| e.to_string())?;
    if skipped < offset {
        return Err(format!(
            "the checkpoint is at byte {offset} of the decompressed file, which has only {skipped}"
        ));
    }
    Ok(reader)
}

/// Reads one file from its start position; false when the consumer is gone.
pub(super) fn read_file(
    task: &Task,
    tx: &mpsc::Sender<Vec<Item>>,
    field: &str,
) -> Result<bool, String> {
    let mut reader = open_at(&task.path, task.start.offset)?;
    // Lines go to the consumer in chunks: one channel hand-over per line would cost
    // more than reading and checking the line.
    let mut chunk = Vec::with_capacity(CHUNK);
    let mut offset = task.start.offset;
    let mut line_no = task.start.lines;
    let mut buf = Vec::with_capacity(1024);
    loop {
        buf.clear();
        let n = match reader.read_until(b'\n', &mut buf) {
            Ok(n) => n,
            Err(e) => {
                // Lines read before the failure still count.
                if !chunk.is_empty() && tx.blocking_send(chunk).is_err() {
                    return Ok(false);
                }
                return Err(format!("after line {line_no}: {e}"));
            }
        };
        if n == 0 {
            chunk.push(Item {
                file: task.name.clone(),
                line: line_no,
                end: offset,
                kind: Kind::Eof,
            });
            return Ok(tx.blocking_send(chunk).is_ok());
        }
        offset += n as u64;
        line_no += 1;
        let mut line: &[u8] = &buf;
        while let Some((last, rest)) = line.split_last() {
            if *last == b'\n' || *last == b'\r' {
                line = rest;
            } else {
                break;
            }
        }
        let kind = if line.iter().all(u8::is_ascii_whitespace) {
            Kind::Blank
        } else {
            match timestamp_of(line, field) {
                Ok(timestamp) => Kind::Record {
                    timestamp,
                    value: Bytes::copy_from_slice(line),
                },
                Err(message) => Kind::Malformed(message),
            }
        };
        let item = Item {
            file: task.name.clone(),
            line: line_no,
            end: offset,
            kind,
        };
        chunk.push(item);
        if chunk.len() >= CHUNK {
            let full = std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK));
            if tx.blocking_send(full).is_err() {
                return Ok(false);
            }
        }
    }
}
