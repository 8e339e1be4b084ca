//! Stdout of the CLI. Every report goes through [`print`] (or [`print_json`]), which writes,
//! flushes and returns a [`StdoutError`] where `println!` would panic: a reader that went away
//! (`lumen compile ... | head -1`) or a full disk (`> /dev/full`) is an outcome, not a bug.
//!
//! `main` turns the error into what a Unix filter does: a broken pipe ends the process quietly
//! with [`BROKEN_PIPE_STATUS`] (the status a shell reports for a process killed by SIGPIPE,
//! which Rust programs ignore, so the write fails with EPIPE instead), and any other failure is
//! one `error: cannot write to stdout: <os error>` line with status 1.

use std::io::{self, Write as _};

/// The exit status of a command whose stdout reader went away: 128 + SIGPIPE (13), what a
/// shell reports for a Unix tool the signal killed.
pub const BROKEN_PIPE_STATUS: i32 = 128 + 13;

/// A write to stdout (or its flush) failed: the reader closed the pipe, or the OS refused the
/// bytes (ENOSPC on `/dev/full`, EIO, ...).
#[derive(Debug, thiserror::Error)]
#[error("cannot write to stdout: {0}")]
pub struct StdoutError(#[from] io::Error);

impl StdoutError {
    /// Whether the reader went away (EPIPE): then the command ends quietly with
    /// [`BROKEN_PIPE_STATUS`].
    pub fn is_broken_pipe(&self) -> bool {
        self.0.kind() == io::ErrorKind::BrokenPipe
    }
}

/// Writes `text` to stdout as is and flushes it.
///
/// # Errors
/// [`StdoutError`] when the write or the flush fails.
pub fn print(text: &str) -> Result<(), StdoutError> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// Writes `value` as pretty JSON and a newline: the one object a `--json` command prints.
///
/// # Errors
/// A value serde cannot serialize (never for a `serde_json::Value`), or [`StdoutError`].
pub fn print_json(value: &serde_json::Value) -> anyhow::Result<()> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    Ok(print(&text)?)
}
