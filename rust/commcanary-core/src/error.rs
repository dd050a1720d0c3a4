//! The one error type of the core crate.
//!
//! Every failure the core can report is a value of [`Error`]: a [`ErrorKind`]
//! that tells callers how to classify it (the CLI maps an out-of-range option
//! to exit status 2, a panicked worker to 70, everything else to 3) and a
//! one-line message. Messages never contain a file path; the
//! caller that knows the path adds it with [`Error::with_path`], so the same
//! message works for files, bytes in memory and tests.

use std::fmt;

/// What went wrong, coarsely.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The input is not JSON (syntax, encoding, number range).
    Json,
    /// The input exceeds a resource limit (size, depth, item count, ...).
    Limit,
    /// The input is JSON but violates the artifact's schema or invariants.
    Invalid,
    /// Compilation ran but cannot meet a requested fidelity guarantee.
    Budget,
    /// Reading or decompressing the input failed.
    Io,
    /// Writing an artifact failed (missing directory, symlink, I/O).
    Output,
    /// A caller-supplied option is out of range; [`Error::option`] names it.
    Option,
    /// The input is a commcanary document of another kind (a canary where a
    /// trace was expected, ...).
    WrongDocument,
    /// A bug: a worker thread panicked. Never caused by input.
    Internal,
}

impl ErrorKind {
    /// Every kind, in declaration order (the order of [`ErrorKind::code`]).
    pub const ALL: [ErrorKind; 9] = [
        ErrorKind::Json,
        ErrorKind::Limit,
        ErrorKind::Invalid,
        ErrorKind::Budget,
        ErrorKind::Io,
        ErrorKind::Output,
        ErrorKind::Option,
        ErrorKind::WrongDocument,
        ErrorKind::Internal,
    ];

    /// A small number naming the kind, for an error carried between
    /// processes (a distributed task's result).
    #[must_use]
    pub fn code(self) -> u8 {
        Self::ALL.iter().position(|k| *k == self).unwrap_or(0) as u8
    }

    /// The kind [`ErrorKind::code`] names.
    #[must_use]
    pub fn from_code(code: u8) -> Option<ErrorKind> {
        Self::ALL.get(usize::from(code)).copied()
    }
}

/// A core error: a kind plus a one-line, path-free message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    /// For [`ErrorKind::Option`]: the option's name as the API spells it.
    option: Option<&'static str>,
}

/// Result alias used across the crate.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Creates an error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            option: None,
        }
    }

    /// An out-of-range option: `name` as the API spells it
    /// (`timing_sample_limit`) and the `rule` it breaks (`must be at least 2`).
    /// The message is `"{name} {rule}"`; front ends may rename the option
    /// (a command line names its flag) using [`Error::option_name`] and
    /// [`Error::option_rule`].
    pub fn option(name: &'static str, rule: impl Into<String>) -> Self {
        let rule = rule.into();
        Self {
            kind: ErrorKind::Option,
            message: format!("{name} {rule}"),
            option: Some(name),
        }
    }

    /// The option an [`ErrorKind::Option`] error is about.
    #[must_use]
    pub fn option_name(&self) -> Option<&'static str> {
        self.option
    }

    /// The rule an [`ErrorKind::Option`] error states (its message without
    /// the option's name).
    #[must_use]
    pub fn option_rule(&self) -> &str {
        match self.option {
            Some(name) => self.message[name.len()..].trim_start(),
            None => &self.message,
        }
    }

    /// A bug report: a worker panicked with `detail`.
    pub fn internal(detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, detail)
    }

    /// Shorthand for an [`ErrorKind::Invalid`] error.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, message)
    }

    /// Shorthand for an [`ErrorKind::Limit`] error.
    pub fn limit(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Limit, message)
    }

    /// The error's kind.
    #[must_use]
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The path-free message.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The message as a user should read it for input `path`:
    /// `"{path} is not valid JSON: ..."` for JSON and limit errors,
    /// `"{path}: ..."` for schema errors, the bare message for budget errors.
    #[must_use]
    pub fn with_path(&self, path: &str) -> String {
        match self.kind {
            ErrorKind::Json | ErrorKind::Limit | ErrorKind::Io | ErrorKind::WrongDocument => {
                format!("{path} {}", self.message)
            }
            ErrorKind::Invalid => format!("{path}: {}", self.message),
            ErrorKind::Budget | ErrorKind::Output | ErrorKind::Option | ErrorKind::Internal => {
                self.message.clone()
            }
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}
