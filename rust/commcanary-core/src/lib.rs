//! # commcanary-core
//!
//! The pure-Rust engines behind commcanary. Nothing here knows about Python.
//!
//! * [`json`]: a strict, bounded JSON reader and the canonical JSON writer
//!   every hash and byte count is defined over.
//! * [`pyfloat`]: CPython-exact `repr(float)`, `round(x, n)`, `sum` and `fsum`,
//!   so printed numbers match what a Python verifier recomputes.
//! * [`trace`]: `commcanary.trace.v1` parsed from bytes into columnar storage.
//! * [`compile`]: the trace-to-canary compiler (ordering, grouping, the timing
//!   compression ladder, bounded intervals with SHA-256 segment commitments,
//!   sequence motifs, fidelity accounting, canonical canary bytes).
//! * [`behavior`]: behavioural fidelity of a canary against its source under
//!   several replay configurations, and the search for the smallest canary
//!   that keeps it.
//!
//! All data crosses module boundaries as plain Rust values; errors are one
//! [`Error`] type with a kind and a path-free one-line message.

pub mod behavior;
pub mod canary;
pub mod compile;
pub mod document;
pub mod error;
pub mod fault;
pub mod input;
pub mod json;
pub mod output;
pub mod pyfloat;
pub mod report;
pub mod sim;
pub mod trace;

pub use error::{Error, ErrorKind, Result};
