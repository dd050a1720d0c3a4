//! # commcanary-core
//!
//! The pure-Rust engines behind commcanary. Nothing here knows about Python.
//! Modules in layers, each using only those below it (no cycles):
//!
//! * base: [`error`] (the one error type), [`fault`] (a test-only panic
//!   hook), [`pyfloat`] (CPython-exact `repr`, `round`, `sum`, `fsum`),
//!   [`json`] (strict bounded reader, canonical writer), [`limits`] (the
//!   one resource policy), [`input`] (the bounded file reader), [`output`] (atomic writes), [`document`] (format
//!   identifiers; wrong-kind detection);
//! * [`trace`]: `commcanary.trace.v1` read from bytes into columns through
//!   [`trace::TraceBuilder`], which importers feed too;
//! * [`canary`]: the program model, its canonical reader and writer, the
//!   occurrence expansion and the execution commitments;
//! * [`compile`]: the trace-to-canary compiler (options, ordering, the timing
//!   ladder, bounded intervals, motifs, fidelity, bytes);
//! * [`sim`]: the replay model `deterministic-scheduler-v4`;
//! * [`report`]: reports — sections, the reader, recomputation, one replay run;
//! * [`import`]: other tools' traces (PyTorch Kineto) fed into the trace builder;
//! * [`export`]: a canary in other tools' formats (PARAM comms replay);
//! * [`analysis`]: diagnoses of imported evidence (who hung, and where);
//! * [`behavior`]: behavioural fidelity under several configurations, and the
//!   search for the smallest canary that keeps it.
//! * [`gate`]: verdicts over repeated runs (bootstrap intervals, the
//!   interval rule, noise calibration; uses only the base layer).
//! * [`signing`]: Ed25519 key pairs, detached artifact signatures and trusted
//!   key sets (uses only the base layer).
//!
//! All data crosses module boundaries as plain Rust values; errors are one
//! [`Error`] type with a kind and a path-free one-line message. Parallel work
//! uses rayon with ordered joins and indexed collection, so output never
//! depends on scheduling.

#![warn(missing_docs)]

pub mod analysis;
pub mod behavior;
pub(crate) mod byte_form;
pub mod canary;
pub mod compile;
pub mod document;
pub mod error;
pub mod export;
pub mod fault;
pub mod gate;
pub mod import;
pub mod input;
pub mod inspect;
pub mod json;
pub mod limits;
pub mod output;
pub mod pyfloat;
pub mod report;
pub mod research;
pub mod signing;
pub mod sim;
#[cfg(test)]
mod test_data;
pub mod trace;

pub use error::{Error, ErrorKind, Result};
