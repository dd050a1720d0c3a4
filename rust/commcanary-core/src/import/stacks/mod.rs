//! The text evidence of a hung distributed PyTorch job: Python stack dumps
//! and exception texts, parsed for a hang diagnosis.
//!
//! * [`parse_stacks`] reads thread stacks from `faulthandler` dumps
//!   (`Thread 0x… (most recent call first):`, `Current thread …`,
//!   `Stack …`), `py-spy dump` output (`Thread 123 (idle): "MainThread"`)
//!   and, when neither is present, the last Python traceback
//!   (`Traceback (most recent call last):`).
//! * [`in_flight_calls`] names the `torch.distributed` call each thread is
//!   blocked in, the public API it came through, its canonical collective
//!   and the user's frame that made it.
//! * [`parse_exception`] reads the main (last) exception of a text, its
//!   traceback and, when the message says so, the timeout behind it (gloo,
//!   NCCL watchdog, or a generic one) ([`Timeout`]).
//! * [`rank_from_file_name`] finds a rank in an evidence file's name.
//!
//! Invariants:
//! * input is untrusted bytes: decoded lossily (invalid UTF-8 becomes
//!   U+FFFD), split into lines on `\n` (a trailing `\r` dropped); at most
//!   [`MAX_LINES`] lines are considered and a line over [`MAX_LINE_BYTES`]
//!   bytes is ignored, so the work is linear in the input and nothing here
//!   panics on any input;
//! * [`ThreadStack::frames`] and [`ExceptionText::frames`] are innermost
//!   first, whatever order the source format prints them in;
//! * a line prefix written by `torchrun` (`[rank3]:`, `[default3]:`) is
//!   removed before a line is read, so prefixed logs parse like plain ones;
//! * parsing is purely textual and deterministic: the same bytes give the
//!   same values.

mod exception;
mod faulthandler;
mod inflight;
pub mod launcher;
mod rank;
mod traceback;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_inline;

use std::borrow::Cow;

pub use exception::{ExceptionText, Timeout, parse_exception};
pub use inflight::{InFlightCall, in_flight_calls, op_of_api};
pub use launcher::{ProcessExit, process_exits, split_by_rank};
pub use rank::rank_from_file_name;

/// The most lines of an input that are considered; the rest are ignored.
pub const MAX_LINES: usize = 1_000_000;

/// The longest line, in bytes, that is read; longer lines are ignored.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// One Python frame.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Frame {
    /// The source file as printed (`/opt/venv/.../distributed_c10d.py`,
    /// `<string>`).
    pub file: String,
    /// The line number; 0 when the dump does not know it (`line ???`).
    pub line: u32,
    /// The function name (`all_reduce`, `<lambda>`, `<module>`).
    pub func: String,
}

/// The Python stack of one thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadStack {
    /// The thread's id as printed (`0x00007f95a2dd2b80`, `12345`), `stack`
    /// for a single-thread `faulthandler` dump, `traceback` for a stack
    /// taken from a traceback.
    pub id: String,
    /// The thread's name when the dump gives one (py-spy: `MainThread`).
    pub name: Option<String>,
    /// Whether the dump marks this thread as the one that wrote it
    /// (`Current thread …`, and the single-thread `Stack …` dump).
    pub current: bool,
    /// The frames, innermost first, always.
    pub frames: Vec<Frame>,
}

/// The thread stacks found in one text, in the order they appear.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackDump {
    /// The threads; at least one of them has a frame.
    pub threads: Vec<ThreadStack>,
}

/// The thread stacks of a `faulthandler` or `py-spy dump` text; when the
/// text has neither, the stack of its last Python traceback (one thread with
/// id `traceback`).
///
/// `None` when the text holds no recognisable stack (no thread with at
/// least one frame).
#[must_use]
pub fn parse_stacks(bytes: &[u8]) -> Option<StackDump> {
    let lines = text_lines(bytes);
    let mut threads = faulthandler::thread_blocks(&lines);
    if !threads.iter().any(|t| !t.frames.is_empty()) {
        let last = traceback::scan(&lines)
            .into_iter()
            .filter_map(|item| match item {
                traceback::Item::Traceback(t) if !t.frames.is_empty() => Some(t),
                _ => None,
            })
            .next_back();
        threads = last
            .map(|t| ThreadStack {
                id: "traceback".to_owned(),
                name: None,
                current: false,
                frames: t.frames,
            })
            .into_iter()
            .collect();
    }
    threads
        .iter()
        .any(|t| !t.frames.is_empty())
        .then_some(StackDump { threads })
}

/// The lines of `bytes` as they are read: split on `\n`, a trailing `\r`
/// dropped, bounded by [`MAX_LINES`] and [`MAX_LINE_BYTES`], decoded lossily,
/// a `torchrun` prefix removed.
pub(crate) fn text_lines(bytes: &[u8]) -> Vec<Cow<'_, str>> {
    bytes
        .split(|&b| b == b'\n')
        .take(MAX_LINES)
        .filter(|line| line.len() <= MAX_LINE_BYTES)
        .map(|line| {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let line = strip_launcher_prefix(line);
            String::from_utf8_lossy(line)
        })
        .collect()
}

/// `line` without a leading `[rank<N>]:` or `[default<N>]:` (and one space
/// after it), the prefixes `torchrun` writes on each worker's output.
fn strip_launcher_prefix(line: &[u8]) -> &[u8] {
    launcher::tagged(line).map_or(line, |(_, body)| body)
}

/// Whether `line` starts with whitespace.
fn is_indented(line: &str) -> bool {
    line.starts_with(char::is_whitespace)
}

/// Whether `line` is indented and not blank: a frame's source or caret line
/// in a traceback, `<no Python frame>` or a py-spy local in a thread block.
fn is_continuation(line: &str) -> bool {
    is_indented(line) && !line.trim().is_empty()
}
