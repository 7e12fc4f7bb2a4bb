//! stdout and stderr whose reader may have gone (`mck … | head`, `2>&1 | true`): a
//! closed pipe ends what a command writes there quietly, never with a panic.
//! `print!` and `eprintln!` panic when a write fails; the commands write through
//! [`print`], [`Stdout`] and [`say!`] instead.

use std::io::{self, Write};

/// stdout, where everything written after its reader went away (a broken pipe) is
/// dropped as if written; other write errors are returned.
pub struct Stdout {
    inner: io::Stdout,
    closed: bool,
}

impl Default for Stdout {
    fn default() -> Self {
        Self::new()
    }
}

impl Stdout {
    pub fn new() -> Self {
        Stdout {
            inner: io::stdout(),
            closed: false,
        }
    }

    fn absorb(&mut self, r: io::Result<()>) -> io::Result<()> {
        match r {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(())
            }
            r => r,
        }
    }
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if !self.closed {
            let r = self.inner.write_all(buf);
            self.absorb(r)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.closed {
            return Ok(());
        }
        let r = self.inner.flush();
        self.absorb(r)
    }
}

/// Writes `text` to stdout: `Ok` also when stdout's reader has gone, a one-line
/// error for any other failure.
pub fn print(text: &str) -> Result<(), String> {
    let mut out = Stdout::new();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| format!("stdout: {e}"))
}

/// `eprintln!` that ignores a failed write: a closed stderr is no reason to panic.
macro_rules! say {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let _ = ::std::writeln!(::std::io::stderr(), $($arg)*);
    }};
}
pub(crate) use say;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_pipe_is_absorbed_and_other_errors_are_not() {
        let mut out = Stdout::new();
        let gone = io::Error::new(io::ErrorKind::BrokenPipe, "gone");
        assert!(out.absorb(Err(gone)).is_ok());
        assert!(out.closed);
        assert_eq!(out.write(b"dropped").unwrap(), 7);
        let full = io::Error::new(io::ErrorKind::StorageFull, "full");
        assert!(out.absorb(Err(full)).is_err());
    }
}
