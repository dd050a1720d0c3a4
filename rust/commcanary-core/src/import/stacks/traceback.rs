//! Python tracebacks and exception lines.
//!
//! A traceback starts at `Traceback (most recent call last):`, takes its
//! `File "…", line N, in f` lines (outermost first, reversed here to
//! innermost first), skips indented source and caret lines, and ends at the
//! first other line: its exception line `Type: message` when that line is
//! one. A chained exception is one traceback after another; which of them is
//! the main exception is the reader's choice ([`super::parse_exception`]
//! keeps the last).
//!
//! Outside tracebacks only a line that looks like an exception on its own
//! counts: a dotted type whose last part ends like an exception type
//! (`…Error`, `…Exception`, `KeyboardInterrupt`, …), followed by `: `.

use std::borrow::Cow;

use super::faulthandler::file_frame;
use super::{Frame, is_continuation, is_indented};

/// An exception line: `Type: message` (or just `Type` after a traceback).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ExceptionLine {
    /// The type, without a `builtins.` prefix.
    pub type_name: String,
    /// The message: the rest of the line after `: ` (may be empty).
    pub message: String,
}

/// One traceback and the exception line that ends it, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Traceback {
    /// The frames, innermost first.
    pub frames: Vec<Frame>,
    /// The exception line that ended the traceback.
    pub exception: Option<ExceptionLine>,
}

/// What a text holds, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Item {
    /// A traceback.
    Traceback(Traceback),
    /// An exception line outside any traceback.
    Standalone(ExceptionLine),
}

/// The tracebacks and standalone exception lines of `lines`, in order.
pub(super) fn scan(lines: &[Cow<'_, str>]) -> Vec<Item> {
    let mut items = Vec::new();
    let mut open: Option<Vec<Frame>> = None;
    for line in lines {
        if is_traceback_header(line) {
            if let Some(frames) = open.take() {
                items.push(close(frames, None));
            }
            open = Some(Vec::new());
            continue;
        }
        if let Some(frames) = open.as_mut() {
            if let Some(frame) = file_frame(line) {
                frames.push(frame);
            } else if !is_continuation(line) {
                let frames = open.take().unwrap_or_default();
                items.push(close(frames, exception_line(line, false)));
            }
            continue;
        }
        if let Some(exception) = exception_line(line, true) {
            items.push(Item::Standalone(exception));
        }
    }
    if let Some(frames) = open {
        items.push(close(frames, None));
    }
    items
}

/// A finished traceback, its frames turned innermost first.
fn close(mut frames: Vec<Frame>, exception: Option<ExceptionLine>) -> Item {
    frames.reverse();
    Item::Traceback(Traceback { frames, exception })
}

/// `Traceback (most recent call last):`.
fn is_traceback_header(line: &str) -> bool {
    line.trim() == "Traceback (most recent call last):"
}

/// `line` read as an exception line. `strict` (outside a traceback): the
/// type must end like an exception type and be followed by `:`.
pub(super) fn exception_line(line: &str, strict: bool) -> Option<ExceptionLine> {
    if is_indented(line) {
        return None;
    }
    let line = line.trim_end();
    let (type_name, message) = match line.split_once(':') {
        Some((t, m)) => (t, m.strip_prefix(' ').unwrap_or(m)),
        None if !strict => (line, ""),
        None => return None,
    };
    if !is_dotted_identifier(type_name) {
        return None;
    }
    let last = type_name.rsplit('.').next().unwrap_or(type_name);
    if strict && !looks_like_exception_type(last) {
        return None;
    }
    let type_name = type_name.strip_prefix("builtins.").unwrap_or(type_name);
    Some(ExceptionLine {
        type_name: type_name.to_owned(),
        message: message.to_owned(),
    })
}

/// `a.b.C`: identifiers (ASCII letters, digits, `_`; not starting with a
/// digit) joined by dots.
fn is_dotted_identifier(text: &str) -> bool {
    !text.is_empty()
        && text.split('.').all(|part| {
            part.bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
                && part.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        })
}

/// Whether a type's last part is named like an exception type.
fn looks_like_exception_type(name: &str) -> bool {
    const ENDINGS: [&str; 7] = [
        "Error",
        "Exception",
        "Exit",
        "Interrupt",
        "Timeout",
        "Warning",
        "Failure",
    ];
    ENDINGS.iter().any(|end| name.ends_with(end))
}
