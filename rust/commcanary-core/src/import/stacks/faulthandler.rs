//! Thread blocks of `faulthandler` dumps and `py-spy dump` output, and the
//! two frame-line forms they (and tracebacks) use.
//!
//! A block starts at a thread header and ends at a blank line, at the next
//! header, or at a non-indented line that is not a frame. Indented lines that
//! are not frames (`  <no Python frame>`, `  ...`, py-spy locals) are
//! skipped. Both formats print the innermost frame first, as
//! [`ThreadStack::frames`] keeps them.

use std::borrow::Cow;

use super::{Frame, ThreadStack, is_continuation, is_indented};

/// Which format a block is in, so its frame lines are read the right way.
#[derive(Clone, Copy)]
enum Style {
    /// `  File "<path>", line <N> in <func>`
    Faulthandler,
    /// `    <func> (<path>:<line>)`
    PySpy,
}

/// Every thread block of `lines`, in order.
pub(super) fn thread_blocks(lines: &[Cow<'_, str>]) -> Vec<ThreadStack> {
    let mut threads: Vec<ThreadStack> = Vec::new();
    let mut open: Option<Style> = None;
    for line in lines {
        if let Some(thread) = faulthandler_header(line) {
            threads.push(thread);
            open = Some(Style::Faulthandler);
            continue;
        }
        if let Some(thread) = pyspy_header(line) {
            threads.push(thread);
            open = Some(Style::PySpy);
            continue;
        }
        let (Some(style), Some(thread)) = (open, threads.last_mut()) else {
            continue;
        };
        let frame = match style {
            Style::Faulthandler => file_frame(line),
            Style::PySpy => pyspy_frame(line),
        };
        match frame {
            Some(frame) => thread.frames.push(frame),
            None if is_continuation(line) => {}
            None => open = None,
        }
    }
    threads
}

/// `Thread 0x… (most recent call first):`, `Current thread 0x… (most
/// recent call first):` or `Stack (most recent call first):`.
fn faulthandler_header(line: &str) -> Option<ThreadStack> {
    let head = line.trim().strip_suffix("(most recent call first):")?;
    let head = head.trim_end();
    if head == "Stack" {
        return Some(thread("stack", None, true));
    }
    let (current, rest) = match head.strip_prefix("Current thread ") {
        Some(rest) => (true, rest),
        None => (false, head.strip_prefix("Thread ")?),
    };
    let rest = rest.trim();
    let (id, name) = rest.split_once(' ').unwrap_or((rest, ""));
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric()) {
        return None;
    }
    Some(thread(id, unquote(name), current))
}

/// `Thread 12345 (idle): "MainThread"` (py-spy; the status may be
/// `active`, `active+gil`, …; the name is optional).
fn pyspy_header(line: &str) -> Option<ThreadStack> {
    let rest = line.trim_end().strip_prefix("Thread ")?;
    let (id, rest) = rest.split_once(' ')?;
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric()) {
        return None;
    }
    let (status, after) = rest.strip_prefix('(')?.split_once(')')?;
    let status_ok = !status.is_empty()
        && status
            .chars()
            .all(|c| c.is_ascii_lowercase() || c == '+' || c == ' ');
    if !status_ok {
        return None;
    }
    let name = match after {
        "" | ":" => None,
        _ => Some(unquote(after.strip_prefix(':')?)?),
    };
    Some(thread(id, name, false))
}

/// A thread with no frames yet.
fn thread(id: &str, name: Option<String>, current: bool) -> ThreadStack {
    ThreadStack {
        id: id.to_owned(),
        name,
        current,
        frames: Vec::new(),
    }
}

/// `text` trimmed and without one pair of surrounding quotes or brackets;
/// `None` when that leaves nothing.
fn unquote(text: &str) -> Option<String> {
    let text = text.trim();
    let inner = [('"', '"'), ('\'', '\''), ('[', ']'), ('(', ')')]
        .iter()
        .find_map(|&(open, close)| text.strip_prefix(open)?.strip_suffix(close))
        .unwrap_or(text)
        .trim();
    (!inner.is_empty()).then(|| inner.to_owned())
}

/// A `File "<path>", line <N> in <func>` line (faulthandler) or
/// `File "<path>", line <N>, in <func>` (traceback); `line ???` reads as 0.
pub(super) fn file_frame(line: &str) -> Option<Frame> {
    let rest = line.trim_start().strip_prefix("File \"")?;
    let (file, rest) = rest.rsplit_once("\", line ")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let (number, rest) = if digits == 0 {
        (0, rest.strip_prefix("???")?)
    } else {
        (rest[..digits].parse().unwrap_or(0), &rest[digits..])
    };
    let func = rest
        .strip_prefix(", in ")
        .or_else(|| rest.strip_prefix(" in "))?;
    Some(Frame {
        file: file.to_owned(),
        line: number,
        func: func.trim_end().to_owned(),
    })
}

/// A py-spy frame line, `    <func> (<path>:<line>)`; native frames
/// without a line number are not frames here.
fn pyspy_frame(line: &str) -> Option<Frame> {
    if !is_indented(line) {
        return None;
    }
    let body = line.trim().strip_suffix(')')?;
    let (func, location) = body.split_once(" (")?;
    let (file, number) = location.rsplit_once(':')?;
    if func.is_empty() || file.is_empty() || number.is_empty() {
        return None;
    }
    if !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(Frame {
        file: file.to_owned(),
        line: number.parse().unwrap_or(0),
        func: func.to_owned(),
    })
}
