//! Standard output that tells a reader going away apart from a failure to write.
//!
//! `print!` panics when standard output is a pipe its reader has closed, as in
//! `kubectl hns tree -A | head`. kubectl just stops there: Go's runtime ends it with SIGPIPE,
//! which a shell reports as status 141. The plugin keeps SIGPIPE ignored, as Rust sets it,
//! because the signal would also end it on a write to a closed socket; so [`out!`] and
//! [`outln!`] return [`Error::Closed`] instead, and `main` ends quietly with that same status.
//!
//! [`out!`]: crate::out
//! [`outln!`]: crate::outln

use std::fmt;
use std::io::{self, Write};

/// The status a shell reports for a program ended by SIGPIPE (128 + 13), kubectl's when its
/// reader goes away: it is not success, since not everything was said.
pub const EXIT_CLOSED: u8 = 141;

/// Errors writing standard output.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The reader closed its end of the pipe: nobody is left to read the rest.
    #[error("standard output was closed by its reader")]
    Closed,
    /// Any other failure, e.g. a full disk behind a redirection.
    #[error("writing standard output: {0}")]
    Io(io::Error),
}

/// Writes `args` to standard output; the work behind [`out!`](crate::out).
pub fn write_fmt(args: fmt::Arguments<'_>) -> Result<(), Error> {
    io::stdout().lock().write_fmt(args).map_err(|e| match e.kind() {
        io::ErrorKind::BrokenPipe => Error::Closed,
        _ => Error::Io(e),
    })
}

/// Whether `error` (or one of its causes) is standard output closed by its reader.
pub fn closed(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| matches!(cause.downcast_ref(), Some(Error::Closed)))
}

/// `print!` that returns a [`Result`] instead of panicking.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::stdout::write_fmt(format_args!($($arg)*))
    };
}

/// `println!` that returns a [`Result`] instead of panicking.
#[macro_export]
macro_rules! outln {
    () => {
        $crate::stdout::write_fmt(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::stdout::write_fmt(format_args!("{}\n", format_args!($($arg)*)))
    };
}
